"""A snapshot: one environment's facts as a compact, versioned, deterministic record.

What ``libdoctor snapshot`` writes and ``diff`` and ``fleet`` compare: the interpreter and
platform, every distribution (installer, REQUESTED, extras, direct URL, wheel tags) with its
files as ``[path, size, RECORD hash]`` rows (``--deep``: a fourth column, the digest of the
bytes on disk), what each extension module's needed libraries resolve to, the CUDA stack and
every finding. Paths inside the environment are written relative to its prefix (file rows
relative to their site directory), so one environment at two prefixes, or on two machines,
gives the same rows. Bytecode rows are left out, as ``check`` leaves them out.

The same environment gives the same bytes: keys sorted, lists sorted, no timestamps; a
``.gz`` name is gzip with mtime 0 and no file name. Reading one back validates every field
it uses: a damaged or unknown document is a one-line ``SnapshotError``.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from libdoctor.bounded import (
    MAX_FILE_BYTES,
    MAX_SMALL_FILE_BYTES,
    InputRefused,
    gunzip,
    loads_json,
    read_file,
)
from libdoctor.environment.paths import display
from libdoctor.errors import LibdoctorError
from libdoctor.findings import Finding
from libdoctor.version import __version__

if TYPE_CHECKING:
    from libdoctor.analysis.run import CheckOptions, Report
    from libdoctor.checks.verdict import Digests
    from libdoctor.disk.hashing import ProgressFactory
    from libdoctor.disk.stat import Disk
    from libdoctor.environment.distributions import Distribution
    from libdoctor.environment.model import Environment
    from libdoctor.environment.target import Target

SCHEMA = "libdoctor-snapshot"
SCHEMA_VERSION = 1


class SnapshotError(LibdoctorError):
    """A snapshot that cannot be read: not JSON, truncated, another schema, a bad field."""


class FileRow(NamedTuple):
    path: str  # as RECORD writes it: relative to the distribution's site dir
    size: int | None  # on disk; None: not there (or not a regular file)
    hash: str | None  # RECORD's
    digest: str | None = None  # --deep: the bytes on disk, in RECORD's algorithm


@dataclass(frozen=True, slots=True)
class DistRecord:
    name: str
    version: str
    key: str
    installer: str | None
    requested: bool
    extras: tuple[str, ...]
    direct_url: str | None  # direct_url.json, canonical JSON text
    tags: tuple[str, ...]  # the WHEEL file's Tag lines
    site: str  # where RECORD paths start, relative to the prefix
    metadata: str  # the metadata directory's name
    record_error: str | None
    files: tuple[FileRow, ...]

    @property
    def display(self) -> str:
        return f"{self.name} {self.version}"


@dataclass(frozen=True, slots=True)
class LibraryRecord:
    name: str  # as requested
    path: str | None  # None: not found
    soname: str | None
    owners: tuple[tuple[str, str], ...]  # (name, version) of each distribution claiming it
    cuda_major: int | None
    modules: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FindingRecord:
    code: str
    severity: str
    distribution: str | None  # "name version"
    paths: tuple[str, ...]
    message: str


@dataclass(frozen=True, slots=True)
class Snapshot:
    node: str  # the machine's name: not compared
    prefix: str  # where the environment was: not compared
    deep: bool
    interpreter: Mapping[str, str]
    platform: Mapping[str, str]
    distributions: tuple[DistRecord, ...]
    libraries: tuple[LibraryRecord, ...]
    frameworks: tuple[tuple[str, str, str, str | None], ...]  # framework, dist, version, cuda
    cuda_packages: tuple[tuple[str, str, int], ...]  # dist, version, major
    findings: tuple[FindingRecord, ...]

    def compared(self) -> tuple[Any, ...]:
        """Everything a diff compares: equal for two snapshots it finds no difference in."""
        return (
            self.deep,
            tuple(sorted(self.interpreter.items())),
            tuple(sorted(self.platform.items())),
            self.distributions,
            tuple((lib.name, lib.path, tuple(n for n, _ in lib.owners)) for lib in self.libraries),
            self.frameworks,
            self.cuda_packages,
            self.findings,
        )

    def to_json(self) -> dict[str, Any]:
        """The document ``libdoctor snapshot`` writes, as a dict."""
        return to_document(self)


# --------------------------------------------------------------------------- taking one


def portable(path: str, prefix: str) -> str:
    """PATH relative to PREFIX when inside it, else as it is."""
    from libdoctor.environment.model import is_inside  # (not on a reused snapshot's path)

    if is_inside(path, prefix) and path != prefix:
        return display(os.path.relpath(path, prefix))
    return display(path)


def machine_facts(python_version: tuple[int, int] | None, prefix: str) -> dict[str, dict[str, str]]:
    """The interpreter and platform, read without running the target's interpreter."""
    from libdoctor.environment.target import read_pyvenv_cfg

    uname = os.uname()
    platform = {"system": uname.sysname, "machine": uname.machine}
    libc = _libc()
    if libc:
        platform["libc"] = libc
        name, _, version = libc.partition(" ")
        major, _, minor = version.partition(".")
        if name == "glibc" and major.isdigit() and minor.isdigit():
            platform["tag"] = f"manylinux_{major}_{minor}_{uname.machine}"
    interpreter: dict[str, str] = {}
    if python_version is not None:
        interpreter["version"] = f"{python_version[0]}.{python_version[1]}"
        interpreter["tag"] = f"cp{python_version[0]}{python_version[1]}"
    from pathlib import Path

    try:
        cfg = read_pyvenv_cfg(Path(prefix)) or {}
    except LibdoctorError:
        cfg = {}
    full = cfg.get("version_info") or cfg.get("version")
    if full:
        interpreter["version"] = ".".join(full.split(".")[:3])
    return {"interpreter": interpreter, "platform": platform}


