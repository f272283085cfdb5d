"""``libdoctor tree FILE|MODULE``: the resolved dependency tree, each library with its owner."""

from __future__ import annotations

import argparse

from libdoctor.cli import common

COMMAND = common.Command(
    help="show the resolved dependency tree of a file or extension module",
    description="The libraries FILE (or extension MODULE, e.g. torch._C) would load when "
    "Python imports it, as a tree with how each was found and who owns it. Static.",
    options=(
        common.argument("root", metavar="FILE|MODULE"),
        common.add_target_options,
        common.add_output_options,
        common.add_system_options,
    ),
)


def run(args: argparse.Namespace) -> int:
    from libdoctor.analysis.tree import dependency_tree
    from libdoctor.report.tree import tree_json, tree_text

    return common.ask_loader(
        args, dependency_tree, args.root, text=tree_text, json=tree_json, ok=lambda t: t.ok
    )
