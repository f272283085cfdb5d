"""The guard: small ``pip``, ``pip3``, ``pip3.X`` and ``uv`` wrappers put first in an
environment's own ``bin/``, so that an install or uninstall aimed at it is planned by
libdoctor first and stopped before it breaks something.

Each wrapper is a ``/bin/sh`` script. ``LIBDOCTOR_GUARD=off`` and every command line without
the word ``install``/``uninstall`` go straight to the real tool by ``exec`` (same argv, no
Python started); the rest start libdoctor's interpreter on ``cli.intercept``, which plans and
then ``exec``s the real tool, or refuses. Every path in a wrapper is a single-quoted ``sh``
word (a prefix may hold a newline, a quote or ``$(...)``); none is in a comment.

The originals are moved, never copied, into ``bin/.libdoctor-guard/`` (inode, mode and mtime
kept) with a manifest of what was there (name, mode, mtime, sha256) and the bin directory's
times; ``remove_guard`` moves them back and puts the directory's times back, so the
environment is byte-identical to before. A wrapper something else replaced since (pip
upgrading itself) is left as that installer wrote it, and said so.

Install and remove are transactions under a ``flock`` of the bin directory: the manifest is
written (by rename) before the first original moves and removed after the last one is back,
and each entry's state is read from the disk (wrapper, original, something else, nothing), so
a run killed at any moment is finished by the next ``install`` or ``remove``. A name from the
manifest is one of the names the guard writes (``pip``, ``pip3``, ``pipX.Y``, ``uv``) before
it becomes a path. The kill -9 sweep stops a run at the ``LIBDOCTOR_KILL_AT`` checkpoints
``guard-install-dir``, ``guard-install-manifest``, ``guard-install-moved``,
``guard-install-wrapped``, ``guard-remove-entry`` and ``guard-remove-manifest``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from libdoctor.environment.model import GUARD_DIR, GUARD_MARKER
from libdoctor.environment.target import Target
from libdoctor.errors import LibdoctorError
from libdoctor.external.process import checkpoint

__all__ = [
    "GUARD_DIR",
    "LOCK_WAIT",
    "MANIFEST_LIMIT",
    "MARKER",
    "GuardEntry",
    "GuardManifest",
    "GuardRemoval",
    "GuardStatus",
    "guard_status",
    "install_guard",
    "remove_guard",
    "shell_functions",
]

_MANIFEST = "manifest.json"
_MANIFEST_TMP = ".manifest.tmp"
_WRAPPER_TMP = ".tmp-"  # + name: a wrapper being written, renamed into bin/ when whole
MANIFEST_LIMIT = 1 << 20  # bytes: a manifest of four entries is ~2 KB
LOCK_WAIT = 30.0  # seconds another guard install/remove of the same bin/ is waited for
_HEAD = 512  # bytes read to tell a wrapper by its marker
# The only names the guard writes, so the only ones a manifest may name.
_NAMES = re.compile(r"pip|pip3|pip[0-9]{1,2}\.[0-9]{1,3}|uv")
_SHA256 = re.compile(r"[0-9a-f]{64}")
MARKER = GUARD_MARKER.decode()  # `check` knows a wrapper by it (environment.model)
# argv: SOURCE TOOL REAL PREFIX ARGS...; a libdoctor gone since runs the real tool unguarded.
_INTERCEPT = """import os, sys
sys.path.insert(0, sys.argv[1])
try:
    from libdoctor.cli.intercept import main
except ImportError as exc:
    sys.stderr.write(f"libdoctor guard: {exc}: running {sys.argv[3]} unguarded\\n")
    os.execvp(sys.argv[3], sys.argv[3:4] + sys.argv[5:])
