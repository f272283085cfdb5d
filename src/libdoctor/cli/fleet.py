"""``libdoctor fleet``: snapshot many machines, diff each against a reference."""

from __future__ import annotations

import argparse
import functools
from typing import Any

from libdoctor.cli import common
from libdoctor.cli import progress as bar
from libdoctor.errors import LibdoctorError


def _engine_options(parser: argparse.ArgumentParser) -> None:
    """Where the snapshots come from, when not from files: Ray or Slurm, one of them."""
    engine = parser.add_mutually_exclusive_group()
    engine.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="run on a Ray cluster (ADDRESS, else $RAY_ADDRESS, else auto); needs libdoctor[ray]",
    )
    engine.add_argument(
        "--slurm",
        action="store_true",
        help="run `srun --ntasks-per-node=1` over the allocation; srun options after --",
    )


COMMAND = common.Command(
    help="which machines' environments differ from the others",
    description="Take a snapshot on every node (Ray: one task per alive node; Slurm: one "
    "srun task per node of the allocation) or read snapshot files, and diff each node "
    "against the reference (the majority, or --reference). Alike nodes share one line. "
    "Exit 0: every node matches; 1: some node differs or sent nothing; 2: cannot run.",
    options=(
        common.argument(
            "items",
            nargs="*",
            metavar="SNAPSHOT|TARGET",
            help="snapshot files; with --ray or --slurm, the environment to snapshot on each "
            "node (default: the node's $VIRTUAL_ENV, else the interpreter that runs "
            "libdoctor there)",
        ),
        _engine_options,
        common.argument(
            "--shared-dir",
            metavar="DIR",
            help="with --slurm: nodes write their snapshots to a new directory in DIR (a "
            "file system every node sees) instead of stdout",
        ),
        common.argument("--reference", metavar="NODE", help="compare with this node"),
        common.argument("--deep", action="store_true", help="record and compare file digests"),
        common.add_format_options,
        bar.add_quiet_option,
        common.defaults(passthrough=[]),
    ),
)


def _looks_like_address(text: str) -> bool:
    return text == "auto" or "://" in text or (":" in text and "/" not in text)


def gather(args: argparse.Namespace) -> Any:
    from libdoctor.probe import fleet

    items = list(args.items)
    if args.ray is not None:
        address = args.ray or None
        if address is not None and not _looks_like_address(address):
            items.insert(0, address)
            address = None
        nodes = functools.partial(bar.counter, bar.wanted(args), "snapshots", unit="nodes")
        return fleet.ray_snapshots(address, _one_target(items), deep=args.deep, progress=nodes)
    if args.slurm:
        return fleet.slurm_snapshots(
            args.passthrough, _one_target(items), deep=args.deep, shared_dir=args.shared_dir
        )
    if args.passthrough or args.shared_dir:
        raise LibdoctorError("srun options and --shared-dir go with --slurm")
    if not items:
        raise LibdoctorError("name snapshot files, or --ray or --slurm")
    return fleet.from_files(items, bar.counter(bar.wanted(args), "reading", len(items), "nodes"))


def _one_target(items: list[str]) -> str | None:
    if len(items) > 1:
        raise LibdoctorError(f"one TARGET at most with --ray or --slurm, got {len(items)}")
    return items[0] if items else None


def run(args: argparse.Namespace) -> int:
    from libdoctor.analysis.diff import compare_fleet
    from libdoctor.report.fleet import fleet_json, fleet_text

    gathered = gather(args)
    if not gathered.snapshots:
        reasons = "; ".join(f"{n}: {r}" for n, r in gathered.failed)
        raise LibdoctorError(f"no node sent a snapshot ({reasons})")
    fleet = compare_fleet(gathered.snapshots, args.reference)

    def html() -> str:
        from libdoctor.report.html import fleet_html

        return fleet_html(fleet, gathered.failed)

    common.write_formats(
        args,
        {
            "text": lambda: fleet_text(fleet, gathered.failed),
            "json": lambda: fleet_json(fleet, gathered.failed),
            "html": html,
        },
    )
    differs = fleet.differing or gathered.failed
    return common.EXIT_FINDINGS if differs else common.EXIT_OK
