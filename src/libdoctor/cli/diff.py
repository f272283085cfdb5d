"""``libdoctor diff A B``: what changed between two snapshots or live environments."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from libdoctor.cli import common
from libdoctor.cli import progress as bar
from libdoctor.cli.snapshot import add_snapshot_options, cache_dir
from libdoctor.errors import LibdoctorError

if TYPE_CHECKING:
    from libdoctor.analysis.snapshot import Snapshot


COMMAND = common.Command(
    help="what changed between two snapshots or environments",
    description="Compare A with B, each a snapshot file (.json or .json.gz) or a live "
    "environment (a venv or prefix directory, or an interpreter), snapshotted in memory: "
    "distributions added, removed, upgraded or downgraded; files whose bytes changed "
    "under the same version; libraries that now resolve to another file or owner; "
    "findings new or gone. Exit 0: no differences, 1: differences, 2: cannot run.",
    options=(
        common.argument("a", metavar="A", help="the before: a snapshot file or an environment"),
        common.argument("b", metavar="B", help="the after: a snapshot file or an environment"),
        common.add_format_options,
        add_snapshot_options,
    ),
)


def load(text: str, args: argparse.Namespace) -> tuple[Snapshot, dict[str, Any]]:
    """TEXT's snapshot: read from a file, or taken of the environment it names."""
    from libdoctor.analysis.snapshot import node_name, read_snapshot, snapshot_target
    from libdoctor.environment.target import discover

    if _is_snapshot_file(text):
        snap = read_snapshot(text)
        return snap, {"snapshot": text, "node": snap.node, "prefix": snap.prefix}
    if not os.path.exists(text):
        raise LibdoctorError(f"{text}: no such snapshot file or environment")
    if os.path.isdir(text):
        target = discover(text, None, os.environ)
    else:
        target = discover(None, text, os.environ)
    snap = snapshot_target(
        target,
        node=node_name(os.environ),
        deep=args.deep,
        cache_dir=cache_dir(args),
        environ=os.environ,
        progress=bar.bytes_factory(args.deep and bar.wanted(args)),
    )
    return snap, {"environment": target.prefix, "node": snap.node, "prefix": snap.prefix}


def _is_snapshot_file(path: str) -> bool:
    """PATH is read as a snapshot: a file that is no interpreter, or what exists and is
    neither a file nor a directory (a device, a FIFO: refused by ``read_snapshot`` in one
    line, never run as an interpreter nor read)."""
    if os.path.isfile(path):
        return not _is_interpreter(path)
    return os.path.exists(path) and not os.path.isdir(path)


def _is_interpreter(path: str) -> bool:
    if not os.access(path, os.X_OK) or path.endswith((".json", ".gz")):
        return False
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
    except OSError:
        return False  # read_snapshot says why, in one line
    return head == b"\x7fELF" or os.path.basename(path).startswith("python")


def label(source: dict[str, Any]) -> str:
    where = source.get("snapshot") or source.get("environment")
    return f"{where} (node {source['node']}, {source['prefix']})"


def run(args: argparse.Namespace) -> int:
    from libdoctor.analysis.diff import diff
    from libdoctor.report.diff import diff_json, diff_text

    before, source_a = load(args.a, args)
    after, source_b = load(args.b, args)
    found = diff(before, after)
    labels = (label(source_a), label(source_b))

    def html() -> str:
        from libdoctor.report.html import diff_html

        return diff_html(found, labels, verbose=args.verbose)

    common.write_formats(
        args,
        {
            "text": lambda: diff_text(found, labels, verbose=args.verbose),
            "json": lambda: diff_json(found, {"a": source_a, "b": source_b}),
            "html": html,
        },
    )
    return common.EXIT_OK if found.empty else common.EXIT_FINDINGS
