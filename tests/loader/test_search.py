"""Differential tests: libdoctor's loader emulation against the real glibc loader.

Each case compiles a few tiny libraries with gcc, then compares the emulated closure of one file
with ``env -i LD_TRACE_LOADED_OBJECTS=1 /lib64/ld-linux-x86-64.so.2 ... FILE`` (LOADER_SPEC §5):
same objects in the same breadth-first order, same "not found" entries, and the same first hard
error. Each case also checks that the rule it is named after really decided the outcome, so a
case cannot pass by accident. Python-import cases use a real interpreter as the oracle.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from libdoctor.elf.dynamic import ELFCLASS32, EM_AARCH64, read_elf
from libdoctor.loader.fs import FileId, Inspection, RealFS
from libdoctor.loader.model import Closure, Resolution, SearchConfig
from libdoctor.loader.search import Loader
from libdoctor.loader.strings import expand_dst, is_extension_module, origin_of, split_preload
from libdoctor.loader.system import LoaderSystem
from support.cc import compile_exe, compile_lib, gcc_can_m32, patch_elf_header, require_gcc
from support.oracle import LOADER, OracleTrace, run_oracle

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not os.path.exists(LOADER),
    reason=f"needs Linux with the glibc loader at {LOADER}",
)


# --------------------------------------------------------------------------- the comparison


@dataclass(frozen=True)
class Expect:
    """The resolution of (expanded) NAME: its object path (None: not found) and how."""

    name: str
    path: str | None
    via: str | None = None
    owner: str | None = None
    error: bool = False


@dataclass(frozen=True)
class Scenario:
    file: Path
    cwd: Path
    library_path: str | None = None
    preload: tuple[str, ...] = ()
    inhibit_cache: bool = False
    expect: tuple[Expect, ...] = ()
    oracle_error: bool = False  # the real loader must stop with a hard error


def emulate(scenario: Scenario, system: LoaderSystem) -> Closure:
    config = SearchConfig(
        system=system,
        ld_library_path=scenario.library_path,
        cwd=str(scenario.cwd),
        preload=scenario.preload,
        inhibit_cache=scenario.inhibit_cache,
    )
    return Loader(config).load_program(str(scenario.file)).closure


def oracle(scenario: Scenario) -> OracleTrace:
    return run_oracle(
        scenario.file,
        library_path=scenario.library_path,
        preload=scenario.preload,
        inhibit_cache=scenario.inhibit_cache,
        cwd=scenario.cwd,
    )


def trace_of(closure: Closure) -> tuple[list[tuple[str, str]], list[str]]:
    """What ld.so's trace would print: found objects after the main one, and misses in order."""
    found = [(obj.request, obj.path) for obj in closure.search_list[1:]]
    missing = [
        r.expanded for r in closure.resolutions if r.kind == "needed" and r.status == "not_found"
    ]
    return found, missing


def first_error(closure: Closure) -> Resolution | None:
    return next(
        (r for r in closure.resolutions if r.kind == "needed" and r.status == "error"), None
    )


def assert_matches_oracle(closure: Closure, trace: OracleTrace) -> None:
    assert closure.root_error is None, closure.root_error
    if trace.error_object is not None:
        err = first_error(closure)
        assert err is not None, f"loader failed with {trace.error_object}: {trace.error_reason}"
        assert trace.error_object in (err.found_path, err.expanded), (err, trace)
        # "cannot read file data: Error 21" is ld.so's spelling of EISDIR.
        assert err.reason is not None and trace.error_reason is not None
        assert err.reason.split(":")[0] == trace.error_reason.split(":")[0], (err, trace)
        return
    assert trace.returncode == 0, trace
    found, missing = trace_of(closure)
    assert found == [(e.name, e.path) for e in trace.found]
    assert missing == list(trace.not_found)
    assert first_error(closure) is None


def check_expectations(closure: Closure, expectations: tuple[Expect, ...]) -> None:
    for want in expectations:
        res = next((r for r in closure.resolutions if r.expanded == want.name), None)
        assert res is not None, f"{want.name} was never requested"
        if want.error:
            assert res.status == "error", res
            continue
        assert res.path == want.path, res
        if want.via is not None:
            assert res.via == want.via, res
        if want.owner is not None:
            assert res.via_owner == want.owner, res


# --------------------------------------------------------------------------- cases

Builder = Callable[[Path, LoaderSystem], Scenario]
CASES: dict[str, Builder] = {}


def case(fn: Builder) -> Builder:
    CASES[fn.__name__.removeprefix("case_")] = fn
    return fn


def lib(d: Path, name: str, **kw: Any) -> str:
    return str(compile_lib(d, name, **kw))


