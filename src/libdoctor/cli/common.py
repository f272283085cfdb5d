"""What every subcommand shares: how one is declared, target and output options, exit codes,
colour, output."""

from __future__ import annotations

import argparse
import codecs
import functools
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from libdoctor.errors import LibdoctorError
from libdoctor.findings import CODES, Finding, Severity

if TYPE_CHECKING:
    from libdoctor.environment.target import Target
    from libdoctor.external.ospackages import SystemPackages
    from libdoctor.loader.extensions import LoaderContext

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2

Options = Callable[[argparse.ArgumentParser], None]
"""One step of a command's options: adds its arguments to the command's parser."""
Run = Callable[[argparse.Namespace], int]
"""What a command does with its parsed arguments: its exit code."""


@dataclass(frozen=True, slots=True)
class Command:
    """A subcommand, declared: its line in the parent's --help list (HELP), what heads its own
    --help (DESCRIPTION), its OPTIONS in the order --help lists them, and whether its
    positionals may follow options (INTERMIXED, see ``intermix``). Each command module holds
    one as ``COMMAND``, and ``run(args) -> int``, what it does. A command with ACTIONS
    (``plan uninstall``, ``guard status``) is their parent only: each action is run by the
    same ``run``, which reads the action from ``args.<command>_action``."""

    help: str
    description: str
    options: Sequence[Options] = ()
    intermixed: bool = False
    actions: Mapping[str, Command] = field(default_factory=dict)

    def add_to(self, sub: Any, name: str, run: Run) -> None:
        """Add this command as NAME to SUB (a parser's subparsers), run by RUN."""
        parser = sub.add_parser(name, help=self.help, description=self.description)
        for add in self.options:
            add(parser)
        if self.actions:
            actions = parser.add_subparsers(dest=f"{name}_action", metavar="ACTION", required=True)
            for action, command in self.actions.items():
                command.add_to(actions, action, run)
        else:
            parser.set_defaults(func=run)
        if self.intermixed:
            intermix(parser)


def argument(*flags: str, **how: Any) -> Options:
    """One argument as a step of a command's options (``add_argument(*FLAGS, **HOW)``)."""

    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(*flags, **how)

    return add


def defaults(**values: Any) -> Options:
    """Attributes the parsed arguments hold without an option that sets them."""

    def add(parser: argparse.ArgumentParser) -> None:
        parser.set_defaults(**values)

    return add


def using(add: Callable[..., None], **how: Any) -> Options:
    """The shared options ADD, with these keyword arguments, as a step of a command's
    options (``using(add_target_options, positional=False)``)."""
    return functools.partial(add, **how)


def codes(text: str) -> frozenset[str]:
    found = frozenset(c.strip() for c in text.split(",") if c.strip())
    unknown = sorted(found - set(CODES))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown code(s) {', '.join(unknown)}; known: {', '.join(CODES)}"
        )
    return found


def intermix(parser: argparse.ArgumentParser) -> None:
    """Positionals after options (`caches clear --stale triton ENV --json`, `probe numpy
    --python PY DIR`, `plan uninstall numpy --json ENV`): this parser reads its arguments as
    ``parse_intermixed_args`` does (plain argparse stops the positionals at the first
    option and refuses the rest)."""
    base = type(parser)

    class Intermixed(base):  # type: ignore[valid-type,misc]
        _inside = False

        def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
            if self._inside:
                return super().parse_known_args(args, namespace)
            self._inside = True
            try:
                return self.parse_known_intermixed_args(args, namespace)
            finally:
                self._inside = False

    parser.__class__ = Intermixed


def add_target_options(parser: argparse.ArgumentParser, *, positional: bool = True) -> None:
    if positional:
        parser.add_argument(
            "target",
            nargs="?",
            metavar="TARGET",
            help="a venv or prefix directory, or a site-packages directory (default: "
            "$VIRTUAL_ENV, else $CONDA_PREFIX, else the interpreter running libdoctor)",
        )
    parser.add_argument(
        "--root",
        dest="image_root",
        metavar="DIR",
        help="read TARGET inside the system mounted at DIR (an image, a chroot): its loader "
        "configuration and packages too; nothing of the host, and nothing from DIR runs "
        "(check, why and tree only)",
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="inspect the environment of this interpreter (run as `-I -S`: no site hooks); "
        "with TARGET, a folder made with `pip install --target`, the interpreter that uses it",
    )


