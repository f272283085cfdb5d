"""Benchmark: ``libdoctor plan install REQ`` reading the wheels' index by range requests, against
``pip install --dry-run`` of the same requirement. Not a test.

    python -m compileall -q src
    python bench/bench_plan_range.py [--env /work/envs/jax-cuda12]
                                     [--requirement nvidia-cudnn-cu13==9.24.0.43] [--rounds 3]
                                     [--index-url https://pypi.org/simple]

The env is hard-link-copied (``cp -al``; the plan never writes, the copy makes sure). pip
reads no config file (this machine's adds local mirrors holding some of these wheels): the
index is ``--index-url`` alone. The baseline is the env's own pip (in an env without pip, the
pip beside libdoctor aimed at it with ``--python``, as libdoctor does), run once first as a
warm-up. Each round then times pip's dry-run, the plan with an empty libdoctor cache (the
wheels read by range) and the plan again (their file lists from the cache, no request). Bytes
are what libdoctor reports reading ("NAME VERSION: read X of Y by range").

From an index without PEP 658 metadata a pip before 23.3 downloads every wheel it resolves
during ``--dry-run``: that download is pip's, paid by the baseline and the plan alike. Run the
bench with a newer pip beside libdoctor (``PYTHONPATH=src /venv-with-pip-26/bin/python
bench/bench_plan_range.py``) to see both without it: libdoctor runs pip >= 23.3 with
``--use-feature=fast-deps``, the baseline here too, so the two resolve alike.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READ = re.compile(r": read ([\d.]+) (B|kB|MB|GB) of ([\d.]+) (B|kB|MB|GB) by range")
UNITS = {"B": 1, "kB": 10**3, "MB": 10**6, "GB": 10**9}


def _env() -> dict[str, str]:
    """Bytecode on; pip reads no config (this machine's adds local mirrors and find-links,
    which would hand pip a local copy of the wheel): the index is --index-url alone."""
    skip = ("PYTHONDONTWRITEBYTECODE", "PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")
    env = {k: v for k, v in os.environ.items() if k not in skip}
    env.update({"PYTHONPATH": str(ROOT / "src"), "PIP_CONFIG_FILE": os.devnull})
    return env


def _pip(copy: Path) -> list[str]:
    python = str(copy / "bin" / "python")
    if list((copy / "lib").glob("python*/site-packages/pip")):
        return [python, "-m", "pip"]
    return [sys.executable, "-m", "pip", "--python", python]


def _pip_version(copy: Path) -> tuple[int, int]:
    done = subprocess.run([*_pip(copy), "--version"], capture_output=True, text=True, check=True)
    major, minor = re.match(r"pip (\d+)\.(\d+)", done.stdout).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


def _timed(argv: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(), check=False)
    return time.perf_counter() - start, done


def _pip_dry_run(copy: Path, requirement: str, index: str, lazy: bool = False) -> float:
    argv = [*_pip(copy), "install", "--dry-run", "--quiet", "--report", "-", requirement]
    argv += ["--index-url", index, *(["--use-feature=fast-deps"] if lazy else [])]
    elapsed, done = _timed(argv)
    if done.returncode != 0:
        raise SystemExit(f"pip --dry-run failed: {done.stderr[-2000:]}")
    return elapsed


def _plan(
    copy: Path, requirement: str, index: str, cache: Path
) -> tuple[float, dict[str, object], str]:
    argv = [sys.executable, "-m", "libdoctor", "plan", "install", requirement, str(copy)]
    argv += ["--index-url", index]
    elapsed, done = _timed([*argv, "--json", "--cache-dir", str(cache)])
    if done.returncode not in (0, 1):
        raise SystemExit(f"plan failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed, json.loads(done.stdout)["plan"], done.stderr


def _bytes(stderr: str) -> tuple[int, int]:
    """(bytes read, bytes of the wheels) summed over the notify lines."""
    read = size = 0
    for match in READ.finditer(stderr):
        read += int(float(match[1]) * UNITS[match[2]])
        size += int(float(match[3]) * UNITS[match[4]])
    return read, size


def _describe(plan: dict[str, object]) -> list[str]:
    overwrites = plan["overwrites"]
    assert isinstance(overwrites, list)
    # Libraries first: a header is the same story, told less loudly.
    differing = sorted(
        (o for o in overwrites if not o["identical"]),
        key=lambda o: (".so" not in o["path"], o["path"]),
    )
    new = plan["new_findings"]
    assert isinstance(new, list)
    lines = [
        f"plan: verdict {plan['verdict']}, subjects {plan['subjects']}",
        f"  overwrites {len(differing)} file(s) of other distributions with different bytes, "
        f"{len(overwrites) - len(differing)} with identical bytes",
    ]
    for item in differing[:5]:
        owners = ", ".join(f"{o['name']} {o['version']}" for o in item["owners"])
        lines.append(f"    {item['path']}  ({owners} <- {item['wheel']})")
    lines.append(f"  new findings: {sorted({f['code'] for f in new})}")
    return lines


@dataclass
class Figures:
    pip: dict[str, list[float]] = field(default_factory=dict)  # baseline -> times
    cold: list[float] = field(default_factory=list)  # plan, empty libdoctor cache
    warm: list[float] = field(default_factory=list)  # plan, file lists cached
    stderr: str = ""
    plan: dict[str, object] = field(default_factory=dict)


def _measure(copy: Path, args: argparse.Namespace, work: Path) -> Figures:
    lazy = _pip_version(copy) >= (23, 3)  # what libdoctor runs: fast-deps from pip 23.3 on
    baselines = {"pip install --dry-run": False}
    if lazy:
        baselines["pip install --dry-run --use-feature=fast-deps"] = True
    for flag in baselines.values():
        _pip_dry_run(copy, args.requirement, args.index_url, flag)  # warm-up
    figures = Figures({name: [] for name in baselines})
    for round_ in range(args.rounds):
        cache = work / f"cache-{round_}"
        for name, flag in baselines.items():
            figures.pip[name].append(_pip_dry_run(copy, args.requirement, args.index_url, flag))
        elapsed, figures.plan, figures.stderr = _plan(copy, args.requirement, args.index_url, cache)
        figures.cold.append(elapsed)
        elapsed, _, stderr = _plan(copy, args.requirement, args.index_url, cache)
        figures.warm.append(elapsed)
        assert "by range" not in stderr, stderr
        shutil.rmtree(cache, ignore_errors=True)
    return figures


def _report(args: argparse.Namespace, figures: Figures) -> None:
    read, size = _bytes(figures.stderr)
    print(f"env {args.env} (a cp -al copy), requirement {args.requirement}")
    print(*(line.partition("libdoctor: ")[2] for line in figures.stderr.splitlines()), sep="\n")
    print(*_describe(figures.plan), sep="\n")
    ratio = read / size if size else 0.0
    print(f"bytes read by libdoctor: {read:,} of {size:,} ({ratio:.4%} of the wheels)")
    for name, times in figures.pip.items():
        print(f"{name}: median {statistics.median(times):.2f} s of {len(times)}")
    base = statistics.median(list(figures.pip.values())[-1])  # what the plan's pip runs
    for label, times in (("empty libdoctor cache", figures.cold), ("lists cached", figures.warm)):
        median = statistics.median(times)
        print(f"plan install, {label}: median {median:.2f} s ({median / base:.2f}x that pip)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--env", type=Path, default=Path("/work/envs/jax-cuda12"))
    parser.add_argument("--requirement", default="nvidia-cudnn-cu13==9.24.0.43")
    parser.add_argument("--index-url", default="https://pypi.org/simple")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], check=True)
    with tempfile.TemporaryDirectory(prefix="bench-plan-range-") as work:
        copy = Path(work) / "env"
        subprocess.run(["cp", "-al", str(args.env), str(copy)], check=True)
        figures = _measure(copy, args, Path(work))
    _report(args, figures)


if __name__ == "__main__":
    main()
