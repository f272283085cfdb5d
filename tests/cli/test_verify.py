"""``libdoctor verify --lock FILE [TARGET]`` against real venvs, real pip and real uv.

Offline: wheels built in the test, installed by pip from their files (so ``direct_url.json``
holds their sha256), a hashed requirements lock; every kind of drift, its fix run for real.
Online (``network``, skipped when pypi.org is unreachable): locks written by ``pip lock``
(pip >= 25.1 in a uv-made tools venv) and by ``uv lock`` / ``uv export --format
pylock.toml`` from the registry, one uv cache shared by the session.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import sys
from pathlib import Path

import pytest

from support.checkdoc import Doc, check_ok, only, run_fix, select
from support.commands import run_checked
from support.venvs import Libdoctor, Venv, VenvFactory, pip_env, pip_install, pip_uninstall, uv_path
from support.wheels import WheelFactory, build_wheel

THIS = f"{sys.version_info.major}.{sys.version_info.minor}"
NOT_HERE = f'python_version < "{THIS}"'


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _verify(libdoctor: Libdoctor, lock: Path, target: Path, *args: str) -> Doc:
    run = libdoctor("verify", "--lock", lock, target, "--json", *args)
    doc = check_ok(run)
    assert run.rc == (1 if doc["summary"]["errors"] + doc["summary"]["warnings"] else 0), run
    return doc


def _codes(doc: Doc) -> set[tuple[str, str]]:
    return {(f["code"], f.get("distribution", {}).get("name", "")) for f in doc["findings"]}


def _edit_keeping_size(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-2] = ord("#") if data[-2] != ord("#") else ord("!")
    path.write_bytes(bytes(data))


# --------------------------------------------------------------------------- offline


@pytest.fixture
def locked(new_venv: VenvFactory, make_wheel: WheelFactory, tmp_path: Path) -> tuple[Venv, Path]:
    """A venv with alpha 1.0, beta 1.0 and gamma 1.0 installed by pip from their wheel files,
    and a requirements lock pinning them with their hashes (and one for another platform),
    plus omega, locked only for older Pythons."""
    wheels = {
        name: make_wheel(name, "1.0", {f"{name}/__init__.py": f"NAME = {name!r}\n".encode()})
        for name in ("alpha", "beta", "gamma", "omega", "delta")
    }
    make_wheel("alpha", "2.0", {"alpha/__init__.py": b"NAME = 'alpha 2'\n"})
    venv = new_venv("locked")
    pip_install(venv, wheels["alpha"], wheels["beta"], wheels["gamma"])
    lock = tmp_path / "requirements.txt"
    lock.write_text(
        "# pip-compile --generate-hashes\n"
        f"alpha==1.0 \\\n    --hash=sha256:{'0' * 64} \\\n"
        f"    --hash=sha256:{_sha256(wheels['alpha'])}\n"
        f"beta==1.0 --hash=sha256:{_sha256(wheels['beta'])}\n"
        f"gamma==1.0 \\\n    --hash=sha256:{_sha256(wheels['gamma'])}\n    # via beta\n"
        f"omega==1.0 ; {NOT_HERE} \\\n    --hash=sha256:{_sha256(wheels['omega'])}\n"
    )
    return venv, lock


def test_an_environment_installed_from_its_lock_matches(
    locked: tuple[Venv, Path], libdoctor: Libdoctor
) -> None:
    venv, lock = locked
    doc = _verify(libdoctor, lock, venv.path)
    assert doc["findings"] == []
    assert doc["summary"]["matched"] == doc["summary"]["verified"] == 3
    assert doc["lock"]["format"] == "requirements.txt"
    assert [e["name"] for e in doc["lock"]["excluded"]] == ["omega"]
    assert any(name.startswith("pip ") for name in doc["lock"]["excepted"])
    text = libdoctor("verify", "--lock", lock, venv.path)
    assert text.rc == 0 and "The environment matches the lock: 3 of 3" in text.stdout


def test_each_drift_is_named_with_its_fix_and_the_fixes_restore_the_lock(
    locked: tuple[Venv, Path], make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    venv, lock = locked
    pip_install(venv, make_wheel.dest / "alpha-2.0-py3-none-any.whl")  # upgraded
    pip_install(venv, make_wheel.dest / "delta-1.0-py3-none-any.whl")  # extra
    pip_install(venv, make_wheel.dest / "omega-1.0-py3-none-any.whl")  # locked for other Pythons
    pip_uninstall(venv, "gamma")  # missing
    with (venv.site_packages / "beta" / "__init__.py").open("a") as handle:
        handle.write("# edited\n")  # an edited file
    doc = _verify(libdoctor, lock, venv.path)
    assert _codes(doc) == {
        ("lock-version", "alpha"),
        ("lock-missing", "gamma"),
        ("lock-files", "beta"),
        ("lock-extra", "delta"),
        ("lock-extra", "omega"),
    }
    python = str(venv.python)
    alpha = only(select(doc, "lock-version", "alpha"))
    assert alpha["fix"]["argv"] == [python, "-m", "pip", "install", "--no-deps", "alpha==1.0"]
    gamma = only(select(doc, "lock-missing", "gamma"))
    assert gamma["fix"]["argv"] == [python, "-m", "pip", "install", "--no-deps", "gamma==1.0"]
    omega = only(select(doc, "lock-extra", "omega"))
    assert NOT_HERE.replace('"', "'") in omega["evidence"]["excluded"].replace('"', "'")
    assert omega["fix"]["argv"] == [python, "-m", "pip", "uninstall", "--yes", "omega"]
    beta = only(select(doc, "lock-files", "beta"))
    assert beta["evidence"]["check"] == "altered-files" and beta["paths"]
    for finding in doc["findings"]:
        run_fix(finding, make_wheel.dest)
    after = _verify(libdoctor, lock, venv.path)
    assert [f["severity"] for f in after["findings"]] in ([], ["info"]), after["findings"]


def test_another_file_of_the_locked_version_is_named_by_its_hash(
    new_venv: VenvFactory, tmp_path: Path, libdoctor: Libdoctor
) -> None:
    """The lock's wheel by URL; another build of the same version installed. The fix
    installs the locked URL, and pip keeps its hash: verified afterwards."""
    ours = build_wheel(tmp_path / "ours", "alpha", "1.0", {"alpha/__init__.py": b"A = 1\n"})
    theirs = build_wheel(tmp_path / "theirs", "alpha", "1.0", {"alpha/__init__.py": b"A = 2\n"})
    venv = new_venv("artifact")
    pip_install(venv, theirs)
    lock = tmp_path / "pylock.toml"
    lock.write_text(
        'lock-version = "1.0"\ncreated-by = "hand"\n[[packages]]\nname = "alpha"\n'
        f'version = "1.0"\n[[packages.wheels]]\nurl = "{ours.as_uri()}"\n'
        f'hashes = {{ sha256 = "{_sha256(ours)}" }}\n'
    )
    finding = only(_verify(libdoctor, lock, venv.path)["findings"])
    assert (finding["code"], finding["severity"]) == ("lock-artifact", "error")
    assert finding["evidence"]["installed_hashes"] == [f"sha256:{_sha256(theirs)}"]
    assert finding["fix"]["argv"][-3:] == ["--force-reinstall", "--no-deps", ours.as_uri()]
    run_fix(finding, tmp_path / "ours")
    doc = _verify(libdoctor, lock, venv.path)
    assert doc["findings"] == [] and doc["lock"]["verified"] == ["alpha 1.0"]


def test_a_wheel_of_no_locked_tag_is_another_artifact(
    new_venv: VenvFactory, make_wheel: WheelFactory, tmp_path: Path, libdoctor: Libdoctor
) -> None:
    """No direct_url.json (installed by name from an index): WHEEL's tags are the evidence."""
    make_wheel("alpha", "1.0", {"alpha/__init__.py": b"A = 1\n"})
    venv = new_venv("tags")
    pip_install(venv, extra_args=["alpha==1.0"], find_links=[make_wheel.dest])
    lock = tmp_path / "pylock.toml"
    wheel = "alpha-1.0-cp399-cp399-manylinux_2_17_x86_64.whl"
    hashes = f'{{ sha256 = "{"1" * 64}" }}'
    lock.write_text(
        'lock-version = "1.0"\ncreated-by = "hand"\n[[packages]]\nname = "alpha"\n'
        f'version = "1.0"\nwheels = [{{ name = "{wheel}", hashes = {hashes} }}]\n'
    )
    finding = only(_verify(libdoctor, lock, venv.path)["findings"])
    assert finding["code"] == "lock-artifact" and "py3-none-any" in finding["message"]
    assert finding["severity"] == "error"


