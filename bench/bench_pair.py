"""Benchmark: the same libdoctor commands from two source trees, in paired rounds.

Not a test. For a change that must not move the timings (a refactor): each round runs every
command once from this tree and once from BASELINE, in alternating order, so the machine's
load falls on both alike; the medians and their ratio are reported per command.

    python bench/bench_pair.py --baseline OTHER/src --env /path/to/torch-venv \\
        [--fix-env /path/to/a-broken-venv] [--rounds 10]

The commands: ``check --no-cache`` (every file stated, every ELF parsed), ``check`` with a
warm cache (the result reused while nothing changed), ``check --deep`` with a warm hash
cache, ``plan uninstall`` of the env's first nvidia-* distribution (or of its first
distribution), and with FIX_ENV ``fix --dry-run`` there (it plans, runs nothing). Each
tree gets its own cache directory, warmed once before the rounds.
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

HERE = Path(__file__).resolve().parent.parent / "src"


def _first_dist(env: str) -> str:
    site = next(Path(env).glob("lib/python3*/site-packages"))
    names = sorted(p.name.split("-")[0] for p in site.glob("*.dist-info"))
    nvidia = [n for n in names if n.startswith("nvidia_")]
    return (nvidia or names)[0].replace("_", "-")


def _commands(env: str, fix_env: str | None, cache: str) -> dict[str, list[str]]:
    commands = {
        "check --no-cache": ["check", env, "--no-cache", "--json"],
        "check (reused)": ["check", env, "--cache-dir", cache, "--json"],
        "check --deep (cached)": ["check", env, "--deep", "--cache-dir", cache, "--json"],
        "plan uninstall": ["plan", "uninstall", _first_dist(env), env, "--json"],
    }
    if fix_env is not None:
        commands["fix --dry-run"] = ["fix", fix_env, "--dry-run", "--json", "--no-index"]
    return commands


def _time(src: str, argv: list[str]) -> float:
    environ = {**os.environ, "PYTHONPATH": src}
    environ.pop("LD_LIBRARY_PATH", None)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "libdoctor", *argv], env=environ, capture_output=True, check=False
    )
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{src}: {argv} failed ({proc.returncode}): {proc.stderr.decode()}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the other tree's src directory")
    parser.add_argument("--env", required=True, help="a real environment, read only")
    parser.add_argument("--fix-env", help="an environment with findings, for fix --dry-run")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    trees = {"this": str(HERE), "base": str(Path(args.baseline).resolve())}
    with tempfile.TemporaryDirectory() as scratch:
        plans = {
            name: _commands(args.env, args.fix_env, os.path.join(scratch, name)) for name in trees
        }
        for name, src in trees.items():  # warm each tree's caches and the page cache
            for argv in plans[name].values():
                _time(src, argv)
        times: dict[tuple[str, str], list[float]] = {}
        for round_ in range(args.rounds):
            order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
            for label in plans["this"]:
                for name in order:
                    elapsed = _time(trees[name], plans[name][label])
                    times.setdefault((label, name), []).append(elapsed)
    print(f"{args.rounds} paired rounds; medians in seconds; ratio = this / base")
    for label in plans["this"]:
        this = statistics.median(times[(label, "this")])
        base = statistics.median(times[(label, "base")])
        print(f"  {label:<24} this {this:7.3f}   base {base:7.3f}   ratio {this / base:5.2f}")


if __name__ == "__main__":
    main()
