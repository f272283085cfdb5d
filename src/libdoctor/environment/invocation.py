"""A ``pip`` or ``uv`` command line as the user typed it -> what it asks of which environment.

The guard's wrappers read the command they stand in for: whether it installs or uninstalls
into the environment (``pip install``, ``pip uninstall``, ``uv pip install``, ``uv pip
uninstall``), what (wheel files, requirements, ``-r``/``-c`` files, names), with which index
options, and which interpreter it is aimed at. Anything else, or an install aimed elsewhere
(``--target``, ``--prefix``, ``--user``, ``--system``), or only pretended (``--dry-run``,
``--help``), is passed through untouched. Pure: nothing here reads the environment except a
``-r`` file of an uninstall and whether a wheel argument is a file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from libdoctor.environment.installers import InstallerOptions

__all__ = ["GUARD_FORCE", "Invocation", "read_invocation"]

GUARD_FORCE = "--force"
"""The guard's own flag: go straight through to the real tool (removed from its argv)."""

# Options that take a value, as pip (global and install/uninstall) and uv spell them.
_PIP_VALUED = frozenset(
    {
        "--python",
        "--log",
        "--log-file",
        "--local-log",
        "--proxy",
        "--retries",
        "--timeout",
        "--exists-action",
        "--trusted-host",
        "--cert",
        "--client-cert",
        "--cache-dir",
        "--use-feature",
        "--use-deprecated",
        "--keyring-provider",
        "--resume-retries",
        "-r",
        "--requirement",
        "-c",
        "--constraint",
        "-e",
        "--editable",
        "-t",
        "--target",
        "--platform",
        "--python-version",
        "--implementation",
        "--abi",
        "--root",
        "--prefix",
        "--src",
        "--upgrade-strategy",
        "-C",
        "--config-settings",
        "--global-option",
        "--no-binary",
        "--only-binary",
        "--progress-bar",
        "--root-user-action",
        "--report",
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "--group",
        "--build-constraint",
    }
)
_UV_VALUED = frozenset(
    {
        "-r",
        "--requirement",
        "--requirements",
        "-e",
        "--editable",
        "--no-editable-package",
        "-c",
        "--constraint",
        "--constraints",
        "--overrides",
        "--override",
        "--excludes",
        "-b",
        "--build-constraint",
        "--build-constraints",
        "--extra",
        "--cert",
        "--group",
        "-t",
        "--target",
        "--prefix",
        "--no-binary",
        "--only-binary",
        "--python-version",
        "--python-platform",
        "--output-format",
        "--torch-backend",
        "--index",
        "--default-index",
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "--index-strategy",
        "--keyring-provider",
        "-P",
        "--upgrade-package",
        "--upgrade-group",
        "--resolution",
        "--prerelease",
        "--prerelease-package",
        "--fork-strategy",
        "--exclude-newer",
        "--exclude-newer-package",
        "--no-sources-package",
        "--reinstall-package",
        "--link-mode",
        "-C",
        "--config-setting",
        "--config-settings-package",
        "--no-build-isolation-package",
        "--cache-dir",
        "--refresh-package",
        "-p",
        "--python",
        "--color",
        "--allow-insecure-host",
        "--directory",
        "--project",
        "--config-file",
    }
)
# An install that does not go into the environment the command names, or only pretends.
_ELSEWHERE = frozenset(
    {"-t", "--target", "--prefix", "--root", "--user", "--system", "--dry-run", "-h", "--help"}
)
_REQUIREMENT = ("-r", "--requirement", "--requirements")
_CONSTRAINT = ("-c", "--constraint", "--constraints")
_EDITABLE = ("-e", "--editable")
# Index options, as InstallerOptions passes them on.
_FIND_LINKS = ("-f", "--find-links")
_INDEX_URL = ("-i", "--index-url", "--default-index")
_EXTRA_INDEX = ("--extra-index-url", "--index")
# uv install options that mean the same to pip's resolve, spelled for it.
_UV_AS_PIP = {"-U": "-U", "--upgrade": "-U", "--no-deps": "--no-deps", "--pre": "--pre"}
_UV_REINSTALL = ("--reinstall", "--force-reinstall")
# pip options the resolve sets itself or must not repeat (it runs its own pip, reports to -).
_NOT_FOR_RESOLVE = frozenset({"--python", "--log", "--log-file", "--local-log", "--report"})


@dataclass(frozen=True, slots=True)
class Option:
    name: str  # "--index-url", "-r"
    value: str | None  # None for a flag


@dataclass(frozen=True, slots=True)
class Invocation:
    """What one command line asks. ``action`` None: pass it through untouched."""

    tool: Literal["pip", "uv"]
    action: Literal["install", "uninstall"] | None
    argv: tuple[str, ...]  # what to run: the arguments, without the guard's --force
    force: bool = False
    python: str | None = None  # the interpreter it is aimed at (--python, -p), if named
    wheels: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()  # and for an uninstall, the names
    pip_args: tuple[str, ...] = ()  # for pip's resolve: -r/-c/-e, -U, --pre, ...
    options: InstallerOptions = field(default_factory=InstallerOptions)
    why: str = ""  # why it passes through


