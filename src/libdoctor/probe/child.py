"""The child side of ``libdoctor probe``: the script run in the target interpreter, and its launch.

Each module is imported in a child process of the target's interpreter (``python -B``: no
bytecode written), in its own process group and an empty working directory, with a timeout after
which the whole group is killed. After the import the child reads its own ``/proc/self/maps`` and
writes one JSON document to a dedicated file descriptor (so the module's own prints cannot
corrupt it). Framework facts are then evaluated in the child, each in try/except, and written as
a second document. ``run_child`` turns what came back (or a timeout, or a crash) into a
``ChildReport``; judging it is ``probe.py``'s business.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from libdoctor.errors import LibdoctorError

__all__ = [
    "CHILD_SOURCE",
    "ChildReport",
    "MappedFile",
    "ProbeError",
    "run_child",
]


# Runs inside the target interpreter: stdlib only, and old-Python friendly (3.6+). It imports
# nothing that maps a shared object before the module's maps are read (json brings _json.so).
CHILD_SOURCE = r"""
import os, sys, time


def _maps():
    found, seen = [], set()
    try:
        with open("/proc/self/maps") as handle:
            for line in handle:
                parts = line.rstrip("\n").split(None, 5)
                if len(parts) < 6 or not parts[5].startswith("/"):
                    continue
                path, deleted = parts[5], False
                if path.endswith(" (deleted)"):
                    path, deleted = path[: -len(" (deleted)")], True
                if path not in seen:
                    seen.add(path)
                    found.append([path, parts[3], int(parts[4]), deleted])
    except OSError:
        return None
    return found


def _plain(value):
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def main():
    fd, module, facts = int(sys.argv[1]), sys.argv[2], _load(sys.argv[3])
    report = {"module": module, "executable": sys.executable, "pid": os.getpid(),
              "sys_path": list(sys.path)}
    start = time.time()
    try:
        import importlib
        importlib.import_module(module)
        report["ok"] = True
    except BaseException as exc:
        import traceback
        report["ok"] = False
        report["error"] = {"type": type(exc).__name__, "message": str(exc),
                           "traceback": traceback.format_exc()[-8000:]}
    report["seconds"] = round(time.time() - start, 3)
    report["maps"] = _maps()
    _emit(fd, report)  # first line: the import, safe even if a fact hangs below
    if report["ok"] and facts:
        root = module.split(".")[0]
        before = set(entry[0] for entry in _maps() or [])
        values = {}
        for name, expression in facts:
            try:
                values[name] = _plain(eval(expression, {root: sys.modules[root]}))
            except BaseException as exc:
                values[name] = {"error": "%s: %s" % (type(exc).__name__, exc)}
        after = [e for e in (_maps() or []) if e[0] not in before]
        _emit(fd, {"facts": values, "loaded_by_facts": after})


def _load(text):
    # The facts list is made of plain strings: no json module needed to read it.
    import ast
    return ast.literal_eval(text)


def _emit(fd, document):
    import json
    data = (json.dumps(document) + "\n").encode("utf-8", "surrogateescape")
    while data:
        data = data[os.write(fd, data):]