def _libc() -> str:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return ""


def node_name(environ: Mapping[str, str]) -> str:
    """This machine's name: Slurm's name for it when in a Slurm task, else the host name."""
    return environ.get("SLURMD_NODENAME") or os.uname().nodename


def snapshot_target(
    target: Target,
    *,
    node: str,
    deep: bool = False,
    cache_dir: str | None = None,
    environ: Mapping[str, str],
    cwd: str | None = None,
    forked: bool = True,
    progress: ProgressFactory | None = None,
) -> Snapshot:
    """Run every check on TARGET (the loader with ENVIRON's LD_LIBRARY_PATH) and keep it as
    a snapshot. FORKED: the loader work in a child (``analysis.overlap``); a caller with
    threads (a Ray worker) runs it all in-process. PROGRESS: told of the bytes --deep hashes."""
    options, rows = _options(deep, cache_dir, environ, cwd)
    return _taken(target, options, node, rows, forked, progress)[0]


def encoded_snapshot(
    target: Target,
    *,
    node: str,
    deep: bool = False,
    cache_dir: str | None = None,
    environ: Mapping[str, str],
    cwd: str | None = None,
    progress: ProgressFactory | None = None,
) -> bytes:
    """``encode(snapshot_target(...))``, the document's plain bytes. With a CACHE_DIR: the
    bytes the last such run gave, if nothing it read has changed since
    (``analysis.reuse.reused_snapshot``); they are the bytes a run would give."""
    options, rows = _options(deep, cache_dir, environ, cwd)

    def take() -> tuple[bytes, Report]:
        snap, report = _taken(target, options, node, rows, True, progress)
        return encode(snap), report

    if cache_dir is None:
        return take()[0]
    from libdoctor.analysis.reuse import reused_snapshot

    inputs = (
        node,
        tuple(sorted(environ.items())),
        cwd or os.getcwd(),
        _libc(),  # machine_facts' "libc", which no file read says
    )
    return reused_snapshot(target, options, inputs, take)


def _options(
    deep: bool, cache_dir: str | None, environ: Mapping[str, str], cwd: str | None
) -> tuple[CheckOptions, dict[str, tuple[FileRow, ...]]]:
    """A snapshot's check options, and where they put its file rows (made while the forked
    child is at the loader work)."""
    from libdoctor.analysis import run

    rows: dict[str, tuple[FileRow, ...]] = {}

    def file_rows(env: Environment, disk: Disk, digests: Digests | None) -> None:
        rows.update(all_file_rows(env, disk, digests if deep else None))

    options = run.CheckOptions(
        deep=deep,
        cache_dir=cache_dir,
        libraries=functools.partial(run.loader_context, dict(environ), cwd or os.getcwd()),
        facts=True,
        meanwhile=file_rows,
    )
    return options, rows


