"""``libdoctor plan lock FILE``: a lock judged before any environment exists, its wheels read
by range from a real index on 127.0.0.1 serving wheels built here.

The seed's lock in miniature: a torch stand-in built for CUDA 12.8 (its ``torch/version.py``
says so, read by range) requiring ``nvidia-cudnn-cu12``, and ``nvidia-cudnn-cu13`` beside
it, which installs the same library path with other bytes. The same lock as pylock.toml, as
a uv.lock made by real uv against the index, and as a requirements file of pins. The
index keeps connections open (HTTP/1.1), as PyPI does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from libdoctor.environment.tags import planned
from libdoctor.whatif.lock import LockPlan, LockPlanOptions, plan_lock
from support.httpindex import FileServer, serve
from support.lockindex import ServedWheels
from support.uvprojects import lock_project
from support.venvs import LibdoctorRun, run_libdoctor_inprocess
from support.wheels import build_wheel

LIB = "nvidia/cudnn/lib/libcudnn.so.9"
HEADER = "nvidia/cudnn/include/cudnn.h"
VERSION_PY = b"__version__ = '2.9.1'\ncuda: str | None = '12.8'\nhip = None\n"


@dataclass
class Index(ServedWheels):
    cache: Path


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    root = tmp_path_factory.mktemp("planlock")
    dest = root / "wheels"
    header = b"/* cudnn.h, the same in both */\n"
    wheels = {
        "torch": build_wheel(
            dest, "torch", "2.9.1",
            {"torch/__init__.py": b"", "torch/version.py": VERSION_PY,
             "torch/lib/libtorch_cuda.so": b"\x7fELF torch"},
            requires=["nvidia-cudnn-cu12==9.1.0"],
        ),
        "nvidia-cudnn-cu12": build_wheel(
            dest, "nvidia-cudnn-cu12", "9.1.0", {LIB: b"cudnn 12 " * 100, HEADER: header}
        ),
        "nvidia-cudnn-cu13": build_wheel(
            dest, "nvidia-cudnn-cu13", "9.2.0", {LIB: b"cudnn 13 " * 120, HEADER: header}
        ),
    }  # fmt: skip
    with serve(FileServer(keep_alive=True)) as server:  # as PyPI: connections kept
        for wheel in wheels.values():
            server.add_wheel(wheel)
        yield Index(server, wheels, root, root / "cache")


VERSIONS = {"torch": "2.9.1", "nvidia-cudnn-cu12": "9.1.0", "nvidia-cudnn-cu13": "9.2.0"}


def pylock(index: Index, names: list[str], directory: Path) -> Path:
    return index.pylock(names, VERSIONS, directory)


def requirements(names: list[str], directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "requirements.txt"
    path.write_text("".join(f"{n}=={VERSIONS[n]}\n" for n in names))
    return path


@pytest.fixture(scope="module")
def uv_lock(index: Index) -> Path:
    """The seed's project locked by real uv against the index."""
    pyproject = (
        '[project]\nname = "seed"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n'
        'dependencies = ["torch==2.9.1", "nvidia-cudnn-cu13==9.2.0"]\n'
        "[tool.uv]\npackage = false\n"
    )
    return lock_project(index.root / "uvproject", pyproject, index.simple, index.root / "uv-cache")


def plan(index: Index, lock: Path, *more: str) -> tuple[LibdoctorRun, Any]:
    run = run_libdoctor_inprocess(
        "plan", "lock", lock, "--cache-dir", index.cache, "--index-url", index.simple,
        "--json", *more,
    )  # fmt: skip
    doc = json.loads(run.stdout) if run.stdout.strip() else None
    return run, doc


def codes(doc: Any) -> list[tuple[str, str]]:
    return sorted((f["code"], f["severity"]) for f in doc["findings"])


