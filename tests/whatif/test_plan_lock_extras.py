"""``plan lock``'s ``lock-requirement-unmet`` under extras: a locked wheel installed with an
extra is held to the requirements of that extra (``extra == "x"`` evaluated as pip and uv
do), and never to those of an extra it is not installed with.

``alpha`` requires ``beta`` under its extra ``x`` and ``gamma`` under ``y``; the project wants
``alpha[x]`` (and ``alpha[y]`` under its own extra ``full``). Locks made by real uv against
an index on 127.0.0.1, then edited by hand to drop a package; requirements files of pins.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.httpindex import FileServer, serve
from support.uvprojects import uv, uv_env
from support.venvs import LibdoctorRun, run_libdoctor_inprocess
from support.wheels import build_wheel


@dataclass
class Index:
    server: FileServer
    root: Path

    @property
    def simple(self) -> str:
        return self.server.url + "/simple"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    root = tmp_path_factory.mktemp("planlock-extras")
    requires = ['beta==1.0; extra == "x"', 'gamma==1.0; extra == "y"']
    wheels = [
        build_wheel(root / "w", "alpha", "1.0", {"alpha/__init__.py": b""}, requires=requires),
        build_wheel(root / "w", "beta", "1.0", {"beta/__init__.py": b""}),
        build_wheel(root / "w", "gamma", "1.0", {"gamma/__init__.py": b""}),
    ]
    with serve() as server:
        for wheel in wheels:
            server.add_wheel(wheel)
        yield Index(server, root)


@pytest.fixture(scope="module")
def uv_lock(index: Index) -> Path:
    project = index.root / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "seed"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n'
        'dependencies = ["alpha[x]==1.0"]\n'
        '[project.optional-dependencies]\nfull = ["alpha[y]==1.0"]\n'
        "[tool.uv]\npackage = false\n"
    )
    uv(["lock", "--default-index", index.simple], project, uv_env(index.root / "uv-cache"))
    return project / "uv.lock"


def without(lock: Path, name: str, directory: Path) -> Path:
    """LOCK with NAME's ``[[package]]`` and every edge to it deleted: a lock edited by hand."""
    blocks = re.split(r"(?m)^(?=\[\[package\]\])", lock.read_text())
    kept = [b for b in blocks if not b.startswith(f'[[package]]\nname = "{name}"\n')]
    assert len(kept) == len(blocks) - 1
    text = re.sub(rf'(?m)^\s*\{{ name = "{name}"[^\n]*\n', "", "".join(kept))
    directory.mkdir()
    (directory / "uv.lock").write_text(text)
    return directory / "uv.lock"


def plan(index: Index, lock: Path, *more: str) -> tuple[LibdoctorRun, Any]:
    run = run_libdoctor_inprocess(
        "plan", "lock", lock, "--cache-dir", index.root / "cache", "--index-url", index.simple,
        "--json", *more,
    )  # fmt: skip
    assert run.rc in (0, 1), run.stderr
    return run, json.loads(run.stdout)


def unmet(doc: Any) -> list[str]:
    return sorted(
        f["evidence"]["requirement"]
        for f in doc["findings"]
        if f["code"] == "lock-requirement-unmet"
    )


def test_uv_lock_holds_the_extras_its_edges_select(index: Index, uv_lock: Path) -> None:
    run, doc = plan(index, uv_lock)
    assert (run.rc, doc["findings"]) == (0, []), run.stdout  # gamma (extra y) is not asked
    run, doc = plan(index, uv_lock, "--extra", "full")
    assert (run.rc, doc["findings"]) == (0, []), run.stdout
    no_beta = without(uv_lock, "beta", index.root / "no-beta")
    run, doc = plan(index, no_beta)
    assert run.rc == 1
    assert unmet(doc) == ['beta==1.0; extra == "x"']
    (finding,) = doc["findings"]
    assert finding["distribution"]["name"] == "alpha"
    assert "requires beta==1.0, which the lock does not hold" in finding["message"]


def test_uv_lock_the_projects_extra_selects_alpha_y(index: Index, uv_lock: Path) -> None:
    no_gamma = without(uv_lock, "gamma", index.root / "no-gamma")
    run, doc = plan(index, no_gamma)
    assert (run.rc, doc["findings"]) == (0, []), run.stdout  # full not synced: y not asked
    run, doc = plan(index, no_gamma, "--extra", "full")
    assert run.rc == 1
    assert unmet(doc) == ['gamma==1.0; extra == "y"']


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["alpha[x]==1.0"], ['beta==1.0; extra == "x"']),
        (["alpha[x]==1.0", "beta==1.0"], []),
        (["alpha==1.0"], []),
        (["alpha[X]==1.0", "alpha[y]==1.0", "beta==1.0"], ['gamma==1.0; extra == "y"']),
    ],
    ids=["x-without-beta", "x-with-beta", "no-extra", "extras-of-two-lines"],
)
def test_requirements_line_extras(
    index: Index, tmp_path: Path, lines: list[str], expected: list[str]
) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text("".join(f"{line}\n" for line in lines))
    run, doc = plan(index, lock)
    assert unmet(doc) == expected, run.stdout
    assert run.rc == (1 if expected else 0)


def test_pylock_records_no_extras_and_raises_no_false_alarm(index: Index, tmp_path: Path) -> None:
    """A pylock.toml installs what its markers select: alpha alone is installed bare."""
    url = f"{index.server.url}/files/alpha-1.0-py3-none-any.whl"
    lock = tmp_path / "pylock.toml"
    lock.write_text(
        'lock-version = "1.0"\ncreated-by = "test"\nextras = ["x"]\n'
        f'[[packages]]\nname = "alpha"\nversion = "1.0"\nwheels = [{{ url = "{url}" }}]\n'
    )
    run, doc = plan(index, lock, "--extra", "x")
    assert (run.rc, doc["findings"]) == (0, []), run.stdout
