"""What the guard adds to a harmless ``pip install`` in a big environment.

    python -m compileall -q src   # the wrappers start python -I: compile libdoctor first
    .venv/bin/python bench/bench_guard.py /path/to/torch-venv --rounds 7

ENV is only read: a hard-link copy is made in a temp dir (``cp -al``), its bin/ scripts
re-pointed at the copy's own interpreter (new files, renamed in: the originals' inodes are
never written), and the guard installed there. Each round, in alternating order, installs a
tiny wheel (``ldbench-harmless``) with the copy's own ``bin/pip`` with the guard on and with
``LIBDOCTOR_GUARD=off``, by requirement name (resolved by pip's dry run inside the plan) and
by wheel file (read directly, no resolve), then uninstalls it unguarded. Pass-through
(``pip --version``) and the plan's parts (pip's own ``--dry-run --report``, ``libdoctor plan
install``) are timed beside it. Prints medians.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NAME, VERSION = "ldbench-harmless", "1.0"


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def build_wheel(dest: Path) -> Path:
    info = f"ldbench_harmless-{VERSION}.dist-info"
    files = {
        "ldbench_harmless/__init__.py": b"VALUE = 1\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    rows = [f"{p},{_record_hash(d)},{len(d)}" for p, d in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(rows) + "\n").encode()
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"ldbench_harmless-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def copy_env(source: Path, dest: Path) -> Path:
    """``cp -al``, then every bin/ script that names SOURCE's interpreter rewritten to name
    DEST's: written as a new file and renamed in, never in place (the inode is SOURCE's)."""
    subprocess.run(["cp", "-al", str(source), str(dest)], check=True)
    old, new = os.fsencode(source), os.fsencode(dest)
    for entry in (dest / "bin").iterdir():
        if entry.is_symlink() or not entry.is_file():
            continue
        data = entry.read_bytes()
        if not data.startswith(b"#!") or old not in data.split(b"\n", 1)[0]:
            continue
        tmp = entry.with_name(entry.name + ".bench-tmp")
        tmp.write_bytes(data.replace(old, new, 1))
        shutil.copystat(entry, tmp)
        os.replace(tmp, entry)
    prefix = subprocess.run(
        [str(dest / "bin/pip"), "--version"], capture_output=True, text=True, check=True
    ).stdout
    if str(dest) not in prefix:
        raise SystemExit(f"the copy's pip is not the copy's own: {prefix}")
    return dest


def timed(argv: Sequence[str], env: Mapping[str, str], ok: Sequence[int] = (0,)) -> float:
    start = time.perf_counter()
    done = subprocess.run(list(argv), env=dict(env), capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("env", type=Path)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-guard-"))
    try:
        run(args.env.resolve(), work, args.rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(source: Path, work: Path, rounds: int) -> None:
    env_dir = copy_env(source, work / "env")
    wheel = build_wheel(work / "wheels")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))}
    base.update(
        {
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            "PIP_CONFIG_FILE": os.devnull,
            "XDG_CACHE_HOME": str(work / "cache"),
            "PATH": f"{env_dir / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )
    off = {**base, "LIBDOCTOR_GUARD": "off"}
    libdoctor = [sys.executable, "-m", "libdoctor"]
    timed([*libdoctor, "guard", "install", str(env_dir)], base)
    pip = str(env_dir / "bin/pip")
    links = ["--no-index", "--find-links", str(wheel.parent)]
    by_name = [pip, "install", "-q", *links, NAME]
    by_file = [pip, "install", "-q", str(wheel)]
    uninstall = [pip, "uninstall", "-q", "-y", NAME]
    cases = {
        "pip install NAME, guard off": (by_name, off),
        "pip install NAME, guarded": (by_name, base),
        "pip install WHEEL, guard off": (by_file, off),
        "pip install WHEEL, guarded": (by_file, base),
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    extra: dict[str, list[float]] = {
        k: []
        for k in (
            "pip --version, guard off",
            "pip --version, guarded",
            "pip install --dry-run --report - NAME (pip alone)",
            "libdoctor plan install NAME",
            "libdoctor plan install WHEEL",
        )
    }
    python = str(env_dir / "bin/python")
    for number in range(rounds):
        order = list(cases) if number % 2 == 0 else list(reversed(cases))
        for label in order:
            argv, env = cases[label]
            times[label].append(timed(argv, env))
            timed(uninstall, off)
        extra["pip --version, guard off"].append(timed([pip, "--version"], off))
        extra["pip --version, guarded"].append(timed([pip, "--version"], base))
        dry = [python, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-", *links]
        extra["pip install --dry-run --report - NAME (pip alone)"].append(timed([*dry, NAME], off))
        plan = [*libdoctor, "plan", "install"]
        extra["libdoctor plan install NAME"].append(timed([*plan, NAME, str(env_dir), *links], off))
        extra["libdoctor plan install WHEEL"].append(timed([*plan, str(wheel), str(env_dir)], off))
    timed([*libdoctor, "guard", "remove", str(env_dir)], base)
    report(source, rounds, {**times, **extra})


def report(source: Path, rounds: int, results: Mapping[str, list[float]]) -> None:
    print(f"{source}: median of {rounds} rounds")
    for label, values in results.items():
        print(f"  {label:<52} {statistics.median(values):7.3f} s")
    for how in ("NAME", "WHEEL"):
        added = statistics.median(results[f"pip install {how}, guarded"]) - statistics.median(
            results[f"pip install {how}, guard off"]
        )
        print(f"  added by the guard to pip install {how:<5} {added:+7.3f} s")


if __name__ == "__main__":
    main()