def test_deep_finds_a_same_size_edit(locked: tuple[Venv, Path], libdoctor: Libdoctor) -> None:
    venv, lock = locked
    _edit_keeping_size(venv.site_packages / "beta" / "__init__.py")
    cache = str(libdoctor.cache_dir)
    assert _verify(libdoctor, lock, venv.path, "--cache-dir", cache)["findings"] == []
    deep = _verify(libdoctor, lock, venv.path, "--deep", "--cache-dir", cache)
    finding = only(deep["findings"])
    assert (finding["code"], finding["distribution"]["name"]) == ("lock-files", "beta")
    assert "hash" in finding["message"]


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("uv.lock", 'version = 1\n[[package]]\nname = "six', "is not valid TOML"),
        ("pylock.toml", 'lock-version = "2.0"\n', "unknown lock-version"),
        ("requirements.txt", f"--hash=sha256:{'a' * 64}\n", "without a requirement"),
        ("requirements.txt", "six>=1\n", "pins no version"),
    ],
)
def test_a_bad_lock_is_exit_2_and_one_line(
    new_venv: VenvFactory, tmp_path: Path, libdoctor: Libdoctor, name: str, text: str, expected: str
) -> None:
    lock = tmp_path / name
    lock.write_text(text)
    run = libdoctor.inprocess("verify", "--lock", lock, new_venv("bad").path)
    assert run.rc == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and expected in run.stderr, run.stderr


