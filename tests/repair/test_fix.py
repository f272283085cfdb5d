"""Issue 5: guarded ``uninstall``, ``fix``, and rollback / ``restore`` — with real pip.

Every state is made by real pip from wheels built in the test; reinstalls come from
``--no-index --find-links <those wheels>``. "Byte-identical" compares the kind, mode, mtime and
sha256 of every file under the target (``support.repairs.tree_state``).
"""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from support.repairs import (
    Cli,
    check_errors,
    diff_states,
    fault_injector,
    journals,
    process_gone,
    tree_state,
    wait_for_installer,
)
from support.seed import LIB_REL, SeedWheels, import_version
from support.venvs import (
    WITH_UV,
    Venv,
    VenvFactory,
    clone_venv,
    diff_snapshots,
    installed_names,
    pip_install,
    pip_uninstall,
    snapshot,
    strace_path,
    uv_install,
)
from support.wheels import WheelFactory, offline, record_line

Doc = dict[str, Any]


class States:
    """The seed's states, each made once by real pip, handed out as fresh clones."""

    def __init__(self, factory: VenvFactory, seed: SeedWheels, root: Path) -> None:
        self.root = root
        self.made: dict[str, Venv] = {}
        clean = factory("clean")
        pip_install(clean, seed.cudnn_a, seed.torchlike)
        overwritten = factory("seed")  # cudnn-b installed over cudnn-a
        pip_install(overwritten, seed.cudnn_a, seed.torchlike)
        pip_install(overwritten, seed.cudnn_b)
        phantom = factory("phantom")  # then uninstalled: cudnn-a is a phantom
        pip_install(phantom, seed.cudnn_a, seed.torchlike)
        pip_install(phantom, seed.cudnn_b)
        pip_uninstall(phantom, "cudnn-b")
        self.templates = {"clean": clean, "seed": overwritten, "phantom": phantom}
        self.count = 0

    def __call__(self, name: str) -> Venv:
        self.count += 1
        return clone_venv(self.templates[name], self.root / f"{self.count:02d}-{name}")


@pytest.fixture(scope="module")
def states(
    module_venv: VenvFactory, seed: SeedWheels, tmp_path_factory: pytest.TempPathFactory
) -> States:
    return States(module_venv, seed, tmp_path_factory.mktemp("states"))


# =============================================================================== uninstall


def test_uninstall_refuses_when_it_breaks(states: States, seed: SeedWheels, cli: Cli) -> None:
    venv = states("seed")
    before = snapshot(venv.path)
    run = cli("uninstall", "cudnn-b", venv.path, *offline(seed))
    assert run.rc == 1, run.describe()
    # missing-files (cudnn-a), unresolved-library (torchlike), requirement-phantom
    # (torchlike requires cudnn-a, whose only library goes with cudnn-b's files)
    assert "refused: the uninstall breaks 3 thing(s) (--repair does it safely)" in run.stderr
    assert "Verdict: breaks 3 things" in run.stdout
    assert diff_snapshots(before, snapshot(venv.path)) == []
    assert not cli.backups.exists(), "a refused uninstall takes no backup"


def test_uninstall_repair_keeps_cudnn_a_and_the_extension_importable(
    states: States, seed: SeedWheels, cli: Cli
) -> None:
    venv = states("seed")
    run = cli("uninstall", "cudnn-b", venv.path, "--repair", *offline(seed), "--json")
    assert run.rc == 0, run.describe()
    doc = run.json()
    assert doc["run"]["ok"] is True and doc["run"]["after"]["errors"] == 0
    assert [r["argv"][3] for r in doc["run"]["results"]] == ["uninstall", "install"]
    names = installed_names(venv.site_packages)
    assert "cudnn_b" not in names and "cudnn_a" in names
    assert check_errors(cli, venv.path) == []
    assert (venv.site_packages / LIB_REL).is_file()
    assert import_version(venv.python) == (0, "91002"), "cudnn-a's own library is loaded"
    (journal,) = journals(cli)
    assert journal["state"] == "done"
    assert [s["state"] for s in journal["steps"]] == ["done", "done"]


