"""Shared fixtures: wheels built in the test, real venvs with real pip, the real libdoctor CLI.

The helpers themselves live in ``support.wheels``, ``support.venvs``, ``support.repairs``
and ``support.conflicts``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from libdoctor.loader.system import LoaderSystem, probe_loader_system
from support.caches import KEY_OLD, Caches, holding, make_caches
from support.checkdoc import Doc, check_ok
from support.conflicts import ConflictWheels, build_conflict_wheels
from support.libchain import ChainEnv, build_chain_env
from support.repairs import Cli
from support.seed import SeedWheels, build_seed_wheels
from support.venvs import (
    Libdoctor,
    Venv,
    VenvFactory,
    create_template_venv,
    pip_install,
    pip_uninstall,
)
from support.wheels import WheelFactory
from support.zoo import Zoo, build_zoo


@pytest.fixture(scope="session")
def venv_template(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """One real ``python -m venv`` (with pip, ~3 s) per session; test venvs are clones (~0.1 s)."""
    return create_template_venv(tmp_path_factory.mktemp("template") / "venv")


@pytest.fixture
def new_venv(venv_template: Venv, tmp_path: Path) -> VenvFactory:
    """``new_venv(name)``: a fresh, real venv with pip, for this test only."""
    return VenvFactory(venv_template, tmp_path / "venvs")


@pytest.fixture(scope="module")
def module_venv(venv_template: Venv, tmp_path_factory: pytest.TempPathFactory) -> VenvFactory:
    """Like ``new_venv`` but the venvs live for the module: states built once and read often."""
    return VenvFactory(venv_template, tmp_path_factory.mktemp("module-venvs"))


@pytest.fixture
def make_wheel(tmp_path: Path) -> WheelFactory:
    """``make_wheel(name, version, files, ...)``; ``make_wheel.dest`` is its find-links dir."""
    return WheelFactory(tmp_path / "wheels")


@pytest.fixture(scope="module")
def module_wheels(tmp_path_factory: pytest.TempPathFactory) -> WheelFactory:
    return WheelFactory(tmp_path_factory.mktemp("module-wheels"))


@pytest.fixture
def libdoctor(tmp_path: Path) -> Libdoctor:
    """Runs ``python -m libdoctor``; ``.check(...)`` adds ``--cache-dir`` outside the target."""
    return Libdoctor(tmp_path / "cache-home")


@pytest.fixture(scope="module")
def module_libdoctor(tmp_path_factory: pytest.TempPathFactory) -> Libdoctor:
    return Libdoctor(tmp_path_factory.mktemp("cache-home"))


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """The repair commands' ``libdoctor``: backups and downloads under this test's tmp."""
    return Cli(tmp_path / "cache-home")


@pytest.fixture(scope="module")
def seed(module_wheels: WheelFactory) -> SeedWheels:
    """The seed's wheels: cudnn-a and cudnn-b sharing a library path, and torchlike."""
    return build_seed_wheels(module_wheels)


@pytest.fixture(scope="module")
def healthy(module_venv: VenvFactory, seed: SeedWheels) -> Venv:
    """The seed's packages installed by real pip, nothing broken."""
    venv = module_venv("healthy")
    pip_install(venv, seed.cudnn_a, seed.torchlike)
    return venv


@pytest.fixture(scope="module")
def seed_venv(module_venv: VenvFactory, seed: SeedWheels) -> Venv:
    """The seed: cudnn-b installed over cudnn-a (pip overwrote its files without a word)."""
    venv = module_venv("seed")
    pip_install(venv, seed.cudnn_a, seed.torchlike)
    pip_install(venv, seed.cudnn_b)
    return venv


@pytest.fixture(scope="module")
def phantom(module_venv: VenvFactory, seed: SeedWheels) -> Venv:
    """cudnn-b installed over cudnn-a, then uninstalled: cudnn-a's library is gone."""
    venv = module_venv("phantom")
    pip_install(venv, seed.cudnn_a, seed.torchlike)
    pip_install(venv, seed.cudnn_b)
    pip_uninstall(venv, "cudnn-b")
    return venv


@pytest.fixture(scope="module")
def system() -> LoaderSystem:
    """This machine's loader facts (ld.so's search dirs, hwcaps, cache), read once a module."""
    found = probe_loader_system()
    if found.problems:
        pytest.skip(f"loader facts not readable here: {found.problems}")
    return found


@pytest.fixture(scope="session")
def chain_env(venv_template: Venv, tmp_path_factory: pytest.TempPathFactory) -> ChainEnv:
    """A library chain and a system image (``support.libchain``), read by the analysis tests
    of ``why``, ``tree`` and the system owners: built once a session, never changed."""
    root = tmp_path_factory.mktemp("chain")
    venv = VenvFactory(venv_template, root / "venvs")("chainy")
    return build_chain_env(venv, WheelFactory(root / "wheels"), root)


@pytest.fixture(scope="module")
def conflicts(module_wheels: WheelFactory) -> ConflictWheels:
    """Wheels that share paths (``support.conflicts``), built once per module."""
    return build_conflict_wheels(module_wheels)


# The "zoo": one venv per test module holding every broken state the file checks know
# (support.zoo), read by many tests. Module scope: each module that uses it builds its own.


@pytest.fixture(scope="module")
def zoo(module_venv: VenvFactory, module_wheels: WheelFactory) -> Zoo:
    venv = module_venv("zoo")
    return build_zoo(venv.path.parent, venv, module_wheels)


@pytest.fixture(scope="module")
def zoo_default(zoo: Zoo, module_libdoctor: Libdoctor) -> Doc:
    """``check --json``: what a user sees by default."""
    return check_ok(module_libdoctor.check(zoo.venv.path, "--json"))


@pytest.fixture(scope="module")
def zoo_all(zoo: Zoo, module_libdoctor: Libdoctor) -> Doc:
    return check_ok(module_libdoctor.check(zoo.venv.path, "--json", "--all"))


@pytest.fixture(scope="module")
def zoo_deep(zoo: Zoo, module_libdoctor: Libdoctor) -> Doc:
    return check_ok(module_libdoctor.check(zoo.venv.path, "--json", "--all", "--deep"))


# The compile caches (support.caches): a venv with torch and triton and their caches, stale
# entries among them; and a process holding the stale triton entry open.


@pytest.fixture
def caches(new_venv: VenvFactory, make_wheel: WheelFactory, tmp_path: Path) -> Caches:
    return make_caches(new_venv, make_wheel, tmp_path)


@pytest.fixture
def holder(caches: Caches) -> Iterator[subprocess.Popen[bytes]]:
    with holding(caches.triton / KEY_OLD / "add_kernel.cubin") as proc:
        yield proc
