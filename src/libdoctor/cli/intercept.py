"""Where the guard's wrappers land: ``pip ARGS`` or ``uv ARGS`` -> plan -> ``exec`` the real
tool with the same argv, or refuse (exit 1, the plan on stderr).

``main([TOOL, REAL, PREFIX, *ARGS])``: TOOL is ``pip`` or ``uv``; REAL the real tool (a path,
or a name found on PATH); PREFIX the guarded environment (empty for the shell functions of
``guard shell``: then whatever environment the command is aimed at). Only an install or
uninstall aimed at PREFIX is planned; anything else, ``--force`` (removed from the argv) and a
plan libdoctor cannot make (a requirement pip cannot resolve: pip will say why) go straight
through. Only a plan that proves a break stops the command: an install pip would build from
source cannot be predicted, and passes with a note. stdout stays the tool's.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, NoReturn

from libdoctor.environment.invocation import Invocation, read_invocation
from libdoctor.errors import LibdoctorError

if TYPE_CHECKING:
    from libdoctor.environment.target import Target
    from libdoctor.loader.extensions import LoaderContext
    from libdoctor.whatif.plan import Plan


def say(text: str) -> None:
    from libdoctor.report.text import inert

    print(f"libdoctor guard: {inert(text)}", file=sys.stderr, flush=True)


def main(argv: Sequence[str]) -> NoReturn:
    from libdoctor.cli.common import degrade_streams

    degrade_streams()
    tool_arg, real, prefix, *args = argv
    tool: Literal["pip", "uv"] = "uv" if tool_arg == "uv" else "pip"
    real = real if os.sep in real else (shutil.which(real) or real)
    invocation = read_invocation(tool, args)
    if invocation.action is not None and not invocation.force:
        try:
            refusal = _refusal(invocation, real, prefix)
        except LibdoctorError as exc:
            say(f"cannot plan this ({exc}); running {tool} unguarded")
            refusal = None
        except Exception as exc:  # a bug must not stand between the user and pip
            say(f"failed ({type(exc).__name__}: {exc}); running {tool} unguarded")
            refusal = None
        if refusal is not None:
            sys.exit(1)
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


def _refusal(invocation: Invocation, real: str, prefix: str) -> str | None:
    """Plan the command; when it breaks something, show the plan and say so."""
    target = _target(invocation, real, prefix)
    if target is None:
        return None
    if invocation.action == "uninstall":
        plan, refusal, safely = _plan_uninstall(invocation, target)
    else:
        plan, refusal, safely = _plan_install(invocation, target)
    if refusal is None:
        return None
    _show(plan)
    say(refusal)
    say(f"nothing was changed. {safely}".strip())
    name = "pip" if invocation.tool == "pip" else "uv"
    say(f"to do it anyway: LIBDOCTOR_GUARD=off {name} ..., or add --force")
    return refusal


def _libraries() -> LoaderContext:
    from libdoctor.analysis.run import loader_context

    return loader_context(os.environ, os.getcwd())


def _plan_uninstall(invocation: Invocation, target: Target) -> tuple[Plan, str | None, str]:
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.whatif.plan import guard_refusal, plan_uninstall

    names = invocation.requirements
    plan = plan_uninstall(build_environment(target), RealDisk(), names, _libraries())
    refusal = guard_refusal(plan, repair=False, force=False)
    command = shlex.join(["libdoctor", "uninstall", *names, target.prefix, "--repair"])
    safely = f"Safely, with backup: {command}" if plan.repair_is_safe else ""
    return plan, refusal, safely


def _plan_install(invocation: Invocation, target: Target) -> tuple[Plan, str | None, str]:
    from libdoctor.disk.hashing import default_cache_dir
    from libdoctor.whatif.request import (
        InstallRequest,
        conflicts,
        install_refusal,
        plan_request,
        with_steps,
    )

    request = InstallRequest(invocation.wheels, invocation.requirements, invocation.pip_args)
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
