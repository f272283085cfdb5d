"""The lock field trial, opt-in (``-m realenv``): real projects' own locks, synced as their
docs say, verify clean, and one removed requirement is reported.

``LIBDOCTOR_LOCK_TRIAL`` names a folder of checkouts (flask, click, the MCP python-sdk:
the ones whose ``uv sync --frozen`` gave false ``lock-extra`` warnings before uv's
``default-groups`` were read), each with its ``uv.lock`` and the ``.venv`` that ``uv sync
--frozen`` made; skipped when it is not set. Nothing here is fetched or written but a
scratch copy of each venv.

A checkout synced with flags (its docs' ``uv sync --frozen --all-extras --dev``) says them
in ``SYNC_FLAGS`` below or in a one-line ``.libdoctor-sync-flags`` file beside its lock;
they are passed to ``verify`` as synced. Exports beside the lock (``uv export -o
requirements-trial.txt``, ``--format pylock.toml -o pylock.trial.toml``, with the same
flags) are verified too. The issue 22 trial (``/work/envs/i22-locks``): flask, click,
markupsafe, attrs (``uv sync --frozen``), fastmcp (``--all-packages --group dev``), the MCP
python-sdk (``--all-extras --dev``, its git-locked strict-no-cover), openai-agents-python
(``--all-extras --all-packages --group dev``: playwright's renamed wheel), logfire (a
workspace member as a dependency), nanochat (``--extra cpu --no-install-package torch``:
its torch is on PyTorch's index only). Synced with a Python whose micro version is not
libdoctor's (3.11.2 against 3.11.7), redis' ``python_full_version < '3.11.3'`` is held.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support.checkdoc import check_ok
from support.venvs import Libdoctor, uv_path

pytestmark = pytest.mark.realenv

TRIAL = os.environ.get("LIBDOCTOR_LOCK_TRIAL", "")
PROJECTS = (
    sorted(
        p.name
        for p in Path(TRIAL).iterdir()
        if (p / "uv.lock").is_file() and (p / ".venv").is_dir()
    )
    if TRIAL and Path(TRIAL).is_dir()
    else []
)


SYNC_FLAGS = {
    "fastmcp": ["--all-packages", "--group", "dev"],
    "python-sdk": ["--all-extras", "--dev"],
    "openai-agents-python": ["--all-extras", "--all-packages", "--group", "dev"],
    "nanochat": ["--extra", "cpu", "--no-install-package", "torch"],
}


def sync_flags(project: Path) -> list[str]:
    """The flags PROJECT was synced with: its ``.libdoctor-sync-flags``, else SYNC_FLAGS."""
    told = project / ".libdoctor-sync-flags"
    if told.is_file():
        return told.read_text().split()
    return SYNC_FLAGS.get(project.name, [])


@pytest.mark.skipif(not PROJECTS, reason="LIBDOCTOR_LOCK_TRIAL names no synced checkouts")
@pytest.mark.parametrize("name", PROJECTS)
def test_a_real_lock_synced_by_uv_verifies_clean_and_a_removal_is_named(
    name: str, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    project = Path(TRIAL) / name
    flags = sync_flags(project)
    run = libdoctor("verify", "--lock", project / "uv.lock", *flags, project / ".venv", "--json")
    doc = check_ok(run)
    drift = [f for f in doc["findings"] if f["severity"] != "info"]
    assert run.rc == 0 and drift == [], drift
    for export in ("requirements-trial.txt", "pylock.trial.toml"):
        if (project / export).is_file():
            exported = check_ok(
                libdoctor("verify", "--lock", project / export, project / ".venv", "--json")
            )
            assert [f for f in exported["findings"] if f["severity"] != "info"] == [], export
    copy = tmp_path / "venv"
    subprocess.run(["cp", "-a", str(project / ".venv"), str(copy)], check=True)
    required = sorted(p["name"] for p in doc["lock"]["required"])
    victim = next(n for n in required if n not in ("pip", "setuptools"))
    subprocess.run(
        [
            str(uv_path()),
            "pip",
            "uninstall",
            "-q",
            "--python",
            str(copy / "bin" / "python"),
            victim,
        ],
        check=True,
    )
    after = check_ok(libdoctor("verify", "--lock", project / "uv.lock", *flags, copy, "--json"))
    missing = {f["distribution"]["name"] for f in after["findings"] if f["code"] == "lock-missing"}
    assert victim in missing, after["findings"]
    shutil.rmtree(copy)
