"""Reading many wheels' indexes at once: each is network waits, so threads overlap them.

``each`` maps a function over items on a few threads, in order (the long ones started
first, when told which), and re-raises the first failure in that order; ``sequential`` is
the plain path beside it (one thread), the reference the tests compare it with. The
function must share nothing mutable between items.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["WORKERS", "each", "sequential"]

WORKERS = 8  # requests in flight at once: a few per core's worth of waiting

_In = TypeVar("_In")
_Out = TypeVar("_Out")


def sequential(items: Iterable[_In], function: Callable[[_In], _Out]) -> list[_Out]:
    return [function(item) for item in items]


def each(
    items: Sequence[_In],
    function: Callable[[_In], _Out],
    workers: int = WORKERS,
    first: Callable[[_In], bool] | None = None,
) -> list[_Out]:
    """FUNCTION of each item, in ITEMS' order; up to WORKERS at a time. Items FIRST says
    are long (a framework's wheel: more requests, one after another) start before the
    rest, so that they do not end the run alone; the results keep ITEMS' order."""
    if workers <= 1 or len(items) <= 1:
        return sequential(items, function)
    start: Sequence[int] = range(len(items))
    if first is not None:
        start = sorted(start, key=lambda i: not first(items[i]))
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        futures = {i: pool.submit(function, items[i]) for i in start}
        return [futures[i].result() for i in range(len(items))]
