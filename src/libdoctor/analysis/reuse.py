"""A whole ``check`` reused while nothing it read has changed: the cache of check's result.

A run is recorded (``analysis.recording``: every path it asks the operating system about, in
this process and in the forked child that runs the loader). Each path is stored with its
identity, ``(size, mtime_ns, inode, ctime_ns, device)`` from ``stat``, or the error it gave;
for a path that was missing, the nearest directory that exists is stored too (an entry
appearing in a directory changes its mtime and ctime); and every directory on the way to
each path is stored as an anchor, by its inode (a directory replaced, or a link put in its
place, is another inode; its times move with every entry, not only the one on the way).
That covers the ELF files and the directories the loader searched, inside the env or not,
``ld.so.cache``, the loader and the interpreter, the RECORDs, every claimed file, every
module imported (libdoctor's, packaging). Beside them the key holds what is not a file:
the options, every environment variable but the shell's ``_`` (``LD_LIBRARY_PATH`` among
them), the working directory, the user and groups, the machine (``uname``, the CPU's
features), the interpreter (path and version), libdoctor's version, and the target.

A later run with the same key stats those paths again (by name in each directory, half in a
forked child); only if every one still has its identity are the stored findings returned,
without deciding again. Never stored: a run that read a path changed within
``parsed.RACY_NS`` of its start, a path under ``/proc``, ``/sys`` or ``/dev`` (their
identities say nothing of their content), a ``--deep`` run that hashed anything (the next
would report other hashing figures). The compile-cache look (``stale-caches``, a bounded
look into the user's caches) is not recorded: it runs fresh every time, on the stored
versions. ``analysis.overlap.run_check`` is the plain path this one is tested against
(``tests/property/test_check_cache.py``), finding for finding.

The stored file is untrusted like the parsed-file cache: bounded, marshal'd plain values, its
key compared whole, every part type-checked, the findings too: they are stored as plain
values (strings, numbers, tuples, dicts) and made into ``Finding`` values again only after
every field is checked, never unpickled. It is read only when this user owns it and no one
else may write it (``parsed.read_bounded``; it is written 0600). A reused report holds no model
(``Report.environment`` is None): the HTML report, which draws from it, runs the check.

``reused_snapshot`` keeps a snapshot's document the same way, by the same rules, in a file
of its own (``result-snapshot``): its encoded bytes, which are all a snapshot's reader needs
and which its reader checks (a snapshot is untrusted data wherever it comes from).
"""

from __future__ import annotations

import os
import sys
import time
from array import array
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from libdoctor.analysis.recording import LINK, UNKNOWN, own_modules, recording
from libdoctor.analysis.run import CheckOptions, Report
from libdoctor.environment.parsed import Identity, identity

if TYPE_CHECKING:
    from libdoctor.disk.hashing import ProgressFactory
    from libdoctor.environment.target import Target
    from libdoctor.findings import Finding
    from libdoctor.stack.caches import Versions

__all__ = ["reused_snapshot", "run_check"]

_VERSION = 1
_PART = "result"
_UNSTORABLE = {"/proc", "/sys", "/dev"}
# Identity: a stat's (size, mtime_ns, inode, ctime_ns, device), or (-errno, 0, 0, 0, 0)


