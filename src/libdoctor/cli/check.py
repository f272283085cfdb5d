"""``libdoctor check``: every check, read-only."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from libdoctor.cli import common
from libdoctor.cli import progress as bar

if TYPE_CHECKING:
    from libdoctor import api
    from libdoctor.analysis.run import Report
    from libdoctor.analysis.tree import FailingImport
    from libdoctor.findings import Finding


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
        reuse=args.html is None and args.format != "html",  # HTML draws from the model
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
    shown, diagnosis = report.findings, report.diagnosis
    color = common.use_color(args)
    return {
        "text": lambda: check_report.render_text(run, diagnosis, color=color, verbose=args.verbose),
        "json": lambda: check_report.render_json(run, diagnosis, target_dict(report.target)),
        "html": lambda: check_report.render_html(run, diagnosis, failing_imports(args, run, shown)),
        "sarif": lambda: check_report.render_sarif(run, diagnosis),
    }


def failing_imports(
    args: argparse.Namespace, report: Report, findings: Sequence[Finding]
) -> tuple[FailingImport, ...]:
    """The extension modules whose load fails on a library an ``unresolved-library`` finding
    names, each with its chain and tree (the loader emulation runs once more, for HTML only)."""
    libraries = [
        str(f.evidence["library"])
        for f in findings
        if f.code == "unresolved-library" and "library" in f.evidence
    ]
    if not libraries or args.no_libraries or report.environment is None or report.disk is None:
        return ()
    from libdoctor.analysis.run import loader_context
    from libdoctor.analysis.tree import failing_imports as failing

    context = loader_context(dict(os.environ), os.getcwd(), report.target)
    return failing(report.environment, report.disk, context, libraries)
