"""Benchmark: ``libdoctor snapshot`` against ``libdoctor check`` on one real environment.

Not a test. Paired runs, the order alternating each round; medians reported, wall and CPU
(user + system of the run and its children: less moved by other load on the machine), with
the snapshot's size plain and gzip'd. ``--compare SRC``: the same commands with another
libdoctor tree's ``src`` first on the path (e.g. the main branch's, exported), in the same
rounds. Budget (issue 26): snapshot at most 1.2x check, ``-o X.json.gz`` at most 1.4x.
Each tree gets a cache dir of its own (in a temporary dir, seeded by the warm-up round), so
that its stored results are its own: ``check`` and ``snapshot`` reuse them while the env is
unchanged. ``check --no-cache`` is the run that decides everything. Run it from a working
directory outside the env and the output (``cd /``): a run writing where the next one reads
would make it decide again.

    python -m compileall -q src   # else every run pays to compile libdoctor
    python bench/bench_snapshot.py /path/to/torch-venv [--rounds 15] [--compare OTHER/src]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of ARGV."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, check=False, env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv} failed ({proc.returncode}): {proc.stderr.decode().strip()}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return elapsed, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env", type=Path)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--compare", type=Path, help="another libdoctor's src directory")
    args = parser.parse_args()
    libdoctor = [sys.executable, "-m", "libdoctor"]
    trees = {"": dict(os.environ)}
    if args.compare is not None:
        other = dict(os.environ)
        other["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(args.compare), os.environ.get("PYTHONPATH")])
        )
        trees[f" [{args.compare}]"] = other
    with tempfile.TemporaryDirectory() as work:
        commands: dict[str, tuple[list[str], dict[str, str]]] = {}
        for label, env in trees.items():
            plain = os.path.join(work, f"s{len(commands)}.json")
            zipped = plain + ".gz"
            cache = ["--cache-dir", os.path.join(work, f"cache{len(commands)}")]
            target = [str(args.env), *cache]
            commands[f"check{label}"] = ([*libdoctor, "check", *target], env)
            commands[f"check --no-cache{label}"] = (
                [*libdoctor, "check", str(args.env), "--no-cache"],
                env,
            )
            commands[f"snapshot{label}"] = ([*libdoctor, "snapshot", *target, "-o", plain], env)
            commands[f"snapshot .gz{label}"] = (
                [*libdoctor, "snapshot", *target, "-o", zipped],
                env,
            )
        for argv, env in commands.values():  # warm the page cache
            timed(argv, env)
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for round_ in range(args.rounds):
            names = list(commands)
            for name in names if round_ % 2 == 0 else reversed(names):
                wall, cpu = timed(*commands[name])
                walls[name].append(wall)
                cpus[name].append(cpu)
        outputs = sorted(p for p in Path(work).iterdir() if p.is_file())
        shown = ", ".join(f"{p.name} {p.stat().st_size / 1e6:.2f} MB" for p in outputs)
    print(f"{args.env}: {args.rounds} rounds, medians; load {os.getloadavg()[0]:.2f}")
    print("| command | wall s | vs check | CPU s | vs check |")
    print("|---|---|---|---|---|")
    for label in trees:
        check_wall = statistics.median(walls[f"check{label}"])
        check_cpu = statistics.median(cpus[f"check{label}"])
        for name in (
            f"check{label}",
            f"check --no-cache{label}",
            f"snapshot{label}",
            f"snapshot .gz{label}",
        ):
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            print(
                f"| {name} | {wall:.3f} | {wall / check_wall:.2f}x | {cpu:.3f} | "
                f"{cpu / check_cpu:.2f}x |"
            )
    print(f"sizes: {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
