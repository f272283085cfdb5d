"""``libdoctor why SONAME``: who needs a library, where the loader looks, what it finds."""

from __future__ import annotations

import argparse
import os
from typing import Any

from libdoctor.cli import common


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "why",
        help="explain how a shared library is (not) found",
        description="Who needs SONAME, where the loader would look for it (in order), what it "
        "finds there and which distribution owns it. Static: nothing is loaded.",
    )
    parser.add_argument("soname", metavar="SONAME", help="e.g. libcudnn.so.9")
    common.add_target_options(parser)
    common.add_output_options(parser)
    common.add_system_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from libdoctor.analysis.why import explain_library
    from libdoctor.report.json import target_dict
    from libdoctor.report.why import why_json, why_text

    target = common.discover_target(args)
    packages = common.system_packages(args, target)
    why = explain_library(target, args.soname, os.environ, os.getcwd(), packages=packages)
    if args.json:
        common.write(why_json(why, target_dict(target)))
    else:
        common.write(why_text(why))
    return common.EXIT_OK if why.found else common.EXIT_FINDINGS
