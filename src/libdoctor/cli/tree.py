"""``libdoctor tree FILE|MODULE``: the resolved dependency tree, each library with its owner."""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING, Any

from libdoctor.cli import common
from libdoctor.environment.paths import display
from libdoctor.errors import LibdoctorError

if TYPE_CHECKING:
    from libdoctor.loader.extensions import LibraryAnalysis
    from libdoctor.loader.model import Closure, Resolution


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
    parser.set_defaults(func=run)


def find_root(analysis: LibraryAnalysis, text: str) -> str:
    from libdoctor.loader.extensions import is_python_extension

    if os.sep in text or os.path.exists(text):
        if not os.path.isfile(text):
            raise LibdoctorError(f"{text} is not a file")
        return os.path.abspath(text)
    parts = text.split(".")
    matches: list[str] = []
    for site in analysis.env.target.site_packages:
        directory = os.path.join(site, *parts[:-1])
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in sorted(names):
            if name.split(".", 1)[0] == parts[-1] and name.endswith(".so"):
                path = os.path.join(directory, name)
                if is_python_extension(path):
                    matches.append(path)
    if not matches:
        raise LibdoctorError(
            f"no extension module {text} in {', '.join(analysis.env.target.site_packages)}"
        )
    return matches[0]


def run(args: argparse.Namespace) -> int:
    from libdoctor.cli.libs import resolution_dict, run_analysis

    analysis, _ = run_analysis(args)
    env = analysis.env
    root = find_root(analysis, args.root)
    closure = analysis.loader.import_extension(analysis.process, root)
    if args.json:
        common.write(
            json.dumps(
                {
                    "schema_version": 1,
                    "root": display(root),
                    "root_error": closure.root_error,
                    "target": common.target_dict(env.target),
                    "libraries": [
                        resolution_dict(env, res)
                        for res in closure.resolutions
                        if res.kind == "needed"
                    ],
                },
                indent=2,
            )
            + "\n"
        )
    else:
        common.write("\n".join(render_tree(analysis, closure)) + "\n")
    return common.EXIT_OK if closure.ok else common.EXIT_FINDINGS


def render_tree(analysis: LibraryAnalysis, closure: Closure) -> list[str]:
    from libdoctor.cli.libs import owner_label, short, via_label

    env = analysis.env
    owner = owner_label(env, closure.root)
    lines = [short(env, closure.root) + (f"  [{owner}]" if owner else "")]
    if closure.root_error:
        lines.append(f"  cannot be loaded: {closure.root_error}")
        return lines
    children: dict[str | None, list[Resolution]] = {}
    for res in closure.resolutions:
        if res.kind == "needed":
            children.setdefault(res.requester, []).append(res)
    loaded_by = {obj.path: obj.loader for obj in closure.loaded}
    shown: set[str] = set()

    def walk(requester: str, indent: str) -> None:
        items = children.get(requester, [])
        for i, res in enumerate(items):
            last = i == len(items) - 1
            branch = "└── " if last else "├── "
            if res.status != "found":
                lines.append(f"{indent}{branch}{res.name}  NOT FOUND ({res.reason})")
                continue
            path = res.path or ""
            label = owner_label(env, path)
            how = via_label(env, res)
            expand = loaded_by.get(path) == requester and path not in shown
            note = "" if expand or res.via == "loaded" else "  (see above)"
            lines.append(
                f"{indent}{branch}{res.name} => {short(env, path)}"
                + (f"  [{how}]" if how else "")
                + (f"  ({label})" if label else "")
                + note
            )
            if expand:
                shown.add(path)
                walk(path, indent + ("    " if last else "│   "))

    walk(closure.root, "")
    return lines
