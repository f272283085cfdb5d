"""The guard: small ``pip``, ``pip3``, ``pip3.X`` and ``uv`` wrappers put first in an
environment's own ``bin/``, so that an install or uninstall aimed at it is planned by
libdoctor first and stopped before it breaks something.

Each wrapper is a ``/bin/sh`` script. ``LIBDOCTOR_GUARD=off`` and every command line without
the word ``install``/``uninstall`` go straight to the real tool by ``exec`` (same argv, no
Python started); the rest start libdoctor's interpreter on ``cli.intercept``, which plans and
then ``exec``s the real tool, or refuses. The originals are moved, never copied, into
``bin/.libdoctor-guard/`` (inode, mode and mtime kept) with a manifest of what was there
(name, mode, mtime, sha256) and the bin directory's times; ``remove_guard`` moves them back
and puts the directory's times back, so the environment is byte-identical to before. A
wrapper something else replaced since (pip upgrading itself) is left as that installer
wrote it, and said so.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import stat
from dataclasses import asdict, dataclass
from typing import Any, Literal

from libdoctor.environment.model import GUARD_DIR, GUARD_MARKER
from libdoctor.environment.target import Target
from libdoctor.errors import LibdoctorError

__all__ = [
    "GUARD_DIR",
    "MARKER",
    "GuardEntry",
    "GuardManifest",
    "GuardStatus",
    "guard_status",
    "install_guard",
    "remove_guard",
    "shell_functions",
]

_MANIFEST = "manifest.json"
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

EntryState = Literal["wrapped", "replaced", "missing"]


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

    @property
    def whole(self) -> bool:
        return self.manifest is not None and all(s == "wrapped" for _, s in self.states)


# --------------------------------------------------------------------------- reading


def _bin_dir(target: Target) -> str:
    path = os.path.join(target.prefix, "bin")
    if target.target_dir or not os.path.isdir(path):
        raise LibdoctorError(f"{target.prefix} has no bin/ directory to guard")
    return path


def _sha256_of(path: str) -> tuple[Literal["file", "symlink"], os.stat_result, str]:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return "symlink", st, hashlib.sha256(os.fsencode(os.readlink(path))).hexdigest()
    with open(path, "rb") as handle:
        return "file", st, hashlib.sha256(handle.read()).hexdigest()


def _original(path: str) -> Original | None:
    if not os.path.lexists(path):
        return None
    kind, st, digest = _sha256_of(path)
    return Original(
        kind, stat.S_IMODE(st.st_mode), st.st_mtime_ns, st.st_atime_ns, st.st_size, digest
    )


def read_manifest(bin_dir: str) -> GuardManifest | None:
    path = os.path.join(bin_dir, GUARD_DIR, _MANIFEST)
    try:
        with open(path, encoding="utf-8") as handle:
            raw: dict[str, Any] = json.load(handle)
        entries = tuple(
            GuardEntry(
                e["name"],
                e["tool"],
                Original(**e["original"]) if e["original"] else None,
                e["wrapper_sha256"],
            )
            for e in raw.pop("entries")
        )
        return GuardManifest(**raw, entries=entries)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LibdoctorError(f"{path} is unreadable or damaged: {exc}") from None


def _write_manifest(bin_dir: str, manifest: GuardManifest) -> None:
    path = os.path.join(bin_dir, GUARD_DIR, _MANIFEST)
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(asdict(manifest), handle, indent=2)
        handle.write("\n")
    os.replace(path + ".tmp", path)


def tool_names(target: Target, bin_dir: str) -> list[tuple[str, Literal["pip", "uv"]]]:
    """pip's scripts that are there (a uv-made env has none), and always ``uv``."""
    version = target.python_version
    names = ["pip", "pip3", *([f"pip{version[0]}.{version[1]}"] if version else [])]
    found: list[tuple[str, Literal["pip", "uv"]]] = [
        (n, "pip") for n in names if os.path.lexists(os.path.join(bin_dir, n))
    ]
    return [*found, ("uv", "uv")]


def _state(bin_dir: str, entry: GuardEntry) -> EntryState:
    path = os.path.join(bin_dir, entry.name)
    if not os.path.lexists(path):
        return "missing"
    return "wrapped" if _sha256_of(path)[2] == entry.wrapper_sha256 else "replaced"


