"""Benchmark libdoctor.elf.dynamic.read_elf against pyelftools on every ELF file of an environment.

Both readers extract the same facts (class, byte order, machine, type, PT_INTERP,
DT_NEEDED/SONAME/RPATH/RUNPATH/FLAGS_1); the results are cross-checked. Each file is
read REPEAT times per reader, alternating, after one warm-up pass (so the page cache is
warm for both); per-file medians are reported, and their sum as the total.

    /work/devenv/bin/python bench/bench_elf.py [SITE_OR_ENV] [--repeat N] [--top K]

Default target: $LIBDOCTOR_TORCH_ENV or /work/envs/torchenv (its site-packages).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from elftools.elf.dynamic import DynamicSegment
from elftools.elf.elffile import ELFFile
from elftools.elf.segments import InterpSegment

from libdoctor.elf.dynamic import ElfInfo, is_elf_magic, read_elf

_PT = {"PT_DYNAMIC", "PT_INTERP"}


def read_pyelftools(path: str) -> ElfInfo:
    """The same facts through pyelftools' public API."""
    with open(path, "rb") as f:
        elf: Any = ELFFile(f)
        header = elf.header
        interp = None
        needed: list[str] = []
        soname = rpath = runpath = None
        flags_1 = 0
        has_dynamic = False
        for seg in elf.iter_segments():
            if isinstance(seg, InterpSegment) and interp is None:
                interp = seg.get_interp_name()
            elif isinstance(seg, DynamicSegment) and not has_dynamic:
                has_dynamic = True
                tag: Any  # pyelftools sets .needed/.soname/... per tag at run time
                for tag in seg.iter_tags():
                    t = tag.entry.d_tag
                    if t == "DT_NEEDED":
                        needed.append(tag.needed)
                    elif t == "DT_SONAME":
                        soname = tag.soname
                    elif t == "DT_RPATH":
                        rpath = tag.rpath
                    elif t == "DT_RUNPATH":
                        runpath = tag.runpath
                    elif t == "DT_FLAGS_1":
                        flags_1 = tag.entry.d_val
        return ElfInfo(
            elf_class=2 if elf.elfclass == 64 else 1,
            byteorder="little" if elf.little_endian else "big",
            machine=_machine_number(header["e_machine"]),
            elf_type=_TYPES.get(header["e_type"], -1),
            interpreter=interp,
            soname=soname,
            needed=tuple(needed),
            rpath=rpath,
            runpath=runpath,
            flags_1=flags_1,
            has_dynamic=has_dynamic,
        )


_TYPES = {"ET_NONE": 0, "ET_REL": 1, "ET_EXEC": 2, "ET_DYN": 3, "ET_CORE": 4}


def _machine_number(name: str | int) -> int:
    if isinstance(name, int):
        return name
    return {"EM_X86_64": 62, "EM_386": 3, "EM_AARCH64": 183}.get(name, -1)


def find_elves(root: Path) -> Iterator[Path]:
    """Regular files (not symlinks) under ROOT that start with the ELF magic."""
    for dirpath, _dirs, files in os.walk(root):
        for name in sorted(files):
            p = Path(dirpath, name)
            if p.is_symlink() or not p.is_file():
                continue
            try:
                with open(p, "rb") as f:
                    if is_elf_magic(f.read(4)):
                        yield p
            except OSError:
                continue


def site_packages(target: Path) -> Path:
    found = sorted(target.glob("lib/python3*/site-packages"))
    return found[0] if found else target


def timed(fn: Callable[[str], ElfInfo], path: str) -> float:
    start = time.perf_counter()
    fn(path)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    default = os.environ.get("LIBDOCTOR_TORCH_ENV", "/work/envs/torchenv")
    ap.add_argument("target", nargs="?", default=default, help="an env prefix or a directory")
    ap.add_argument("--repeat", type=int, default=7, help="timed reads per file and reader")
    ap.add_argument("--top", type=int, default=15, help="per-file rows to show (largest files)")
    args = ap.parse_args(argv)

    root = site_packages(Path(args.target))
    if not root.is_dir():
        print(f"no such directory: {root}", file=sys.stderr)
        return 2
    files = list(find_elves(root))
    if not files:
        print(f"no ELF files under {root}", file=sys.stderr)
        return 2

    readers: dict[str, Callable[[str], ElfInfo]] = {
        "libdoctor": read_elf,
        "pyelftools": read_pyelftools,
    }
    mismatches = []
    for p in files:  # warm-up pass, and the cross-check
        ours, theirs = read_elf(str(p)), read_pyelftools(str(p))
        if ours != theirs:
            mismatches.append((p, ours, theirs))

    medians: dict[str, list[float]] = {name: [] for name in readers}
    for p in files:
        samples: dict[str, list[float]] = {name: [] for name in readers}
        for _ in range(args.repeat):
            for name, fn in readers.items():  # alternate so drift hits both alike
                samples[name].append(timed(fn, str(p)))
        for name in readers:
            medians[name].append(statistics.median(samples[name]))

    total_mb = sum(p.stat().st_size for p in files) / 1e6
    print(f"{len(files)} ELF files under {root} ({total_mb:,.0f} MB), {args.repeat} reads each")
    print(f"python {sys.version.split()[0]}; per-file median times\n")
    header = f"{'file':<58} {'MB':>7} {'libdoctor':>10} {'pyelftools':>11} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    order = sorted(range(len(files)), key=lambda i: -files[i].stat().st_size)
    for i in order[: args.top]:
        rel = str(files[i].relative_to(root))
        rel = rel if len(rel) <= 58 else "..." + rel[-55:]
        t_own, t_pyelf = medians["libdoctor"][i], medians["pyelftools"][i]
        print(
            f"{rel:<58} {files[i].stat().st_size / 1e6:>7.1f} {t_own * 1e6:>8.0f}us"
            f" {t_pyelf * 1e6:>9.0f}us {t_pyelf / t_own:>6.1f}x"
        )
    if len(files) > args.top:
        print(f"... {len(files) - args.top} smaller files not shown")

    print()
    for name in readers:
        m = medians[name]
        print(
            f"{name:<11} median per file {statistics.median(m) * 1e6:8.0f} us"
            f"   mean {statistics.fmean(m) * 1e6:8.0f} us   max {max(m) * 1e3:7.2f} ms"
            f"   total {sum(m) * 1e3:8.1f} ms"
        )
    ratios = [t / o for o, t in zip(medians["libdoctor"], medians["pyelftools"], strict=True)]
    total_ratio = sum(medians["pyelftools"]) / sum(medians["libdoctor"])
    print(
        f"pyelftools / libdoctor: total {total_ratio:.1f}x, per-file median "
        f"{statistics.median(ratios):.1f}x (min {min(ratios):.1f}x, max {max(ratios):.1f}x)"
    )
    if mismatches:
        print(f"\n{len(mismatches)} files where the readers disagree:")
        for p, ours, theirs in mismatches[:10]:
            print(f"  {p}\n    libdoctor:  {ours}\n    pyelftools: {theirs}")
    else:
        print("results identical for every file")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
