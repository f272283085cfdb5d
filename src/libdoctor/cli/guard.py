"""``libdoctor guard install|remove|status|shell [TARGET]``: put libdoctor in front of an
environment's own ``pip`` and ``uv``, so that an install or uninstall that would break it is
stopped before it runs (the wrappers are ``repair.guard``'s; what they run, ``cli.intercept``).

Exit codes: 0 done (status: every wrapper in place); 1 status: not guarded, or a wrapper was
replaced or deleted since; 2 libdoctor could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from libdoctor.cli import changes, common
from libdoctor.report.text import text_lines

if TYPE_CHECKING:
    from libdoctor.repair.guard import GuardStatus


def register(sub: Any) -> None:
    guard = sub.add_parser(
        "guard",
        help="stop pip and uv before they break an environment",
        description="Put small pip, pip3, pip3.X and uv wrappers first in the environment's "
        "bin/ (the originals kept beside them): `pip install`, `pip uninstall`, `uv pip "
        "install` and `uv pip uninstall` aimed at it are planned by libdoctor first and "
        "refused when they would break it. LIBDOCTOR_GUARD=off, or --force on their command "
        "line, goes straight through; every other command goes through untouched.",
    )
    actions = guard.add_subparsers(dest="guard_action", metavar="ACTION", required=True)
    helps = {
        "install": "put the wrappers in place (again, for any a pip upgrade replaced)",
        "remove": "put the originals back: the environment as it was before",
        "status": "what is in place, and whether something replaced a wrapper",
        "shell": "print shell functions to eval instead (nothing is written)",
    }
    for name, text in helps.items():
        action = actions.add_parser(name, help=text, description=text)
        if name != "shell":
            common.add_target_options(action)
        action.add_argument("--json", action="store_true", help="machine-readable output")
        if name == "install":
            action.add_argument(
                "--eval", action="store_true", help="print shell functions instead (as shell)"
            )
        action.set_defaults(func=run)


def _libdoctor() -> tuple[str, str]:
    """The interpreter the wrappers start, and the directory that holds this libdoctor."""
    import libdoctor

    return sys.executable, os.path.dirname(os.path.dirname(os.path.abspath(libdoctor.__file__)))


def run(args: argparse.Namespace) -> int:
    from libdoctor.repair import guard

    python, source = _libdoctor()
    if args.guard_action == "shell" or getattr(args, "eval", False):
        common.write(guard.shell_functions(python, source, ("pip", "pip3", "uv")))
        return common.EXIT_OK
    target = common.discover_target(args)
    if args.guard_action == "status":
        return _status(args, guard.guard_status(target))
    changes.refuse_unwritable(target)
    if args.guard_action == "install":
        manifest = guard.install_guard(target, python, source)
        _say(args, {"guarded": [e.name for e in manifest.entries], "prefix": target.prefix})
        return common.EXIT_OK
    removal = guard.remove_guard(target)
    _say(
        args,
        {
            "prefix": target.prefix,
            "restored": list(removal.restored),
            "removed": list(removal.removed),
            "left": list(removal.left),
        },
    )
    return common.EXIT_OK


def _say(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    if args.json:
        common.write(json.dumps({"schema_version": 1, **doc}, indent=2) + "\n")
        return
    if "guarded" in doc:
        common.write(
            f"guarded {doc['prefix']}: {', '.join(doc['guarded'])} now plan before they install "
            "or uninstall (LIBDOCTOR_GUARD=off to bypass; `libdoctor guard remove` to undo)\n"
        )
        return
    lines = [f"guard removed from {doc['prefix']}"]
    if doc["restored"]:
        lines.append(f"  put back: {', '.join(doc['restored'])}")
    if doc["left"]:
        lines.append(
            f"  left as they are (replaced or deleted since the guard, by pip itself?): "
            f"{', '.join(doc['left'])}"
        )
    common.write(text_lines(lines))


def _status(args: argparse.Namespace, status: GuardStatus) -> int:
    manifest = status.manifest
    code = common.EXIT_OK if status.whole else common.EXIT_FINDINGS
    if args.json:
        doc = {
            "schema_version": 1,
            "guarded": manifest is not None,
            "whole": status.whole,
            "python": manifest.python if manifest else None,
            "entries": [{"name": n, "state": s} for n, s in status.states],
        }
        common.write(json.dumps(doc, indent=2) + "\n")
        return code
    if manifest is None:
        common.write("not guarded\n")
        return code
    lines = [f"guarded {manifest.prefix} (wrappers run {manifest.python})"]
    notes = {
        "wrapped": "wrapper in place",
        "replaced": "replaced since (a pip self-upgrade?): `libdoctor guard install` again",
        "missing": "gone since: `libdoctor guard install` again",
    }
    lines += [f"  {name}: {notes[state]}" for name, state in status.states]
    common.write(text_lines(lines))
    return code
