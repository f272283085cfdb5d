"""libdoctor.loader.system: ``ld.so --help`` parsing on recorded texts, the probe on this
system checked against what the loader really searches (LD_DEBUG=libs), and the fallback."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from libdoctor.elf.dynamic import ELFCLASS32, ELFCLASS64, EM_386, EM_AARCH64, EM_X86_64
from libdoctor.loader.ldcache import DEFAULT_CACHE_FLAGS
from libdoctor.loader.system import (
    LoaderSystem,
    cache_flags_for,
    legacy_subdirs_from,
    parse_loader_help,
    probe_loader_system,
)

LOADER = "/lib64/ld-linux-x86-64.so.2"

_USAGE = """\
Usage: ld.so [OPTION]... EXECUTABLE-FILE [ARGS-FOR-PROGRAM...]
You have invoked 'ld.so', the program interpreter for dynamically-linked
ELF programs.

  --list                list all dependencies and how they are resolved
  --help                display this help and exit
"""

# Debian 12, glibc 2.36, as probe_loader_system runs it (with GLIBC_TUNABLES=hwcap_mask=0).
DEBIAN_236_MASKED = (
    _USAGE
    + """
This program interpreter self-identifies as: /lib64/ld-linux-x86-64.so.2

Shared library search path:
  /@libdoctor-lib@/lib/x86_64-linux-gnu (--library-path)
  /@libdoctor-platform@/haswell (--library-path)
  (libraries located via /etc/ld.so.cache)
  /lib/x86_64-linux-gnu (system search path)
  /usr/lib/x86_64-linux-gnu (system search path)
  /lib (system search path)
  /usr/lib (system search path)

Subdirectories of glibc-hwcaps directories, in priority order:
  x86-64-v4 (supported, searched)
  x86-64-v3 (supported, searched)
  x86-64-v2 (supported, searched)

Legacy HWCAP subdirectories under library search path directories:
  haswell (AT_PLATFORM; supported, searched)
  tls (supported, searched)
  avx512_1 (supported, masked)
  x86_64 (supported, masked)
"""
)

# A qemu64-class CPU (x86-64-v2 only) on glibc 2.36; $PLATFORM is then "x86_64".
QEMU64_236 = (
    _USAGE
    + """
This program interpreter self-identifies as: /lib64/ld-linux-x86-64.so.2

Shared library search path:
  (libraries located via /etc/ld.so.cache)
  /lib/x86_64-linux-gnu (system search path)
  /usr/lib/x86_64-linux-gnu (system search path)
  /lib (system search path)
  /usr/lib (system search path)

Subdirectories of glibc-hwcaps directories, in priority order:
  x86-64-v4
  x86-64-v3
  x86-64-v2 (supported, searched)

Legacy HWCAP subdirectories under library search path directories:
  x86_64 (AT_PLATFORM; supported, searched)
  tls (supported, searched)
  avx512_1
  x86_64 (supported, searched)
"""
)

# glibc >= 2.37 (Arch-like layout): no legacy section, one system dir, an env path.
ARCH_240 = (
    _USAGE
    + """
This program interpreter self-identifies as: /usr/lib/ld-linux-x86-64.so.2

Shared library search path:
  /opt/x (LD_LIBRARY_PATH)
  . (LD_LIBRARY_PATH)
  (libraries located via /etc/ld.so.cache)
  /usr/lib (system search path)

Subdirectories of glibc-hwcaps directories, in priority order:
  x86-64-v4 (supported, masked)
  x86-64-v3 (supported, searched)
  x86-64-v2 (supported, searched)
"""
)

NO_HWCAPS_ARM = (
    _USAGE
    + """
Shared library search path:
  (libraries located via /etc/ld.so.cache)
  /lib/arm-linux-gnueabihf (system search path)
  /usr/lib/arm-linux-gnueabihf (system search path)

No subdirectories of glibc-hwcaps directories are searched.