def _taken(
    target: Target,
    options: CheckOptions,
    node: str,
    rows: Mapping[str, tuple[FileRow, ...]],
    forked: bool,
    progress: ProgressFactory | None,
) -> tuple[Snapshot, Report]:
    from libdoctor.analysis import overlap, run

    report = (overlap.run_check if forked else run.run_check)(target, options, progress=progress)
    return take_snapshot(report, node, options.deep, rows), report


def take_snapshot(
    report: Report, node: str, deep: bool, rows: Mapping[str, tuple[FileRow, ...]] | None = None
) -> Snapshot:
    """The snapshot of a finished ``check`` run (with ``facts``): its model, disk
    view, digests and findings. ROWS: each distribution's file rows by metadata dir, made
    already (``all_file_rows``)."""
    env, disk = report.environment, report.disk
    if env is None or disk is None:
        raise LibdoctorError("a snapshot needs the run's model (internal error)")
    if rows is None:
        rows = all_file_rows(env, disk, report.digests if deep else None)
    prefix = env.target.prefix
    facts = machine_facts(env.target.python_version, prefix)
    return Snapshot(
        node=node,
        prefix=prefix,
        deep=deep,
        interpreter=facts["interpreter"],
        platform=facts["platform"],
        distributions=_dist_records(report, rows),
        libraries=_library_records(report),
        frameworks=_frameworks(env),
        cuda_packages=_cuda_packages(env),
        findings=finding_records(report.findings, prefix),
    )


def _dist_records(
    report: Report, rows: Mapping[str, tuple[FileRow, ...]]
) -> tuple[DistRecord, ...]:
    env = report.environment
    assert env is not None
    extras = report.facts.extras if report.facts is not None else {}
    prefix = env.target.prefix
    records = [
        _dist_record(dist, prefix, extras.get(dist.metadata_dir, ()), rows[dist.metadata_dir])
        for dist in env.distributions
    ]
    return tuple(sorted(records, key=lambda d: (d.key, d.version, d.site, d.metadata)))


def all_file_rows(
    env: Environment, disk: Disk, digests: Digests | None
) -> dict[str, tuple[FileRow, ...]]:
    """Every distribution's file rows, by metadata dir; DIGESTS: the --deep column."""
    return {dist.metadata_dir: _file_rows(env, dist, disk, digests) for dist in env.distributions}


def _file_rows(
    env: Environment, dist: Distribution, disk: Disk, digests: Digests | None
) -> tuple[FileRow, ...]:
    """DIST's rows, by path alone (a RECORD may repeat one, with None sizes); DIGESTS: the
    --deep column. One pass, no call a row does not need: a million rows in a big env."""
    from libdoctor.disk.stat import RealDisk

    prefix = env.target.prefix
    scripts = tuple(os.path.join(prefix, d) for d in ("bin", "Scripts"))
    pycache = f"{os.sep}__pycache__{os.sep}"  # is_bytecode(), inlined
    size_of = disk.regular_size if isinstance(disk, RealDisk) else functools.partial(_size, disk)
    new = tuple.__new__  # FileRow(...) without the Python-level __new__ frame
    rows: list[FileRow] = []
    append = rows.append
    for _, entry, path in env.claims_of(dist):
        if path.endswith(".pyc") and pycache in path:
            continue
        size = size_of(path)
        if size is not None and path.startswith(scripts):
            row = _script_row(path, entry.path, prefix)
            if row is not None:
                append(row)
                continue
        digest = None
        if digests is not None and entry.hash and size is not None:
            digest = digests.get((path, entry.hash.partition("=")[0]))
        shown = entry.path if entry.path.isascii() else display(entry.path)
        append(new(FileRow, (shown, size, entry.hash, digest)))
    rows.sort(key=_PATH)
    return tuple(rows)


_PATH = itemgetter(0)  # a FileRow's path: rows sort by it alone


def _size(disk: Disk, path: str) -> int | None:
    """A file row's size: None when PATH is not a regular file, or cannot be stat'ed."""
    state = disk.stat(path)
    return state.size if state.is_file and not state.error else None


