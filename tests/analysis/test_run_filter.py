"""``analysis.run``: what the user sees of a run's findings (``filter_findings``: --select,
--ignore, --all and the codes hidden by default), and the loader inputs of the user's next
``python`` (``loader_context``). Findings are values made here; the run itself is checked on
real envs by every check's tests.
"""

from __future__ import annotations

from collections.abc import Collection

import pytest

from libdoctor.analysis.run import filter_findings, loader_context
from libdoctor.findings import Code, Finding, Severity

HIDDEN: Code = "optional-library-missing"  # not shown by default (findings.CODES)
FINDINGS = (
    Finding("shared-path", Severity.WARNING, "b"),
    Finding(HIDDEN, Severity.WARNING, "optional"),
    Finding("missing-files", Severity.ERROR, "z"),
    Finding("shared-path", Severity.WARNING, "a"),
    Finding("altered-files", Severity.ERROR, "y"),
)


def shown(
    select: Collection[str] | None = None, ignore: Collection[str] = (), show_all: bool = False
) -> list[tuple[str, str]]:
    picked = filter_findings(
        FINDINGS, None if select is None else frozenset(select), frozenset(ignore), show_all
    )
    return [(f.code, f.message) for f in picked]


def test_by_default_hidden_codes_are_left_out_most_severe_first() -> None:
    assert shown() == [
        ("altered-files", "y"),
        ("missing-files", "z"),
        ("shared-path", "a"),
        ("shared-path", "b"),
    ]


def test_a_hidden_code_is_shown_when_asked_for_by_name_or_with_all() -> None:
    assert shown(select={HIDDEN}) == [(HIDDEN, "optional")]
    assert (HIDDEN, "optional") in shown(show_all=True)
    assert len(shown(show_all=True)) == len(FINDINGS)


def test_select_keeps_only_its_codes_and_ignore_wins_over_it() -> None:
    assert shown(select={"shared-path", "missing-files"}) == [
        ("missing-files", "z"),
        ("shared-path", "a"),
        ("shared-path", "b"),
    ]
    assert shown(select={"shared-path"}, ignore={"shared-path"}) == []
    assert shown(ignore={"altered-files"}, show_all=True)[0] == ("missing-files", "z")


@pytest.mark.parametrize(
    ("environ", "expected"),
    [({}, None), ({"LD_LIBRARY_PATH": ""}, None), ({"LD_LIBRARY_PATH": "/x:/y"}, "/x:/y")],
    ids=["unset", "empty", "set"],
)
def test_the_loader_sees_the_callers_library_path_and_cwd(
    environ: dict[str, str], expected: str | None
) -> None:
    context = loader_context(environ, "/some/cwd")
    assert (context.ld_library_path, context.cwd, context.root) == (expected, "/some/cwd", "/")
