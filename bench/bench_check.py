"""Benchmark: libdoctor check vs `python -m pip check` on one real environment.

Not a test. Paired runs (each round runs every command once, in turn), medians reported.

    python bench/bench_check.py /path/to/torch-venv [--rounds 7]

The environment is e.g. a fresh venv with `pip install torch==2.14.1` (22k files, 5.4 GB).
Budgets (issue 2): check <= 0.3x pip check; check --deep within 1.2x of
bytes hashed / (cores x single-core SHA-256 throughput); cached re-verify <= 0.3x pip check.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(argv: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv} failed ({proc.returncode}): {proc.stderr.strip()}")
    return elapsed, proc.stdout


def sha256_single_core_throughput(megabytes: int = 512, tries: int = 3) -> float:
    """Bytes per second of hashlib SHA-256 on one core, data already in memory.

    1 MiB blocks (the size libdoctor reads in), best of TRIES: the fastest the CPU hashes,
    so the bound is as strict as it can honestly be.
    """
    block = os.urandom(1 << 20)
    best = 0.0
    for _ in range(tries):
        digest = hashlib.sha256()
        start = time.perf_counter()
        for _ in range(megabytes):
            digest.update(block)
        best = max(best, megabytes * len(block) / (time.perf_counter() - start))
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env", type=Path, help="the environment (venv dir) to measure on")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--deep-rounds", type=int, default=3)
    args = parser.parse_args()
    env = args.env.resolve()
    python = str(env / "bin" / "python")
    libdoctor = [sys.executable, "-m", "libdoctor"]
    with tempfile.TemporaryDirectory(prefix="libdoctor-bench-") as cache:
        warm_cache = os.path.join(cache, "warm")
        commands = {
            "pip check": [python, "-m", "pip", "check"],
            "libdoctor check": [*libdoctor, "check", str(env), "--no-cache"],
            "libdoctor check --deep (cached)": [
                *libdoctor,
                "check",
                str(env),
                "--deep",
                "--cache-dir",
                warm_cache,
            ],
        }
        deep_cmd = [*libdoctor, "check", str(env), "--deep", "--no-cache", "--json"]
        # Warm the page cache and the hash cache once; neither run is counted.
        for argv in commands.values():
            _run(argv)
        _, out = _run(deep_cmd)
        hashing = json.loads(out)["tool"]["hashing"]
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, argv in commands.items():
                times[name].append(_run(argv)[0])
        deep_times = [_run(deep_cmd)[0] for _ in range(args.deep_rounds)]
    throughput = sha256_single_core_throughput()
    cores = os.cpu_count() or 1
    bound = hashing["bytes_hashed"] / (cores * throughput)
    med = {name: statistics.median(values) for name, values in times.items()}
    pip = med["pip check"]
    deep = statistics.median(deep_times)
    print(f"environment: {env}")
    print(f"rounds: {args.rounds} paired (deep: {args.deep_rounds}), medians, {cores} cores")
    print("| command | median s | vs pip check | budget |")
    print("|---|---|---|---|")
    print(f"| pip check | {pip:.3f} | 1.00x | |")
    print(
        f"| libdoctor check | {med['libdoctor check']:.3f} | "
        f"{med['libdoctor check'] / pip:.2f}x | <= 0.30x |"
    )
    cached = med["libdoctor check --deep (cached)"]
    print(
        f"| libdoctor check --deep, unchanged env (hash cache) | {cached:.3f} | "
        f"{cached / pip:.2f}x | <= 0.30x |"
    )
    print(
        f"| libdoctor check --deep, no cache | {deep:.3f} | {deep / bound:.2f}x of bound | "
        f"<= 1.20x of bound |"
    )
    print(
        f"bound = {hashing['bytes_hashed'] / 1e9:.2f} GB / ({cores} cores x "
        f"{throughput / 1e9:.2f} GB/s single-core SHA-256) = {bound:.2f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