def _identity(path: str) -> Identity:
    """``(size, mtime_ns, inode, ctime_ns, device)`` of PATH, or ``(-errno, 0, 0, 0, 0)``."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return (-(exc.errno or 1), 0, 0, 0, 0)
    except ValueError:  # an embedded NUL
        return (-_EINVAL, 0, 0, 0, 0)
    return identity(st)


def _all_hold(
    paths: tuple[str, ...],
    identities: array[int],
    anchors: tuple[str, ...],
    anchored: tuple[tuple[int, ...], ...],
) -> bool:
    """Every one of PATHS still has its identity (IDENTITIES: five numbers each), and every
    one of ANCHORS its entry: part of the PATHS checked in a forked child on the other core
    while this process checks the anchors and the rest (``analysis.fork``; without a fork,
    one after the other)."""
    from libdoctor.analysis.fork import started_in_child

    split = max(0, (len(paths) - len(anchors)) // 2)  # an lstat costs what a stat does
    other = started_in_child(lambda: _hold(paths[split:], identities[5 * split :]))
    mine = tuple(map(_anchor, anchors)) == anchored and _hold(
        paths[:split], identities[: 5 * split]
    )
    return other() and mine


def _hold(paths: tuple[str, ...], identities: array[int]) -> bool:
    """``map(_identity, PATHS)``, flat, equals IDENTITIES."""
    try:
        return array("q", [n for ident in _identities(paths) for n in ident]) == identities
    except OverflowError:
        return False


def _identities(paths: Iterable[str]) -> list[Identity]:
    """``map(_identity, PATHS)``, each name stat'ed in its directory, opened once for the run
    of its names (``O_PATH``, as ``disk.stat.RealDisk.prefetch``: the kernel walks one name,
    not the whole path); by whole path where that cannot be done."""
    stat = os.stat
    found: list[Identity] = []
    add = found.append
    here, fd = None, -1
    try:
        for path in paths:
            head, _, name = path.rpartition("/")
            if head != here:
                if fd >= 0:
                    os.close(fd)
                here, fd = head, _open_dir(head)
            try:
                if fd < 0 or not name:
                    raise ValueError
                st = stat(name, dir_fd=fd)
            except (OSError, ValueError):
                add(_identity(path))  # the rare case: as stat() of the path says
                continue
            # identity(st), inlined: one call less for each of a run's paths
            add((st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, st.st_dev))
    finally:
        if fd >= 0:
            os.close(fd)
    return found


def _open_dir(path: str) -> int:
    if not path.startswith("/") or not _AT_DIR:
        return -1
    try:
        return os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return -1


_AT_DIR = hasattr(os, "O_PATH") and os.stat in os.supports_dir_fd
_EINVAL = 22


def _anchor(path: str) -> tuple[int, ...]:
    """What PATH's own entry is (``lstat``): for a directory only which one it is (a
    directory replaced, or a link put in its place, is another inode), without its times,
    which move with every entry in it, when only the entry on the way to a file read
    matters; for anything else (a link, a file) its whole identity. ``(-errno,)`` if none."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return (-(exc.errno or 1),)
    except ValueError:
        return (-_EINVAL,)
    kind = st.st_mode & 0o170000
    if kind == 0o040000:
        return (st.st_ino, st.st_dev, kind)
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, st.st_dev, kind)


def _inputs(reads: set[str], seen: dict[str, Identity]) -> tuple[dict[str, Identity], list[str]]:
    """The paths whose whole identity is kept, with it (READS but those only ``lstat``'ed,
    and the nearest existing directory of each that is missing: the entry appearing there
    changes it), and the anchors: the ``lstat``'ed and every directory on the way to each
    path, see ``_anchor``."""
    stated = sorted(p for p in reads if not p.startswith(LINK) and p not in seen)
    whole = dict(zip(stated, _identities(stated), strict=True))
    whole.update((p, seen[p]) for p in reads if p in seen)  # what the run's own stat said
    anchors = {path[1:] for path in reads if path.startswith(LINK)}
    for path, ident in list(whole.items()):
        if ident[0] < 0:
            head = path.rpartition("/")[0] or "/"
            while head not in whole:
                whole[head] = found = _identity(head)
                if found[0] >= 0 or head == "/":
                    break
                head = head.rpartition("/")[0] or "/"
    for path in [*whole, *anchors]:
        head = path.rpartition("/")[0]
        while head and head not in anchors:
            anchors.add(head)
            head = head.rpartition("/")[0]
    return whole, sorted(anchors)


def _key(target: Target, options: CheckOptions) -> tuple[object, ...]:
    """Everything beside the files that a check's findings depend on, as plain values."""
    import pickle

    from libdoctor.version import __version__

    return (
        _VERSION,
        __version__,
        sys.version,
        sys.executable,  # the loader is probed for the interpreter libdoctor runs on
        tuple(os.uname()),
        _cpu_features(),  # the loader searches the hwcaps subdirs this CPU supports
        os.getuid(),
        os.geteuid(),
        os.getgid(),
        tuple(sorted(os.getgroups())),
        os.getcwd(),
        # every variable but the shell's "_" (the path of the program it ran: noise)
        tuple(sorted(item for item in os.environ.items() if item[0] != "_")),
        pickle.dumps(target, protocol=4),
        options.deep,
        options.libraries is not None,
        options.facts,
        options.caches is not None,
    )


