"""Libraries loaded at run time by name (loader.dlopened), against glibc's real dlopen.

The oracle: a gcc-built library whose own code calls ``dlopen(NAME)`` (``compile_dlopener``)
is loaded by a real extension module's import in a child interpreter, and asked to load
NAME; what ``l_name`` glibc reports (or its ``dlerror()``) is held against what
``Loader.runtime_loads`` says, in the process that module's import builds.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from libdoctor.elf.rodata import read_library_strings
from libdoctor.loader.model import LoadedObject, SearchConfig
from libdoctor.loader.search import Loader
from libdoctor.loader.system import LoaderSystem
from support.cc import compile_dlopener, compile_lib, require_gcc
from support.stackfake import EXT, compile_extension

SUB = "libsub.so.1"
DISP = "libdisp.so.9"


@dataclass(frozen=True)
class Case:
    disp_rpath: str | None = None
    disp_runpath: str | None = None
    module_rpath: str | None = None
    module_runpath: str | None = None
    sub_in: str | None = "sub"  # directory holding libsub.so.1 (None: nowhere)
    module_needs_sub: bool = False


CASES = {
    "its own DT_RPATH $ORIGIN": Case(disp_rpath="$ORIGIN", module_runpath="{disp}", sub_in="disp"),
    "its loader's DT_RPATH": Case(module_rpath="{disp}:{sub}"),
    "its loader's DT_RUNPATH does not apply": Case(module_runpath="{disp}:{sub}"),
    "its own DT_RUNPATH": Case(disp_runpath="{sub}", module_rpath="{disp}"),
    "its own DT_RUNPATH hides the loader's DT_RPATH": Case(
        disp_runpath="/nonexistent", module_rpath="{disp}:{sub}"
    ),
    "not there at all": Case(disp_rpath="$ORIGIN", module_rpath="{disp}", sub_in=None),
    "already loaded by name": Case(module_rpath="{disp}:{sub}", module_needs_sub=True),
}


def _build(tmp: Path, case: Case) -> tuple[Path, Path]:
    require_gcc()
    dirs = {name: tmp / name for name in ("module", "disp", "sub")}
    fill = {k: str(v) for k, v in dirs.items()}

    def expand(text: str | None) -> str | None:
        return text.format(**fill) if text is not None else None

    compile_dlopener(
        dirs["disp"], DISP, soname=DISP, rpath=expand(case.disp_rpath),
        runpath=expand(case.disp_runpath), strings=[SUB],
    )  # fmt: skip
    if case.sub_in is not None:
        compile_lib(dirs[case.sub_in], SUB, soname=SUB)
    needed = [DISP, SUB] if case.module_needs_sub else [DISP]
    data = compile_extension(
        "mod", needed=needed, rpath=expand(case.module_rpath), runpath=expand(case.module_runpath)
    )
    dirs["module"].mkdir(parents=True, exist_ok=True)
    module = dirs["module"] / f"mod{EXT}"
    module.write_bytes(data)
    return module, dirs["disp"] / DISP


def _real_dlopen(module: Path, disp: Path) -> str:
    code = (
        "import ctypes, sys\n"
        f"sys.path.insert(0, {str(module.parent)!r})\n"
        "import mod\n"
        f"lib = ctypes.CDLL({str(disp)!r})\n"
        "lib.libdoctor_load.restype = ctypes.c_char_p\n"
        f"print(lib.libdoctor_load({SUB.encode()!r}).decode())\n"
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


@pytest.mark.parametrize("name", sorted(CASES))
def test_runtime_loads_agree_with_glibc(name: str, system: LoaderSystem, tmp_path: Path) -> None:
    module, disp = _build(tmp_path, CASES[name])
    real = _real_dlopen(module, disp)
    loader = Loader(SearchConfig(system, None, str(tmp_path)))
    process = loader.start_interpreter(sys.executable)

    def wanted(obj: LoadedObject) -> list[str]:
        return [SUB] if obj.soname == DISP else []

    (closure,) = loader.runtime_loads(process, str(module), wanted)
    res = closure.resolutions[0]
    assert res.kind == "runtime" and res.requester is not None
    assert os.path.basename(res.requester) == DISP
    if real.startswith("/"):
        assert res.status == "found", (name, real, res)
        assert os.path.realpath(res.path or "") == os.path.realpath(real), (name, real, res)
    else:
        assert res.status == "not_found", (name, real, res)
        assert SUB in real


def test_library_strings_are_the_whole_strings(tmp_path: Path) -> None:
    require_gcc()
    lib = compile_lib(
        tmp_path,
        "libx.so",
        strings=["libcudnn_graph.so", "libnvrtc-builtins.so.13.0", "see libfoo.so.1 for it",
                 "/usr/lib/libbar.so.2", "libnvrtc.so.", "libz.so.1"],
    )  # fmt: skip
    assert read_library_strings(str(lib)) == (
        "libcudnn_graph.so",
        "libnvrtc-builtins.so.13.0",
        "libz.so.1",
    )
    assert read_library_strings(str(lib), limit=8) is None  # a .rodata over the limit


def test_no_section_table_means_no_strings(tmp_path: Path) -> None:
    require_gcc()
    lib = compile_lib(tmp_path, "liby.so", strings=["libz.so.1"])
    data = bytearray(lib.read_bytes())
    data[0x28:0x30] = bytes(8)  # e_shoff = 0: a stripped section table
    data[0x3C:0x3E] = bytes(2)  # e_shnum = 0
    lib.write_bytes(bytes(data))
    assert read_library_strings(str(lib)) is None
    assert ctypes.sizeof(ctypes.c_void_p) == 8  # the offsets above are ELF64's
