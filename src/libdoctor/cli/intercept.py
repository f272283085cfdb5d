"""Where the guard's wrappers land: ``pip ARGS`` or ``uv ARGS`` -> plan -> ``exec`` the real
tool with the same argv, or refuse (exit 1, why on stderr).

``main([TOOL, REAL, PREFIX, *ARGS])``: TOOL is ``pip`` or ``uv``; REAL the real tool (a path,
or a name found on PATH); PREFIX the guarded environment (empty for the shell functions of
``guard shell``: then whatever environment the command is aimed at). Only an install or
uninstall aimed at PREFIX is planned; anything else, and ``--force`` (removed from the argv),
go straight through. A plan that proves a break stops the command, and so does one libdoctor
cannot make: a command line the tool would read otherwise than libdoctor can, a requirements
file it cannot read (over the network, a FIFO), a distribution it cannot plan the removal
of, a requirement pip cannot resolve. An uninstall is planned for every distribution it
names, however spelled (``idna==3.20``, ``idna[x]``, ``-r FILE``, next to names that are not
installed, which pip skips). Only a bug of libdoctor's own lets the command through
unplanned, and it says so. An install pip would build from source cannot be predicted, and
passes with a note. stdout stays the tool's.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, NoReturn

from libdoctor.errors import LibdoctorError
from libdoctor.external.invocation import Invocation, read_invocation

if TYPE_CHECKING:
    from libdoctor.environment.model import Environment
    from libdoctor.environment.target import Target
    from libdoctor.external.pip_input import Asked
    from libdoctor.loader.extensions import LoaderContext
    from libdoctor.whatif.plan import Plan


def say(text: str) -> None:
    from libdoctor.report.text import inert

    print(f"libdoctor guard: {inert(text)}", file=sys.stderr, flush=True)


class _Refused(Exception):
    """The command must not run: WHY, in one line, or after the plan that shows it (with
    the safe way to do it, if there is one)."""

    def __init__(self, why: str, plan: Plan | None = None, safely: str = "") -> None:
        super().__init__(why)
        self.why, self.plan, self.safely = why, plan, safely


def main(argv: Sequence[str]) -> NoReturn:
    from libdoctor.cli.common import degrade_streams

    degrade_streams()
    tool_arg, real, prefix, *args = argv
    tool: Literal["pip", "uv"] = "uv" if tool_arg == "uv" else "pip"
    real = real if os.sep in real else (shutil.which(real) or real)
    invocation = read_invocation(tool, args)
    if invocation.action is not None and not invocation.force:
        bypass = f"LIBDOCTOR_GUARD=off {tool} ..., or add --force"
        try:
            _check(invocation, real, prefix)
        except _Refused as exc:
            if exc.plan is None:
                say(f"{exc.why}; nothing was changed (to do it anyway: {bypass})")
            else:
                _show(exc.plan)
                say(exc.why)
                say(f"nothing was changed. {exc.safely}".strip())
                say(f"to do it anyway: {bypass}")
            sys.exit(1)
        except LibdoctorError as exc:
            why = f"refused: cannot plan this ({exc})"
            say(f"{why}; nothing was changed (to do it anyway: {bypass})")
            sys.exit(1)
        except Exception as exc:  # a bug must not stand between the user and pip
            say(
                f"a bug in libdoctor stopped the plan ({type(exc).__name__}: {exc}): running "
                f"{tool} unguarded; please report it"
            )
    try:
        os.execv(real, [real, *invocation.argv])
    except OSError as exc:
        say(f"cannot run {real}: {exc.strerror or exc}")
        sys.exit(127)


def _aimed_at(invocation: Invocation, real: str, prefix: str) -> str | None:
    """The environment the command installs into, as a directory (or an interpreter, for
    one outside any venv); None when it cannot tell (uv with no venv in sight)."""
    python = invocation.python
    if python is not None:
        path = os.path.abspath(python)
        if os.path.isdir(path):
            return path
        home = os.path.dirname(os.path.dirname(path))
        return home if os.path.isfile(os.path.join(home, "pyvenv.cfg")) else path
    if invocation.tool == "pip":
        return prefix or os.path.dirname(os.path.dirname(os.path.abspath(real)))
    if os.environ.get("VIRTUAL_ENV"):
        return os.environ["VIRTUAL_ENV"]
    here = os.getcwd()
    while True:
        if os.path.isfile(os.path.join(here, ".venv", "pyvenv.cfg")):
            return os.path.join(here, ".venv")
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _target(invocation: Invocation, real: str, prefix: str) -> Target | None:
    from libdoctor.environment.target import discover

    aimed = _aimed_at(invocation, real, prefix)
    if aimed is None:
        return None
    if os.path.isdir(aimed):
        if prefix and os.path.realpath(aimed) != os.path.realpath(prefix):
            return None  # another environment: not ours to guard
        return discover(aimed, None, os.environ)
    target = discover(None, aimed, os.environ)
    if prefix and os.path.realpath(target.prefix) != os.path.realpath(prefix):
        return None
    return target


def _check(invocation: Invocation, real: str, prefix: str) -> None:
    """Plan the command; raise ``_Refused`` when it must not run (its plan shown first when
    there is one)."""
    target = _target(invocation, real, prefix)
    if target is None:
        return
    if invocation.unreadable is not None:
        raise _Refused(f"refused: {invocation.unreadable}")
    if invocation.action == "uninstall":
        planned = _plan_uninstall(invocation, target)
    else:
        planned = _plan_install(invocation, target)
    if planned is None:
        return
    plan, refusal, safely = planned
    if refusal is not None:
        raise _Refused(refusal, plan, safely)


def _libraries() -> LoaderContext:
    from libdoctor.analysis.run import loader_context

    return loader_context(os.environ, os.getcwd())


def _uninstalled_names(asked: Sequence[Asked], env: Environment) -> list[str]:
    """The installed distributions the uninstall removes (those named here, not in a base
    interpreter's site-packages: pip skips the rest), or ``_Refused`` for a requirement
    libdoctor cannot read that could name any."""
    from libdoctor.whatif.plan import find_distribution

    names: list[str] = []
    for item in asked:
        if item.name is None:
            if item.doubt is not None:  # it may name anything
                raise _Refused(f"refused: cannot read {item.source!r}: {item.doubt}")
            continue  # unnamed: pip skips it
        try:
            dist = find_distribution(env, item.name)
        except LibdoctorError:
            continue  # not installed here: pip skips it
        if dist.name not in names:
            names.append(dist.name)
    return names


def _plan_uninstall(invocation: Invocation, target: Target) -> tuple[Plan, str | None, str] | None:
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.external.invocation import uninstall_asked
    from libdoctor.whatif.plan import guard_refusal, plan_uninstall

    asked = uninstall_asked(invocation, target.prefix, os.environ, os.getcwd())
    env = build_environment(target)
    names = _uninstalled_names(asked, env)
    if not names:
        return None  # nothing installed is named: pip skips every one
    plan = plan_uninstall(env, RealDisk(), names, _libraries())
    refusal = guard_refusal(plan, repair=False, force=False)
    command = shlex.join(["libdoctor", "uninstall", *names, target.prefix, "--repair"])
    safely = f"Safely, with backup: {command}" if plan.repair_is_safe else ""
    return plan, refusal, safely


def _plan_install(invocation: Invocation, target: Target) -> tuple[Plan, str | None, str]:
    from libdoctor.disk.hashing import default_cache_dir
    from libdoctor.external.invocation import config_requirements
    from libdoctor.whatif.request import (
        InstallRequest,
        conflicts,
        install_refusal,
        plan_request,
        with_steps,
    )

    added, why = config_requirements(invocation, target.prefix, os.environ)
    if why is not None:
        raise _Refused(f"refused: cannot read pip's configuration: {why}")
    pip_args = (*(a for f in added for a in ("-r", os.path.abspath(f))), *invocation.pip_args)
    request = InstallRequest(invocation.wheels, invocation.requirements, pip_args)
    planned = plan_request(
        target,
        request,
        options=invocation.options,
        cache_dir=default_cache_dir(),
        environ=os.environ,
        libraries=_libraries,
        quick=True,
    )
    plan = planned.plan
    if plan.verdict == "unknown":
        say(f"cannot tell what {', '.join(plan.unknown)} installs (built from source): going on")
    refusal = install_refusal(plan, repair=False, force=False, unknown_ok=True)
    if refusal is None:
        return plan, None, ""
    plan = with_steps(planned, request, _libraries())
    items = [*request.argv_items(), *invocation.options.args()]
    command = shlex.join(["libdoctor", "install", *items, target.prefix, "--repair"])
    clash = conflicts(plan)
    safely = (
        f"Safely, with backup: {command}"
        if plan.repair_is_safe
        else f"No reinstall makes both whole: {'; '.join(clash[:3])}."
        if clash
        else ""
    )
    return plan, install_refusal(plan, repair=False, force=False), safely


def _show(plan: Plan) -> None:
    from libdoctor.report.plan import plan_text

    color = sys.stderr.isatty() and not os.environ.get("NO_COLOR")
    sys.stderr.write(plan_text(plan, verbose=False, color=color))
    sys.stderr.flush()
