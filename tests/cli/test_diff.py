"""Issue 15: ``snapshot`` and ``diff`` on real venvs, each change reported once, nothing else.

Yesterday's environment holds a torch-like extension module whose RPATH finds
``libcudnn.so.9`` in ``cudnn-a`` (``support.seed``), a pure package and a package with a data
file. Today one package is upgraded, one file is altered under the same version, and the
distribution the library resolves to is uninstalled.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.seed import LIB_REL, build_seed_wheels
from support.venvs import Libdoctor, Venv, VenvFactory, pip_install, pip_uninstall
from support.wheels import WheelFactory


def _yesterday(new_venv: VenvFactory, make_wheel: WheelFactory) -> tuple[Venv, dict[str, Path]]:
    seed = build_seed_wheels(make_wheel)
    wheels = {
        "plain1": make_wheel("ldt-plain", "1.0", {"ldt_plain/__init__.py": b"V = 1\n"}),
        "plain2": make_wheel("ldt-plain", "2.0", {"ldt_plain/__init__.py": b"V = 2\n"}),
        "data": make_wheel(
            "ldt-data", "1.0", {"ldt_data/__init__.py": b"", "ldt_data/table.txt": b"abcdef\n"}
        ),
    }
    venv = new_venv("yesterday")
    pip_install(venv, seed.cudnn_a, seed.torchlike, wheels["plain1"], wheels["data"])
    return venv, wheels


def _today(venv: Venv, wheels: dict[str, Path]) -> None:
    pip_install(venv, wheels["plain2"])  # upgrade
    (venv.site_packages / "ldt_data/table.txt").write_bytes(b"abcdef and more\n")  # alter
    pip_uninstall(venv, "cudnn-a")  # the distribution libcudnn.so.9 resolves to


def _snapshot(libdoctor: Libdoctor, venv: Venv, out: Path, *extra: str) -> bytes:
    run = libdoctor("snapshot", venv.path, "-o", out, *extra)
    assert run.rc == 0, run.describe()
    return out.read_bytes()


def test_snapshot_is_deterministic_and_gzip_too(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    venv, _ = _yesterday(new_venv, make_wheel)
    plain = _snapshot(libdoctor, venv, tmp_path / "a.json")
    assert _snapshot(libdoctor, venv, tmp_path / "b.json") == plain
    zipped = _snapshot(libdoctor, venv, tmp_path / "a.json.gz")
    assert _snapshot(libdoctor, venv, tmp_path / "b.json.gz") == zipped
    assert zipped[4:8] == b"\0\0\0\0"  # mtime 0
    assert not zipped[3] & 0x08  # no file name
    assert gzip.decompress(zipped) == plain
    stdout = libdoctor("snapshot", venv.path)
    assert stdout.rc == 0 and stdout.stdout.encode() == plain
    doc = json.loads(plain)
    assert (doc["schema"], doc["schema_version"]) == ("libdoctor-snapshot", 1)
    dists = {d["name"]: d for d in doc["distributions"]}
    assert dists["torchlike"]["requested"] and dists["torchlike"]["installer"] == "pip"
    assert dists["ldt-data"]["files"][-1][:2] == ["ldt_data/table.txt", 7]
    cudnn = [lib for lib in doc["libraries"] if lib["name"] == "libcudnn.so.9"]
    assert [(lib["owners"], lib["path"].endswith(LIB_REL)) for lib in cudnn] == [
        ([["cudnn-a", "9.1.0"]], True)
    ]
    assert not any("/" + str(venv.path).lstrip("/") in json.dumps(d) for d in doc["distributions"])


def _diff(libdoctor: Libdoctor, a: Path, b: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    run = libdoctor("diff", a, b, "--json", *extra)
    assert run.rc in (0, 1), run.describe()
    return run.rc, run.json()


def _yesterday_then_today(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor, yesterday: Path
) -> Venv:
    """Yesterday's venv snapshotted to YESTERDAY, then changed into today's."""
    venv, wheels = _yesterday(new_venv, make_wheel)
    _snapshot(libdoctor, venv, yesterday)
    assert _diff(libdoctor, yesterday, venv.path)[0] == 0  # a live env against its snapshot
    _today(venv, wheels)
    return venv


def test_diff_reports_each_change_once_and_nothing_else(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    yesterday = tmp_path / "yesterday.json.gz"
    venv = _yesterday_then_today(new_venv, make_wheel, libdoctor, yesterday)
    today = tmp_path / "today.json"
    _snapshot(libdoctor, venv, today)
    for b in (today, venv.path):
        rc, doc = _diff(libdoctor, yesterday, b)
        assert rc == 1
        assert [
            (d["name"], d["change"], d["before"], d["after"]) for d in doc["distributions"]
        ] == [
            ("cudnn-a", "removed", ["9.1.0"], []),
            ("ldt-plain", "upgraded", ["1.0"], ["2.0"]),
        ]
        assert [(f["distribution"], f["path"], f["change"]) for f in doc["files"]] == [
            ("ldt-data 1.0", "ldt_data/table.txt", "changed")
        ]
        assert [(f["before"]["size"], f["after"]["size"]) for f in doc["files"]] == [(7, 16)]
        assert doc["metadata"] == []
        [lib] = doc["libraries"]
        assert lib["name"] == "libcudnn.so.9"
        assert [o for b_ in lib["before"] for o in b_["owners"]] == [["cudnn-a", "9.1.0"]]
        assert [a["path"] for a in lib["after"]] == [None]
        new = sorted((f["code"], f["distribution"]) for f in doc["findings"]["new"])
        assert new == [
            ("altered-files", "ldt-data 1.0"),
            ("requirement-missing", "torchlike 1.0"),
            ("unresolved-library", "torchlike 1.0"),
        ]
        assert doc["findings"]["gone"] == []


def test_diff_text_is_grouped_by_distribution(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    yesterday = tmp_path / "yesterday.json"
    venv = _yesterday_then_today(new_venv, make_wheel, libdoctor, yesterday)
    run = libdoctor("diff", yesterday, venv.path)
    assert run.rc == 1, run.describe()
    body = run.stdout.split("\n\n")[1].splitlines()
    headings = [line for line in body if not line.startswith(" ")]
    assert headings == [
        "cudnn-a 9.1.0 removed",
        "ldt-data 1.0",
        "ldt-plain 1.0 → 2.0 (upgraded)",
        "torchlike 1.0",
    ]
    assert "  ldt_data/table.txt: 7 bytes → 16 bytes" in body
    assert any(line.startswith("  libcudnn.so.9: ") and "→ not found" in line for line in body)
    assert run.stdout.rstrip().endswith("7 differences")
    assert len(run.stdout.splitlines()) < 25


def test_same_size_change_needs_deep(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    venv, _ = _yesterday(new_venv, make_wheel)
    cache = ("--cache-dir", str(tmp_path / "cache"))
    _snapshot(libdoctor, venv, tmp_path / "plain.json")
    _snapshot(libdoctor, venv, tmp_path / "deep.json", "--deep", *cache)
    (venv.site_packages / "ldt_data/table.txt").write_bytes(b"ABCDEF\n")  # same size
    assert _diff(libdoctor, tmp_path / "plain.json", venv.path)[0] == 0
    rc, doc = _diff(libdoctor, tmp_path / "deep.json", venv.path, "--deep", *cache)
    assert rc == 1
    assert [(f["path"], f["change"]) for f in doc["files"]] == [("ldt_data/table.txt", "changed")]
    assert [f["code"] for f in doc["findings"]["new"]] == ["altered-files"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "not a snapshot (not JSON"),
        (b'{"schema": "libdoctor-snapshot", "schema_vers', "not a snapshot (not JSON"),
        (b"\x1f\x8b\x08\x00garbage", "not a readable gzip file"),
        (b"[1, 2]", "is not an object"),
        (b'{"schema": "libdoctor-snapshot", "schema_version": 99}', "schema_version 99"),
        (b'{"schema": "other"}', "not a libdoctor snapshot"),
    ],
)
def test_bad_snapshot_is_one_line_exit_2(
    content: bytes, message: str, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    for args in (("diff", bad, bad), ("fleet", bad, bad)):
        run = libdoctor(*args)
        assert run.rc == 2, run.describe()
        assert run.stdout == "" and len(run.stderr.splitlines()) == 1, run.describe()
        assert message in run.stderr and "Traceback" not in run.stderr


def test_damaged_field_is_named(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    venv, _ = _yesterday(new_venv, make_wheel)
    good = json.loads(_snapshot(libdoctor, venv, tmp_path / "good.json"))
    good["distributions"][1]["files"][0][1] = "big"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(good))
    run = libdoctor("diff", bad, tmp_path / "good.json")
    assert run.rc == 2 and len(run.stderr.splitlines()) == 1, run.describe()
    assert "distributions[1].files[0] is not [path, size, hash" in run.stderr
    truncated = tmp_path / "cut.json.gz"
    truncated.write_bytes(gzip.compress(json.dumps(good).encode())[:-40])
    run = libdoctor("diff", truncated, tmp_path / "good.json")
    assert run.rc == 2 and "not a readable gzip file" in run.stderr, run.describe()


def test_diff_against_an_interpreter(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    yesterday = tmp_path / "yesterday.json"
    venv = _yesterday_then_today(new_venv, make_wheel, libdoctor, yesterday)
    rc, doc = _diff(libdoctor, yesterday, venv.python)
    assert rc == 1 and doc["b"]["environment"] == str(venv.path)
    assert len(doc["distributions"]) == 2 and len(doc["files"]) == 1


TORCH_ENV = Path(os.environ.get("LIBDOCTOR_TORCH_ENV", "/work/envs/torchenv"))


@pytest.mark.realenv
def test_torch_env_snapshot_and_a_damaged_copy(libdoctor: Libdoctor, tmp_path: Path) -> None:
    """The 22k-file torch env: the same bytes twice, under 1 MB gzip'd; a hard-link copy
    elsewhere with libcudnn.so.9 deleted differs by that file, its library and findings,
    and by the scripts whose shebang still names the original environment."""
    if not (TORCH_ENV / "pyvenv.cfg").is_file():
        pytest.skip(f"no torch environment at {TORCH_ENV} (set LIBDOCTOR_TORCH_ENV)")
    snap = tmp_path / "torch.json.gz"
    first = _snapshot(libdoctor, Venv(TORCH_ENV), snap)
    assert _snapshot(libdoctor, Venv(TORCH_ENV), snap) == first
    assert len(first) < 1_000_000
    assert _diff(libdoctor, snap, TORCH_ENV)[0] == 0
    copy = tmp_path / "env"
    subprocess.run(["cp", "-al", str(TORCH_ENV), str(copy)], check=True)
    (copy / "lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9").unlink()
    rc, doc = _diff(libdoctor, snap, copy)
    assert rc == 1 and doc["distributions"] == [] and doc["metadata"] == []
    scripts = [f for f in doc["files"] if f["path"].startswith("../../../bin/")]
    assert scripts and all(f["after"]["hash"].startswith("sha256=") for f in scripts)
    [cudnn] = [f for f in doc["files"] if f not in scripts]
    assert (cudnn["distribution"], cudnn["change"]) == ("nvidia-cudnn-cu13 9.24.0.43", "missing")
    assert [lib["name"] for lib in doc["libraries"]] == ["libcudnn.so.9"]
    new = {f["code"] for f in doc["findings"]["new"]}
    assert new == {"missing-files", "unresolved-library"}
    assert doc["findings"]["gone"] == []