def test_uninstall_of_a_sole_owner_just_runs(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli
) -> None:
    venv = new_venv("sole")
    pip_install(venv, make_wheel("ldt-alone", "1.0", {"alone/__init__.py": b"A = 1\n"}))
    run = cli("uninstall", "ldt-alone", venv.path)
    assert run.rc == 0, run.describe()
    assert not (venv.site_packages / "alone").exists()


def test_uninstall_force_breaks_on_purpose(states: States, cli: Cli) -> None:
    venv = states("seed")
    run = cli("uninstall", "cudnn-b", venv.path, "--force")
    assert run.rc == 1, run.describe()  # done, and it broke what the plan said
    assert {f["code"] for f in check_errors(cli, venv.path)} == PHANTOM_ERRORS


# =============================================================================== fix

# cudnn-a left without its library: its files, torchlike's import, and torchlike's requirement
# on cudnn-a, met in metadata only; one reinstall of cudnn-a repairs all three.
PHANTOM_ERRORS = {"missing-files", "unresolved-library", "requirement-phantom"}


def test_fix_yes_on_the_phantom_restores_a_clean_check_and_the_import(
    states: States, seed: SeedWheels, cli: Cli
) -> None:
    venv = states("phantom")
    assert import_version(venv.python)[0] != 0
    assert {f["code"] for f in check_errors(cli, venv.path)} == PHANTOM_ERRORS
    run = cli("fix", venv.path, "--yes", *offline(seed), "--json")
    assert run.rc == 0, run.describe()
    fix = run.json()["fix"]
    expected = ["install", "--force-reinstall", "--no-deps", "cudnn-a==9.1.0"]
    expected += ["--find-links", str(seed.find_links), "--no-index"]
    assert [s["argv"][3:] for s in fix["steps"]] == [expected]
    assert fix["predicted"] == [], "the plan predicts a clean result"
    assert fix["before"]["errors"] == 3 and fix["after"]["errors"] == 0
    assert {f["code"] for f in fix["resolved"]} == PHANTOM_ERRORS
    check = cli("check", venv.path)
    assert check.rc == 0, check.describe()
    assert import_version(venv.python) == (0, "91002")


def test_fix_text_shows_plan_then_before_and_after(
    states: States, seed: SeedWheels, cli: Cli
) -> None:
    venv = states("phantom")
    run = cli("fix", venv.path, "--yes", *offline(seed))
    assert run.rc == 0, run.describe()
    assert "Plan (1 step):" in run.stdout
    assert "Before: 3 errors" in run.stdout and "After:  no problems" in run.stdout
    assert re.search(r"libdoctor: backup \S+ in ", run.stderr)


def test_fix_without_yes_refuses_when_not_interactive(
    states: States, seed: SeedWheels, cli: Cli
) -> None:
    venv = states("phantom")
    before = snapshot(venv.path)
    run = cli("fix", venv.path, *offline(seed))
    assert run.rc == 2, run.describe()
    assert "not running 1 repair step without --yes (stdin is not a terminal)" in run.stderr
    assert "Plan (1 step):" in run.stdout
    dry = cli("fix", venv.path, "--dry-run", *offline(seed), "--json")
    assert dry.rc == 0, dry.describe()  # predicted clean
    assert dry.json()["fix"]["ran"] is False
    assert diff_snapshots(before, snapshot(venv.path)) == []


def test_fix_on_a_clean_env_has_nothing_to_do(states: States, cli: Cli) -> None:
    venv = states("clean")
    run = cli("fix", venv.path)
    assert run.rc == 0, run.describe()
    assert "Nothing fix can repair by reinstalling." in run.stdout


def test_fix_leaves_shared_paths_to_the_user(states: States, cli: Cli) -> None:
    venv = states("seed")
    run = cli("fix", venv.path, "--json")
    assert run.rc == 1, run.describe()
    fix = run.json()["fix"]
    assert fix["steps"] == []
    assert [n["finding"]["code"] for n in fix["not_handled"]] == ["shared-path"]


# =============================================================================== faults


