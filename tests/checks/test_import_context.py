"""Libraries an import finds already loaded (loader.imported), on real venvs.

torchstub is torch's shape: ``import torchstub`` imports its ``_C``, which loads
``libtorchstub.so`` through its RPATH. extpkg is a ``torch.utils.cpp_extension`` build's
shape: its ``__init__`` imports torchstub first, and its extension needs ``libtorchstub.so``
by soname with no RPATH (and extpkg does not declare the requirement, as sgl-kernel does
not). glibc satisfies it from the objects already loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.cc import lib_bytes, require_gcc
from support.checkdoc import by_code
from support.venvs import Libdoctor, Venv, VenvFactory, pip_install
from support.wheels import WheelFactory, extension_suffix, native_tag

EXT = extension_suffix()
Doc = dict[str, Any]


@pytest.fixture
def build(tmp_path: Path) -> Path:
    require_gcc()
    return tmp_path / "build"


def _torchstub(make_wheel: WheelFactory, build: Path) -> Path:
    return make_wheel(
        "torchstub",
        "2.14.1",
        {
            "torchstub/__init__.py": b"import os\nfrom torchstub._C import *\n",
            f"torchstub/_C{EXT}": lib_bytes(
                build, f"_C{EXT}", needed=["libtorchstub.so", "libcudnnstub.so.9"],
                rpath="$ORIGIN/lib",
            ),
            "torchstub/lib/libtorchstub.so": lib_bytes(
                build, "libtorchstub.so", soname="libtorchstub.so"
            ),
            "torchstub/lib/libcudnnstub.so.9": lib_bytes(
                build, "libcudnnstub.so.9", soname="libcudnnstub.so.9"
            ),
        },
        tag=native_tag(),
    )  # fmt: skip


def _extension(make_wheel: WheelFactory, build: Path, name: str, init: bytes) -> Path:
    return make_wheel(
        name,
        "0.3.21",
        {
            f"{name}/__init__.py": init,
            f"{name}/ops{EXT}": lib_bytes(build / name, f"ops{EXT}", needed=["libtorchstub.so"]),
        },
        tag=native_tag(),
    )


@pytest.fixture
def venv(make_wheel: WheelFactory, new_venv: VenvFactory, build: Path) -> Venv:
    venv = new_venv("import-context")
    pip_install(
        venv,
        _torchstub(make_wheel, build),
        _extension(make_wheel, build, "extpkg", b"import torchstub\nfrom extpkg import ops\n"),
        _extension(make_wheel, build, "strayext", b"from strayext import ops\n"),
    )
    return venv


def test_a_library_loaded_by_an_earlier_import_is_found(venv: Venv, libdoctor: Libdoctor) -> None:
    found = by_code(libdoctor.check(venv.path, "--json", "--all").json())
    (unresolved,) = found["unresolved-library"]  # strayext imports nothing first: an error
    assert unresolved["distribution"]["name"] == "strayext"
    assert unresolved["evidence"]["modules"] == ["strayext.ops"]


def test_why_says_it_is_already_loaded(venv: Venv, libdoctor: Libdoctor) -> None:
    run = libdoctor("why", "libtorchstub.so", venv.path)
    assert "already loaded by import torchstub" in run.stdout, run.stdout
    assert "extpkg/__init__.py:1" in run.stdout, run.stdout


def test_when_the_earlier_import_fails_the_extension_fails_with_it(
    venv: Venv, libdoctor: Libdoctor
) -> None:
    (venv.site_packages / "torchstub/lib/libcudnnstub.so.9").unlink()
    doc = libdoctor.check(venv.path, "--json").json()
    (cudnn,) = [f for f in by_code(doc)["unresolved-library"] if f["evidence"]["library"]
                == "libcudnnstub.so.9"]  # fmt: skip
    assert "extpkg.ops" in cudnn["evidence"]["modules"]
    assert "With it import torchstub fails, and so does import extpkg.ops" in cudnn["message"]
    (fails_with,) = cudnn["evidence"]["fails_with"]
    assert fails_with["loaded_by"] == "import torchstub"
    assert fails_with["imported_at"] == "extpkg/__init__.py:1"


def _audiopkg(make_wheel: WheelFactory, build: Path) -> Path:
    """torchaudio's shape: ``_extension`` loads ``lib/libaudiocore.so`` by path (ctypes, as
    ``torch.ops.load_library`` does) and then imports ``lib._audio``, which needs it by
    soname with no RPATH. ``stray`` imports ``lib._stray`` (the same need) with no load
    before it, and runs first."""
    extension = (
        b"import os\nfrom ctypes import CDLL\n\n"
        b"def _load(lib):\n"
        b"    CDLL(os.path.join(os.path.dirname(__file__), 'lib', lib + '.so'))\n\n"
        b"_load('libaudiocore')\nimport audiopkg.lib._audio\n"
    )
    core = ["libaudiocore.so"]
    return make_wheel(
        "audiopkg",
        "2.9.1",
        {
            "audiopkg/__init__.py": b"from audiopkg import stray, _extension\n",
            "audiopkg/_extension.py": extension,
            "audiopkg/stray.py": b"import audiopkg.lib._stray\n",
            "audiopkg/lib/__init__.py": b"",
            "audiopkg/lib/libaudiocore.so": lib_bytes(build / "a", "libaudiocore.so",
                                                 soname="libaudiocore.so"),
            f"audiopkg/lib/_audio{EXT}": lib_bytes(build / "a", f"_audio{EXT}", needed=core),
            f"audiopkg/lib/_stray{EXT}": lib_bytes(build / "a", f"_stray{EXT}", needed=core),
        },
        tag=native_tag(),
    )  # fmt: skip


def test_a_library_its_own_package_loads_by_path_first_is_found(
    make_wheel: WheelFactory, new_venv: VenvFactory, build: Path, libdoctor: Libdoctor
) -> None:
    venv = new_venv("load-by-path")
    pip_install(venv, _audiopkg(make_wheel, build))
    found = by_code(libdoctor.check(venv.path, "--json", "--all").json())
    (unresolved,) = found["unresolved-library"]  # only the module imported with no load first
    assert unresolved["evidence"]["library"] == "libaudiocore.so"
    assert unresolved["evidence"]["modules"] == ["audiopkg.lib._stray"]
    run = libdoctor("why", "libaudiocore.so", venv.path)
    assert "loaded by path at audiopkg/_extension.py:7" in run.stdout, run.stdout
