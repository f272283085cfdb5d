"""Snapshots from many machines: one per Ray node, one per Slurm node, or files.

The engines only gather: each machine takes its own snapshot (``analysis.snapshot``) of the
environment named by TARGET, or of its own ``$VIRTUAL_ENV`` / interpreter, and the caller
compares them (``analysis.diff.compare_fleet``). Ray is imported only here and only when asked
for (an optional extra); Slurm is ``srun`` run once, its tasks' snapshots framed on stdout
(``analysis.snapshot.frame``) or written to a shared directory.

Every engine reads its snapshots one at a time through one ``analysis.fleet.FleetReader``:
alike nodes share one Snapshot, so a fleet costs one copy per kind of node, not per node. A
Ray node answers with its snapshot's digests, and its full snapshot is fetched only when no
node before it had the same.

Like ``probe``'s children, this runs code elsewhere: libdoctor on every node.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from libdoctor.analysis.fleet import FleetReader, decode_digests, digests_of
from libdoctor.analysis.snapshot import (
    FRAME_LINE,
    Snapshot,
    SnapshotError,
    frames,
    snapshot_bytes,
    task_order,
)
from libdoctor.errors import LibdoctorError


@dataclass(frozen=True, slots=True)
class Gathered:
    """Every node's snapshot by its label (alike nodes sharing one Snapshot object), and
    the nodes that could not give one."""

    snapshots: tuple[tuple[str, Snapshot], ...]
    failed: tuple[tuple[str, str], ...] = ()  # (node, why)


# --------------------------------------------------------------------------- files


def from_files(paths: Sequence[str], progress: Callable[[int], None] | None = None) -> Gathered:
    """Each file's snapshot, named by its node field, or by its file name when two files
    carry the same node name. One file held at a time. PROGRESS: told of each node read."""
    from collections import Counter

    reader = FleetReader()
    read = []
    for path in paths:
        read.append((path, *reader.read(snapshot_bytes(path), path)))
        if progress:
            progress(1)
    counts = Counter(node for _, node, _ in read)
    return Gathered(
        tuple(
            (node if node and counts[node] == 1 else _file_label(path), snap)
            for path, node, snap in read
        )
    )


def _file_label(path: str) -> str:
    name = os.path.basename(path)
    for suffix in (".gz", ".json"):
        name = name.removesuffix(suffix)
    return name


# --------------------------------------------------------------------------- Slurm


def srun_argv(
    srun_args: Sequence[str],
    target: str | None,
    *,
    deep: bool = False,
    out: str | None = None,
    python: str = sys.executable,
) -> list[str]:
    """The one srun command: libdoctor's own interpreter snapshotting on every node, each
    snapshot framed on stdout, or written as OUT (``{node}`` in it: the node's name)."""
    argv = ["srun", "--ntasks-per-node=1", *srun_args, python, "-m", "libdoctor", "snapshot"]
    argv += ["--deep"] if deep else []
    argv += ["-o", out] if out is not None else ["--framed"]
    argv += [target] if target is not None else []
    return argv


def slurm_snapshots(
    srun_args: Sequence[str],
    target: str | None,
    *,
    deep: bool = False,
    shared_dir: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Gathered:
    """Run srun over the allocation and collect one snapshot per task."""
    import tempfile

    where = None
    if shared_dir is not None:
        try:
            where = tempfile.mkdtemp(prefix="libdoctor-fleet-", dir=shared_dir)
        except OSError as exc:
            raise LibdoctorError(f"--shared-dir {shared_dir}: {exc.strerror or exc}") from None
    out = os.path.join(where, "{node}.json.gz") if where is not None else None
    argv = srun_argv(srun_args, target, deep=deep, out=out)
    returncode, framed = _run_srun(argv, environ)
    if where is not None:
        names = sorted(n for n in os.listdir(where) if n.endswith(".json.gz"))
        gathered = from_files([os.path.join(where, n) for n in names])
    else:
        gathered = Gathered(tuple(framed))
    if not gathered.snapshots:
        raise LibdoctorError(f"srun exited {returncode} and no node sent a snapshot")
    if returncode != 0:
        why = f"srun exited {returncode}"
        return Gathered(gathered.snapshots, (("(some nodes)", why),))
    return gathered


def _run_srun(
    argv: Sequence[str], environ: Mapping[str, str] | None
) -> tuple[int, list[tuple[str, Snapshot]]]:
    """srun's exit code and the snapshots framed on its stdout, in task order, each read as
    its frame completes (``frames``): only frames under way are held, and a line longer
    than a frame's is skipped unread, so what the nodes print beside their snapshots (a
    flood, a line without end) costs no memory."""
    import subprocess

    from libdoctor.bounded import lines

    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=environ)
    except OSError as exc:
        raise LibdoctorError(f"cannot run srun: {exc.strerror or exc}") from None
    reader = FleetReader()
    got: dict[str, tuple[str, Snapshot]] = {}
    with proc:
        assert proc.stdout is not None
        text = (line.decode("utf-8", "replace") for line in lines(proc.stdout, FRAME_LINE))
        for task, node, data in frames(text):
            got[task] = (node, reader.read(data, f"node {node}")[1])
    return proc.returncode, [got[task] for task in sorted(got, key=task_order)]


# --------------------------------------------------------------------------- Ray

TASK_TIMEOUT = 900.0  # seconds a node's snapshot may take (a cold --deep of a torch env: ~1 min)


def snapshot_here(target: str | None, deep: bool) -> tuple[bytes, bytes]:
    """A Ray task's work, on its node: the digests (``Digests.encode``) and the gzip'd
    snapshot of TARGET, or of the environment the worker runs in ($VIRTUAL_ENV, else its
    interpreter). Two returns: the driver gets the first, and the second (kept in the
    node's object store) only when it asks. Sequential: a Ray worker has threads, so
    nothing is forked."""
    from libdoctor.analysis.snapshot import encode, node_name, snapshot_target
    from libdoctor.environment.target import discover

    found = discover(target, None, os.environ)
    node = node_name(os.environ)
    snap = snapshot_target(found, node=node, deep=deep, environ=os.environ, forked=False)
    data = encode(snap, gzipped=True)
    return digests_of(data, f"node {node}").encode(), data


def ray_snapshots(
    address: str | None,
    target: str | None,
    *,
    deep: bool = False,
    progress: Callable[[int], Callable[[int], None] | None] | None = None,
) -> Gathered:
    """One task per alive node, pinned there (NodeAffinitySchedulingStrategy, soft=False).
    PROGRESS: given the number of nodes, gives what is told of each node done."""
    from importlib import import_module

    try:  # typed as Any: Ray is an optional extra, absent where the type check runs
        ray: Any = import_module("ray")
        strategies: Any = import_module("ray.util.scheduling_strategies")
    except ImportError:
        raise LibdoctorError(
            "--ray needs Ray, which is not installed: pip install 'libdoctor[ray]'"
        ) from None
    import logging

    connect = address or os.environ.get("RAY_ADDRESS") or "auto"
    try:
        ray.init(address=connect, logging_level=logging.ERROR, log_to_driver=False)
    except Exception as exc:  # Ray's own types, which vary between releases
        raise LibdoctorError(f"cannot connect to Ray at {connect}: {_first_line(exc)}") from None
    try:
        task = ray.remote(num_cpus=0, max_retries=0, num_returns=2)(snapshot_here)
        nodes = sorted((n for n in ray.nodes() if n.get("Alive")), key=lambda n: n["NodeID"])
        refs = {
            _ray_label(node): task.options(
                scheduling_strategy=strategies.NodeAffinitySchedulingStrategy(
                    node["NodeID"], soft=False
                )
            ).remote(target, deep)
            for node in nodes
        }
        return _gather_ray(ray, refs, progress(len(refs)) if progress else None)
    finally:
        ray.shutdown()


def _ray_label(node: Mapping[str, object]) -> str:
    return f"{str(node['NodeID'])[:8]} {node.get('NodeManagerAddress', '?')}"


def _gather_ray(
    ray: Any, refs: Mapping[str, Sequence[object]], tick: Callable[[int], None] | None = None
) -> Gathered:
    """Each node's answer (its digests), and its full snapshot only for digests no node
    before it sent (REFS: each node's two returns, ``snapshot_here``)."""
    reader = FleetReader()
    snapshots: list[tuple[str, Snapshot]] = []
    failed: list[tuple[str, str]] = []
    for label, (answer, full) in refs.items():
        source = f"node {label}"
        try:
            digests = decode_digests(_bytes(ray, answer, source, "snapshot digests"), source)
            fetch = functools.partial(_bytes, ray, full, source, "a snapshot")
            snapshots.append((label, reader.answer(digests, fetch, source)))
        except SnapshotError as exc:
            failed.append((label, str(exc)))
        except Exception as exc:  # a task's failure arrives as Ray's own exception types
            failed.append((label, _first_line(exc)))
        if tick:
            tick(1)  # a node done, its snapshot or its failure
    return Gathered(tuple(snapshots), tuple(failed))


def _bytes(ray: Any, ref: object, source: str, what: str) -> bytes:
    data = ray.get(ref, timeout=TASK_TIMEOUT)
    if not isinstance(data, bytes):
        raise SnapshotError(f"{source} sent {type(data).__name__}, not {what}")
    return data


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    last = next((line for line in reversed(lines) if "Error" in line), None)
    return (last or (lines[0] if lines else type(exc).__name__)).strip()
