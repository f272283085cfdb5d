"""A ``pip`` or ``uv`` command line as the user typed it -> what it asks of which environment.

The guard's wrappers read the command they stand in for: whether it installs or uninstalls
into the environment (``pip install``, ``pip uninstall``, ``uv pip install``, ``uv pip
uninstall``), what (wheel files, requirements, ``-r``/``-c`` files, names), with which index
options, and which interpreter it is aimed at. Anything else, or an install aimed elsewhere
(``--target``, ``--prefix``, ``--user``, ``--system``), or only pretended (``--dry-run``,
``--help``), is passed through untouched.

pip's command line is read as pip reads it (``pip_input``: its option tables through
``optparse``, so ``--req FILE``, ``-yr FILE`` and ``--requirement=FILE`` are all ``-r``; the
general options before the command, as pip's main parser splits them); uv's as clap reads it
(long options exact, ``-rFILE``, ``-r=FILE`` and clusters). What the tool would reject as a
usage error, the guard cannot vouch for: ``Invocation.unreadable`` says why.
``uninstall_asked`` then reads what an uninstall names: its words, its ``-r`` files and, for
pip, the ``requirement`` its configuration adds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from libdoctor.external.installers import InstallerOptions
from libdoctor.external.pip_input import (
    PIP_GENERAL,
    PIP_INSTALL,
    PIP_UNINSTALL,
    Asked,
    Option,
    Unreadable,
    pip_config_list,
    read_options,
    requirement_files,
    requirement_name,
)

__all__ = ["GUARD_FORCE", "Invocation", "read_invocation", "uninstall_asked"]

GUARD_FORCE = "--force"
"""The guard's own flag: go straight through to the real tool (removed from its argv)."""

# Options that take a value, as uv (global and pip install/uninstall) spells them.
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
# pip install options whose value names what to install (pip >= 25.1 reads --group).
_SOURCES = ("--group", "--requirements-from-script")
# Index options, as InstallerOptions passes them on.
_FIND_LINKS = ("-f", "--find-links")
_INDEX_URL = ("-i", "--index-url", "--default-index")
_EXTRA_INDEX = ("--extra-index-url", "--index")
# uv install options that mean the same to pip's resolve, spelled for it.
_UV_AS_PIP = {"-U": "-U", "--upgrade": "-U", "--no-deps": "--no-deps", "--pre": "--pre"}
_UV_REINSTALL = ("--reinstall", "--force-reinstall")
# pip options the resolve sets itself or must not repeat (it runs its own pip, reports to -).
_NOT_FOR_RESOLVE = frozenset({"--python", "--log", "--report"})


@dataclass(frozen=True, slots=True)
class Invocation:
    """What one command line asks. ``action`` None: pass it through untouched."""

    tool: Literal["pip", "uv"]
    action: Literal["install", "uninstall"] | None
    argv: tuple[str, ...]  # what to run: the arguments, without the guard's --force
    force: bool = False
    python: str | None = None  # the interpreter it is aimed at (--python, -p), if named
    wheels: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()  # the words: requirements, or an uninstall's names
    requirement_files: tuple[str, ...] = ()  # an uninstall's -r files, as given
    pip_args: tuple[str, ...] = ()  # for pip's resolve: -r/-c/-e, -U, --pre, ...
    options: InstallerOptions = field(default_factory=InstallerOptions)
    why: str = ""  # why it passes through
    unreadable: str | None = None  # why libdoctor cannot read it as the tool does
    isolated: bool = False  # pip --isolated: no PIP_* variables, no user configuration


def read_invocation(tool: Literal["pip", "uv"], args: Sequence[str]) -> Invocation:
    """What ``pip ARGS`` or ``uv ARGS`` asks for."""
    argv = tuple(a for a in args if a != GUARD_FORCE)
    force = len(argv) != len(args)
    read = _read_pip(argv) if tool == "pip" else _read_uv(argv)
    if isinstance(read, str):
        return Invocation(tool, None, argv, force, why=read)
    action, options, items = read
    if action is None:
        return Invocation(tool, None, argv, force, why="not an install or uninstall")
    if isinstance(options, Unreadable):
        return Invocation(tool, action, argv, force, unreadable=str(options))
    elsewhere = _elsewhere(options)
    if elsewhere:
        return Invocation(tool, None, argv, force, why=f"{elsewhere} given")
    python = next((o.value for o in reversed(options) if o.name in ("--python", "-p")), None)
    isolated = tool == "pip" and "--isolated" in argv
    if action == "uninstall":
        files = tuple(o.value for o in options if o.name in _REQUIREMENT and o.value)
        return Invocation(
            tool, "uninstall", argv, force, python, requirements=tuple(items),
            requirement_files=files, isolated=isolated,
        )  # fmt: skip
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
        isolated=isolated,
    )


_Read = tuple[Literal["install", "uninstall"] | None, list[Option] | Unreadable, list[str]]