@case
def case_rpath_chain_through_intermediate(t: Path, s: LoaderSystem) -> Scenario:
    # A (RPATH x) -> B (no paths) -> C, found only through A's RPATH.
    a = lib(t / "a", "libA.so", soname="libA.so", needed=["libB.so"], rpath=str(t / "x"))
    lib(t / "x", "libB.so", soname="libB.so", needed=["libC.so"])
    c = lib(t / "x", "libC.so", soname="libC.so")
    exe = compile_exe(t, "prog", needed=["libA.so"])
    return Scenario(
        exe, t, library_path=str(t / "a"), expect=(Expect("libC.so", c, "rpath", owner=a),)
    )


@case
def case_rpath_chain_passes_an_intermediate_runpath(t: Path, s: LoaderSystem) -> Scenario:
    # A (RPATH x) -> B (RUNPATH y) -> C (no paths) -> D: D's search still climbs to A's RPATH.
    a = lib(t / "a", "libA.so", needed=["libB.so"], rpath=str(t / "x"))
    lib(t / "x", "libB.so", needed=["libC.so"], runpath=str(t / "y"))
    lib(t / "y", "libC.so", needed=["libD.so"])
    d = lib(t / "x", "libD.so")
    exe = compile_exe(t, "prog", needed=["libA.so"])
    return Scenario(
        exe, t, library_path=str(t / "a"), expect=(Expect("libD.so", d, "rpath", owner=a),)
    )


@case
def case_runpath_not_inherited(t: Path, s: LoaderSystem) -> Scenario:
    lib(t / "a", "libA.so", needed=["libB.so"], runpath=str(t / "x"))
    lib(t / "x", "libB.so", needed=["libC.so"])
    lib(t / "x", "libC.so")
    exe = compile_exe(t, "prog", needed=["libA.so"])
    return Scenario(exe, t, library_path=str(t / "a"), expect=(Expect("libC.so", None),))


@case
def case_runpath_skips_the_whole_rpath_step(t: Path, s: LoaderSystem) -> Scenario:
    # The exe's RPATH would find C, but B has a RUNPATH, so B's request skips every RPATH.
    lib(t / "x", "libB.so", needed=["libC.so"], runpath=str(t / "nowhere"))
    lib(t / "x", "libC.so")
    exe = compile_exe(t, "prog", needed=["libB.so"], rpath=str(t / "x"))
    return Scenario(exe, t, expect=(Expect("libC.so", None),))


@case
def case_rpath_beats_ld_library_path(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["libX.so"], rpath=str(t / "r"))
    x = lib(t / "r", "libX.so")
    lib(t / "l", "libX.so")
    return Scenario(Path(a), t, library_path=str(t / "l"), expect=(Expect("libX.so", x, "rpath"),))


@case
def case_ld_library_path_beats_runpath(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["libX.so"], runpath=str(t / "r"))
    lib(t / "r", "libX.so")
    x = lib(t / "l", "libX.so")
    return Scenario(
        Path(a), t, library_path=str(t / "l"), expect=(Expect("libX.so", x, "ld_library_path"),)
    )


@case
def case_origin_through_symlinked_dir(t: Path, s: LoaderSystem) -> Scenario:
    # view/lib -> store/pkg/lib; "$ORIGIN/../deps" is textual, the kernel resolves ".." physically.
    lib(t / "store/pkg/lib", "libA.so", needed=["libB.so"], rpath="$ORIGIN/../deps")
    lib(t / "store/pkg/deps", "libB.so")
    lib(t / "view/deps", "libB.so")  # what a normpath'ing emulator would wrongly pick
    (t / "view/lib").symlink_to(t / "store/pkg/lib")
    root = t / "view/lib/libA.so"
    want = f"{t}/view/lib/../deps/libB.so"
    return Scenario(root, t, expect=(Expect("libB.so", want, "rpath"),))


@case
def case_origin_of_a_symlinked_file_is_its_link_dir(t: Path, s: LoaderSystem) -> Scenario:
    lib(t / "real", "libA.so", needed=["libB.so"], rpath="$ORIGIN")
    lib(t / "real", "libB.so")
    b = lib(t / "links", "libB.so")
    (t / "links/libA.so").symlink_to(t / "real/libA.so")
    return Scenario(t / "links/libA.so", t, expect=(Expect("libB.so", b, "rpath"),))


@case
def case_empty_rpath_element_is_cwd(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["libB.so"], rpath=f"{t}/nowhere:")
    lib(t / "work", "libB.so")
    return Scenario(Path(a), t / "work", expect=(Expect("libB.so", "libB.so", "rpath"),))


@case
def case_relative_runpath_element_is_relative_to_cwd(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t / "a", "libA.so", needed=["libB.so"], runpath="sub")
    lib(t / "a/sub", "libB.so")  # next to the library: not where a relative element points
    lib(t / "work/sub", "libB.so")
    return Scenario(Path(a), t / "work", expect=(Expect("libB.so", "sub/libB.so", "runpath"),))


