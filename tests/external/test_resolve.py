"""``plan install REQ --index-url URL``: the target's pip resolves through a real PEP 503 index
(served in the test), and the wheel it picks is read by range requests, never downloaded:
the plan still names the overwrite of another distribution's file.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.httpindex import FileServer, Request, serve
from support.repairs import Cli
from support.venvs import Venv, VenvFactory, diff_snapshots, pip_install, snapshot
from support.wheels import WheelFactory

LIB = "shared/lib/libshared.so.1"
NOISE = random.Random(5).randbytes(4 * 1024 * 1024)  # incompressible: a 4 MB wheel


@pytest.fixture
def index(make_wheel: WheelFactory) -> Iterator[FileServer]:
    """An index serving incoming-b 2.0, which writes over owner-a's library."""
    incoming = make_wheel(
        "incoming-b",
        "2.0",
        {"shared/__init__.py": b"", LIB: b"B" * 5000, "incoming_b/blob.bin": NOISE},
    )
    with serve() as server:
        server.add_wheel(incoming)
        yield server


@pytest.fixture
def owner_venv(new_venv: VenvFactory, make_wheel: WheelFactory) -> Venv:
    venv = new_venv("owner")
    owner = make_wheel("owner-a", "1.0", {"shared/__init__.py": b"", LIB: b"A" * 4000})
    pip_install(venv, owner)
    return venv


def plan(cli: Cli, venv: Venv, server: FileServer) -> Any:
    run = cli(
        "plan",
        "install",
        "incoming-b==2.0",
        venv.path,
        "--index-url",
        server.url + "/simple",
        "--json",
        env={"PIP_NO_INDEX": None},  # the test's pip env is offline; this index is local
    )
    assert run.rc == 1, run.describe()
    return run


def wheel_requests(server: FileServer) -> list[Request]:
    """libdoctor's requests for the wheel (pip < 23.3 downloads it during --dry-run itself)."""
    return [r for r in server.log if r.path.endswith(".whl") and r.agent.startswith("libdoctor/")]


def test_plan_install_from_an_index_reads_the_wheel_by_range(
    owner_venv: Venv, index: FileServer, tmp_path: Path
) -> None:
    cli = Cli(tmp_path / "home")
    before = snapshot(owner_venv.path)
    run = plan(cli, owner_venv, index)
    doc = run.json()["plan"]
    assert doc["subjects"] == ["incoming-b 2.0"]
    overwrites = {o["path"]: o for o in doc["overwrites"]}
    lib = overwrites[str(owner_venv.site_packages / LIB)]
    assert lib["owners"] == [{"name": "owner-a", "version": "1.0"}]
    assert lib["identical"] is False
    assert overwrites[str(owner_venv.site_packages / "shared/__init__.py")]["identical"] is True
    assert [f["code"] for f in doc["new_findings"]] == ["shared-path"]
    # The wheel was never fetched whole: every request for it asked for a range.
    asked = wheel_requests(index)
    assert asked and all(r.range is not None for r in asked), asked
    assert sum(r.sent for r in asked) < len(NOISE) * 0.05
    assert "incoming-b 2.0: read " in run.stderr and " by range (" in run.stderr, run.stderr
    (pip,) = owner_venv.site_packages.glob("pip-*.dist-info")
    major, minor = (int(p) for p in pip.name[4:].split(".")[:2])
    assert ("downloads every wheel it resolves" in run.stderr) == ((major, minor) < (23, 3))
    assert diff_snapshots(before, snapshot(owner_venv.path)) == []

    again = plan(cli, owner_venv, index)
    assert wheel_requests(index) == asked  # the second plan read the file list from the cache
    assert "from the cache" in again.stderr
    assert again.json()["plan"]["overwrites"] == doc["overwrites"]


def test_a_pip_from_23_3_on_resolves_with_fast_deps(
    owner_venv: Venv, make_wheel: WheelFactory, tmp_path: Path
) -> None:
    """From an index without PEP 658 metadata, pip >= 23.3 is asked for fast-deps: it reads
    the wheel's METADATA by range requests too. (The venv's pip is told apart by its
    dist-info's name, made 99.0 here; every pip since 20.2 has the feature.)"""
    (dist_info,) = owner_venv.site_packages.glob("pip-*.dist-info")
    dist_info.rename(dist_info.with_name("pip-99.0.dist-info"))
    incoming = make_wheel("incoming-b", "2.0", {"shared/__init__.py": b"", LIB: b"B" * 5000})
    with serve() as server:
        server.add_wheel(incoming, metadata=False)
        run = plan(Cli(tmp_path / "home"), owner_venv, server)
    pip_ranges = [r for r in server.log if r.agent.startswith("pip/") and r.range is not None]
    assert pip_ranges, server.log
    assert "downloads every wheel" not in run.stderr
    assert run.json()["plan"]["overwrites"]
