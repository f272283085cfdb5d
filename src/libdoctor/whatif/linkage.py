"""What the locked wheels' extension modules ask of the loader, read from the wheels by range.

An extension module's DT_NEEDED, DT_RPATH and DT_RUNPATH live in its dynamic section, which a
linker puts behind ``.text``, inside a deflated zip member. Only a member's compressed bytes
are fetched, by range, and inflated from its start only as far as the ELF parser
(``elf.dynamic.parse_elf_at``) reads: the header and program headers, then on to the
dynamic array and the string table it points into (``external.member.MemberView``).

Which members: Python extension modules only, the files importlib would load as such and a
library is not named like (``*.cpython-311-x86_64-linux-gnu.so``, ``*.abi3.so``, and a
plain ``*.so`` whose name does not start with ``lib``), never a package's big libraries
(``torch/lib/libtorch_cpu.so``); and only of wheels whose platform tag is of a policy
(``environment.policy``: a ``linux_*`` or ``any`` wheel is not judged).

What it may cost is bounded, and a bound passed is never an error: a module over
``MEMBER_CAP`` bytes is not read, nor are more modules than ``PLAN_SHARE`` of the wheels'
bytes allow (at least ``PLAN_FLOOR``; each wheel's smallest first, round by round across the
wheels); the plan counts them (``--json`` lists them). A module that is no ELF object is an
info (``lock-cannot-tell``). The modules chosen are fetched whole, near ones in one request
(their dynamic sections lie near their ends), and inflated only as far as the parser reads.

What was read is kept in the wheel-index cache beside the wheel's file list (``save_note``,
keyed by the wheel's sha256): a warm plan asks nothing of the network.
"""

from __future__ import annotations

import functools
import os
import re
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from libdoctor.checks.linkage import LockedExtension, UnreadExtension
from libdoctor.elf.dynamic import ElfFormatError, parse_elf_at
from libdoctor.environment.model import Environment
from libdoctor.environment.policy import system_libraries
from libdoctor.environment.record import RecordEntry
from libdoctor.external.member import MemberError, MemberView, member_data
from libdoctor.external.remote import RemoteMembers, cached_note, save_note
from libdoctor.whatif.threads import WORKERS, each

__all__ = ["MEMBER_CAP", "PLAN_FLOOR", "PLAN_SHARE", "Linkage", "WheelSource", "read_linkage"]

MEMBER_CAP = 32 << 20  # bytes (uncompressed, and compressed fetched) of one module at most
PLAN_SHARE = 100  # the modules read: at most 1/100 of the locked wheels' bytes (uncompressed)
PLAN_FLOOR = 4 << 20  # ... and at least this many, for a small lock
_NOTE = "dynamic-1"  # the cache note's key: its format
_TAGGED = re.compile(r"\.(cpython-\d+[a-z]*-[^./]+|abi3|pypy\d+-pp\d+-[^./]+)\.so$")


@dataclass(frozen=True, slots=True)
class WheelSource:
    """One locked wheel as ``whatif.lock`` read it: where it is and what it holds."""

    dist: str  # the key of its distribution in the environment-to-be
    filename: str
    url: str  # a URL, or a local path
    sha256: str | None
    size: int  # the wheel's bytes
    members: tuple[RecordEntry, ...]  # its RECORD
    local: bool  # URL is a local file's path (a lock's path or file: URL, made a path)


@dataclass(frozen=True, slots=True)
class Linkage:
    extensions: tuple[LockedExtension, ...]
    unread: tuple[UnreadExtension, ...]
    fetched: int  # bytes that came over the network
    requests: int


@dataclass(frozen=True, slots=True)
class _Wanted:
    wheel: WheelSource
    members: tuple[RecordEntry, ...]  # to read
    over: tuple[tuple[RecordEntry, str], ...]  # left out by the caps, and why


def extension_members(members: Sequence[RecordEntry]) -> tuple[RecordEntry, ...]:
    """The members of a wheel that are Python extension modules (module docstring)."""
    found = []
    for entry in members:
        if not entry.path.endswith(".so"):
            continue
        top, _, rest = entry.path.partition("/")
        name = entry.path.rpartition("/")[2]
        if top.endswith((".data", ".dist-info")) or not rest:
            continue
        if _TAGGED.search(name) or not name.startswith("lib"):
            found.append(entry)
    return tuple(found)


def read_linkage(
    wheels: Sequence[WheelSource],
    env: Environment,
    *,
    cache_dir: str | None,
    credentials: Sequence[str] = (),
    offline: bool = False,
    workers: int = WORKERS,
) -> Linkage:
    """Each locked wheel's extension modules' dynamic sections: from the cache, else read by
    range (or from the local file); none at all with OFFLINE for a wheel not cached."""
    wanted = _within_caps(wheels)
    read = functools.partial(_read_wheel, env=env, cache_dir=cache_dir,
                             credentials=credentials, offline=offline)  # fmt: skip
    results = each([w for w in wanted if w.members or w.over], read, workers)
    return Linkage(
        tuple(e for r in results for e in r[0]),
        tuple(u for r in results for u in r[1]),
        sum(r[2] for r in results),
        sum(r[3] for r in results),
    )


