"""``libdoctor check``: every check, read-only."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from libdoctor.cli import common
from libdoctor.cli import progress as bar

if TYPE_CHECKING:
    from libdoctor.analysis.run import Report
    from libdoctor.analysis.tree import FailingImport
    from libdoctor.findings import Finding


def register(sub: Any) -> None:
    check = sub.add_parser(
        "check",
        help="check every installed distribution against the disk",
        description="Check every installed distribution's files and native libraries. "
        "Reads only; never imports or runs code from the target.",
    )
    common.add_target_options(check)
    common.add_format_options(check, (*common.FORMATS, "sarif"))
    common.add_filter_options(check)
    common.add_deep_options(check, deep_help="also compare file hashes (parallel)")
    check.add_argument(
        "--workers", type=int, metavar="N", help="hashing workers (default: the usable cores)"
    )
    check.add_argument(
        "--no-libraries", action="store_true", help="skip the native library (loader) checks"
    )
    bar.add_quiet_option(check)
    check.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from libdoctor.api import check

    progress = bar.bytes_factory(args.deep and bar.wanted(args) and args.format == "text")
    report = check(
        common.discover_target(args),
        args.deep,
        select=args.select,
        ignore=args.ignore,
        show_all=args.all,
        libraries=not args.no_libraries,
        cache_dir=common.check_cache_dir(args),
        workers=args.workers,
        progress=progress,
        reuse=args.html is None and args.format != "html",  # HTML draws from the model
    )
    common.keep_until_exit(report)
    from libdoctor.document import target_dict  # parent alone needs them
    from libdoctor.report import check as check_report  # after the check's fork: the

    run = report.run
    assert run is not None
    shown, diagnosis = report.findings, report.diagnosis
    common.write_formats(
        args,
        {
            "text": lambda: check_report.render_text(
                run, diagnosis, color=common.use_color(args), verbose=args.verbose
            ),
            "json": lambda: check_report.render_json(run, diagnosis, target_dict(report.target)),
            "html": lambda: check_report.render_html(
                run, diagnosis, failing_imports(args, run, shown)
            ),
            "sarif": lambda: sarif_report(shown, report.target.prefix),
        },
    )
    return common.exit_code(shown, args.fail_on)


def sarif_report(findings: Sequence[Finding], prefix: str) -> str:
    from libdoctor.report import sarif  # only when chosen

    return sarif.render(findings, prefix)


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