@case
def case_empty_ld_library_path_element_is_cwd(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["libB.so"])
    lib(t / "work", "libB.so")
    return Scenario(
        Path(a), t / "work", library_path=f"{t}/nowhere::{t}/x",
        expect=(Expect("libB.so", "libB.so", "ld_library_path"),),
    )  # fmt: skip


@case
def case_semicolon_separates_ld_library_path(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["libB.so"])
    b = lib(t / "two", "libB.so")
    return Scenario(Path(a), t, library_path=f"{t}/one;{t}/two", expect=(Expect("libB.so", b),))


@case
def case_semicolon_does_not_separate_rpath(t: Path, s: LoaderSystem) -> Scenario:
    # DT_RPATH/DT_RUNPATH split on ':' only: "one;two" is one (odd) directory name.
    a = lib(t, "libA.so", needed=["libB.so", "libC.so"], rpath=f"{t}/one;{t}/two")
    lib(t / "two", "libB.so")
    c = lib(Path(f"{t}/one;{t}") / "two", "libC.so")
    return Scenario(Path(a), t, expect=(Expect("libB.so", None), Expect("libC.so", c, "rpath")))


@case
def case_dst_spellings_lib_and_platform(t: Path, s: LoaderSystem) -> Scenario:
    if s.platform is None:
        pytest.skip("this loader has no $PLATFORM")
    a = lib(
        t, "libA.so", needed=["libB.so", "libC.so", "libD.so"],
        rpath="${ORIGIN}/$LIB:$ORIGIN/${PLATFORM}:$ORIGIN/$ORIGINX:$ORIGIN/$FOO",
    )  # fmt: skip
    b = lib(t / s.lib, "libB.so")
    c = lib(t / s.platform, "libC.so")
    lib(t / "$ORIGINX", "libD.so")  # "$ORIGINX" is no DST: stays literal, then fails
    return Scenario(
        Path(a), t,
        expect=(Expect("libB.so", b, "rpath"), Expect("libC.so", c, "rpath"),
                Expect("libD.so", f"{t}/$ORIGINX/libD.so")),
    )  # fmt: skip


@case
def case_origin_in_ld_library_path_is_the_main_program(t: Path, s: LoaderSystem) -> Scenario:
    exe = compile_exe(t / "bin", "prog", needed=["libA.so"])
    lib(t / "lib", "libA.so", needed=["libB.so"])
    b = lib(t / "bin/deps", "libB.so")
    return Scenario(
        exe, t, library_path="$ORIGIN/../lib:$ORIGIN/deps", expect=(Expect("libB.so", b),)
    )


@case
def case_origin_in_needed(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["$ORIGIN/sub/libB.so", "${ORIGIN}/sub/libC.so"])
    b = lib(t / "sub", "libB.so", soname="libB.so")
    c = lib(t / "sub", "libC.so")
    return Scenario(Path(a), t, expect=(Expect(b, b, "path"), Expect(c, c, "path")))


@case
def case_relative_needed_path_is_relative_to_cwd(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t / "a", "libA.so", needed=["sub/libB.so"])
    lib(t / "a/sub", "libB.so")
    lib(t / "work/sub", "libB.so")
    return Scenario(Path(a), t / "work", expect=(Expect("sub/libB.so", "sub/libB.so", "path"),))


@case
def case_glibc_hwcaps_subdir_wins(t: Path, s: LoaderSystem) -> Scenario:
    if not s.hwcaps_subdirs:
        pytest.skip("no glibc-hwcaps subdirectory is searched on this CPU")
    best = s.hwcaps_subdirs[0]
    a = lib(t, "libA.so", needed=["libB.so"], rpath=str(t / "d"))
    lib(t / "d", "libB.so")
    for level in s.hwcaps_subdirs[::-1]:
        lib(t / "d/glibc-hwcaps" / level, "libB.so")
    lib(t / "d/glibc-hwcaps/x86-64-v99", "libB.so")  # unsupported level: never searched
    want = f"{t}/d/glibc-hwcaps/{best}/libB.so"
    return Scenario(Path(a), t, expect=(Expect("libB.so", want, "rpath"),))


@case
def case_lower_hwcaps_level_beats_plain_dir(t: Path, s: LoaderSystem) -> Scenario:
    if not s.hwcaps_subdirs:
        pytest.skip("no glibc-hwcaps subdirectory is searched on this CPU")
    low = s.hwcaps_subdirs[-1]
    a = lib(t, "libA.so", needed=["libB.so"])
    lib(t / "d", "libB.so")
    want = lib(t / "d/glibc-hwcaps" / low, "libB.so")
    return Scenario(Path(a), t, library_path=str(t / "d"), expect=(Expect("libB.so", want),))


