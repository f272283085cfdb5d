"""Small fake CUDA stacks for the stack, preload and probe tests: real ELF files, real wheels.

- ``fake_lib``: a tiny gcc-built shared library (no libc) with a SONAME, NEEDED entries and
  RPATH/RUNPATH, padded with trailing bytes so two "builds" of one library differ in size.
- ``compile_extension``: a real, importable CPython extension module with chosen NEEDED
  entries and RPATH (needs gcc and Python.h; skips otherwise).
- ``TORCH_INIT``: a torch-like ``__init__.py`` that runs torch 2.14's CUDA preload flow (the
  same functions and statements, reduced to Linux), then ``from torch._C import *``.
- ``TorchStack``: the wheels of a fake torch 2.14.1+cu130 and its CUDA packages, plus
  leftovers of a CUDA 12 stack that share paths with them.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sysconfig
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from support.cc import compile_lib, require_gcc
from support.wheels import WheelFactory, extension_suffix, native_tag

__all__ = [
    "EXT",
    "TORCH_INIT",
    "TORCH_RPATH",
    "TorchStack",
    "compile_extension",
    "fake_lib",
    "torch_version_py",
]

EXT = extension_suffix()

# torch 2.14.1's DT_RPATH on every torch/lib/*.so (LOADER_SPEC §4).
TORCH_RPATH = ":".join(
    [f"$ORIGIN/../../nvidia/{d}/lib" for d in ("cudnn", "nvshmem", "nccl", "cusparselt", "cu13")]
    + ["$ORIGIN"]
)

TORCH_INIT = '''\
"""A torch-like package: torch 2.14's _load_global_deps flow, then torch._C."""
import ctypes
import glob
import os
import sys


def _get_cuda_dep_paths(path: str, lib_folder: str, lib_name: str) -> list:
    from torch.version import cuda as cuda_version

    nvidia_lib_paths = glob.glob(
        os.path.join(path, "nvidia", lib_folder, "lib", lib_name)
    )
    if cuda_version is not None:
        maj_cuda_version = cuda_version.split(".")[0]
        nvidia_lib_paths += glob.glob(
            os.path.join(path, "nvidia", f"cu{maj_cuda_version}", "lib", lib_name)
        )
    lib_paths = glob.glob(os.path.join(path, lib_folder, "lib", lib_name))

    return nvidia_lib_paths + lib_paths


def _preload_cuda_lib(lib_folder: str, lib_name: str, required: bool = True) -> None:
    lib_path = None
    for path in sys.path:
        candidate_lib_paths = _get_cuda_dep_paths(path, lib_folder, lib_name)
        if candidate_lib_paths:
            lib_path = candidate_lib_paths[0]
            break
    if not lib_path and required:
        raise ValueError(f"{lib_name} not found in the system path {sys.path}")
    if lib_path:
        ctypes.CDLL(lib_path)


def _preload_cuda_deps(err=None, required: bool = True) -> None:
    cuda_libs: list = [
        ("cublas", "libcublasLt.so.*[0-9]"),
        ("cublas", "libcublas.so.*[0-9]"),
        ("cudnn", "libcudnn.so.*[0-9]"),
        ("cuda_nvrtc", "libnvrtc.so.*[0-9]"),
        ("cuda_nvrtc", "libnvrtc-builtins.so.*[0-9]"),
        ("cuda_runtime", "libcudart.so.*[0-9]"),
        ("cuda_cupti", "libcupti.so.*[0-9]"),
        ("cufft", "libcufft.so.*[0-9]"),
        ("curand", "libcurand.so.*[0-9]"),
        ("nvjitlink", "libnvJitLink.so.*[0-9]"),
        ("cusparse", "libcusparse.so.*[0-9]"),
        ("cusparselt", "libcusparseLt.so.*[0-9]"),
        ("cusolver", "libcusolver.so.*[0-9]"),
        ("nccl", "libnccl.so.*[0-9]"),
        ("nvshmem", "libnvshmem_host.so.*[0-9]"),
        ("cufile", "libcufile.so.*[0-9]"),
    ]
    if err is not None and not [
        lib for _, lib in cuda_libs if lib.split(".", 1)[0] in err.args[0]
    ]:
        raise err
    for lib_folder, lib_name in cuda_libs:
        _preload_cuda_lib(lib_folder, lib_name, required=required)
    _preload_cuda_lib("nvtx", "libnvToolsExt.so.*[0-9]", required=False)


