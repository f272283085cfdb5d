"""``libdoctor tree FILE|MODULE``: the resolved dependency tree, each library with its owner."""

from __future__ import annotations

import argparse
import os
from typing import Any

from libdoctor.cli import common


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "tree",
        help="show the resolved dependency tree of a file or extension module",
        description="The libraries FILE (or extension MODULE, e.g. torch._C) would load when "
        "Python imports it, as a tree with how each was found and who owns it. Static.",
    )
    parser.add_argument("root", metavar="FILE|MODULE")
    common.add_target_options(parser)
    common.add_output_options(parser)
    common.add_system_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from libdoctor.analysis.tree import dependency_tree
    from libdoctor.report.json import target_dict
    from libdoctor.report.tree import tree_json, tree_text

    target = common.discover_target(args)
    packages = common.system_packages(args, target)
    tree = dependency_tree(target, args.root, os.environ, os.getcwd(), packages=packages)
    if args.json:
        common.write(tree_json(tree, target_dict(target)))
    else:
        common.write(tree_text(tree))
    return common.EXIT_OK if tree.ok else common.EXIT_FINDINGS