@case
def case_legacy_hwcap_subdir(t: Path, s: LoaderSystem) -> Scenario:
    if not s.legacy_subdirs:
        pytest.skip("this loader has no legacy hwcap subdirectories (glibc >= 2.37)")
    last = s.legacy_subdirs[-1]
    a = lib(t, "libA.so", needed=["libB.so", "libC.so"], rpath=str(t / "d"))
    lib(t / "d", "libB.so")
    b = lib(t / "d" / last, "libB.so")
    lib(t / "d" / last, "libC.so")
    c = (
        lib(t / "d/glibc-hwcaps" / s.hwcaps_subdirs[-1], "libC.so")
        if s.hwcaps_subdirs
        else f"{t}/d/{last}/libC.so"
    )
    return Scenario(Path(a), t, expect=(Expect("libB.so", b), Expect("libC.so", c)))


@case
def case_wrong_elf_class_skipped(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["libB.so"], rpath=f"{t}/one:{t}/two")
    if gcc_can_m32():
        lib(t / "one", "libB.so", m32=True)
    else:
        patch_elf_header(Path(lib(t / "one", "libB.so")), elf_class=ELFCLASS32)
    b = lib(t / "two", "libB.so")
    return Scenario(Path(a), t, expect=(Expect("libB.so", b, "rpath"),))


@case
def case_wrong_machine_skipped(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["libB.so"], rpath=f"{t}/one:{t}/two")
    patch_elf_header(Path(lib(t / "one", "libB.so")), machine=EM_AARCH64)
    b = lib(t / "two", "libB.so")
    return Scenario(Path(a), t, expect=(Expect("libB.so", b, "rpath"),))


@case
def case_only_wrong_class_is_not_found(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["libB.so"], rpath=f"{t}/one")
    patch_elf_header(Path(lib(t / "one", "libB.so")), elf_class=ELFCLASS32)
    return Scenario(Path(a), t, expect=(Expect("libB.so", None),))


@case
def case_nodeflib_rejects_system_cache_and_default_dirs(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["libc.so.6", "libB.so"], nodeflib=True)
    b = lib(t / "l", "libB.so")
    return Scenario(
        Path(a), t, library_path=str(t / "l"),
        expect=(Expect("libc.so.6", None), Expect("libB.so", b, "ld_library_path")),
    )  # fmt: skip


@case
def case_nodeflib_keeps_cache_hits_outside_system_dirs(t: Path, s: LoaderSystem) -> Scenario:
    prefixes = tuple(d.rstrip("/") + "/" for d in s.default_dirs)
    outside = next(
        (
            e
            for e in s.cache.entries
            if not e.path.startswith(prefixes)
            and e.hwcaps is None
            and s.cache.lookup(e.soname, s.hwcaps_subdirs) == e.path
            and os.path.exists(e.path)
        ),
        None,
    )
    if outside is None:
        pytest.skip("ld.so.cache has no entry outside the default dirs")
    a = lib(t, "libA.so", needed=[outside.soname], nodeflib=True)
    return Scenario(Path(a), t, expect=(Expect(outside.soname, outside.path, "cache"),))


@case
def case_cache_then_default_dirs(t: Path, s: LoaderSystem) -> Scenario:
    names = [n for n in ("libc.so.6", "libm.so.6", "libz.so.1") if s.cache.lookup(n, ())]
    a = lib(t, "libA.so", needed=[*names, "libnosuchlib.so.7"])
    libc = s.cache.lookup("libc.so.6", s.hwcaps_subdirs)
    return Scenario(
        Path(a), t, expect=(Expect("libc.so.6", libc, "cache"), Expect("libnosuchlib.so.7", None))
    )


@case
def case_inhibit_cache_uses_default_dirs(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["libc.so.6", "libm.so.6"])
    libc = f"{s.default_dirs[0]}/libc.so.6"
    if not os.path.exists(libc):
        pytest.skip(f"libc.so.6 is not in the first default dir {s.default_dirs[0]}")
    return Scenario(Path(a), t, inhibit_cache=True, expect=(Expect("libc.so.6", libc, "default"),))


@case
def case_preloaded_soname_satisfies_needed(t: Path, s: LoaderSystem) -> Scenario:
    real = lib(t / "elsewhere", "libfoo-real.so", soname="libfoo.so.1")
    exe = compile_exe(t, "prog", needed=["libfoo.so.1"])
    return Scenario(exe, t, preload=(real,), expect=(Expect("libfoo.so.1", real, "loaded"),))


@case
def case_preload_by_bare_name_and_missing_preload(t: Path, s: LoaderSystem) -> Scenario:
    exe = compile_exe(t, "prog", needed=["libB.so"], rpath=str(t / "r"))
    p = lib(t / "r", "libP.so", needed=["libB.so"])
    b = lib(t / "r", "libB.so")
    return Scenario(
        exe, t, preload=("libP.so", "libmissing-preload.so"),
        expect=(Expect("libP.so", p, "rpath"), Expect("libB.so", b)),
    )  # fmt: skip