main()
"""


class ProbeError(LibdoctorError):
    """The probe cannot run at all (no interpreter, cannot start a process)."""


# --------------------------------------------------------------------------- the child


@dataclass(frozen=True, slots=True)
class MappedFile:
    path: str  # as /proc/self/maps shows it: symlinks resolved
    device: str
    inode: int
    deleted: bool


@dataclass(frozen=True, slots=True)
class ChildReport:
    module: str
    ok: bool
    timed_out: bool
    seconds: float
    error_type: str | None = None
    error_message: str | None = None
    traceback: str | None = None
    maps: tuple[MappedFile, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)
    loaded_by_facts: tuple[MappedFile, ...] = ()
    returncode: int | None = None
    stderr_tail: str = ""
    sys_path: tuple[str, ...] = ()
    facts_timed_out: bool = False  # the import worked; a framework fact hung


def _mapped(rows: Any) -> tuple[MappedFile, ...]:
    if not isinstance(rows, list):
        return ()
    return tuple(MappedFile(str(r[0]), str(r[1]), int(r[2]), bool(r[3])) for r in rows)


def signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def run_child(
    python: str,
    module: str,
    *,
    timeout: float,
    facts: Sequence[tuple[str, str]] = (),
    environ: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> ChildReport:
    """Import MODULE in a child of PYTHON; kill its process group after TIMEOUT seconds."""
    env = dict(os.environ if environ is None else environ)
    workdir = cwd or tempfile.mkdtemp(prefix="libdoctor-probe-")
    with tempfile.TemporaryFile() as out:
        proc = _launch(python, module, facts, env, workdir, out.fileno())
        try:
            stderr, timed_out = _wait(proc, timeout)
        finally:
            if cwd is None:
                shutil.rmtree(workdir, ignore_errors=True)
        out.seek(0)
        raw = out.read()
    tail = stderr.decode("utf-8", "replace")[-4000:]
    documents = _documents(raw)
    if not documents:
        return _unreported(module, timeout, timed_out, proc.returncode, tail)
    return _reported(module, timeout, timed_out, documents, proc.returncode, tail)


def _launch(
    python: str,
    module: str,
    facts: Sequence[tuple[str, str]],
    env: dict[str, str],
    workdir: str,
    fd: int,
) -> subprocess.Popen[bytes]:
    """Start CHILD_SOURCE in PYTHON, in a session of its own, writing its report to FD."""
    argv = [python, "-B", "-c", CHILD_SOURCE, str(fd), module, repr([list(f) for f in facts])]
    try:
        return subprocess.Popen(
            argv,
            env=env,
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(fd,),
            start_new_session=True,
        )
    except OSError as exc:
        raise ProbeError(f"cannot run {python}: {exc.strerror or exc}") from None


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> tuple[bytes, bool]:
    """(stderr, timed out): after TIMEOUT seconds the child's whole process group is killed,
    so that processes the import started die with it."""
    try:
        _, stderr = proc.communicate(timeout=timeout)
        return stderr, False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        _, stderr = proc.communicate()
        return stderr, True


def _unreported(
    module: str, timeout: float, timed_out: bool, code: int | None, tail: str
) -> ChildReport:
    """The child wrote no report: the import hung and was killed, or the interpreter died."""
    if timed_out:
        return ChildReport(
            module, False, True, timeout,
            error_type="Timeout",
            error_message=f"import {module} did not finish within {timeout:g} s; "
            "libdoctor killed its process group",
            returncode=code, stderr_tail=tail,
        )  # fmt: skip
    why = (
        f"the interpreter died with {signal_name(code)}"
        if code is not None and code < 0
        else f"the interpreter exited with status {code}"
    )
    return ChildReport(
        module, False, False, 0.0,
        error_type="Crash", error_message=f"{why} while importing {module}",
        returncode=code, stderr_tail=tail,
    )  # fmt: skip


def _reported(
    module: str,
    timeout: float,
    timed_out: bool,
    documents: list[dict[str, Any]],
    code: int | None,
    tail: str,
) -> ChildReport:
    """The child's report of the import, and of the facts when it got that far."""
    doc = documents[0]
    error = doc.get("error") or {}
    facts_doc = documents[1] if len(documents) > 1 else {}
    facts_found: Mapping[str, Any] = facts_doc.get("facts") or {}
    if timed_out:  # the import finished; a fact hung
        facts_found = {
            "error": f"gathering the facts did not finish within {timeout:g} s; "
            "libdoctor killed its process group"
        }
    return ChildReport(
        module=module,
        ok=bool(doc.get("ok")),
        timed_out=False,
        seconds=float(doc.get("seconds", 0.0)),
        error_type=error.get("type"),
        error_message=error.get("message"),
        traceback=error.get("traceback"),
        maps=_mapped(doc.get("maps")),
        facts=facts_found,
        loaded_by_facts=_mapped(facts_doc.get("loaded_by_facts")),
        returncode=code,
        stderr_tail=tail,
        sys_path=tuple(doc.get("sys_path") or ()),
        facts_timed_out=timed_out,
    )


def _documents(raw: bytes) -> list[dict[str, Any]]:
    """The child's JSON lines, up to the first one that is not a complete object."""
    found: list[dict[str, Any]] = []
    for line in raw.decode("utf-8", "surrogateescape").split("\n"):
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            break
        if not isinstance(doc, dict):
            break
        found.append(doc)
    return found
