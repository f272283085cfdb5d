"""``plan lock``'s findings beyond the seed's (``test_plan_lock``), and what cannot be planned.

``lock-requirement-unmet`` in each lock format, extras included: a locked wheel installed
with an extra is held to the requirements of that extra (``extra == "x"`` evaluated as pip
and uv do), never to those of an extra it is not installed with. ``lock-path-conflict`` of
identical bytes only (info), and ``lock-cuda-mixed-major`` without a framework (warning).

``alpha`` requires ``beta`` under its extra ``x`` and ``gamma`` under ``y``; ``epsilon``
requires ``beta>=1,<2``; ``zeta`` requires ``alpha[y]`` (alpha is then installed with y, as
a resolver takes it); the project wants ``alpha[x]`` (and ``alpha[y]`` under its own extra
``full``). Locks made by real uv against an index on 127.0.0.1, then edited by hand to drop
a package; pylock.toml files and requirements files of pins.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.httpindex import FileServer, serve
from support.uvprojects import lock_project
from support.venvs import LibdoctorRun, run_libdoctor_inprocess
from support.wheels import build_wheel


@dataclass
class Index:
    server: FileServer
    root: Path
    wheels: dict[tuple[str, str], Path]  # (name, version) -> wheel file

    @property
    def simple(self) -> str:
        return self.server.url + "/simple"

    def pylock(self, pins: list[tuple[str, str]], directory: Path) -> Path:
        text = 'lock-version = "1.0"\ncreated-by = "test"\n'
        for name, version in pins:
            wheel = self.wheels[(name, version)]
            digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
            text += (
                f'[[packages]]\nname = "{name}"\nversion = "{version}"\n'
                f'wheels = [{{ url = "{self.server.url}/files/{wheel.name}", '
                f'hashes = {{ sha256 = "{digest}" }} }}]\n'
            )
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "pylock.toml").write_text(text)
        return directory / "pylock.toml"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    root = tmp_path_factory.mktemp("planlock-extras")
    requires = {
        "alpha": ['beta==1.0; extra == "x"', 'gamma==1.0; extra == "y"'],
        "epsilon": ["beta<2,>=1.0"],
        "zeta": ["alpha[y]==1.0"],
    }
    pins = [("alpha", "1.0"), ("beta", "1.0"), ("beta", "2.0"), ("gamma", "1.0"),
            ("epsilon", "1.0"), ("zeta", "1.0")]  # fmt: skip
    wheels = {
        (n, v): build_wheel(
            root / "w", n, v, {f"{n}/__init__.py": v.encode()}, requires=requires.get(n, [])
        )
        for n, v in pins
    }
    torch = {"torch/__init__.py": b"", "torch/lib/libtorch_cuda.so": b"\x7fELF torch"}
    wheels[("torch", "2.9.1+cu128")] = build_wheel(root / "w", "torch", "2.9.1+cu128", torch)
    for name, lib in (("nvidia-curand-cu12", "curand"), ("nvidia-cufft-cu13", "cufft")):
        files = {"nvidia/__init__.py": b"", f"nvidia/{lib}/lib/lib{lib}.so": name.encode()}
        wheels[(name, "1.0")] = build_wheel(root / "w", name, "1.0", files)
    with serve() as server:
        for wheel in wheels.values():
            server.add_wheel(wheel)
        yield Index(server, root, wheels)


@pytest.fixture(scope="module")
def uv_lock(index: Index) -> Path:
    pyproject = (
        '[project]\nname = "seed"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n'
        'dependencies = ["alpha[x]==1.0"]\n'
        '[project.optional-dependencies]\nfull = ["alpha[y]==1.0"]\n'
        "[tool.uv]\npackage = false\n"
    )
    return lock_project(index.root / "project", pyproject, index.simple, index.root / "uv-cache")


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
        (["zeta==1.0", "alpha==1.0"], ['gamma==1.0; extra == "y"']),
        (["zeta==1.0", "alpha==1.0", "gamma==1.0"], []),
    ],
    ids=["x-without-beta", "x-with-beta", "no-extra", "extras-of-two-lines",
         "y-from-zeta-without-gamma", "y-from-zeta-with-gamma"],
)  # fmt: skip
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
    lock = index.pylock([("alpha", "1.0")], tmp_path)
    lock.write_text(lock.read_text().replace("\n[[packages]]", '\nextras = ["x"]\n[[packages]]', 1))
    run, doc = plan(index, lock, "--extra", "x")
    assert (run.rc, doc["findings"]) == (0, []), run.stdout


@pytest.mark.parametrize(
    ("pins", "expected", "locked"),
    [
        ([("epsilon", "1.0")], ["beta<2,>=1.0"], None),
        ([("epsilon", "1.0"), ("beta", "2.0")], ["beta<2,>=1.0"], "2.0"),
        ([("epsilon", "1.0"), ("beta", "1.0")], [], None),
        ([("zeta", "1.0"), ("alpha", "1.0")], ['gamma==1.0; extra == "y"'], None),
    ],
    ids=["missing", "another-version", "held", "an-extra-a-wheel-asks-for"],
)
def test_pylock_requirements(
    index: Index, tmp_path: Path, pins: list[tuple[str, str]], expected: list[str],
    locked: str | None,
) -> None:  # fmt: skip
    run, doc = plan(index, index.pylock(pins, tmp_path))
    assert unmet(doc) == expected, run.stdout
    assert run.rc == (1 if expected else 0)
    if expected:
        (finding,) = doc["findings"]
        assert finding["evidence"]["locked"] == locked
        assert finding["distribution"]["name"] == ("alpha" if "gamma" in expected[0] else "epsilon")


def test_cuda_wheels_of_two_majors_sharing_identical_bytes(index: Index, tmp_path: Path) -> None:
    """No framework: CUDA wheels of two majors are a warning; their shared
    ``nvidia/__init__.py`` (the same bytes) is an info; each once."""
    pins = [("nvidia-curand-cu12", "1.0"), ("nvidia-cufft-cu13", "1.0")]
    run, doc = plan(index, index.pylock(pins, tmp_path))
    assert run.rc == 1
    codes = sorted((f["code"], f["severity"]) for f in doc["findings"])
    assert codes == [("lock-cuda-mixed-major", "warning"), ("lock-path-conflict", "info")]
    mixed, shared = sorted(doc["findings"], key=lambda f: str(f["code"]))
    assert mixed["evidence"]["majors"] == {"12": ["nvidia-curand-cu12 1.0"],
                                           "13": ["nvidia-cufft-cu13 1.0"]}  # fmt: skip
    assert shared["paths"] == ["nvidia/__init__.py"]
    assert shared["evidence"]["shared_by"] == {
        "nvidia/__init__.py": ["nvidia-cufft-cu13 1.0", "nvidia-curand-cu12 1.0"]
    }


def test_a_frameworks_build_from_its_local_version_label(index: Index, tmp_path: Path) -> None:
    """torch 2.9.1+cu128 (no torch/version.py read: the label says the build) beside a
    CUDA 13 wheel: the error, its build from the label."""
    pins = [("torch", "2.9.1+cu128"), ("nvidia-curand-cu12", "1.0"), ("nvidia-cufft-cu13", "1.0")]
    run, doc = plan(index, index.pylock(pins, tmp_path))
    assert run.rc == 1
    (mixed,) = [f for f in doc["findings"] if f["code"] == "lock-cuda-mixed-major"]
    assert mixed["severity"] == "error"
    evidence = mixed["evidence"]
    assert (evidence["build"], evidence["source"]) == ("12.8", "local version label")
    assert "fix" not in mixed  # a pylock.toml is edited and locked again: no command


def test_uv_lock_default_groups_are_planned(index: Index) -> None:
    """A CUDA 13 wheel only in the project's dev group: planned (uv's default groups), and
    not with ``--no-dev``."""
    pyproject = (
        '[project]\nname = "seed"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n'
        'dependencies = ["nvidia-curand-cu12==1.0"]\n'
        '[dependency-groups]\ndev = ["nvidia-cufft-cu13==1.0"]\n[tool.uv]\npackage = false\n'
    )
    lock = lock_project(index.root / "groups", pyproject, index.simple, index.root / "uv-cache")
    run, doc = plan(index, lock)
    assert run.rc == 1
    assert [f["code"] for f in doc["findings"] if f["severity"] == "warning"] == [
        "lock-cuda-mixed-major"
    ]
    assert doc["lock"]["synced_with"] == "extras none; groups dev"
    run, doc = plan(index, lock, "--no-dev")
    assert (run.rc, doc["findings"]) == (0, []), run.stdout


@pytest.mark.parametrize(
    ("table", "severity", "why"),
    [
        ('sdist = { url = "https://example.invalid/x-1.0.tar.gz" }', "info",
         "only an sdist: the installer would build it"),
        ('wheels = [{ url = "https://example.invalid/x-1.0-cp311-cp311-win_amd64.whl" }]',
         "warning", "no locked file fits Python 3.11, manylinux_2_28_x86_64"),
        ('directory = { path = "src/x" }', None, None),
        ('vcs = { type = "git", url = "https://example.invalid/x.git", commit-id = "ab" }',
         "info", "locked as a vcs source: its files are unknown until it is built"),
    ],
    ids=["sdist", "other-platform", "directory", "vcs"],
)  # fmt: skip
def test_what_cannot_be_told_is_said(
    tmp_path: Path, table: str, severity: str | None, why: str | None
) -> None:
    """Nothing is read: the lock alone says these (a local directory is the project's own,
    planned as nothing)."""
    lock = tmp_path / "pylock.toml"
    lock.write_text(f'lock-version = "1.0"\n[[packages]]\nname = "x"\nversion = "1.0"\n{table}\n')
    run = run_libdoctor_inprocess(
        "plan", "lock", lock, "--cache-dir", tmp_path / "c", "--json",
        "--python", "3.11", "--platform", "manylinux_2_28_x86_64",
    )  # fmt: skip
    doc = json.loads(run.stdout)
    if severity is None:
        assert (run.rc, doc["findings"]) == (0, [])
        return
    (finding,) = doc["findings"]
    assert (finding["code"], finding["severity"]) == ("lock-cannot-tell", severity)
    assert why is not None and why in finding["message"]
    assert run.rc == (1 if severity == "warning" else 0)


def test_several_files_as_pre_commit_passes_them(index: Index, tmp_path: Path) -> None:
    """Each planned in turn, the worst exit; JSON and SARIF take one file at a time."""
    clean = index.pylock([("epsilon", "1.0"), ("beta", "1.0")], tmp_path / "clean")
    bad = index.pylock([("epsilon", "1.0")], tmp_path / "bad")
    run = run_libdoctor_inprocess(
        "plan", "lock", clean, bad, "--cache-dir", index.root / "cache"
    )  # fmt: skip
    assert run.rc == 1, run.stderr
    assert run.stdout.count("plan lock ") == 2 and "lock-requirement-unmet" in run.stdout
    run = run_libdoctor_inprocess("plan", "lock", clean, bad, "--json")
    one_line_exit_2(run, "plan one FILE at a time")


# --------------------------------------------------------------------------- cannot plan


def one_line_exit_2(run: LibdoctorRun, expected: str) -> None:
    assert (run.rc, run.stdout) == (2, ""), run.stdout
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert expected in run.stderr


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("pylock.toml", "not toml ][", "is not valid TOML"),
        ("pylock.toml", 'lock-version = "2.0"\n', "unknown lock-version '2.0'"),
        ("pylock.toml", 'lock-version = "1.0"\n[[packages]]\nname = "a"\nwheels = "x"\n',
         "packages[0].wheels is str, expected list"),
        ("pylock.toml", 'lock-version = "1.0"\n[[packages]]\nname = "a"\nversion = "1"\n'
         'wheels = [{ url = "http://[::1/a-1-py3-none-any.whl" }]\n',
         "a 1: the lock's URL 'http://[::1/a-1-py3-none-any.whl' does not parse"),
        ("uv.lock", "version = 7\n", "unknown uv.lock version 7"),
        ("uv.lock", "version = 1\n[[package]]\nname = 3\n", "package[0].name is int"),
        ("requirements.txt", "beta>=1\n", "pins no version"),
    ],
)  # fmt: skip
def test_a_bad_lock_is_one_line_exit_2(tmp_path: Path, name: str, text: str, expected: str) -> None:
    (tmp_path / name).write_text(text)
    run = run_libdoctor_inprocess(
        "plan", "lock", tmp_path / name, "--offline", "--cache-dir", tmp_path / "c"
    )
    one_line_exit_2(run, expected)


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_locked_path_that_is_no_file_is_refused_unread(tmp_path: Path, kind: str) -> None:
    """A lock under review may name any path: a FIFO (no writer) or /dev/zero would hang."""
    target = tmp_path / "x-1.0-py3-none-any.whl"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    path = "/dev/zero" if kind == "device" else target.name
    lock = tmp_path / "pylock.toml"
    lock.write_text(
        'lock-version = "1.0"\n[[packages]]\nname = "x"\nversion = "1.0"\n'
        f'wheels = [{{ path = "{path}", name = "{target.name}" }}]\n'
    )
    run = run_libdoctor_inprocess("plan", "lock", lock, "--cache-dir", tmp_path / "c")
    one_line_exit_2(run, "not a regular file")


def test_the_index_answers_404_for_a_pin(index: Index, tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text("nosuch==1.0\n")
    run = run_libdoctor_inprocess(
        "plan", "lock", lock, "--cache-dir", tmp_path / "c", "--index-url", index.simple
    )
    one_line_exit_2(run, "/simple/nosuch/: HTTP 404")


def test_a_pins_hash_the_index_does_not_list(index: Index, tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text(f"beta==1.0 --hash=sha256:{'ab' * 32}\n")
    run = run_libdoctor_inprocess(
        "plan", "lock", lock, "--cache-dir", tmp_path / "c", "--index-url", index.simple
    )
    one_line_exit_2(run, "beta 1.0: none of the lock's sha256 hashes is one the index lists")


def test_a_pin_the_index_has_no_file_of(index: Index, tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text("beta==9.9\n")
    run, doc = plan(index, lock)
    assert run.rc == 1
    (finding,) = doc["findings"]
    assert (finding["code"], finding["severity"]) == ("lock-cannot-tell", "warning")
    assert "the index lists no file of this release" in finding["message"]


def test_offline_names_what_the_cache_lacks(index: Index, uv_lock: Path, tmp_path: Path) -> None:
    """A uv.lock's wheels and a requirements file's releases, with an empty cache."""
    lock = tmp_path / "requirements.txt"
    lock.write_text("beta==1.0\n")
    for path, what in ((uv_lock, "alpha-1.0-py3-none-any.whl is not in the wheel-index cache"),
                       (lock, "its release is not in the cache (--offline)")):  # fmt: skip
        run = run_libdoctor_inprocess(
            "plan", "lock", path, "--offline", "--cache-dir", tmp_path / "empty", "--json"
        )
        doc = json.loads(run.stdout)
        assert run.rc == 1, run.stderr
        assert {f["code"] for f in doc["findings"]} == {"lock-cannot-tell"}
        assert any(what in f["message"] for f in doc["findings"]), doc["findings"]
