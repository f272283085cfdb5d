"""``libdoctor plan uninstall NAME... [TARGET]``, ``libdoctor plan install WHEEL|REQ... [TARGET]``.

Predictions only: the target is never written. Exit 0 when the change is safe, 1 when it
breaks something, 2 when libdoctor cannot tell.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from libdoctor.cli import changes, common
from libdoctor.cli import progress as bar
from libdoctor.cli.verify import add_sync_options, sync_options

if TYPE_CHECKING:
    from libdoctor.environment.target import Target
    from libdoctor.loader.extensions import LoaderContext
    from libdoctor.whatif.request import InstallRequest, PlannedInstall


def add_request_options(parser: argparse.ArgumentParser) -> None:
    """pip's ``-r`` and ``-c``: passed to the resolve and to the install as they are."""
    parser.add_argument(
        "-r", "--requirement", action="append", default=[], metavar="FILE", help="as pip's"
    )
    parser.add_argument(
        "-c", "--constraint", action="append", default=[], metavar="FILE", help="as pip's"
    )


_PREDICTED = (
    common.using(common.add_target_options, positional=False),
    common.using(common.add_output_options, sarif=True),
    common.add_library_option,
)

COMMAND = common.Command(
    help="predict what an uninstall or install would break, before it happens",
    description="Predict what `pip uninstall` or `pip install` would do to the environment: "
    "the files it deletes or overwrites, who else owns them, and what every check would "
    "report afterwards. Never writes to the target.",
    actions={
        "uninstall": common.Command(
            help="what `pip uninstall NAME...` would break",
            description="What `pip uninstall NAME...` would delete and break, and the sequence "
            "that makes it safe when one exists. TARGET, if given, is the last argument.",
            options=(common.argument("items", nargs="+", metavar="NAME... [TARGET]"), *_PREDICTED),
            intermixed=True,
        ),
        "install": common.Command(
            help="what `pip install WHEEL|REQ...` would overwrite and break",
            description="What `pip install` of wheel files or requirements would overwrite and "
            "break. Requirements are resolved by the target's own pip (--dry-run --report) and "
            "their wheels' file lists read by HTTP range requests (the central directory, "
            "METADATA and RECORD, never the whole wheel), kept in the user cache. TARGET, if "
            "given, is the last argument.",
            options=(
                common.argument("items", nargs="*", metavar="WHEEL|REQ... [TARGET]"),
                *_PREDICTED,
                common.using(changes.add_installer_options, hooks=False),
                add_request_options,
            ),
            intermixed=True,
        ),
        "lock": common.Command(
            help="what installing a lock file would do, before any environment exists",
            description="Plan a lock file (pylock.toml, uv.lock, or a requirements file of "
            "pins) for a Python and platform: the wheel the installer would choose for each "
            "package, read by HTTP range requests (file list and RECORD, never the body), then "
            "two wheels installing one path, CUDA wheels of another major than the framework's, "
            "and requirements the lock does not hold. Exit 0 clean, 1 findings, 2 cannot plan.",
            options=(
                common.argument(
                    "lock_files",
                    nargs="+",
                    metavar="FILE",
                    help="pylock.toml, uv.lock or requirements (several: text output, each in "
                    "turn)",
                ),
                common.argument(
                    "--python",
                    dest="plan_python",
                    metavar="X.Y[.Z]",
                    help="the CPython to plan for; X.Y is X.Y.0 for python_full_version "
                    "markers, as uv takes --python-version X.Y (default: the one running "
                    "libdoctor)",
                ),
                common.argument(
                    "--platform",
                    metavar="TAG",
                    help="a wheel platform tag (manylinux_2_28_x86_64, musllinux_1_2_aarch64, "
                    "macosx_14_0_arm64, win_amd64; default: this machine)",
                ),
                common.argument(
                    "--index-url",
                    metavar="URL",
                    help="where a requirements lock's pins are found (default: "
                    "$PIP_INDEX_URL, else https://pypi.org/simple)",
                ),
                common.argument(
                    "--offline",
                    action="store_true",
                    help="answer from the wheel-index cache only; name what it lacks",
                ),
                common.argument(
                    "--cache-dir",
                    metavar="DIR",
                    help="the wheel-index cache (default: user cache dir)",
                ),
                common.argument(
                    "--allow-include",
                    action="append",
                    default=[],
                    metavar="DIR",
                    help="a requirements lock's -r files may also come from DIR",
                ),
                add_sync_options,
                common.using(common.add_output_options, sarif=True),
            ),
        ),
    },
)


