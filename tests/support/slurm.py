"""A stand-in for ``srun`` on PATH: the command once per simulated node, all at once, their
stdout shared (as srun merges it), each with the node's own environment (its name, rank and
``$VIRTUAL_ENV``). With FLOOD, srun itself first writes that many bytes of junk without a
newline to the shared stdout (what a broken node's output can be)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

__all__ = ["fake_srun"]

_FAKE_SRUN = """#!{python}
import json, os, subprocess, sys
nodes = json.loads(os.environ["FAKE_SRUN_NODES"])
args = sys.argv[1:]
with open(os.environ["FAKE_SRUN_LOG"], "w") as log:
    json.dump(args, log)
flood = int(os.environ.get("FAKE_SRUN_FLOOD", "0"))
junk = b"x" * (1 << 20)
for start in range(0, flood, len(junk)):
    sys.stdout.buffer.write(junk[: flood - start])
if flood:
    sys.stdout.buffer.write(b"\\n")
    sys.stdout.flush()
command = args[args.index("-m") - 1:]
procs = []
for rank, (name, venv) in enumerate(nodes):
    env = dict(os.environ, SLURMD_NODENAME=name, SLURM_PROCID=str(rank), VIRTUAL_ENV=venv)
    procs.append(subprocess.Popen(command, env=env))
sys.exit(max(p.wait() for p in procs))
"""


def fake_srun(tmp_path: Path, nodes: list[tuple[str, str]], flood: int = 0) -> dict[str, str]:
    """The environment that puts the fake srun first on PATH, for NODES (name, venv); the
    arguments it was given land in ``tmp_path/srun-args.json``."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    srun = bindir / "srun"
    srun.write_text(_FAKE_SRUN.format(python=sys.executable))
    srun.chmod(srun.stat().st_mode | stat.S_IXUSR)
    return {
        "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_SRUN_NODES": json.dumps(nodes),
        "FAKE_SRUN_LOG": str(tmp_path / "srun-args.json"),
        "FAKE_SRUN_FLOOD": str(flood),
    }