def _cpu_features() -> bytes:
    """The CPU's feature lines (``/proc/cpuinfo``'s flags; not its clock, which moves)."""
    try:
        with open("/proc/cpuinfo", "rb") as handle:
            text = handle.read(1 << 20)
    except OSError:
        return b""
    lines = text.splitlines()
    return b"\n".join(sorted({line for line in lines if line.startswith(_FEATURES)}))


_FEATURES = (b"flags", b"Features", b"isa", b"cpu model", b"vendor_id", b"model name")


def _stored_file(cache_dir: str, prefix: str, options: CheckOptions) -> str:
    """One file per target and kind of run (``check`` and ``check --deep`` alternate)."""
    from libdoctor.environment.parsed import cache_file

    kind = ("-deep" if options.deep else "") + ("" if options.libraries else "-nolib")
    return cache_file(cache_dir, prefix, _PART + kind)


def _load(file: str, key: tuple[object, ...]) -> tuple[Any, ...] | None:
    """The stored result for KEY if the file holds one and every path it read still has its
    identity; else None."""
    result = _held(file, key)
    return _result_of(result) if type(result) is tuple else None


def _held(file: str, key: tuple[object, ...]) -> object:
    """What the file stores for KEY, as it was stored, if every path it read still has its
    identity; else None."""
    import marshal

    from libdoctor.environment.parsed import read_bounded

    data = read_bounded(file)
    if data is None:
        return None
    try:
        stored = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return None
    if type(stored) is not tuple or len(stored) != 6 or stored[0] != key:
        return None
    _, paths, flat, anchors, anchored, result = stored
    if not all(type(v) is tuple for v in (paths, anchors, anchored)):
        return None
    if type(flat) is not bytes:
        return None
    if not set(map(type, paths + anchors)) <= {str} or len(anchors) != len(anchored):
        return None
    identities = array("q")
    if len(flat) != 5 * identities.itemsize * len(paths):
        return None
    identities.frombytes(flat)
    if not _all_hold(paths, identities, anchors, anchored):
        return None
    return result


def _storable(reads: set[str], cache_dir: str) -> set[str] | None:
    """The paths to store with a run that read READS (the cache's own files left out, and
    libdoctor's modules added); None if it may not be stored."""
    mine = reads - {os.devnull}  # what a subprocess's stdin reads: always nothing
    for folders in ({os.path.realpath(cache_dir), os.path.abspath(cache_dir)}, _UNSTORABLE):
        exact = {m + f for f in folders for m in ("", LINK)}
        inside = tuple(m + f + "/" for f in folders for m in ("", LINK))
        found = {path for path in mine if path in exact or path.startswith(inside)}
        if found and folders is _UNSTORABLE:
            return None
        mine -= found
    if UNKNOWN in mine:
        return None
    return mine | own_modules()


def _racy(ident: tuple[int, ...], newest_ns: int) -> bool:
    """The file changed at or after NEWEST_NS, or keeps no times (a zero never moves)."""
    if len(ident) < 5 or ident[0] < 0:  # an error, or a directory's entry
        return False
    return max(ident[1], ident[3]) >= newest_ns or not ident[1] or not ident[3]


def run_check(
    target: Target, options: CheckOptions, *, progress: ProgressFactory | None = None
) -> Report:
    """``analysis.overlap.run_check``, or the findings it gave last time when nothing it read
    has changed since (with no cache dir: always the plain run). A reused report holds no
    model, disk or digests (``Report.environment`` is None). OPTIONS' loader context must be
    the one ``api.check`` builds (from the environment and the working directory, both in
    the key), its ``caches`` the environment the compile-cache look runs with."""
    if options.cache_dir is None or options.facts or options.meanwhile is not None:
        from libdoctor.analysis.overlap import run_check as plain  # (a snapshot's: never)

        return plain(target, options, progress=progress)
    file = _stored_file(options.cache_dir, target.prefix, options)
    key = _key(target, options)
    stored = _load(file, key)
    if stored is not None:
        findings, distributions, files, hashing, rest = stored
        versions, facts = rest
        caches = _cache_findings(target, options, versions)
        return Report(
            target=target,
            distributions=distributions,
            files=files,
            findings=findings + tuple(caches),
            hashing=hashing,
            facts=facts,
        )
    from libdoctor.analysis.overlap import run_check as checked

    started = time.time_ns()
    seen: dict[str, Identity] = {}
    with recording(seen) as reads:
        report = checked(target, replace(options, caches=None), progress=progress)
        versions = _versions(report)  # it reads torch's version.py
    caches = _cache_findings(target, options, versions)
    _save(file, key, report, versions, (reads, seen), options.cache_dir, started)
    return replace(report, findings=report.findings + tuple(caches))


