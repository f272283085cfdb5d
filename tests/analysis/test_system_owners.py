"""``analysis.libraries``: a load joined to the operating system. A library found outside the
environment gets the system package that owns it; a bare name nothing finds gets the packages
that list it, and whether their file is on disk. A library some distribution claims, and a
name requested by path, are none of the system's business.

On a real pip-installed env of gcc-built libraries and a system image with a dpkg database
(``support.libchain``), read by the real loader emulation. (Named for what it tests:
``tests/checks/test_libraries.py`` is the library checks'.)
"""

from __future__ import annotations

import os

import pytest

from libdoctor.analysis.libraries import Provider, SystemOwners, analyse_libraries, system_owners
from libdoctor.external.ospackages import SystemPackage, SystemPackages
from libdoctor.loader.model import Resolution
from support.libchain import ChainEnv


def resolutions(chain: ChainEnv, environ: dict[str, str]) -> tuple[SystemPackages, SystemOwners]:
    analysis, _ = analyse_libraries(chain.target, environ, "/")
    found: list[Resolution] = [r for c in analysis.closures() for r in c.resolutions]
    packages = SystemPackages(root=str(chain.image), rpm=None)
    return packages, system_owners(analysis.env, found, packages)


@pytest.fixture(scope="module")
def joined(chain_env: ChainEnv) -> SystemOwners:
    return resolutions(chain_env, chain_env.environ)[1]


def test_a_library_found_outside_the_env_is_owned_by_its_system_package(
    joined: SystemOwners, chain_env: ChainEnv
) -> None:
    path = str(chain_env.image / "usr/lib/x/libsys.so.1")
    assert joined.owners == {path: SystemPackage("dpkg", "libsys1", "/usr/lib/x/libsys.so.1")}
    assert joined.owner(path + "/../libsys.so.1") == joined.owners[path]  # normalized
    assert joined.owner(None) is None


def test_what_a_distribution_claims_is_never_a_system_package_s(
    joined: SystemOwners, chain_env: ChainEnv
) -> None:
    """libmid, libleaf, libbypath: found, in the env's RECORD: no owner is looked up."""
    assert all(not p.startswith(str(chain_env.venv.path)) for p in joined.owners)
    assert joined.owner(str(chain_env.libs / "libmid.so.1")) is None


def test_a_name_nothing_finds_gets_the_packages_that_list_it(joined: SystemOwners) -> None:
    assert dict(joined.providers) == {
        "libabsent.so.9": (
            Provider(SystemPackage("dpkg", "libabsent9", "/usr/lib/gone/libabsent.so.9"), False),
        ),
        "libondisk.so.4": (
            Provider(SystemPackage("dpkg", "libondisk4", "/opt/elsewhere/libondisk.so.4"), True),
        ),
    }


def test_a_name_no_package_lists_or_one_requested_by_path_gets_no_provider(
    joined: SystemOwners,
) -> None:
    """libnobody.so.8: listed by none (no empty entry). ``$ORIGIN/../nowhere/libpath.so.5``:
    a path the package's file would not satisfy, though a package lists ``libpath.so.5``."""
    assert "libnobody.so.8" not in joined.providers
    assert not any("libpath" in name for name in joined.providers)


def test_without_the_caller_s_library_path_the_system_library_is_a_missing_name(
    chain_env: ChainEnv,
) -> None:
    """The same libsys.so.1, not on the search path: its package provides it, present."""
    _, alone = resolutions(chain_env, {})
    assert alone.owners == {}
    (provider,) = alone.providers["libsys.so.1"]
    assert provider == Provider(SystemPackage("dpkg", "libsys1", "/usr/lib/x/libsys.so.1"), True)
    assert os.path.isfile(chain_env.image / "usr/lib/x/libsys.so.1")
