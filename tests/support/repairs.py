"""Helpers for the plan / fix / uninstall / restore tests.

- ``Cli``: the real ``python -m libdoctor`` in a subprocess, with the repair commands registered
  (``cli.COMMANDS`` may not list them yet), pip offline and every cache under one directory.
- ``tree_state``: a full picture of a directory tree (kind, mode, mtime, sha256 of every file,
  symlink targets) to prove a restore is byte-identical.
- ``fault_injector``: a command prefix for ``--installer-cmd`` that runs the *real* pip of the
  target and makes it fail, or SIGKILLs it together with libdoctor, or makes it hang (its pid
  in ``installer.pid`` beside the script: ``wait_for_installer``), right after pip wrote its
  first file (pip has already moved the old files away at that point).
- ``Cli.start``: the same command as a running process, for tests that signal it.
- ``check_errors``: the error findings of ``check --json`` on a target.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from support.venvs import SRC_DIR, LibdoctorRun, libdoctor_env, pip_env

__all__ = [
    "Cli",
    "check_errors",
    "copy_backup",
    "diff_states",
    "fault_injector",
    "journals",
    "process_gone",
    "tree_state",
    "wait_for_installer",
]

COMMANDS = ("plan", "fix", "uninstall", "install", "guard", "restore")
_BOOT = (
    "import sys, libdoctor.cli.main as c; "
    f"c.COMMANDS = tuple(dict.fromkeys((*c.COMMANDS, *{COMMANDS!r}))); "
    "sys.exit(c.main(sys.argv[1:]))"
)


class Cli:
    """``libdoctor ARGS`` with XDG_CACHE_HOME (so backups and downloads) under CACHE_HOME."""

    def __init__(self, cache_home: Path) -> None:
        self.cache_home = cache_home
        self.backups = cache_home / "libdoctor" / "backups"

    def env(self, extra: Mapping[str, str | None] | None = None) -> dict[str, str]:
        offline = pip_env()  # no config file, no index, no version check, no prompt
        env: dict[str, str | None] = {k: v for k, v in offline.items() if k.startswith("PIP_")}
        env.update({"PIP_NO_CACHE_DIR": "1", "PYTHONDONTWRITEBYTECODE": "1"})
        env.update(extra or {})
        return libdoctor_env(env, self.cache_home)

    def argv(self, *args: str | os.PathLike[str]) -> list[str]:
        return [sys.executable, "-c", _BOOT, *(os.fspath(a) for a in args)]

    def __call__(
        self,
        *args: str | os.PathLike[str],
        env: Mapping[str, str | None] | None = None,
        timeout: float = 180,
        prefix: list[str] | None = None,
    ) -> LibdoctorRun:
        proc = subprocess.run(
            [*(prefix or []), *self.argv(*args)],
            env=self.env(env),
            capture_output=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
            cwd=SRC_DIR.parent,
        )
        return LibdoctorRun(
            proc.returncode,
            proc.stdout.decode("utf-8", "surrogateescape"),
            proc.stderr.decode("utf-8", "surrogateescape"),
        )

    def start(self, *args: str | os.PathLike[str]) -> subprocess.Popen[bytes]:
        """``libdoctor ARGS`` running (its pid is libdoctor's own): for signals. SIGINT is
        reset to its default in the child: a test run started in the background by a shell
        inherits SIGINT ignored, and Python keeps an ignored SIGINT ignored."""
        return subprocess.Popen(
            self.argv(*args),
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            cwd=SRC_DIR.parent,
            preexec_fn=_default_sigint,
        )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def copy_backup(backup: Path, cli: Cli) -> Path:
    """A copy of the backup directory BACKUP among CLI's backups, to damage while BACKUP
    stays as it was taken."""
    copy = cli.backups / backup.name
    shutil.copytree(backup, copy, symlinks=True)
    return copy


def check_errors(cli: Cli, target: Path) -> list[dict[str, Any]]:
    """The error-level findings of ``libdoctor check TARGET --json`` (which must run)."""
    run = cli("check", target, "--json")
    assert run.rc in (0, 1), run.describe()
    return [f for f in run.json()["findings"] if f["severity"] == "error"]


def journals(cli: Cli) -> list[dict[str, Any]]:
    """The journals of every backup CLI took, oldest name first."""
    return [json.loads(p.read_text()) for p in sorted(cli.backups.glob("*/journal.json"))]


def tree_state(root: Path, *, hashed: bool = True) -> dict[str, tuple[Any, ...]]:
    """Every entry under ROOT: files by (mode, mtime_ns, sha256), symlinks by target,
    directories by mode. Never follows symlinks. HASHED False: files by (mode, mtime_ns,
    size), for a big tree that only has to be proven untouched (any write moves the mtime)."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out[path] = ("symlink", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[path] = ("dir", stat.S_IMODE(st.st_mode))
            elif stat.S_ISREG(st.st_mode) and not hashed:
                out[path] = ("file", stat.S_IMODE(st.st_mode), st.st_mtime_ns, st.st_size)
            elif stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
                out[path] = ("file", stat.S_IMODE(st.st_mode), st.st_mtime_ns, digest)
            else:
                out[path] = ("other", stat.S_IMODE(st.st_mode))
    return out


def diff_states(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    lines = [f"created: {p}" for p in sorted(after.keys() - before.keys())]
    lines += [f"removed: {p}" for p in sorted(before.keys() - after.keys())]
    lines += [
        f"changed: {p}: {before[p]} -> {after[p]}"
        for p in sorted(before.keys() & after.keys())
        if before[p] != after[p]
    ]
    return lines


_INJECTOR = '''
"""Run the target's real pip; right after it writes its first file, fail or get killed."""
import os, signal, sys, time

mode, _, only = sys.argv[1].partition(":")  # "kill", "fail", "hang", "kill:NAME" (only
# the install steps naming NAME), "killstash" (kill as pip moves its first old file away)
argv = sys.argv[2:]
assert argv[1:3] == ["-m", "pip"], argv
armed = "install" in argv and (not only or any(only in a for a in argv))
from pip._internal.operations.install import wheel
from pip._internal.req import req_uninstall

original_stash = req_uninstall.StashedUninstallPathSet.stash


def stash(self, path):
    moved = original_stash(self, path)
    if mode == "killstash" and armed:
        os.kill(os.getppid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    return moved


req_uninstall.StashedUninstallPathSet.stash = stash

original = wheel.ZipBackedFile.save
written = []


def save(self):
    original(self)
    written.append(self.dest_path)
    if len(written) == 1 and armed:
        if mode == "hang":  # say who we are, then wait to be killed
            pidfile = os.path.join(os.path.dirname(os.path.abspath(__file__)), "installer.pid")
            with open(pidfile + ".tmp", "w") as handle:
                handle.write(str(os.getpid()))
            os.replace(pidfile + ".tmp", pidfile)
            time.sleep(600)
        if mode == "kill":
            os.kill(os.getppid(), signal.SIGKILL)  # libdoctor, mid-step
            os.kill(os.getpid(), signal.SIGKILL)
        raise OSError("injected failure after writing " + self.dest_path)


wheel.ZipBackedFile.save = save
from pip._internal.cli.main import main

sys.exit(main(argv[3:]))
'''


def fault_injector(directory: Path, python: Path, mode: str) -> str:
    """``--installer-cmd`` value: MODE is "fail" (pip raises, exit != 0), "kill" or "hang"
    (after pip wrote its first file), "killstash" (as pip moves its first old file away),
    optionally ":NAME" to arm it only for the install step that names NAME."""
    script = directory / "inject_fault.py"
    script.write_text(_INJECTOR)
    return f"{python} {script} {mode}"


def wait_for_installer(directory: Path, libdoctor: subprocess.Popen[bytes]) -> int:
    """The pid of the "hang" installer under DIRECTORY, once it has written a file and hangs."""
    pidfile = directory / "installer.pid"
    deadline = time.monotonic() + 120
    while not pidfile.exists():
        if libdoctor.poll() is not None:
            _out, err = libdoctor.communicate()
            raise AssertionError(f"libdoctor ended first: {libdoctor.returncode}\n{err.decode()}")
        assert time.monotonic() < deadline, "the installer never started"
        time.sleep(0.05)
    return int(pidfile.read_text())


def process_gone(pid: int) -> bool:
    """PID has ended (gone, or a zombie nobody reaped yet: it runs nothing)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return True
    return fields[0] in ("Z", "X")