main(sys.argv[2:])
"""

EntryState = Literal["wrapped", "original", "replaced", "missing"]
"""What stands at ``bin/NAME``: a guard wrapper; the original the manifest records (not moved
yet, or put back); something else (a pip self-upgrade); nothing."""


@dataclass(frozen=True, slots=True)
class Original:
    """What stood at ``bin/NAME`` before the guard: a file or a symlink (its target's bytes
    are not ours to record: the link text is)."""

    kind: Literal["file", "symlink"]
    mode: int
    mtime_ns: int
    atime_ns: int
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class GuardEntry:
    name: str
    tool: Literal["pip", "uv"]
    original: Original | None  # None: nothing stood there (uv, in most environments)
    wrapper_sha256: str


@dataclass(frozen=True, slots=True)
class GuardManifest:
    prefix: str
    bin_dir: str
    python: str  # libdoctor's interpreter, which the wrappers start
    source: str  # the directory that holds the libdoctor package, put first on its path
    bin_atime_ns: int
    bin_mtime_ns: int
    entries: tuple[GuardEntry, ...]
    version: int = 1


@dataclass(frozen=True, slots=True)
class GuardStatus:
    manifest: GuardManifest | None
    states: tuple[tuple[str, EntryState], ...]
    kept: frozenset[str] = frozenset()  # names whose original is in the guard dir
    orphan: bool = False  # no manifest, but a guard dir: an interrupted install or remove

    @property
    def whole(self) -> bool:
        return self.manifest is not None and all(s == "wrapped" for _, s in self.states)


@dataclass(frozen=True, slots=True)
class GuardRemoval:
    restored: tuple[str, ...]  # originals moved back (or found back already)
    removed: tuple[str, ...]  # wrappers removed where nothing stood before
    left: tuple[str, ...]  # replaced or deleted since (a pip upgrade): left as it is
    stray: tuple[str, ...] = ()  # files in the guard dir the guard did not put there


# --------------------------------------------------------------------------- the disk


@dataclass(frozen=True, slots=True)
class _Seen:
    """One look at ``bin/NAME`` (never through a symlink): its kind and digest."""

    kind: Literal["file", "symlink", "other"]
    st: os.stat_result
    sha256: str
    marked: bool  # a guard wrapper: the marker on its second line


def _look(path: str) -> _Seen | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        digest = hashlib.sha256(os.fsencode(os.readlink(path))).hexdigest()
        return _Seen("symlink", st, digest, False)
    if not stat.S_ISREG(st.st_mode):
        return _Seen("other", st, "", False)  # a FIFO, a device, a directory: never opened
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return _Seen("other", st, "", False)  # swapped since the lstat
        head = handle.read(_HEAD)
        hasher = hashlib.sha256(head)
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            hasher.update(chunk)
    lines = head.split(b"\n", 2)
    marked = len(lines) > 1 and lines[1].startswith(GUARD_MARKER)
    return _Seen("file", st, hasher.hexdigest(), marked)


def _state_of(seen: _Seen | None, entry: GuardEntry) -> EntryState:
    if seen is None:
        return "missing"
    if seen.sha256 == entry.wrapper_sha256 or seen.marked:
        return "wrapped"  # this wrapper, or one another libdoctor wrote: the guard's own
    original = entry.original
    if original is not None and (seen.kind, seen.sha256) == (original.kind, original.sha256):
        return "original"
    return "replaced"


def _original(seen: _Seen | None, path: str) -> Original | None:
    if seen is None or seen.marked:  # a wrapper whose original is lost is not one
        return None
    if seen.kind == "other":
        raise LibdoctorError(f"{path} is not a file or a symlink: refusing to guard it")
    st = seen.st
    return Original(
        seen.kind, stat.S_IMODE(st.st_mode), st.st_mtime_ns, st.st_atime_ns, st.st_size,
        seen.sha256,
    )  # fmt: skip


def _create(path: str, data: bytes, mode: int) -> None:
    """A new file at PATH (a stale one, or a symlink planted there, unlinked first: never
    written through)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fchmod(handle.fileno(), mode)
        os.fsync(handle.fileno())


def _bin_dir(target: Target) -> str:
    path = os.path.join(target.prefix, "bin")
    if target.target_dir or not os.path.isdir(path):
        raise LibdoctorError(f"{target.prefix} has no bin/ directory to guard")
    return path


def _has_guard_dir(bin_dir: str) -> bool:
    """Whether ``bin/.libdoctor-guard`` is there; a one-line error when it is there but is
    no plain directory (a symlink would take every move and unlink outside the env)."""
    guard = os.path.join(bin_dir, GUARD_DIR)
    try:
        st = os.lstat(guard)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        raise LibdoctorError(f"{guard} is not a directory the guard made: refusing to touch it")
    return True


