"""Issue 26: the snapshot writer, made faster, writes the same bytes as the plain one it
replaced (kept below as the reference): file rows for plain, missing, altered, repeated,
non-ASCII and bytecode rows and a script naming its prefix, with and without --deep; the
gzip'd file is the same document.

The environment is written by hand (a dist-info with its RECORD, as pip lays it out): the
writer's input is the model of what is on disk, not how it got there.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from libdoctor.analysis import run
from libdoctor.analysis import snapshot as snap_module
from libdoctor.analysis.snapshot import FileRow, decode, encode, snapshot_target, take_snapshot
from libdoctor.environment.paths import display
from libdoctor.environment.target import from_directory
from support.wheels import record_hash


def _dist(prefix: Path, name: str, files: dict[str, bytes], extra_rows: list[str]) -> None:
    site = prefix / "lib" / "python3.11" / "site-packages"
    info = f"{name}-1.0.dist-info"
    files = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/INSTALLER": b"pip\n",
    }
    rows = []
    for relative, data in files.items():
        path = site / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        rows.append(f"{relative},{record_hash(data)},{len(data)}")
    rows += extra_rows
    rows.append(f"{info}/RECORD,,")
    (site / info / "RECORD").write_text("\n".join(rows) + "\n")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = tmp_path_factory.mktemp("writer") / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.9\n")
    script = f"#!{prefix}/bin/python\nimport sys\n".encode()
    _dist(
        prefix,
        "alpha",
        {
            "alpha/__init__.py": b"A = 1\n",
            "alpha/z_last.py": b"Z = 26\n",
            "alpha/caf\u00e9.py": b"# non-ASCII name\n",
            "alpha/gone.py": b"gone\n",
            "alpha/__pycache__/x.cpython-311.pyc": b"\0pyc",
            "../../../bin/alpha-tool": script,
        },
        ["alpha/__init__.py,,", "alpha/never.py,sha256=" + "A" * 43 + ",3"],
    )
    _dist(prefix, "beta", {"beta/data.txt": b"data\n", "beta/b.py": b"B = 2\n"}, [])
    site = prefix / "lib" / "python3.11" / "site-packages"
    (site / "alpha" / "gone.py").unlink()
    (site / "beta" / "data.txt").write_bytes(b"DATA\n")  # same size, other bytes
    (site / "beta" / "b.py").write_bytes(b"B = 22\n")  # other size
    return prefix


# The writer as it was (issue 15), row by row: the reference.
def _reference_rows(report: run.Report, deep: bool) -> list[tuple[str, tuple[FileRow, ...]]]:
    env, disk, digests = report.environment, report.disk, report.digests
    assert env is not None and disk is not None
    prefix = env.target.prefix
    scripts = tuple(os.path.join(prefix, d) for d in ("bin", "Scripts"))
    pycache = f"{os.sep}__pycache__{os.sep}"
    out = []
    for dist in env.distributions:
        rows = []
        for claim in env.claims_of(dist):
            if claim.path.endswith(".pyc") and pycache in claim.path:
                continue
            state = disk.stat(claim.path)
            size = state.size if state.is_file and not state.error else None
            entry = claim.entry
            if size is not None and claim.path.startswith(scripts):
                row = snap_module._script_row(claim.path, entry.path, prefix)
                if row is not None:
                    rows.append(row)
                    continue
            shown = entry.path if entry.path.isascii() else display(entry.path)
            if deep:
                digest = None
                if entry.hash and digests is not None and size is not None:
                    digest = digests.get((claim.path, entry.hash.partition("=")[0]))
                rows.append(FileRow(shown, size, entry.hash, digest))
            else:
                rows.append(FileRow(shown, size, entry.hash))
        rows.sort(key=lambda row: row.path)
        out.append((dist.metadata_dir, tuple(rows)))
    return out


@pytest.mark.parametrize("deep", [False, True])
def test_the_writer_writes_what_the_plain_one_did(env: Path, deep: bool) -> None:
    target = from_directory(env, "test")
    report = run.run_check(target, run.CheckOptions(deep=deep, facts=True))
    snap = take_snapshot(report, "node", deep)
    expected = {os.path.basename(meta): rows for meta, rows in _reference_rows(report, deep)}
    assert {d.metadata: d.files for d in snap.distributions} == expected
    rows = {row.path: row for d in snap.distributions for row in d.files}
    assert rows["alpha/gone.py"].size is None
    assert (rows["../../../bin/alpha-tool"].hash or "").startswith(snap_module.PORTABLE)
    assert "alpha/caf\u00e9.py" in rows
    assert (rows["beta/data.txt"].digest is not None) is deep
    # As `libdoctor snapshot` takes it: the rows made while the loader work runs.
    taken = snapshot_target(target, node="node", deep=deep, environ={}, forked=False)
    assert taken.distributions == snap.distributions
    data = encode(snap)
    assert gzip.decompress(encode(snap, gzipped=True)) == data
    assert encode(decode(data, "test")) == data  # it reads back as it was written


def test_the_parsed_files_cache_changes_no_byte(env: Path, tmp_path: Path) -> None:
    """`snapshot` reads RECORDs and ELF files through check's cache now: cold, warm and
    without it, the same bytes."""
    target = from_directory(env, "test")

    def taken(cache: str | None) -> bytes:
        snap = snapshot_target(target, node="node", cache_dir=cache, environ={}, forked=False)
        return encode(snap)

    plain = taken(None)
    assert taken(str(tmp_path / "cache")) == plain  # cold: the cache written
    assert (tmp_path / "cache").is_dir()
    assert taken(str(tmp_path / "cache")) == plain  # warm: read from it