PREFIX_WORD = b"{prefix}"
PORTABLE = "portable-"  # the hash of a script's bytes with its prefix written as {prefix}


def _script_row(path: str, relative: str, prefix: str) -> FileRow | None:
    """A script the installer wrote naming the environment's own path (a shebang, a
    wrapper): its size and digest with that path written ``{prefix}``, so the same script at
    another prefix or on another machine gives the same row. None: not such a script."""
    import hashlib

    from libdoctor.digests import spell_hash

    try:
        with open(path, "rb") as handle:
            data = handle.read(1 << 20)
    except OSError:
        return None
    raw = os.fsencode(prefix)
    if not data.startswith(b"#!") or raw not in data:
        return None
    data = data.replace(raw, PREFIX_WORD)
    digest = PORTABLE + spell_hash("sha256", hashlib.sha256(data).digest())
    return FileRow(display(relative), len(data), digest)


def _dist_record(
    dist: Distribution, prefix: str, extras: tuple[str, ...], files: tuple[FileRow, ...]
) -> DistRecord:
    meta = dist.metadata_dir
    return DistRecord(
        name=dist.name,
        version=dist.version,
        key=dist.key,
        installer=dist.installer,
        requested=os.path.exists(os.path.join(meta, "REQUESTED")),
        extras=extras,
        direct_url=_direct_url(os.path.join(meta, "direct_url.json")),
        tags=_wheel_tags(os.path.join(meta, "WHEEL")),
        site=portable(dist.base_dir, prefix),
        metadata=display(os.path.basename(meta)),
        record_error=dist.record_error,
        files=files,
    )


def _read_small(path: str) -> bytes | None:
    """A metadata file of the environment's, bounded: None when absent or refused (too large,
    not a regular file)."""
    try:
        return read_file(path, MAX_SMALL_FILE_BYTES)
    except (OSError, ValueError):
        return None


def _direct_url(path: str) -> str | None:
    data = _read_small(path)
    if data is None:
        return None
    try:
        return canonical_json(loads_json(data))
    except ValueError:  # not JSON, or nested past MAX_JSON_DEPTH
        return canonical_json({"unreadable": data[:200].decode("utf-8", "replace")})


def _wheel_tags(path: str) -> tuple[str, ...]:
    from libdoctor.environment.metadata import parse_wheel_tags

    return tuple(
        sorted(set(parse_wheel_tags((_read_small(path) or b"").decode("utf-8", "replace"))))
    )


def _library_records(report: Report) -> tuple[LibraryRecord, ...]:
    from libdoctor.stack.cuda import soname_major

    env = report.environment
    assert env is not None
    prefix = env.target.prefix
    out = []
    for use in report.facts.libraries if report.facts is not None else ():
        owners = tuple(sorted({(d.name, d.version) for d in env.owners(use.path or "")}))
        name_for_major = use.soname or (os.path.basename(use.path) if use.path else use.name)
        out.append(
            LibraryRecord(
                name=display(use.name),
                path=portable(use.path, prefix) if use.path is not None else None,
                soname=display(use.soname) if use.soname else None,
                owners=owners if use.path is not None else (),
                cuda_major=soname_major(name_for_major),
                modules=tuple(portable(m, prefix) for m in use.modules),
            )
        )
    return tuple(sorted(out, key=lambda lib: (lib.name, lib.path or "")))


def _frameworks(env: Environment) -> tuple[tuple[str, str, str, str | None], ...]:
    from libdoctor.stack.frameworks import detect_frameworks

    builds = detect_frameworks(env)
    return tuple(sorted((b.framework, b.dist.name, b.version, b.cuda) for b in builds))


def _cuda_packages(env: Environment) -> tuple[tuple[str, str, int], ...]:
    from libdoctor.stack.cuda import cuda_packages

    return tuple(sorted((p.dist.name, p.dist.version, p.major) for p in cuda_packages(env)))


