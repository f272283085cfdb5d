"""Issue 13: one identity per target, and containment by real path — with real pip.

A target spelled with ``..`` is the same target as its canonical path: the model, the backup
listing and the restore agree on every file. A RECORD row that leaves the prefix through a
symlinked directory is reported, never read, never deleted and never written, in a prefix
that is not a venv (where pip deletes whatever RECORD names). ``/`` and ``/usr`` are never
written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from libdoctor.errors import LibdoctorError
from libdoctor.repair.backup import BackupSession
from libdoctor.repair.journal import BackupInfo
from libdoctor.repair.rollback import restore
from support.repairs import Cli, diff_states, journals, tree_state
from support.venvs import SRC_DIR, Venv, VenvFactory, pip_env, pip_install
from support.wheels import WheelFactory, record_line

Doc = dict[str, Any]
PYDIR = f"python{sys.version_info[0]}.{sys.version_info[1]}"


def dotted(path: Path) -> str:
    """PATH as the CLI's working directory reaches it with ``..`` (``../../tmp/.../env``)."""
    spelled = os.path.relpath(path, SRC_DIR.parent)
    assert spelled.startswith(".."), spelled
    return spelled


# =============================================================================== one identity


def test_uninstall_then_restore_through_dotdot_is_byte_identical(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli
) -> None:
    venv = new_venv("six")
    pip_install(venv, make_wheel("ldt-six", "1.0", {"ldt_six.py": b"X = 1\n"}))
    before = tree_state(venv.path)
    run = cli("uninstall", "ldt-six", dotted(venv.path))
    assert run.rc == 0, run.describe()
    assert not (venv.site_packages / "ldt_six.py").exists()
    assert "(0 files backed up)" not in run.stderr, run.describe()
    (journal,) = journals(cli)
    assert journal["prefix"] == str(venv.path.resolve())
    saved = {f["path"] for f in journal["files"]}
    assert str(venv.site_packages / "ldt_six.py") in saved
    assert str(venv.site_packages / "ldt_six-1.0.dist-info/RECORD") in saved
    restore = cli("restore", journal["id"])
    assert restore.rc == 0, restore.describe()
    assert diff_states(before, tree_state(venv.path)) == [], "restore is not byte-identical"


def test_check_through_dotdot_finds_nothing_outside(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli
) -> None:
    venv = new_venv("dotdot")
    pip_install(venv, make_wheel("ldt-dot", "1.0", {"ldt_dot/__init__.py": b""}))
    run = cli("check", dotted(venv.path), "--json", "--all", "--no-libraries")
    doc = run.json()
    assert doc["target"]["prefix"] == str(venv.path.resolve())
    assert [f for f in doc["findings"] if f["code"] == "record-invalid"] == []
    assert "outside the prefix" not in run.stdout


# =============================================================================== refusals


# --dry-run: the refusal comes before the plan, so a regression fails here without
# writing to the system (an unguarded run on / lists and rolls back the whole file system).
@pytest.mark.parametrize(
    "args",
    [
        ("fix", "{root}", "--dry-run"),
        ("uninstall", "pip", "{root}", "--force", "--dry-run"),
    ],
)
@pytest.mark.parametrize("root", ["/", "/usr"])
def test_system_roots_are_never_written(cli: Cli, args: tuple[str, ...], root: str) -> None:
    run = cli(*(a.format(root=root) for a in args))
    assert run.rc == 2, run.describe()
    assert run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert journals(cli) == []


@pytest.mark.parametrize("root", ["/", "/usr"])
def test_no_backup_and_no_restore_of_a_system_root(tmp_path: Path, root: str) -> None:
    with pytest.raises(LibdoctorError, match="refused"):
        BackupSession(str(tmp_path / "backups"), root, "libdoctor fix /")
    assert not (tmp_path / "backups").exists() or list((tmp_path / "backups").iterdir()) == []
    info = BackupInfo("x", str(tmp_path / "x"), root, "", "libdoctor fix /", "in-progress", (), ())
    with pytest.raises(LibdoctorError, match="refused"):
        restore(info)


