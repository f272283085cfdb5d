"""Benchmark: the backup of a cuDNN reinstall in a torch env — new bytes it holds, and the
fix's wall time. Not a test.

    python bench/bench_backup.py /path/to/torch-venv [--rounds 3]

Each round hard-link-copies the env (``cp -al``: nothing of the original is ever written),
deletes nvidia/cudnn/lib/libcudnn.so.9 from the copy, runs ``libdoctor fix --yes`` on it
(pip reinstalls nvidia-cudnn-cu13 from wherever the machine's pip finds it) and reads the
backup's cost with ``libdoctor backups --json``: bytes of its own (new bytes on disk) and
bytes shared by hard link.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CUDNN = "lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9"


def _round(env: Path, work: Path) -> tuple[float, int, int]:
    copy, cache = work / "env", work / "cache"
    subprocess.run(["cp", "-al", str(env), str(copy)], check=True)
    (copy / CUDNN).unlink()
    libdoctor = [sys.executable, "-m", "libdoctor"]
    start = time.perf_counter()
    done = subprocess.run(
        [*libdoctor, "fix", str(copy), "--yes", "--cache-dir", str(cache)],
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"fix failed ({done.returncode}): {done.stderr[-2000:]}")
    listed = subprocess.run(
        [*libdoctor, "backups", "--json", "--cache-dir", str(cache)],
        capture_output=True,
        text=True,
        check=True,
    )
    (backup,) = json.loads(listed.stdout)["backups"]
    shutil.rmtree(copy)
    shutil.rmtree(cache)
    return elapsed, backup["own_bytes"], backup["shared_bytes"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("env", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not (args.env / CUDNN).is_file():
        raise SystemExit(f"{args.env} has no {CUDNN}")
    results = []
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(args.env))) as tmp:
        for i in range(args.rounds):
            work = Path(tmp) / f"round-{i}"
            work.mkdir()
            results.append(_round(args.env, work))
    times = [r[0] for r in results]
    print(f"environment: {args.env}; {args.rounds} rounds")
    print(f"fix wall time: median {statistics.median(times):.2f} s (min {min(times):.2f})")
    print(f"backup: {results[0][1] / 1e6:.1f} MB of its own, {results[0][2] / 1e6:.1f} MB shared")


if __name__ == "__main__":
    main()