def finding_records(findings: Iterable[Finding], prefix: str) -> tuple[FindingRecord, ...]:
    """Findings as a snapshot keeps them: paths relative to the prefix, the prefix left out
    of the message, no evidence or fix (they repeat the message, and name this machine)."""
    root = prefix.rstrip(os.sep) + os.sep
    records = {
        FindingRecord(
            code=f.code,
            severity=f.severity.label,
            distribution=(
                f"{f.distribution.name} {f.distribution.version}" if f.distribution else None
            ),
            paths=tuple(sorted(portable(p, prefix) for p in f.paths)),
            message=display(f.message.replace(root, "")),
        )
        for f in findings
    }
    return tuple(sorted(records, key=lambda r: (r.code, r.distribution or "", r.paths, r.message)))


# --------------------------------------------------------------------------- the file format


def canonical_json(value: Any) -> str:
    # No circular check: a document made here or parsed from JSON has no cycle, and the
    # check keeps a mark per list (16k file rows: an eighth of the encoding's time).
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False
    )


def to_document(snap: Snapshot) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "libdoctor", "version": __version__},
        "node": snap.node,
        "prefix": display(snap.prefix),
        "deep": snap.deep,
        "interpreter": dict(snap.interpreter),
        "platform": dict(snap.platform),
        "distributions": [_dist_document(d) for d in snap.distributions],
        "libraries": [
            {
                "name": lib.name,
                "path": lib.path,
                "soname": lib.soname,
                "owners": [list(o) for o in lib.owners],
                "cuda_major": lib.cuda_major,
                "modules": list(lib.modules),
            }
            for lib in snap.libraries
        ],
        "stack": {
            "frameworks": [
                {"framework": f, "distribution": d, "version": v, "cuda": c}
                for f, d, v, c in snap.frameworks
            ],
            "cuda_packages": [
                {"distribution": d, "version": v, "major": m} for d, v, m in snap.cuda_packages
            ],
        },
        "findings": [finding_document(f) for f in snap.findings],
    }


def finding_document(f: FindingRecord) -> dict[str, Any]:
    return {
        "code": f.code,
        "severity": f.severity,
        "distribution": f.distribution,
        "paths": list(f.paths),
        "message": f.message,
    }


def _dist_document(dist: DistRecord) -> dict[str, Any]:
    return {
        "name": dist.name,
        "version": dist.version,
        "installer": dist.installer,
        "requested": dist.requested,
        "extras": list(dist.extras),
        "direct_url": json.loads(dist.direct_url) if dist.direct_url is not None else None,
        "tags": list(dist.tags),
        "site": dist.site,
        "metadata": dist.metadata,
        "record_error": dist.record_error,
        "files": [list(row) if row.digest is not None else list(row[:3]) for row in dist.files],
    }


def encode(snap: Snapshot, *, gzipped: bool = False) -> bytes:
    """The file's bytes: the same snapshot, the same bytes. Gzip at level 1: a torch env's
    1.8 MB in half the time of level 6, for 6% more bytes (0.75 MB, not 0.71)."""
    data = (canonical_json(to_document(snap)) + "\n").encode("utf-8")
    return gzipped_document(data) if gzipped else data


def gzipped_document(data: bytes) -> bytes:
    """DATA, a snapshot's plain bytes, as its ``.gz`` file's (``encode``)."""
    return gzip.compress(data, compresslevel=1, mtime=0)


def write_snapshot(snap: Snapshot, path: str) -> None:
    write_document(encode(snap), path)


def write_document(data: bytes, path: str) -> None:
    """DATA, a snapshot's plain bytes, written to PATH (gzip'd when it ends in ``.gz``)."""
    if path.endswith(".gz"):
        data = gzipped_document(data)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        raise LibdoctorError(f"cannot write {path}: {exc.strerror or exc}") from None


def read_snapshot(path: str) -> Snapshot:
    """The snapshot in the file PATH (``snapshot_bytes``)."""
    return decode(snapshot_bytes(path), path)


def snapshot_bytes(path: str) -> bytes:
    """The bytes of the snapshot file PATH (a regular file: a device or a FIFO is refused,
    never read), at most MAX_FILE_BYTES of them."""
    try:
        return read_file(path)
    except OSError as exc:
        raise SnapshotError(f"cannot read {path}: {exc.strerror or exc}") from None
    except InputRefused as exc:
        raise SnapshotError(f"{path}: {exc}") from None


