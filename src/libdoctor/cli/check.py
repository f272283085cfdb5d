"""``libdoctor check``: every check, read-only."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable
from typing import Any

from libdoctor.cli import common


def register(sub: Any) -> None:
    check = sub.add_parser(
        "check",
        help="check every installed distribution against the disk",
        description="Check every installed distribution's files and native libraries. "
        "Reads only; never imports or runs code from the target.",
    )
    common.add_target_options(check)
    common.add_output_options(check, sarif=True)
    common.add_filter_options(check)
    common.add_deep_options(check, deep_help="also compare file hashes (parallel)")
    check.add_argument("--workers", type=int, metavar="N", help="hashing threads (default: cores)")
    check.add_argument(
        "--no-libraries", action="store_true", help="skip the native library (loader) checks"
    )
    check.set_defaults(func=run)


def progress_factory(enabled: bool) -> Callable[[int, int], Callable[[int], None]] | None:
    """A rich progress bar on stderr for long hashing, or None."""
    if not enabled:
        return None

    def start(files: int, total: int) -> Callable[[int], None]:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        progress = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        task = progress.add_task(f"hashing {files:,} files", total=total)
        progress.start()
        done = [0]

        def tick(nbytes: int) -> None:
            done[0] += nbytes
            progress.update(task, completed=done[0])
            if done[0] >= total:
                progress.stop()

        if total == 0:
            progress.stop()
        return tick

    return start


def run(args: argparse.Namespace) -> int:
    from libdoctor.analysis.overlap import run_check
    from libdoctor.analysis.run import CheckOptions, filter_findings, loader_context
    from libdoctor.report import check as check_report
    from libdoctor.report.json import target_dict

    target = common.discover_target(args)
    options = CheckOptions(
        deep=args.deep,
        cache_dir=common.hash_cache_dir(args),
        workers=args.workers,
        libraries=None
        if args.no_libraries
        else functools.partial(loader_context, dict(os.environ), os.getcwd(), target),
        caches=dict(os.environ) if target.root == "/" else None,  # not an image's: the host's
    )
    progress = progress_factory(args.deep and sys.stderr.isatty() and args.format == "text")
    report = run_check(target, options, progress=progress)
    common.keep_until_exit(report)
    shown = filter_findings(report.findings, args.select, args.ignore, args.all)
    if args.format == "sarif":
        from libdoctor.report import sarif

        common.write(sarif.render(shown, target.prefix))
    elif args.json:
        common.write(check_report.render_json(report, shown, target_dict(target)))
    else:
        color = common.use_color(args)
        common.write(check_report.render_text(report, shown, color=color, verbose=args.verbose))
    return common.exit_code(shown, args.fail_on)
