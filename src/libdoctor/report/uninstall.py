"""uninstall as JSON and as text, once it ran: the plan it followed and how the run went.

The plan itself, shown before anything runs, is ``report.plan``'s; the run's outcome reads
like fix's (``report.fix``), since both run their steps the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from libdoctor.document import dumps, findings_document
from libdoctor.report.fix import run_dict, run_lines
from libdoctor.report.plan import plan_dict, visible
from libdoctor.report.text import to_string

if TYPE_CHECKING:
    from libdoctor.repair.apply import Outcome
    from libdoctor.whatif.plan import Plan


def uninstall_json(plan: Plan, target: Mapping[str, Any], outcome: Outcome) -> str:
    """The findings are those after the run, or (rolled back) those of before."""
    return dumps(
        findings_document(
            target=target,
            summary={"stage": "after" if outcome.after is not None else "before"},
            findings=outcome.findings,
            extra={"plan": plan_dict(visible(plan)), "run": run_dict(outcome)},
        )
    )


def uninstall_text(outcome: Outcome, *, color: bool) -> str:
    """Only the run: the plan was shown before it started."""
    return to_string(run_lines(outcome), color=color)
