"""Benchmark: libdoctor check vs `python -m pip check` on one real environment.

Not a test. Paired runs (each round runs every command once, in turn), medians reported.

    python bench/bench_check.py /path/to/torch-venv [--rounds 24]
    python bench/bench_check.py /path/to/torch-venv --deep-only [--deep-rounds 8]
        [--compare-src /path/to/other/libdoctor/src]

The environment is e.g. a fresh venv with `pip install torch==2.14.1` (22k files, 5.4 GB).
Budgets (issue 26): check <= 0.25x pip check (warm cache, unchanged env: the result reused; the
--no-cache run beside it); check --deep within 1.2x of bytes hashed / (cores x single-core
SHA-256 throughput); cached re-verify <= 0.25x pip check.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import resource
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


def _run_timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system of the command and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv} failed ({proc.returncode}): {proc.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def sha256_rates(megabytes: int = 256, tries: int = 3) -> tuple[float, float]:
    """(bytes per wall second, bytes per CPU second) of single-core SHA-256 on 1 MiB blocks
    in memory, best of TRIES each: what the bound is made of, measured in the round it
    bounds (the CPU rate does not move with the machine's load; the wall rate does)."""
    block = os.urandom(1 << 20)
    best_wall = best_cpu = 0.0
    for _ in range(tries):
        digest = hashlib.sha256()
        start, cpu = time.perf_counter(), time.thread_time()
        for _ in range(megabytes):
            digest.update(block)
        done = megabytes * len(block)
        best_wall = max(best_wall, done / (time.perf_counter() - start))
        best_cpu = max(best_cpu, done / (time.thread_time() - cpu))
    return best_wall, best_cpu


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


def pool_alone(jobs: list[tuple[int, str]]) -> float:
    """Seconds for libdoctor's hashing pool (``disk.hashpool``) on the files of JOBS, in
    this process, with nothing else to do: the pool's share of ``check --deep``."""
    from libdoctor.disk.hashing import HashJob
    from libdoctor.disk.hashpool import available_cores, digest_in_pool, largest_first
    from libdoctor.disk.stat import RealDisk

    disk = RealDisk()
    todo = [HashJob(path, "sha256", disk.stat(path)) for _, path in jobs]
    largest_first(todo)
    start = time.perf_counter()
    digest_in_pool(todo, available_cores())
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
    parser.add_argument(
        "--deep-only",
        action="store_true",
        help="only cold --deep (a fresh hash cache; the page cache warm), in paired rounds",
    )
    parser.add_argument(
        "--compare-src",
        type=Path,
        help="with --deep-only: another libdoctor's src dir, run beside this one each round",
    )
    args = parser.parse_args()
    env = args.env.resolve()
    if args.deep_only:
        return deep_only(env, args.deep_rounds, args.compare_src)
    python = str(env / "bin" / "python")
    libdoctor = [sys.executable, "-m", "libdoctor"]
    with tempfile.TemporaryDirectory(prefix="libdoctor-bench-") as cache:
        warm_cache = os.path.join(cache, "warm")
        commands = {
            "pip check": [python, "-m", "pip", "check"],
            # the default: the warm cache of an unchanged env (the stored result reused)
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
        f"| libdoctor check (warm cache) | {med['libdoctor check']:.3f} | "
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


def deep_only(env: Path, rounds: int, compare_src: Path | None) -> int:
    """Cold ``check --deep`` against the SHA-256 bound, paired in each round with what the
    bound is made of: single-core SHA-256 rates, the read+hash floor and (COMPARE_SRC) the
    same command run from another source tree, the two in alternating order."""
    deep_cmd = [sys.executable, "-m", "libdoctor", "check", str(env), "--deep", "--no-cache"]
    variants = {"this": dict(os.environ)}
    if compare_src is not None:
        variants["compare"] = {**os.environ, "PYTHONPATH": str(compare_src.resolve())}
    _, out = _run([*deep_cmd, "--json"])  # warms the page cache; not counted
    hashed = json.loads(out)["tool"]["hashing"]["bytes_hashed"]
    jobs = _hash_jobs(env)
    cores = os.cpu_count() or 1
    names = list(variants)
    header = "| round | load | SHA-256 GB/s (wall, cpu) | bound s |"
    header += "".join(f" {n} s | {n} x bound | {n} cpu x hash cpu |" for n in names)
    print(f"environment: {env}; {hashed / 1e9:.2f} GB hashed; {cores} cores; page cache warm")
    print(header + " floor s | floor x bound | pool alone s | pool x bound |")
    print("|---" * (4 + 3 * len(names) + 4) + "|")
    ratios: dict[str, list[float]] = {n: [] for n in [*names, "floor", "pool"]}
    cpu_ratios: dict[str, list[float]] = {n: [] for n in names}
    for number in range(rounds):
        wall_rate, cpu_rate = sha256_rates()
        bound = hashed / (cores * wall_rate)
        hash_cpu = hashed / cpu_rate
        load = os.getloadavg()[0]
        cells = [f"| {number + 1} | {load:.2f} | {wall_rate / 1e9:.2f}, {cpu_rate / 1e9:.2f} | "]
        cells.append(f"{bound:.3f} |")
        order = names if number % 2 == 0 else names[::-1]
        measured = {name: _run_timed(deep_cmd, variants[name]) for name in order}
        for name in names:
            wall, cpu = measured[name]
            ratios[name].append(wall / bound)
            cpu_ratios[name].append(cpu / hash_cpu)
            cells.append(f" {wall:.3f} | {wall / bound:.2f}x | {cpu / hash_cpu:.2f}x |")
        floor = read_and_hash_floor(jobs)
        ratios["floor"].append(floor / bound)
        pool = pool_alone(jobs)
        ratios["pool"].append(pool / bound)
        cells.append(f" {floor:.3f} | {floor / bound:.2f}x | {pool:.3f} | {pool / bound:.2f}x |")
        print("".join(cells), flush=True)
    # On a shared machine the neighbours only ever add time: the best round is the one they
    # disturbed least, the median what a user sees.
    for name in names:
        print(
            f"{name}: check --deep --no-cache {statistics.median(ratios[name]):.2f}x of bound "
            f"(median; best {min(ratios[name]):.2f}x), "
            f"{statistics.median(cpu_ratios[name]):.2f}x the CPU of hashing its bytes"
        )
    for name, what in (("floor", f"read+hash only, {cores} threads"), ("pool", "the pool alone")):
        print(
            f"{name} ({what}): {statistics.median(ratios[name]):.2f}x of bound "
            f"(median; best {min(ratios[name]):.2f}x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