def _load_global_deps() -> None:
    here = os.path.abspath(__file__)
    global_deps_lib_path = os.path.join(os.path.dirname(here), "lib", "libtorch_global_deps.so")
    try:
        ctypes.CDLL(global_deps_lib_path, mode=ctypes.RTLD_GLOBAL)
        try:
            with open("/proc/self/maps") as f:
                _maps = f.read()
            if "libcudart.so" not in _maps:
                return
            _preload_cuda_deps(required=False)
        except Exception:
            pass
    except OSError as err:
        _preload_cuda_deps(err)
        ctypes.CDLL(global_deps_lib_path, mode=ctypes.RTLD_GLOBAL)


_load_global_deps()
from torch._C import *  # noqa: E402,F403
'''


def torch_version_py(version: str, cuda: str | None) -> bytes:
    """torch/version.py as the torch build writes it."""
    return (
        "from typing import Optional\n\n"
        "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n"
        f"__version__ = {version!r}\n"
        "debug = False\n"
        f"cuda: Optional[str] = {cuda!r}\n"
        "git_version = '0000000000000000000000000000000000000000'\n"
        "hip: Optional[str] = None\n"
    ).encode()


@functools.cache
def _scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="libdoctor-stackfake-"))


@functools.cache
def _lib_bytes(
    soname: str, needed: tuple[str, ...], rpath: str | None, runpath: str | None
) -> bytes:
    directory = Path(tempfile.mkdtemp(dir=_scratch()))
    return compile_lib(
        directory, soname, soname=soname, needed=needed, rpath=rpath, runpath=runpath
    ).read_bytes()


def fake_lib(
    soname: str,
    *,
    needed: Sequence[str] = (),
    rpath: str | None = None,
    runpath: str | None = None,
    pad: int = 0,
) -> bytes:
    """A loadable shared library; PAD trailing bytes make another build of the same library."""
    return _lib_bytes(soname, tuple(needed), rpath, runpath) + b"\0" * pad


_EXT_SOURCE = """\
#include <Python.h>
static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&def); }}
"""


def compile_extension(
    name: str,
    *,
    needed: Sequence[str] = (),
    rpath: str | None = None,
    runpath: str | None = None,
) -> bytes:
    """An importable extension module NAME whose DT_NEEDED are exactly NEEDED (plus libc)."""
    gcc = require_gcc()
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        pytest.skip(f"Python.h not found in {include}: cannot build an extension module")
    work = Path(tempfile.mkdtemp(dir=_scratch()))
    src = work / f"{name}.c"
    src.write_text(_EXT_SOURCE.format(name=name))
    stubs: list[str] = []
    for soname in needed:  # link against a stub whose SONAME is the wanted NEEDED string
        stub_dir = work / f"stub-{len(stubs)}"
        stubs.append(str(compile_lib(stub_dir, soname, soname=soname)))
    out = work / f"{name}{EXT}"
    cmd = [gcc, "-shared", "-fPIC", f"-I{include}", "-o", str(out), str(src)]
    if rpath is not None:
        cmd += ["-Wl,--disable-new-dtags", f"-Wl,-rpath,{rpath}"]
    if runpath is not None:
        cmd += ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"]
    cmd += ["-Wl,--no-as-needed", *stubs]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"compiling {name} failed:\n{done.stderr}")
    data = out.read_bytes()
    shutil.rmtree(work, ignore_errors=True)
    return data


class TorchStack:
    """Wheels of a fake CUDA 13 torch and its CUDA packages, and of CUDA 12 leftovers.

    Sizes: every CUDA 12 library is padded differently from its CUDA 13 namesake, so the
    bytes on disk tell who wrote a shared path by size alone.
    """

    TORCH = "2.14.1"
    CUDNN13 = "9.24.0.43"
    CUDNN12 = "9.10.2.21"

    def __init__(self, wheels: WheelFactory) -> None:
        self.wheels = wheels
        self.dest = wheels.dest

    def torch(
        self,
        *,
        version: str = "2.14.1+cu130",
        dist_version: str = TORCH,
        cuda: str | None = "13.0",
        init: str = TORCH_INIT,
        requires: Sequence[str] = (
            "cuda-toolkit[cudart,cusparse]==13.0.3",
            f"nvidia-cudnn-cu13=={CUDNN13}",
        ),
    ) -> Path:
        deps = ("libcudnn.so.9", "libcusparse.so.12", "libcudart.so.13")
        files: Mapping[str, bytes] = {
            "torch/__init__.py": init.encode(),
            "torch/version.py": torch_version_py(version, cuda),
            "torch/lib/libtorch_global_deps.so": fake_lib(
                "libtorch_global_deps.so", needed=("libcudart.so.13",), rpath=TORCH_RPATH
            ),
            "torch/lib/libtorch_cuda.so": fake_lib(
                "libtorch_cuda.so", needed=deps, rpath=TORCH_RPATH
            ),
            f"torch/_C{EXT}": compile_extension(
                "_C", needed=["libtorch_cuda.so"], rpath=TORCH_RPATH + ":$ORIGIN/lib"
            ),
        }
        return self.wheels("torch", dist_version, files, requires=requires, tag=native_tag())

    def toolkit(self) -> Path:
        """cuda-toolkit 13.0.3: a metapackage whose extras pin the CUDA 13 component wheels."""
        return self.wheels(
            "cuda-toolkit",
            "13.0.3",
            {},
            requires=(
                "nvidia-cuda-runtime==13.0.96.*; extra == 'cudart'",
                "nvidia-cusparse==12.6.3.3.*; extra == 'cusparse'",
            ),
            extra_metadata=[("Provides-Extra", "cudart"), ("Provides-Extra", "cusparse")],
        )

    def cudart13(self) -> Path:
        lib = fake_lib("libcudart.so.13", runpath="$ORIGIN")
        return self.wheels(
            "nvidia-cuda-runtime", "13.0.96", {"nvidia/cu13/lib/libcudart.so.13": lib}
        )

    def cusparse13(self) -> Path:
        lib = fake_lib("libcusparse.so.12", runpath="$ORIGIN", pad=16)
        return self.wheels(
            "nvidia-cusparse", "12.6.3.3", {"nvidia/cu13/lib/libcusparse.so.12": lib}
        )

    def cudnn13(self, version: str = CUDNN13, pad: int = 300) -> Path:
        lib = fake_lib("libcudnn.so.9", rpath="$ORIGIN", pad=pad)
        return self.wheels("nvidia-cudnn-cu13", version, {"nvidia/cudnn/lib/libcudnn.so.9": lib})

    def cudnn12(self) -> Path:
        """CUDA 12's cuDNN: the same path as nvidia-cudnn-cu13's, other bytes."""
        files = {
            "nvidia/__init__.py": b"",
            "nvidia/cudnn/__init__.py": b"",
            "nvidia/cudnn/lib/libcudnn.so.9": fake_lib("libcudnn.so.9", rpath="$ORIGIN", pad=100),
        }
        return self.wheels("nvidia-cudnn-cu12", self.CUDNN12, files)

    def cusparse12(self) -> Path:
        """CUDA 12's cuSPARSE: same soname as CUDA 13's, in nvidia/cusparse/lib."""
        files = {
            "nvidia/__init__.py": b"",
            "nvidia/cusparse/__init__.py": b"",
            "nvidia/cusparse/lib/libcusparse.so.12": fake_lib(
                "libcusparse.so.12", runpath="$ORIGIN", pad=50
            ),
        }
        return self.wheels("nvidia-cusparse-cu12", "12.5.8.93", files)

    def coherent(self) -> list[Path]:
        """torch and exactly what it pins, in install order."""
        return [self.toolkit(), self.cudart13(), self.cusparse13(), self.cudnn13(), self.torch()]
