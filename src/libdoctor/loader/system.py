"""Facts about the running system's dynamic loader, read from the loader itself.

``probe_loader_system`` runs the system loader once, environment only LC_ALL=C, as
``<ld.so> --library-path '/@libdoctor-lib@/$LIB:/@libdoctor-platform@/$PLATFORM' --help``.
That is the loader printing its own help; no target-environment code runs.
glibc >= 2.33 prints:

- ``Shared library search path:`` with one ``  DIR (system search path)`` line per
  default directory (plus our two --library-path markers, with $LIB and $PLATFORM
  expanded by the loader itself; an unknown $PLATFORM drops its element);
- ``Subdirectories of glibc-hwcaps directories, in priority order:``, each name with
  markers ``supported`` / ``masked`` / ``searched``; only ``searched`` ones are used;
- up to glibc 2.36, ``Legacy HWCAP subdirectories ...``: the AT_PLATFORM name, ``tls``,
  and hwcap names, each searched or not.

Legacy subdirectories are every non-empty combination of the searched components, in
the order [tls, platform, hwcap names as printed], enumerated as a binary count down
from all-set with tls as the most significant bit (glibc's _dl_important_hwcaps;
checked against LD_DEBUG=libs with several GLIBC_TUNABLES masks).

If the loader is missing, fails, or prints something else (glibc < 2.33 such as
Debian 11, Ubuntu 20.04, RHEL 8; musl), the result falls back to one documented guess
(see ``_fallback``) and says why in ``problems``; nothing is raised. (glibc < 2.33 has
no glibc-hwcaps subdirectories anyway; what the fallback loses is the legacy ones.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace

from libdoctor.elf.dynamic import (
    ELFCLASS64,
    EM_386,
    EM_AARCH64,
    EM_X86_64,
    ElfFormatError,
    read_elf,
)
from libdoctor.environment.paths import name_inside, realpath_under
from libdoctor.loader.ldcache import LdCache, LdCacheError, load_ld_cache

__all__ = [
    "LoaderHelp",
    "LoaderSystem",
    "cache_flags_for",
    "legacy_subdirs_from",
    "parse_loader_help",
    "probe_loader_system",
    "read_loader_system",
    "rebased_cache",
]

LIB_MARKER = "/@libdoctor-lib@/"
PLATFORM_MARKER = "/@libdoctor-platform@/"
PROBE_LIBRARY_PATH = f"{LIB_MARKER}$LIB:{PLATFORM_MARKER}$PLATFORM"

# Canonical loader paths (PT_INTERP values), tried in order when the interpreter
# has no PT_INTERP (a static python) or cannot be read.
KNOWN_LOADERS = (
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/ld-linux-aarch64.so.1",
    "/lib/ld-linux.so.2",
    "/lib/ld-linux-armhf.so.3",
    "/lib64/ld64.so.2",
    "/lib/ld64.so.1",
    "/lib/ld-linux-riscv64-lp64d.so.1",
)

_SEARCH_PATH_HEADER = "Shared library search path:"
_HWCAPS_HEADER = "Subdirectories of glibc-hwcaps directories, in priority order:"
_LEGACY_HEADER = "Legacy HWCAP subdirectories under library search path directories:"
_SELF_ID = "This program interpreter self-identifies as: "
_VIA_CACHE = "libraries located via "

EM_PPC64 = 21
EM_S390 = 22
_FLAG_LIBC6 = 0x0003


@dataclass(frozen=True, slots=True)
class LoaderSystem:
    loader_path: str  # canonical path, e.g. /lib64/ld-linux-x86-64.so.2 ("" if none was found)
    default_dirs: tuple[str, ...]  # the loader's system search path, in order
    hwcaps_subdirs: tuple[str, ...]  # searched glibc-hwcaps subdir names, best first
    legacy_subdirs: tuple[str, ...]  # legacy hwcap subdirs in the order tried before D itself
    platform: str | None  # $PLATFORM (None: unknown; the loader then drops such elements)
    lib: str  # $LIB expansion, e.g. "lib/x86_64-linux-gnu"
    cache: LdCache
    elf_class: int  # of the process (0 if unknown)
    machine: int  # of the process (0 if unknown)
    cache_flags: frozenset[int] = frozenset()  # ld.so.cache entry flags this process accepts
    problems: tuple[str, ...] = ()  # why some facts are guessed; empty when all were read


@dataclass(frozen=True, slots=True)
class LoaderHelp:
    """What ``ld.so --help`` printed, as values."""

    self_id: str | None
    cache_file: str | None  # the ld.so.cache path compiled into the loader
    system_dirs: tuple[str, ...]
    library_path: tuple[str, ...]  # the --library-path lines, DSTs expanded
    hwcaps_searched: tuple[str, ...]
    has_legacy_section: bool
    legacy_components: tuple[str, ...]  # searched ones, in glibc's combination order


def parse_loader_help(text: str) -> LoaderHelp | None:
    """Parse ``ld.so --help`` output; None when it lacks the glibc >= 2.33 search-path report."""
    self_id: str | None = None
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(_SELF_ID):
            self_id = line[len(_SELF_ID) :].strip() or None
            current = None
        elif line in (_SEARCH_PATH_HEADER, _HWCAPS_HEADER, _LEGACY_HEADER):
            current = sections.setdefault(line, [])
        elif line.startswith("  ") and current is not None:
            current.append(line[2:])
        else:
            current = None
    if _SEARCH_PATH_HEADER not in sections:
        return None

    system_dirs: list[str] = []
    library_path: list[str] = []
    cache_file: str | None = None
    for item in sections[_SEARCH_PATH_HEADER]:
        name, labels = _split_labels(item)
        if not name and len(labels) == 1 and labels[0].startswith(_VIA_CACHE):
            cache_file = labels[0][len(_VIA_CACHE) :]
        elif labels == ("system search path",):
            system_dirs.append(name)
        elif labels == ("--library-path",):
            library_path.append(name)

    hwcaps = [
        name
        for name, labels in map(_split_labels, sections.get(_HWCAPS_HEADER, []))
        if "searched" in labels
    ]

    platform: list[str] = []
    hwcap_names: list[str] = []
    for name, labels in map(_split_labels, sections.get(_LEGACY_HEADER, [])):
        if any(label.startswith("AT_PLATFORM") for label in labels):
            platform.append(name)
        elif "searched" in labels and name != "tls":
            hwcap_names.append(name)
    has_legacy = _LEGACY_HEADER in sections
    components = ("tls", *platform, *hwcap_names) if has_legacy else ()

    return LoaderHelp(
        self_id=self_id,
        cache_file=cache_file,
        system_dirs=tuple(system_dirs),
        library_path=tuple(library_path),
        hwcaps_searched=tuple(hwcaps),
        has_legacy_section=has_legacy,
        legacy_components=components,
    )


def _split_labels(item: str) -> tuple[str, tuple[str, ...]]:
    """``"x86-64-v3 (supported, searched)"`` -> ``("x86-64-v3", ("supported", "searched"))``.

    A line that is only a parenthesis, ``"(libraries located via /etc/ld.so.cache)"``,
    gives an empty name.
    """
    if item.endswith(")"):
        if item.startswith("("):
            return "", (item[1:-1],)
        if " (" in item:
            name, _, rest = item[:-1].rpartition(" (")
            return name, tuple(label.strip() for label in rest.split(", "))
    return item, ()


def legacy_subdirs_from(components: tuple[str, ...]) -> tuple[str, ...]:
    """All non-empty combinations, most specific first, as glibc 2.36 tries them.

    ``("tls", "haswell", "avx512_1", "x86_64")`` gives ``tls/haswell/avx512_1/x86_64``,
    ``tls/haswell/avx512_1``, ``tls/haswell/x86_64``, ``tls/haswell``, ... , ``x86_64``.
    Repeated names (platform "x86_64" and hwcap "x86_64") are kept, as the loader keeps them.
    """
    n = len(components)
    return tuple(
        "/".join(c for i, c in enumerate(components) if mask >> (n - 1 - i) & 1)
        for mask in range((1 << n) - 1, 0, -1)
    )


def cache_flags_for(elf_class: int, machine: int) -> frozenset[int] | None:
    """The ld.so.cache entry flags glibc's _dl_cache_check_flags accepts; None if unknown."""
    if machine == EM_X86_64:
        return frozenset({_FLAG_LIBC6 | (0x0300 if elf_class == ELFCLASS64 else 0x0800)})
    if machine == EM_AARCH64 and elf_class == ELFCLASS64:
        return frozenset({_FLAG_LIBC6 | 0x0A00})
    if machine == EM_PPC64 and elf_class == ELFCLASS64:
        return frozenset({_FLAG_LIBC6 | 0x0500})
    if machine == EM_S390 and elf_class == ELFCLASS64:
        return frozenset({_FLAG_LIBC6 | 0x0400})
    if machine == EM_386:
        return frozenset({0x0001, _FLAG_LIBC6})  # the generic rule: ELF or libc6
    return None


