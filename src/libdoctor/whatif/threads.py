"""Reading many wheels' indexes at once: each is network waits, so threads overlap them.

``each`` maps a function over items on a few threads, in order, and re-raises the first
failure; ``sequential`` is the plain path beside it (one thread), the reference the tests
compare it with. The function must share nothing mutable between items.
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
    items: Sequence[_In], function: Callable[[_In], _Out], workers: int = WORKERS
) -> list[_Out]:
    """FUNCTION of each item, in ITEMS' order; up to WORKERS at a time."""
    if workers <= 1 or len(items) <= 1:
        return sequential(items, function)
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(function, items))