def decode(data: bytes, source: str) -> Snapshot:
    """DATA (JSON, or gzip'd JSON) as a Snapshot; SnapshotError naming SOURCE otherwise.
    Bounded: MAX_FILE_BYTES in or out, gzip's output by MAX_INFLATE_RATIO, the JSON by
    MAX_JSON_DEPTH (``libdoctor.bounded``)."""
    text = inflate(data, source)
    try:
        document = loads_json(text)
    except InputRefused as exc:
        raise SnapshotError(f"{source}: {exc}") from None
    except ValueError as exc:
        raise SnapshotError(f"{source}: not a snapshot (not JSON: {exc})") from None
    return from_document(document, source)


def inflate(data: bytes, source: str) -> bytes:
    """DATA's JSON text: DATA itself, or gunzip'd when gzip; at most MAX_FILE_BYTES in, and
    out by ``bounded.gunzip``'s limits."""
    if len(data) > MAX_FILE_BYTES:
        raise SnapshotError(f"{source}: larger than MAX_FILE_BYTES, not read")
    if data[:2] == b"\x1f\x8b":
        try:
            return gunzip(data)
        except InputRefused as exc:
            raise SnapshotError(f"{source}: {exc}") from None
        except ValueError as exc:
            raise SnapshotError(f"{source}: not a readable gzip file ({exc})") from None
    return data


# The parts of a snapshot a diff compares, besides its distributions: what a fleet's reader
# digests one by one (``analysis.fleet``), and ``read_part`` reads.
PARTS = ("deep", "interpreter", "platform", "libraries", "stack", "findings")


def from_document(document: object, source: str) -> Snapshot:
    node, prefix = read_header(document, source)
    assert isinstance(document, dict)  # read_header checked it
    parts = {name: read_part(document, name, source) for name in PARTS[:3]}
    rows = _Fields(document, source, "").array("distributions")
    dists = tuple(read_distribution(d, i, source) for i, d in enumerate(rows))
    parts.update((name, read_part(document, name, source)) for name in PARTS[3:])
    return assemble(node, prefix, parts, dists)


def read_header(document: object, source: str) -> tuple[str, str]:
    """The document's node and prefix, once its schema and version are checked (and that
    it has a stack object: the order ``from_document`` has always checked in)."""
    top = _Fields(document, source, "")
    if top.raw.get("schema") != SCHEMA:
        raise SnapshotError(f"{source}: not a libdoctor snapshot (no schema {SCHEMA!r})")
    version = top.raw.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:  # true == 1 in Python
        raise SnapshotError(
            f"{source}: snapshot schema_version {version!r}, this libdoctor reads "
            f"{SCHEMA_VERSION} (take the snapshots with the same libdoctor version)"
        )
    top.fields("stack")
    return top.text("node"), top.text("prefix")


def read_part(document: dict[str, Any], name: str, source: str) -> Any:
    """One of PARTS of a document, checked: ``deep`` a bool, ``interpreter`` and
    ``platform`` dicts of strings, ``libraries`` and ``findings`` tuples of records,
    ``stack`` (frameworks, cuda_packages)."""
    top = _Fields(document, source, "")
    if name == "deep":
        return top.boolean("deep")
    if name in ("interpreter", "platform"):
        return top.texts_by_name(name)
    if name == "libraries":
        return tuple(_read_library(lib) for lib in top.items("libraries"))
    if name == "findings":
        return tuple(
            FindingRecord(
                f.text("code"),
                f.text("severity"),
                f.text("distribution", True),
                tuple(f.strings("paths")),
                f.text("message"),
            )
            for f in top.items("findings")
        )
    stack = top.fields("stack")
    frameworks = tuple(
        (f.text("framework"), f.text("distribution"), f.text("version"), f.text("cuda", True))
        for f in stack.items("frameworks")
    )
    cuda = tuple(
        (p.text("distribution"), p.text("version"), p.integer("major"))
        for p in stack.items("cuda_packages")
    )
    return frameworks, cuda


def read_distribution(raw: object, index: int, source: str) -> DistRecord:
    """The document's INDEXth distribution, checked (errors name it by INDEX)."""
    return _read_dist(_Fields(raw, source, f"distributions[{index}]"))


