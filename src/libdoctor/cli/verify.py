"""``libdoctor verify --lock FILE [TARGET]``: is the environment still its lock? Reads only.

Exit 0: it matches (infos only, such as artifacts not verifiable); 1: drift (a package
missing, extra, at another version, from another file, or with changed files); 2: the lock
cannot be verified (unreadable, malformed, for other Pythons), one line on stderr.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from libdoctor.cli import common
from libdoctor.cli import progress as bar

if TYPE_CHECKING:
    from libdoctor.external.lockselect import SyncOptions


def add_sync_options(parser: Any) -> None:
    """``uv sync``'s selection flags, so the user passes the ones they synced with."""
    sync = parser.add_argument_group(
        "as synced",
        "the extras, groups and packages the environment was synced with, as "
        "uv sync's flags (default: the project's default-groups, no extras)",
    )
    for flag, what in (
        ("--extra", "an extra of the project"),
        ("--no-extra", "an extra left out of --all-extras"),
        ("--group", "a dependency group, with the default groups"),
        ("--no-group", "a dependency group left out (wins over the others)"),
        ("--only-group", "only this group: not the project's own dependencies"),
        ("--package", "a workspace member synced instead of the project"),
        ("--no-install-package", "a package left uninstalled"),
    ):
        sync.add_argument(flag, action="append", default=[], metavar="NAME", help=what)
    for flag, what in (
        ("--all-extras", "every extra"),
        ("--all-groups", "every dependency group"),
        ("--no-default-groups", "not the default groups ([tool.uv] default-groups, else dev)"),
        ("--all-packages", "every workspace member"),
        ("--no-install-project", "the project itself left uninstalled"),
        ("--no-install-workspace", "no workspace member installed"),
        ("--no-install-local", "no local path or directory installed"),
    ):
        sync.add_argument(flag, action="store_true", help=what)
    dev = sync.add_mutually_exclusive_group()
    dev.add_argument("--dev", dest="dev", action="store_const", const="include", help="--group dev")
    dev.add_argument(
        "--no-dev", dest="dev", action="store_const", const="exclude", help="--no-group dev"
    )
    dev.add_argument(
        "--only-dev", dest="dev", action="store_const", const="only", help="--only-group dev"
    )


COMMAND = common.Command(
    help="is the environment still its lock file? (pylock.toml, uv.lock, requirements)",
    description="Compare the environment with a lock file: missing, extra and other-version "
    "packages, packages installed from another file than the lock's, and locked packages "
    "whose files changed. Reads only.",
    options=(
        common.argument(
            "--lock",
            required=True,
            metavar="FILE",
            help="pylock.toml (PEP 751), uv.lock, or a requirements file of pins (- reads stdin)",
        ),
        common.argument(
            "--allow-include",
            action="append",
            default=[],
            metavar="DIR",
            help="a requirements lock's -r files may also come from DIR (default: the lock's "
            "own directory tree only)",
        ),
        add_sync_options,
        common.add_target_options,
        common.using(common.add_output_options, sarif=True),
        common.using(common.add_deep_options, deep_help="also compare file hashes with RECORD"),
        bar.add_quiet_option,
    ),
)


def sync_options(args: argparse.Namespace) -> SyncOptions:
    from libdoctor.external.lockselect import SyncOptions

    return SyncOptions(
        extras=tuple(args.extra),
        all_extras=args.all_extras,
        no_extras=tuple(args.no_extra),
        groups=tuple(args.group),
        no_groups=tuple(args.no_group),
        only_groups=tuple(args.only_group),
        all_groups=args.all_groups,
        no_default_groups=args.no_default_groups,
        dev=args.dev,
        packages=tuple(args.package),
        all_packages=args.all_packages,
        no_install_project=args.no_install_project,
        no_install_workspace=args.no_install_workspace,
        no_install_local=args.no_install_local,
        no_install_packages=tuple(args.no_install_package),
    )


def run(args: argparse.Namespace) -> int:
    from libdoctor.analysis.lock import verify_lock
    from libdoctor.analysis.run import CheckOptions
    from libdoctor.document import target_dict
    from libdoctor.report import lock as lock_report

    options = CheckOptions(deep=args.deep, cache_dir=common.hash_cache_dir(args))
    progress = bar.bytes_factory(args.deep and bar.wanted(args) and args.format == "text")
    target = common.discover_target(args)
    report = verify_lock(
        target, args.lock, options, progress, sync_options(args), args.allow_include
    )
    findings = common.most_severe_first(report.check.findings)
    color = common.use_color(args)
    common.write_formats(
        args,
        {
            "text": lambda: lock_report.render_text(
                report, findings, color=color, verbose=args.verbose
            ),
            "json": lambda: lock_report.render_json(report, findings, target_dict(target)),
            "sarif": lambda: common.sarif_report(
                findings, target.prefix, fallback=os.path.abspath(report.lock.path)
            ),
        },
    )
    return common.exit_code(findings, "warning")