class _FormatAction(argparse.Action):
    """``--format FORMAT``, and ``--json`` as ``--format json``: both keep ``args.json``."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        chosen = self.const if self.const is not None else str(values)
        namespace.format = chosen
        namespace.json = chosen == "json"


def add_output_options(parser: argparse.ArgumentParser, *, sarif: bool = False) -> None:
    """``--json``, ``--color``, ``--verbose``; with SARIF, ``--format {text,json,sarif}`` too
    (``--json`` its alias for json)."""
    parser.set_defaults(json=False, format="text")
    parser.add_argument(
        "--json", action=_FormatAction, nargs=0, const="json", help="machine-readable output"
    )
    if sarif:
        parser.add_argument(
            "--format",
            action=_FormatAction,
            choices=("text", "json", "sarif"),
            help="text (default), json (as --json), or sarif: SARIF 2.1.0 for code scanning",
        )
    add_text_options(parser)


# The formats of the commands that take --format (check, diff, fleet); text first, the default.
FORMATS = ("text", "json", "html")


def add_format_options(parser: argparse.ArgumentParser, formats: Sequence[str] = FORMATS) -> None:
    """``--format`` (``--json`` its alias), ``--html FILE``, ``--color``, ``-v``."""
    parser.add_argument(
        "--format", choices=formats, default="text", help="output format (default: text)"
    )
    parser.add_argument(
        "--json", dest="format", action="store_const", const="json", help="--format json"
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="also write the report to FILE as one self-contained HTML page",
    )
    add_text_options(parser)


def write_formats(args: argparse.Namespace, render: Mapping[str, Callable[[], str]]) -> None:
    """The report in ``--format`` (or ``--json``) on stdout, and with ``--html FILE`` its page
    in FILE; each rendered only when asked for."""
    if getattr(args, "html", None) is not None:
        try:
            with open(args.html, "w", encoding="utf-8") as out:
                out.write(render["html"]())
        except OSError as exc:
            raise LibdoctorError(f"--html {args.html}: {exc.strerror or exc}") from exc
    write(render[args.format]())


def add_text_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour in text output (auto: only on a terminal, never with NO_COLOR)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="list every path")


def add_system_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--deep",
        action="store_true",
        help="compare each system library's bytes with the md5 its dpkg package recorded",
    )


def system_packages(args: argparse.Namespace, target: Target) -> SystemPackages:
    """The package databases of the system TARGET lives in, that ``why`` and ``tree`` join
    libraries outside the environment to."""
    from libdoctor.external.ospackages import SystemPackages

    return SystemPackages(root=target.root, deep=args.deep)


Answer = TypeVar("Answer")


def ask_loader(
    args: argparse.Namespace,
    question: Callable[..., Answer],
    subject: str,
    *,
    text: Callable[[Answer], str],
    json: Callable[[Answer, dict[str, Any]], str],
    ok: Callable[[Answer], bool],
) -> int:
    """``why`` and ``tree``: QUESTION (``explain_library``, ``dependency_tree``) asked of the
    target's loader about SUBJECT, statically, with libraries outside the environment joined
    to the system's packages; the answer written as TEXT or JSON; exit 0 when it is OK."""
    from libdoctor.document import target_dict

    target = discover_target(args)
    packages = system_packages(args, target)
    answer = question(target, subject, os.environ, os.getcwd(), packages=packages)
    write_formats(
        args, {"text": lambda: text(answer), "json": lambda: json(answer, target_dict(target))}
    )
    return EXIT_OK if ok(answer) else EXIT_FINDINGS


def add_filter_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--select", type=codes, metavar="CODES", help="only these codes (comma-separated)"
    )
    parser.add_argument(
        "--ignore", type=codes, default=frozenset(), metavar="CODES", help="drop these codes"
    )
    parser.add_argument(
        "--fail-on",
        choices=("error", "warning", "info"),
        default="error",
        help="exit 1 when a finding at or above this severity is shown (default: error)",
    )
    parser.add_argument("--all", action="store_true", help="also show codes hidden by default")


def add_deep_options(parser: argparse.ArgumentParser, *, deep_help: str) -> None:
    """``--deep`` and its hash cache (``hash_cache_dir``)."""
    parser.add_argument("--deep", action="store_true", help=deep_help)
    parser.add_argument(
        "--cache-dir", metavar="DIR", help="cache location (default: user cache dir)"
    )
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")


def hash_cache_dir(args: argparse.Namespace) -> str | None:
    """The hash cache's directory, or None: only --deep hashes, so only it reads the cache."""
    return check_cache_dir(args) if args.deep else None


def check_cache_dir(args: argparse.Namespace) -> str | None:
    """``check``'s cache directory (the hash cache with --deep, parsed RECORDs always), or
    None with --no-cache."""
    if args.no_cache:
        return None
    from libdoctor.disk.hashing import default_cache_dir

    return str(args.cache_dir or default_cache_dir())


def add_library_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-libraries", action="store_true", help="skip the native library (loader) checks"
    )


