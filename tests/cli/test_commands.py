"""The command line's surface, pinned: every subcommand (nested ones too), each with its line
in the parent's list and a description of its own, each run by its module's ``run``."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from importlib import import_module

from libdoctor.cli.main import COMMANDS, build_parser

EXPECTED = {
    "check",
    "why",
    "tree",
    "probe",
    "plan",
    "plan uninstall",
    "plan install",
    "plan lock",
    "fix",
    "uninstall",
    "install",
    "guard",
    "guard install",
    "guard remove",
    "guard status",
    "guard shell",
    "restore",
    "backups",
    "verify",
    "snapshot",
    "diff",
    "fleet",
    "caches",
    "completion",
}


def subcommands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], str | None, argparse.ArgumentParser]]:
    """(path, its help line in the parent's list, its parser) for every command below PARSER."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            lines = {choice.dest: choice.help for choice in action._choices_actions}
            for name, child in action.choices.items():
                yield (*path, name), lines.get(name), child
                yield from subcommands(child, (*path, name))


def test_the_subcommands_are_these() -> None:
    found = [" ".join(path) for path, _, _ in subcommands(build_parser())]
    assert set(found) == EXPECTED
    assert len(found) == len(EXPECTED)
    assert [p for p in found if " " not in p] == list(COMMANDS)  # --help lists them so


def test_every_subcommand_has_a_help_line_and_a_description() -> None:
    for path, line, parser in subcommands(build_parser()):
        assert line, path
        assert parser.description, path


def test_every_subcommand_runs_its_modules_run() -> None:
    for path, _, parser in subcommands(build_parser()):
        has_actions = any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
        run = parser.get_default("func")
        if has_actions:
            assert run is None, path
        else:
            assert run is import_module(f"libdoctor.cli.{path[0]}").run, path


def test_one_command_alone_is_built_as_in_the_whole_parser() -> None:
    """A run builds only its own command (``build_parser(ONLY)``): the same parser."""
    whole = {path: parser for path, _, parser in subcommands(build_parser())}
    for name in COMMANDS:
        for path, _, parser in subcommands(build_parser(name)):
            assert parser.format_help() == whole[path].format_help(), path
