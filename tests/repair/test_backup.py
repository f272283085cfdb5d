"""Backup, journal and rollback on synthetic prefixes (no installer involved).

The pip-driven cases (a failing step, a SIGKILL mid-step) are in tests/repair/test_fix.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from libdoctor.errors import LibdoctorError
from libdoctor.repair.backup import BackupSession
from libdoctor.repair.journal import interrupted, list_backups, load, locate
from libdoctor.repair.rollback import restore
from support.repairs import diff_states, tree_state


def make_prefix(root: Path) -> Path:
    prefix = root / "prefix"
    site = prefix / "lib/python3.11/site-packages"
    (site / "pkg/sub").mkdir(parents=True)
    (site / "pkg/__init__.py").write_text("A = 1\n")
    (site / "pkg/sub/data.bin").write_bytes(os.urandom(3000))
    (site / "pkg/lib.so").write_bytes(b"\x7fELF" + os.urandom(500))
    (site / "pkg/lib.so").chmod(0o755)
    (site / "pkg/link.so").symlink_to("lib.so")
    (site / "empty-dir").mkdir()
    (prefix / "bin").mkdir()
    (prefix / "bin/tool").write_text("#!/bin/sh\n")
    os.utime(site / "pkg/__init__.py", ns=(1_000_000_000, 1_000_000_000))
    return prefix


def all_files(prefix: Path) -> list[str]:
    return [str(p) for p in prefix.rglob("*") if p.is_file() or p.is_symlink()]


def damage(prefix: Path) -> None:
    """What an installer killed mid-way leaves: deleted, rewritten, created, retyped.

    Rewritten as pip and uv rewrite: a new file in place of the old one, never the old
    file's bytes changed in place (the backup may hold the old inode by a hard link)."""
    site = prefix / "lib/python3.11/site-packages"
    (site / "pkg/__init__.py").unlink()
    (site / "pkg/__init__.py").write_text("B = 2  # rewritten\n")
    (site / "pkg/lib.so").unlink()
    (site / "pkg/link.so").unlink()
    (site / "pkg/link.so").write_text("now a file")
    (site / "pkg/sub/data.bin").unlink()
    (site / "pkg/sub").rmdir()
    (site / "pkg/sub").write_text("a file where a dir was")
    (site / "empty-dir").rmdir()
    (site / "~kg-stash").mkdir()
    (site / "~kg-stash/moved.py").write_text("stash")
    (site / "newpkg/deep").mkdir(parents=True)
    (site / "newpkg/deep/new.py").write_text("new")
    (prefix / "bin/tool").chmod(0o700)


def test_backup_holds_files_by_hard_link_and_notices_an_in_place_write(tmp_path: Path) -> None:
    """Same file system: the backup links (no new bytes). A writer that changes a file in
    place (no installer does) changes the backup's bytes too: restore says so, it never
    calls that state verified."""
    prefix = make_prefix(tmp_path)
    backups = tmp_path / "cache/backups"
    session = BackupSession(str(backups), str(prefix), "test")
    session.save(all_files(prefix))
    target = prefix / "lib/python3.11/site-packages/pkg/sub/data.bin"
    assert target.stat().st_nlink == 2, "linked into the backup"
    session.begin(["installer", "step"], 5)
    with open(target, "r+b") as handle:  # in place: the linked copy changes with it
        handle.write(b"garbage")
    result = session.rollback()
    assert not result.ok
    assert any(path == str(target) for path, _ in result.problems)


@pytest.mark.parametrize("how", ["rollback", "restore-after-kill"])
def test_rollback_is_byte_for_byte(tmp_path: Path, how: str) -> None:
    prefix = make_prefix(tmp_path)
    backups = tmp_path / "cache/backups"
    before = tree_state(prefix)
    session = BackupSession(str(backups), str(prefix), "test")
    saved = session.save(all_files(prefix))
    assert saved == 5
    session.begin(["installer", "step"], saved)
    damage(prefix)
    assert diff_states(before, tree_state(prefix)) != []
    if how == "rollback":
        result = session.rollback()
        assert load(session.path).state == "rolled-back"
    else:
        session._lock.release()  # the process died holding nothing: flock went with it
        (pending,) = interrupted(str(backups), str(prefix))
        assert pending.state == "in-progress" and pending.steps[-1].state == "running"
        assert locate(str(backups), None).id == pending.id
        result = restore(pending)
        assert load(session.path).state == "restored"
    assert result.problems == ()
    assert diff_states(before, tree_state(prefix)) == []
    site = prefix / "lib/python3.11/site-packages"
    assert os.stat(site / "pkg/__init__.py").st_mtime_ns == 1_000_000_000
    assert str(site / "newpkg") in result.removed and str(site / "~kg-stash") in result.removed


