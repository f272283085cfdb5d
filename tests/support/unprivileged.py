"""Run libdoctor as a user who may not read everything: what "permission denied" needs.

Tests run as root here, and root reads every file whatever its mode. ``as_unprivileged``
runs a command as ``nobody`` through ``setpriv`` when the tests are root (and as the user
itself otherwise); ``shared_tmp`` is a directory that user can reach (pytest's own tmp is
private to its owner).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.venvs import LibdoctorRun, libdoctor_env

__all__ = ["as_unprivileged", "run_libdoctor_unprivileged", "shared_tmp"]


def as_unprivileged(argv: Sequence[str]) -> list[str]:
    """ARGV run as a user without root's right to read every file (skip when there is none)."""
    if os.geteuid() != 0:
        return list(argv)
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("the tests run as root, who reads every file, and setpriv is not here")
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("the tests run as root, who reads every file, and there is no user nobody")
    ids = [f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
    return [setpriv, *ids, *argv]


@contextmanager
def shared_tmp() -> Iterator[Path]:
    """A fresh directory everyone may enter and read, removed afterwards (modes restored
    first: a test leaves files nobody, not even the cleanup, may read otherwise)."""
    root = Path(tempfile.mkdtemp(prefix="libdoctor-shared-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        for folder, dirs, _ in os.walk(root):
            for name in dirs:
                os.chmod(os.path.join(folder, name), 0o755)
        shutil.rmtree(root, ignore_errors=True)


def run_libdoctor_unprivileged(*args: str | os.PathLike[str], home: Path) -> LibdoctorRun:
    """``python -m libdoctor ARGS`` as ``as_unprivileged`` runs it, HOME and caches in HOME."""
    env = libdoctor_env({"HOME": str(home)}, cache_home=home / "cache")
    argv = as_unprivileged([sys.executable, "-m", "libdoctor", *(os.fspath(a) for a in args)])
    done = subprocess.run(argv, env=env, capture_output=True, timeout=120, check=False, cwd=home)
    return LibdoctorRun(
        done.returncode,
        done.stdout.decode("utf-8", "surrogateescape"),
        done.stderr.decode("utf-8", "surrogateescape"),
    )
