"""The lock field trial, opt-in (``-m realenv``): real projects' own locks, synced as their
docs say, verify clean, and one removed requirement is reported.

``LIBDOCTOR_LOCK_TRIAL`` names a folder of checkouts (flask, click, the MCP python-sdk:
the ones whose ``uv sync --frozen`` gave false ``lock-extra`` warnings before uv's
``default-groups`` were read), each with its ``uv.lock`` and the ``.venv`` that ``uv sync
--frozen`` made; skipped when it is not set. Nothing here is fetched or written but a
scratch copy of each venv.
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


@pytest.mark.skipif(not PROJECTS, reason="LIBDOCTOR_LOCK_TRIAL names no synced checkouts")
@pytest.mark.parametrize("name", PROJECTS)
def test_a_real_lock_synced_by_uv_verifies_clean_and_a_removal_is_named(
    name: str, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    project = Path(TRIAL) / name
    run = libdoctor("verify", "--lock", project / "uv.lock", project / ".venv", "--json")
    doc = check_ok(run)
    drift = [f for f in doc["findings"] if f["severity"] != "info"]
    assert run.rc == 0 and drift == [], drift
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
    after = check_ok(libdoctor("verify", "--lock", project / "uv.lock", copy, "--json"))
    missing = {f["distribution"]["name"] for f in after["findings"] if f["code"] == "lock-missing"}
    assert victim in missing, after["findings"]
    shutil.rmtree(copy)
