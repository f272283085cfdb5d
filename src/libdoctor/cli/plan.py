"""``libdoctor plan uninstall NAME... [TARGET]``, ``libdoctor plan install WHEEL|REQ... [TARGET]``.

Predictions only: the target is never written. Exit 0 when the change is safe, 1 when it
breaks something, 2 when libdoctor cannot tell.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from libdoctor.cli import changes, common


def register(sub: Any) -> None:
    plan = sub.add_parser(
        "plan",
        help="predict what an uninstall or install would break, before it happens",
        description="Predict what `pip uninstall` or `pip install` would do to the environment: "
        "the files it deletes or overwrites, who else owns them, and what every check would "
        "report afterwards. Never writes to the target.",
    )
    actions = plan.add_subparsers(dest="plan_action", metavar="ACTION", required=True)
    uninstall = actions.add_parser(
        "uninstall",
        help="what `pip uninstall NAME...` would break",
        description="What `pip uninstall NAME...` would delete and break, and the sequence "
        "that makes it safe when one exists. TARGET, if given, is the last argument.",
    )
    uninstall.add_argument("items", nargs="+", metavar="NAME... [TARGET]")
    install = actions.add_parser(
        "install",
        help="what `pip install WHEEL|REQ...` would overwrite and break",
        description="What `pip install` of wheel files or requirements would overwrite and "
        "break. Requirements are resolved by the target's own pip (--dry-run --report) and "
        "their wheels' file lists read by HTTP range requests (the central directory, METADATA "
        "and RECORD, never the whole wheel), kept in the user cache. TARGET, if given, is the "
        "last argument.",
    )
    install.add_argument("items", nargs="+", metavar="WHEEL|REQ... [TARGET]")
    for parser in (uninstall, install):
        common.add_target_options(parser, positional=False)
        common.add_output_options(parser)
        common.add_library_option(parser)
    changes.add_installer_options(install, hooks=False)
    uninstall.set_defaults(func=run_uninstall)
    install.set_defaults(func=run_install)


def run_uninstall(args: argparse.Namespace) -> int:
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.whatif.plan import plan_uninstall

    names, target = common.items_and_target(args)
    plan = plan_uninstall(build_environment(target), RealDisk(), names, common.libraries(args))
    changes.write_plan(args, plan)
    return common.EXIT_FINDINGS if plan.verdict == "breaks" else common.EXIT_OK


def run_install(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.environment.wheel import read_wheel
    from libdoctor.whatif.plan import plan_install
    from libdoctor.whatif.resolve import resolve_requirements

    items, target = common.items_and_target(args, wheels=True)
    wheel_paths = [i for i in items if i.endswith(".whl") and os.path.isfile(i)]
    requirements = [i for i in items if i not in wheel_paths]
    wheels = [read_wheel(os.path.abspath(p)) for p in wheel_paths]
    notes: list[str] = []
    unknown: tuple[str, ...] = ()
    if requirements:
        resolved = resolve_requirements(
            target,
            requirements,
            options=changes.installer_options(args),
            cache_dir=changes.cache_dir(args),
            environ=os.environ,
            echo=sys.stderr.isatty() and not args.json,
            notify=changes.say,
        )
        wheels += resolved.wheels
        notes += resolved.notes
        unknown = resolved.unknown
    plan = plan_install(build_environment(target), RealDisk(), wheels, common.libraries(args))
    plan = replace(plan, notes=(*notes, *plan.notes), unknown=unknown)
    changes.write_plan(args, plan)
    return common.EXIT_OK if plan.verdict == "safe" else common.EXIT_FINDINGS
