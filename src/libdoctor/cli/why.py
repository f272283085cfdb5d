"""``libdoctor why SONAME``: who needs a library, where the loader looks, what it finds."""

from __future__ import annotations

import argparse

from libdoctor.cli import common

COMMAND = common.Command(
    help="explain how a shared library is (not) found",
    description="Who needs SONAME, where the loader would look for it (in order), what it "
    "finds there and which distribution owns it. Static: nothing is loaded.",
    options=(
        common.argument("soname", metavar="SONAME", help="e.g. libcudnn.so.9"),
        common.add_target_options,
        common.add_output_options,
        common.add_system_options,
    ),
)


def run(args: argparse.Namespace) -> int:
    from libdoctor.analysis.why import explain_library
    from libdoctor.report.why import why_json, why_text

    return common.ask_loader(
        args, explain_library, args.soname, text=why_text, json=why_json, ok=lambda w: w.found
    )
