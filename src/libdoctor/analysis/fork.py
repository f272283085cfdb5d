"""Work in a forked child beside the caller: the loader and stack checks of ``check``.

On a second core the child hides the loader work behind the file checks. Everything here
falls back to doing the work in the caller, so a result never depends on the fork.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Generic, TypeVar

_PIPE_BUF = 4096  # POSIX: a write this small to an empty pipe completes at once
T = TypeVar("T")
V = TypeVar("V")


class Later(Generic[V]):
    """A value the parent computes after forking, for a child that asks for it: a pipe.

    Without a child (no fork, or the child failed and the work runs here) the value is
    simply kept.
    """

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        self._value: V | None = None
        self._have = False

    def forked(self, child: bool) -> None:
        os.close(self._write if child else self._read)
        if child:
            self._write = -1
        else:
            self._read = -1

    def set(self, value: V, wire: Any) -> None:
        """Parent: VALUE here; WIRE, what the child needs of it (marshal-able), to it."""
        self._value, self._have = value, True
        if self._write < 0:
            return
        if self._read >= 0:  # no child: nobody to send it to
            os.close(self._read)
            os.close(self._write)
            self._read = self._write = -1
            return
        import marshal

        data = marshal.dumps(wire)
        if len(data) <= _PIPE_BUF:  # fits an empty pipe at once: the write cannot block
            _send(self._write, data)
        else:  # a writer thread: the child may not read yet (or ever); a pipe holds 64 KiB
            import threading

            threading.Thread(target=_send, args=(self._write, data), daemon=True).start()
        self._write = -1

    @property
    def here(self) -> bool:
        """The value is in this process (the parent, or no child was forked)."""
        return self._have

    def get(self) -> V | None:
        if self._have:
            return self._value
        import marshal

        with os.fdopen(self._read, "rb") as handle:
            data = handle.read()
        self._read = -1
        if not data:  # the parent failed before hashing: nothing to compare with
            return None
        value: V = marshal.loads(data)
        return value


def _send(fd: int, data: bytes) -> None:
    try:
        with os.fdopen(fd, "wb") as out:  # closing it is the child's EOF
            out.write(data)
    except OSError:  # the child is gone: its result is recomputed at the wait
        pass


def started_in_child(work: Callable[[], T], later: Later[V] | None = None) -> Callable[[], T]:
    """Run WORK in a forked child while the caller goes on; the result is a function that
    waits for it. On a second core this hides the loader work behind the file checks.

    Falls back to running WORK in the caller (at the wait) without fork, on one core, or
    when the child fails for any reason: the result never depends on the fork. LATER, if
    given, is a value the caller sets after the fork and the child may wait for.
    """
    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        return work
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no threads exist yet, so forking is safe
        code = 1
        try:
            import pickle

            os.close(read_end)
            if later is not None:
                later.forked(child=True)
            data = pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    if later is not None:
        later.forked(child=False)

    def wait() -> T:
        with os.fdopen(read_end, "rb") as handle:
            data = handle.read()
        _, status = os.waitpid(pid, 0)
        if status == 0 and data:
            import pickle

            try:
                result: T = pickle.loads(data)
                return result
            except Exception:  # any damage: compute it here instead
                pass
        return work()

    return wait
