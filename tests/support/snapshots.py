"""Snapshots made without an environment, for the fleet tests that need many of them: the
values built here, the bytes written by libdoctor's own writer (``snapshot.encode``)."""

from __future__ import annotations

import dataclasses

from libdoctor.analysis.snapshot import (
    DistRecord,
    FileRow,
    FindingRecord,
    LibraryRecord,
    Snapshot,
)

__all__ = ["changed_row", "made_snapshot", "without_dist"]


def made_snapshot(dists: int, rows: int, node: str = "node", prefix: str = "/envs/a") -> Snapshot:
    """DISTS distributions of ROWS file rows each, two libraries, one finding."""
    records = tuple(
        DistRecord(
            name=f"pkg-{d:03}",
            version="1.0",
            key=f"pkg-{d:03}",
            installer="pip",
            requested=d == 0,
            extras=(),
            direct_url=None,
            tags=("py3-none-any",),
            site="lib/python3.11/site-packages",
            metadata=f"pkg_{d:03}-1.0.dist-info",
            record_error=None,
            files=tuple(
                FileRow(f"pkg_{d:03}/module_{r:05}.py", 1000 + r, f"sha256={d:03}{r:040}")
                for r in range(rows)
            ),
        )
        for d in range(dists)
    )
    libraries = (
        LibraryRecord("libc.so.6", None, None, (), None, ("pkg_000/_native.so",)),
        LibraryRecord(
            "libpkg.so.1",
            "lib/python3.11/site-packages/pkg_000/libpkg.so.1",
            "libpkg.so.1",
            (("pkg-000", "1.0"),),
            None,
            ("pkg_000/_native.so",),
        ),
    )
    finding = FindingRecord("missing-files", "error", "pkg-001 1.0", ("a.py",), "gone")
    return Snapshot(
        node=node,
        prefix=prefix,
        deep=False,
        interpreter={"version": "3.11.7", "tag": "cp311"},
        platform={"system": "Linux", "machine": "x86_64"},
        distributions=records,
        libraries=libraries,
        frameworks=(),
        cuda_packages=(),
        findings=(finding,),
    )


def changed_row(snap: Snapshot, dist: int, row: int) -> Snapshot:
    """SNAP with one file's size changed."""
    dists = list(snap.distributions)
    files = list(dists[dist].files)
    files[row] = files[row]._replace(size=(files[row].size or 0) + 1)
    dists[dist] = dataclasses.replace(dists[dist], files=tuple(files))
    return dataclasses.replace(snap, distributions=tuple(dists))


def without_dist(snap: Snapshot, dist: int) -> Snapshot:
    """SNAP with one distribution gone."""
    dists = snap.distributions[:dist] + snap.distributions[dist + 1 :]
    return dataclasses.replace(snap, distributions=dists)