def test_a_directory_without_distributions_is_not_written(cli: Cli, tmp_path: Path) -> None:
    prefix = tmp_path / "empty"
    (prefix / "lib" / PYDIR / "site-packages").mkdir(parents=True)
    run = cli("fix", prefix, "--yes")
    assert run.rc == 2, run.describe()
    assert "not a Python environment" in run.stderr
    assert journals(cli) == []


# =============================================================================== escaping links


def relocated_prefix(root: Path, template: Venv) -> Path:
    """A real interpreter in a prefix that is not a venv: the base binary copied to
    ``P/bin``, its stdlib linked into ``P/lib/pythonX.Y`` (so ``sys.prefix`` is P) and pip
    copied from TEMPLATE. Outside a venv, pip deletes whatever RECORD names."""
    prefix = root / "prefix"
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    site = prefix / "lib" / PYDIR / "site-packages"
    site.mkdir(parents=True)
    (prefix / "bin").mkdir()
    python = prefix / "bin" / PYDIR
    shutil.copy2(os.path.realpath(Path(sys.base_prefix) / "bin" / PYDIR), python)
    for entry in stdlib.iterdir():
        if entry.name != "site-packages":
            (prefix / "lib" / PYDIR / entry.name).symlink_to(entry)
    for entry in template.site_packages.iterdir():
        if entry.name == "pip" or entry.name.startswith("pip-"):
            shutil.copytree(entry, site / entry.name, symlinks=True)
    probe = subprocess.run(
        [python, "-c", "import sys, pip; print(sys.prefix)"],
        capture_output=True,
        text=True,
        check=False,
        env=pip_env(),
    )
    if probe.returncode != 0 or probe.stdout.strip() != str(prefix):
        pytest.skip(f"cannot relocate this interpreter: {probe.stdout}{probe.stderr}")
    return prefix


def prefix_pip(prefix: Path, *args: str) -> None:
    python = prefix / "bin" / PYDIR
    subprocess.run([python, "-m", "pip", *args], env=pip_env(), check=True, capture_output=True)


def test_a_link_out_of_a_non_venv_prefix_is_never_followed(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli, tmp_path: Path
) -> None:
    prefix = relocated_prefix(tmp_path, new_venv("template"))
    site = prefix / "lib" / PYDIR / "site-packages"
    prefix_pip(
        prefix,
        "install",
        "--no-deps",
        str(make_wheel("ldt-evil", "1.0", {"evil/__init__.py": b""})),
        str(make_wheel("ldt-ok", "1.0", {"ok/__init__.py": b""})),
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_bytes(b"not yours\n")
    (site / "evil_link").symlink_to(outside)
    record = site / "ldt_evil-1.0.dist-info" / "RECORD"
    record.write_text(record.read_text() + record_line("evil_link/victim", b"other bytes") + "\n")
    kept = tree_state(outside)

    check = cli("check", prefix, "--json", "--all", "--deep", "--no-libraries").json()
    (invalid,) = [f for f in check["findings"] if f["code"] == "record-invalid"]
    assert invalid["evidence"]["through_links"] == [str(site / "evil_link")]
    assert "evil_link" in invalid["message"]
    others = [f for f in check["findings"] if f is not invalid]
    assert all("victim" not in json.dumps(f) for f in others), "read through the link"

    plan = cli("plan", "uninstall", "ldt-evil", prefix, "--json")
    assert plan.rc == 1, plan.describe()
    assert plan.json()["plan"]["verdict"] == "breaks"
    assert plan.json()["plan"]["deletes_outside"] == [str(site / "evil_link/victim")]
    for mode in ((), ("--force",), ("--repair",)):
        run = cli("uninstall", "ldt-evil", prefix, *mode)
        assert run.rc == 1, run.describe()
        assert "outside the prefix" in run.stderr
    assert journals(cli) == [], "a refused uninstall backs nothing up"
    assert (site / "evil" / "__init__.py").is_file()

    before = tree_state(prefix)
    run = cli("uninstall", "ldt-ok", prefix)
    assert run.rc == 0, run.describe()
    (journal,) = journals(cli)
    assert all(not f["path"].startswith(str(site / "evil_link")) for f in journal["files"])
    restore = cli("restore", journal["id"])
    assert restore.rc == 0, restore.describe()
    assert diff_states(before, tree_state(prefix)) == []
    assert diff_states(kept, tree_state(outside)) == [], "the victim outside was touched"
