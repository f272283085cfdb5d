"""Compile tiny ELF shared libraries and executables with gcc, for loader tests.

Every object is linked with ``-nostdlib`` so its DT_NEEDED list is exactly what the test asks
for (no implicit libc), and NEEDED entries are made by linking against throw-away stub libraries
whose DT_SONAME is the wanted string, so any name works: ``libc.so.6``, ``$ORIGIN/libb.so``,
``sub/libx.so``. The stubs live in a private directory and never reach the search path.

Tests that need a compiler call ``require_gcc()`` (or a helper that does): without gcc they are
skipped with a clear reason.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "compile_dlopener",
    "compile_exe",
    "compile_lib",
    "gcc",
    "gcc_can_m32",
    "gcc_ok",
    "lib_bytes",
    "need",
    "patch_elf_header",
    "require_gcc",
]

_LIB_SOURCE = "int {symbol}(void) {{ return 42; }}\n"
# Read-only strings a library holds (``elf.rodata`` reads them): each a whole C string.
_STRINGS_SOURCE = "const char *const {symbol}_strings[] = {{ {items} }};\n"
# A library that dlopens by name from its own code: the caller glibc's dlopen searches from.
_DLOPENER_SOURCE = """\
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
{strings}
const char *libdoctor_load(const char *name) {{
    void *handle = dlopen(name, RTLD_NOW);
    struct link_map *map = 0;
    if (!handle) return dlerror();
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map) return "no link map";
    return map->l_name;
}}
"""
# The executable never runs (the loader only traces it); it needs an entry symbol and nothing else.
_EXE_SOURCE = "void _start(void) {{ for (;;) {{}} }}\nint {symbol}(void) {{ return 0; }}\n"


def need(tool: str) -> str:
    """Path of TOOL on PATH, or skip the calling test."""
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} not found on PATH")
    return path


def gcc(
    out: Path,
    *args: str | bytes,
    source: str = "int f(void) { return 1; }\n",
    may_fail: bool = False,
) -> Path | None:
    """OUT, compiled by gcc from SOURCE with ARGS (none of this module's stubs or flags).

    On failure: None if MAY_FAIL, else the test fails with gcc's message. The source file sits
    beside OUT as a dot file, so a directory scan for ``lib*.so*`` (ldconfig) passes it over.
    """
    src = out.parent / f".{out.name}.c"
    src.write_text(source)
    proc = subprocess.run(
        [need("gcc"), *args, "-o", os.fsencode(out), os.fsencode(src)],
        capture_output=True,
        text=True,
        errors="replace",
    )
    if proc.returncode != 0:
        if may_fail:
            return None
        pytest.fail(f"gcc {args!r} failed:\n{proc.stderr}")
    return out


def gcc_ok(out: Path, *args: str | bytes) -> Path:
    built = gcc(out, *args)
    assert built is not None
    return built


@cache
def _gcc() -> str | None:
    return shutil.which("gcc")


def require_gcc() -> str:
    """Path of gcc, or skip the calling test."""
    gcc = _gcc()
    if gcc is None:
        pytest.skip("gcc not found on PATH: loader tests compile their ELF fixtures with gcc")
    return gcc


@cache
def gcc_can_m32() -> bool:
    """Whether ``gcc -m32 -shared -nostdlib`` produces a 32-bit object (no multilib needed)."""
    gcc = _gcc()
    if gcc is None:
        return False
    probe_dir = Path(_scratch_root()) / "m32-probe"
    probe_dir.mkdir(parents=True, exist_ok=True)
    src = probe_dir / "probe.c"
    src.write_text(_LIB_SOURCE.format(symbol="probe"))
    out = probe_dir / "probe.so"
    done = subprocess.run(
        [gcc, "-m32", "-shared", "-nostdlib", "-o", str(out), str(src)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0 and out.read_bytes()[4:5] == b"\x01"


@cache
def _scratch_root() -> str:
    root = tempfile.mkdtemp(prefix="libdoctor-cc-")
    atexit.register(shutil.rmtree, root, True)
    return root


def _run(cmd: Sequence[str]) -> None:
    done = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"compiler failed: {' '.join(cmd)}\n{done.stderr}")


def _symbol(name: str) -> str:
    return "f_" + hashlib.sha1(name.encode()).hexdigest()[:12]


@cache
def _stub(soname: str, m32: bool) -> str:
    """A library whose DT_SONAME is SONAME; linking against it adds DT_NEEDED SONAME."""
    gcc = require_gcc()
    digest = hashlib.sha1(f"{soname}\0{m32}".encode()).hexdigest()[:16]
    stub_dir = Path(_scratch_root()) / "stubs"
    stub_dir.mkdir(parents=True, exist_ok=True)
    src = stub_dir / f"{digest}.c"
    src.write_text(_LIB_SOURCE.format(symbol=_symbol(soname)))
    out = stub_dir / f"{digest}.so"
    cmd = [gcc, "-shared", "-fPIC", "-nostdlib", f"-Wl,-soname,{soname}", "-o", str(out), str(src)]
    if m32:
        cmd.insert(1, "-m32")
    _run(cmd)
    return str(out)


def _link(
    out: Path,
    *,
    shared: bool,
    soname: str | None,
    needed: Sequence[str],
    rpath: str | None,
    runpath: str | None,
    nodeflib: bool,
    m32: bool,
    interp: str | None,
    pie: bool = False,
    strings: Sequence[str] = (),
    exports: Sequence[str] = (),
    imports: Sequence[str] = (),
) -> Path:
    gcc = require_gcc()
    if rpath is not None and runpath is not None:
        raise ValueError("GNU ld writes either DT_RPATH or DT_RUNPATH, not both")
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.parent / f".{out.name}.c"
    template = _LIB_SOURCE if shared else _EXE_SOURCE
    symbol = _symbol(str(out))
    text = template.format(symbol=symbol)
    if strings:
        items = ", ".join('"' + t + '"' for t in strings)
        text += _STRINGS_SOURCE.format(symbol=symbol, items=items)
    text += "".join(f"int {name}(void) {{ return 1; }}\n" for name in exports)
    if imports:
        text += "".join(f"extern int {name}(void);\n" for name in imports)
        calls = " + ".join(f"{name}()" for name in imports)
        text += f"int {symbol}_uses(void) {{ return {calls}; }}\n"
    src.write_text(text)
    cmd = [gcc, "-fPIC", "-nostdlib", "-o", str(out), str(src)]
    if m32:
        cmd.append("-m32")
    if shared:
        cmd.append("-shared")
    else:
        cmd.append("-pie" if pie else "-no-pie")
        cmd.append(f"-Wl,--dynamic-linker,{interp or '/lib64/ld-linux-x86-64.so.2'}")
    if soname is not None:
        cmd.append(f"-Wl,-soname,{soname}")
    if rpath is not None:
        cmd += ["-Wl,--disable-new-dtags", f"-Wl,-rpath,{rpath}"]
    if runpath is not None:
        cmd += ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"]
    if nodeflib:
        cmd.append("-Wl,-z,nodefaultlib")
    cmd.append("-Wl,--no-as-needed")
    cmd += [_stub(name, m32) for name in needed]
    _run(cmd)
    src.unlink()
    return out


def compile_lib(
    directory: Path,
    filename: str,
    *,
    soname: str | None = None,
    needed: Sequence[str] = (),
    rpath: str | None = None,
    runpath: str | None = None,
    nodeflib: bool = False,
    m32: bool = False,
    strings: Sequence[str] = (),
    exports: Sequence[str] = (),
    imports: Sequence[str] = (),
) -> Path:
    """Build DIRECTORY/FILENAME, a shared library with exactly these dynamic entries.

    SONAME defaults to none (a library without DT_SONAME matches only by request name).
    RPATH/RUNPATH are written verbatim (``$ORIGIN`` is not expanded by the shell). STRINGS
    are held as whole read-only strings (in ``.rodata``). EXPORTS are functions it defines
    (any name, mangled C++ ones too); IMPORTS functions it calls and leaves undefined.
    """
    if m32 and not gcc_can_m32():
        pytest.skip("gcc -m32 cannot link a 32-bit shared object here")
    return _link(
        directory / filename,
        shared=True,
        soname=soname,
        needed=needed,
        rpath=rpath,
        runpath=runpath,
        nodeflib=nodeflib,
        m32=m32,
        interp=None,
        strings=strings,
        exports=exports,
        imports=imports,
    )


def lib_bytes(tmp: Path, name: str, **kwargs: Any) -> bytes:
    """The bytes of ``compile_lib(...)`` for NAME (a file name, or a path whose last part is
    it), built in a directory of its own under TMP."""
    directory = tmp / name.replace("/", "_")
    directory.mkdir(parents=True, exist_ok=True)
    return compile_lib(directory, os.path.basename(name), **kwargs).read_bytes()


def compile_dlopener(
    directory: Path,
    filename: str,
    *,
    soname: str | None = None,
    rpath: str | None = None,
    runpath: str | None = None,
    strings: Sequence[str] = (),
) -> Path:
    """DIRECTORY/FILENAME: a real shared library (libc, libdl) whose ``libdoctor_load(NAME)``
    calls ``dlopen(NAME)`` from its own code and returns the loaded object's ``l_name`` or
    ``dlerror()``: the oracle for what glibc's dlopen from inside a library finds. STRINGS
    are held as read-only strings, as a real loader holds the names it loads."""
    gcc = require_gcc()
    if rpath is not None and runpath is not None:
        raise ValueError("GNU ld writes either DT_RPATH or DT_RUNPATH, not both")
    out = directory / filename
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.parent / f".{out.name}.c"
    items = ", ".join('"' + t + '"' for t in strings)
    text = _STRINGS_SOURCE.format(symbol="names", items=items) if strings else ""
    src.write_text(_DLOPENER_SOURCE.format(strings=text))
    cmd = [gcc, "-shared", "-fPIC", "-o", str(out), str(src)]
    if soname is not None:
        cmd.append(f"-Wl,-soname,{soname}")
    if rpath is not None:
        cmd += ["-Wl,--disable-new-dtags", f"-Wl,-rpath,{rpath}"]
    if runpath is not None:
        cmd += ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"]
    cmd += ["-ldl"]
    _run(cmd)
    src.unlink()
    return out


def compile_exe(
    directory: Path,
    filename: str,
    *,
    needed: Sequence[str] = (),
    rpath: str | None = None,
    runpath: str | None = None,
    nodeflib: bool = False,
    interp: str | None = None,
    pie: bool = False,
) -> Path:
    """Build DIRECTORY/FILENAME, a (never run) dynamically linked executable with PT_INTERP.

    ET_EXEC by default; PIE gives an ET_DYN executable flagged DF_1_PIE.
    """
    return _link(
        directory / filename,
        shared=False,
        soname=None,
        needed=needed,
        rpath=rpath,
        runpath=runpath,
        nodeflib=nodeflib,
        m32=False,
        interp=interp,
        pie=pie,
    )


def patch_elf_header(
    path: Path,
    *,
    elf_class: int | None = None,
    machine: int | None = None,
    dest: Path | None = None,
) -> Path:
    """Copy PATH to DEST (default: in place) with EI_CLASS and/or e_machine overwritten.

    A 64-bit object relabelled ELFCLASS32 is what the loader's class check sees first; the rest of
    the file is never read by it, so this stands in for a real 32-bit build when -m32 is missing.
    """
    data = bytearray(path.read_bytes())
    if elf_class is not None:
        data[4] = elf_class
    if machine is not None:
        data[18:20] = struct.pack("<H", machine)
    target = dest or path
    target.write_bytes(bytes(data))
    return target
