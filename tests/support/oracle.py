"""The real glibc loader as the oracle for libdoctor's loader emulation (LOADER_SPEC §5).

``env -i LD_TRACE_LOADED_OBJECTS=1 /lib64/ld-linux-x86-64.so.2 [options] FILE`` maps FILE and its
dependencies in a live process without running any of their code, and prints the loaded objects
breadth-first. ``ld.so --list`` is not used: glibc 2.36 aborts it at the first missing library.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["LOADER", "OracleEntry", "OracleTrace", "run_oracle"]

LOADER = "/lib64/ld-linux-x86-64.so.2"

_ARROW = re.compile(r"^\t(?P<name>.*?) => (?P<path>.*) \(0x[0-9a-f]+\)$")
_NOT_FOUND = re.compile(r"^\t(?P<name>.*) => not found$")
_PLAIN = re.compile(r"^\t(?P<name>.*) \(0x[0-9a-f]+\)$")
_ERROR = re.compile(r"^(?P<file>.*?): error while loading shared libraries: (?P<rest>.*)$")


@dataclass(frozen=True, slots=True)
class OracleEntry:
    """One trace line: the name the object was first requested by, and its path (None: missing)."""

    name: str
    path: str | None


@dataclass(frozen=True, slots=True)
class OracleTrace:
    entries: tuple[OracleEntry, ...]  # in the loader's order, linux-vdso left out
    returncode: int
    error_object: str | None  # "error while loading shared libraries: OBJ: reason"
    error_reason: str | None
    other_lines: tuple[str, ...]  # anything unparsed (version warnings, ...)

    @property
    def found(self) -> tuple[OracleEntry, ...]:
        return tuple(e for e in self.entries if e.path is not None)

    @property
    def not_found(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.entries if e.path is None)


def _parse_error(stderr: str) -> tuple[str | None, str | None]:
    for line in stderr.splitlines():
        match = _ERROR.match(line)
        if match is None:
            continue
        rest = match["rest"]
        # "OBJ: reason"; OBJ itself may contain ": " only in pathological names.
        obj, sep, reason = rest.partition(": ")
        return (obj, reason) if sep else (rest, None)
    return None, None


def parse_trace(stdout: str, stderr: str, returncode: int) -> OracleTrace:
    entries: list[OracleEntry] = []
    other: list[str] = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        if (m := _NOT_FOUND.match(line)) is not None:
            entries.append(OracleEntry(m["name"], None))
        elif (m := _ARROW.match(line)) is not None:
            entries.append(OracleEntry(m["name"], m["path"]))
        elif (m := _PLAIN.match(line)) is not None:
            entries.append(OracleEntry(m["name"], m["name"]))
        else:
            other.append(line)
    entries = [e for e in entries if not e.name.startswith("linux-vdso.so")]
    error_object, error_reason = _parse_error(stderr)
    return OracleTrace(tuple(entries), returncode, error_object, error_reason, tuple(other))


def run_oracle(
    file: str | os.PathLike[str],
    *,
    library_path: str | None = None,
    preload: Sequence[str] = (),
    inhibit_cache: bool = False,
    cwd: str | os.PathLike[str] | None = None,
    loader: str = LOADER,
    timeout: float = 60,
) -> OracleTrace:
    """Trace FILE's load with the real loader in an empty environment."""
    cmd = ["env", "-i", "LD_TRACE_LOADED_OBJECTS=1", loader]
    if library_path is not None:
        cmd += ["--library-path", library_path]
    if preload:
        cmd += ["--preload", " ".join(preload)]
    if inhibit_cache:
        cmd.append("--inhibit-cache")
    cmd.append(os.fspath(file))
    done = subprocess.run(
        cmd, capture_output=True, text=True, cwd=cwd, timeout=timeout, check=False
    )
    return parse_trace(done.stdout, done.stderr, done.returncode)