def seed_findings(doc: Any) -> None:
    """The seed's lock: one path conflict (the library), one identical path (info is the
    header, counted on the same finding), and the CUDA major mix, each once."""
    assert codes(doc) == [("lock-cuda-mixed-major", "error"), ("lock-path-conflict", "error")]
    conflict = next(f for f in doc["findings"] if f["code"] == "lock-path-conflict")
    assert conflict["paths"] == [LIB]
    assert conflict["evidence"]["identical"] == 1
    assert conflict["evidence"]["groups"] == {"nvidia/cudnn/lib": 1}
    assert conflict["distribution"]["name"] == "nvidia-cudnn-cu13"
    assert "install order" in conflict["message"] and "uv installs" in conflict["message"]
    assert "nvidia-cudnn-cu12 9.1.0" in conflict["message"]
    mixed = next(f for f in doc["findings"] if f["code"] == "lock-cuda-mixed-major")
    assert mixed["evidence"]["build"] == "12.8"
    assert mixed["evidence"]["source"] == "torch/version.py"
    assert mixed["evidence"]["majors"] == {"12": ["nvidia-cudnn-cu12 9.1.0"],
                                           "13": ["nvidia-cudnn-cu13 9.2.0"]}  # fmt: skip


SEED = ["torch", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13"]
CLEAN = ["torch", "nvidia-cudnn-cu12"]


def test_pylock_seed_is_stopped_and_the_clean_lock_exits_0(index: Index) -> None:
    run, doc = plan(index, pylock(index, SEED, index.root / "pylock-seed"))
    assert run.rc == 1, run.stderr
    seed_findings(doc)
    ranged = [w for w in doc["lock"]["wheels"] if w["how"] in ("range", "cache")]
    assert len(ranged) == 3
    run, doc = plan(index, pylock(index, CLEAN, index.root / "pylock-clean"))
    assert run.rc == 0, run.stdout
    assert doc["findings"] == []
    assert all(w["how"] == "cache" for w in doc["lock"]["wheels"])  # read once, kept


def test_wheels_read_on_threads_give_the_sequential_plan(index: Index, tmp_path: Path) -> None:
    """``whatif.threads``' reference: one worker (every wheel in turn) and eight (at once,
    on kept connections) plan the same lock into the same wheels, findings and order."""
    lock = requirements(SEED, tmp_path)  # index pages and wheels, every one read
    platform = planned("3.11", "manylinux_2_28_x86_64")

    def plan_with(workers: int) -> LockPlan:
        cache = str(tmp_path / f"cache-{workers}")
        options = LockPlanOptions(cache_dir=cache, index_url=index.simple, workers=workers)
        return plan_lock(str(lock), platform, options)

    sequential, threaded = plan_with(1), plan_with(8)
    assert [w.filename for w in threaded.wheels] == [w.filename for w in sequential.wheels]
    assert [w.read for w in threaded.wheels] == [w.read for w in sequential.wheels]
    assert threaded.findings == sequential.findings and len(sequential.findings) == 2
    assert all(w.read.how == "range" for w in threaded.wheels)


def test_uv_lock_made_by_real_uv(index: Index, uv_lock: Path) -> None:
    run, doc = plan(index, uv_lock)
    assert run.rc == 1, run.stderr
    seed_findings(doc)
    conflict = next(f for f in doc["findings"] if f["code"] == "lock-path-conflict")
    assert conflict["fix"]["argv"] == ["uv", "remove", "nvidia-cudnn-cu13"]


def test_requirements_pins_found_on_the_index(index: Index) -> None:
    run, doc = plan(index, requirements(SEED, index.root / "req-seed"))
    assert run.rc == 1, run.stderr
    seed_findings(doc)
    run, doc = plan(index, requirements(CLEAN, index.root / "req-clean"))
    assert (run.rc, doc["findings"]) == (0, [])


def test_a_requirement_the_lock_does_not_hold(index: Index) -> None:
    run, doc = plan(index, requirements(["torch"], index.root / "req-torch-alone"))
    assert run.rc == 1
    assert codes(doc) == [("lock-requirement-unmet", "error")]
    assert "nvidia-cudnn-cu12==9.1.0" in doc["findings"][0]["message"]


def test_offline_names_what_the_cache_lacks(index: Index, tmp_path: Path) -> None:
    lock = pylock(index, SEED, tmp_path)
    run = run_libdoctor_inprocess(
        "plan", "lock", lock, "--cache-dir", tmp_path / "empty", "--offline", "--json"
    )
    doc = json.loads(run.stdout)
    assert run.rc == 1
    assert sorted(f["distribution"]["name"] for f in doc["findings"]) == sorted(SEED)
    assert {f["code"] for f in doc["findings"]} == {"lock-cannot-tell"}
    assert all("not in the wheel-index cache" in f["message"] for f in doc["findings"])


@pytest.mark.parametrize("form", ["pylock", "uv", "requirements"])
def test_sarif_points_at_the_package_line(index: Index, uv_lock: Path, form: str) -> None:
    if form == "pylock":
        lock = pylock(index, SEED, index.root / "pylock-sarif")
    elif form == "uv":
        lock = uv_lock
    else:
        lock = requirements(SEED, index.root / "req-sarif")
    run = run_libdoctor_inprocess(
        "plan", "lock", lock, "--cache-dir", index.cache, "--index-url", index.simple,
        "--format", "sarif",
    )  # fmt: skip
    assert run.rc == 1, run.stderr
    results = json.loads(run.stdout)["runs"][0]["results"]
    lines = lock.read_text().splitlines()
    assert len(results) == 2
    for result in results:
        where = result["locations"][0]["physicalLocation"]
        assert where["artifactLocation"]["uri"] == lock.name
        line = lines[where["region"]["startLine"] - 1]
        name = {"lock-path-conflict": "nvidia-cudnn-cu13", "lock-cuda-mixed-major": "torch"}
        expected = name[result["ruleId"]]
        assert line in (f'name = "{expected}"', f"{expected}=={line.partition('==')[2]}")


def first_ten_bytes(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    """A server that lies about the range it sends: the first ten bytes, whatever was asked."""
    handler.wfile.write(b"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\n")
    handler.wfile.write(f"Content-Range: bytes 0-9/{len(body)}\r\n\r\n".encode() + body[:10])


@pytest.mark.parametrize(
    ("what", "expected"),
    [
        ("404", "HTTP 404"),
        ("no-ranges", "does not answer range requests"),
        ("lying-range", "the server sent bytes 0-9/"),
        ("bad-lock", "does not parse"),
        ("hash", "is not the index's"),
    ],
)
def test_cannot_plan_is_one_line_exit_2(
    index: Index, tmp_path: Path, what: str, expected: str
) -> None:
    if what == "hash":
        lock = pylock(index, ["nvidia-cudnn-cu12"], tmp_path)
        lock.write_text(lock.read_text().replace(index.sha256("nvidia-cudnn-cu12"), "ab" * 32))
        run = run_libdoctor_inprocess("plan", "lock", lock, "--cache-dir", tmp_path / "c")
    elif what == "bad-lock":
        lock = tmp_path / "requirements.txt"
        lock.write_text("this is ][ not a requirement\n")
        run = run_libdoctor_inprocess("plan", "lock", lock, "--cache-dir", tmp_path / "c")
    else:
        wheel = index.wheels["nvidia-cudnn-cu12"]
        with serve(FileServer(mode="full" if what == "no-ranges" else "range")) as other:
            other.add_wheel(wheel)
            if what == "404":
                del other.files[f"/files/{wheel.name}"]
            elif what == "lying-range":
                other.answers[f"/files/{wheel.name}"] = first_ten_bytes
            text = (
                'lock-version = "1.0"\ncreated-by = "test"\n[[packages]]\n'
                'name = "nvidia-cudnn-cu12"\nversion = "9.1.0"\n'
                f'wheels = [{{ url = "{other.url}/files/{wheel.name}", '
                f'hashes = {{ sha256 = "{index.sha256("nvidia-cudnn-cu12")}" }} }}]\n'
            )
            lock = tmp_path / "pylock.toml"
            lock.write_text(text)
            run = run_libdoctor_inprocess("plan", "lock", lock, "--cache-dir", tmp_path / "c")
    assert run.rc == 2, run.stdout
    assert run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert expected in run.stderr


def test_text_says_what_it_read_and_why(index: Index) -> None:
    lock = pylock(index, SEED, index.root / "pylock-text")
    run = run_libdoctor_inprocess("plan", "lock", lock, "--cache-dir", index.cache)
    assert run.rc == 1
    print(run.stdout)
    assert "lock-path-conflict" in run.stdout and "lock-cuda-mixed-major" in run.stdout
    assert "read " in run.stdout and "by range" in run.stdout
    assert "The lock would break an environment (2)" in run.stdout
