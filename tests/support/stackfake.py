"""Small fake CUDA stacks for the stack, preload and probe tests: real ELF files, real wheels.

- ``fake_lib``: a tiny gcc-built shared library (no libc) with a SONAME, NEEDED entries and
  RPATH/RUNPATH, padded with trailing bytes so two "builds" of one library differ in size.
- ``compile_extension``: a real, importable CPython extension module with chosen NEEDED
  entries and RPATH (needs gcc and Python.h; skips otherwise).
- ``TORCH_INIT``: a torch-like ``__init__.py`` that runs torch 2.14's CUDA preload flow (the
  same functions and statements, reduced to Linux), then ``from torch._C import *``.
- ``TORCH_INITS``: one such ``__init__.py`` per shape the preload has had since 2.4 (keyed by
  the first version of the shape), each with the lists of one release of that shape.
- ``TorchStack``: the wheels of a fake torch 2.14.1+cu130 and its CUDA packages, plus
  leftovers of a CUDA 12 stack that share paths with them.
- ``Torch29Stack``: a fake torch 2.9.1+cu128 (the 2.9 preload) and its CUDA 12 wheels.
- ``tf_build_info``: TensorFlow's build_info.py for a CUDA version (None: a CPU build).
- ``framework_wheel``: a fake TensorFlow, onnxruntime-gpu, jax plugin or cupy wheel that
  carries its CUDA build the way the real one does.
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
    "TORCH_INITS",
    "TORCH_RPATH",
    "Torch29Stack",
    "TorchStack",
    "compile_extension",
    "fake_lib",
    "framework_wheel",
    "tf_build_info",
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


_HEAD = """\
\"\"\"A torch-like package: torch {shape}'s _load_global_deps flow, then torch._C.\"\"\"
import ctypes
import glob
import os
import sys

"""
_TAIL = """

_load_global_deps()
from torch._C import *  # noqa: E402,F403
"""

# torch 2.4 and 2.5: entries without nvidia/ skipped; a preload only after an error.
_SEARCH_2_4 = """
def _preload_cuda_deps(lib_folder, lib_name):
    lib_path = None
    for path in sys.path:
        nvidia_path = os.path.join(path, "nvidia")
        if not os.path.exists(nvidia_path):
            continue
        candidate_lib_paths = glob.glob(os.path.join(nvidia_path, lib_folder, "lib", lib_name))
        if candidate_lib_paths and not lib_path:
            lib_path = candidate_lib_paths[0]
        if lib_path:
            break
    if not lib_path:
        raise ValueError(f"{lib_name} not found in the system path {sys.path}")
    ctypes.CDLL(lib_path)
"""
# torch 2.6: p/<folder>/lib only when p/nvidia/<folder>/lib has no hit.
_SEARCH_2_6 = _SEARCH_2_4.replace(
    "        if candidate_lib_paths and not lib_path:",
    "        if not candidate_lib_paths:\n"
    '            candidate_lib_paths = glob.glob(os.path.join(path, lib_folder, "lib", lib_name))\n'
    "        if candidate_lib_paths and not lib_path:",
)
# torch 2.7 and 2.8: every template's hits, joined, in _get_cuda_dep_paths.
_SEARCH_2_7 = """
def _get_cuda_dep_paths(path, lib_folder, lib_name):
    nvidia_lib_paths = glob.glob(os.path.join(path, "nvidia", lib_folder, "lib", lib_name))
    lib_paths = glob.glob(os.path.join(path, lib_folder, "lib", lib_name))
    return nvidia_lib_paths + lib_paths


def _preload_cuda_deps(lib_folder, lib_name):
    lib_path = None
    for path in sys.path:
        candidate_lib_paths = _get_cuda_dep_paths(path, lib_folder, lib_name)
        if candidate_lib_paths:
            lib_path = candidate_lib_paths[0]
            break
    if not lib_path:
        raise ValueError(f"{lib_name} not found in the system path {sys.path}")
    ctypes.CDLL(lib_path)