def two_damaged(
    new_venv: VenvFactory, make_wheel: WheelFactory, name: str, zzz_by: str = "pip"
) -> tuple[Venv, Path]:
    """ldt-aaa (by pip) and ldt-zzz (by ZZZ_BY), each with a file deleted; only ldt-aaa's
    wheel stays reachable. Two installers make two calls; one installer makes one."""
    reachable = make_wheel.dest
    aaa = make_wheel("ldt-aaa", "1.0", {"aaa/__init__.py": b"A = 1\n", "aaa/lib.py": b"x\n"})
    zzz = make_wheel("ldt-zzz", "1.0", {"zzz/__init__.py": b"Z = 1\n", "zzz/lib.py": b"y\n"})
    venv = new_venv(name)
    pip_install(venv, aaa)
    if zzz_by == "uv":
        uv_install(venv.python, zzz, cache=venv.path.parent / "uv-cache")
    else:
        pip_install(venv, zzz)
    zzz.unlink()  # the fix's call that names it cannot find it
    (venv.site_packages / "aaa/lib.py").unlink()
    (venv.site_packages / "zzz/lib.py").unlink()
    return venv, reachable


def test_failed_step_rolls_back_every_step_byte_for_byte(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli
) -> None:
    venv, links = two_damaged(new_venv, make_wheel, "fails", zzz_by="uv")
    before = tree_state(venv.path)
    run = cli("fix", venv.path, "--yes", "--no-index", "--find-links", links, "--json", env=WITH_UV)
    assert run.rc == 2, run.describe()
    doc = run.json()["fix"]
    assert [r["argv"][:3] for r in doc["results"]] == [
        [str(venv.python), "-m", "pip"],
        ["uv", "pip", "install"],
    ]
    assert [r["returncode"] == 0 for r in doc["results"]] == [True, False]
    assert doc["rolled_back"] is True and doc["rollback_problems"] == []
    assert diff_states(before, tree_state(venv.path)) == [], "not rolled back byte for byte"
    (journal,) = journals(cli)
    assert journal["state"] == "rolled-back"
    assert [s["state"] for s in journal["steps"]] == ["done", "failed"]
    # restore of that backup is idempotent
    again = cli("restore", journal["id"])
    assert again.rc == 0, again.describe()
    assert diff_states(before, tree_state(venv.path)) == []


def test_one_call_reinstalls_every_damaged_distribution_or_none(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli
) -> None:
    """One installer: one call for both; pip cannot find one wheel, so it installs neither."""
    venv, links = two_damaged(new_venv, make_wheel, "one-call")
    before = tree_state(venv.path)
    run = cli("fix", venv.path, "--yes", "--no-index", "--find-links", links, "--json")
    assert run.rc == 2, run.describe()
    doc = run.json()["fix"]
    (step,) = doc["steps"]
    assert step["argv"][3:8] == [
        "install", "--force-reinstall", "--no-deps", "ldt-aaa==1.0", "ldt-zzz==1.0"
    ]  # fmt: skip
    assert [d["name"] for d in step["distributions"]] == ["ldt-aaa", "ldt-zzz"]
    assert [v["status"] for v in step["verification"]] == ["verified", "not verified"]
    assert [r["returncode"] != 0 for r in doc["results"]] == [True]
    assert diff_states(before, tree_state(venv.path)) == []


def test_injected_installer_failure_is_rolled_back(
    states: States, seed: SeedWheels, cli: Cli, tmp_path: Path
) -> None:
    venv = states("phantom")
    before = tree_state(venv.path)
    hook = fault_injector(tmp_path, venv.python, "fail")
    run = cli("fix", venv.path, "--yes", *offline(seed), "--installer-cmd", hook)
    assert run.rc == 2, run.describe()
    assert "injected failure" in run.stderr
    assert "rolled back: the target is as before" in run.stderr
    assert diff_states(before, tree_state(venv.path)) == []


