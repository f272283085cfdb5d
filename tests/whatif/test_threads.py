"""``whatif.threads.each`` against its reference, ``sequential``: the same results in the
same order, the long items started first, the first failure in the items' order raised."""

from __future__ import annotations

import threading

import pytest

from libdoctor.whatif.threads import each, sequential


def test_the_long_items_start_first_and_the_results_keep_their_order() -> None:
    """Every other item waits until both long ones have started: on two threads, that
    ends only if the long ones were taken first."""
    long_started: list[int] = []
    both = threading.Event()
    waited: list[bool] = []

    def square(n: int) -> int:
        if n >= 8:
            long_started.append(n)
            if len(long_started) == 2:
                both.set()
        else:
            waited.append(both.wait(5))
        return n * n

    items = list(range(10))
    assert each(items, square, workers=2, first=lambda n: n >= 8) == [n * n for n in items]
    assert all(waited) and len(waited) == 8
    assert sequential(items, lambda n: n * n) == [n * n for n in items]


def test_the_first_failure_in_the_items_order_is_raised() -> None:
    def fail_on_odd(n: int) -> int:
        if n % 2:
            raise ValueError(f"odd {n}")
        return n

    with pytest.raises(ValueError, match="odd 3"):
        each([0, 2, 3, 4, 5], fail_on_odd, workers=4, first=lambda n: n == 5)
