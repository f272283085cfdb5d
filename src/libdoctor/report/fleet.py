"""``fleet`` output: a table of nodes by difference from the reference (alike nodes on one
line), then each differing group's changes; or JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from libdoctor.analysis.diff import Diff, FleetComparison
from libdoctor.document import dumps, envelope
from libdoctor.report.diff import change_lines, diff_dict
from libdoctor.report.text import inert, text_lines

_NODES_SHOWN = 6
_LINES_SHOWN = 20  # per group: the report stays one screen; `libdoctor diff` tells all


def _nodes(nodes: Sequence[str]) -> str:
    shown = ", ".join(inert(node) for node in nodes[:_NODES_SHOWN])
    more = len(nodes) - _NODES_SHOWN
    return (
        shown
        + (f" and {more} more" if more > 0 else "")
        + (f" ({len(nodes)} nodes)" if len(nodes) > 1 else "")
    )


def summary(d: Diff) -> str:
    """The table's cell: how many changes of each kind."""
    if d.empty:
        return "same as the reference"
    parts = [
        (len(d.versions), "distribution", "distributions"),
        (len(d.files), "file", "files"),
        (len(d.fields), "metadata change", "metadata changes"),
        (len(d.libraries), "library", "libraries"),
        (len(d.findings), "finding", "findings"),
    ]
    return ", ".join(f"{n} {one if n == 1 else many}" for n, one, many in parts if n)


def fleet_text(fleet: FleetComparison, failed: Sequence[tuple[str, str]] = ()) -> str:
    """Node names are what each snapshot says its node is: made inert where they are
    written (``inert``), as are the changes' lines; the table aligns what is printed."""
    total = sum(len(g.nodes) for g in fleet.groups)
    why = "the majority" if fleet.chosen_by == "majority" else "--reference"
    rows = [(_nodes(g.nodes), summary(g.diff)) for g in fleet.groups if g.diff.empty]
    rows += [(_nodes(g.nodes), summary(g.diff)) for g in fleet.differing]
    rows += [(inert(node), inert(f"no snapshot: {reason}")) for node, reason in failed]
    width = max(len("NODES"), *(len(n) for n, _ in rows))
    lines = [f"{total} nodes; reference: {inert(fleet.reference)} ({why})", ""]
    lines += [f"{'NODES':<{width}}  DIFFERENCES"] + [f"{n:<{width}}  {d}" for n, d in rows]
    for group in fleet.differing:
        changes = change_lines(group.diff)
        lines += ["", f"{_nodes(group.nodes)}:"]
        lines += [f"  {inert(line)}" for line in changes[:_LINES_SHOWN]]
        if len(changes) > _LINES_SHOWN:
            more = len(changes) - _LINES_SHOWN
            lines.append(f"  … {more} more lines (`libdoctor diff` of two snapshots lists all)")
    return text_lines(lines)


def fleet_json(fleet: FleetComparison, failed: Sequence[tuple[str, str]] = ()) -> str:
    groups: list[dict[str, Any]] = [
        {"nodes": list(g.nodes), "reference": fleet.reference in g.nodes, **diff_dict(g.diff)}
        for g in fleet.groups
    ]
    return dumps(
        envelope(
            {
                "reference": {"node": fleet.reference, "chosen_by": fleet.chosen_by},
                "nodes": sum(len(g.nodes) for g in fleet.groups),
                "differing": [n for g in fleet.differing for n in g.nodes],
                "groups": groups,
                "failed": [{"node": n, "reason": r} for n, r in failed],
            }
        )
    )