def reused_snapshot(
    target: Target,
    options: CheckOptions,
    inputs: tuple[object, ...],
    take: Callable[[], tuple[bytes, Report]],
) -> bytes:
    """A snapshot's document (``analysis.snapshot.encoded_snapshot``): the bytes it was last
    time if nothing that run read has changed since, else TAKE's (a run of OPTIONS, with a
    cache dir, on TARGET, and its snapshot's bytes), recorded and stored as check's result
    is, by the same rules. INPUTS: what beside the files and check's key the document is
    made from (the node's name, the loader's environment, the libc's version). One file per
    target and ``--deep`` or not, beside check's: neither evicts the other. The bytes are
    stored as they are: a snapshot is untrusted data to whoever reads it, and checked there."""
    from libdoctor.bounded import MAX_FILE_BYTES
    from libdoctor.environment.parsed import cache_file

    assert options.cache_dir is not None
    kind = _PART + "-snapshot" + ("-deep" if options.deep else "")
    file = cache_file(options.cache_dir, target.prefix, kind)
    key = (*_key(target, options), "snapshot", *inputs)
    stored = _held(file, key)
    if type(stored) is bytes and len(stored) <= MAX_FILE_BYTES:
        return stored
    started = time.time_ns()
    seen: dict[str, Identity] = {}
    with recording(seen) as reads:
        data, report = take()
    if not _hashed(report):
        _store(file, key, data, (reads, seen), options.cache_dir, started)
    return data


def _versions(report: Report) -> Versions | None:
    if report.environment is None:
        return None
    from libdoctor.stack.caches import Versions

    return Versions.of(report.target, report.environment.distributions)


def _cache_findings(
    target: Target, options: CheckOptions, versions: Versions | None
) -> list[Finding]:
    if options.caches is None or versions is None:
        return []
    from libdoctor.checks.caches import stale_summary
    from libdoctor.stack.caches import quick_stale

    return stale_summary(quick_stale(options.caches, target, versions), target.prefix)


def _save(
    file: str,
    key: tuple[object, ...],
    report: Report,
    versions: Versions | None,
    recorded: tuple[set[str], dict[str, Identity]],
    cache_dir: str,
    started_ns: int,
) -> None:
    """Store REPORT's findings with what they were decided from, unless that may not be
    trusted next time (see the module's doc)."""
    if _hashed(report):
        return
    result = _plain_result(report, versions)
    if result is not None:
        _store(file, key, result, recorded, cache_dir, started_ns)


def _hashed(report: Report) -> bool:
    """A ``--deep`` run that hashed anything, or failed to: the next would say otherwise."""
    hashing = report.hashing
    return hashing is not None and bool(hashing.get("files_hashed") or hashing.get("errors"))


def _store(
    file: str,
    key: tuple[object, ...],
    result: Any,
    recorded: tuple[set[str], dict[str, Identity]],
    cache_dir: str,
    started_ns: int,
) -> None:
    """Store RESULT (plain values) with what it was decided from, unless that may not be
    trusted next time (see the module's doc)."""
    from libdoctor.environment.parsed import RACY_NS, write_atomic

    reads, seen = recorded
    read = _storable(reads, cache_dir)
    if read is None:
        return
    whole, anchors = _inputs(read, seen)
    paths = sorted(whole)
    identities = [whole[path] for path in paths]
    anchored = tuple(map(_anchor, anchors))
    newest = started_ns - RACY_NS
    if any(_racy(ident, newest) for ident in (*identities, *anchored)):
        return
    import marshal

    try:
        flat = array("q", [n for ident in identities for n in ident]).tobytes()
        stored: Any = (key, tuple(paths), flat, tuple(anchors), anchored)
        data = marshal.dumps((*stored, result))
    except (ValueError, TypeError, OverflowError):  # a value marshal cannot hold: not stored
        return
    write_atomic(file, data)