def _within_caps(wheels: Sequence[WheelSource]) -> list[_Wanted]:
    """Which modules to read: under ``MEMBER_CAP`` each, within the plan's share, in rounds
    (every wheel's smallest module, then every wheel's next one, ...), so that each wheel
    with extension modules has some read. The same choice warm or cold, so the findings
    are too."""
    judged = [w for w in wheels if system_libraries(w.filename) is not None]
    candidates = [
        (rank, entry.size or 0, entry.path, entry, wheel)
        for wheel in judged
        for rank, entry in enumerate(
            sorted(extension_members(wheel.members), key=lambda e: (e.size or 0, e.path))
        )
    ]
    left = max(sum(w.size for w in wheels) // PLAN_SHARE, PLAN_FLOOR)
    chosen: dict[str, list[RecordEntry]] = {}
    over: dict[str, list[tuple[RecordEntry, str]]] = {}
    for _, _, _, entry, wheel in sorted(candidates, key=lambda c: c[:3]):
        size = entry.size or 0
        if size > MEMBER_CAP:
            why = f"{size:,} bytes, over the {MEMBER_CAP:,} one module is read to (MEMBER_CAP)"
        elif size > left:
            why = "over what one plan reads of extension modules (PLAN_SHARE of the wheels)"
        else:
            left -= size
            chosen.setdefault(wheel.filename, []).append(entry)
            continue
        over.setdefault(wheel.filename, []).append((entry, why))
    return [
        _Wanted(w, tuple(chosen.get(w.filename, ())), tuple(over.get(w.filename, ())))
        for w in wheels
    ]


# --------------------------------------------------------------------------- one wheel


_Result = tuple[list[LockedExtension], list[UnreadExtension], int, int]


def _read_wheel(
    wanted: _Wanted,
    *,
    env: Environment,
    cache_dir: str | None,
    credentials: Sequence[str],
    offline: bool,
) -> _Result:
    wheel = wanted.wheel
    kept: dict[str, Any] = cached_note(cache_dir, wheel.sha256, _NOTE) or {}
    if not isinstance(kept, dict):
        kept = {}
    missing = [e for e in wanted.members if e.path not in kept]
    fetched = requests = 0
    if missing and not offline:
        got, fetched, requests = _read_members(wheel, missing, credentials)
        kept = {**kept, **got}
        save_note(cache_dir, wheel.sha256, _NOTE, kept)
    site = env.target.site_dirs[0].path
    extensions, unread = [], []
    for entry in wanted.members:
        path = os.path.normpath(os.path.join(site, *entry.path.split("/")))
        item = kept.get(entry.path)
        if not isinstance(item, dict):
            why = "not in the wheel-index cache (--offline)"
            unread.append(UnreadExtension(wheel.dist, wheel.filename, path, why))
        elif "why" in item:
            unread.append(UnreadExtension(wheel.dist, wheel.filename, path, str(item["why"])))
        else:
            extensions.append(_extension(wheel, path, item))
    for entry, why in wanted.over:
        path = os.path.normpath(os.path.join(site, *entry.path.split("/")))
        unread.append(UnreadExtension(wheel.dist, wheel.filename, path, why, capped=True))
    return extensions, unread, fetched, requests


def _extension(wheel: WheelSource, path: str, item: Mapping[str, Any]) -> LockedExtension:
    rpath, runpath = item.get("rpath"), item.get("runpath")
    return LockedExtension(
        wheel.dist, wheel.filename, path, tuple(str(n) for n in item.get("needed", ())),
        None if rpath is None else str(rpath), None if runpath is None else str(runpath),
    )  # fmt: skip


def _read_members(
    wheel: WheelSource, entries: Sequence[RecordEntry], credentials: Sequence[str]
) -> tuple[dict[str, Any], int, int]:
    """Each entry's dynamic section as a cache note, or why it could not be read; and the
    network's bytes and requests."""
    if wheel.local:
        return _read_local(wheel.url, entries), 0, 0
    remote = RemoteMembers(wheel.url, credentials)
    try:
        infos = [(e, remote.info(e.path)) for e in entries]
        # whole members, near ones in one request: the dynamic section is near the end
        within = [i for _, i in infos if i is not None and i.compress_size <= MEMBER_CAP]
        remote.prefetch(within, MEMBER_CAP)
        got = {e.path: _parse(i, remote.fetch) for e, i in infos}
        return got, remote.fetched, remote.requests
    finally:
        remote.close()


def _read_local(path: str, entries: Sequence[RecordEntry]) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle, zipfile.ZipFile(handle) as archive:
            fetch = functools.partial(member_data, functools.partial(_local_read, handle))
            return {e.path: _parse(archive.NameToInfo.get(e.path), fetch) for e in entries}
    except (OSError, zipfile.BadZipFile) as exc:
        return {e.path: {"why": f"the wheel cannot be read ({exc})"} for e in entries}


def _local_read(handle: BinaryIO, start: int, end: int) -> bytes:
    handle.seek(start)
    return handle.read(end - start)


def _parse(
    info: zipfile.ZipInfo | None, fetch: Callable[[zipfile.ZipInfo], Callable[[int, int], bytes]]
) -> dict[str, Any]:
    """One member's dynamic section as a cache note: needed, rpath, runpath; or why not."""
    if info is None:
        return {"why": "its RECORD lists it, the zip does not hold it"}
    if info.file_size > MEMBER_CAP:
        return {"why": f"{info.file_size:,} bytes, over MEMBER_CAP ({MEMBER_CAP:,})"}
    try:
        view = MemberView(
            fetch(info), info.compress_type, info.compress_size, info.file_size, MEMBER_CAP
        )
        elf = parse_elf_at(view.read_at, info.file_size)
    except (MemberError, ElfFormatError) as exc:
        return {"why": f"not read as ELF: {exc}"}
    return {"needed": list(elf.needed), "rpath": elf.rpath, "runpath": elf.runpath}
