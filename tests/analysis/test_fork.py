"""Work in a forked child (analysis.fork): results, values sent later, and every fallback."""

from __future__ import annotations

import os

import pytest

from libdoctor.analysis.fork import Later, started_in_child


def test_the_result_comes_back_from_the_child() -> None:
    parent = os.getpid()
    wait = started_in_child(lambda: ("done", os.getpid() != parent))
    assert wait() == ("done", True)


@pytest.mark.parametrize("size", [10, 1 << 20], ids=["small", "bigger-than-a-pipe"])
def test_a_value_set_after_the_fork_reaches_the_child(size: int) -> None:
    later: Later[dict[str, str]] = Later()
    wait = started_in_child(lambda: later.get(), later)
    value = {"key": "x" * size}
    later.set(value, value)
    assert wait() == value


def test_a_child_that_never_reads_does_not_block_the_parent() -> None:
    later: Later[bytes] = Later()
    wait = started_in_child(lambda: "ignored the value", later)
    later.set(b"", b"x" * (4 << 20))  # far more than a pipe holds
    assert wait() == "ignored the value"


def test_a_failing_child_is_redone_here_with_the_value_at_hand() -> None:
    later: Later[str] = Later()
    parent = os.getpid()

    def work() -> tuple[str | None, bool]:
        if os.getpid() != parent:
            raise RuntimeError("the child fails")
        return later.get(), True

    wait = started_in_child(work, later)
    later.set("value", "value")
    assert wait() == ("value", True)


def test_without_a_second_core_the_work_runs_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    later: Later[str] = Later()
    parent = os.getpid()
    wait = started_in_child(lambda: (later.get(), os.getpid() == parent), later)
    later.set("value", "value")
    assert wait() == ("value", True)
