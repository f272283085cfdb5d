"""The command line: parse arguments, run, render, choose the exit code. The only printer."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from libdoctor import __version__
from libdoctor.errors import LibdoctorError
from libdoctor.findings import CODES, Finding, Severity

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, like every other failure
        raise LibdoctorError(f"{message} (see libdoctor {self.prog.split()[-1]} --help)")


def _codes(text: str) -> frozenset[str]:
    codes = frozenset(c.strip() for c in text.split(",") if c.strip())
    unknown = sorted(codes - set(CODES))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown code(s) {', '.join(unknown)}; known: {', '.join(CODES)}"
        )
    return codes


def _add_target_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        nargs="?",
        metavar="TARGET",
        help="a venv or prefix directory, or a site-packages directory "
        "(default: $VIRTUAL_ENV, else $CONDA_PREFIX, else the interpreter running libdoctor)",
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="inspect the environment of this interpreter (run as `-I -S`: no site hooks)",
    )


def _add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour in text output (auto: only on a terminal, never with NO_COLOR)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="list every path")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="libdoctor",
        description="The truth about a Python environment's files and native libraries.",
    )
    parser.add_argument("--version", action="version", version=f"libdoctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    check = sub.add_parser(
        "check",
        help="check every installed distribution against the disk",
        description="Check every installed distribution's files against the disk. "
        "Reads only; never imports or runs code from the target.",
    )
    _add_target_options(check)
    _add_output_options(check)
    check.add_argument("--deep", action="store_true", help="also compare file hashes (parallel)")
    check.add_argument(
        "--select", type=_codes, metavar="CODES", help="only these codes (comma-separated)"
    )
    check.add_argument(
        "--ignore", type=_codes, default=frozenset(), metavar="CODES", help="drop these codes"
    )
    check.add_argument(
        "--fail-on",
        choices=("error", "warning", "info"),
        default="error",
        help="exit 1 when a finding at or above this severity is shown (default: error)",
    )
    check.add_argument("--all", action="store_true", help="also show codes hidden by default")
    check.add_argument(
        "--cache-dir", metavar="DIR", help="hash cache location (default: user cache)"
    )
    check.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the hash cache"
    )
    check.add_argument("--workers", type=int, metavar="N", help="hashing threads (default: cores)")
    check.set_defaults(func=_cmd_check)
    return parser


def _use_color(args: argparse.Namespace) -> bool:
    if args.color == "always":
        return True
    if args.color == "never" or os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()


def _progress_factory(enabled: bool) -> Callable[[int, int], Callable[[int], None]] | None:
    if not enabled:
        return None

    def start(files: int, total: int) -> Callable[[int], None]:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        progress = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        task = progress.add_task(f"hashing {files:,} files", total=total)
        progress.start()
        done = [0]

        def tick(nbytes: int) -> None:
            done[0] += nbytes
            progress.update(task, completed=done[0])
            if done[0] >= total:
                progress.stop()

        if total == 0:
            progress.stop()
        return tick

    return start


def _target_dict(target: Any) -> dict[str, Any]:
    return {
        "prefix": target.prefix,
        "python": target.python,
        "site_packages": list(target.site_packages),
        "chosen_by": target.chosen_by,
    }


def _exit_code(findings: Sequence[Finding], fail_on: str) -> int:
    threshold = Severity.parse(fail_on)
    return EXIT_FINDINGS if any(f.severity >= threshold for f in findings) else EXIT_OK


def _cmd_check(args: argparse.Namespace) -> int:
    from libdoctor.analysis import CheckOptions, filter_findings, run_check
    from libdoctor.hashing import default_cache_dir
    from libdoctor.target import discover

    target = discover(args.target, args.python, os.environ)
    cache_dir = None if args.no_cache else (args.cache_dir or default_cache_dir())
    options = CheckOptions(deep=args.deep, cache_dir=cache_dir, workers=args.workers)
    progress = _progress_factory(args.deep and sys.stderr.isatty() and not args.json)
    report = run_check(target, options, progress=progress)
    shown = filter_findings(report.findings, args.select, args.ignore, args.all)
    summary = {"distributions": report.distributions, "files": report.files}
    if args.json:
        from libdoctor.report import json_report

        tool_extra = {"hashing": report.hashing} if report.hashing is not None else None
        sys.stdout.write(
            json_report.render(
                target=_target_dict(target), summary=summary, findings=shown, tool_extra=tool_extra
            )
        )
    else:
        from libdoctor.paths import display
        from libdoctor.report import text_report

        header = f"libdoctor {__version__}: {display(target.prefix)} (chosen by {target.chosen_by})"
        if report.hashing is not None:
            h = report.hashing
            header += (
                f"\nhashed {h['files_hashed']:,} files ({h['bytes_hashed'] / 1e9:.2f} GB), "
                f"{h['cache_hits']:,} from cache"
            )
        sys.stdout.write(
            text_report.render(
                header=header,
                summary=summary,
                findings=shown,
                color=_use_color(args),
                verbose=args.verbose,
            )
        )
    return _exit_code(shown, args.fail_on)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return EXIT_ERROR
        code: int = args.func(args)
        return code
    except LibdoctorError as exc:
        print(f"libdoctor: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("libdoctor: interrupted", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_ERROR