def test_sigkill_mid_step_leaves_a_journal_and_restore_brings_it_back(
    states: States, seed: SeedWheels, cli: Cli, tmp_path: Path
) -> None:
    venv = states("seed")
    before = tree_state(venv.path)
    hook = fault_injector(tmp_path, venv.python, "kill:cudnn-a")
    run = cli(
        "uninstall", "cudnn-b", venv.path, "--repair", *offline(seed), "--installer-cmd", hook
    )
    assert run.rc == -signal.SIGKILL, run.describe()
    assert diff_states(before, tree_state(venv.path)) != [], "the kill left the target half-done"
    (journal,) = journals(cli)
    assert journal["state"] == "in-progress"
    assert [s["state"] for s in journal["steps"]] == ["done", "running"]
    # A new repair refuses to start on top of the interrupted one.
    blocked = cli("fix", venv.path, "--yes", *offline(seed))
    assert blocked.rc == 2, blocked.describe()
    assert f"run `libdoctor restore {journal['id']}` first" in blocked.stderr
    listing = cli("restore", "--list", "--json")
    assert [b["needs_restore"] for b in listing.json()["backups"]] == [True]
    restored = cli("restore", "--json")  # no argument: the latest interrupted one
    assert restored.rc == 0, restored.describe()
    result = restored.json()
    assert result["ok"] is True and result["backup"]["state"] == "restored"
    assert diff_states(before, tree_state(venv.path)) == [], "restore is not byte-identical"
    assert import_version(venv.python) == (0, "92400")


# =============================================================================== signals


def test_sigkill_of_libdoctor_alone_takes_its_installer_and_restore_runs_at_once(
    states: States, seed: SeedWheels, cli: Cli, tmp_path: Path
) -> None:
    """Issue 13: only libdoctor is killed; its pip (hanging mid-install) must die with it, so
    that a restore started at once does not race an orphan."""
    venv = states("phantom")
    before = tree_state(venv.path)
    hook = fault_injector(tmp_path, venv.python, "hang")
    proc = cli.start("fix", venv.path, "--yes", *offline(seed), "--installer-cmd", hook)
    installer = wait_for_installer(tmp_path, proc)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    (journal,) = journals(cli)
    assert journal["state"] == "in-progress"
    assert journal["steps"][-1]["pid"] == installer, "the installer's pid is journaled"
    restored = cli("restore", "--json")
    assert restored.rc == 0, restored.describe()
    assert process_gone(installer), "the installer outlived libdoctor"
    assert diff_states(before, tree_state(venv.path)) == [], "restore is not byte-identical"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_step_rolls_back_and_exits_2(
    states: States, seed: SeedWheels, cli: Cli, tmp_path: Path, signum: signal.Signals
) -> None:
    venv = states("phantom")
    before = tree_state(venv.path)
    hook = fault_injector(tmp_path, venv.python, "hang")
    proc = cli.start("fix", venv.path, "--yes", *offline(seed), "--installer-cmd", hook)
    installer = wait_for_installer(tmp_path, proc)
    os.kill(proc.pid, signum)  # libdoctor alone, as `kill PID` does
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err.decode()
    last = err.decode().splitlines()[-1]
    assert last.startswith(f"libdoctor: error: interrupted by {signum.name}: rolled back"), last
    assert process_gone(installer)
    assert diff_states(before, tree_state(venv.path)) == [], "not rolled back byte for byte"
    (journal,) = journals(cli)
    assert journal["state"] == "rolled-back"


def test_restore_refuses_while_a_journaled_installer_runs(
    states: States, cli: Cli, tmp_path: Path
) -> None:
    """A journal whose running step names a live installer (here a fake, slow one): putting
    files back under it would race it."""
    import subprocess

    from libdoctor.repair.backup import BackupSession

    venv = states("phantom")
    fake = [sys.executable, "-c", "import time; time.sleep(600)", "pip", "install", "x"]
    slow = subprocess.Popen(fake)
    try:
        session = BackupSession(str(cli.backups), str(venv.path), "libdoctor fix")
        session.begin(fake, 0)
        session.started(slow.pid)
        session._lock.release()  # as if this libdoctor had been killed
        run = cli("restore")
        assert run.rc == 2, run.describe()
        assert f"still running in {venv.path} (pid {slow.pid})" in run.stderr
        assert len(run.stderr.splitlines()) == 1
    finally:
        slow.kill()
        slow.wait()
    assert cli("restore").rc == 0, "once it has ended, restore runs"


