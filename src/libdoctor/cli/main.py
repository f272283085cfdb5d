"""The command line: parse arguments, dispatch to a command, map failures to exit 2.

Exit codes are chosen in one place (``cli.common``): 0 clean, 1 findings at or above
``--fail-on``, 2 libdoctor could not run (one line on stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import Any

from libdoctor.cli.common import EXIT_ERROR, degrade_streams
from libdoctor.errors import LibdoctorError
from libdoctor.version import __version__

# Subcommand modules under libdoctor.cli, in the order --help lists them: each declares its
# command as ``COMMAND`` (a ``common.Command``) and runs it with ``run(args) -> int``.
COMMANDS = (
    "check",
    "why",
    "tree",
    "probe",
    "plan",
    "fix",
    "uninstall",
    "install",
    "guard",
    "restore",
    "backups",
    "verify",
    "snapshot",
    "diff",
    "fleet",
    "caches",
    "completion",
)
# Commands whose words after ``--`` are passed through (``fleet --slurm -- -N 4``).
PASSTHROUGH = ("fleet",)


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, sized without importing shutil (2 ms on every run: argparse
    makes a formatter per add_argument just to check the metavar). Same width rule as
    shutil.get_terminal_size: $COLUMNS, else the terminal on stdout, else 80."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        if width is None:
            try:
                columns = int(os.environ.get("COLUMNS", ""))
            except ValueError:
                stdout = sys.__stdout__
                try:
                    columns = os.get_terminal_size(stdout.fileno()).columns if stdout else 80
                except (ValueError, OSError):  # closed, detached, not a terminal
                    columns = 80
            width = max(columns, 1) - 2
        super().__init__(prog, indent_increment, max_help_position, width)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:  # one line, exit 2, like every other failure
        raise LibdoctorError(f"{message} (see {self.prog} --help)")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ONLY, just that subcommand (what a normal run needs: cheaper)."""
    parser = _Parser(
        prog="libdoctor",
        description="The truth about a Python environment's files and native libraries.",
    )
    parser.add_argument("--version", action="version", version=f"libdoctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS if only is None else (only,):
        module = import_module(f"libdoctor.cli.{name}")
        module.COMMAND.add_to(sub, name, module.run)
    return parser


def console_main() -> None:
    """The console script: ``main()``, then leave without tearing down the heap.

    A check holds ~100k small objects; freeing them one by one at interpreter exit costs a
    tenth of the run. Output is flushed first, so nothing is lost.
    """
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        code = EXIT_ERROR
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    # A short-lived process that builds ~100k small acyclic objects (one per RECORD row):
    # the cyclic collector would only re-scan them, for a sixth of the run time.
    collecting = gc.isenabled()
    gc.disable()
    degrade_streams()
    try:
        words = list(sys.argv[1:] if argv is None else argv)
        command = words[0] if words and words[0] in COMMANDS else None
        rest: list[str] = []
        if command in PASSTHROUGH and "--" in words:
            words, rest = words[: words.index("--")], words[words.index("--") + 1 :]
        parser = build_parser(command)
        args = parser.parse_args(words)
        if rest:
            args.passthrough = rest
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return EXIT_ERROR
        code: int = args.func(args)
        return code
    except LibdoctorError as exc:
        from libdoctor.report.text import inert

        print(f"libdoctor: error: {inert(str(exc))}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("libdoctor: interrupted", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_ERROR
    finally:
        if collecting:
            gc.enable()