"""
# torch 2.9 on: p/nvidia/cu<major>/lib too, and a miss may be allowed.
_DEP_PATHS_2_9 = """
def _get_cuda_dep_paths(path, lib_folder, lib_name):
    from torch.version import cuda as cuda_version

    nvidia_lib_paths = glob.glob(os.path.join(path, "nvidia", lib_folder, "lib", lib_name))
    if cuda_version is not None:
        maj_cuda_version = cuda_version.split(".")[0]
        nvidia_lib_paths += glob.glob(
            os.path.join(path, "nvidia", f"cu{{maj_cuda_version}}", "lib", lib_name)
        )
    lib_paths = glob.glob(os.path.join(path, lib_folder, "lib", lib_name))
    return nvidia_lib_paths + lib_paths


def {name}(lib_folder, lib_name, required=True):
    lib_path = None
    for path in sys.path:
        candidate_lib_paths = _get_cuda_dep_paths(path, lib_folder, lib_name)
        if candidate_lib_paths:
            lib_path = candidate_lib_paths[0]
            break
    if not lib_path and required:
        raise ValueError(f"{{lib_name}} not found in the system path {{sys.path}}")
    if lib_path:
        ctypes.CDLL(lib_path)
"""
# _load_global_deps up to 2.9: cuda_libs is a dict here, preloaded on step 1's error.
_GLOBAL_DEPS_DICT = """

def _load_global_deps():
    here = os.path.abspath(__file__)
    global_deps_lib_path = os.path.join(os.path.dirname(here), "lib", "libtorch_global_deps.so")
    try:
        ctypes.CDLL(global_deps_lib_path, mode=ctypes.RTLD_GLOBAL)
{on_success}    except OSError as err:
        cuda_libs = {{
{cuda_libs}        }}
{by_major}        if not [lib for lib in cuda_libs.values() if lib.split(".")[0] in err.args[0]]:
            raise err
        for lib_folder, lib_name in cuda_libs.items():
            _preload_cuda_deps(lib_folder, lib_name)
{optional}        ctypes.CDLL(global_deps_lib_path, mode=ctypes.RTLD_GLOBAL)
"""
_ON_MAPPED = """\
        try:
            with open("/proc/self/maps") as f:
                _maps = f.read()
            if "{needle}" not in _maps:
                return
{calls}        except Exception:
            pass
"""
_CUFILE_FROM_12 = """\
        from torch.version import cuda as cuda_version

        if cuda_version is not None:
            t_version = cuda_version.split(".")
            t_major = int(t_version[0])
            if t_major >= 12:
                cuda_libs["cufile"] = "libcufile.so.*[0-9]"
"""
_NVTX_OPTIONAL = """\
        _preload_cuda_deps("nvtx", "libnvToolsExt.so.*[0-9]", required=False)
"""


def _dict_entries(spec: str) -> str:
    pairs = (item.split(":") for item in spec.split())
    return "".join(f'            "{folder}": "{stem}.so.*[0-9]",\n' for folder, stem in pairs)


def _calls(spec: str) -> str:
    pairs = (item.split(":") for item in spec.split())
    return "".join(
        f'            _preload_cuda_deps("{folder}", "{stem}.so.*[0-9]")\n'
        for folder, stem in pairs
    )


def _dict_shape(shape: str, search: str, libs: str, **parts: str) -> str:
    flow = _GLOBAL_DEPS_DICT.format(
        on_success=parts.get("on_success", ""),
        cuda_libs=_dict_entries(libs),
        by_major=parts.get("by_major", ""),
        optional=parts.get("optional", ""),
    )
    return _HEAD.format(shape=shape) + search + flow + _TAIL


_LIBS_2_6 = (
    "cublas:libcublas cudnn:libcudnn cuda_nvrtc:libnvrtc cuda_runtime:libcudart "
    "cuda_cupti:libcupti cufft:libcufft curand:libcurand nvjitlink:libnvJitLink "
    "cusparse:libcusparse cusparselt:libcusparseLt cusolver:libcusolver nccl:libnccl"
)
_MAPPED_2_6 = "cuda_nvrtc:libnvrtc nvjitlink:libnvJitLink"

# torch 2.10 to 2.13: _preload_cuda_deps holds the list; every library of it required.
_PRELOAD_2_10 = """