Runner = Callable[[list[str], dict[str, str]], str | None]
"""Runs argv with exactly env; returns stdout, or None if it could not run or failed."""


def _run(argv: list[str], env: dict[str, str]) -> str | None:
    try:
        proc = subprocess.run(
            argv, env=env, capture_output=True, timeout=10, check=False, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return os.fsdecode(proc.stdout)


def probe_loader_system(
    cache_path: str = "/etc/ld.so.cache",
    *,
    interpreter: str | None = None,
    loader_path: str | None = None,
    glibc_tunables: str | None = None,
    runner: Runner = _run,
) -> LoaderSystem:
    """Describe the system loader: default dirs, hwcaps subdirs, $LIB, $PLATFORM, cache.

    INTERPRETER (default: this Python) gives the process's ELF class and machine and,
    through PT_INTERP, the loader. LOADER_PATH overrides that choice. GLIBC_TUNABLES is
    passed to the probe (it changes which hwcaps are searched); otherwise the loader
    runs with only LC_ALL=C set, so the answer describes a fresh process.
    Never raises for a missing or odd loader or cache; see ``problems``.
    """
    problems: list[str] = []
    exe = interpreter if interpreter is not None else (sys.executable or "")
    loader, elf_class, machine = _choose_loader(exe, loader_path, problems)

    flags = cache_flags_for(elf_class, machine)
    if flags is None:
        problems.append(f"ld.so.cache flags unknown for ELF class {elf_class} machine {machine}")
        flags = frozenset({0x0001, _FLAG_LIBC6})

    cache = _load_cache(cache_path, problems)
    help_info = _ask_loader(loader, glibc_tunables, runner, problems)
    if help_info is None:
        return _fallback(loader, cache, elf_class, machine, flags, problems)

    if help_info.cache_file is not None and help_info.cache_file != cache_path:
        problems.append(f"the loader reads {help_info.cache_file}, not {cache_path}")
    lib = _marker_value(help_info.library_path, LIB_MARKER)
    if lib is None:
        problems.append("$LIB was not expanded by the loader; guessed from its location")
        lib = _guess_from_location(loader)[1]
    return LoaderSystem(
        loader_path=loader,
        default_dirs=help_info.system_dirs,
        hwcaps_subdirs=help_info.hwcaps_searched,
        legacy_subdirs=legacy_subdirs_from(help_info.legacy_components),
        platform=_marker_value(help_info.library_path, PLATFORM_MARKER),
        lib=lib,
        cache=cache,
        elf_class=elf_class,
        machine=machine,
        cache_flags=flags,
        problems=tuple(problems),
    )


def read_loader_system(root: str, interpreter: str | None) -> LoaderSystem:
    """The loader of the system inside ROOT (a mounted image or chroot), read, never run:
    its path from INTERPRETER's PT_INTERP, the default dirs and $LIB guessed from where that
    loader lives (as ``_fallback`` does), and ROOT's own ``etc/ld.so.cache``. Every directory
    and cache path is rebased into ROOT, so no answer can name a file of the host. What is
    not known without running the loader (its hwcaps subdirectories, $PLATFORM) is left out
    and said in ``problems``."""
    problems: list[str] = []
    exe = realpath_under(root, name_inside(root, interpreter)) if interpreter else ""
    elf_class, machine, interp = _process_identity(exe, problems)
    loader = interp or next(
        (p for p in KNOWN_LOADERS if os.path.lexists(os.path.join(root, p.lstrip("/")))), ""
    )
    if not interp:
        problems.append(f"{interpreter or 'the interpreter'} names no loader (PT_INTERP)")
    flags = cache_flags_for(elf_class, machine) or frozenset({0x0001, _FLAG_LIBC6})
    cache = _load_cache(os.path.join(root, "etc/ld.so.cache"), problems)
    dirs, lib = _guess_from_location(loader, root)
    dirs = dirs or ("/lib", "/usr/lib")  # glibc's own defaults, when no loader says more
    problems.append(
        f"read inside {root}: default dirs and $LIB guessed from the loader's location, "
        "hwcaps subdirs and $PLATFORM unknown (the image's loader is not run)"
    )
    return LoaderSystem(
        loader_path=os.path.join(root, loader.lstrip("/")) if loader else "",
        default_dirs=tuple(os.path.join(root, d.lstrip("/")) for d in dirs),
        hwcaps_subdirs=(),
        legacy_subdirs=(),
        platform=None,
        lib=lib,
        cache=rebased_cache(cache, root),
        elf_class=elf_class,
        machine=machine,
        cache_flags=flags,
        problems=tuple(problems),
    )


def rebased_cache(cache: LdCache, root: str) -> LdCache:
    """CACHE with each entry's path under ROOT."""
    entries = tuple(replace(e, path=os.path.join(root, e.path.lstrip("/"))) for e in cache.entries)
    return LdCache(entries, cache.generator)


def _choose_loader(exe: str, loader_path: str | None, problems: list[str]) -> tuple[str, int, int]:
    """(loader, elf_class, machine): LOADER_PATH, else EXE's PT_INTERP, else a known loader.

    The class and machine are EXE's, or the loader's when EXE cannot be read.
    """
    elf_class, machine, interp = _process_identity(exe, problems)
    loader = loader_path or interp or _known_loader(elf_class, machine)
    if not loader_path and not interp and loader:
        problems.append(f"{exe or 'the interpreter'} names no loader (PT_INTERP); using {loader}")
    if not elf_class and loader:
        elf_class, machine, _ = _process_identity(loader, problems)
    return loader, elf_class, machine


def _ask_loader(
    loader: str, glibc_tunables: str | None, runner: Runner, problems: list[str]
) -> LoaderHelp | None:
    """What ``LOADER --help`` reports; None, with the reason in PROBLEMS, when it cannot say."""
    if not loader:
        problems.append("no dynamic loader found")
        return None
    env = {"LC_ALL": "C"}
    if glibc_tunables is not None:
        env["GLIBC_TUNABLES"] = glibc_tunables
    out = runner([loader, "--library-path", PROBE_LIBRARY_PATH, "--help"], env)
    if out is None:
        problems.append(f"{loader} --help did not run or failed")
        return None
    help_info = parse_loader_help(out)
    if help_info is None:
        problems.append(f"{loader} --help printed no search path (glibc < 2.33?)")
    return help_info


def _marker_value(lines: tuple[str, ...], marker: str) -> str | None:
    for line in lines:
        if line.startswith(marker):
            return line[len(marker) :]
    return None


def _known_loader(elf_class: int, machine: int) -> str:
    """The first existing KNOWN_LOADERS entry built for this class and machine (any if unknown)."""
    for path in KNOWN_LOADERS:
        try:
            info = read_elf(path)
        except (OSError, ElfFormatError):
            continue
        if not elf_class or (info.elf_class, info.machine) == (elf_class, machine):
            return path
    return ""


def _process_identity(path: str, problems: list[str]) -> tuple[int, int, str | None]:
    """(elf_class, machine, PT_INTERP) of PATH; zeros and a problem if unreadable."""
    if not path:
        return 0, 0, None
    try:
        info = read_elf(path)
    except (OSError, ElfFormatError) as exc:
        problems.append(f"cannot read {path}: {exc}")
        return 0, 0, None
    return info.elf_class, info.machine, info.interpreter


def _load_cache(path: str, problems: list[str]) -> LdCache:
    """The cache, or an empty one: ld.so itself skips a missing or unusable cache."""
    try:
        return load_ld_cache(path)
    except FileNotFoundError:
        problems.append(f"{path} does not exist; the loader skips the cache step")
    except OSError as exc:
        problems.append(f"cannot read {path}: {exc.strerror or exc}")
    except LdCacheError as exc:
        problems.append(f"{path} is unusable ({exc}); the loader ignores it")
    return LdCache(entries=())


def _guess_from_location(loader: str, root: str = "/") -> tuple[tuple[str, ...], str]:
    """(default dirs, $LIB) guessed from where the loader's canonical path points.

    glibc's system dirs are slibdir and libdir, and the canonical loader path is a
    symlink into slibdir (Debian: /lib64/ld-linux-x86-64.so.2 -> /lib/x86_64-linux-gnu/...;
    RHEL: a file in /lib64; Arch: -> /usr/lib/...). Debian's multiarch patch adds /lib and
    /usr/lib and makes $LIB "lib/<triplet>"; upstream $LIB is basename(slibdir). LOADER is
    the path as the system inside ROOT names it.
    """
    here = os.path.join(root, loader.lstrip("/"))
    if not loader or not os.path.exists(realpath_under(root, loader)):
        return (), "lib"
    target = loader
    try:
        link = os.readlink(here)
    except OSError:
        link = None
    if link is not None:
        target = os.path.normpath(os.path.join(os.path.dirname(loader), link))
    slibdir = os.path.dirname(target) or "/"
    libdir = slibdir if slibdir.startswith("/usr/") else "/usr" + slibdir
    dirs = [slibdir, libdir]
    base = os.path.basename(slibdir)
    if "-linux-" in base:
        dirs += ["/lib", "/usr/lib"]
        lib = "lib/" + base
    else:
        lib = base
    return tuple(dict.fromkeys(dirs)), lib


def _fallback(
    loader: str,
    cache: LdCache,
    elf_class: int,
    machine: int,
    flags: frozenset[int],
    problems: list[str],
) -> LoaderSystem:
    """The one fallback: dirs and $LIB guessed from the loader's location, no hwcaps
    subdirectories, no $PLATFORM. A library that exists only in a glibc-hwcaps or legacy
    subdirectory is therefore missed; everything else resolves as on a glibc system."""
    dirs, lib = _guess_from_location(loader)
    problems.append(
        "default dirs and $LIB guessed from the loader's location; hwcaps subdirs unknown"
    )
    return LoaderSystem(
        loader_path=loader,
        default_dirs=dirs,
        hwcaps_subdirs=(),
        legacy_subdirs=(),
        platform=None,
        lib=lib,
        cache=cache,
        elf_class=elf_class,
        machine=machine,
        cache_flags=flags,
        problems=tuple(problems),
    )
