"""``libdoctor probe [MODULE ...] [TARGET]``: the one command that runs the target's code."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from libdoctor.cli import common
from libdoctor.errors import LibdoctorError

if TYPE_CHECKING:
    from libdoctor.probe.child import ChildReport

_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


COMMAND = common.Command(
    help="import modules in the target and report what is really loaded (RUNS its code)",
    description="Import each MODULE (default: the frameworks found in the environment) in "
    "a subprocess of the target's interpreter, read that process's /proc/self/maps and "
    "report every loaded shared object with its owner and whether its bytes match the "
    "owner's RECORD. Unlike every other command, this RUNS code from the target. "
    "TARGET is the last argument when it contains a '/', is not a module name, or is a "
    "directory holding an environment (pyvenv.cfg or conda-meta).",
    options=(
        common.argument(
            "names",
            nargs="*",
            metavar="MODULE|TARGET",
            help="modules to import, then the target",
        ),
        common.using(common.add_target_options, positional=False),
        common.argument(
            "--timeout",
            type=float,
            default=120.0,
            metavar="SECONDS",
            help="per import; the import's process group is killed after it (default: 120)",
        ),
        common.argument("--deep", action="store_true", help="compare loaded files by hash too"),
        common.add_output_options,
        common.add_filter_options,
    ),
    intermixed=True,
)


def _is_env_dir(name: str) -> bool:
    return os.path.isdir(name) and (
        os.path.exists(os.path.join(name, "pyvenv.cfg"))
        or os.path.isdir(os.path.join(name, "conda-meta"))
    )


def split_names(names: Sequence[str]) -> tuple[list[str], str | None]:
    """(modules, target): the target is the last name, when it reads as a path."""
    modules = list(names)
    target = None
    if modules:
        last = modules[-1]
        if "/" in last or not _MODULE.match(last) or _is_env_dir(last):
            target = modules.pop()
    for name in modules:
        if not _MODULE.match(name):
            raise LibdoctorError(f"{name!r} is not a module name (the target must come last)")
    return modules, target


def run(args: argparse.Namespace) -> int:
    from libdoctor.analysis.run import filter_findings
    from libdoctor.document import target_dict
    from libdoctor.probe.run import run_probe
    from libdoctor.report import probe as probe_report
    from libdoctor.report.text import inert

    if args.timeout <= 0:
        raise LibdoctorError("--timeout must be positive")
    modules, args.target = split_names(args.names)
    target = common.discover_target(args)

    def starting(chosen: Sequence[str], python: str) -> None:
        print(inert(probe_report.start_notice(chosen, python, args.timeout)), file=sys.stderr)

    def finished(child: ChildReport) -> None:
        notice = probe_report.child_notice(child)
        if notice is not None:
            print(inert(notice), file=sys.stderr)

    result = run_probe(
        target,
        modules,
        timeout=args.timeout,
        deep=args.deep,
        environ=os.environ,
        starting=starting,
        finished=finished,
    )
    shown = filter_findings(result.findings, args.select, args.ignore, args.all)
    color = common.use_color(args)
    common.write_formats(
        args,
        {
            "text": lambda: probe_report.render_text(
                result, shown, verbose=args.verbose, color=color
            ),
            "json": lambda: probe_report.render_json(result, shown, target_dict(target)),
        },
    )
    return common.exit_code(shown, args.fail_on)