@case
def case_preloads_search_as_the_main_program(t: Path, s: LoaderSystem) -> Scenario:
    # A preload's loader is the main program: bare names use its RUNPATH, paths its $ORIGIN.
    exe = compile_exe(t / "bin", "prog", needed=["libB.so"], runpath=str(t / "r"))
    p = lib(t / "r", "libP.so")
    q = lib(t / "bin/q", "libQ.so")
    b = lib(t / "r", "libB.so")
    return Scenario(
        exe, t, preload=("libP.so", "$ORIGIN/q/libQ.so"),
        expect=(Expect("libP.so", p, "runpath"), Expect(q, q, "path"), Expect("libB.so", b)),
    )  # fmt: skip


@case
def case_exe_rpath_applies_to_deps(t: Path, s: LoaderSystem) -> Scenario:
    exe = compile_exe(t / "bin", "prog", needed=["libA.so"], rpath="$ORIGIN/../lib")
    lib(t / "lib", "libA.so", needed=["libB.so"])
    b = f"{t}/bin/../lib/libB.so"
    lib(t / "lib", "libB.so")
    return Scenario(exe, t, expect=(Expect("libB.so", b, "rpath", owner=str(exe)),))


@case
def case_exe_runpath_is_not_used_by_deps(t: Path, s: LoaderSystem) -> Scenario:
    exe = compile_exe(t, "prog", needed=["libA.so"], runpath=str(t / "lib"))
    a = lib(t / "lib", "libA.so", needed=["libB.so"])
    lib(t / "lib", "libB.so")
    return Scenario(exe, t, expect=(Expect("libA.so", a, "runpath"), Expect("libB.so", None)))


@case
def case_directory_named_like_the_library_is_a_hard_error(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["libB.so"], rpath=f"{t}/one:{t}/two")
    (t / "one/libB.so").mkdir(parents=True)
    lib(t / "two", "libB.so")
    return Scenario(Path(a), t, expect=(Expect("libB.so", None, error=True),), oracle_error=True)


@case
def case_non_elf_file_is_a_hard_error(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["libB.so"], rpath=f"{t}/one:{t}/two")
    (t / "one").mkdir()
    (t / "one/libB.so").write_text("INPUT(-lfoo)\n" * 10)  # a linker script, as in /usr/lib
    lib(t / "two", "libB.so")
    return Scenario(Path(a), t, expect=(Expect("libB.so", None, error=True),), oracle_error=True)


@case
def case_too_short_file_is_a_hard_error(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["libB.so"], rpath=f"{t}/one:{t}/two")
    (t / "one").mkdir()
    (t / "one/libB.so").write_bytes(b"\x7fELF\x02\x01\x01")
    lib(t / "two", "libB.so")
    return Scenario(Path(a), t, expect=(Expect("libB.so", None, error=True),), oracle_error=True)


@case
def case_executable_as_dependency_is_a_hard_error(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["libE.so"], rpath=str(t / "e"))
    compile_exe(t / "e", "libE.so", needed=["libX.so"])
    return Scenario(Path(a), t, expect=(Expect("libE.so", None, error=True),), oracle_error=True)


@case
def case_pie_executable_as_dependency_is_a_hard_error(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["libE.so"], rpath=str(t / "e"))
    compile_exe(t / "e", "libE.so", needed=["libX.so"], pie=True)
    return Scenario(Path(a), t, expect=(Expect("libE.so", None, error=True),), oracle_error=True)


@case
def case_missing_library_reported_per_request(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["libB.so", "libgone.so", "libC.so"], rpath=str(t))
    lib(t, "libB.so", needed=["libgone.so"])
    lib(t, "libC.so", needed=["libgone.so", "libB.so"])
    return Scenario(Path(a), t, expect=(Expect("libgone.so", None),))


@case
def case_same_inode_is_reused(t: Path, s: LoaderSystem) -> Scenario:
    # No SONAME: "libB.so.1" does not match "libB.so" by name, but it is the same file.
    a = lib(t, "libA.so", needed=["libB.so", "libB.so.1"], rpath=str(t))
    b = lib(t, "libB.so")
    (t / "libB.so.1").symlink_to("libB.so")
    return Scenario(Path(a), t, expect=(Expect("libB.so.1", b, "rpath"),))


