"""``libdoctor guard install|remove|status|shell [TARGET]``: put libdoctor in front of an
environment's own ``pip`` and ``uv``, so that an install or uninstall that would break it is
stopped before it runs (the wrappers are ``repair.guard``'s; what they run, ``cli.intercept``).

Exit codes: 0 done (status: every wrapper in place); 1 status: not guarded, or a wrapper was
replaced or deleted since; 2 libdoctor could not run.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from libdoctor.cli import common
from libdoctor.document import dumps, envelope
from libdoctor.errors import LibdoctorError
from libdoctor.findings import printable
from libdoctor.report.text import text_lines

if TYPE_CHECKING:
    from libdoctor.repair.guard import GuardStatus


_AS_JSON = common.argument("--json", action="store_true", help="machine-readable output")


def _action(text: str, *options: common.Options) -> common.Command:
    """An action of ``guard``: TEXT is both its help line and its description."""
    return common.Command(help=text, description=text, options=options)


COMMAND = common.Command(
    help="stop pip and uv before they break an environment",
    description="Put small pip, pip3, pip3.X and uv wrappers first in the environment's "
    "bin/ (the originals kept beside them): `pip install`, `pip uninstall`, `uv pip "
    "install` and `uv pip uninstall` aimed at it are planned by libdoctor first and "
    "refused when they would break it. LIBDOCTOR_GUARD=off, or --force on their command "
    "line, goes straight through; every other command goes through untouched.",
    actions={
        "install": _action(
            "put the wrappers in place (again, for any a pip upgrade replaced)",
            common.add_target_options,
            _AS_JSON,
            common.argument(
                "--eval", action="store_true", help="print shell functions instead (as shell)"
            ),
        ),
        "remove": _action(
            "put the originals back: the environment as it was before",
            common.add_target_options,
            _AS_JSON,
        ),
        "status": _action(
            "what is in place, and whether something replaced a wrapper",
            common.add_target_options,
            _AS_JSON,
        ),
        "shell": _action("print shell functions to eval instead (nothing is written)", _AS_JSON),
    },
)


def _libdoctor() -> tuple[str, str]:
    """The interpreter the wrappers start, and the directory that holds this libdoctor."""
    import libdoctor

    return sys.executable, os.path.dirname(os.path.dirname(os.path.abspath(libdoctor.__file__)))


def run(args: argparse.Namespace) -> int:
    from libdoctor.repair import guard
    from libdoctor.repair.scope import refuse_unwritable

    python, source = _libdoctor()
    if args.guard_action == "shell" or getattr(args, "eval", False):
        common.write(guard.shell_functions(python, source, ("pip", "pip3", "uv")))
        return common.EXIT_OK
    target = common.discover_target(args)
    try:
        if args.guard_action == "status":
            return _status(args, guard.guard_status(target))
        refuse_unwritable(target)
        if args.guard_action == "install":
            manifest = guard.install_guard(target, python, source)
            _say(args, {"guarded": [e.name for e in manifest.entries], "prefix": target.prefix})
            return common.EXIT_OK
        removal = guard.remove_guard(target)
    except OSError as exc:  # what it did so far, the next install or remove finishes
        where = f"{_shown(os.fsdecode(exc.filename))}: " if exc.filename else ""
        raise LibdoctorError(
            f"guard {args.guard_action}: {where}{exc.strerror or exc} (run it again once "
            "that is fixed: it finishes what this one started)"
        ) from None
    _say(
        args,
        {
            "prefix": target.prefix,
            "restored": list(removal.restored),
            "removed": list(removal.removed),
            "left": list(removal.left),
            "stray": [printable(n) for n in removal.stray],
        },
    )
    return common.EXIT_OK


def _shown(text: str) -> str:
    """TEXT on one line: a path's control characters (a newline, ESC) and undecodable bytes
    as backslash escapes."""
    text = printable(text)
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _say(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    if args.json:
        doc = {**doc, "prefix": printable(doc["prefix"])}
        common.write(dumps(envelope(doc)))
        return
    prefix = _shown(doc["prefix"])
    if "guarded" in doc:
        common.write(
            f"guarded {prefix}: {', '.join(doc['guarded'])} now plan before they install "
            "or uninstall (LIBDOCTOR_GUARD=off to bypass; `libdoctor guard remove` to undo)\n"
        )
        return
    lines = [f"guard removed from {prefix}"]
    if doc["restored"]:
        lines.append(f"  put back: {', '.join(doc['restored'])}")
    if doc["left"]:
        lines.append(
            f"  left as they are (replaced or deleted since the guard, by pip itself?): "
            f"{', '.join(doc['left'])}"
        )
    if doc["stray"]:
        from libdoctor.repair.guard import GUARD_DIR

        names = ", ".join(_shown(n) for n in doc["stray"])
        lines.append(f"  left in bin/{GUARD_DIR} (not the guard's files): {names}")
    common.write(text_lines(lines))


_NOTES = {
    "wrapped": "wrapper in place",
    "original": "the original in place, not wrapped: `libdoctor guard install` wraps it, "
    "`libdoctor guard remove` finishes removing the guard",
    "replaced": "replaced since (a pip self-upgrade?): `libdoctor guard install` again",
    "missing": "gone since: `libdoctor guard install` again",
}
_KEPT = "gone since, its original kept: `libdoctor guard remove` puts it back"


def _status(args: argparse.Namespace, status: GuardStatus) -> int:
    manifest = status.manifest
    code = common.EXIT_OK if status.whole else common.EXIT_FINDINGS
    if args.json:
        doc = envelope(
            {
                "guarded": manifest is not None,
                "whole": status.whole,
                "interrupted": status.orphan,
                "python": printable(manifest.python) if manifest else None,
                "entries": [
                    {"name": n, "state": s, "original_kept": n in status.kept}
                    for n, s in status.states
                ],
            }
        )
        common.write(dumps(doc))
        return code
    if manifest is None:
        common.write(
            "not guarded, but bin/.libdoctor-guard is left by an interrupted guard install or "
            "remove: `libdoctor guard remove` clears it\n"
            if status.orphan
            else "not guarded\n"
        )
        return code
    lines = [f"guarded {_shown(manifest.prefix)} (wrappers run {_shown(manifest.python)})"]
    for name, state in status.states:
        kept = state == "missing" and name in status.kept
        lines.append(f"  {name}: {_KEPT if kept else _NOTES[state]}")
    common.write(text_lines(lines))
    return code
