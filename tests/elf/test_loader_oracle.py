"""What glibc's loader refuses or crashes on is elf-invalid; what it loads is not.

Each case byte-patches a gcc-built CPython extension module in one field (the packaging
``_elffile`` habit), imports the copy in a child process - the real ``dlopen``, the oracle -
and reads it with ``read_elf`` and ``parse_elf``. The table records what the loader does
(glibc 2.36 on x86-64), so a loader that behaves otherwise fails here first. Then ``check``
without ``--deep`` on a venv holding such copies, installed by real pip. The healthy side:
every ELF file of a real env and of the system library directory parses (``-m realenv``).
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from libdoctor.elf.dynamic import (
    DT_FINI_ARRAY,
    DT_FINI_ARRAYSZ,
    DT_INIT_ARRAY,
    DT_INIT_ARRAYSZ,
    DT_JMPREL,
    DT_NEEDED,
    DT_NULL,
    DT_PLTREL,
    DT_PLTRELSZ,
    DT_RELA,
    DT_RELACOUNT,
    DT_RELAENT,
    DT_RELASZ,
    DT_STRSZ,
    DT_STRTAB,
    DT_SYMTAB,
    PT_DYNAMIC,
    PT_LOAD,
    ElfFormatError,
    ElfInfo,
    is_elf_magic,
    parse_elf,
    read_elf,
)
from support.elfpatch import ElfPatch
from support.stackfake import EXT, compile_extension
from support.venvs import Libdoctor, VenvFactory, pip_install
from support.wheels import WheelFactory

DT_SYMENT = 11  # a tag glibc reads and never uses: what a removed tag is turned into
DT_GNU_HASH = 0x6FFFFEF5
DT_VERNEEDNUM = 0x6FFFFFFF
UNMAPPED = 0x7FFF_0000_0000_0000
TORCH_ENV = Path(os.environ.get("LIBDOCTOR_TORCH_ENV", "/work/envs/torchenv"))

Outcome = Literal["imports", "refused", "crash"]


@dataclass(frozen=True)
class Case:
    name: str
    patch: Callable[[ElfPatch], bytes]
    outcome: Outcome  # what `import` of the copy does: the loader's verdict
    reason: str | None  # read_elf's ElfFormatError contains this; None: it parses; "": any


# Field offsets in an Elf64_Phdr.
P_OFFSET, P_VADDR, P_FILESZ, P_MEMSZ = 8, 16, 32, 40
Patch = Callable[[ElfPatch], bytes]


def dynamic_phdr(field: int, value: int) -> Patch:
    return lambda p: p.put(p.phdr(PT_DYNAMIC) + field, "<Q", value)


def drop(tag: int) -> Patch:
    return lambda p: p.retag(tag, DT_SYMENT)


def set_value(tag: int, value: int) -> Patch:
    return lambda p: p.set_value(tag, value)


def strip_nul_after_first_needed(p: ElfPatch) -> bytes:
    at = p.value(DT_STRTAB) + p.value(DT_NEEDED)  # vaddr == offset in the first segment
    return p.put(p.data.index(b"\0", at), "<B", ord("X"))


def misalign_last_load(p: ElfPatch) -> bytes:
    at = p.phdr(PT_LOAD, -1) + P_VADDR
    (vaddr,) = struct.unpack_from("<Q", p.data, at)
    return p.put(at, "<Q", vaddr + 8)


def no_loads(p: ElfPatch) -> bytes:
    out = p.data
    for at in p.phdrs:
        if struct.unpack_from("<I", p.data, at)[0] == PT_LOAD:
            out = p.put(at, "<I", PT_UNKNOWN, data=out)
    return out


PT_UNKNOWN = 0x6474E5B4  # an OS-specific type no loader knows: the header is ignored
PAST_STRSZ: Patch = lambda p: p.set_value(DT_NEEDED, p.value(DT_STRSZ) + 8)  # noqa: E731

CASES = [
    # -- the dynamic array: glibc walks it from PT_DYNAMIC's address to the first DT_NULL
    Case("dt-null-missing", lambda p: p.retag(DT_NULL, DT_SYMENT), "imports", None),
    Case("dynamic-zeroed", lambda p: p.dynamic_replaced(b""), "crash", "no DT_SYMTAB"),
    Case("dynamic-garbage-0", lambda p: p.garbage_dynamic(0), "crash", ""),
    Case("dynamic-garbage-1", lambda p: p.garbage_dynamic(1), "crash", ""),
    Case("dynamic-garbage-2", lambda p: p.garbage_dynamic(2), "crash", ""),
    Case("dynamic-garbage-3", lambda p: p.garbage_dynamic(3), "crash", ""),
    Case("dynamic-filesz-huge", dynamic_phdr(P_FILESZ, 2**40), "imports", None),
    Case("dynamic-memsz-huge", dynamic_phdr(P_MEMSZ, 2**40), "imports", None),
    Case("dynamic-filesz-zero", dynamic_phdr(P_FILESZ, 0), "refused", "without a dynamic"),
    Case("no-pt-dynamic", dynamic_phdr(0, PT_UNKNOWN), "refused", "without a dynamic"),
    Case("dynamic-unmapped", dynamic_phdr(P_VADDR, 2**47), "crash", "not in any PT_LOAD"),
    # Stricter than the loader: it never reads p_offset, but readelf does; one is corrupt.
    Case("dynamic-offset-past-eof", dynamic_phdr(P_OFFSET, 2**40), "imports", "disagree"),
    # -- tags every relocated object must have
    Case("no-symtab", drop(DT_SYMTAB), "crash", "no DT_SYMTAB"),
    Case("no-strtab", drop(DT_STRTAB), "crash", "no DT_STRTAB"),
    Case("symtab-unmapped", set_value(DT_SYMTAB, UNMAPPED), "crash", "DT_SYMTAB address"),
    Case("strtab-unmapped", set_value(DT_STRTAB, UNMAPPED), "crash", "DT_STRTAB address"),
    Case("gnu-hash-unmapped", set_value(DT_GNU_HASH, UNMAPPED), "crash", "DT_GNU_HASH address"),
    # -- tables the loader walks by base and size
    Case("no-relasz", drop(DT_RELASZ), "crash", "DT_RELA without DT_RELASZ"),
    Case("no-relaent", drop(DT_RELAENT), "crash", "DT_RELAENT missing"),
    Case("relaent-wrong", set_value(DT_RELAENT, 16), "crash", "DT_RELAENT 16, not 24"),
    Case("relasz-huge", set_value(DT_RELASZ, 2**32), "crash", "runs past its PT_LOAD"),
    Case("relacount-huge", set_value(DT_RELACOUNT, 10**6), "crash", "DT_RELACOUNT"),
    Case("pltrel-wrong", set_value(DT_PLTREL, 3), "crash", "DT_PLTREL is 3"),
    Case("no-jmprel", drop(DT_JMPREL), "crash", "DT_PLTREL without DT_JMPREL"),
    Case("no-pltrelsz", drop(DT_PLTRELSZ), "crash", "without DT_PLTRELSZ"),
    Case("pltrelsz-huge", set_value(DT_PLTRELSZ, 2**32), "crash", "runs past its PT_LOAD"),
    Case("no-init-arraysz", drop(DT_INIT_ARRAYSZ), "crash", "without DT_INIT_ARRAYSZ"),
    Case("init-arraysz-huge", set_value(DT_INIT_ARRAYSZ, 2**20), "crash", "runs past"),
    Case("no-fini-arraysz", drop(DT_FINI_ARRAYSZ), "crash", "without DT_FINI_ARRAYSZ"),
    Case("verneednum-huge", set_value(DT_VERNEEDNUM, 1000), "imports", None),
    # -- strings: glibc reads a name at DT_STRTAB + offset, up to the next NUL
    Case("needed-past-strsz", PAST_STRSZ, "refused", "outside the string table"),
    Case("strsz-huge", set_value(DT_STRSZ, 2**40), "imports", None),
    # Stricter than the loader, which never reads DT_STRSZ (see elf.dynamic.string_table).
    Case("strsz-too-small", set_value(DT_STRSZ, 4), "imports", "outside the string table"),
    # A lost NUL joins two names; the loader asks for the joined one, and so do we.
    Case("needed-nul-lost", strip_nul_after_first_needed, "refused", None),
    # -- program headers
    Case("phoff-past-eof", lambda p: p.put(32, "<Q", len(p.data) + 100), "refused", "extends"),
    Case("phnum-huge", lambda p: p.put(56, "<H", 0x8000), "refused", "extends beyond end"),
    Case("load-misaligned", misalign_last_load, "refused", "not page-aligned"),
    Case("no-pt-load", no_loads, "refused", "no PT_LOAD segment"),
]

_IMPORT = "import sys; sys.path.insert(0, sys.argv[1]); import _C; print('IMPORTED')"


def import_in_child(path: Path) -> tuple[Outcome, str]:
    """What `import` of the extension at PATH does in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT, str(path.parent)],
        capture_output=True,
        text=True,
        errors="replace",
        env={},
        cwd=path.parent,
        timeout=60,
        check=False,
    )
    if done.returncode < 0 or "Inconsistency detected by ld.so" in done.stderr:
        return "crash", done.stderr  # a signal, or one of ld.so's asserts (exit 127)
    if done.returncode == 0 and "IMPORTED" in done.stdout:
        return "imports", done.stderr
    return "refused", done.stderr


