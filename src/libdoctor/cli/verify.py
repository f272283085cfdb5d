"""``libdoctor verify --lock FILE [TARGET]``: is the environment still its lock? Reads only.

Exit 0: it matches (infos only, such as artifacts not verifiable); 1: drift (a package
missing, extra, at another version, from another file, or with changed files); 2: the lock
cannot be verified (unreadable, malformed, for other Pythons), one line on stderr.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from libdoctor.cli import common
from libdoctor.cli import progress as bar


def register(sub: Any) -> None:
    verify = sub.add_parser(
        "verify",
        help="is the environment still its lock file? (pylock.toml, uv.lock, requirements)",
        description="Compare the environment with a lock file: missing, extra and other-version "
        "packages, packages installed from another file than the lock's, and locked packages "
        "whose files changed. Reads only.",
    )
    verify.add_argument(
        "--lock",
        required=True,
        metavar="FILE",
        help="pylock.toml (PEP 751), uv.lock, or a requirements file of name==version pins",
    )
    common.add_target_options(verify)
    common.add_output_options(verify, sarif=True)
    common.add_deep_options(verify, deep_help="also compare file hashes with RECORD")
    bar.add_quiet_option(verify)
    verify.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from libdoctor.analysis.lock import verify_lock
    from libdoctor.analysis.run import CheckOptions
    from libdoctor.findings import Severity
    from libdoctor.report import lock as lock_report
    from libdoctor.report.json import target_dict

    target = common.discover_target(args)
    options = CheckOptions(deep=args.deep, cache_dir=common.hash_cache_dir(args))
    progress = bar.bytes_factory(args.deep and bar.wanted(args) and args.format == "text")
    report = verify_lock(target, args.lock, options, progress)
    order = {s: i for i, s in enumerate(sorted(Severity, reverse=True))}
    findings = sorted(report.check.findings, key=lambda f: order[f.severity])
    if args.format == "sarif":
        from libdoctor.report import sarif

        common.write(
            sarif.render(findings, target.prefix, fallback=os.path.abspath(report.lock.path))
        )
    elif args.json:
        common.write(lock_report.render_json(report, findings, target_dict(target)))
    else:
        text = lock_report.render_text(
            report, findings, color=common.use_color(args), verbose=args.verbose
        )
        common.write(text)
    return common.exit_code(findings, "warning")
