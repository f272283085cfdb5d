"""Requirement truth on the metadata shapes of the most installed packages, held to real
``pip check`` pair for pair (support.pipcheck).

pandas, scipy, matplotlib, polars, contourpy and cycler write a License field over many lines,
some of them whitespace only, before their Requires-Dist: the wheels here are built with that
METADATA (LF, CR LF and tab-indented), installed by real pip, and their requirements removed.
The real wheels are the realenv tier at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from libdoctor.environment.metadata import read_headers
from support.checkdoc import check_ok
from support.pipcheck import libdoctor_pairs, pip_check, pip_check_pairs, uncovered
from support.readers import email_headers
from support.venvs import Libdoctor, Venv, VenvFactory, pip_install, pip_uninstall
from support.wheels import WheelFactory

_LICENSE = (
    "License: BSD 3-Clause License\n"
    "        \n"
    "        Copyright (c) 2008-2011, AQR Capital Management, LLC\n"
    "        \n"
    "\t\n"
    "        Redistribution and use in source and binary forms, with or without\n"
)


def _metadata(name: str, requires: list[str], *, crlf: bool = False) -> bytes:
    """A METADATA shaped as pandas 2.3.3's: every Requires-Dist after the long License."""
    text = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n{_LICENSE}"
        "Classifier: Programming Language :: Python\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires)
        + "Provides-Extra: test\nRequires-Dist: ldt-never; extra == 'test'\n"
        "\n# the long description\nRequires-Dist: ldt-not-a-header\n"
    )
    return (text.replace("\n", "\r\n") if crlf else text).encode()


SHAPES = {
    "ldt-pandas-shape": (["ldt-np>=1.0"], False),
    "ldt-matplotlib-shape": (["ldt-np", "ldt-pk", "ldt-pp>=2"], True),  # CR LF throughout
    "ldt-scipy-shape": (['ldt-np; python_version >= "3"'], False),
}
REMOVED = ("ldt-np", "ldt-pk", "ldt-pp")


@pytest.fixture(scope="module")
def shaped(module_wheels: WheelFactory) -> list[Path]:
    wheels = [module_wheels(n, "2.0", {f"{n.replace('-', '_')}.py": b""}) for n in REMOVED]
    for name, (requires, crlf) in SHAPES.items():
        files = {f"{name.replace('-', '_')}/__init__.py": b""}
        metadata = _metadata(name, requires, crlf=crlf)
        wheels.append(module_wheels(name, "1.0", files, metadata=metadata))
    return wheels


@pytest.fixture(scope="module")
def healthy_shaped(module_venv: VenvFactory, shaped: list[Path]) -> Venv:
    venv = module_venv("shaped")
    pip_install(venv, *shaped)
    return venv


def test_the_shapes_installed_read_as_email_reads_them(healthy_shaped: Venv) -> None:
    files = sorted(healthy_shaped.site_packages.glob("*.dist-info/METADATA"))
    assert len(files) >= len(SHAPES) + len(REMOVED)
    for path in files:
        text = path.read_bytes().decode("utf-8")
        assert read_headers(text) == email_headers(text), path


def test_healthy_shapes_have_no_requirement_finding(
    healthy_shaped: Venv, module_libdoctor: Libdoctor
) -> None:
    doc = check_ok(module_libdoctor.check(healthy_shaped.path, "--json"))
    assert pip_check(healthy_shaped) == (0, [])
    assert libdoctor_pairs(doc) == set()


def test_removed_requirements_are_every_pair_pip_check_reports(
    module_venv: VenvFactory, shaped: list[Path], module_libdoctor: Libdoctor
) -> None:
    venv = module_venv("shaped-broken")
    pip_install(venv, *shaped)
    pip_uninstall(venv, *REMOVED)
    doc = check_ok(module_libdoctor.check(venv.path, "--json"))
    _, problems = pip_check(venv)
    expected = {(name, Requirement(r).name) for name, (rs, _) in SHAPES.items() for r in rs}
    assert pip_check_pairs(venv) == expected  # pip reads all of them: the shapes are right
    assert uncovered(problems, doc) == []
    assert libdoctor_pairs(doc) >= pip_check_pairs(venv)


def test_plan_uninstall_names_the_shaped_requirer(
    healthy_shaped: Venv, module_libdoctor: Libdoctor
) -> None:
    run = module_libdoctor("plan", "uninstall", "ldt-np", healthy_shaped.path, "--json")
    assert run.rc == 1, run.describe()
    findings = run.json()["findings"]
    broken = {f["distribution"]["name"] for f in findings if f["code"] == "requirement-missing"}
    assert broken == set(SHAPES)


# --------------------------------------------------------------------------- real wheels

SCI_PACKAGES = (
    *("numpy", "scipy", "pandas", "matplotlib", "polars", "contourpy", "cycler"),
    *("scikit-learn", "pyarrow", "pillow", "seaborn", "statsmodels", "h5py", "shapely"),
    "pydantic",
)


@pytest.fixture(scope="module")
def real_sci(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The popular native wheels from the registry, by uv (its cache: $UV_CACHE_DIR or
    /work/cache/uv), pip beside them for the oracle."""
    root = tmp_path_factory.mktemp("sci") / "env"
    uv = Path(sys.executable).parent / "uv"
    cache = os.environ.get("UV_CACHE_DIR", "/work/cache/uv")
    env = {**os.environ, "UV_CACHE_DIR": cache, "UV_NO_PROGRESS": "1"}
    subprocess.run([str(uv), "venv", "--python", sys.executable, str(root)], check=True, env=env)
    done = subprocess.run(
        [str(uv), "pip", "install", "--python", str(root / "bin/python"), *SCI_PACKAGES, "pip"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot install the packages from the registry: {done.stderr[-500:]}")
    return root


@pytest.mark.realenv
@pytest.mark.network
def test_real_popular_wheels_without_numpy_packaging_pyparsing(
    real_sci: Path, libdoctor: Libdoctor
) -> None:
    venv = Venv(real_sci)
    plan = libdoctor("plan", "uninstall", "numpy", real_sci, "--json")
    assert plan.rc == 1, plan.describe()
    assert "pandas" in {f["distribution"]["name"] for f in plan.json()["findings"]}
    for path in venv.site_packages.glob("*.dist-info/METADATA"):
        text = path.read_bytes().decode("utf-8")
        assert read_headers(text) == email_headers(text), path
    uv = Path(sys.executable).parent / "uv"
    removed = ("numpy", "packaging", "pyparsing")
    argv = [str(uv), "pip", "uninstall", "--python", str(venv.python), *removed]
    subprocess.run(argv, check=True, capture_output=True)
    doc = check_ok(libdoctor.check(real_sci, "--json"))
    _, problems = pip_check(venv)
    assert len(problems) >= 10
    assert uncovered(problems, doc) == []
    assert libdoctor_pairs(doc) >= pip_check_pairs(venv)