@pytest.fixture(scope="module")
def extension() -> ElfPatch:
    """A real extension module: DT_NEEDED libm.so.6 and libc.so.6, RELA and PLT relocations,
    init and fini arrays, GNU hash, symbol versions - what every gcc-built module has."""
    p = ElfPatch(compile_extension("_C", needed=("libm.so.6",)))
    for tag in (DT_RELA, DT_RELACOUNT, DT_JMPREL, DT_INIT_ARRAY, DT_FINI_ARRAY, DT_VERNEEDNUM):
        assert tag in p.tags, f"the fixture lost tag {tag:#x}: rebuild it differently"
    return p


def _verdict(data: bytes) -> ElfInfo | ElfFormatError:
    try:
        return parse_elf(data)
    except ElfFormatError as exc:
        return exc


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_loader_and_read_elf_agree(tmp_path: Path, extension: ElfPatch, case: Case) -> None:
    path = tmp_path / f"_C{EXT}"
    path.write_bytes(case.patch(extension))
    outcome, stderr = import_in_child(path)
    assert outcome == case.outcome, f"glibc changed its mind: {stderr[-400:]}"
    try:
        verdict: ElfInfo | ElfFormatError = read_elf(str(path))
    except ElfFormatError as exc:
        verdict = exc
    assert repr(_verdict(path.read_bytes())) == repr(verdict)  # parse_elf reads the same
    if case.reason is None:
        assert isinstance(verdict, ElfInfo), verdict
        if outcome == "refused":  # the name the loader asked for is the one we report
            assert f"{verdict.needed[0]}: cannot open shared object file" in stderr
    else:
        assert isinstance(verdict, ElfFormatError), verdict
        assert case.reason in str(verdict) and "\n" not in str(verdict)


