"""Benchmark: ``libdoctor plan lock`` of a pinned torch CUDA lock against ``uv pip compile``
of the same requirement for the same platform. Not a test.

    python -m compileall -q src
    python bench/bench_plan_lock.py [--requirement torch==2.14.1] [--rounds 3]
                                    [--python 3.11] [--platform manylinux_2_28_x86_64]
                                    [--baseline OTHER/src]

uv resolves the requirement once (its pins are the lock planned). Each round then times
``uv pip compile`` with an empty uv cache (cold) and with the cache that run left (warm),
``plan lock`` with an empty wheel-index cache (cold: every index page and wheel tail read)
and again with the cache that run left (warm: no request). Bytes are what the plan's JSON
reports: fetched over the network against the wheels' own sizes, the extension modules'
dynamic sections (``lock-unresolved-library``) included and also shown apart. ``--baseline``
names another tree's ``src`` (an older commit's checkout): its ``plan lock`` is timed in the
same rounds, beside this one, for a before/after in one sitting. The load average is printed
at the start and the end: the machine may be shared.
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

ROOT = Path(__file__).resolve().parent.parent


def uv() -> str:
    here = Path(sys.executable).parent / "uv"
    return str(here) if here.exists() else shutil.which("uv") or "uv"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requirement", default="torch==2.14.1")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--python", default="3.11")
    parser.add_argument("--platform", default="manylinux_2_28_x86_64")
    parser.add_argument("--index-url", default="https://pypi.org/simple")
    parser.add_argument("--baseline", help="another tree's src, timed in the same rounds")
    args = parser.parse_args()
    print(f"load average at the start: {load()}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env["PYTHONPATH"] = str(ROOT / "src")
    work = Path(tempfile.mkdtemp(prefix="bench-plan-lock-"))
    (work / "req.in").write_text(args.requirement + "\n")
    arch = args.platform.rsplit("_", 2)[-2:] if "x86_64" not in args.platform else ["x86_64"]
    uv_platform = f"{'_'.join(arch)}-{args.platform.replace('_' + '_'.join(arch), '')}"
    compile_argv = [
        uv(), "pip", "compile", str(work / "req.in"), "--python-version", args.python,
        "--python-platform", uv_platform, "--index-url", args.index_url, "--no-header", "-q",
    ]  # fmt: skip
    plan_argv = [
        sys.executable, "-m", "libdoctor", "plan", "lock", str(work / "req.txt"),
        "--python", args.python, "--platform", args.platform, "--index-url", args.index_url,
        "--json",
    ]  # fmt: skip
    labels = ["uv cold", "uv warm", "plan cold", "plan warm"]
    trees = [("plan", str(ROOT / "src"))]
    if args.baseline:
        labels += ["base cold", "base warm"]
        trees.append(("base", str(Path(args.baseline).resolve())))
    times: dict[str, list[float]] = {k: [] for k in labels}
    doc = None
    for round_ in range(args.rounds):
        uv_cache = work / f"uv-cache-{round_}"
        for label in ("uv cold", "uv warm"):
            seconds, done = timed([*compile_argv, "--cache-dir", str(uv_cache),
                                   "-o", str(work / "req.txt")], env)  # fmt: skip
            assert done.returncode == 0, done.stderr
            times[label].append(seconds)
        for tree, src in trees:
            cache = work / f"cache-{tree}-{round_}"
            for label in (f"{tree} cold", f"{tree} warm"):
                seconds, done = timed([*plan_argv, "--cache-dir", str(cache)],
                                      {**env, "PYTHONPATH": src})  # fmt: skip
                assert done.returncode in (0, 1), done.stderr
                times[label].append(seconds)
                if label == "plan cold":
                    doc = json.loads(done.stdout)
    assert doc is not None
    summary = doc["summary"]
    print(f"{args.requirement} for Python {args.python}, {args.platform}: "
          f"{summary['wheels']} wheels, {summary['wheel_bytes'] / 1e9:.2f} GB")  # fmt: skip
    share = 100 * summary["fetched"] / summary["wheel_bytes"]
    print(f"plan lock read {summary['fetched'] / 1e6:.2f} MB ({share:.3f}%) in "
          f"{summary['requests']} wheel requests; findings: {len(doc['findings'])}")  # fmt: skip
    extensions = doc["lock"].get("extensions")
    if extensions:
        print(f"extension modules: {extensions['read']} read, {len(extensions['not_read'])} "
              f"not (caps), {extensions['fetched'] / 1e6:.2f} MB in "
              f"{extensions['requests']} requests (in the totals above)")  # fmt: skip
    for label, values in times.items():
        print(f"{label:10} median {statistics.median(values):6.2f} s  {values}")
    cold = statistics.median(times["plan cold"]) / statistics.median(times["uv cold"])
    print(f"plan cold / uv cold: {cold:.2f}x (budget 2x); plan warm "
          f"{statistics.median(times['plan warm']):.2f} s (budget 0.5 s)")  # fmt: skip
    if args.baseline:
        base = statistics.median(times["base cold"]) / statistics.median(times["uv cold"])
        print(f"base cold / uv cold: {base:.2f}x")
    print(f"load average at the end: {load()}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