# The stored findings as plain values, checked field by field on the way back: whoever could
# write the cache file can make it say anything plain, never make it run code or crash a
# renderer with a value of the wrong type.
_MAX_DEPTH = 16  # of an evidence value


def _plain_result(report: Report, versions: Versions | None) -> tuple[Any, ...] | None:
    """REPORT's findings, counts and VERSIONS as plain values; None if one is not plain."""
    if report.facts is not None:
        return None
    findings = tuple(_plain_finding(f) for f in report.findings)
    hashing = None if report.hashing is None else dict(report.hashing)
    plain_versions = (
        None
        if versions is None
        else (versions.python, versions.cache_tag, versions.cuda, dict(versions.tools))
    )
    result = (findings, report.distributions, report.files, hashing, plain_versions)
    return result if _is_plain(result, 0) else None


def _plain_finding(f: Finding) -> tuple[Any, ...]:
    dist = None if f.distribution is None else (f.distribution.name, f.distribution.version)
    fix = None if f.fix is None else f.fix.to_plain()
    return (f.code, int(f.severity), f.message, dist, f.paths, dict(f.evidence), fix)


def _is_plain(value: object, depth: int) -> bool:
    if value is None or type(value) in (str, int, float, bool):
        return True
    if depth > _MAX_DEPTH:
        return False
    if type(value) in (tuple, list, set, frozenset):
        return all(_is_plain(v, depth + 1) for v in value)  # type: ignore[attr-defined]
    if type(value) is dict:
        return all(type(k) is str and _is_plain(v, depth + 1) for k, v in value.items())
    return False


def _result_of(result: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The stored result as values again, or None when any part is not what was stored."""
    from libdoctor.stack.caches import Versions

    if len(result) != 5 or not _is_plain(result, 0):
        return None
    plain_findings, distributions, files, hashing, plain_versions = result
    if type(distributions) is not int or type(files) is not int:
        return None
    if hashing is not None and not (
        type(hashing) is dict and all(type(v) is int for v in hashing.values())
    ):
        return None
    versions = None
    if plain_versions is not None:
        if not _fields(plain_versions, (str, None), (str, None), (str, None), dict):
            return None
        python, cache_tag, cuda, tools = plain_versions
        if not all(type(v) is str for v in tools.values()):
            return None
        versions = Versions(python, cache_tag, cuda, tools)
    if type(plain_findings) is not tuple:
        return None
    findings = tuple(_finding_of(f) for f in plain_findings)
    if None in findings:
        return None
    return findings, distributions, files, hashing, (versions, None)


def _finding_of(plain: object) -> Finding | None:
    from libdoctor.findings import CODES, DistRef, Finding, Fix, Severity

    if not _fields(plain, str, int, str, (tuple, None), tuple, dict, (tuple, None)):
        return None
    code, severity, message, dist, paths, evidence, fix = cast(tuple[Any, ...], plain)
    if code not in CODES or severity not in set(Severity) or not _strings(paths):
        return None
    if dist is not None and not _fields(dist, str, str):
        return None
    remedied = None if fix is None else Fix.from_plain(fix)
    if fix is not None and remedied is None:
        return None
    return Finding(
        code=code,
        severity=Severity(severity),
        message=message,
        distribution=None if dist is None else DistRef(*dist),
        paths=paths,
        evidence=evidence,
        fix=remedied,
    )


def _fields(value: object, *kinds: type | tuple[type | None, ...]) -> bool:
    """VALUE is a tuple of len(KINDS) whose items have those exact types (None: may be None)."""
    if type(value) is not tuple or len(value) != len(kinds):
        return False
    for item, kind in zip(value, kinds, strict=True):
        allowed = kind if type(kind) is tuple else (kind,)
        if not any(item is None if k is None else type(item) is k for k in allowed):
            return False
    return True


def _strings(values: tuple[Any, ...]) -> bool:
    return all(type(v) is str for v in values)
