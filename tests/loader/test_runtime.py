"""Libraries a package loads itself (loader.runtime): cuda-pathfinder's catalog read from the
installed package, and what check makes of it on real venvs with gcc-built libraries.

cupy loads cuBLAS and friends with cuda-pathfinder (``ctypes.CDLL`` by absolute path, from
the sibling nvidia wheels' directories) before it imports the extension that needs them: a
library found that way is resolved; one it would load that nothing ships is an optional
feature; a file a RECORD lists there that is gone is still an error with its reinstall.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from libdoctor.loader.runtime import SEARCHES
from support.cc import lib_bytes, require_gcc
from support.dists import fake_dist
from support.stackfake import TorchStack
from support.venvs import Libdoctor, Venv, VenvFactory, pip_install, pip_uninstall
from support.wheels import WheelFactory, extension_suffix

EXT = extension_suffix()
CATALOG = b"""
from dataclasses import dataclass

@dataclass(frozen=True)
class DescriptorSpec:
    name: str
    linux_sonames: tuple = ()
    site_packages_linux: tuple = ()

DESCRIPTOR_CATALOG = (
    DescriptorSpec(
        name="cublas",
        linux_sonames=("libcublas.so.13", "libcublas.so.12"),
        site_packages_linux=("nvidia/cu13/lib", "nvidia/cublas/lib"),
    ),
    DescriptorSpec(name="cutensor", linux_sonames=("libcutensor.so.2",),
                   site_packages_linux=("cutensor/lib",)),
)
"""
CATALOG_PATH = "cuda/pathfinder/_dynamic_libs/descriptor_catalog.py"
Doc = dict[str, Any]


def test_the_catalog_is_read_from_the_installed_package(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / CATALOG_PATH).parent.mkdir(parents=True)
    (site / CATALOG_PATH).write_bytes(CATALOG)
    (pathfinder,) = SEARCHES
    catalog = pathfinder.catalog(fake_dist("cuda-pathfinder", "1.9", site=str(site)))
    assert catalog["libcublas.so.12"] == ("nvidia/cu13/lib", "nvidia/cublas/lib")
    assert catalog["libcutensor.so.2"] == ("cutensor/lib",)
    assert pathfinder.catalog(fake_dist("cuda-pathfinder", "1.9", site=str(tmp_path))) == {}


@pytest.fixture
def cupylike(new_venv: VenvFactory, make_wheel: WheelFactory, tmp_path: Path) -> tuple[Venv, Path]:
    """cupylike requires cuda-pathfinder; strictlike needs the same library and does not."""
    require_gcc()
    build = tmp_path / "build"
    wheels = [
        make_wheel(
            "cuda-pathfinder", "1.9.1", {"cuda/pathfinder/__init__.py": b"", CATALOG_PATH: CATALOG}
        ),
        make_wheel(
            "nvidia-cublas-cu12",
            "12.9.2.10",
            {
                "nvidia/cublas/lib/libcublas.so.12": lib_bytes(
                    build, "libcublas.so.12", soname="libcublas.so.12"
                )
            },
        ),
        make_wheel(
            "cupylike",
            "1.0",
            {
                "cupylike/__init__.py": b"",
                f"cupylike/_blas{EXT}": lib_bytes(
                    build, f"a/_blas{EXT}", needed=["libcublas.so.12"]
                ),
                f"cupylike/_tensor{EXT}": lib_bytes(
                    build, f"b/_tensor{EXT}", needed=["libcutensor.so.2"]
                ),
            },
            requires=["cuda-pathfinder>=1"],
        ),
        make_wheel(
            "strictlike",
            "1.0",
            {
                "strictlike/__init__.py": b"",
                f"strictlike/_blas{EXT}": lib_bytes(
                    build, f"c/_blas{EXT}", needed=["libcublas.so.12"]
                ),
            },
        ),
    ]
    venv = new_venv("pathfinder")
    pip_install(venv, *wheels)
    return venv, venv.site_packages / "nvidia/cublas/lib/libcublas.so.12"


def _by_code(doc: Doc) -> dict[str, list[Doc]]:
    out: dict[str, list[Doc]] = {}
    for finding in doc["findings"]:
        out.setdefault(finding["code"], []).append(finding)
    return out


def test_a_library_the_package_loads_itself_is_resolved(
    cupylike: tuple[Venv, Path], libdoctor: Libdoctor
) -> None:
    venv, _ = cupylike
    found = _by_code(libdoctor.check(venv.path, "--json", "--all").json())
    (strict,) = found["unresolved-library"]  # strictlike has no loader of its own: strict
    assert strict["distribution"]["name"] == "strictlike"
    (optional,) = found["optional-library-missing"]
    assert optional["evidence"]["library"] == "libcutensor.so.2"
    assert optional["evidence"]["runtime_loader"]["name"] == "cuda-pathfinder"
    assert optional["evidence"]["runtime_loader"]["searched"] == [
        str(venv.site_packages / "cutensor/lib")
    ]
    assert set(found) == {"unresolved-library", "optional-library-missing"}


def test_a_lost_file_where_the_package_looks_is_still_an_error(
    cupylike: tuple[Venv, Path], libdoctor: Libdoctor
) -> None:
    venv, lib = cupylike
    lib.unlink()
    found = _by_code(libdoctor.check(venv.path, "--json").json())
    (unresolved,) = found["unresolved-library"]  # one finding per library, both requesters
    assert {os.path.basename(os.path.dirname(p)) for p in unresolved["paths"]} == {
        "cupylike",
        "strictlike",
    }
    assert unresolved["fix"]["argv"][-1] == "nvidia-cublas-cu12==12.9.2.10"


def test_why_says_which_package_loads_it(cupylike: tuple[Venv, Path], libdoctor: Libdoctor) -> None:
    venv, lib = cupylike
    text = libdoctor("why", "libcublas.so.12", venv.path)
    assert f"found by cuda-pathfinder, which loads it before the import: {lib}" in text.stdout
    doc = libdoctor("why", "libcublas.so.12", venv.path, "--json").json()
    loaded = [r["runtime_loader"] for r in doc["requests"] if "runtime_loader" in r]
    assert loaded and loaded[0]["found"] == [str(lib)]


PATHFINDER_CUDNN = b"""
class DescriptorSpec:
    def __init__(self, **kw):
        self.__dict__.update(kw)

