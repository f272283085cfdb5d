"""Issue 23: the guard against hostile input, each case with its exact outcome (exit code,
one line, nothing outside the target changed). Real venvs, real pip and uv, real wrappers.

- env paths holding a newline, quotes, ``$(...)``, backticks, a space, non-UTF-8 bytes: the
  wrappers run pip (and plan through it) without running a word of the path;
- an edited manifest (``../../../victim/secret``, an absolute name, ``true`` for a number, a
  bomb of brackets, a symlink, a FIFO) and a guard dir swapped for a symlink: one line, exit 2,
  nothing touched;
- every uninstall spelling pip and uv accept is planned; what cannot be read is refused;
- install and remove as transactions: a deleted wrapper's original goes back, an interrupted
  run is finished by the next, two runs at once take turns.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from libdoctor.environment.target import discover
from libdoctor.errors import LibdoctorError
from libdoctor.repair.guard import MANIFEST_LIMIT, guard_status, install_guard
from support.commands import run_command
from support.conflicts import ConflictWheels
from support.hostile import one_error
from support.repairs import Cli, diff_states, tree_state
from support.venvs import SRC_DIR, Venv, VenvFactory, installed_names, pip_install, uv_path

GUARD = ".libdoctor-guard"


def _one_error_line(run: Any, *needles: str) -> None:
    """Exit 2 and a single ``libdoctor: error:`` line saying each of NEEDLES."""
    line = one_error(run)
    assert "Traceback" not in run.stderr and all(n in line for n in needles), run.describe()


# --------------------------------------------------------------------------- hostile paths

HOSTILE_PATHS = {
    "newline": "env\ntouch PWNED\n",
    "quotes": "env'q\"uote",
    "dollar": "env$(touch${IFS}PWNED)",
    "backtick": "env`touch${IFS}PWNED`",
    "space": "env with space",
    "bytes": os.fsdecode(b"env\xff\xfe"),
}


def _uv_venv(path: Path, conflicts: ConflictWheels, cache: Path) -> Venv:
    """A real venv (uv's: seconds faster than ``python -m venv``) with the real pip of this
    Python's ensurepip, and ldt-x + ldt-y (uninstalling ldt-x breaks ldt-y). uv takes no
    non-UTF-8 path: such a venv is made beside it and renamed, its old name kept as a link
    (its scripts' shebangs name it)."""
    try:
        os.fsencode(path).decode("utf-8")
        made = path
    except UnicodeDecodeError:
        made = path.with_name("made-" + os.fsencode(path.name).decode("ascii", "ignore"))
    uv = os.fspath(uv_path())
    env = {"PATH": os.environ["PATH"], "UV_CACHE_DIR": str(cache), "UV_NO_CONFIG": "1"}
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, made], env=env, check=True)
    bundled = Path(sys.base_prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    (pip_wheel,) = (bundled / "ensurepip" / "_bundled").glob("pip-*.whl")
    python = made / "bin" / "python"
    install: list[str | os.PathLike[str]] = [uv, "pip", "install", "-q", "--no-index"]
    install += ["--python", python]
    subprocess.run([*install, pip_wheel, conflicts.x1, conflicts.y], env=env, check=True)
    if made != path:
        made.rename(path)
        made.symlink_to(path)
    return Venv(path)


@pytest.mark.parametrize("kind", list(HOSTILE_PATHS))
def test_a_hostile_prefix_is_quoted_never_run(
    kind: str, conflicts: ConflictWheels, cli: Cli, tmp_path: Path
) -> None:
    venv = _uv_venv(tmp_path / HOSTILE_PATHS[kind], conflicts, tmp_path / "uv-cache")
    work = tmp_path / "cwd"
    work.mkdir()
    env = cli.env({"PATH": f"{uv_path().parent}{os.pathsep}{os.environ['PATH']}"})
    unguarded = run_command([venv.bin / "pip", "--version"], env, work)
    assert unguarded.returncode == 0, unguarded
    before = tree_state(venv.path)
    bin_mtime = venv.bin.stat().st_mtime_ns
    installed = cli("guard", "install", venv.path)
    assert installed.rc == 0 and len(installed.stdout.splitlines()) == 1, installed.describe()
    wrapper = (venv.bin / "pip").read_bytes()
    assert b"PWNED" not in wrapper.split(b"\nprefix=", 1)[0], "no path in a comment"
    guarded = run_command([venv.bin / "pip", "--version"], env, work)
    assert (guarded.returncode, guarded.stdout) == (0, unguarded.stdout), guarded
    stopped = run_command([venv.bin / "pip", "uninstall", "-y", "ldt-x"], env, work)
    assert stopped.returncode == 1 and "refused: the uninstall breaks" in stopped.stderr, stopped
    if kind in ("newline", "bytes"):  # the uv wrapper's own quoting (its bin dir, on PATH)
        uv: list[str | os.PathLike[str]] = [venv.bin / "uv", "pip", "uninstall", "-p"]
        uv += [venv.python, "ldt-x"]
        uv_stopped = run_command(uv, env, work)
        assert uv_stopped.returncode == 1 and "refused" in uv_stopped.stderr, uv_stopped
    assert {"ldt_x", "ldt_y"} <= installed_names(venv.site_packages)
    removed = cli("guard", "remove", venv.path)
    assert removed.rc == 0, removed.describe()
    assert diff_states(before, tree_state(venv.path)) == []
    assert venv.bin.stat().st_mtime_ns == bin_mtime
    assert list(tmp_path.rglob("PWNED")) == [], "a word of the path ran"


# --------------------------------------------------------------------------- the manifest


def _manifest(venv: Venv) -> Path:
    return venv.bin / GUARD / "manifest.json"


def _secret_sha(victim: Path) -> str:
    return hashlib.sha256((victim / "secret").read_bytes()).hexdigest()


def _entry(name: str, victim: Path, **extra: Any) -> dict[str, Any]:
    doc = {"name": name, "tool": "pip", "original": None, "wrapper_sha256": _secret_sha(victim)}
    return {**doc, **extra}


Edit = Callable[[dict[str, Any], Path, Path], bytes | None]


def _with_entry(make: Callable[[Path, Path], dict[str, Any]]) -> Edit:
    def edit(doc: dict[str, Any], victim: Path, bin_dir: Path) -> bytes:
        doc["entries"].append(make(victim, bin_dir))
        return json.dumps(doc).encode()

    return edit


def _field(key: str, value: Any) -> Edit:
    def edit(doc: dict[str, Any], victim: Path, bin_dir: Path) -> bytes:
        doc[key] = value
        return json.dumps(doc).encode()

    return edit


def _relative(victim: Path, bin_dir: Path) -> str:
    return os.path.relpath(victim / "secret", bin_dir)


MANIFEST_ATTACKS: dict[str, tuple[Edit, str]] = {
    "traversal": (_with_entry(lambda v, b: _entry(_relative(v, b), v)), "is not a name"),
    "absolute": (_with_entry(lambda v, b: _entry(str(v / "secret"), v)), "is not a name"),
    "dot-dot": (_with_entry(lambda v, b: _entry("..", v)), "is not a name"),
    "slash inside": (_with_entry(lambda v, b: _entry("pip/../../x", v)), "is not a name"),
    "newline": (_with_entry(lambda v, b: _entry("pip\n", v)), "is not a name"),
    "tool mismatch": (_with_entry(lambda v, b: _entry("uv", v)), "has tool 'pip'"),
    "twice": (_with_entry(lambda v, b: _entry("pip", v)), "named twice"),
    "bad sha": (
        _with_entry(lambda v, b: {**_entry("pip9.9", v), "wrapper_sha256": "../x"}),
        "no sha256",
    ),
    "true for a version": (_field("version", True), "'version' is not a int"),
    "string for a time": (_field("bin_mtime_ns", "0"), "'bin_mtime_ns' is not a int"),
    "17 entries": (_field("entries", [{}] * 17), "at most 16"),
    "over the limit": (_field("prefix", "x" * MANIFEST_LIMIT), "MANIFEST_LIMIT"),
    "bracket bomb": (lambda d, v, b: b"[" * 200_000, "is damaged"),
    "not JSON": (lambda d, v, b: b"\xff\xfe{", "is damaged"),
}


@pytest.fixture(scope="module")
def guarded_once(module_venv: VenvFactory, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    venv = module_venv("guard-hostile")
    cli = Cli(tmp_path_factory.mktemp("cache-home"))
    assert cli("guard", "install", venv.path).rc == 0
    return venv


@pytest.fixture
def guarded(guarded_once: Venv, tmp_path: Path) -> Iterator[tuple[Venv, Path]]:
    """The module's guarded venv, its manifest put back after the test; and a victim
    directory outside it whose files a wrong unlink or rename would take."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "secret").write_bytes(b"#!/bin/sh\n# libdoctor guard wrapper: not really\n")
    (victim / "pip").write_bytes(b"not pip\n")
    good = _manifest(guarded_once).read_bytes()
    yield guarded_once, victim
    if _manifest(guarded_once).is_symlink() or _manifest(guarded_once).exists():
        _manifest(guarded_once).unlink()
    _manifest(guarded_once).write_bytes(good)


@pytest.mark.parametrize("attack", list(MANIFEST_ATTACKS))
def test_an_edited_manifest_is_one_line_and_touches_nothing(
    attack: str, guarded: tuple[Venv, Path], cli: Cli
) -> None:
    venv, victim = guarded
    edit, says = MANIFEST_ATTACKS[attack]
    doc = json.loads(_manifest(venv).read_text())
    data = edit(doc, victim, venv.bin)
    assert data is not None
    _manifest(venv).write_bytes(data)
    before, outside = tree_state(venv.path), tree_state(victim)
    _one_error_line(cli("guard", "remove", venv.path), "manifest.json", says)
    target = discover(str(venv.path), None, {})
    for call in (guard_status, lambda t: install_guard(t, sys.executable, str(SRC_DIR))):
        with pytest.raises(LibdoctorError, match=r"manifest\.json") as raised:
            call(target)
        assert says in str(raised.value) and "\n" not in str(raised.value)
    assert diff_states(before, tree_state(venv.path)) == []
    assert diff_states(outside, tree_state(victim)) == []


def test_a_manifest_that_is_a_symlink_or_a_fifo_is_never_opened(
    guarded: tuple[Venv, Path], cli: Cli
) -> None:
    venv, victim = guarded
    manifest = _manifest(venv)
    good = manifest.read_bytes()
    (victim / "manifest.json").write_bytes(good)
    outside = tree_state(victim)
    manifest.unlink()
    manifest.symlink_to(victim / "manifest.json")
    _one_error_line(cli("guard", "remove", venv.path), "manifest.json", "unreadable")
    manifest.unlink()
    os.mkfifo(manifest)
    run = cli("guard", "remove", venv.path, timeout=30)  # a FIFO read would hang
    _one_error_line(run, "manifest.json", "not a regular file")
    assert diff_states(outside, tree_state(victim)) == []
    manifest.unlink()
    manifest.write_bytes(good)
    assert cli("guard", "status", venv.path).rc == 0


def test_a_guard_dir_swapped_for_a_symlink_is_refused(guarded: tuple[Venv, Path], cli: Cli) -> None:
    venv, victim = guarded
    kept = venv.bin / GUARD
    (victim / "manifest.json").write_bytes(_manifest(venv).read_bytes())
    outside = tree_state(victim)
    kept.rename(venv.path / "kept-aside")
    kept.symlink_to(victim)
    for action in ("remove", "install", "status"):
        _one_error_line(cli("guard", action, venv.path), "not a directory the guard made")
    assert diff_states(outside, tree_state(victim)) == []
    kept.unlink()
    (venv.path / "kept-aside").rename(kept)
    assert cli("guard", "status", venv.path).rc == 0


def test_planted_temporary_files_are_never_written_through(
    new_venv: VenvFactory, cli: Cli, tmp_path: Path
) -> None:
    """A guard dir left (or planted) with its temporary names linked to a file outside."""
    venv = new_venv("guard-planted")
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"keep me\n")
    before = tree_state(venv.path)
    (venv.bin / GUARD).mkdir()
    for name in (".manifest.tmp", ".tmp-pip", ".tmp-uv"):
        (venv.bin / GUARD / name).symlink_to(victim)
    assert cli("guard", "install", venv.path).rc == 0
    assert victim.read_bytes() == b"keep me\n" and not victim.is_symlink()
    assert cli("guard", "status", venv.path).rc == 0
    assert cli("guard", "remove", venv.path).rc == 0
    assert diff_states(before, tree_state(venv.path)) == []


def test_a_fifo_where_pip_stands_is_refused_without_a_hang(new_venv: VenvFactory, cli: Cli) -> None:
    venv = new_venv("guard-fifo")
    (venv.bin / "pip3").unlink()
    os.mkfifo(venv.bin / "pip3")
    before = tree_state(venv.path)
    run = cli("guard", "install", venv.path, timeout=30)
    _one_error_line(run, "pip3 is not a file or a symlink")
    assert diff_states(before, tree_state(venv.path)) == [], "nothing written before it"


# --------------------------------------------------------------------------- transactions


def test_a_deleted_wrapper_gets_its_original_back(new_venv: VenvFactory, cli: Cli) -> None:
    venv = new_venv("guard-deleted")
    before = tree_state(venv.path)
    bin_mtime = venv.bin.stat().st_mtime_ns
    assert cli("guard", "install", venv.path).rc == 0
    (venv.bin / "pip").unlink()
    status = cli("guard", "status", venv.path)
    assert status.rc == 1 and "pip: gone since, its original kept" in status.stdout, status
    removed = cli("guard", "remove", venv.path)
    assert removed.rc == 0 and "put back: pip, pip3" in removed.stdout, removed.describe()
    assert diff_states(before, tree_state(venv.path)) == []
    assert venv.bin.stat().st_mtime_ns == bin_mtime
    assert cli("guard", "install", venv.path).rc == 0
    (venv.bin / "pip3").unlink()
    assert cli("guard", "install", venv.path).rc == 0, "install wraps it again"
    assert cli("guard", "status", venv.path).rc == 0
    assert cli("guard", "remove", venv.path).rc == 0
    assert diff_states(before, tree_state(venv.path)) == []


def test_a_guard_dir_without_manifest_is_named_and_finished(
    new_venv: VenvFactory, cli: Cli
) -> None:
    """What a kill left before the manifest was written first: originals kept, no manifest."""
    venv = new_venv("guard-orphan-dir")
    before = tree_state(venv.path)
    assert cli("guard", "install", venv.path).rc == 0
    _manifest(venv).unlink()
    (venv.bin / "pip").unlink()  # the wrapper not written yet
    status = cli("guard", "status", venv.path)
    assert status.rc == 1 and status.stdout.startswith("not guarded, but"), status.describe()
    removed = cli("guard", "remove", venv.path)
    assert removed.rc == 0 and "put back: pip, pip3" in removed.stdout, removed.describe()
    assert diff_states(before, tree_state(venv.path)) == []
    assert cli("guard", "status", venv.path).stdout == "not guarded\n"


def test_two_guard_runs_at_once_take_turns(new_venv: VenvFactory, cli: Cli) -> None:
    venv = new_venv("guard-concurrent")
    before = tree_state(venv.path)
    for action, codes in (("install", [0, 0, 0, 0]), ("remove", [0, 2, 2, 2])):
        procs = [
            subprocess.Popen(
                cli.argv("guard", action, venv.path),
                env=cli.env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        done = [(p.wait(120), *p.communicate()) for p in procs]
        assert sorted(rc for rc, _, _ in done) == codes, done
        for rc, _, err in done:
            assert "Traceback" not in err and (rc == 0 or err.count("\n") == 1), err
            assert rc == 0 or "is not guarded" in err, err
        if action == "install":
            assert cli("guard", "status", venv.path).rc == 0
    assert diff_states(before, tree_state(venv.path)) == []


def test_a_guard_run_waits_for_the_other_then_refuses_in_one_line(
    new_venv: VenvFactory, cli: Cli
) -> None:
    venv = new_venv("guard-locked")
    held = os.open(venv.bin, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        target = discover(str(venv.path), None, {})
        with pytest.raises(LibdoctorError, match="another `libdoctor guard` is changing"):
            install_guard(target, sys.executable, str(SRC_DIR), wait=0.2)
        waiting = subprocess.Popen(
            cli.argv("guard", "install", venv.path), env=cli.env(), stderr=subprocess.PIPE
        )
        time.sleep(1.5)
        assert waiting.poll() is None, "it waits for the lock"
        assert not (venv.bin / GUARD).exists()
    finally:
        os.close(held)
    assert waiting.wait(60) == 0
    assert cli("guard", "status", venv.path).rc == 0


# --------------------------------------------------------------------------- spellings


@pytest.fixture(scope="module")
def breakable(module_venv: VenvFactory, conflicts: ConflictWheels) -> Venv:
    """ldt-x and ldt-y share common/same.txt: uninstalling ldt-x breaks ldt-y."""
    venv = module_venv("guard-spellings")
    pip_install(venv, conflicts.x1, conflicts.y, conflicts.a)
    return venv


@pytest.fixture(scope="module")
def spelled(breakable: Venv, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory with requirements files naming ldt-x in every way pip reads."""
    work = tmp_path_factory.mktemp("spellings")
    files = {
        "plain.txt": "ldt-x==1.0\n",
        "outer.txt": "# include\n-r sub/inner.txt\n",
        "sub/inner.txt": "--constraint ../constrained.txt\n",
        "constrained.txt": "ldt_x<9\n",
        "vars.txt": "${LDT_NAME}\n",
    }
    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    (work / "pyproject.toml").write_text("[project]\nname = 'ldt-x'\n")
    os.mkfifo(work / "fifo.txt")
    return work


SLOW = pytest.mark.slow  # read the same way by the unit tests (test_pip_input): swept in -m slow
UNINSTALLS = [
    pytest.param(["ldt-x==9.9"], {}, id="specifier"),
    pytest.param(["ldt-x>=1"], {}, id="range", marks=SLOW),
    pytest.param(["ldt-x[extra]"], {}, id="extras"),
    pytest.param(["LDT_X; python_version > '3'"], {}, id="marker", marks=SLOW),
    pytest.param(["no-such-pkg", "ldt-x"], {}, id="unknown next to known"),
    pytest.param(["ldt_x-1.0-py3-none-any.whl"], {}, id="wheel file name"),
    pytest.param(["ldt-x @ https://example.invalid/x.whl"], {}, id="name @ URL", marks=SLOW),
    pytest.param(["-yr", "plain.txt"], {}, id="-yr"),
    pytest.param(["--requirem", "plain.txt"], {}, id="--requirem", marks=SLOW),
    pytest.param(["-r", "outer.txt"], {}, id="-r nesting -c"),
    pytest.param(["-r", "vars.txt"], {"LDT_NAME": "ldt-x"}, id="${VAR}", marks=SLOW),
    pytest.param([], {"PIP_REQUIREMENT": "plain.txt"}, id="PIP_REQUIREMENT"),
]


@pytest.mark.parametrize(("args", "extra"), UNINSTALLS)
def test_every_uninstall_spelling_is_planned(
    args: list[str], extra: dict[str, str], breakable: Venv, spelled: Path, cli: Cli
) -> None:
    assert cli("guard", "install", breakable.path).rc == 0
    before = tree_state(breakable.path)
    run = run_command([breakable.bin / "pip", "uninstall", "-y", *args], cli.env(extra), spelled)
    assert run.returncode == 1, run
    assert "refused: the uninstall breaks 1 thing(s)" in run.stderr, run
    assert diff_states(before, tree_state(breakable.path)) == []


REFUSED: list[tuple[list[str], str]] = [
    (["-r", "https://example.invalid/r.txt"], "a requirements file over the network"),
    (["-r", "fifo.txt"], "not a regular file (a FIFO, a device?)"),
    (["--frob", "ldt-x"], "pip cannot read its options: no such option: --frob"),
]


@pytest.mark.parametrize(("args", "says"), REFUSED, ids=[a[-1] for a, _ in REFUSED])
def test_what_cannot_be_read_is_refused_in_one_line(
    args: list[str], says: str, breakable: Venv, spelled: Path, cli: Cli
) -> None:
    assert cli("guard", "install", breakable.path).rc == 0
    before = tree_state(breakable.path)
    run = run_command(
        [breakable.bin / "pip", "uninstall", "-y", *args], cli.env(), spelled, timeout=60
    )
    lines = run.stderr.splitlines()
    assert run.returncode == 1 and len(lines) == 1 and says in lines[0], run
    assert lines[0].startswith("libdoctor guard: refused: ") and "nothing was changed" in lines[0]
    assert diff_states(before, tree_state(breakable.path)) == []


def test_uv_spellings_are_planned_and_project_files_refused(
    breakable: Venv, spelled: Path, cli: Cli
) -> None:
    assert cli("guard", "install", breakable.path).rc == 0
    env = cli.env({"PATH": f"{breakable.bin}{os.pathsep}{uv_path().parent}{os.pathsep}/usr/bin"})
    uv: list[str | os.PathLike[str]] = [breakable.bin / "uv", "pip", "uninstall", "--python"]
    uv.append(breakable.python)
    before = tree_state(breakable.path)
    for args in (["ldt-x==9"], ["-rplain.txt"], ["./ldt_x-1.0-py3-none-any.whl"]):
        run = run_command([*uv, *args], env, spelled)
        assert run.returncode == 1 and "refused: the uninstall breaks" in run.stderr, run
    project = run_command([*uv, "-r", "pyproject.toml"], env, spelled)
    assert project.returncode == 1 and "uv reads a project file" in project.stderr, project
    assert diff_states(before, tree_state(breakable.path)) == []


def test_unknown_names_alone_go_straight_to_pip(breakable: Venv, cli: Cli) -> None:
    assert cli("guard", "install", breakable.path).rc == 0
    run = run_command([breakable.bin / "pip", "uninstall", "-y", "no-such-pkg"], cli.env())
    assert run.returncode == 0 and "libdoctor" not in run.stderr, run
    assert "Skipping no-such-pkg as it is not installed" in run.stderr + run.stdout


INSTALLS = [
    pytest.param(["--requirement=b.txt"], {}, id="--requirement="),
    pytest.param(["-Ur", "b.txt"], {}, id="-Ur", marks=SLOW),
    pytest.param([], {"PIP_REQUIREMENT": "b.txt"}, id="PIP_REQUIREMENT"),
]


@pytest.mark.parametrize(("args", "extra"), INSTALLS)
def test_every_install_spelling_is_planned(
    args: list[str],
    extra: dict[str, str],
    breakable: Venv,
    conflicts: ConflictWheels,
    cli: Cli,
    tmp_path: Path,
) -> None:
    """ldt-a is installed: ldt-b overwrites its shared/data.bin."""
    (tmp_path / "b.txt").write_text(f"{conflicts.b}\n")
    assert cli("guard", "install", breakable.path).rc == 0
    before = tree_state(breakable.path)
    run = run_command([breakable.bin / "pip", "install", *args], cli.env(extra), tmp_path)
    assert run.returncode == 1 and "refused: the install breaks" in run.stderr, run
    assert diff_states(before, tree_state(breakable.path)) == []


def test_a_libdoctor_bug_fails_open_and_says_so(breakable: Venv, cli: Cli) -> None:
    boot = (
        "import sys, libdoctor.external.invocation as i\n"
        "def boom(*a, **k): raise TypeError('boom')\n"
        "i.uninstall_asked = boom\n"
        "from libdoctor.cli.intercept import main\n"
        "main(sys.argv[1:])\n"
    )
    real = breakable.bin / GUARD / "pip"
    if not real.exists():
        assert cli("guard", "install", breakable.path).rc == 0
    argv: list[str | os.PathLike[str]] = [sys.executable, "-c", boot, "pip", real]
    run = run_command([*argv, breakable.path, "uninstall", "-y", "no-such-pkg"], cli.env())
    assert (
        "libdoctor guard: a bug in libdoctor stopped the plan (TypeError: boom): running pip "
        "unguarded; please report it" in run.stderr
    ), run
    assert run.returncode == 0 and "Skipping no-such-pkg" in run.stderr + run.stdout, run
