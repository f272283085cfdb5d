"""What ``libdoctor caches`` costs on a big triton cache, and what ``check``'s look costs.

    .venv/bin/python -m compileall -q src
    .venv/bin/python bench/bench_caches.py --entries 10000 --rounds 5

Makes, in a temp dir, a target (a venv layout with triton 3.5.0 and torch 2.14.1+cu130
dist-infos, no interpreter needed) and a triton cache of ENTRIES entries laid out as triton
lays them out (``<key>/<kernel>.json`` with ``triton_version``, ``__grp__<kernel>.json``, the
``.cubin``), a tenth of them for triton 3.4.0. Times ``python -m libdoctor caches TARGET``
(text, then ``--json``) end to end (interpreter start included) and, in this process,
``quick_stale`` (what ``check`` adds). Prints medians. Nothing outside the temp dir is read
or written as a cache: every cache variable points into it.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))


def make_target(prefix: Path) -> None:
    minor = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = prefix / "lib" / minor / "site-packages"
    (prefix / "pyvenv.cfg").parent.mkdir(parents=True, exist_ok=True)
    (prefix / "pyvenv.cfg").write_text(f"version = {sys.version_info[0]}.{sys.version_info[1]}.0\n")
    for name, version in (("triton", "3.5.0"), ("torch", "2.14.1+cu130")):
        dist = site / f"{name}-{version}.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (dist / "INSTALLER").write_text("pip\n")
        (dist / "RECORD").write_text(f"{dist.name}/METADATA,,\n")


def make_cache(root: Path, entries: int) -> None:
    for number in range(entries):
        key = base64.b32encode(hashlib.sha256(str(number).encode()).digest()).decode().rstrip("=")
        entry = root / key
        entry.mkdir(parents=True)
        version = "3.4.0" if number % 10 == 0 else "3.5.0"
        name = f"kernel_{number}"
        meta: dict[str, object] = {"hash": key}
        meta["target"] = {"backend": "cuda", "arch": 90, "warp_size": 32}
        meta.update({"name": name, "num_warps": 4, "triton_version": version})
        (entry / f"{name}.json").write_text(json.dumps(meta))
        group = {"child_paths": {f"{name}.json": str(entry / f"{name}.json")}}
        (entry / f"__grp__{name}.json").write_text(json.dumps(group))
        (entry / f"{name}.cubin").write_bytes(os.urandom(256))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-caches-") as tmp:
        base = Path(tmp)
        make_target(base / "env")
        make_cache(base / "triton", args.entries)
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"), HOME=str(base / "home"))
        env.update(
            TRITON_CACHE_DIR=str(base / "triton"),
            TORCHINDUCTOR_CACHE_DIR=str(base / "inductor"),
            XDG_CACHE_HOME=str(base / "xdg"),
            CUDA_CACHE_PATH=str(base / "nv"),
        )
        for output in ("text", "json"):
            argv = [sys.executable, "-m", "libdoctor", "caches", str(base / "env")]
            argv += ["--json"] if output == "json" else []
            times = []
            for _ in range(args.rounds):
                start = time.perf_counter()
                proc = subprocess.run(argv, env=env, capture_output=True, check=False)
                times.append(time.perf_counter() - start)
            print(
                f"caches ({output}) on {args.entries} triton entries, a tenth stale: median "
                f"{statistics.median(times):.3f} s (min {min(times):.3f} s), exit {proc.returncode}"
            )
        print(f"check's look (quick_stale): median {_quick(base, env, args.rounds) * 1000:.1f} ms")


def _quick(base: Path, env: dict[str, str], rounds: int) -> float:
    from libdoctor.environment.distributions import scan_target
    from libdoctor.environment.target import discover
    from libdoctor.stack.caches import Versions, quick_stale

    target = discover(str(base / "env"), None, env)
    versions = Versions.of(target, scan_target(target))
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        quick_stale(env, target, versions)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


if __name__ == "__main__":
    main()
