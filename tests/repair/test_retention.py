"""Backups are bounded (repair.retention): the newest N per target kept after each
successful change, never one a restore needs; ``libdoctor backups`` lists, prunes, removes."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from libdoctor.errors import LibdoctorError
from libdoctor.repair.backup import BackupSession
from libdoctor.repair.journal import list_backups
from libdoctor.repair.retention import keep_count, prune, remove, usage
from support.repairs import Cli
from support.venvs import VenvFactory, pip_install
from support.wheels import WheelFactory


def _prefix(root: Path) -> Path:
    site = root / "prefix/lib/python3.11/site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg/__init__.py").write_bytes(os.urandom(2000))
    return root / "prefix"


def _backups(root: Path, prefix: Path, done: int, pending: int = 0) -> None:
    for i in range(done + pending):
        session = BackupSession(str(root), str(prefix), f"test {i}")
        session.save([str(prefix / "lib/python3.11/site-packages/pkg/__init__.py")])
        if i < done:
            session.finish("done")
        else:
            session.close()  # a run killed mid-step: its journal stays in-progress


def test_prune_keeps_the_newest_and_every_backup_a_restore_needs(tmp_path: Path) -> None:
    prefix, root = _prefix(tmp_path), tmp_path / "backups"
    _backups(root, prefix, done=8, pending=1)
    before = list_backups(str(root))
    removed = prune(str(root), str(prefix), keep=5)
    after = list_backups(str(root))
    assert [i.id for i in removed] == [i.id for i in before if not i.needs_restore][:3]
    assert len([i for i in after if not i.needs_restore]) == 5
    assert any(i.needs_restore for i in after), "the pending backup is kept"


def test_remove_refuses_a_backup_a_restore_needs(tmp_path: Path) -> None:
    prefix, root = _prefix(tmp_path), tmp_path / "backups"
    _backups(root, prefix, done=1, pending=1)
    done, pending = sorted(list_backups(str(root)), key=lambda i: i.needs_restore)
    with pytest.raises(LibdoctorError, match="a restore may still need it"):
        remove(str(root), pending.id)
    assert remove(str(root), done.id).id == done.id
    assert remove(str(root), pending.id, force=True).id == pending.id
    assert list_backups(str(root)) == []


def test_usage_counts_own_and_hard_linked_bytes(tmp_path: Path) -> None:
    prefix, root = _prefix(tmp_path), tmp_path / "backups"
    _backups(root, prefix, done=1)
    (info,) = list_backups(str(root))
    assert usage(info).shared == 2000, "linked: no new bytes while the file is unchanged"
    installed = prefix / "lib/python3.11/site-packages/pkg/__init__.py"
    installed.unlink()  # replaced, as pip and uv replace a file
    installed.write_bytes(b"new")
    cost = usage(info)
    assert cost.shared == 0 and cost.own >= 2000, "the old bytes are the backup's alone now"


@pytest.mark.parametrize(
    ("environ", "given", "expected"),
    [({}, None, 5), ({"LIBDOCTOR_KEEP_BACKUPS": "2"}, None, 2), ({}, 7, 7)],
)
def test_keep_count(environ: dict[str, str], given: int | None, expected: int) -> None:
    assert keep_count(environ, given) == expected


@pytest.mark.parametrize("bad", ["0", "many"])
def test_keep_count_refuses_nonsense(bad: str) -> None:
    with pytest.raises(LibdoctorError):
        keep_count({"LIBDOCTOR_KEEP_BACKUPS": bad})


def test_eight_fixes_leave_at_most_five_backups(
    new_venv: VenvFactory, make_wheel: WheelFactory, tmp_path: Path
) -> None:
    cli = Cli(tmp_path / "cache-home")
    venv = new_venv("eight-fixes")
    pip_install(venv, make_wheel("ldt-keep", "1.0", {"keep/__init__.py": b"X = 1\n"}))
    target = venv.site_packages / "keep/__init__.py"
    for _ in range(8):
        target.unlink()
        run = cli("fix", venv.path, "--yes", "--no-index", "-f", make_wheel.dest)
        assert run.rc == 0, run.describe()
    listed = json.loads(cli("backups", "--json").stdout)
    assert len(listed["backups"]) == 5 and listed["keep"] == 5
    assert all(b["state"] == "done" for b in listed["backups"])
    pruned = cli("backups", "prune", "--keep", "2")
    assert pruned.rc == 0 and pruned.stdout.count("removed ") == 3


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 5 MiB tmpfs: another file system (copies, no links) with little room."""
    area = tmp_path / "tmpfs"
    area.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(area)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.decode().strip()}")
    try:
        yield area
    finally:
        subprocess.run(["umount", str(area)], check=False)


def test_a_backup_area_without_room_refuses_before_any_change(
    new_venv: VenvFactory, make_wheel: WheelFactory, small_tmpfs: Path, tmp_path: Path
) -> None:
    from support.repairs import diff_states, tree_state

    cli = Cli(tmp_path / "cache-home")
    venv = new_venv("no-room")
    big = {"room/__init__.py": b"", "room/big.bin": os.urandom(8 << 20)}
    pip_install(venv, make_wheel("ldt-room", "1.0", big))
    (venv.site_packages / "room/__init__.py").unlink()
    before = tree_state(venv.path)
    run = cli(
        "fix", venv.path, "--yes", "--no-index", "-f", make_wheel.dest, "--cache-dir", small_tmpfs
    )
    assert run.rc == 2, run.describe()
    assert "MB free: nothing was changed" in run.stderr
    assert diff_states(before, tree_state(venv.path)) == []
    listed = json.loads(cli("backups", "--json", "--cache-dir", small_tmpfs).stdout)
    assert [b["state"] for b in listed["backups"]] in ([], ["rolled-back"])