def _split(args: Sequence[str], valued: frozenset[str]) -> tuple[list[Option], list[str]]:
    """Options (with their values, joined or not) and positional words, in order."""
    options: list[Option] = []
    words: list[str] = []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            words += rest
            break
        if not arg.startswith("-") or arg == "-":
            words.append(arg)
        elif arg.startswith("--") and "=" in arg:
            name, _, value = arg.partition("=")
            options.append(Option(name, value))
        elif arg in valued:
            options.append(Option(arg, rest.pop(0) if rest else ""))
        elif not arg.startswith("--") and arg[:2] in valued and len(arg) > 2:
            options.append(Option(arg[:2], arg[2:]))
        else:
            options.append(Option(arg, None))
    return options, words


def _subcommand(
    args: Sequence[str], valued: frozenset[str], words: int
) -> tuple[list[str], list[str], list[str]]:
    """The options before the first WORDS positional words, those words, and the rest."""
    before: list[str] = []
    found: list[str] = []
    index = 0
    while index < len(args) and len(found) < words:
        arg = args[index]
        if not arg.startswith("-"):
            found.append(arg)
        else:
            before.append(arg)
            if arg in valued and index + 1 < len(args):
                index += 1
                before.append(args[index])
        index += 1
    return before, found, list(args[index:])


def read_invocation(tool: Literal["pip", "uv"], args: Sequence[str]) -> Invocation:
    """What ``pip ARGS`` or ``uv ARGS`` asks for."""
    argv = tuple(a for a in args if a != GUARD_FORCE)
    force = len(argv) != len(args)
    valued = _PIP_VALUED if tool == "pip" else _UV_VALUED
    before, words, after = _subcommand(argv, valued, 1 if tool == "pip" else 2)
    action = words[-1] if words and (tool == "pip" or words[0] == "pip") else None
    if action not in ("install", "uninstall"):
        return Invocation(tool, None, argv, force, why="not an install or uninstall")
    options, items = _split([*before, *after], valued)
    elsewhere = [o.name for o in options if o.name in _ELSEWHERE]
    if elsewhere:
        return Invocation(tool, None, argv, force, why=f"{elsewhere[0]} given")
    python = next((o.value for o in options if o.name in ("--python", "-p")), None)
    if action == "uninstall":
        names = [*items, *_names_in(o.value for o in options if o.name in _REQUIREMENT)]
        return Invocation(tool, "uninstall", argv, force, python, requirements=tuple(names))
    wheels = tuple(i for i in items if i.endswith(".whl") and os.path.isfile(i))
    pip_args, index = _resolve_args(tool, options)
    return Invocation(
        tool,
        "install",
        argv,
        force,
        python,
        wheels=wheels,
        requirements=tuple(i for i in items if i not in wheels),
        pip_args=pip_args,
        options=index,
    )


def _resolve_args(tool: str, options: Sequence[Option]) -> tuple[tuple[str, ...], InstallerOptions]:
    """The options pip's dry-run resolve needs, and the index options apart."""
    pip_args: list[str] = []
    find_links: list[str] = []
    extra: list[str] = []
    index_url: str | None = None
    no_index = False
    for option in options:
        name, value = option.name, option.value
        if name in _FIND_LINKS and value is not None:
            find_links.append(os.path.abspath(value) if os.path.exists(value) else value)
        elif name in _INDEX_URL and value is not None:
            index_url = value
        elif name in _EXTRA_INDEX and value is not None:
            extra.append(value)
        elif name == "--no-index":
            no_index = True
        elif name in _REQUIREMENT + _CONSTRAINT + _EDITABLE and value is not None:
            flag = "-r" if name in _REQUIREMENT else "-c" if name in _CONSTRAINT else "-e"
            pip_args += [flag, os.path.abspath(value) if os.path.exists(value) else value]
        elif tool == "pip" and name not in _NOT_FOR_RESOLVE:
            pip_args += [name] if value is None else [f"{name}={value}"]
        elif tool == "uv" and name in _UV_AS_PIP:
            pip_args.append(_UV_AS_PIP[name])
        elif tool == "uv" and name in _UV_REINSTALL:
            pip_args.append("--force-reinstall")
        elif tool == "uv" and name == "--prerelease" and value == "allow":
            pip_args.append("--pre")
    options_value = InstallerOptions(tuple(find_links), index_url, tuple(extra), no_index)
    return tuple(pip_args), options_value


_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _names_in(files: Iterable[str | None]) -> list[str]:
    """The distribution names an uninstall's ``-r FILE`` lists (options and comments skipped)."""
    names: list[str] = []
    for path in files:
        if not path:
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue
        for line in lines:
            text = line.split("#", 1)[0].strip()
            match = _NAME.match(text)
            if match and not text.startswith("-"):
                names.append(match.group(1))
    return names