Legacy HWCAP subdirectories under library search path directories:
  v7l (AT_PLATFORM; supported, searched)
  tls (supported, searched)
  neon (supported, searched)
  vfp (supported, searched)
"""
)


def test_parse_debian_masked() -> None:
    h = parse_loader_help(DEBIAN_236_MASKED)
    assert h is not None
    assert h.self_id == LOADER
    assert h.cache_file == "/etc/ld.so.cache"
    assert h.system_dirs == (
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib",
        "/usr/lib",
    )
    assert h.library_path == (
        "/@libdoctor-lib@/lib/x86_64-linux-gnu",
        "/@libdoctor-platform@/haswell",
    )
    assert h.hwcaps_searched == ("x86-64-v4", "x86-64-v3", "x86-64-v2")
    assert h.legacy_components == ("tls", "haswell")
    assert legacy_subdirs_from(h.legacy_components) == ("tls/haswell", "tls", "haswell")


def test_parse_qemu64() -> None:
    h = parse_loader_help(QEMU64_236)
    assert h is not None
    assert h.hwcaps_searched == ("x86-64-v2",)
    # avx512_1 is not supported; platform and hwcap are both "x86_64", both kept.
    assert h.legacy_components == ("tls", "x86_64", "x86_64")


def test_parse_glibc_237_has_no_legacy_dirs() -> None:
    h = parse_loader_help(ARCH_240)
    assert h is not None
    assert h.self_id == "/usr/lib/ld-linux-x86-64.so.2"
    assert h.system_dirs == ("/usr/lib",)
    assert h.hwcaps_searched == ("x86-64-v3", "x86-64-v2")  # v4 masked
    assert not h.has_legacy_section and h.legacy_components == ()
    assert legacy_subdirs_from(h.legacy_components) == ()


def test_parse_no_hwcaps_subdirs() -> None:
    h = parse_loader_help(NO_HWCAPS_ARM)
    assert h is not None
    assert h.hwcaps_searched == ()
    assert h.legacy_components == ("tls", "v7l", "neon", "vfp")


@pytest.mark.parametrize("text", [_USAGE, "", "garbage\n\x00\n", "Shared library search"])
def test_parse_other_output_is_none(text: str) -> None:
    assert parse_loader_help(text) is None


@pytest.mark.parametrize(
    ("components", "expected"),
    [
        ((), ()),
        (("tls",), ("tls",)),
        (("tls", "haswell"), ("tls/haswell", "tls", "haswell")),
        (
            ("tls", "haswell", "x86_64"),
            ("tls/haswell/x86_64", "tls/haswell", "tls/x86_64", "tls", "haswell/x86_64",
             "haswell", "x86_64"),
        ),
    ],
)  # fmt: skip
def test_legacy_subdirs_order(components: tuple[str, ...], expected: tuple[str, ...]) -> None:
    assert legacy_subdirs_from(components) == expected


def test_legacy_subdirs_full_x86_64() -> None:
    subdirs = legacy_subdirs_from(("tls", "haswell", "avx512_1", "x86_64"))
    assert len(subdirs) == 15
    assert subdirs[:4] == (
        "tls/haswell/avx512_1/x86_64",
        "tls/haswell/avx512_1",
        "tls/haswell/x86_64",
        "tls/haswell",
    )
    assert subdirs[7:9] == ("tls", "haswell/avx512_1/x86_64")
    assert subdirs[-1] == "x86_64"


@pytest.mark.parametrize(
    ("elf_class", "machine", "flags"),
    [
        (ELFCLASS64, EM_X86_64, DEFAULT_CACHE_FLAGS),
        (ELFCLASS32, EM_X86_64, frozenset({0x0803})),
        (ELFCLASS32, EM_386, frozenset({0x0001, 0x0003})),
        (ELFCLASS64, EM_AARCH64, frozenset({0x0A03})),
        (ELFCLASS64, 0x1234, None),
    ],
)
def test_cache_flags_for(elf_class: int, machine: int, flags: frozenset[int] | None) -> None:
    assert cache_flags_for(elf_class, machine) == flags


# ---------------------------------------------------------------- the probe with fake loaders


class Recorder:
    def __init__(self, output: str | None) -> None:
        self.output = output
        self.calls: list[tuple[list[str], dict[str, str]]] = []

    def __call__(self, argv: list[str], env: dict[str, str]) -> str | None:
        self.calls.append((argv, env))
        return self.output


def test_probe_with_recorded_output() -> None:
    run = Recorder(DEBIAN_236_MASKED)
    s = probe_loader_system(loader_path="/some/ld.so", glibc_tunables="glibc.cpu.x=1", runner=run)
    argv, env = run.calls[0]
    assert argv[0] == "/some/ld.so" and argv[-1] == "--help"
    assert env == {"LC_ALL": "C", "GLIBC_TUNABLES": "glibc.cpu.x=1"}  # nothing else leaks in
    assert s.loader_path == "/some/ld.so"
    assert (s.lib, s.platform) == ("lib/x86_64-linux-gnu", "haswell")
    assert s.legacy_subdirs == ("tls/haswell", "tls", "haswell")
    assert s.problems == ()


def test_probe_notes_a_different_cache_path(tmp_path: Path) -> None:
    text = DEBIAN_236_MASKED.replace("via /etc/ld.so.cache", "via /gnu/etc/ld.so.cache")
    s = probe_loader_system(str(tmp_path / "c"), loader_path="/x/ld.so", runner=Recorder(text))
    assert any("reads /gnu/etc/ld.so.cache" in p for p in s.problems)


def test_probe_unknown_platform() -> None:
    text = DEBIAN_236_MASKED.replace("  /@libdoctor-platform@/haswell (--library-path)\n", "")
    s = probe_loader_system(loader_path="/x/ld.so", runner=Recorder(text))
    assert s.platform is None and s.lib == "lib/x86_64-linux-gnu"


@pytest.mark.parametrize("output", [None, _USAGE, ""])
def test_fallback_when_loader_fails_or_is_old(output: str | None) -> None:
    s = probe_loader_system(runner=Recorder(output))
    assert s.problems, "the fallback must say why"
    assert (s.hwcaps_subdirs, s.legacy_subdirs, s.platform) == ((), (), None)


def test_fallback_with_missing_loader() -> None:
    s = probe_loader_system(loader_path="/nonexistent/ld.so")
    assert s.loader_path == "/nonexistent/ld.so"
    assert s.default_dirs == () and s.problems


def test_missing_or_corrupt_cache_is_empty(tmp_path: Path) -> None:
    run = Recorder(DEBIAN_236_MASKED)
    s = probe_loader_system(str(tmp_path / "none"), runner=run)
    assert s.cache.entries == () and any("does not exist" in p for p in s.problems)
    bad = tmp_path / "bad.cache"
    bad.write_bytes(b"glibc-ld.so.cache1.1" + b"\xff" * 40)
    s = probe_loader_system(str(bad), runner=run)
    assert s.cache.entries == () and any("unusable" in p for p in s.problems)


def test_static_interpreter_uses_known_loader_of_same_machine(tmp_path: Path) -> None:
    not_elf = tmp_path / "python"
    not_elf.write_text("#!/bin/sh\n")
    s = probe_loader_system(interpreter=str(not_elf), runner=Recorder(DEBIAN_236_MASKED))
    assert any("cannot read" in p for p in s.problems)
    if os.path.exists(LOADER):
        assert s.loader_path == LOADER and (s.elf_class, s.machine) == (ELFCLASS64, EM_X86_64)


# ---------------------------------------------------------------- the probe on this system


def real_probe(tunables: str | None = None) -> LoaderSystem:
    if not os.path.exists(LOADER):
        pytest.skip(f"{LOADER} not present (not x86-64 glibc)")
    s = probe_loader_system(glibc_tunables=tunables)
    if s.problems:
        pytest.skip(f"this loader cannot be probed: {s.problems}")
    return s


def test_probe_this_system_is_fast_and_complete() -> None:
    real_probe()  # warm the page cache
    start = time.perf_counter()
    s = real_probe()
    assert time.perf_counter() - start < 0.5
    assert s.loader_path == LOADER
    assert s.default_dirs and all(d.startswith("/") for d in s.default_dirs)
    assert (s.elf_class, s.machine, s.cache_flags) == (ELFCLASS64, EM_X86_64, DEFAULT_CACHE_FLAGS)
    assert s.lib and not s.lib.startswith("/")


def test_fallback_guess_matches_probe_here() -> None:
    """The fallback's guess from the loader's location agrees with the loader on this system
    (Debian multiarch). A divergence is worth knowing about, not a failure elsewhere."""
    s = real_probe()
    guessed = probe_loader_system(runner=Recorder(None))
    if "x86_64-linux-gnu" not in s.lib:
        pytest.skip("guess checked on Debian-style multiarch systems only")
    assert (guessed.default_dirs, guessed.lib) == (s.default_dirs, s.lib)


_SEARCH = re.compile(r"search path=(.*?)\t+\((RUNPATH from file .*|system search path)\)$", re.M)


@pytest.fixture(scope="module")
def prog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An executable that NEEDs a library that does not exist anywhere, with RUNPATH
    elements that show $LIB and $PLATFORM as the loader expands them."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found on PATH")
    d = tmp_path_factory.mktemp("probe")
    (d / "f.c").write_text("int f(void) { return 1; }\n")
    (d / "m.c").write_text("int main(void) { return 0; }\n")
    stub = d / "libdoctor-missing.so"
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-Wl,-soname,libdoctor-missing.so.1", "-o", str(stub),
         str(d / "f.c")],
        check=True,
    )  # fmt: skip
    subprocess.run(
        [gcc, "-o", str(d / "prog"), str(d / "m.c"), "-Wl,--no-as-needed", f"-L{d}",
         "-ldoctor-missing", "-Wl,--enable-new-dtags",
         "-Wl,-rpath,/nonexistent-libdoctor-a/$LIB:/nonexistent-libdoctor-b/$PLATFORM"],
        check=True,
    )  # fmt: skip
    stub.unlink()
    return d / "prog"


def loader_search(prog: Path, tunables: str | None) -> tuple[list[str], list[str]]:
    """(RUNPATH search list, system search list) that LD_DEBUG=libs prints for the missing lib."""
    env = {"LD_DEBUG": "libs"} | ({"GLIBC_TUNABLES": tunables} if tunables else {})
    proc = subprocess.run([str(prog)], env=env, capture_output=True, text=True)
    assert proc.returncode != 0  # the library is missing, so nothing of prog ever runs
    lists = {kind.split()[0]: path.split(":") for path, kind in _SEARCH.findall(proc.stderr)}
    assert set(lists) == {"RUNPATH", "system"}, proc.stderr[-2000:]
    return lists["RUNPATH"], lists["system"]


def expand(dirs: list[str] | tuple[str, ...], s: LoaderSystem) -> list[str]:
    subdirs = [f"glibc-hwcaps/{h}" for h in s.hwcaps_subdirs] + list(s.legacy_subdirs)
    return [x for d in dirs for x in (*(f"{d}/{sub}" for sub in subdirs), d)]


@pytest.mark.parametrize(
    "tunables",
    [
        None,
        "glibc.cpu.hwcap_mask=0",
        "glibc.cpu.hwcap_mask=2",
        "glibc.cpu.hwcaps=-AVX512F,-AVX2",  # changes $PLATFORM and the supported levels
    ],
)
def test_probe_matches_ld_debug(prog: Path, tunables: str | None) -> None:
    s = real_probe(tunables)
    runpath, system = loader_search(prog, tunables)
    base = [f"/nonexistent-libdoctor-a/{s.lib}"]
    if s.platform is not None:
        base.append(f"/nonexistent-libdoctor-b/{s.platform}")
    assert runpath == expand(base, s)
    assert system == expand(s.default_dirs, s)