def test_one_repair_per_env_whatever_the_spelling_or_cache_dir(
    states: States, seed: SeedWheels, cli: Cli, tmp_path: Path
) -> None:
    """Issue 13: the lock is the env's site directory itself, not a file keyed by the prefix
    string in one cache dir: a symlink to the venv and another --cache-dir meet it too."""
    venv = states("phantom")
    before = tree_state(venv.path)
    link = tmp_path / "link-to-venv"
    link.symlink_to(venv.path)
    hook = fault_injector(tmp_path, venv.python, "hang")
    first = cli.start(
        "fix", link, "--yes", *offline(seed), "--cache-dir", tmp_path / "a", "--installer-cmd", hook
    )
    installer = wait_for_installer(tmp_path, first)
    try:
        others: list[tuple[str | Path, ...]] = [
            ("fix", venv.path, "--yes", *offline(seed), "--cache-dir", tmp_path / "b"),
            ("uninstall", "torchlike", link, "--force", "--cache-dir", tmp_path / "c"),
            ("restore", "--cache-dir", tmp_path / "a"),
        ]
        for args in others:
            second = cli(*args, timeout=60)
            assert second.rc == 2, second.describe()
            assert "another libdoctor repair or restore is running on" in second.stderr
            assert len(second.stderr.splitlines()) == 1, second.stderr
        assert not (tmp_path / "b" / "backups").exists(), "the refused fix ran nothing"
        assert not process_gone(installer), "the first one still runs: it was never disturbed"
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=120)
    assert first.returncode == 2
    assert diff_states(before, tree_state(venv.path)) == []


def test_restore_undoes_a_finished_fix(states: States, seed: SeedWheels, cli: Cli) -> None:
    venv = states("phantom")
    before = tree_state(venv.path)
    assert cli("fix", venv.path, "--yes", *offline(seed)).rc == 0
    (journal,) = journals(cli)
    dry = cli("restore", journal["id"], "--dry-run")
    assert dry.rc == 0 and "Dry run: nothing was changed." in dry.stdout
    assert diff_states(before, tree_state(venv.path)) != []
    run = cli("restore", journal["id"])
    assert run.rc == 0, run.describe()
    assert "Restored and verified" in run.stdout
    assert diff_states(before, tree_state(venv.path)) == []


def test_escaping_record_paths_are_never_deleted_or_restored(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli, tmp_path: Path
) -> None:
    venv = new_venv("escape")
    pip_install(venv, make_wheel("ldt-esc", "1.0", {"esc/__init__.py": b""}))
    sentinel = tmp_path / "outside-sentinel.txt"
    sentinel.write_bytes(b"not yours\n")
    rel = os.path.relpath(sentinel, venv.site_packages)
    record = venv.site_packages / "ldt_esc-1.0.dist-info/RECORD"
    record.write_text(record.read_text() + record_line(rel, b"not yours\n") + "\n")
    stamp = sentinel.stat().st_mtime_ns
    plan = cli("plan", "uninstall", "ldt-esc", venv.path, "--json")
    (removal,) = plan.json()["plan"]["removals"]
    assert removal["outside_prefix"] == [str(sentinel)]
    assert str(sentinel) not in removal["files"]
    run = cli("uninstall", "ldt-esc", venv.path)
    assert run.rc == 0, run.describe()
    (journal,) = journals(cli)
    assert all(f["path"].startswith(str(venv.path) + "/") for f in journal["files"])
    assert cli("restore", journal["id"]).rc == 0
    assert sentinel.read_bytes() == b"not yours\n" and sentinel.stat().st_mtime_ns == stamp
    assert (venv.site_packages / "esc/__init__.py").is_file(), "restored inside the prefix"


_WRITES = re.compile(
    r"^\d+\s+(openat|open|creat|unlink|unlinkat|rename|renameat2?|mkdir|mkdirat|rmdir|"
    r"symlink|symlinkat|link|linkat|chmod|fchmodat|utimensat|truncate)\((.*)\)\s+=\s+(-?\d+)"
)