def _preload_cuda_deps(err=None):
    cuda_libs = [
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
        _preload_cuda_lib(lib_folder, lib_name)
    _preload_cuda_lib("nvtx", "libnvToolsExt.so.*[0-9]", required=False)


def _load_global_deps():
    here = os.path.abspath(__file__)
    global_deps_lib_path = os.path.join(os.path.dirname(here), "lib", "libtorch_global_deps.so")
    try:
        ctypes.CDLL(global_deps_lib_path, mode=ctypes.RTLD_GLOBAL)
        try:
            with open("/proc/self/maps") as f:
                _maps = f.read()
            if "libcudart.so" not in _maps:
                return
            _preload_cuda_deps()
        except Exception:
            pass
    except OSError as err:
        _preload_cuda_deps(err)
        ctypes.CDLL(global_deps_lib_path, mode=ctypes.RTLD_GLOBAL)
"""

TORCH_INITS: dict[str, str] = {
    # 2.4.1's lists (2.5 differs only in them)
    "2.4": _dict_shape(
        "2.4",
        _SEARCH_2_4,
        "cublas:libcublas cudnn:libcudnn cuda_nvrtc:libnvrtc cuda_runtime:libcudart "
        "cuda_cupti:libcupti cufft:libcufft curand:libcurand cusolver:libcusolver "
        "cusparse:libcusparse nccl:libnccl nvtx:libnvToolsExt",
    ),
    # 2.6.0's
    "2.6": _dict_shape(
        "2.6",
        _SEARCH_2_6,
        _LIBS_2_6 + " nvtx:libnvToolsExt",
        on_success=_ON_MAPPED.format(
            needle="nvidia/cuda_runtime/lib/libcudart.so", calls=_calls(_MAPPED_2_6)
        ),
    ),
    # 2.8.0's (2.7 has nvToolsExt in cuda_libs too)
    "2.7": _dict_shape(
        "2.8",
        _SEARCH_2_7,
        _LIBS_2_6,
        on_success=_ON_MAPPED.format(
            needle="nvidia/cuda_runtime/lib/libcudart.so", calls=_calls(_MAPPED_2_6)
        ),
        by_major=_CUFILE_FROM_12,
    ),
    # 2.9.1's
    "2.9": _dict_shape(
        "2.9",
        _DEP_PATHS_2_9.format(name="_preload_cuda_deps"),
        _LIBS_2_6 + " nvshmem:libnvshmem_host cufile:libcufile",
        on_success=_ON_MAPPED.format(
            needle="libcudart.so",
            calls=_calls("cuda_nvrtc:libnvrtc cuda_nvrtc:libnvrtc-builtins nvjitlink:libnvJitLink"),
        ),
        optional=_NVTX_OPTIONAL,
    ),
    # 2.13.0's (2.10 lacks libcublasLt)
    "2.10": _HEAD.format(shape="2.10")
    + _DEP_PATHS_2_9.format(name="_preload_cuda_lib")
    + _PRELOAD_2_10
    + _TAIL,
    "2.14": TORCH_INIT,  # 2.14.1's (2.15 drops curand)
}


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


# torch 2.9.1+cu128's DT_RPATH, reduced to the folders these tests ship.
TORCH29_RPATH = ":".join(
    [f"$ORIGIN/../../nvidia/{d}/lib" for d in ("cuda_runtime", "cudnn", "cusparse")] + ["$ORIGIN"]
)


class Torch29Stack:
    """Wheels of a fake torch 2.9.1+cu128 (the 2.9 preload flow) and its CUDA 12 packages.

    Names, versions and paths as torch 2.9.1 pins them; the libraries are gcc-built stand-ins.
    """

    TORCH = "2.9.1"
    CUDART = "12.8.90"
    NVRTC = "12.8.93"
    NVJITLINK = "12.8.93"

    def __init__(self, wheels: WheelFactory) -> None:
        self.wheels = wheels
        self.cuda13 = TorchStack(wheels)  # its CUDA 12 cuDNN and cuSPARSE are torch 2.9's

    def torch(self, *, init: str | None = None, requires: Sequence[str] | None = None) -> Path:
        deps = ("libcudnn.so.9", "libcusparse.so.12", "libcudart.so.12")
        files: Mapping[str, bytes] = {
            "torch/__init__.py": (init or TORCH_INITS["2.9"]).encode(),
            "torch/version.py": torch_version_py("2.9.1+cu128", "12.8"),
            "torch/lib/libtorch_global_deps.so": fake_lib(
                "libtorch_global_deps.so", needed=("libcudart.so.12",), rpath=TORCH29_RPATH
            ),
            "torch/lib/libtorch_cuda.so": fake_lib(
                "libtorch_cuda.so", needed=deps, rpath=TORCH29_RPATH
            ),
            f"torch/_C{EXT}": compile_extension(
                "_C", needed=["libtorch_cuda.so"], rpath=TORCH29_RPATH + ":$ORIGIN/lib"
            ),
        }
        if requires is None:
            requires = (
                f"nvidia-cuda-runtime-cu12=={self.CUDART}",
                f"nvidia-cuda-nvrtc-cu12=={self.NVRTC}",
                f"nvidia-nvjitlink-cu12=={self.NVJITLINK}",
                f"nvidia-cudnn-cu12=={TorchStack.CUDNN12}",
                "nvidia-cusparse-cu12==12.5.8.93",
            )
        return self.wheels("torch", self.TORCH, files, requires=requires, tag=native_tag())

    def _nvidia(self, name: str, version: str, folder: str, *sonames: str) -> Path:
        files = {"nvidia/__init__.py": b"", f"nvidia/{folder}/__init__.py": b""}
        for soname in sonames:
            files[f"nvidia/{folder}/lib/{soname}"] = fake_lib(soname, runpath="$ORIGIN")
        return self.wheels(name, version, files)

    def cuda12(self) -> list[Path]:
        """What torch 2.9.1 pins, as far as these tests go."""
        return [
            self._nvidia(
                "nvidia-cuda-runtime-cu12", self.CUDART, "cuda_runtime", "libcudart.so.12"
            ),
            self._nvidia(
                "nvidia-cuda-nvrtc-cu12",
                self.NVRTC,
                "cuda_nvrtc",
                "libnvrtc.so.12",
                "libnvrtc-builtins.so.12.8",
            ),
            self._nvidia(
                "nvidia-nvjitlink-cu12", self.NVJITLINK, "nvjitlink", "libnvJitLink.so.12"
            ),
            self.cuda13.cudnn12(),
            self.cuda13.cusparse12(),
        ]

    def coherent(self) -> list[Path]:
        """torch and exactly what it pins, in install order."""
        return [*self.cuda12(), self.torch()]


def tf_build_info(cuda: str | None, cudnn: str = "9") -> bytes:
    """tensorflow/python/platform/build_info.py as TensorFlow's build writes it."""
    items: list[tuple[str, object]] = []
    if cuda is not None:
        items += [("cuda_compute_capabilities", ["sm_60", "compute_90"])]
        items += [("cuda_version", cuda), ("cudnn_version", cudnn)]
    items += [("is_cuda_build", cuda is not None), ("is_rocm_build", False)]
    return (
        '"""Auto-generated module providing information about the build."""\n'
        "import collections\n\n"
        f"build_info = collections.OrderedDict({items!r})\n"
    ).encode()


def framework_wheel(
    wheels: WheelFactory,
    name: str,
    version: str,
    cuda: str | None,
    *,
    needed: Sequence[str] = (),
) -> Path:
    """A fake framework wheel that says its CUDA build where the real one does.

    tensorflow*/tf-nightly*: build_info.py; onnxruntime-gpu: build_and_package_info.py, or
    (NEEDED given: an older wheel) a CUDA provider library with those DT_NEEDED; jax plugins
    and cupy: the name alone.
    """
    files: dict[str, bytes] = {}
    if name.startswith(("tensorflow", "tf-nightly")):
        files["tensorflow/__init__.py"] = f"__version__ = {version!r}\n".encode()
        files["tensorflow/python/platform/build_info.py"] = tf_build_info(cuda)
    elif name == "onnxruntime-gpu":
        files["onnxruntime/__init__.py"] = f"__version__ = {version!r}\n".encode()
        if needed:
            files["onnxruntime/capi/libonnxruntime_providers_cuda.so"] = fake_lib(
                "libonnxruntime_providers_cuda.so", needed=needed
            )
        else:
            files["onnxruntime/capi/build_and_package_info.py"] = (
                f"package_name = {name!r}\n__version__ = {version!r}\n"
                f"cuda_version = {cuda or ''!r}\n"
            ).encode()
    elif name.startswith("jax-cuda"):
        files[f"{name.replace('-', '_')}/__init__.py"] = b""
    elif name.startswith("cupy-cuda"):
        files["cupy/__init__.py"] = f"__version__ = {version!r}\n".encode()
    else:
        raise ValueError(f"no fake for {name}")
    return wheels(name, version, files)
