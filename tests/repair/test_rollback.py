"""Issue 13: a backup copy is checked against its journal's size and sha256 *before* it is put
back: a truncated copy leaves the current file alone, and the restore names the problem.

The backup is a real one, taken by a real ``libdoctor uninstall --force`` of a wheel real pip
installed; the copy is then truncated on disk.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.repairs import Cli
from support.venvs import VenvFactory, pip_install
from support.wheels import WheelFactory

DATA = b"the wheel's bytes\n" * 200
CURRENT = b"what is there now\n"


def test_a_truncated_copy_is_not_put_back(
    new_venv: VenvFactory, make_wheel: WheelFactory, tmp_path: Path
) -> None:
    venv = new_venv("truncated")
    files = {"trc/__init__.py": b"A = 1\n", "trc/data.bin": DATA}
    pip_install(venv, make_wheel("ldt-truncated", "1.0", files))
    cli = Cli(tmp_path / "cache-home")
    run = cli("uninstall", "--force", "ldt-truncated", venv.path)
    assert run.rc == 0, run.describe()
    (backup,) = (p for p in cli.backups.iterdir() if p.is_dir())
    journal = json.loads((backup / "journal.json").read_text())
    target = venv.site_packages / "trc" / "data.bin"
    (item,) = (f for f in journal["files"] if f["path"] == str(target))
    copy = backup / item["copy"]
    copy.write_bytes(copy.read_bytes()[:100])  # truncated
    target.parent.mkdir()
    target.write_bytes(CURRENT)

    refused = cli("restore", backup.name, "--json")
    assert refused.rc == 1 and refused.json()["refused"], refused.describe()
    assert refused.json()["changed_later"] == [str(target)]
    assert target.read_bytes() == CURRENT  # written after the uninstall: kept without --yes

    restored = cli("restore", backup.name, "--json", "--yes")
    assert restored.rc == 1, restored.describe()
    result = restored.json()
    assert result["ok"] is False
    problems = {p["path"]: p["reason"] for p in result["problems"]}
    assert list(problems) == [str(target)], restored.describe()
    assert f"the backup copy {item['copy']} is damaged" in problems[str(target)]
    assert "left as it is" in problems[str(target)]
    assert target.read_bytes() == CURRENT  # untouched
    assert (venv.site_packages / "trc" / "__init__.py").read_bytes() == b"A = 1\n"
    assert not list(target.parent.glob(".libdoctor-restore-*"))  # no temporary left behind

    text = cli("restore", backup.name, "--yes")
    assert text.rc == 1, text.describe()
    assert str(target) in text.stdout and "is damaged" in text.stdout, text.describe()