def _written_paths(trace: str) -> list[str]:
    """Paths that syscalls in an ``strace -f -y`` log created, changed or removed."""
    paths: list[str] = []
    for line in trace.splitlines():
        match = _WRITES.match(line)
        if not match or match[3].startswith("-"):
            continue
        call, args = match[1], match[2]
        if call in ("openat", "open") and not re.search(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC", args):
            continue
        dirfd = re.match(r"(\d+|AT_FDCWD)<([^>]*)>, ", args)
        for name in re.findall(r'"((?:[^"\\]|\\.)*)"', args):
            if dirfd and not name.startswith("/"):
                name = os.path.join(dirfd[2], name)
            paths.append(name)
    return paths


@pytest.mark.skipif(strace_path() is None, reason="strace is not installed or may not trace here")
def test_fix_writes_only_to_the_target_and_the_backup_dir(
    states: States, seed: SeedWheels, cli: Cli, tmp_path: Path
) -> None:
    venv = states("phantom")
    log = tmp_path / "strace.log"
    strace = str(strace_path())
    prefix = [strace, "-f", "-y", "-qq", "-e", "trace=%file", "-o", str(log)]
    run = cli("fix", venv.path, "--yes", *offline(seed), prefix=prefix)
    assert run.rc == 0, run.describe()
    allowed = (str(venv.path) + "/", str(cli.backups) + "/", "/dev/", "/proc/")
    written = _written_paths(log.read_text("utf-8", "replace"))
    assert any(p.startswith(str(venv.path)) for p in written), "the trace sees the repair"
    # The backup dir and its parents are made on first use.
    made = {str(p) for p in (cli.backups, *cli.backups.parents)}
    outside = sorted({p for p in written if not p.startswith(allowed)} - made)
    assert outside == [], f"written outside the target and the backup dir: {outside[:20]}"


# =============================================================================== leftovers


def _mixed_major(name: str, version: str) -> Any:
    from libdoctor.findings import Finding, Severity

    return Finding(
        "cuda-mixed-major",
        Severity.WARNING,
        f"{name} is for a CUDA major no framework here uses",
        evidence={
            "packages": [
                {"name": name, "version": version, "leftover": True, "uninstalled_by_fix": True}
            ]
        },
    )


def test_remove_leftovers_only_when_the_plan_proves_it_safe(states: States) -> None:
    from libdoctor.analysis.run import loader_context, run_checks
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.environment.target import from_directory
    from libdoctor.findings import Severity
    from libdoctor.repair.fix import plan_fix

    libs = loader_context({}, "/")
    venv = states("seed")
    env = build_environment(from_directory(venv.path, "test"))
    findings = [*run_checks(env, RealDisk(), None, libs), _mixed_major("cudnn-b", "9.24.0")]
    kept = plan_fix(env, RealDisk(), findings, libraries=libs)
    assert kept.steps == ()
    assert (
        "pass --remove-leftovers"
        in dict((f.code, why) for f, why in kept.not_handled)["cuda-mixed-major"]
    )
    fix = plan_fix(env, RealDisk(), findings, remove_leftovers=True, libraries=libs)
    assert [(s.action, s.name) for s in fix.steps] == [
        ("uninstall", "cudnn-b"),
        ("reinstall", "cudnn-a"),
    ]
    assert [f for f in fix.predicted if f.severity >= Severity.ERROR] == []

    clean = states("clean")
    env = build_environment(from_directory(clean.path, "test"))
    findings = [*run_checks(env, RealDisk(), None, libs), _mixed_major("cudnn-a", "9.1.0")]
    sole = plan_fix(env, RealDisk(), findings, remove_leftovers=True, libraries=libs)
    assert sole.steps == (), "torchlike needs it and nothing else ships it"
    assert "cudnn-a 9.1.0 stay" in sole.notes[0]


@pytest.mark.parametrize("answer", ["n", "y"])
def test_fix_asks_on_a_terminal(states: States, seed: SeedWheels, cli: Cli, answer: str) -> None:
    import subprocess

    venv = states("phantom")
    before = snapshot(venv.path)
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(
            cli.argv("fix", venv.path, *offline(seed)),
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=cli.env(),
        )
        os.write(master, f"{answer}\n".encode())
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(master)
        os.close(slave)
    assert "Run this step? [y/N]" in err.decode()
    if answer == "n":
        assert proc.returncode == 2 and "cancelled: nothing was changed" in err.decode()
        assert diff_snapshots(before, snapshot(venv.path)) == []
    else:
        assert proc.returncode == 0, err.decode()
        assert "After:  no problems" in out.decode()
