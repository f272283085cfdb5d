"""Issue 13: kill -9 at every step of a fix, then ``libdoctor restore``: byte-identical each time.

The moments: before the backup copies anything, in the middle of it, once the step is journaled
(the installer not started), while pip moves the old files away, while it writes the new ones,
during the re-check after a finished fix, and in the middle of the rollback of a failed step.
libdoctor's own moments are ``LIBDOCTOR_KILL_AT`` checkpoints; pip's come from the fault
injector inside the real pip. For a distribution uv installed, libdoctor runs uv: its moments
are libdoctor's. Opt-in: ``pytest -m slow``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from support.caches import Caches, make_caches
from support.repairs import Cli, diff_states, fault_injector, tree_state
from support.venvs import WITH_UV, VenvFactory, pip_install, uv_install
from support.wheels import WheelFactory

pytestmark = pytest.mark.slow

FILES = {f"ldtkill/m{i:02d}.py": f"X = {i}\n".encode() for i in range(40)}
FILES["ldtkill/__init__.py"] = b""
FILES["ldtkill/lib.so"] = os.urandom(1 << 20)

# (moment, LIBDOCTOR_KILL_AT, injector mode or None)
PIP_MOMENTS = [
    ("before the backup", "before-backup", None),
    ("mid-backup", "mid-backup", None),
    ("after the journal", "after-journal", None),
    ("while pip stashes", None, "killstash"),
    ("while pip writes", None, "kill"),
    ("during the re-check", "recheck", None),
    ("during the rollback", "mid-rollback", "fail"),
]
UV_MOMENTS = [m for m in PIP_MOMENTS if m[2] is None]


def _sweep(
    new_venv: VenvFactory,
    make_wheel: WheelFactory,
    tmp_path: Path,
    moment: tuple[str, str | None, str | None],
    installer: str,
) -> None:
    name, kill_at, mode = moment
    venv = new_venv("sweep")
    wheel = make_wheel("ldt-kill", "1.0", FILES)
    if installer == "uv":
        uv_install(venv.python, wheel, cache=tmp_path / "uv-cache")
    else:
        pip_install(venv, wheel)
    for lost in ("m07.py", "lib.so"):
        (venv.site_packages / "ldtkill" / lost).unlink()
    before = tree_state(venv.path)
    cli = Cli(tmp_path / "cache-home")
    args: list[str | os.PathLike[str]] = ["fix", venv.path, "--yes", "--no-index"]
    args += ["--find-links", make_wheel.dest]
    if mode is not None:
        args += ["--installer-cmd", fault_injector(tmp_path, venv.python, mode)]
    env = {**WITH_UV, **({"LIBDOCTOR_KILL_AT": kill_at} if kill_at else {})}
    run = cli(*args, env=env)
    assert run.rc == -signal.SIGKILL, f"{name}: {run.describe()}"
    (journal,) = (json.loads(p.read_text()) for p in cli.backups.glob("*/journal.json"))
    restored = cli("restore", journal["id"], "--json", env=WITH_UV)
    assert restored.rc == 0, f"{name}: {restored.describe()}"
    assert diff_states(before, tree_state(venv.path)) == [], f"{name}: not byte-identical"
    again = cli(
        "fix", venv.path, "--yes", "--no-index", "--find-links", make_wheel.dest, env=WITH_UV
    )
    assert again.rc == 0, f"{name}: a fix after the restore: {again.describe()}"


SWEEP = [("pip", m) for m in PIP_MOMENTS] + [("uv", m) for m in UV_MOMENTS]


@pytest.mark.parametrize(("installer", "moment"), SWEEP, ids=[f"{i}: {m[0]}" for i, m in SWEEP])
def test_kill_9_then_restore_is_byte_identical(
    new_venv: VenvFactory,
    make_wheel: WheelFactory,
    tmp_path: Path,
    installer: str,
    moment: tuple[str, str | None, str | None],
) -> None:
    _sweep(new_venv, make_wheel, tmp_path, moment, installer)


# --------------------------------------------------------------------------- the guard (issue 23)
# kill -9 at each step of `guard install` and `guard remove` (their LIBDOCTOR_KILL_AT checkpoints,
# repair.guard): `guard status` names what is left, and one `guard remove` or `guard install`
# finishes it; pip works, and after the remove the env is as before (bin/'s times too, but
# where the kill fell between the guard dir's mkdir/rmdir and the manifest that records them).

GUARD_INSTALL_MOMENTS = [
    "guard-install-dir",  # the guard dir made, no manifest yet
    "guard-install-manifest",  # the manifest written, nothing moved
    "guard-install-moved",  # pip moved into the guard dir, its wrapper not written
    "guard-install-wrapped",  # pip's wrapper in place, pip3 not moved
    "guard-install-moved@3",  # pip3.X moved
    "guard-install-wrapped@3",  # every pip script wrapped, uv's wrapper not written
]
GUARD_REMOVE_MOMENTS = [
    "guard-remove-entry",  # pip back, the rest wrapped
    "guard-remove-entry@3",  # every pip script back, uv's wrapper still there
    "guard-remove-manifest",  # the manifest gone, the guard dir not
]
_TIMES_LOST = {"guard-install-dir", "guard-remove-manifest"}
GUARD_SWEEP = [
    (action, moment, finish)
    for action, moments in (("install", GUARD_INSTALL_MOMENTS), ("remove", GUARD_REMOVE_MOMENTS))
    for moment in moments
    for finish in ("remove", "install")
]


def _pip_works(venv_bin: Path, wrapped: bool) -> None:
    run = subprocess.run(
        [str(venv_bin / "pip"), "--version"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0 and run.stdout.startswith("pip "), run
    assert (b"libdoctor guard wrapper" in (venv_bin / "pip").read_bytes()) == wrapped


@pytest.mark.parametrize(
    ("action", "moment", "finish"),
    GUARD_SWEEP,
    ids=[f"{a} killed at {m}, then {f}" for a, m, f in GUARD_SWEEP],
)
def test_kill_9_in_guard_then_one_run_finishes_it(
    new_venv: VenvFactory, tmp_path: Path, action: str, moment: str, finish: str
) -> None:
    venv = new_venv("guard-sweep")
    before = tree_state(venv.path)
    bin_mtime = venv.bin.stat().st_mtime_ns
    cli = Cli(tmp_path / "cache-home")
    if action == "remove":
        assert cli("guard", "install", venv.path).rc == 0
    killed = cli("guard", action, venv.path, env={"LIBDOCTOR_KILL_AT": moment})
    assert killed.rc == -signal.SIGKILL, killed.describe()
    status = cli("guard", "status", venv.path)
    assert status.rc == 1 and status.stdout.strip(), f"{moment}: {status.describe()}"
    assert "Traceback" not in status.stderr
    finished = cli("guard", finish, venv.path)
    assert finished.rc == 0, f"{moment}: {finished.describe()}"
    if finish == "install":
        assert cli("guard", "status", venv.path).rc == 0, f"{moment}: not whole"
        _pip_works(venv.bin, wrapped=True)
        assert cli("guard", "remove", venv.path).rc == 0
    _pip_works(venv.bin, wrapped=False)
    assert diff_states(before, tree_state(venv.path)) == [], f"{moment}: not as before"
    if moment not in _TIMES_LOST:
        assert venv.bin.stat().st_mtime_ns == bin_mtime, f"{moment}: bin/'s times"


# --------------------------------------------------------------------------- caches clear
# Issue 23: kill -9 at each step of `caches clear` (one cache root's backup, then its
# removal); the re-run refuses until the interrupted clear is restored, the restore puts the
# root back byte for byte, and the re-run then completes. And a kill inside the restore of
# a finished clear: the restore run again completes.

CLEAR_MOMENTS = [
    ("before the backup", "before-backup"),
    ("mid-backup", "mid-backup"),
    ("after the journal", "after-journal"),
    ("mid-clear", "mid-clear"),
]


def _clear_args(caches: Caches) -> tuple[str, ...]:
    return ("caches", "clear", "--all", "triton", "--yes", str(caches.venv.path))


@pytest.mark.parametrize(("name", "kill_at"), CLEAR_MOMENTS, ids=[m[0] for m in CLEAR_MOMENTS])
def test_kill_9_in_caches_clear_then_restore_then_rerun(
    new_venv: VenvFactory, make_wheel: WheelFactory, tmp_path: Path, name: str, kill_at: str
) -> None:
    caches = make_caches(new_venv, make_wheel, tmp_path)
    cli = Cli(tmp_path / "cache-home")
    before = tree_state(caches.triton)
    killed = cli(*_clear_args(caches), env={**caches.env, "LIBDOCTOR_KILL_AT": kill_at})
    assert killed.rc == -signal.SIGKILL, f"{name}: {killed.describe()}"
    refused = cli(*_clear_args(caches), env=caches.env)
    assert refused.rc == 2 and "run `libdoctor restore" in refused.stderr, refused.describe()
    restored = cli("restore", "--json", env=caches.env)  # the interrupted one, by itself
    assert restored.rc == 0, f"{name}: {restored.describe()}"
    assert diff_states(before, tree_state(caches.triton)) == [], f"{name}: not byte-identical"
    again = cli(*_clear_args(caches), env=caches.env)
    assert again.rc == 0, f"{name}: the clear after the restore: {again.describe()}"
    assert sorted(p.name for p in caches.triton.iterdir()) == ["notes.txt"]


def test_kill_9_while_restoring_a_clear_then_restore_again(
    new_venv: VenvFactory, make_wheel: WheelFactory, tmp_path: Path
) -> None:
    caches = make_caches(new_venv, make_wheel, tmp_path)
    cli = Cli(tmp_path / "cache-home")
    before = tree_state(caches.triton)
    cleared = cli(*_clear_args(caches), "--json", env=caches.env)
    assert cleared.rc == 0, cleared.describe()
    (backup,) = (c["backup"] for c in cleared.json()["cleared"])
    killed = cli("restore", backup, env={**caches.env, "LIBDOCTOR_KILL_AT": "mid-rollback"})
    assert killed.rc == -signal.SIGKILL, killed.describe()
    restored = cli("restore", backup, env=caches.env)
    assert restored.rc == 0, restored.describe()
    assert diff_states(before, tree_state(caches.triton)) == []
