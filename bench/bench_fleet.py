"""Benchmark: ``libdoctor fleet`` over many snapshot files, and over simulated digest answers.

Not a test. From one real snapshot (``libdoctor snapshot ENV -o base.json``) it writes N node
files (each its own node name and prefix), two of them odd: one with a file row changed, one
without a distribution; then times ``libdoctor fleet FILES... --json`` and its peak RSS (the
kernel's count for the child, ``wait4``), for each N asked for. ``--answers N`` feeds N
simulated Ray answers (digests only, three of them odd) through the fleet reader in a child,
fetching full snapshots only for the groups it has not seen. Budget (issue 26): 1,000 files
under 30 s and 1 GB; 10,000 answers under 60 s.

    libdoctor snapshot /path/to/torch-venv -o base.json
    python -m compileall -q src
    python bench/bench_fleet.py base.json --nodes 100 1000 --frames 100 1000 --answers 10000
    python bench/bench_fleet.py base.json --nodes 100 1000 --gzip
    python bench/bench_fleet.py base.json --nodes 100 1000 --frames 100 1000 --src before/src
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent / "src"


def odd_documents(base: dict[str, Any]) -> list[dict[str, Any]]:
    """The base with one file row's size changed in its largest distribution; the base
    without its smallest distribution."""
    changed = copy.deepcopy(base)
    largest = max(changed["distributions"], key=lambda d: len(d["files"]))
    largest["files"][len(largest["files"]) // 2][1] += 1
    missing = copy.deepcopy(base)
    smallest = min(missing["distributions"], key=lambda d: len(d["files"]))
    missing["distributions"].remove(smallest)
    return [changed, missing]


def canonical(doc: dict[str, Any]) -> bytes:
    return (
        json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
    ).encode()


def write_fleet(base: dict[str, Any], count: int, where: Path, gzipped: bool) -> list[str]:
    """COUNT node files in WHERE: node-0007 is the first odd node, the one a tenth of the
    way in the second; the rest are the base under their own names."""
    odd = {min(7, count - 1): 0, count // 10 + 3: 1}
    docs = odd_documents(base)
    paths = []
    for i in range(count):
        doc = copy.copy(docs[odd[i]] if i in odd else base)
        doc["node"], doc["prefix"] = f"node-{i:05}", f"/opt/envs/node-{i:05}"
        data = canonical(doc)
        path = where / f"node-{i:05}.json{'.gz' if gzipped else ''}"
        path.write_bytes(gzip.compress(data, mtime=0) if gzipped else data)
        paths.append(str(path))
    return paths


_LAUNCH = """
import os, resource, sys
cap = int(os.environ.pop("BENCH_CAP_BYTES", "0"))
pid = os.fork()
if pid == 0:
    if cap:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""


def run_peak(argv: list[str], env: dict[str, str]) -> tuple[float, float, int, str, str]:
    """ARGV forked by a small launcher that reports ARGV's own peak RSS (KiB); under an
    address-space cap when BENCH_CAP_BYTES is set (the code before may need many GB)."""
    with tempfile.TemporaryDirectory() as work:
        peak = Path(work) / "peak"
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", _LAUNCH, str(peak), *argv], capture_output=True, env=env
        )
        elapsed = time.perf_counter() - start
        kib = int(peak.read_text()) if peak.exists() else 0
    out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    return elapsed, kib / 1024, proc.returncode, out, err


