"""Benchmark: where the CPU time of ``libdoctor check`` goes, phase by phase.

Not a test. Each round is a fresh interpreter running the steps of ``check`` one after the
other (``analysis.run``'s order, the forked child's steps included), timing each with
``time.process_time``; medians over the rounds. With ``--cache-dir`` the parsed-file cache
is used (warm after the first round), without it every RECORD and ELF file is parsed.

    python bench/bench_check_phases.py /path/to/torch-venv [--rounds 8] [--cache-dir DIR]

In a real run the parent does "parent:" after the fork while the child does "child:";
the imports before the fork are on both paths. Not counted: the interpreter's start, the
CLI's own imports and argument parsing, rendering.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

_ROUND = r"""
import gc, json, os, sys, time
gc.disable()  # as the CLI runs
clock = time.process_time
laps, t = [], [clock()]
def lap(name):
    now = clock(); laps.append((name, 1000 * (now - t[0]))); t[0] = now
from libdoctor.analysis.overlap import native_model
from libdoctor.analysis.run import cache_findings, loader_context, native_checks
from libdoctor.api import resolve_target
from libdoctor.checks.files import check_files
from libdoctor.disk.stat import RealDisk
from libdoctor.environment.distributions import scan_target
from libdoctor.environment.model import build_environment
from libdoctor.environment.parsed import RECORDS, ParsedFiles
lap("imports before the fork (api, analysis, environment, file checks)")
env_dir, cache_dir = sys.argv[1], sys.argv[2] or None
target = resolve_target(env_dir, None)
import libdoctor.checks.extensions, libdoctor.checks.libraries, libdoctor.checks.requirements
import libdoctor.checks.runtime, libdoctor.checks.stack, libdoctor.loader.extensions
lap("child: imports (loader, stack, checks)")
import packaging.markers, packaging.requirements, packaging.specifiers, packaging.utils, pickle
lap("child: imports (packaging, pickle)")
context = loader_context(dict(os.environ), os.getcwd(), target)
lap("child: loader context (ld.so.cache, defaults)")
model = native_model(target)
lap("child: native model (RECORD rows naming .so)")
native_checks(model, RealDisk(), None, context, cache_dir=cache_dir)
lap("child: loader, stack and requirement checks")
disk = RealDisk()
records = ParsedFiles.load(cache_dir, target.prefix, RECORDS)
dists = scan_target(target, records=records)
records.save()
lap("parent: read and parse every RECORD and METADATA")
env = build_environment(target, dists)
lap("parent: model (claims)")
paths = [p for p in env.claims if not (p.endswith(".pyc") and "/__pycache__/" in p)]
disk.prefetch(paths)
lap(f"parent: stat every claimed file but bytecode ({len(paths)} paths)")
check_files(env, disk, None)
lap("parent: file checks")
cache_findings(env, dict(os.environ))
lap("parent: compile-cache look")
print(json.dumps(laps))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env", help="the environment (venv dir) to measure on")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--cache-dir", default="", help="the parsed-file cache (default: none)")
    args = parser.parse_args()
    runs: dict[str, list[float]] = {}
    for _ in range(args.rounds + 1):  # the first round warms the page cache (and the cache)
        done = subprocess.run(
            [sys.executable, "-c", _ROUND, args.env, args.cache_dir],
            capture_output=True,
            text=True,
            check=True,
        )
        for name, ms in json.loads(done.stdout):
            runs.setdefault(name, []).append(ms)
    print(f"environment: {args.env}, cache: {args.cache_dir or 'none'}, rounds: {args.rounds}")
    print("| phase | CPU ms (median) |")
    print("|---|---|")
    for name, values in runs.items():
        print(f"| {name} | {statistics.median(values[1:]):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