# --------------------------------------------------------------------------- the registry


def _pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment for pip and uv to use pypi.org (no config file, one shared uv cache);
    skips when pypi.org is unreachable."""
    if not _pypi_reachable():
        pytest.skip("pypi.org is unreachable: the lock tools need the registry")
    cache = tmp_path_factory.mktemp("uv-cache")
    env = pip_env(
        extra={
            "PIP_NO_INDEX": None,
            "PIP_INDEX_URL": "https://pypi.org/simple",
            "UV_CACHE_DIR": str(cache),
            "UV_NO_CONFIG": "1",
            "UV_NO_PROGRESS": "1",
            "UV_PYTHON_DOWNLOADS": "never",
            "UV_INDEX_URL": "https://pypi.org/simple",
        }
    )
    env["PATH"] = f"{uv_path().parent}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.mark.network
def test_a_lock_written_by_pip_lock(
    registry: dict[str, str], new_venv: VenvFactory, tmp_path: Path, libdoctor: Libdoctor
) -> None:
    """``pip lock`` (pip >= 25.1); the target installed by pip from the lock's wheel URLs,
    as a pylock installer would: every artifact verified by hash."""
    uv = uv_path()
    tools = tmp_path / "tools"
    run_checked([uv, "venv", "-q", "--python", sys.executable, tools], registry)
    run_checked(
        [uv, "pip", "install", "-q", "--python", tools / "bin" / "python", "pip>=25.1"], registry
    )
    lock = tmp_path / "pylock.toml"
    pins = ["six==1.16.0", "idna==3.10"]
    run_checked([tools / "bin" / "python", "-m", "pip", "lock", *pins, "-o", lock], registry)
    urls = [line.split('"')[1] for line in lock.read_text().splitlines() if line.startswith("url")]
    assert len(urls) == 2, lock.read_text()
    venv = new_venv("pip-lock")
    run_checked([venv.python, "-m", "pip", "install", "-q", "--no-deps", *urls], registry)
    doc = _verify(libdoctor, lock, venv.path)
    assert doc["lock"]["created_by"] == "pip" and doc["findings"] == []
    assert sorted(doc["lock"]["verified"]) == ["idna 3.10", "six 1.16.0"]
    run_checked([venv.python, "-m", "pip", "install", "-q", "--no-deps", "six==1.17.0"], registry)
    finding = only(_verify(libdoctor, lock, venv.path)["findings"])
    assert (finding["code"], finding["evidence"]["installed_version"]) == ("lock-version", "1.17.0")


@pytest.fixture
def uv_project(registry: dict[str, str], tmp_path: Path) -> tuple[Path, Path]:
    """A tiny project locked by ``uv lock`` (tomli only on older Pythons, iniconfig in the
    dev group), synced by ``uv sync``: (project dir, its venv)."""
    project = tmp_path / "demo"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "demo"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n'
        f"dependencies = ['six==1.16.0', 'idna==3.10', 'tomli==2.0.1; {NOT_HERE}']\n"
        "[dependency-groups]\ndev = ['iniconfig==2.0.0']\n"
    )
    uv = uv_path()
    run_checked([uv, "lock", "-q", "--python", sys.executable], registry, cwd=project)
    run_checked([uv, "sync", "-q", "--python", sys.executable], registry, cwd=project)
    return project, project / ".venv"


@pytest.mark.network
def test_a_uv_lock_and_its_pylock_export(
    uv_project: tuple[Path, Path], registry: dict[str, str], libdoctor: Libdoctor
) -> None:
    project, venv = uv_project
    pylock = project / "pylock.toml"
    run_checked(
        [uv_path(), "export", "-q", "--format", "pylock.toml", "-o", pylock], registry, project
    )
    for lock in (project / "uv.lock", pylock):
        doc = _verify(libdoctor, lock, venv)
        assert [f["severity"] for f in doc["findings"]] == ["info"], doc["findings"]
        assert only(doc["findings"])["code"] == "lock-artifact"  # an index install: no hash
        required = {p["name"] for p in doc["lock"]["required"]}
        assert required == {"six", "idna", "iniconfig"}, doc["lock"]
        assert [e["name"] for e in doc["lock"]["excluded"]] == ["tomli"]


@pytest.mark.network
def test_a_uv_synced_env_drifts_from_its_uv_lock(
    uv_project: tuple[Path, Path], registry: dict[str, str], libdoctor: Libdoctor
) -> None:
    project, venv = uv_project
    python = venv / "bin" / "python"
    uv = uv_path()
    run_checked([uv, "pip", "install", "-q", "--python", python, "six==1.17.0", "attrs"], registry)
    run_checked([uv, "pip", "uninstall", "-q", "--python", python, "idna"], registry)
    edited = next((venv / "lib").glob("python*/site-packages/iniconfig/__init__.py"))
    with edited.open("a") as handle:
        handle.write("# edited\n")
    doc = _verify(libdoctor, project / "uv.lock", venv)
    assert {c for c in _codes(doc) if c[0] != "lock-artifact"} == {
        ("lock-version", "six"),
        ("lock-missing", "idna"),
        ("lock-extra", "attrs"),
        ("lock-files", "iniconfig"),
    }
    six = only(select(doc, "lock-version", "six"))
    argv = ["uv", "pip", "install", "--no-deps", "--python", str(python), "six==1.16.0"]
    assert six["fix"]["argv"] == argv
    attrs = only(select(doc, "lock-extra", "attrs"))
    assert attrs["fix"]["argv"] == ["uv", "pip", "uninstall", "--python", str(python), "attrs"]
    for finding in doc["findings"]:  # the fixes, run with the real uv
        if finding.get("fix"):
            run_checked(
                [shutil.which("uv", path=registry["PATH"]) or "uv", *finding["fix"]["argv"][1:]],
                registry,
            )
    after = _verify(libdoctor, project / "uv.lock", venv)
    assert [f["severity"] for f in after["findings"]] == ["info"], after["findings"]
