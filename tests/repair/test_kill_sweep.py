"""Issue 13: kill -9 at every step of a fix, then ``libdoctor restore``: byte-identical each time.

The moments: before the backup copies anything, in the middle of it, once the step is journaled
(the installer not started), while pip moves the old files away, while it writes the new ones,
during the re-check after a finished fix, and in the middle of the rollback of a failed step.
libdoctor's own moments are ``LIBDOCTOR_KILL_AT`` checkpoints; pip's come from the fault
injector inside the real pip. For a distribution uv installed, libdoctor runs uv: its moments
are libdoctor's. Opt-in: ``pytest -m slow``.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from support.repairs import Cli, diff_states, fault_injector, tree_state
from support.venvs import WITH_UV, VenvFactory, pip_install, uv_install
from support.wheels import WheelFactory

pytestmark = pytest.mark.slow

FILES = {f"ldtkill/m{i:02d}.py": f"X = {i}\n".encode() for i in range(40)}
FILES["ldtkill/__init__.py"] = b""
FILES["ldtkill/lib.so"] = os.urandom(1 << 20)

# (moment, LIBDOCTOR_KILL_AT, injector mode or None)
PIP_MOMENTS = [
    ("before the backup", "before-backup", None),
    ("mid-backup", "mid-backup", None),
    ("after the journal", "after-journal", None),
    ("while pip stashes", None, "killstash"),
    ("while pip writes", None, "kill"),
    ("during the re-check", "recheck", None),
    ("during the rollback", "mid-rollback", "fail"),
]
UV_MOMENTS = [m for m in PIP_MOMENTS if m[2] is None]


def _sweep(
    new_venv: VenvFactory,
    make_wheel: WheelFactory,
    tmp_path: Path,
    moment: tuple[str, str | None, str | None],
    installer: str,
) -> None:
    name, kill_at, mode = moment
    venv = new_venv("sweep")
    wheel = make_wheel("ldt-kill", "1.0", FILES)
    if installer == "uv":
        uv_install(venv.python, wheel, cache=tmp_path / "uv-cache")
    else:
        pip_install(venv, wheel)
    for lost in ("m07.py", "lib.so"):
        (venv.site_packages / "ldtkill" / lost).unlink()
    before = tree_state(venv.path)
    cli = Cli(tmp_path / "cache-home")
    args: list[str | os.PathLike[str]] = ["fix", venv.path, "--yes", "--no-index"]
    args += ["--find-links", make_wheel.dest]
    if mode is not None:
        args += ["--installer-cmd", fault_injector(tmp_path, venv.python, mode)]
    env = {**WITH_UV, **({"LIBDOCTOR_KILL_AT": kill_at} if kill_at else {})}
    run = cli(*args, env=env)
    assert run.rc == -signal.SIGKILL, f"{name}: {run.describe()}"
    (journal,) = (json.loads(p.read_text()) for p in cli.backups.glob("*/journal.json"))
    restored = cli("restore", journal["id"], "--json", env=WITH_UV)
    assert restored.rc == 0, f"{name}: {restored.describe()}"
    assert diff_states(before, tree_state(venv.path)) == [], f"{name}: not byte-identical"
    again = cli(
        "fix", venv.path, "--yes", "--no-index", "--find-links", make_wheel.dest, env=WITH_UV
    )
    assert again.rc == 0, f"{name}: a fix after the restore: {again.describe()}"


SWEEP = [("pip", m) for m in PIP_MOMENTS] + [("uv", m) for m in UV_MOMENTS]


@pytest.mark.parametrize(("installer", "moment"), SWEEP, ids=[f"{i}: {m[0]}" for i, m in SWEEP])
def test_kill_9_then_restore_is_byte_identical(
    new_venv: VenvFactory,
    make_wheel: WheelFactory,
    tmp_path: Path,
    installer: str,
    moment: tuple[str, str | None, str | None],
) -> None:
    _sweep(new_venv, make_wheel, tmp_path, moment, installer)