DESCRIPTOR_CATALOG = (
    DescriptorSpec(name="cudnn", linux_sonames=("libcudnn.so.9",),
                   site_packages_linux=("nvidia/cudnn/lib",)),
)
"""


def test_a_loader_reached_only_through_another_requirement_excuses_nothing(
    make_wheel: WheelFactory, new_venv: VenvFactory, libdoctor: Libdoctor
) -> None:
    """torch 2.14.1 cu13 requires cuda-bindings, which requires cuda-pathfinder: torch's
    own import never calls it. With nvidia-cudnn-cu13 uninstalled, libcudnn.so.9 (needed by
    torch._C's closure) is an error, and its cause is "import torch fails" with the install
    requirement-missing gives (issue 22: it was a hidden info)."""
    stack = TorchStack(make_wheel)
    bindings = make_wheel("cuda-bindings", "13.5.0", {}, requires=["cuda-pathfinder>=1.4"])
    pathfinder = make_wheel(
        "cuda-pathfinder",
        "1.9.1",
        {"cuda/pathfinder/__init__.py": b"", CATALOG_PATH: PATHFINDER_CUDNN},
    )
    requires = (
        "cuda-toolkit[cudart,cusparse]==13.0.3",
        f"nvidia-cudnn-cu13=={TorchStack.CUDNN13}",
        "cuda-bindings>=13",
    )
    venv = new_venv("cu13-cudnn")
    pip_install(venv, *stack.coherent()[:-1], pathfinder, bindings, stack.torch(requires=requires))
    assert libdoctor.check(venv.path).rc == 0
    pip_uninstall(venv, "nvidia-cudnn-cu13")
    doc = libdoctor.check(venv.path, "--json", "--all").json()
    found = _by_code(doc)
    (unresolved,) = found["unresolved-library"]
    assert unresolved["severity"] == "error"
    assert unresolved["evidence"]["library"] == "libcudnn.so.9"
    assert "optional-library-missing" not in found
    assert unresolved["fix"]["argv"][-1] == f"nvidia-cudnn-cu13=={TorchStack.CUDNN13}"
    titled = [c for c in doc["causes"] if c["title"]]
    assert any(c["title"].startswith("import torch fails") for c in titled), titled
    text = libdoctor.check(venv.path, env={"NO_COLOR": "1"})
    assert text.rc == 1 and "import torch fails" in text.stdout, text.stdout
    assert "libcudnn.so.9" in text.stdout