def guard_status(target: Target) -> GuardStatus:
    bin_dir = _bin_dir(target)
    manifest = read_manifest(bin_dir)
    if manifest is None:
        return GuardStatus(None, ())
    return GuardStatus(manifest, tuple((e.name, _state(bin_dir, e)) for e in manifest.entries))


# --------------------------------------------------------------------------- the wrappers


def wrapper_text(
    tool: Literal["pip", "uv"], name: str, bin_dir: str, prefix: str, python: str, source: str
) -> str:
    """The ``/bin/sh`` wrapper for NAME: fast exec for everything but install/uninstall."""
    q = shlex.quote
    guard = os.path.join(bin_dir, GUARD_DIR)
    lines = [
        "#!/bin/sh",
        f"{MARKER}: {name} of {prefix}",
        f"# `libdoctor guard remove {prefix}` puts the original back.",
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
        f"        exec {q(python)} -I -c {q(_INTERCEPT)} {q(source)} {tool} "
        f'"$real" {q(prefix)} "$@"',
        "      fi",
        f"      echo {q(f'libdoctor guard: {python} is gone: running {name} unguarded')} >&2",
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


def _write_wrapper(path: str, text: str) -> str:
    """Write TEXT at PATH by rename (never in place: PATH may be hard-linked elsewhere)."""
    tmp = path + ".libdoctor-tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- install, remove


def install_guard(target: Target, python: str, source: str) -> GuardManifest:
    """Put the wrappers in place (again, for any a pip upgrade replaced since)."""
    bin_dir = _bin_dir(target)
    old = read_manifest(bin_dir)
    guard = os.path.join(bin_dir, GUARD_DIR)
    if old is None:
        st = os.stat(bin_dir)
        times = (st.st_atime_ns, st.st_mtime_ns)
        os.mkdir(guard, 0o755)
        previous: dict[str, GuardEntry] = {}
    else:
        times = (old.bin_atime_ns, old.bin_mtime_ns)
        previous = {e.name: e for e in old.entries}
    entries = []
    for name, tool in tool_names(target, bin_dir):
        path = os.path.join(bin_dir, name)
        entry = previous.get(name)
        if entry is not None and _state(bin_dir, entry) == "wrapped":
            entries.append(entry)
            continue
        original = _original(path)
        if original is not None:
            os.replace(path, os.path.join(guard, name))
        elif entry is not None:
            original = entry.original  # gone since: keep what the first install recorded
        text = wrapper_text(tool, name, bin_dir, target.prefix, python, source)
        entries.append(GuardEntry(name, tool, original, _write_wrapper(path, text)))
    manifest = GuardManifest(target.prefix, bin_dir, python, source, *times, tuple(entries))
    _write_manifest(bin_dir, manifest)
    return manifest


@dataclass(frozen=True, slots=True)
class GuardRemoval:
    restored: tuple[str, ...]  # originals moved back
    removed: tuple[str, ...]  # wrappers removed where nothing stood before
    left: tuple[str, ...]  # replaced or deleted since (a pip upgrade): left as it is


def remove_guard(target: Target) -> GuardRemoval:
    """Undo ``install_guard``: originals back, the guard dir gone, the bin dir's times back."""
    bin_dir = _bin_dir(target)
    manifest = read_manifest(bin_dir)
    if manifest is None:
        raise LibdoctorError(f"{target.prefix} is not guarded (no {GUARD_DIR}/{_MANIFEST})")
    guard = os.path.join(bin_dir, GUARD_DIR)
    restored: list[str] = []
    removed: list[str] = []
    left: list[str] = []
    for entry in manifest.entries:
        path, kept = os.path.join(bin_dir, entry.name), os.path.join(guard, entry.name)
        state = _state(bin_dir, entry)
        if state != "wrapped":
            left.append(entry.name)
        elif entry.original is not None and os.path.lexists(kept):
            os.replace(kept, path)
            restored.append(entry.name)
        else:
            os.unlink(path)
            removed.append(entry.name)
        if os.path.lexists(kept):
            os.unlink(kept)
    os.unlink(os.path.join(guard, _MANIFEST))
    os.rmdir(guard)
    if not left:  # else an installer changed bin/ since: its times are no longer ours
        os.utime(bin_dir, ns=(manifest.bin_atime_ns, manifest.bin_mtime_ns))
    return GuardRemoval(tuple(restored), tuple(removed), tuple(left))


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
