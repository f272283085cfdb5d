"""``plan lock``'s ``lock-unresolved-library``: locked extension modules built by gcc, their
dynamic sections read by range from a real index on 127.0.0.1, judged in the
environment-to-be.

- ``missing`` ships a module needing ``libfoo.so.1``, which no locked wheel ships: one error,
  from pylock.toml, a uv.lock made by real uv, and a requirements file of pins.
- ``user`` needs ``libbar.so.1`` on its RUNPATH ``$ORIGIN/../barlib.libs``, which the locked
  ``barlib`` installs there; ``system`` needs only ``libm.so.6``/``libc.so.6`` (the manylinux
  policy's) and ``libxkbcommon.so.0`` (a desktop's, as PySide6's modules do): clean.
- ``nopath`` needs ``libfoo.so.1`` with no RPATH: from the system, which may have it: info;
  ``grafted`` needs an auditwheel copy's name no wheel ships: an error all the same.
- ``hostile`` ships a module that is no ELF and one over the read cap: an info, no traceback.
- ``musl``, a musllinux wheel shaped as pyzmq's, needs musl's libc by Alpine's soname
  (``libc.musl-x86_64.so.1``) and its grafted library on its RPATH: clean.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.cc import compile_lib
from support.httpindex import serve
from support.lockindex import ServedWheels as Index
from support.uvprojects import lock_project
from support.venvs import LibdoctorRun, run_libdoctor_inprocess
from support.wheels import build_wheel

TAG = "py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64"
MODULE = "missing/_core.cpython-311-x86_64-linux-gnu.so"
VERSIONS = {
    "missing": "1.0", "user": "1.0", "barlib": "2.0", "system": "1.0", "hostile": "1.0",
    "offpath": "1.0", "nopath": "1.0", "grafted": "1.0", "musl": "1.0",
}  # fmt: skip
MUSL_TAG = "py3-none-musllinux_1_2_x86_64"


def _so(build: Path, name: str, **kwargs: Any) -> bytes:
    return compile_lib(build, name, **kwargs).read_bytes()


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    root = tmp_path_factory.mktemp("linkage")
    build, dest = root / "build", root / "wheels"
    core = _so(build, "core.so", needed=["libfoo.so.1", "libc.so.6"], rpath="$ORIGIN")
    user = _so(build, "user.so", needed=["libbar.so.1"], runpath="$ORIGIN/../barlib.libs")
    bar = _so(build, "libbar.so.1", soname="libbar.so.1", needed=["libc.so.6"])
    system = _so(build, "system.so", needed=["libm.so.6", "libc.so.6", "libxkbcommon.so.0"])
    offpath = _so(build, "offpath.so", needed=["libbar.so.1"])
    nopath = _so(build, "nopath.so", needed=["libfoo.so.1"])
    grafted = _so(build, "grafted.so", needed=["libz-5f5b5e4a.so.1.2.13"])
    musl = _so(build, "musl.so", needed=["libzmq-d0713f8f.so.5", "libc.musl-x86_64.so.1"],
               rpath="$ORIGIN/../musl.libs")  # fmt: skip
    wheels = {
        "missing": build_wheel(dest, "missing", "1.0",
                               {"missing/__init__.py": b"", MODULE: core}, tag=TAG),
        "user": build_wheel(dest, "user", "1.0", {"user/__init__.py": b"",
                            "user/_ext.abi3.so": user}, requires=["barlib"], tag=TAG),
        "barlib": build_wheel(dest, "barlib", "2.0", {"barlib.libs/libbar.so.1": bar}, tag=TAG),
        "system": build_wheel(dest, "system", "1.0", {"system/_m.abi3.so": system}, tag=TAG),
        "offpath": build_wheel(dest, "offpath", "1.0", {"offpath/_o.abi3.so": offpath}, tag=TAG),
        "nopath": build_wheel(dest, "nopath", "1.0", {"nopath/_n.abi3.so": nopath}, tag=TAG),
        "grafted": build_wheel(dest, "grafted", "1.0", {"grafted/_g.abi3.so": grafted}, tag=TAG),
        "musl": build_wheel(dest, "musl", "1.0", {
            "musl/_m.cpython-311-x86_64-linux-musl.so": musl,
            "musl.libs/libzmq-d0713f8f.so.5": bar,
        }, tag=MUSL_TAG),
        "hostile": build_wheel(dest, "hostile", "1.0", {
            "hostile/_text.abi3.so": b"not an ELF file " * 64,
            "hostile/_big.abi3.so": system + bytes(300_000),
        }, tag=TAG),
    }  # fmt: skip
    with serve() as server:
        for wheel in wheels.values():
            server.add_wheel(wheel)
        yield Index(server, wheels, root)


def pylock(index: Index, names: list[str], directory: Path) -> Path:
    return index.pylock(names, VERSIONS, directory)


def plan(index: Index, lock: Path, cache: Path, *more: str) -> tuple[LibdoctorRun, Any]:
    run = run_libdoctor_inprocess(
        "plan", "lock", lock, "--cache-dir", cache, "--index-url", index.simple, "--json", *more,
    )  # fmt: skip
    assert "Traceback" not in run.stderr, run.stderr
    return run, json.loads(run.stdout) if run.stdout.strip() else None


def the_missing_library(doc: Any) -> None:
    found = [f for f in doc["findings"] if f["code"] == "lock-unresolved-library"]
    assert len(found) == 1, doc["findings"]
    finding = found[0]
    assert finding["severity"] == "error"
    assert finding["distribution"]["name"] == "missing"
    assert "libfoo.so.1" in finding["message"] and MODULE in finding["message"]
    evidence = finding["evidence"]
    assert evidence["library"] == "libfoo.so.1"
    assert evidence["wheel"] == f"missing-1.0-{TAG}.whl"
    assert evidence["needed_by"] == [
        {"extension": MODULE, "rpath": "$ORIGIN", "runpath": None, "searched": ["missing"]}
    ]


def test_pylock_a_library_no_wheel_ships_once_then_warm(index: Index, tmp_path: Path) -> None:
    lock = pylock(index, ["missing", "system"], tmp_path)
    run, doc = plan(index, lock, tmp_path / "cache")
    assert run.rc == 1, run.stderr
    the_missing_library(doc)
    assert [f["code"] for f in doc["findings"]] == ["lock-unresolved-library"]
    assert doc["lock"]["extensions"]["read"] == 2
    assert doc["lock"]["extensions"]["requests"] >= 2  # the directory, then the members
    run, doc = plan(index, lock, tmp_path / "cache")
    the_missing_library(doc)
    assert doc["lock"]["extensions"]["requests"] == 0  # warm: the cache alone
    assert doc["summary"]["requests"] == 0
    run = run_libdoctor_inprocess(
        "plan", "lock", lock, "--cache-dir", tmp_path / "cache", "--offline", "--json"
    )
    the_missing_library(json.loads(run.stdout))  # --offline: the same, from the cache
    run = run_libdoctor_inprocess(
        "plan", "lock", lock, "--cache-dir", tmp_path / "empty", "--offline", "--json"
    )
    assert "lock-unresolved-library" not in run.stdout  # nothing read: nothing said
    for note in (tmp_path / "cache" / "wheel-index").glob("*.dynamic-1.json"):
        note.unlink()  # the wheels' file lists kept, what their modules need not
    run = run_libdoctor_inprocess(
        "plan", "lock", lock, "--cache-dir", tmp_path / "cache", "--offline", "--json"
    )
    [finding] = [f for f in json.loads(run.stdout)["findings"] if f["paths"] == [MODULE]]
    assert finding["code"] == "lock-cannot-tell" and "(--offline)" in finding["message"]


def test_uv_lock_made_by_real_uv(index: Index) -> None:
    pyproject = (
        '[project]\nname = "app"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n'
        'dependencies = ["missing==1.0", "user==1.0"]\n[tool.uv]\npackage = false\n'
    )
    lock = lock_project(index.root / "uvproject", pyproject, index.simple, index.root / "uv-cache")
    run, doc = plan(index, lock, index.root / "uv-plan-cache")
    assert run.rc == 1, run.stderr
    the_missing_library(doc)
    assert [f["code"] for f in doc["findings"]] == ["lock-unresolved-library"]


def test_requirements_pins_found_on_the_index(index: Index, tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("missing==1.0\n")
    run, doc = plan(index, tmp_path / "requirements.txt", tmp_path / "cache")
    assert run.rc == 1, run.stderr
    the_missing_library(doc)


def test_a_library_on_the_runpath_and_the_policys_are_given(index: Index, tmp_path: Path) -> None:
    run, doc = plan(index, pylock(index, ["user", "barlib", "system"], tmp_path), tmp_path / "c")
    assert (run.rc, doc["findings"]) == (0, []), doc["findings"]
    assert doc["lock"]["extensions"]["read"] == 2


def test_a_library_shipped_off_the_search_path_is_no_error(index: Index, tmp_path: Path) -> None:
    """``offpath`` needs ``libbar.so.1`` and has no RPATH: barlib ships it elsewhere, and a
    framework's preload may load it first: never an error. Without barlib ``user``'s need is
    one, with where it searched."""
    run, doc = plan(index, pylock(index, ["offpath", "barlib"], tmp_path / "off"), tmp_path / "c")
    assert (run.rc, doc["findings"]) == (0, []), doc["findings"]
    _, doc = plan(index, pylock(index, ["user"], tmp_path / "alone"), tmp_path / "c")
    assert [f["code"] for f in doc["findings"]] == [
        "lock-requirement-unmet", "lock-unresolved-library"
    ]  # fmt: skip
    unresolved = doc["findings"][1]
    assert unresolved["evidence"]["needed_by"][0]["searched"] == ["barlib.libs"]
    assert "searched barlib.libs/: its RUNPATH $ORIGIN/../barlib.libs" in unresolved["message"]


def test_a_module_searching_only_the_system_is_an_info(index: Index, tmp_path: Path) -> None:
    """``nopath`` needs ``libfoo.so.1`` and has no RPATH or RUNPATH: it expects it from the
    system (as numba's optional threading layers do), which may have it: info, exit 0."""
    run, doc = plan(index, pylock(index, ["nopath"], tmp_path), tmp_path / "c")
    assert run.rc == 0, doc["findings"]
    [finding] = doc["findings"]
    assert (finding["code"], finding["severity"]) == ("lock-cannot-tell", "info")
    assert "libfoo.so.1" in finding["message"] and "from the system" in finding["message"]


def test_a_grafted_library_no_wheel_ships_is_an_error(index: Index, tmp_path: Path) -> None:
    """auditwheel's copy of a library (``libz-5f5b5e4a.so.1.2.13``) only comes from a wheel:
    an error even for a module with no search path."""
    run, doc = plan(index, pylock(index, ["grafted"], tmp_path), tmp_path / "c")
    assert run.rc == 1
    assert [(f["code"], f["evidence"]["library"]) for f in doc["findings"]] == [
        ("lock-unresolved-library", "libz-5f5b5e4a.so.1.2.13")
    ]
    assert "it has no RPATH or RUNPATH" in doc["findings"][0]["message"]


def test_a_musllinux_module_needing_musls_libc_by_alpines_name_is_clean(
    index: Index, tmp_path: Path
) -> None:
    """Every module of a musllinux wheel (built on Alpine, as the musllinux images are) needs
    ``libc.musl-x86_64.so.1``: the system's libc, never a wheel's, so no error even with an
    RPATH into the environment (pyzmq's, with its grafted libraries beside)."""
    lock = pylock(index, ["musl"], tmp_path)
    run, doc = plan(index, lock, tmp_path / "c", "--platform", "musllinux_1_2_x86_64")
    assert (run.rc, doc["findings"]) == (0, []), doc["findings"]
    assert doc["lock"]["extensions"]["read"] == 1


def beside(index: Index, directory: Path) -> Path:
    """DIRECTORY/pylock.toml locking ``missing`` by a path: its served wheel copied beside."""
    wheel = index.wheels["missing"]
    (directory / wheel.name).write_bytes(wheel.read_bytes())
    (directory / "pylock.toml").write_text(
        'lock-version = "1.0"\ncreated-by = "test"\n[[packages]]\nname = "missing"\n'
        f'version = "1.0"\nwheels = [{{ path = "{wheel.name}", '
        f'hashes = {{ sha256 = "{index.sha256("missing")}" }} }}]\n'
    )
    return directory / "pylock.toml"


def test_a_wheel_beside_the_lock_is_read_from_its_file(index: Index, tmp_path: Path) -> None:
    run, doc = plan(index, beside(index, tmp_path), tmp_path / "cache")
    assert run.rc == 1, run.stderr
    the_missing_library(doc)
    assert doc["lock"]["extensions"]["requests"] == 0


def test_a_wheel_beside_the_lock_rebuilt_is_read_again(index: Index, tmp_path: Path) -> None:
    """Nothing hashes a wheel beside the lock: the sha256 the lock gives is not its file's.
    What its modules need is read from the file every run, never from a cache note kept
    under that hash (a wheel rebuilt, the lock not: the new build's needs, not the old's)."""
    wheel = index.wheels["missing"]
    here = tmp_path / "project"
    here.mkdir()
    run, doc = plan(index, beside(index, here), tmp_path / "cache")
    the_missing_library(doc)
    clean = _so(tmp_path / "build", "core.so", needed=["libc.so.6"], rpath="$ORIGIN")
    rebuilt = build_wheel(tmp_path / "rebuilt", "missing", "1.0",
                          {"missing/__init__.py": b"", MODULE: clean}, tag=TAG)  # fmt: skip
    assert rebuilt.name == wheel.name
    (here / wheel.name).write_bytes(rebuilt.read_bytes())
    run, doc = plan(index, here / "pylock.toml", tmp_path / "cache")
    assert (run.rc, doc["findings"]) == (0, []), doc["findings"]


_KEPT = {
    "its file list": "wheel-index/{sha256}.json",
    "its modules' note": "wheel-index/*.dynamic-1.json",
    "its release's files": "index-release/*.json",  # a pin's, from the index page
}


@pytest.mark.parametrize("which", _KEPT)
@pytest.mark.parametrize(
    "damage",
    [b'{"format": 1, "note": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", b"\xff not JSON"],
    ids=["nested 100,000 deep", "not JSON"],
)
def test_a_damaged_cache_file_is_read_again(
    index: Index, tmp_path: Path, which: str, damage: bytes
) -> None:
    """The caches are input too: a file of them damaged (or written by another) is not
    used, never a traceback; what it held is read again."""
    (tmp_path / "requirements.txt").write_text("missing==1.0\n")
    lock = tmp_path / "requirements.txt"
    plan(index, lock, tmp_path / "cache")
    [kept] = (tmp_path / "cache").glob(_KEPT[which].format(sha256=index.sha256("missing")))
    kept.write_bytes(damage)
    run, doc = plan(index, lock, tmp_path / "cache")  # no traceback (``plan`` checks)
    assert run.rc == 1, run.stderr
    the_missing_library(doc)


def test_hostile_members_are_an_info_and_bounded(
    index: Index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("libdoctor.whatif.linkage.MEMBER_CAP", 200_000)
    run, doc = plan(index, pylock(index, ["hostile"], tmp_path), tmp_path / "cache")
    assert run.rc == 0, run.stderr
    [finding] = doc["findings"]  # the one that is no ELF; the one over the cap is counted
    assert (finding["code"], finding["severity"]) == ("lock-cannot-tell", "info")
    assert finding["paths"] == ["hostile/_text.abi3.so"]
    assert "not an ELF file" in finding["evidence"]["not_read"][0]["why"]
    why = {i["extension"]: i["why"] for i in doc["lock"]["extensions"]["not_read"]}
    assert "not an ELF file" in why["hostile/_text.abi3.so"]
    assert "MEMBER_CAP" in why["hostile/_big.abi3.so"]
    assert doc["lock"]["extensions"]["fetched"] < 64 * 1024 + 2000
    text = run_libdoctor_inprocess("plan", "lock", tmp_path / "pylock.toml",
                                   "--cache-dir", tmp_path / "cache").stdout  # fmt: skip
    assert "0 extension modules read for the libraries they need, 1 not (over the read caps" in (
        text
    ), text
