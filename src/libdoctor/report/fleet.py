"""``fleet`` output: nodes by difference from the reference, alike nodes on one line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from libdoctor.analysis.diff import FleetComparison
from libdoctor.report.diff import change_lines, diff_dict
from libdoctor.report.json import dumps

_NODES_SHOWN = 6
_LINES_SHOWN = 20  # per group: the table stays one screen; `libdoctor diff` tells all


def _nodes(nodes: Sequence[str]) -> str:
    shown = ", ".join(nodes[:_NODES_SHOWN])
    more = len(nodes) - _NODES_SHOWN
    return (
        shown
        + (f" and {more} more" if more > 0 else "")
        + (f" ({len(nodes)} nodes)" if len(nodes) > 1 else "")
    )


def fleet_text(fleet: FleetComparison, failed: Sequence[tuple[str, str]] = ()) -> str:
    total = sum(len(g.nodes) for g in fleet.groups)
    why = "the majority" if fleet.chosen_by == "majority" else "--reference"
    lines = [f"{total} nodes; reference: {fleet.reference} ({why})", ""]
    same = [n for g in fleet.groups if g.diff.empty for n in g.nodes]
    lines.append(f"{_nodes(same)}: same as the reference")
    for group in fleet.differing:
        count = group.diff.count()
        lines += ["", f"{_nodes(group.nodes)}: {count} difference{'s' if count != 1 else ''}"]
        changes = change_lines(group.diff)
        lines += [f"  {line}" for line in changes[:_LINES_SHOWN]]
        if len(changes) > _LINES_SHOWN:
            more = len(changes) - _LINES_SHOWN
            lines.append(f"  … {more} more lines (`libdoctor diff` of two snapshots lists all)")
    for node, reason in failed:
        lines += ["", f"{node}: no snapshot: {reason}"]
    return "\n".join(lines) + "\n"


def fleet_json(fleet: FleetComparison, failed: Sequence[tuple[str, str]] = ()) -> str:
    groups: list[dict[str, Any]] = [
        {"nodes": list(g.nodes), "reference": fleet.reference in g.nodes, **diff_dict(g.diff)}
        for g in fleet.groups
    ]
    return dumps(
        {
            "schema_version": 1,
            "reference": {"node": fleet.reference, "chosen_by": fleet.chosen_by},
            "nodes": sum(len(g.nodes) for g in fleet.groups),
            "differing": [n for g in fleet.differing for n in g.nodes],
            "groups": groups,
            "failed": [{"node": n, "reason": r} for n, r in failed],
        }
    )
