"""Torch extension packages against the torch they load with (checks.extensions), on real
venvs with gcc-built stand-ins.

"torch" here is a package of that name whose ``_C`` loads ``libtorch.so`` (which exports two
c10 functions) and whose ``version.py`` says which CUDA it is built for; extpkg is a
``cpp_extension`` build: its ``__init__`` imports torch first, its module needs
``libtorch.so`` by soname with no RPATH and calls a c10 function.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.cc import lib_bytes, require_gcc
from support.stackfake import torch_version_py
from support.venvs import Libdoctor, VenvFactory, pip_install
from support.wheels import WheelFactory, extension_suffix, native_tag

EXT = extension_suffix()
Doc = dict[str, Any]
HEAD = "_ZN3c104headEv"  # c10::head()
TAIL = "_ZN3c104tailEv"  # c10::tail()
GONE = "_ZN3c106legacyEv"  # c10::legacy(): what an older torch exported
STABLE = "aoti_torch_newer"  # a function of torch's stable C ABI that a newer torch added


def _torch(make_wheel: WheelFactory, build: Path, cuda: str, version: str = "2.14.1") -> Path:
    return make_wheel(
        "torch",
        version,
        {
            "torch/__init__.py": b"from torch._C import *\n",
            "torch/version.py": torch_version_py(f"{version}+cu{cuda.replace('.', '')}", cuda),
            f"torch/_C{EXT}": lib_bytes(build / "t", f"_C{EXT}", needed=["libtorch.so"],
                                   rpath="$ORIGIN/lib"),
            "torch/lib/libtorch.so": lib_bytes(build / "t", "libtorch.so", soname="libtorch.so",
                                          exports=[HEAD, TAIL]),
        },
        tag=native_tag(),
    )  # fmt: skip


def _extension(
    make_wheel: WheelFactory, build: Path, imports: list[str], needed: list[str]
) -> Path:
    return make_wheel(
        "extpkg",
        "0.3.21",
        {
            "extpkg/__init__.py": b"import torch\nfrom extpkg import ops\n",
            f"extpkg/ops{EXT}": lib_bytes(build / "e", f"ops{EXT}", needed=needed, imports=imports),
        },
        tag=native_tag(),
    )


def _check(
    make_wheel: WheelFactory,
    new_venv: VenvFactory,
    libdoctor: Libdoctor,
    tmp_path: Path,
    *,
    cuda: str = "13.0",
    imports: tuple[str, ...] = (HEAD,),
    needed: tuple[str, ...] = ("libtorch.so",),
) -> dict[str, list[Doc]]:
    require_gcc()
    build = tmp_path / "build"
    venv = new_venv("torch-ext")
    pip_install(
        venv, _torch(make_wheel, build, cuda), _extension(make_wheel, build, [*imports], [*needed])
    )
    out: dict[str, list[Doc]] = {}
    for finding in libdoctor.check(venv.path, "--json", "--all").json()["findings"]:
        if finding["code"] != "model-unknown":  # the stand-in's __init__ is no real torch's
            out.setdefault(finding["code"], []).append(finding)
    return out


def test_an_extension_built_for_its_torch_is_clean(
    make_wheel: WheelFactory, new_venv: VenvFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    found = _check(make_wheel, new_venv, libdoctor, tmp_path)
    assert found == {}, found


def test_a_symbol_torch_does_not_export_is_an_abi_error(
    make_wheel: WheelFactory, new_venv: VenvFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    found = _check(make_wheel, new_venv, libdoctor, tmp_path, imports=(HEAD, GONE))
    (abi,) = found["extension-abi-mismatch"]
    assert abi["evidence"]["missing_count"] == 1
    assert list(abi["evidence"]["missing"].values()) == [[GONE]]
    assert "built against another torch" in abi["message"]
    assert set(found) == {"extension-abi-mismatch"}


def test_another_cuda_major_is_named_once(
    make_wheel: WheelFactory, new_venv: VenvFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    needed = ("libtorch.so", "libcudart.so.12")
    found = _check(make_wheel, new_venv, libdoctor, tmp_path, needed=needed)
    (cuda,) = found["extension-cuda-mismatch"]
    assert "built for CUDA 12 (needs libcudart.so.12)" in cuda["message"]
    assert "built for CUDA 13" in cuda["message"]
    assert cuda["evidence"]["not_found"] == ["libcudart.so.12"]
    assert "unresolved-library" not in found  # folded into the one cause


@pytest.mark.parametrize("cuda", ["12.8"])
def test_the_same_major_is_no_mismatch(
    cuda: str,
    make_wheel: WheelFactory,
    new_venv: VenvFactory,
    libdoctor: Libdoctor,
    tmp_path: Path,
) -> None:
    needed = ("libtorch.so", "libcudart.so.12")
    found = _check(make_wheel, new_venv, libdoctor, tmp_path, cuda=cuda, needed=needed)
    assert "extension-cuda-mismatch" not in found


def test_plan_install_of_another_torch_under_an_extension_is_a_break(
    make_wheel: WheelFactory, new_venv: VenvFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    """Issue 28 item 4: the extension works with today's torch; a torch of another release
    (or CUDA major) planned over it breaks its import."""
    require_gcc()
    build = tmp_path / "build"
    venv = new_venv("torch-replace")
    pip_install(
        venv,
        _torch(make_wheel, build, "13.0"),
        _extension(make_wheel, build, [HEAD], ["libtorch.so"]),
    )
    same = _torch(make_wheel, tmp_path / "same", "13.0", version="2.14.2")
    assert libdoctor("plan", "install", same, venv.path).rc == 0
    newer = _torch(make_wheel, tmp_path / "newer", "13.0", version="2.15.0")
    run = libdoctor("plan", "install", newer, venv.path, "--json")
    assert run.rc == 1, run.describe()
    assert "extension-abi-mismatch" in run.stdout
    assert "torch 2.15.0 would replace torch 2.14.1+cu130" in run.stdout


def test_a_library_loaded_by_path_is_held_against_torch_too(
    make_wheel: WheelFactory, new_venv: VenvFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    """torchvision's ``_C.so``, torchaudio's ``libtorchaudio.so``: no ``PyInit``, loaded by
    ``torch.ops.load_library``, so no module's closure holds it; its torch ABI and CUDA
    build are the package's all the same."""
    require_gcc()
    build = tmp_path / "build"
    venv = new_venv("torch-oplib")
    needed = ["libtorch.so", "libcudart.so.12", "libvisionown.so"]
    imports = [GONE, STABLE, "torch_own_helper"]  # the last: its own library's, not torch's
    ops = lib_bytes(build / "o", "_C.so", needed=needed, imports=imports, rpath="$ORIGIN")
    own = lib_bytes(build / "o", "libvisionown.so", soname="libvisionown.so",
               exports=["torch_own_helper"])  # fmt: skip
    wheel = make_wheel(
        "visionpkg",
        "0.24.1",
        {
            "visionpkg/__init__.py": b"import torch\n",
            "visionpkg/_C.so": ops,
            "visionpkg/libvisionown.so": own,
        },
        tag=native_tag(),
    )
    pip_install(venv, _torch(make_wheel, build, "13.0"), wheel)
    found: dict[str, list[Doc]] = {}
    for finding in libdoctor.check(venv.path, "--json").json()["findings"]:
        found.setdefault(finding["code"], []).append(finding)
    (abi,) = found["extension-abi-mismatch"]
    assert abi["distribution"]["name"] == "visionpkg"
    assert list(abi["evidence"]["missing"].values()) == [[GONE, STABLE]]
    assert "loading visionpkg/_C.so (torch.ops.load_library) fails" in abi["message"]
    (cuda,) = found["extension-cuda-mismatch"]
    assert "built for CUDA 12 (needs libcudart.so.12)" in cuda["message"]
