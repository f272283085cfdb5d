"""``libdoctor check``: every check, read-only."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from libdoctor.cli import common
from libdoctor.cli import progress as bar

if TYPE_CHECKING:
    from libdoctor import api


COMMAND = common.Command(
    help="check every installed distribution against the disk",
    description="Check every installed distribution's files and native libraries. "
    "Reads only; never imports or runs code from the target.",
    options=(
        common.add_target_options,
        common.using(common.add_format_options, formats=(*common.FORMATS, "sarif")),
        common.add_filter_options,
        common.using(common.add_deep_options, deep_help="also compare file hashes (parallel)"),
        common.argument(
            "--workers",
            type=int,
            metavar="N",
            help="hashing workers (default: the usable cores)",
        ),
        common.add_library_option,
        bar.add_quiet_option,
    ),
)


def run(args: argparse.Namespace) -> int:
    from libdoctor.api import check

    progress = bar.bytes_factory(args.deep and bar.wanted(args) and args.format == "text")
    cache_dir = common.check_cache_dir(args)
    html = args.html is not None or args.format == "html"
    common.refuse_root(args)
    report = check(  # the one place the target is discovered
        args.target,
        args.deep,
        python=args.python,
        root=args.image_root,
        files_are_interpreters=False,  # TARGET is a directory, --python the interpreter
        select=args.select,
        ignore=args.ignore,
        show_all=args.all,
        libraries=not args.no_libraries,
        cache_dir=cache_dir,
        workers=args.workers,
        progress=progress,
        reuse=not html,  # HTML draws from the model
        failing_imports=html,
    )
    common.keep_until_exit(report)
    common.write_formats(args, renderers(args, report))
    return common.exit_code(report.findings, args.fail_on)


def renderers(args: argparse.Namespace, report: api.Report) -> dict[str, Callable[[], str]]:
    """The report in each format ``--format`` and ``--html`` choose from, rendered only when
    chosen."""
    from libdoctor.document import target_dict  # after the check's fork: the
    from libdoctor.report import check as check_report  # parent alone needs them

    run = report.run
    assert run is not None
    diagnosis = report.diagnosis
    color = common.use_color(args)
    return {
        "text": lambda: check_report.render_text(run, diagnosis, color=color, verbose=args.verbose),
        "json": lambda: check_report.render_json(run, diagnosis, target_dict(report.target)),
        "html": lambda: check_report.render_html(run, diagnosis),
        "sarif": lambda: check_report.render_sarif(run, diagnosis),
    }