@contextlib.contextmanager
def _locked(bin_dir: str, wait: float) -> Iterator[None]:
    """An exclusive ``flock`` of BIN_DIR itself (no lock file left behind), waited for up to
    WAIT seconds: two guard runs on one environment take turns."""
    import fcntl

    fd = os.open(bin_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LibdoctorError(
                        f"another `libdoctor guard` is changing {bin_dir} (waited {wait:g} s):"
                        " try again once it is done"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- the manifest


class _Damaged(ValueError):
    pass


def _typed(doc: Mapping[str, Any], key: str, kind: type) -> Any:
    value = doc.get(key)
    if type(value) is not kind:  # `type is`: true is no int here
        raise _Damaged(f"{key!r} is not a {kind.__name__}")
    return value


def _entry_from(doc: Any) -> GuardEntry:
    if not isinstance(doc, dict):
        raise _Damaged("an entry is not an object")
    name = _typed(doc, "name", str)
    if not _NAMES.fullmatch(name):
        raise _Damaged(f"entry {name!r} is not a name the guard writes (pip, pip3, pipX.Y, uv)")
    tool = _typed(doc, "tool", str)
    if tool != ("uv" if name == "uv" else "pip"):
        raise _Damaged(f"entry {name!r} has tool {tool!r}")
    if not _SHA256.fullmatch(_typed(doc, "wrapper_sha256", str)):
        raise _Damaged(f"entry {name!r} has no sha256 of its wrapper")
    raw = doc.get("original")
    original = None
    if raw is not None:
        if not isinstance(raw, dict) or raw.get("kind") not in ("file", "symlink"):
            raise _Damaged(f"entry {name!r} has a damaged original")
        ints = {k: _typed(raw, k, int) for k in ("mode", "mtime_ns", "atime_ns", "size")}
        if not _SHA256.fullmatch(_typed(raw, "sha256", str)) or not 0 <= ints["mode"] <= 0o7777:
            raise _Damaged(f"entry {name!r} has a damaged original")
        original = Original(raw["kind"], **ints, sha256=raw["sha256"])
    return GuardEntry(name, tool, original, doc["wrapper_sha256"])


def _manifest_from(doc: Any) -> GuardManifest:
    if not isinstance(doc, dict):
        raise _Damaged("not a JSON object")
    if _typed(doc, "version", int) != 1:
        raise _Damaged(f"version {doc['version']} is not 1")
    raw_entries = doc.get("entries")
    if not isinstance(raw_entries, list) or len(raw_entries) > 16:
        raise _Damaged("'entries' is not a list of at most 16")
    entries = tuple(_entry_from(e) for e in raw_entries)
    if len({e.name for e in entries}) != len(entries):
        raise _Damaged("an entry is named twice")
    strings = {k: _typed(doc, k, str) for k in ("prefix", "bin_dir", "python", "source")}
    times = {k: _typed(doc, k, int) for k in ("bin_atime_ns", "bin_mtime_ns")}
    return GuardManifest(**strings, **times, entries=entries)


def read_manifest(bin_dir: str) -> GuardManifest | None:
    """The manifest in BIN_DIR's guard dir, checked; None when there is none. Read as an
    attacker may have written it: bounded, never through a symlink, every name checked."""
    if not _has_guard_dir(bin_dir):
        return None
    path = os.path.join(bin_dir, GUARD_DIR, _MANIFEST)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LibdoctorError(f"{path} is unreadable: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise _Damaged("not a regular file")
            data = handle.read(MANIFEST_LIMIT + 1)
        if len(data) > MANIFEST_LIMIT:
            raise _Damaged(f"over MANIFEST_LIMIT ({MANIFEST_LIMIT} bytes)")
        return _manifest_from(json.loads(data))
    except (OSError, ValueError, RecursionError) as exc:  # _Damaged and JSON errors: ValueError
        raise LibdoctorError(
            f"{path} is damaged: {exc} (with it deleted, `libdoctor guard remove` puts back "
            "the originals kept beside it)"
        ) from None


def _write_manifest(bin_dir: str, manifest: GuardManifest) -> None:
    guard = os.path.join(bin_dir, GUARD_DIR)
    tmp = os.path.join(guard, _MANIFEST_TMP)
    _create(tmp, (json.dumps(asdict(manifest), indent=2) + "\n").encode(), 0o644)
    os.replace(tmp, os.path.join(guard, _MANIFEST))


# --------------------------------------------------------------------------- reading


def tool_names(target: Target, bin_dir: str) -> list[tuple[str, Literal["pip", "uv"]]]:
    """pip's scripts that are there (a uv-made env has none), and always ``uv``."""
    version = target.python_version
    names = ["pip", "pip3", *([f"pip{version[0]}.{version[1]}"] if version else [])]
    found: list[tuple[str, Literal["pip", "uv"]]] = [
        (n, "pip") for n in names if os.path.lexists(os.path.join(bin_dir, n))
    ]
    return [*found, ("uv", "uv")]


def _kept(bin_dir: str, name: str) -> str:
    return os.path.join(bin_dir, GUARD_DIR, name)


def _state(bin_dir: str, entry: GuardEntry) -> EntryState:
    return _state_of(_look(os.path.join(bin_dir, entry.name)), entry)


def guard_status(target: Target) -> GuardStatus:
    bin_dir = _bin_dir(target)
    manifest = read_manifest(bin_dir)
    if manifest is None:
        return GuardStatus(None, (), orphan=_has_guard_dir(bin_dir))
    states = tuple((e.name, _state(bin_dir, e)) for e in manifest.entries)
    kept = frozenset(e.name for e in manifest.entries if os.path.lexists(_kept(bin_dir, e.name)))
    return GuardStatus(manifest, states, kept)


# --------------------------------------------------------------------------- the wrappers


def wrapper_text(
    tool: Literal["pip", "uv"], name: str, bin_dir: str, prefix: str, python: str, source: str
) -> str:
    """The ``/bin/sh`` wrapper for NAME: fast exec for everything but install/uninstall.
    Paths only ever as quoted words, never in a comment (a newline would end it)."""
    q = shlex.quote
    guard = os.path.join(bin_dir, GUARD_DIR)
    gone = f"libdoctor guard: {python} is gone: running {name} unguarded"
    lines = [
        "#!/bin/sh",
        f"{MARKER}: {name}",
        '# `libdoctor guard remove "$prefix"` puts the original back.',
        f"prefix={q(prefix)}",
    ]
    if tool == "pip":
        lines.append(f"real={q(os.path.join(guard, name))}")
    else:
        lines += _find_uv(bin_dir, guard)
    lines += [
        'case "${LIBDOCTOR_GUARD-}" in off|0|no|false) exec "$real" "$@";; esac',
        'for arg in "$@"; do',
        "  case $arg in",
        "    install|uninstall)",
        f"      if [ -x {q(python)} ]; then",
        f'        exec {q(python)} -I -c {q(_INTERCEPT)} {q(source)} {tool} "$real" "$prefix" "$@"',
        "      fi",
        f"      printf '%s\\n' {q(gone)} >&2",
        "      break;;",
        "  esac",
        "done",
        'exec "$real" "$@"',
    ]
    return "\n".join(lines) + "\n"


def _find_uv(bin_dir: str, guard: str) -> list[str]:
    """The real uv: the env's own, kept in the guard dir, else the first on PATH that is
    not this wrapper (PATH without this bin dir)."""
    q = shlex.quote
    return [
        f"self_dir={q(bin_dir)}",
        f"real={q(os.path.join(guard, 'uv'))}",
        'if [ ! -x "$real" ]; then',
        "  real=",
        "  saved_ifs=$IFS; IFS=:; set -f",
        "  for dir in $PATH; do",
        '    [ -n "$dir" ] || dir=.',
        '    [ "$dir" = "$self_dir" ] && continue',
        '    if [ -x "$dir/uv" ] && [ ! "$dir/uv" -ef "$self_dir/uv" ]; then',
        "      real=$dir/uv; break",
        "    fi",
        "  done",
        "  IFS=$saved_ifs; set +f",
        '  if [ -z "$real" ]; then',
        '    echo "uv: not found (libdoctor guard: no uv on PATH but this wrapper)" >&2',
        "    exit 127",
        "  fi",
        "fi",
    ]


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")  # a path's undecodable bytes, as they were


# --------------------------------------------------------------------------- install


def install_guard(
    target: Target, python: str, source: str, *, wait: float = LOCK_WAIT
) -> GuardManifest:
    """Put the wrappers in place (again, for any a pip upgrade replaced or a kill left)."""
    bin_dir = _bin_dir(target)
    with _locked(bin_dir, wait):
        old = read_manifest(bin_dir)
        if old is None and _has_guard_dir(bin_dir):
            _recover(bin_dir)  # what an interrupted run left, back where it was
        st = os.stat(bin_dir)
        times = (old.bin_atime_ns, old.bin_mtime_ns) if old else (st.st_atime_ns, st.st_mtime_ns)
        texts: dict[str, bytes] = {}
        entries: list[GuardEntry] = []
        previous = {e.name: e for e in old.entries} if old else {}
        for name, tool in _names(target, bin_dir, previous):  # nothing written before it
            texts[name] = _encoded(wrapper_text(tool, name, bin_dir, target.prefix, python, source))
            digest = hashlib.sha256(texts[name]).hexdigest()
            entries.append(_planned(bin_dir, name, tool, previous.get(name), digest))
        if not _has_guard_dir(bin_dir):
            os.mkdir(os.path.join(bin_dir, GUARD_DIR), 0o755)
            checkpoint("guard-install-dir")
        manifest = GuardManifest(target.prefix, bin_dir, python, source, *times, tuple(entries))
        _write_manifest(bin_dir, manifest)  # before the first original moves
        checkpoint("guard-install-manifest")
        for entry in entries:
            _put_wrapper(bin_dir, entry, texts[entry.name])
    return manifest


def _names(
    target: Target, bin_dir: str, previous: Mapping[str, GuardEntry]
) -> list[tuple[str, Literal["pip", "uv"]]]:
    """What to wrap: pip's scripts there now, and every name the manifest has (one deleted
    since keeps its entry, and so its kept original)."""
    found = dict(tool_names(target, bin_dir))
    for name, entry in previous.items():
        found.setdefault(name, entry.tool)
    return list(found.items())


def _planned(
    bin_dir: str,
    name: str,
    tool: Literal["pip", "uv"],
    entry: GuardEntry | None,
    digest: str,
) -> GuardEntry:
    """NAME's manifest entry, from what stands at ``bin/NAME`` and what the manifest said."""
    path = os.path.join(bin_dir, name)
    seen = _look(path)
    if entry is not None:
        state = _state_of(seen, entry)
        if state in ("wrapped", "original"):
            return replace(entry, wrapper_sha256=digest)
        if state == "missing":  # deleted since: the kept original, if it still is
            original = entry.original if os.path.lexists(_kept(bin_dir, name)) else None
            return GuardEntry(name, tool, original, digest)
    # never wrapped, or replaced since (a pip self-upgrade): what stands there is the original
    return GuardEntry(name, tool, _original(seen, path), digest)


def _put_wrapper(bin_dir: str, entry: GuardEntry, text: bytes) -> None:
    """Move ENTRY's original into the guard dir (if it is still in bin/), then rename the
    wrapper in: each step finished or not started, whatever kills us between them."""
    path = os.path.join(bin_dir, entry.name)
    seen = _look(path)
    state = _state_of(seen, entry)
    if state == "wrapped" and seen is not None and seen.sha256 == entry.wrapper_sha256:
        return
    if state == "replaced":
        raise LibdoctorError(f"{path} changed while the guard was installed: run it again")
    if state == "original":
        os.replace(path, _kept(bin_dir, entry.name))
        checkpoint("guard-install-moved")
    tmp = _kept(bin_dir, _WRAPPER_TMP + entry.name)
    _create(tmp, text, 0o755)
    os.replace(tmp, path)  # by rename, never in place: PATH may be hard-linked elsewhere
    checkpoint("guard-install-wrapped")


def _recover(bin_dir: str) -> tuple[list[str], list[str]]:
    """A guard dir with no manifest (an older libdoctor killed mid-install, or a remove
    killed after the manifest went): every original in it goes back where only a wrapper or
    nothing stands, the guard's temporary files go, and so does the dir if that empties it.
    The names put back, and those left (not the guard's to remove)."""
    guard = os.path.join(bin_dir, GUARD_DIR)
    restored: list[str] = []
    kept = {n for n in os.listdir(guard) if _NAMES.fullmatch(n)}
    for name in sorted(kept):
        seen = _look(os.path.join(bin_dir, name))
        if seen is None or seen.marked:
            os.replace(os.path.join(guard, name), os.path.join(bin_dir, name))
            restored.append(name)
    for name in sorted(n for n in os.listdir(bin_dir) if _NAMES.fullmatch(n) and n not in kept):
        seen = _look(os.path.join(bin_dir, name))
        if seen is not None and seen.marked:  # a wrapper with no original: nothing stood there
            os.unlink(os.path.join(bin_dir, name))
    return restored, _clear(guard)


def _clear(guard: str) -> list[str]:
    """Remove the guard dir once only its manifest and temporary files are in it; anything
    else in it is not the guard's: it stays, and is named."""
    stray: list[str] = []
    for name in sorted(os.listdir(guard)):
        temporary = name.startswith(_WRAPPER_TMP) and _NAMES.fullmatch(name[len(_WRAPPER_TMP) :])
        if name in (_MANIFEST, _MANIFEST_TMP) or temporary:
            os.unlink(os.path.join(guard, name))
        else:
            stray.append(name)
    if not stray:
        os.rmdir(guard)
    return stray


# --------------------------------------------------------------------------- remove


def remove_guard(target: Target, *, wait: float = LOCK_WAIT) -> GuardRemoval:
    """Undo ``install_guard``: originals back, the guard dir gone, the bin dir's times back;
    also finishes an install or remove that was killed."""
    bin_dir = _bin_dir(target)
    with _locked(bin_dir, wait):
        manifest = read_manifest(bin_dir)
        if manifest is None:
            if not _has_guard_dir(bin_dir):
                raise LibdoctorError(f"{target.prefix} is not guarded (no {GUARD_DIR}/{_MANIFEST})")
            restored, stray = _recover(bin_dir)
            return GuardRemoval(tuple(restored), (), (), tuple(stray))
        done: dict[str, list[str]] = {"restored": [], "removed": [], "left": []}
        for entry in manifest.entries:
            done[_unwrap(bin_dir, entry)].append(entry.name)
            checkpoint("guard-remove-entry")
        guard = os.path.join(bin_dir, GUARD_DIR)
        os.unlink(os.path.join(guard, _MANIFEST))  # after the last original is back
        checkpoint("guard-remove-manifest")
        stray = _clear(guard)
        if not done["left"] and not stray:  # else bin/ changed since: its times are not ours
            os.utime(bin_dir, ns=(manifest.bin_atime_ns, manifest.bin_mtime_ns))
    return GuardRemoval(
        tuple(done["restored"]), tuple(done["removed"]), tuple(done["left"]), tuple(stray)
    )


def _unwrap(bin_dir: str, entry: GuardEntry) -> Literal["restored", "removed", "left"]:
    """Put ENTRY's original back: over its wrapper, or where the wrapper was deleted. A
    script something else wrote since (pip upgrading itself) stays, and the kept original
    it superseded goes."""
    path, kept = os.path.join(bin_dir, entry.name), _kept(bin_dir, entry.name)
    state = _state(bin_dir, entry)
    has_kept = entry.original is not None and os.path.lexists(kept)
    if state in ("wrapped", "missing") and has_kept:
        os.replace(kept, path)
        return "restored"
    if state == "wrapped":
        os.unlink(path)  # nothing stood there (or its original is lost: the wrapper is ours)
        return "removed"
    if state == "original":
        return "restored"  # back already (a remove killed after it), or never moved
    if state == "missing" and entry.original is None:
        return "removed"  # nothing stood there, nothing stands (a remove killed after it)
    if os.path.lexists(kept):
        os.unlink(kept)
    return "left"


def shell_functions(python: str, source: str, shell_names: tuple[str, ...]) -> str:
    """Shell functions for ``eval``: the same interception, nothing written. Each finds the
    real tool on PATH and guards the environment it is aimed at."""
    q = shlex.quote
    lines = [
        f'{MARKER}: eval "$(libdoctor guard shell)"; undo with: unset -f {" ".join(shell_names)}'
    ]
    for name in shell_names:
        tool = "uv" if name == "uv" else "pip"
        lines.append(
            f'{name}() {{ case "${{LIBDOCTOR_GUARD-}}" in off|0|no|false) command {name} "$@"; '
            f"return;; esac; {q(python)} -I -c {q(_INTERCEPT)} {q(source)} {tool} "
            f"{name} '' \"$@\"; }}"
        )
    return "\n".join(lines) + "\n"
