"""elf.dynsym: what an object imports and whether it exports a name, against readelf/nm."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from libdoctor.elf.dynamic import ElfFormatError
from libdoctor.elf.dynsym import open_symbols, symbols_of
from support.cc import compile_lib, require_gcc

HEAD, TAIL, GONE = "_ZN3c104headEv", "_ZN3c104tailEv", "_ZN3c106legacyEv"


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    require_gcc()
    return compile_lib(tmp_path, "libx.so", soname="libx.so", exports=[HEAD, TAIL], imports=[GONE])


def test_imports_and_exports(lib: Path) -> None:
    table = open_symbols(str(lib))
    assert table is not None
    assert GONE in table.imported() and HEAD not in table.imported()
    assert table.defines(HEAD) and table.defines(TAIL)
    assert not table.defines(GONE) and not table.defines("_ZN3c107missingEv")


@pytest.mark.skipif(shutil.which("nm") is None, reason="binutils' nm is the oracle")
def test_agrees_with_nm_on_a_real_library(lib: Path) -> None:
    done = subprocess.run(["nm", "-D", "--undefined-only", str(lib)], capture_output=True,
                          text=True, check=True)  # fmt: skip
    undefined = {line.split()[-1] for line in done.stdout.splitlines() if " U " in f" {line}"}
    table = open_symbols(str(lib))
    assert table is not None
    assert set(table.imported()) == undefined


def test_no_section_table_is_unknown(lib: Path) -> None:
    data = bytearray(lib.read_bytes())
    data[0x28:0x30] = bytes(8)  # e_shoff
    data[0x3C:0x3E] = bytes(2)  # e_shnum
    assert symbols_of(bytes(data)) is None


def test_a_section_table_past_the_end_is_malformed(lib: Path) -> None:
    data = bytearray(lib.read_bytes())
    data[0x28:0x30] = (len(data) + 4096).to_bytes(8, "little")
    with pytest.raises(ElfFormatError):
        symbols_of(bytes(data))
