"""libdoctor's child processes and the signals that end a run: the one module that starts an
installer, waits for it, and turns SIGTERM into an exception.

An installer runs in libdoctor's process group (a Ctrl-C on the terminal reaches both) with a
parent-death signal (Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``): when libdoctor dies, even by
SIGKILL, its installer dies with it, so that no orphaned pip goes on writing into a target a
``restore`` is putting back. Where there is no prctl the child runs without it. When the wait
for the child is interrupted (SIGINT, SIGTERM, any exception) the child is killed and reaped
before the exception goes on: a rollback never races its own installer.

``still_running`` answers for an installer a journal recorded: whether its pid is alive and
still runs that command (a recycled pid runs something else).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess
    from types import FrameType

__all__ = [
    "Terminated",
    "checkpoint",
    "quiet_signals",
    "run_installer",
    "still_running",
    "terminated_by_signal",
]

_TAIL_LINES = 30
_PR_SET_PDEATHSIG = 1

Started = Callable[[int], None]
"""Told the child's pid as soon as it runs (a journal records it)."""


class Terminated(BaseException):
    """libdoctor received SIGTERM; like KeyboardInterrupt, not an error of libdoctor's."""

    signal_name = "SIGTERM"


def _die_with_parent(parent: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that asks the kernel to SIGKILL the child when PARENT dies; None where
    there is no prctl (not Linux): the child then runs as a plain child."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # here, not at the top: check imports this module, never runs a child
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill and reap PROC: the caller is about to roll back what it was writing."""
    with contextlib.suppress(OSError):
        proc.kill()
    with quiet_signals():
        proc.wait()


def run_installer(
    argv: Sequence[str],
    env: Mapping[str, str],
    echo: bool,
    started: Started | None = None,
) -> tuple[int, str]:
    """Run ARGV; its exit code and last lines of output (none when ECHO sends it to stderr).
    A child that cannot be started is exit 127 with the reason."""
    import subprocess

    try:
        proc = subprocess.Popen(
            list(argv),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=2 if echo else subprocess.PIPE,
            stderr=None if echo else subprocess.STDOUT,
            preexec_fn=_die_with_parent(os.getpid()),  # safe: a repair runs no threads
        )
    except OSError as exc:
        return 127, f"cannot run {argv[0]}: {exc.strerror or exc}"
    try:
        if started is not None:
            started(proc.pid)
        out, _ = proc.communicate()
    except BaseException:
        _stop(proc)
        raise
    text = (out or b"").decode("utf-8", "replace")
    return proc.returncode, "\n".join(text.splitlines()[-_TAIL_LINES:])


# --------------------------------------------------------------------------- signals


def _raise_terminated(_signum: int, _frame: FrameType | None) -> None:
    raise Terminated


@contextlib.contextmanager
def terminated_by_signal() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` inside the block (SIGINT raises KeyboardInterrupt as
    always), so that a run ends the way a failure does. Only in the main thread."""
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def quiet_signals() -> Iterator[None]:
    """SIGINT and SIGTERM ignored inside the block: a second Ctrl-C must not break off the
    rollback the first one started (SIGKILL still ends it; ``restore`` finishes it)."""
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# --------------------------------------------------------------------------- recorded children


def _cmdline(pid: int) -> tuple[str, ...] | None:
    """The running command of PID; None when it is gone, or a zombie (an empty cmdline)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    if not raw:
        return None
    return tuple(os.fsdecode(part) for part in raw.rstrip(b"\0").split(b"\0"))


def _runs(pid: int, argv: Sequence[str]) -> bool:
    cmdline = _cmdline(pid)
    if cmdline is None:
        return False
    tail = tuple(argv[1:])  # the program itself may be spelled otherwise (a resolved path)
    return len(cmdline) >= len(argv) and cmdline[len(cmdline) - len(tail) :] == tail


def still_running(pid: int, argv: Sequence[str], grace: float = 2.0) -> bool:
    """Whether PID still runs ARGV after up to GRACE seconds (an installer killed with its
    libdoctor a moment ago gets that long to go)."""
    deadline = time.monotonic() + grace
    while _runs(pid, argv):
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.05)
    return False


KILL_AT = "LIBDOCTOR_KILL_AT"
_reached: dict[str, int] = {}


def checkpoint(name: str) -> None:
    """A named moment of a repair (``before-backup``, ``mid-backup``, ``after-journal``,
    ``recheck``, ``mid-rollback``). With ``LIBDOCTOR_KILL_AT=NAME`` (or ``NAME@N``, the N-th
    time) libdoctor SIGKILLs itself there: the kill -9 sweep of the slow tests, which must
    find every such moment restorable. Costs one dictionary lookup otherwise."""
    wanted = os.environ.get(KILL_AT)
    if not wanted:
        return
    point, _, nth = wanted.partition("@")
    if point != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
