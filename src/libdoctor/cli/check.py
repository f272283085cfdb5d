"""``libdoctor check``: every check, read-only."""

from __future__ import annotations

import argparse
import functools
import os
from typing import Any

from libdoctor.cli import common
from libdoctor.cli import progress as bar


def register(sub: Any) -> None:
    check = sub.add_parser(
        "check",
        help="check every installed distribution against the disk",
        description="Check every installed distribution's files and native libraries. "
        "Reads only; never imports or runs code from the target.",
    )
    common.add_target_options(check)
    common.add_output_options(check)
    common.add_filter_options(check)
    common.add_deep_options(check, deep_help="also compare file hashes (parallel)")
    check.add_argument("--workers", type=int, metavar="N", help="hashing threads (default: cores)")
    check.add_argument(
        "--no-libraries", action="store_true", help="skip the native library (loader) checks"
    )
    bar.add_quiet_option(check)
    check.set_defaults(func=run)


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
    progress = bar.bytes_factory(args.deep and bar.wanted(args) and not args.json)
    report = run_check(target, options, progress=progress)
    common.keep_until_exit(report)
    shown = filter_findings(report.findings, args.select, args.ignore, args.all)
    if args.json:
        common.write(check_report.render_json(report, shown, target_dict(target)))
    else:
        color = common.use_color(args)
        common.write(check_report.render_text(report, shown, color=color, verbose=args.verbose))
    return common.exit_code(shown, args.fail_on)