def run(args: argparse.Namespace) -> int:
    """The action's own run: ``run_uninstall``, ``run_install`` or ``run_lock``."""
    runs = {"uninstall": run_uninstall, "install": run_install, "lock": run_lock}
    return runs[args.plan_action](args)


def run_lock(args: argparse.Namespace) -> int:
    """Each FILE planned in turn (pre-commit passes every changed lock); the worst exit."""
    from libdoctor.errors import LibdoctorError

    if len(args.lock_files) > 1 and args.format != "text":
        raise LibdoctorError("--json and --format sarif plan one FILE at a time")
    return max(_run_one_lock(args, path) for path in args.lock_files)


def _run_one_lock(args: argparse.Namespace, path: str) -> int:
    from libdoctor.environment.tags import planned
    from libdoctor.external.index import PYPI
    from libdoctor.external.lockfile import package_lines
    from libdoctor.report import coinstall
    from libdoctor.whatif.lock import LockPlanOptions, plan_lock

    index = args.index_url or os.environ.get("PIP_INDEX_URL") or PYPI
    options = LockPlanOptions(
        cache_dir=changes.cache_dir(args), index_url=index, offline=args.offline,
        credentials=(index,),
    )  # fmt: skip
    platform = planned(args.plan_python, args.platform)
    plan = plan_lock(path, platform, options, sync_options(args), args.allow_include)
    findings = common.most_severe_first(plan.findings)
    color = common.use_color(args)
    common.write_formats(
        args,
        {
            "text": lambda: coinstall.render_text(
                plan, findings, color=color, verbose=args.verbose
            ),
            "json": lambda: coinstall.render_json(plan, findings),
            "sarif": lambda: coinstall.render_sarif(
                plan, findings, package_lines(plan.lock), os.getcwd()
            ),
        },
    )
    return common.exit_code(findings, "warning")


def run_uninstall(args: argparse.Namespace) -> int:
    from libdoctor.api import plan_uninstall

    names, target = common.items_and_target(args)
    plan = plan_uninstall(target, names, libraries=not args.no_libraries)
    changes.write_plan(args, plan)
    return common.EXIT_FINDINGS if plan.verdict == "breaks" else common.EXIT_OK


def run_install(args: argparse.Namespace) -> int:
    request, target = request_and_target(args)
    planned = resolve_request(args, request, target, common.libraries(args))
    changes.write_plan(args, planned.plan)
    return common.EXIT_OK if planned.plan.verdict == "safe" else common.EXIT_FINDINGS


def resolve_request(
    args: argparse.Namespace,
    request: InstallRequest,
    target: Target,
    libraries: LoaderContext | None,
) -> PlannedInstall:
    """REQUEST planned on TARGET with the command's installer options and cache: what
    ``plan install`` shows and ``install`` runs."""
    from libdoctor.whatif.request import plan_request

    return plan_request(
        target,
        request,
        options=changes.installer_options(args),
        cache_dir=changes.cache_dir(args),
        environ=os.environ,
        libraries=libraries,
        echo=sys.stderr.isatty() and args.format == "text",
        notify=changes.say,
        progress=functools.partial(
            bar.counter, bar.wanted(args) and not args.json, "reading wheel indexes", unit="wheels"
        ),
    )


def request_and_target(args: argparse.Namespace) -> tuple[InstallRequest, Target]:
    """WHEEL|REQ... [TARGET] with -r/-c: with -r, a lone directory (or path) is the target."""
    from libdoctor.errors import LibdoctorError

    items = list(args.items)
    if args.requirement and len(items) == 1 and common.split_target(["x", *items], wheels=True)[1]:
        args.target, items = items[0], []
        target = common.discover_target(args)
    else:
        items, target = common.items_and_target(args, wheels=True)
    if not items and not args.requirement:
        raise LibdoctorError("nothing to install: name a requirement, a wheel file or -r FILE")
    return install_request(items, args.requirement, args.constraint), target


def install_request(
    items: Sequence[str],
    requirement_files: Sequence[str] = (),
    constraint_files: Sequence[str] = (),
) -> InstallRequest:
    """ITEMS split into wheel files (read as they are) and requirements (for pip to resolve),
    with ``-r`` and ``-c`` files made absolute (the installer runs elsewhere)."""
    from libdoctor.whatif.request import InstallRequest

    wheels = [i for i in items if i.endswith(".whl") and os.path.isfile(i)]
    files = [("-r", os.path.abspath(f)) for f in requirement_files]
    files += [("-c", os.path.abspath(f)) for f in constraint_files]
    return InstallRequest(
        wheels=tuple(wheels),
        requirements=tuple(i for i in items if i not in wheels),
        pip_args=tuple(a for pair in files for a in pair),
    )