def libraries(args: argparse.Namespace) -> LoaderContext | None:
    """The loader's inputs from libdoctor's own environment, unless --no-libraries."""
    if args.no_libraries:
        return None
    from libdoctor.analysis.run import loader_context

    return loader_context(os.environ, os.getcwd())


def split_target(items: Sequence[str], *, wheels: bool = False) -> tuple[list[str], str | None]:
    """NAME... [TARGET]: the last item is the target when it is an existing directory, or a
    path (has a '/') that is not a wheel file. Distribution names never contain '/'."""
    names = list(items)
    if len(names) >= 2:
        last = names[-1]
        is_wheel = wheels and last.endswith(".whl")
        if os.path.isdir(last) or (os.sep in last and not is_wheel):
            return names[:-1], last
    return names, None


def items_and_target(args: argparse.Namespace, *, wheels: bool = False) -> tuple[list[str], Target]:
    """For commands whose TARGET trails their NAME... items (argparse cannot tell them apart)."""
    items, args.target = split_target(args.items, wheels=wheels)
    return items, discover_target(args)


def use_color(args: argparse.Namespace) -> bool:
    if args.color == "always":
        return True
    if args.color == "never" or os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()


READ_ONLY_COMMANDS = ("check", "why", "tree")


def refuse_root(args: argparse.Namespace) -> None:
    """Only the commands that read and run nothing take ``--root``."""
    if getattr(args, "image_root", None) is not None and args.command not in READ_ONLY_COMMANDS:
        raise LibdoctorError(
            f"--root: {args.command} would run code from the root or change it; "
            f"only {', '.join(READ_ONLY_COMMANDS)} read an environment inside a root"
        )


def discover_target(args: argparse.Namespace) -> Target:
    """The environment TARGET, ``--python`` and ``--root`` name (see ``discover``); every
    check of the arguments comes before the disk is read."""
    from libdoctor.environment.target import discover, under_root

    refuse_root(args)
    root = getattr(args, "image_root", None)
    target = getattr(args, "target", None)
    if root is None:
        return discover(target, args.python, os.environ)
    if args.python is not None or target is None:
        raise LibdoctorError("--root needs TARGET (the path inside the root), not --python")
    return under_root(root, target)


def exit_code(findings: Sequence[Finding], fail_on: str) -> int:
    threshold = Severity.parse(fail_on)
    return EXIT_FINDINGS if any(f.severity >= threshold for f in findings) else EXIT_OK


def sarif_report(findings: Sequence[Finding], prefix: str, fallback: str | None = None) -> str:
    """FINDINGS as SARIF (``report.sarif.render``), imported only when chosen."""
    from libdoctor.report import sarif

    return sarif.render(findings, prefix, fallback=fallback)


def most_severe_first(findings: Sequence[Finding]) -> list[Finding]:
    """FINDINGS from errors down to infos, each severity in the order found."""
    order = {s: i for i, s in enumerate(sorted(Severity, reverse=True))}
    return sorted(findings, key=lambda f: order[f.severity])


# What the output's few non-ASCII marks become on a stream that cannot encode them
# (PYTHONIOENCODING=ascii, LANG=C with an old Python); anything else is backslash-escaped.
ASCII_FALLBACK = {
    "✗": "x",
    "✓": "+",
    "…": "...",
    "→": "->",
    "←": "<-",
    "—": "--",
    "\u2013": "-",  # en dash
    "·": "*",
}
_ERRORS = "libdoctor-ascii"


def ascii_fallback(exc: UnicodeError) -> tuple[str, int]:
    """A codec error handler: the ASCII stand-in of each character the stream cannot encode."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    text = exc.object[exc.start : exc.end]
    spelled = (
        ASCII_FALLBACK.get(c) or c.encode("ascii", "backslashreplace").decode() for c in text
    )
    return "".join(spelled), exc.end


def degrade_streams() -> None:
    """Let stdout and stderr write what their encoding cannot hold, degraded to ASCII,
    instead of failing with UnicodeEncodeError half-way through a report."""
    try:
        codecs.lookup_error(_ERRORS)
    except LookupError:
        codecs.register_error(_ERRORS, ascii_fallback)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        encoding = getattr(stream, "encoding", None) or "utf-8"
        if reconfigure is None or _can_encode(encoding, "".join(ASCII_FALLBACK)):
            continue
        reconfigure(errors=_ERRORS)


def _can_encode(encoding: str, text: str) -> bool:
    try:
        text.encode(encoding)
    except (UnicodeError, LookupError):
        return False
    return True


def write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


_KEPT: list[object] = []


def keep_until_exit(value: object) -> None:
    """Hold VALUE until the process ends: the CLI leaves with os._exit, and freeing a torch
    env's model and stats object by object (100k of them) would cost 12 ms for nothing."""
    _KEPT.append(value)
