from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libdoctor.elf.dynamic import ElfFormatError
from libdoctor.elf.symbols import _defines, defines_symbol, gnu_hash, sysv_hash
from support.cc import require_gcc

SOURCE = "int PyInit_demo(void) { return 1; }\nint helper_fn(void) { return 2; }\n"


@pytest.fixture(scope="module", params=["gnu", "sysv", "both"])
def library(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    gcc = require_gcc()
    directory = tmp_path_factory.mktemp(f"sym-{request.param}")
    src = directory / "demo.c"
    src.write_text(SOURCE)
    out = directory / "demo.so"
    subprocess.run(
        [gcc, "-shared", "-fPIC", f"-Wl,--hash-style={request.param}", "-o", str(out), str(src)],
        check=True,
    )
    return out


def _readelf_defines(path: Path, name: str) -> bool:
    out = subprocess.run(
        ["readelf", "--dyn-syms", "-W", str(path)], capture_output=True, text=True, check=True
    ).stdout
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 8 and fields[7].split("@")[0] == name and fields[6] != "UND":
            return True
    return False


@pytest.mark.parametrize("name", ["PyInit_demo", "helper_fn", "PyInit_other", "printf", ""])
def test_agrees_with_readelf(library: Path, name: str) -> None:
    assert defines_symbol(str(library), name) == _readelf_defines(library, name)


def test_undefined_references_do_not_count(library: Path) -> None:
    # Every gcc-built library references (but does not define) __cxa_finalize.
    assert _readelf_defines(library, "__cxa_finalize") is False
    assert defines_symbol(str(library), "__cxa_finalize") is False


def test_hash_functions_match_known_values() -> None:
    assert gnu_hash(b"") == 5381
    assert gnu_hash(b"printf") == 0x156B2BB8
    assert sysv_hash(b"printf") == 0x077905A6


def test_not_elf(tmp_path: Path) -> None:
    junk = tmp_path / "x.so"
    junk.write_bytes(b"hello")
    with pytest.raises(ElfFormatError):
        defines_symbol(str(junk), "PyInit_x")


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_corrupt_copies_raise_only_elf_format_error(library: Path, data: st.DataObject) -> None:
    original = library.read_bytes()
    blob = bytearray(original)
    cut = data.draw(st.integers(0, len(blob)))
    flips = data.draw(
        st.lists(st.tuples(st.integers(0, len(blob) - 1), st.integers(0, 255)), max_size=8)
    )
    for offset, value in flips:
        blob[offset] = value
    view = bytes(blob[:cut])
    try:
        result = _defines(lambda o, n: view[o : o + n], len(view), "PyInit_demo")
    except ElfFormatError:
        return
    assert isinstance(result, bool)