@case
def case_no_soname_matches_only_the_exact_string(t: Path, s: LoaderSystem) -> Scenario:
    # The same bytes under another inode load twice; a copy with a SONAME is reused by it.
    a = lib(t, "libA.so", needed=["libB.so", "libB.so.1", "libC.so", "libC.so.1"], rpath=str(t))
    b = lib(t, "libB.so")
    b1 = t / "libB.so.1"
    b1.write_bytes(Path(b).read_bytes())
    c = lib(t, "libC.so", soname="libC.so.1")
    return Scenario(
        Path(a), t, expect=(Expect("libB.so.1", str(b1)), Expect("libC.so.1", c, "loaded"))
    )


@case
def case_first_soname_wins(t: Path, s: LoaderSystem) -> Scenario:
    a = lib(t, "libA.so", needed=["$ORIGIN/d1/libS.so", "libS.so", "$ORIGIN/d2/libS.so"],
            rpath="$ORIGIN/d2")  # fmt: skip
    s1 = lib(t / "d1", "libS.so", soname="libS.so")
    s2 = lib(t / "d2", "libS.so", soname="libS.so")
    return Scenario(Path(a), t, expect=(Expect("libS.so", s1, "loaded"), Expect(s2, s2, "path")))


@case
def case_loader_known_by_its_names_and_inode(t: Path, s: LoaderSystem) -> Scenario:
    real = os.path.realpath(s.loader_path)
    a = lib(t, "libA.so", needed=["ld-linux-x86-64.so.2", real, "libc.so.6"])
    return Scenario(Path(a), t, expect=(Expect("ld-linux-x86-64.so.2", s.loader_path, "loaded"),))


@pytest.mark.parametrize("name", sorted(CASES))
def test_closure_matches_real_loader(name: str, tmp_path: Path, system: LoaderSystem) -> None:
    require_gcc()
    scenario = CASES[name](tmp_path, system)
    closure = emulate(scenario, system)
    trace = oracle(scenario)
    assert (trace.error_object is not None) == scenario.oracle_error, trace
    assert_matches_oracle(closure, trace)
    check_expectations(closure, scenario.expect)


# --------------------------------------------------------------------------- Python imports

_PROBE = r"""
import ctypes, json, sys
def maps():
    out = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/"):
                out.add(parts[5].strip())
    return out
before = maps()
try:
    ctypes.CDLL(sys.argv[1])
    error = None
except OSError as exc:
    error = str(exc)
print(json.dumps({"new": sorted(maps() - before), "error": error}))
"""


