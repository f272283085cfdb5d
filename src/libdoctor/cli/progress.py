"""Progress on long work: a rich bar on stderr when stderr is a terminal, nothing otherwise.

Every command that can take long uses these; the stages below only take a callback (a
``ProgressFactory`` for bytes, a ``Callable[[int], None]`` for counted items), so rich is
imported here and nowhere lower. ``--quiet`` (or a stderr that is no terminal) turns it off.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

Tick = Callable[[int], None]
BytesFactory = Callable[[int, int], Tick]


def add_quiet_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bar on stderr (none off a terminal)"
    )


def wanted(args: argparse.Namespace) -> bool:
    """A bar only on a terminal, and never with ``--quiet``."""
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


def _bar(*columns: Any) -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, Progress

    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        *columns,
        console=Console(stderr=True),
        transient=True,
    )


def bytes_factory(enabled: bool, label: str = "hashing {count:,} files") -> BytesFactory | None:
    """A bar of bytes done and left (``label`` with ``{count}`` items), or None."""
    if not enabled:
        return None

    def start(count: int, total: int) -> Tick:
        from rich.progress import DownloadColumn, TimeRemainingColumn, TransferSpeedColumn

        progress = _bar(
            DownloadColumn(), "{task.fields[left]}", TransferSpeedColumn(), TimeRemainingColumn()
        )
        return Ticker(progress, label.format(count=count), total, _bytes_left)

    return start


def counter(enabled: bool, label: str, total: int, unit: str) -> Ticker | None:
    """A bar of items done and left (``3/8 nodes done, 5 left``), or None."""
    if not enabled or total <= 0:
        return None
    progress = _bar("{task.completed:.0f}/{task.total:.0f} " + unit + " done, {task.fields[left]}")
    return Ticker(progress, label, total, lambda left: f"{left} left")


def _bytes_left(left: int) -> str:
    from rich.filesize import decimal

    return f"{decimal(left)} left"


class Ticker:
    """A started bar: call it with what was done since; it stops itself once all is done,
    or when closed (a run that failed half way)."""

    def __init__(self, progress: Any, label: str, total: int, left: Callable[[int], str]) -> None:
        self.progress = progress
        self.total = total
        self.left = left
        self.done = 0
        self.task = progress.add_task(label, total=total, left=left(total))
        progress.start()
        if total == 0:
            self.close()

    def __call__(self, amount: int) -> None:
        self.done += amount
        left = self.left(max(self.total - self.done, 0))
        self.progress.update(self.task, completed=self.done, left=left)
        if self.done >= self.total:
            self.close()

    def close(self) -> None:
        self.progress.stop()
