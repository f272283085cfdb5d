"""``analysis.recording`` sees every path a run asks the OS about, by whatever way it asks."""

from __future__ import annotations

import errno
import glob
import os
import pathlib
import threading
from pathlib import Path

import pytest

from libdoctor.analysis import recording
from libdoctor.analysis.fork import started_in_child
from libdoctor.analysis.recording import (
    LINK,
    UNKNOWN,
    Identity,
    Reads,
    child_reads,
    merge_reads,
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"x")
    (tmp_path / "link").symlink_to("d")
    return tmp_path


def test_each_way_of_asking_is_recorded(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = str(tree)
    for name in ("a", "b", "c", "e", "g"):
        (tree / "d" / name).write_bytes(b"")
    monkeypatch.chdir(tree)
    with recording.recording() as reads:
        os.stat(f"{base}/d/f")
        os.path.exists(f"{base}/missing")
        os.path.isdir(f"{base}/d/a")
        os.lstat(f"{base}/link")
        os.listdir(f"{base}/d")
        with os.scandir(f"{base}/link"):
            pass
        os.access(f"{base}/d/b", os.R_OK)
        with open(f"{base}/d/c", "rb"):
            pass
        pathlib.Path(f"{base}/d/e").read_bytes()
        os.path.realpath(f"{base}/link/f")
        glob.glob(f"{base}/*/g")
        os.stat("d/g")  # relative: joined to the working directory
        fd = os.open(f"{base}/d", os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.path.exists(f"{base}/d/h")
            with pytest.raises(FileNotFoundError):
                os.stat("h", dir_fd=fd)  # a name in a directory opened while recording
        finally:
            os.close(fd)
    expected = {
        f"{base}/d/f",
        f"{base}/missing",
        f"{base}/d/a",
        f"{LINK}{base}/link",  # its own entry, asked about
        f"{base}/d",
        f"{base}/link",
        f"{base}/d/b",
        f"{base}/d/c",
        f"{base}/d/e",
        f"{LINK}{base}/d/f",  # realpath asks about each resolved component
        f"{base}/d/g",
        f"{base}/d/h",
    }
    assert expected <= reads, expected - reads
    assert UNKNOWN not in reads
    assert recording.child_reads() is None  # off again: nothing more is recorded


def test_a_name_in_a_directory_opened_before_is_unknown(tree: Path) -> None:
    fd = os.open(str(tree / "d"), os.O_RDONLY | os.O_DIRECTORY)
    try:
        with recording.recording() as reads:
            os.stat("f", dir_fd=fd)
    finally:
        os.close(fd)
    assert UNKNOWN in reads  # such a run is never stored


def test_a_forked_child_hands_its_reads_back(tree: Path) -> None:
    """And what its own stat() said: the identity a stored run keeps for the path."""
    identities: dict[str, Identity] = {}
    with recording.recording(identities) as reads:

        def work() -> Reads | None:
            os.stat(tree / "d" / "f")
            os.path.exists(tree / "gone")
            return child_reads()

        merge_reads(started_in_child(work)())
    path = str(tree / "d" / "f")
    st = os.stat(path)
    assert path in reads
    assert identities[path] == (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, st.st_dev)
    assert identities[str(tree / "gone")][0] == -errno.ENOENT


def test_the_wrappers_are_gone_afterwards() -> None:
    originals = (os.stat, os.lstat, os.listdir, os.scandir, os.open, open)
    with recording.recording():
        assert os.stat is not originals[0]
    assert (os.stat, os.lstat, os.listdir, os.scandir, os.open, open) == originals


def test_a_recording_beside_another_threads_is_never_cut_short(tree: Path) -> None:
    """Two runs recording at once (``api.check(reuse=True)`` from two threads): the one
    that ends first must not take the other's wrappers away while it goes on reading. The
    later one holds every path it read, or UNKNOWN (never stored); the wrappers go with the
    last."""
    originals = (os.stat, os.lstat, os.listdir, os.scandir, os.open, open)
    inside, done = threading.Event(), threading.Event()

    def first() -> None:
        with recording.recording():
            inside.set()
            done.wait(10)

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert inside.wait(10)
        with recording.recording() as reads:
            done.set()
            thread.join(10)
            os.stat(tree / "d" / "f")  # after the first run ended
    finally:
        done.set()
        thread.join(10)
    assert UNKNOWN in reads or str(tree / "d" / "f") in reads
    assert (os.stat, os.lstat, os.listdir, os.scandir, os.open, open) == originals


def test_past_the_cap_only_unknown_is_kept(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recording, "MAX_PATHS", 3)
    with recording.recording() as reads:
        for i in range(10):
            os.path.exists(tree / f"n{i}")
    assert UNKNOWN in reads and len(reads) <= 4
