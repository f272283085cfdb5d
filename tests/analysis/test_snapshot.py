"""The snapshot's frames: what ``fleet --slurm`` reads back from srun's merged stdout."""

from __future__ import annotations

import itertools
import os

import pytest

from libdoctor.analysis.snapshot import SnapshotError, frame, unframe


def _interleave(*texts: str) -> str:
    rows = itertools.zip_longest(*(t.splitlines() for t in texts))
    return "\n".join(line for row in rows for line in row if line is not None) + "\n"


def test_frames_survive_interleaving_line_by_line() -> None:
    one, two = os.urandom(20_000), os.urandom(9_000)
    merged = _interleave(
        "srun: job 7 queued\n", frame("1", "gpu02", two), frame("0", "gpu01", one), "noise\n"
    )
    assert unframe(merged.splitlines(keepends=True)) == [("gpu01", one), ("gpu02", two)]


def test_a_frame_cut_short_names_its_node() -> None:
    text = frame("3", "gpu04", os.urandom(10_000))
    with pytest.raises(SnapshotError, match=r"gpu04 \(task 3\) was cut short"):
        unframe(text.splitlines()[:-2])


def test_a_damaged_frame_names_its_node() -> None:
    lines = frame("0", "gpu01", os.urandom(10_000)).splitlines()
    lines[1] = lines[1][:-4] + "AAAA"
    with pytest.raises(SnapshotError, match=r"gpu01 \(task 0\) arrived damaged"):
        unframe(lines)