def assemble(
    node: str, prefix: str, parts: Mapping[str, Any], distributions: tuple[DistRecord, ...]
) -> Snapshot:
    """The Snapshot of a header, PARTS (as ``read_part`` gives them) and distributions."""
    frameworks, cuda_packages = parts["stack"]
    return Snapshot(
        node=node,
        prefix=prefix,
        deep=parts["deep"],
        interpreter=parts["interpreter"],
        platform=parts["platform"],
        distributions=distributions,
        libraries=parts["libraries"],
        frameworks=frameworks,
        cuda_packages=cuda_packages,
        findings=parts["findings"],
    )


def _read_dist(d: _Fields) -> DistRecord:
    from libdoctor.environment.distributions import canonicalize_name

    name = d.text("name")
    direct = d.raw.get("direct_url")
    return DistRecord(
        name=name,
        version=d.text("version"),
        key=canonicalize_name(name),
        installer=d.text("installer", True),
        requested=d.boolean("requested"),
        extras=tuple(d.strings("extras")),
        direct_url=canonical_json(direct) if direct is not None else None,
        tags=tuple(d.strings("tags")),
        site=d.text("site"),
        metadata=d.text("metadata"),
        record_error=d.text("record_error", True),
        files=tuple(_read_row(d, i, row) for i, row in enumerate(d.array("files"))),
    )


def _read_row(d: _Fields, index: int, row: object) -> FileRow:
    where = f"{d.where}.files[{index}]"
    if not isinstance(row, list) or len(row) not in (3, 4):
        raise SnapshotError(f"{d.source}: {where} is not [path, size, hash(, digest)]")
    path, size, *hashes = row
    ok = isinstance(path, str) and is_row_path(path) and (size is None or type(size) is int)
    if not ok or not all(h is None or isinstance(h, str) for h in hashes):
        raise SnapshotError(f"{d.source}: {where} is not [path, size, hash(, digest)]")
    return FileRow(path, size, *hashes)


def is_row_path(path: str) -> bool:
    """A path a snapshot's file row may hold. Rows are data: told and compared, never
    opened or joined to a directory here (a RECORD row may well be ``../../../bin/x``); still
    one no RECORD could hold (empty, a NUL) is a damaged row."""
    return bool(path) and "\0" not in path


def _read_library(lib: _Fields) -> LibraryRecord:
    owners = []
    for i, owner in enumerate(lib.array("owners")):
        if not (
            isinstance(owner, list) and len(owner) == 2 and all(isinstance(o, str) for o in owner)
        ):
            raise SnapshotError(f"{lib.source}: {lib.where}.owners[{i}] is not [name, version]")
        owners.append((owner[0], owner[1]))
    major = lib.raw.get("cuda_major")
    return LibraryRecord(
        name=lib.text("name"),
        path=lib.text("path", True),
        soname=lib.text("soname", True),
        owners=tuple(owners),
        cuda_major=lib.integer("cuda_major") if major is not None else None,
        modules=tuple(lib.strings("modules")),
    )


class _Fields:
    """One JSON object of a snapshot, read field by field: a wrong type names the field."""

    def __init__(self, raw: object, source: str, where: str) -> None:
        if not isinstance(raw, dict):
            raise SnapshotError(f"{source}: {where or 'the document'} is not an object")
        self.raw: dict[str, Any] = raw
        self.source = source
        self.where = where

    def _bad(self, key: str, expected: str) -> SnapshotError:
        shown = repr(self.raw.get(key, "<missing>"))
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        name = f"{self.where}.{key}" if self.where else key
        return SnapshotError(f"{self.source}: {name} is {shown}, expected {expected}")

    def text(self, key: str, optional: bool = False) -> Any:
        value = self.raw.get(key)
        if isinstance(value, str) or (optional and value is None and key in self.raw):
            return value
        raise self._bad(key, "a string" + (" or null" if optional else ""))

    def boolean(self, key: str) -> bool:
        value = self.raw.get(key)
        if isinstance(value, bool):
            return value
        raise self._bad(key, "true or false")

    def integer(self, key: str) -> int:
        value = self.raw.get(key)
        if type(value) is int:
            return value
        raise self._bad(key, "an integer")

    def array(self, key: str) -> list[Any]:
        value = self.raw.get(key)
        if isinstance(value, list):
            return value
        raise self._bad(key, "a list")

    def strings(self, key: str) -> list[str]:
        value = self.array(key)
        if all(isinstance(v, str) for v in value):
            return value
        raise self._bad(key, "a list of strings")

    def fields(self, key: str) -> _Fields:
        if not isinstance(self.raw.get(key), dict):
            raise self._bad(key, "an object")
        return _Fields(self.raw[key], self.source, f"{self.where}.{key}".lstrip("."))

    def texts_by_name(self, key: str) -> dict[str, str]:
        value = self.fields(key).raw
        if all(isinstance(v, str) for v in value.values()):
            return dict(value)
        raise self._bad(key, "an object of strings")

    def items(self, key: str) -> list[_Fields]:
        name = f"{self.where}.{key}".lstrip(".")
        return [_Fields(v, self.source, f"{name}[{i}]") for i, v in enumerate(self.array(key))]