def test_directory_mtimes_are_restored(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path)
    site = prefix / "lib/python3.11/site-packages"
    stamp = os.stat(site / "pkg").st_mtime_ns
    session = BackupSession(str(tmp_path / "b"), str(prefix), "test")
    session.save(all_files(prefix))
    session.begin(["x"], 0)
    (site / "pkg/new.txt").write_text("x")
    session.rollback()
    assert os.stat(site / "pkg").st_mtime_ns == stamp


def test_journal_is_written_before_the_step_and_updated_after(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path)
    session = BackupSession(str(tmp_path / "b"), str(prefix), "libdoctor fix")
    session.save(all_files(prefix)[:2])
    session.begin(["pip", "install", "x"], 2)
    on_disk = json.loads(Path(session.path, "journal.json").read_text())
    assert on_disk["schema_version"] == 1
    assert on_disk["state"] == "in-progress"
    started = on_disk["steps"][0].pop("started_ns")
    assert isinstance(started, int) and started > 0, "the step's window opens as it begins"
    assert on_disk["steps"] == [
        {
            "argv": ["pip", "install", "x"],
            "state": "running",
            "returncode": None,
            "saved": 2,
            "message": "",
            "pid": None,
            "ended_ns": None,
            "wrote": [],
        }
    ]
    assert len(on_disk["files"]) == 2 and all(
        f["sha256"] for f in on_disk["files"] if f["kind"] == "file"
    )
    session.end(0, "ok")
    info = session.finish("done")
    assert load(session.path) == info
    assert info.steps[0].state == "done" and not info.needs_restore
    assert [b.id for b in list_backups(str(tmp_path / "b"))] == [info.id]
    assert not Path(session.path, "tmp").exists(), "the installer's scratch dir is cleaned up"


def test_a_backup_dir_inside_the_target_is_refused(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path)
    with pytest.raises(LibdoctorError, match="must not be inside"):
        BackupSession(str(prefix / "backups"), str(prefix), "test")


def test_one_session_per_prefix(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path)
    first = BackupSession(str(tmp_path / "b"), str(prefix), "one")
    with pytest.raises(LibdoctorError, match="another libdoctor repair or restore is running"):
        BackupSession(str(tmp_path / "b"), str(prefix), "two")
    first.finish("done")
    BackupSession(str(tmp_path / "b"), str(prefix), "three").finish("done")


def test_an_interrupted_backup_blocks_the_next_repair(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path)
    killed = BackupSession(str(tmp_path / "b"), str(prefix), "killed")
    killed.begin(["x"], 0)
    killed._lock.release()
    with pytest.raises(LibdoctorError, match=f"libdoctor restore {killed.info.id}"):
        BackupSession(str(tmp_path / "b"), str(prefix), "next")


def test_paths_outside_the_prefix_are_never_saved_or_written(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("keep")
    site = prefix / "lib/python3.11/site-packages"
    (site / "escape").symlink_to(outside)  # a directory link leading out of the prefix
    before_outside = tree_state(outside)
    session = BackupSession(str(tmp_path / "b"), str(prefix), "test")
    candidates = [
        str(outside / "secret.txt"),
        str(site / "escape/secret.txt"),  # textually inside, really outside
        str(site / "../../../../outside/secret.txt"),
    ]
    assert session.save(candidates) == 0
    session.begin(["x"], 0)
    (outside / "secret.txt").write_text("changed by someone")
    (outside / "new.txt").write_text("created outside")
    result = session.rollback()
    assert (outside / "secret.txt").read_text() == "changed by someone"
    assert (outside / "new.txt").exists(), "rollback never deletes outside the prefix"
    assert result.problems == ()
    assert diff_states(before_outside, tree_state(outside)) != []


def test_locate_errors(tmp_path: Path) -> None:
    with pytest.raises(LibdoctorError, match="no interrupted repair to restore"):
        locate(str(tmp_path / "none"), None)
    with pytest.raises(LibdoctorError, match="no backup 'nope'"):
        locate(str(tmp_path / "none"), "nope")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad/journal.json").write_text("{not json")
    with pytest.raises(LibdoctorError, match="not a readable libdoctor backup"):
        load(str(tmp_path / "bad"))
    assert list_backups(str(tmp_path)) == []