def python_dlopen(module: str, env: Mapping[str, str]) -> tuple[set[str], str | None]:
    """The objects a real interpreter maps for dlopen(MODULE): a real process as the oracle."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _PROBE, module],
        env=dict(env),
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout)
    return set(result["new"]), result["error"]


@dataclass
class PyCase:
    module: Path
    ld_library_path: str | None = None
    missing: tuple[str, ...] = ()
    expect_via: dict[str, str] = field(default_factory=dict)


PY_CASES: dict[str, Callable[[Path], PyCase]] = {
    "module_rpath_chain": lambda t: PyCase(
        Path(lib(t / "m", "mod.so", needed=["libA.so"], rpath=str(t / "x"))),
        expect_via={"libA.so": "rpath", "libB.so": "rpath"},
    ),
    "module_runpath_not_inherited": lambda t: PyCase(
        Path(lib(t / "m", "mod.so", needed=["libA.so"], runpath=str(t / "x"))),
        missing=("libB.so",),
        expect_via={"libA.so": "runpath"},
    ),
    "ld_library_path_at_start": lambda t: PyCase(
        Path(lib(t / "m", "mod.so", needed=["libA.so"], runpath="$ORIGIN/nowhere")),
        ld_library_path=str(t / "x"),
        expect_via={"libA.so": "ld_library_path", "libB.so": "ld_library_path"},
    ),
    "interpreter_objects_satisfy_sonames": lambda t: PyCase(
        Path(lib(t / "m", "mod.so", needed=["libc.so.6", "libA.so"], rpath="$ORIGIN/../x")),
        expect_via={"libc.so.6": "loaded", "libA.so": "rpath"},
    ),
}


@pytest.mark.parametrize("name", sorted(PY_CASES))
def test_extension_import_matches_real_interpreter(
    name: str, tmp_path: Path, system: LoaderSystem
) -> None:
    require_gcc()
    lib(tmp_path / "x", "libB.so")
    lib(tmp_path / "x", "libA.so", needed=["libB.so"])
    pc = PY_CASES[name](tmp_path)
    env = {"PATH": "/usr/bin:/bin"}
    if pc.ld_library_path is not None:
        env["LD_LIBRARY_PATH"] = pc.ld_library_path
    real_new, real_error = python_dlopen(str(pc.module), env)

    config = SearchConfig(system, ld_library_path=pc.ld_library_path, cwd=str(tmp_path))
    loader = Loader(config)
    process = loader.start_interpreter(sys.executable)
    assert process.closure.ok, process.closure.missing
    closure = loader.import_extension(process, str(pc.module))
    missing = tuple(r.expanded for r in closure.missing)
    assert missing == pc.missing
    if pc.missing:
        assert real_error is not None and pc.missing[0] in real_error
    else:
        assert real_error is None
        assert {os.path.realpath(o.path) for o in closure.loaded} == real_new
    for want, via in pc.expect_via.items():
        assert next(r.via for r in closure.resolutions if r.expanded == want) == via


def test_extension_deps_search_exe_rpath_not_exe_runpath(
    tmp_path: Path, system: LoaderSystem
) -> None:
    """LOADER_SPEC §3: module RPATH -> python exe RPATH -> LLP -> module RUNPATH -> ...

    The exe is never run, so this is checked against the spec rather than a live process.
    """
    require_gcc()
    lib(tmp_path / "x", "libB.so")
    py_rpath = compile_exe(
        tmp_path / "bin1", "python", needed=["libc.so.6"], rpath=str(tmp_path / "x")
    )
    py_runpath = compile_exe(
        tmp_path / "bin2", "python", needed=["libc.so.6"], runpath=str(tmp_path / "x")
    )
    mod = lib(tmp_path / "m", "mod.so", needed=["libB.so"])
    mod_runpath = lib(
        tmp_path / "m", "mod2.so", needed=["libB.so"], runpath=str(tmp_path / "nowhere")
    )
    loader = Loader(SearchConfig(system, cwd=str(tmp_path)))

    with_rpath = loader.start_interpreter(str(py_rpath))
    res = loader.import_extension(with_rpath, mod).resolutions[1]
    assert (res.via, res.via_owner) == ("rpath", str(py_rpath))
    # A module with RUNPATH skips every RPATH, the exe's included.
    assert loader.import_extension(with_rpath, mod_runpath).resolutions[1].status == "not_found"

    with_runpath = loader.start_interpreter(str(py_runpath))
    res = loader.import_extension(with_runpath, mod).resolutions[1]
    assert res.status == "not_found"
    assert res.searched and {d.source for d in res.searched} <= {"cache", "default"}


def test_extension_imports_are_independent_and_memoized(
    tmp_path: Path, system: LoaderSystem
) -> None:
    require_gcc()
    lib(tmp_path / "x", "libB.so")
    lib(tmp_path / "x", "libA.so", needed=["libB.so"])
    m1 = lib(tmp_path / "m", "one.so", needed=["libA.so"], rpath=str(tmp_path / "x"))
    m2 = lib(tmp_path / "m", "two.so", needed=["libB.so"])  # no path of its own
    loader = Loader(SearchConfig(system, cwd=str(tmp_path)))
    process = loader.start_interpreter(sys.executable)
    first = [loader.import_extension(process, m) for m in (m1, m2, m1)]
    assert first[0] == first[2]
    assert (
        first[1].missing and first[1].missing[0].expanded == "libB.so"
    )  # m1's libs are not loaded
    assert len(process.index.objects) == len(process.objects)


# --------------------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$ORIGIN/lib", "/o/lib"),
        ("${ORIGIN}/lib", "/o/lib"),
        ("$ORIGINAL", "$ORIGINAL"),
        ("$ORIGIN_x", "$ORIGIN_x"),
        ("${ORIGIN", "${ORIGIN"),
        ("$LIB:$PLATFORM", "lib/x86_64-linux-gnu:haswell"),
        ("$FOO/$ORIGIN", "$FOO//o"),
        ("a$", "a$"),
        ("$$ORIGIN", "$/o"),
    ],
)
def test_expand_dst(text: str, expected: str) -> None:
    assert expand_dst(text, origin="/o", lib="lib/x86_64-linux-gnu", platform="haswell") == expected


def test_expand_dst_without_value_drops() -> None:
    assert expand_dst("$PLATFORM/x", origin="/o", lib="lib", platform=None) is None
    assert expand_dst("plain", origin=None, lib="lib", platform=None) == "plain"


@pytest.mark.parametrize(
    ("path", "cwd", "expected"),
    [
        ("/a/b/../c/libx.so", "/w", "/a/b/../c"),
        ("/libx.so", "/w", "/"),
        ("libx.so", "/w", "/w"),
        ("sub/libx.so", "/w/", "/w/sub"),
        ("glibc-hwcaps/x86-64-v3/libx.so", "/", "/glibc-hwcaps/x86-64-v3"),
    ],
)
def test_origin_of(path: str, cwd: str, expected: str) -> None:
    assert origin_of(path, cwd) == expected


def test_split_preload_and_extension_names() -> None:
    assert split_preload(" /a/libx.so:liby.so  libz.so ") == ("/a/libx.so", "liby.so", "libz.so")
    assert is_extension_module("_C.cpython-311-x86_64-linux-gnu.so")
    assert is_extension_module("x.abi3.so")
    assert not is_extension_module("libcudart.so.13")


class _MemoryFS:
    """A LoaderFS over a dict, to show the core never touches the disk itself."""

    def __init__(self, files: Mapping[str, Inspection]) -> None:
        self.files = files
        self.calls = 0

    def entries(self, directory: str) -> frozenset[str] | None:
        self.calls += 1
        prefix = directory.rstrip("/") + "/"
        return frozenset(p[len(prefix) :].split("/")[0] for p in self.files if p.startswith(prefix))

    def inspect(self, path: str) -> Inspection:
        self.calls += 1
        return self.files.get(path, Inspection("missing"))

    def realpath(self, path: str) -> str:
        return path

    def library_strings(self, path: str) -> tuple[str, ...] | None:
        return None


def test_corrupt_files_become_results_not_exceptions(system: LoaderSystem, tmp_path: Path) -> None:
    require_gcc()
    a = Path(lib(tmp_path, "libA.so", needed=["libB.so", "libC.so", "libD.so"], rpath="/d"))
    good = read_elf(str(a))
    head = a.read_bytes()[:64]  # a good header: only read_elf saw the damage

    fs = _MemoryFS(
        {
            "/d/libA.so": Inspection("file", FileId(1, 1), elf=good),
            "/d/libB.so": Inspection("file", FileId(1, 2), error="truncated dynamic", head=head),
            "/d/libC.so": Inspection("unreadable", FileId(1, 3), error="Input/output error"),
            "/d/libD.so": Inspection("directory", FileId(1, 4)),
        }
    )
    cfg = SearchConfig(system, inhibit_cache=True)
    closure = Loader(cfg, fs).load_program("/d/libA.so").closure
    by_name = {r.expanded: r for r in closure.resolutions}
    assert by_name["libB.so"].status == "error"
    assert by_name["libB.so"].reason == "truncated dynamic"
    assert by_name["libC.so"].status == "not_found"
    assert by_name["libC.so"].rejected[0].reason == "cannot read file: Input/output error"
    assert by_name["libD.so"].reason == "cannot read file data: Is a directory"


# --------------------------------------------------------------------------- the real env


def _torch_env() -> Path:
    root = Path(os.environ.get("LIBDOCTOR_TORCH_ENV", "/work/envs/torchenv"))
    if not (root / "lib").is_dir():
        pytest.skip(f"no torch environment at {root} (set LIBDOCTOR_TORCH_ENV)")
    return root


def _site_packages(env: Path) -> Path:
    found = sorted(env.glob("lib/python3*/site-packages"))
    if not found:
        pytest.skip(f"no site-packages under {env}")
    return found[0]


def _is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"\x7fELF"


def _elf_files(directory: Path) -> Iterator[Path]:
    for path in sorted(directory.iterdir()):
        if path.is_file() and _is_elf(path):
            yield path


@pytest.mark.realenv
@pytest.mark.parametrize("scope", ["torch/lib", "site-packages"])
def test_torch_env_closures_match_real_loader(system: LoaderSystem, scope: str) -> None:
    """Every ELF under torch/lib (and then every shared object in site-packages)."""
    site = _site_packages(_torch_env())
    if scope == "torch/lib":
        files = list(_elf_files(site / "torch/lib"))
    else:
        files = sorted(p for p in site.rglob("*.so*") if p.is_file() and _is_elf(p))
    assert files
    loader = Loader(SearchConfig(system, cwd="/"))
    mismatches = []
    for path in files:
        closure = loader.load_program(str(path)).closure
        trace = run_oracle(path, cwd="/", timeout=300)
        try:
            assert_matches_oracle(closure, trace)
        except AssertionError as exc:
            mismatches.append(f"{path.name}: {exc}")
    assert not mismatches, "\n".join(mismatches)


@pytest.mark.realenv
def test_torch_env_extension_imports_are_fast(system: LoaderSystem) -> None:
    env = _torch_env()
    python = str(env / "bin/python")
    site = _site_packages(env)
    modules = sorted(str(p) for p in site.rglob("*.so") if is_extension_module(p.name))
    fs = RealFS()
    loader = Loader(SearchConfig(system, cwd="/"), fs)
    process = loader.start_interpreter(python)
    list(loader.import_extensions(process, modules))  # lists dirs, parses ELF files
    fresh = Loader(SearchConfig(system, cwd="/"), fs)  # same file caches, empty search memo
    process = fresh.start_interpreter(python)
    start = time.perf_counter()
    closures = list(fresh.import_extensions(process, modules))
    elapsed = time.perf_counter() - start
    assert len(closures) == len(modules)
    print(f"{len(modules)} extension modules resolved in {elapsed * 1000:.1f} ms")
    assert elapsed < 0.15
