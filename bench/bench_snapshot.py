"""Benchmark: ``libdoctor snapshot`` against ``libdoctor check`` on one real environment.

Not a test. Paired runs, the order alternating each round; medians reported, with the
snapshot's size plain and gzip'd. Budget (issue 15): snapshot (without --deep) under 2x check.

    python -m compileall -q src   # else every run pays to compile libdoctor
    python bench/bench_snapshot.py /path/to/torch-venv [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv} failed ({proc.returncode}): {proc.stderr.decode().strip()}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env", type=Path)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    libdoctor = [sys.executable, "-m", "libdoctor"]
    with tempfile.TemporaryDirectory() as work:
        plain, zipped = os.path.join(work, "s.json"), os.path.join(work, "s.json.gz")
        commands = {
            "check": [*libdoctor, "check", str(args.env)],
            "snapshot": [*libdoctor, "snapshot", str(args.env), "-o", plain],
            "snapshot .gz": [*libdoctor, "snapshot", str(args.env), "-o", zipped],
        }
        for argv in commands.values():  # warm the page cache
            timed(argv)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for round_ in range(args.rounds):
            names = list(commands)
            for name in names if round_ % 2 == 0 else reversed(names):
                times[name].append(timed(commands[name]))
        sizes = {"plain": os.path.getsize(plain), "gzip": os.path.getsize(zipped)}
    check = statistics.median(times["check"])
    print(f"{args.env}: {args.rounds} rounds, medians")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:14} {median:.3f} s  {median / check:.2f}x check")
    print(f"  size: {sizes['plain'] / 1e6:.2f} MB plain, {sizes['gzip'] / 1e6:.2f} MB gzip")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