def slurm(base: dict[str, Any], count: int, work: str, env: dict[str, str]) -> dict[str, str]:
    """An srun on PATH that writes COUNT nodes' frames (what ``snapshot --framed`` writes on
    each node, srun merging them) from a file made here: the fleet's side of --slurm alone."""
    sys.path.insert(0, env["PYTHONPATH"])
    from libdoctor.analysis.snapshot import frame

    odd = {min(7, count - 1): 0, count // 10 + 3: 1}
    kinds = [gzip.compress(canonical(doc), mtime=0) for doc in [*odd_documents(base), base]]
    framed = Path(work) / "frames"
    with framed.open("w") as out:
        for i in range(count):
            out.write(frame(str(i), f"node-{i:05}", kinds[odd.get(i, 2)]))
    srun = Path(work) / "srun"
    srun.write_text(f"#!/bin/sh\nexec cat {framed}\n")
    srun.chmod(0o755)
    return dict(env, PATH=f"{work}{os.pathsep}{env['PATH']}")


_ANSWERS = """
import sys, time
from libdoctor.analysis.diff import compare_fleet
from libdoctor.analysis.fleet import FleetReader, decode_digests, digests_of
from libdoctor.report.fleet import fleet_json, fleet_text
count, files = int(sys.argv[1]), sys.argv[2:]
blobs = [open(f, "rb").read() for f in files]
answers = [digests_of(b, f).encode() for b, f in zip(blobs, files)]
odd = {7: 1, count // 10 + 3: 2, count // 2 + 1: 1}
fetched = []
def fetch(i):
    fetched.append(i)
    return blobs[i]
start = time.perf_counter()
reader = FleetReader()
pairs = []
for n in range(count):
    which = odd.get(n, 0)
    label = f"{n:08x} 10.0.{n // 256 % 256}.{n % 256}"
    digests = decode_digests(answers[which], label)
    pairs.append((label, reader.answer(digests, lambda w=which: fetch(w), label)))
read = time.perf_counter()
fleet = compare_fleet(pairs)
text, doc = fleet_text(fleet), fleet_json(fleet)
print(f"{time.perf_counter() - start:.2f} s in-process ({read - start:.2f} s reading), "
      f"{len(fleet.groups)} groups, "
      f"fetched {len(fetched)} snapshots, {len(doc)} bytes of JSON")
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snapshot", type=Path, help="one real snapshot (libdoctor snapshot)")
    parser.add_argument("--nodes", type=int, nargs="*", default=[100, 1000])
    parser.add_argument("--answers", type=int, default=0, help="simulated digest answers")
    parser.add_argument(
        "--frames", type=int, nargs="*", default=[], help="nodes of --slurm (a stand-in srun)"
    )
    parser.add_argument("--gzip", action="store_true", help="write the node files gzip'd")
    parser.add_argument("--src", type=Path, default=HERE, help="the libdoctor source to run")
    parser.add_argument("--cap-gb", type=float, default=4.0, help="address-space cap (GB)")
    args = parser.parse_args()
    base = json.loads(args.snapshot.read_bytes())
    rows = sum(len(d["files"]) for d in base["distributions"])
    print(f"{args.snapshot}: {args.snapshot.stat().st_size / 1e6:.2f} MB, {rows} file rows")
    env = dict(os.environ, PYTHONPATH=str(args.src), BENCH_CAP_BYTES=str(int(args.cap_gb * 2**30)))
    libdoctor = [sys.executable, "-m", "libdoctor"]
    for count in args.nodes:
        with tempfile.TemporaryDirectory() as work:
            files = write_fleet(base, count, Path(work), args.gzip)
            wall, peak, rc, out, err = run_peak([*libdoctor, "fleet", *files, "--json"], env)
            differing = json.loads(out)["differing"] if rc in (0, 1) and out else err[-300:]
            print(
                f"  fleet of {count} files: {wall:.1f} s, peak {peak:.0f} MB, rc {rc}, "
                f"differing {differing}"
            )
    for count in args.frames:
        with tempfile.TemporaryDirectory() as work:
            wall, peak, rc, out, err = run_peak(
                [*libdoctor, "fleet", "--slurm", "--json"], slurm(base, count, work, env)
            )
            differing = json.loads(out)["differing"] if rc in (0, 1) and out else err[-300:]
            print(
                f"  --slurm, {count} nodes' frames on one stdout: {wall:.1f} s, "
                f"peak {peak:.0f} MB, rc {rc}, differing {differing}"
            )
    if args.answers:
        with tempfile.TemporaryDirectory() as work:
            kinds = [Path(work) / f"kind{i}.json" for i in range(3)]
            for path, doc in zip(kinds, [base, *odd_documents(base)], strict=True):
                path.write_bytes(canonical(doc))
            argv = [sys.executable, "-c", _ANSWERS, str(args.answers), *map(str, kinds)]
            wall, peak, rc, out, err = run_peak(argv, env)
            print(
                f"  {args.answers} digest answers: {wall:.1f} s, peak {peak:.0f} MB, rc {rc}: "
                f"{out.strip() or err[-400:]}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