def _read_pip(argv: Sequence[str]) -> _Read | str:
    """pip's two passes: the general options up to the command (a usage error there stops
    pip itself), then the command's options and words, the command's name taken out."""
    try:
        _, rest = read_options(argv, PIP_GENERAL, interspersed=False)
    except Unreadable as exc:
        return f"pip stops at its options: {exc}"
    if not rest or rest[0] not in ("install", "uninstall"):
        return None, [], []
    action: Literal["install", "uninstall"] = "install" if rest[0] == "install" else "uninstall"
    command = list(argv)
    command.remove(action)  # as pip does: its first occurrence, wherever that is
    table = PIP_GENERAL + (PIP_INSTALL if action == "install" else PIP_UNINSTALL)
    try:
        options, words = read_options(command, table)
    except Unreadable as exc:
        return action, Unreadable(f"pip cannot read its options: {exc}"), []
    return action, options, words


def _read_uv(argv: Sequence[str]) -> _Read:
    """``uv [OPTIONS] pip install|uninstall ...`` as clap reads it (no abbreviations)."""
    options, words = _split_uv(argv)
    if len(words) < 2 or words[0] != "pip" or words[1] not in ("install", "uninstall"):
        return None, [], []
    action: Literal["install", "uninstall"] = "install" if words[1] == "install" else "uninstall"
    return action, options, words[2:]


def _split_uv(args: Sequence[str]) -> tuple[list[Option], list[str]]:
    """Options (with their values: ``--x=v``, ``--x v``, ``-xv``, ``-x=v``, ``-qx v``) and
    positional words, in order."""
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
        elif arg.startswith("--"):
            name, equals, value = arg.partition("=")
            if equals:
                options.append(Option(name, value))
            else:
                options.append(Option(arg, rest.pop(0) if arg in _UV_VALUED and rest else None))
        else:
            options += _short_cluster(arg, rest)
    return options, words


def _short_cluster(arg: str, rest: list[str]) -> list[Option]:
    """``-qr FILE``: flags, until one that takes a value takes the rest of the word (an
    ``=`` before it dropped) or the next word."""
    out: list[Option] = []
    for index, char in enumerate(arg[1:], start=1):
        name = f"-{char}"
        if name in _UV_VALUED:
            tail = arg[index + 1 :].removeprefix("=")
            out.append(Option(name, tail if tail else (rest.pop(0) if rest else "")))
            return out
        out.append(Option(name, None))
    return out


def _elsewhere(options: Sequence[Option]) -> str | None:
    """The option that sends the command elsewhere (the last of --user/--no-user counts)."""
    user = False
    for option in options:
        if option.name in ("--user", "--no-user"):
            user = option.name == "--user"
        elif option.name in _ELSEWHERE:
            return option.name
    return "--user" if user else None


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
        elif tool == "pip" and name in _SOURCES and value is not None:
            pip_args += [name, value]
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


def config_requirements(
    invocation: Invocation, prefix: str, environ: Mapping[str, str]
) -> tuple[list[str], str | None]:
    """The ``-r`` files pip's configuration adds to this pip command run in PREFIX
    (``PIP_REQUIREMENT``, ``requirement =`` in a pip.conf), and why it cannot tell, if so."""
    if invocation.tool != "pip" or invocation.action is None:
        return [], None
    return pip_config_list(
        "requirement", invocation.action, prefix, environ, isolated=invocation.isolated
    )


_UV_PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "pylock.toml")


def uninstall_asked(
    invocation: Invocation, prefix: str, environ: Mapping[str, str], cwd: str
) -> list[Asked]:
    """Every requirement an uninstall names, as the tool reads it: its words, its ``-r``
    files (nested ones followed) and what pip's configuration adds; uv's reading where it
    differs (it matches an unnamed path or URL by where a distribution was installed from,
    and reads project files)."""
    added, why = config_requirements(invocation, prefix, environ)
    asked = [] if why is None else [Asked("pip's configuration", None, why)]
    files = [*added, *invocation.requirement_files]
    if invocation.tool == "uv":
        projects = [f for f in files if os.path.basename(f).lower() in _UV_PROJECT_FILES]
        asked += [Asked(f, None, "uv reads a project file: libdoctor does not") for f in projects]
        files = [f for f in files if f not in projects]
    asked += [requirement_name(word, cwd) for word in invocation.requirements]
    asked += requirement_files(files, environ, cwd)
    return [_as_uv(a) for a in asked] if invocation.tool == "uv" else asked


def _as_uv(asked: Asked) -> Asked:
    """uv uninstalls what was installed from an unnamed path or URL: the name pip would
    read from it is one it may mean."""
    looks_like_link = os.sep in asked.source or "://" in asked.source
    if asked.doubt is None and (asked.name is None or looks_like_link):
        doubt = "uv matches a path or URL by where a distribution was installed from"
        return Asked(asked.source, asked.name, doubt)
    return asked