def test_every_refusal_and_crash_is_elf_invalid() -> None:
    """The rule the table keeps: a copy the loader refuses or dies on is invalid, except where
    the loader read a different name than the file meant and we report that name."""
    for case in CASES:
        if case.outcome == "crash":
            assert case.reason is not None, case.name
        if case.outcome == "refused" and case.reason is None:
            assert case.name == "needed-nul-lost", case.name


def test_good_extension_imports_and_parses(tmp_path: Path, extension: ElfPatch) -> None:
    path = tmp_path / f"_C{EXT}"
    path.write_bytes(extension.data)
    assert import_in_child(path)[0] == "imports"
    assert read_elf(str(path)).needed[:2] == ("libm.so.6", "libc.so.6")


def test_a_garbage_dynamic_section_fails_check_without_deep(
    extension: ElfPatch, new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    """Same size, bytes changed: `import` segfaults, and `check` (no --deep) says elf-invalid,
    an error naming the file and the distribution that owns it. The good copy is not named."""
    bad = {
        "zeroed": extension.dynamic_replaced(b""),
        "garbage": extension.garbage_dynamic(7),
        "relasz": extension.set_value(DT_RELASZ, 2**32),
    }
    files = {f"ldt_garb/{name}/_C{EXT}": data for name, data in bad.items()}
    files |= {f"ldt_garb/ok/_C{EXT}": extension.data, "ldt_garb/__init__.py": b""}
    files |= {f"ldt_garb/{name}/__init__.py": b"" for name in (*bad, "ok")}
    venv = new_venv("garbage")
    pip_install(venv, make_wheel("ldt-garb", "1.0", files))
    run = libdoctor.check(venv.path, "--json")
    assert run.rc == 1, run.describe()
    invalid = {f["paths"][0]: f for f in run.json()["findings"] if f["code"] == "elf-invalid"}
    expected = {str(venv.site_packages / "ldt_garb" / name / f"_C{EXT}") for name in bad}
    assert set(invalid) == expected, run.describe()
    for finding in invalid.values():
        assert finding["severity"] == "error"
        assert finding["distribution"]["name"] == "ldt-garb"
        assert re.search(r"_C\..*\.so is not a valid ELF object", finding["message"])
    assert "Traceback" not in run.stderr


# ---------------------------------------------------------------- the healthy side, for real


def _elf_files(*roots: Path) -> Iterator[Path]:
    """Every regular ELF file under ROOTS, once per inode; separate debug info left out
    (the loader refuses it: its PT_DYNAMIC is empty)."""
    seen: set[tuple[int, int]] = set()
    for root in roots:
        for folder, _dirs, names in os.walk(root):
            if "/usr/lib/debug" in folder:
                continue
            for name in names:
                path = Path(folder, name)
                try:
                    st = path.stat()
                    if not path.is_file() or (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                    with open(path, "rb") as f:
                        if is_elf_magic(f.read(4)):
                            yield path
                except OSError:
                    continue


@pytest.mark.realenv
def test_every_real_elf_file_parses() -> None:
    """Zero false alarms: every ELF file of a real torch env and of the system's library
    directories parses (torch env + /usr/lib/x86_64-linux-gnu here: 1008 files)."""
    system = (Path("/usr/lib/x86_64-linux-gnu"), Path("/usr/lib64"))
    roots = [r for r in (TORCH_ENV, *system) if r.is_dir()]
    if TORCH_ENV not in roots:
        pytest.skip(f"no torch environment at {TORCH_ENV} (set LIBDOCTOR_TORCH_ENV)")
    rejected = []
    count = 0
    for path in _elf_files(*roots):
        count += 1
        try:
            read_elf(str(path))
        except ElfFormatError as exc:
            rejected.append(f"{path}: {exc}")
    assert count > 100
    assert rejected == []