# --------------------------------------------------------------------------- framing


FRAME = "#libdoctor-snapshot"
_FRAME_WIDTH = 3000  # base64 characters per line: each line one write, under PIPE_BUF


def frame(task: str, node: str, data: bytes) -> str:
    """DATA (a gzip'd snapshot) as lines that survive being interleaved, line by line, with
    other tasks' output (``srun`` merges every task's stdout into one stream)."""
    import base64
    import hashlib

    text = base64.b64encode(data).decode("ascii")
    lines = [f"{FRAME} {task} begin {node}"]
    lines += [
        f"{FRAME} {task} {text[i : i + _FRAME_WIDTH]}" for i in range(0, len(text), _FRAME_WIDTH)
    ]
    lines.append(f"{FRAME} {task} end {hashlib.sha256(data).hexdigest()}")
    return "\n".join(lines) + "\n"


FRAME_LINE = len(FRAME) + _FRAME_WIDTH + 256  # the longest a frame's line can be
# All frames under way together: a node's snapshot is at most MAX_FILE_BYTES, gzip'd.
_FRAMED_CHARS = MAX_FILE_BYTES // 3 * 4


def unframe(lines: Iterable[str]) -> list[tuple[str, bytes]]:
    """(node, data) of every complete frame in LINES, in task order (``frames``)."""
    done = {task: (node, data) for task, node, data in frames(lines)}
    return [done[t] for t in sorted(done, key=task_order)]


def frames(lines: Iterable[str]) -> Iterator[tuple[str, str, bytes]]:
    """(task, node, data) of each frame in LINES as it completes; other lines are skipped,
    and a frame cut short or damaged is a SnapshotError naming its node. Only the frames
    under way are held, at most MAX_FILE_BYTES of snapshot in all: a finished one is the
    caller's, so a fleet of any size streams through."""
    import base64
    import binascii
    import hashlib

    open_frames: dict[str, tuple[str, list[str]]] = {}
    held = 0
    for line in lines:
        head, _, rest = line.rstrip("\n").partition(" ")
        if head != FRAME:
            continue
        task, _, body = rest.partition(" ")
        word, _, arg = body.partition(" ")
        if word == "begin":
            held -= sum(map(len, open_frames.pop(task, ("", []))[1]))
            open_frames[task] = (arg, [])
        elif word == "end" and task in open_frames:
            node, parts = open_frames.pop(task)
            held -= sum(map(len, parts))
            try:
                data = base64.b64decode("".join(parts), validate=True)
            except (binascii.Error, ValueError):
                data = b""
            if hashlib.sha256(data).hexdigest() != arg:
                raise SnapshotError(f"the snapshot of node {node} (task {task}) arrived damaged")
            yield task, node, data
        elif task in open_frames:
            held += len(body)
            if held > _FRAMED_CHARS:
                raise SnapshotError("the nodes sent more than MAX_FILE_BYTES of snapshots")
            open_frames[task][1].append(body)
    for task, (node, _) in open_frames.items():
        raise SnapshotError(f"the snapshot of node {node} (task {task}) was cut short")


def task_order(task: str) -> tuple[int, str]:
    """Slurm's task ids in their order: numbers first, by value."""
    return (int(task), "") if task.isdigit() else (1 << 62, task)
