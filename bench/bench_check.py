"""Benchmark: libdoctor check vs `python -m pip check` on one real environment.

Not a test. Paired runs (each round runs every command once, in turn), medians reported.

    python bench/bench_check.py /path/to/torch-venv [--rounds 24]

The environment is e.g. a fresh venv with `pip install torch==2.14.1` (22k files, 5.4 GB).
Budgets (issue 26): check <= 0.25x pip check (warm parsed-file cache, unchanged env; the
--no-cache run beside it); check --deep within 1.2x of bytes hashed / (cores x single-core
SHA-256 throughput); cached re-verify <= 0.25x pip check.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
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


def _hash_jobs(env: Path) -> list[tuple[int, str]]:
    """(size, path) of every file ``check --deep`` hashes, biggest first."""
    from libdoctor.checks.files import hash_jobs
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.environment.target import from_directory

    disk = RealDisk()
    jobs = hash_jobs(build_environment(from_directory(env, "bench")), disk)
    return sorted(((j.state.size, j.path) for j in jobs), reverse=True)


def read_and_hash_floor(jobs: list[tuple[int, str]]) -> float:
    """Seconds to read and SHA-256 the files of JOBS and do nothing else: one thread per
    core taking the next file (biggest first), 1 MiB readinto, as libdoctor reads. What
    this machine allows a Python hasher; the bound above leaves reading out."""
    import threading
    from collections import deque

    queue = deque(jobs)

    def work() -> None:
        buffer = bytearray(1 << 20)
        view = memoryview(buffer)
        while True:
            try:
                _, path = queue.popleft()
            except IndexError:
                return
            digest = hashlib.sha256()
            with open(path, "rb", buffering=0) as handle:
                while count := handle.readinto(buffer):
                    digest.update(view[:count])

    start = time.perf_counter()
    threads = [threading.Thread(target=work) for _ in range(os.cpu_count() or 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env", type=Path, help="the environment (venv dir) to measure on")
    parser.add_argument(
        "--rounds",
        type=int,
        default=12,
        help="best a multiple of 24 (every order of the 4 commands)",
    )
    parser.add_argument("--deep-rounds", type=int, default=3)
    args = parser.parse_args()
    env = args.env.resolve()
    python = str(env / "bin" / "python")
    libdoctor = [sys.executable, "-m", "libdoctor"]
    with tempfile.TemporaryDirectory(prefix="libdoctor-bench-") as cache:
        warm_cache = os.path.join(cache, "warm")
        commands = {
            "pip check": [python, "-m", "pip", "check"],
            # the default: parsed RECORDs and ELF files from the cache (warm, unchanged env)
            "libdoctor check": [*libdoctor, "check", str(env), "--cache-dir", warm_cache],
            "libdoctor check --no-cache": [*libdoctor, "check", str(env), "--no-cache"],
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
        # Each round runs every command once, the rounds cycling through every order of
        # them: on this VM a run is measurably slower or faster depending on what ran just
        # before it (and on an idle pause), so each command gets every predecessor alike.
        orders = list(itertools.permutations(commands))
        for round_number in range(args.rounds):
            for name in orders[round_number % len(orders)]:
                times[name].append(_run(commands[name])[0])
        jobs = _hash_jobs(env)
        deep_times: list[float] = []
        floor_times: list[float] = []
        for _ in range(args.deep_rounds):
            deep_times.append(_run(deep_cmd)[0])
            floor_times.append(read_and_hash_floor(jobs))
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
        f"| libdoctor check (parsed-file cache) | {med['libdoctor check']:.3f} | "
        f"{med['libdoctor check'] / pip:.2f}x | <= 0.25x |"
    )
    uncached = med["libdoctor check --no-cache"]
    print(f"| libdoctor check --no-cache | {uncached:.3f} | {uncached / pip:.2f}x | |")
    cached = med["libdoctor check --deep (cached)"]
    print(
        f"| libdoctor check --deep, unchanged env (hash cache) | {cached:.3f} | "
        f"{cached / pip:.2f}x | <= 0.25x |"
    )
    print(
        f"| libdoctor check --deep, no cache | {deep:.3f} | {deep / bound:.2f}x of bound | "
        f"<= 1.20x of bound |"
    )
    print(
        f"bound = {hashing['bytes_hashed'] / 1e9:.2f} GB / ({cores} cores x "
        f"{throughput / 1e9:.2f} GB/s single-core SHA-256) = {bound:.2f} s"
    )
    floor = statistics.median(floor_times)
    print(
        f"read+hash floor (the same files read and hashed on {cores} threads, nothing else) "
        f"= {floor:.2f} s = {floor / bound:.2f}x of bound; check --deep --no-cache = "
        f"{deep / floor:.2f}x of the floor"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
