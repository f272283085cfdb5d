"""The seed in miniature: a torch-like extension module and two cuDNN-like wheels sharing paths.

``torchlike/_C<EXT_SUFFIX>`` is a real CPython extension module compiled with gcc; its DT_RPATH
(``$ORIGIN/../nvidia/cudnn/lib``, like ``torch/lib/libtorch_cuda.so``'s) finds ``libcudnn.so.9``,
which wheel ``cudnn-a`` ships at ``nvidia/cudnn/lib``. Wheel ``cudnn-b`` ships the same paths
with other bytes (another "major"), and ``torchlike.version()`` says whose library is loaded.
"""

from __future__ import annotations

import subprocess
import sysconfig
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from support.cc import require_gcc
from support.wheels import WheelFactory, extension_suffix, native_tag

__all__ = [
    "CUDNN_A",
    "CUDNN_B",
    "SeedWheels",
    "build_seed_wheels",
    "import_version",
]

# (distribution, version, what cudnnGetVersion() returns, padding so the sizes differ)
CUDNN_A = ("cudnn-a", "9.1.0", 91002, 0)
CUDNN_B = ("cudnn-b", "9.24.0", 92400, 4096)
LIB_REL = "nvidia/cudnn/lib/libcudnn.so.9"
EXT_REL = f"torchlike/_C{extension_suffix()}"

_LIB_C = """
int cudnnGetVersion(void) {{ return {version}; }}
{padding}
"""
_PAD_C = "__attribute__((used)) static const char ldt_pad[{n}] = {{1}};"
_EXT_C = """
#define PY_SSIZE_T_CLEAN
#include <Python.h>
extern int cudnnGetVersion(void);
static PyObject *version(PyObject *self, PyObject *args) {
    return PyLong_FromLong(cudnnGetVersion());
}
static PyMethodDef methods[] = {
    {"version", version, METH_NOARGS, "cudnnGetVersion() of the loaded libcudnn.so.9"},
    {NULL, NULL, 0, NULL},
};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, methods};
PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module); }
"""


def _gcc(*args: str) -> None:
    done = subprocess.run([require_gcc(), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"gcc {' '.join(args)} failed:\n{done.stderr}")


@cache
def _build_dir() -> Path:
    import tempfile

    return Path(tempfile.mkdtemp(prefix="libdoctor-seed-"))


@cache
def cudnn_library(version: int, padding: int) -> bytes:
    """A libcudnn.so.9 (DT_SONAME libcudnn.so.9) whose cudnnGetVersion() returns VERSION."""
    work = _build_dir() / f"cudnn-{version}"
    work.mkdir(parents=True, exist_ok=True)
    src = work / "cudnn.c"
    pad = _PAD_C.format(n=padding) if padding else ""
    src.write_text(_LIB_C.format(version=version, padding=pad))
    out = work / "libcudnn.so.9"
    _gcc("-shared", "-fPIC", "-O1", "-Wl,-soname,libcudnn.so.9", "-o", str(out), str(src))
    return out.read_bytes()


@cache
def extension_module() -> bytes:
    """torchlike/_C: a CPython extension with DT_NEEDED libcudnn.so.9 and a torch-like RPATH."""
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").is_file():
        import pytest

        pytest.skip(f"Python.h not found in {include}: cannot compile an extension module")
    work = _build_dir() / "ext"
    work.mkdir(parents=True, exist_ok=True)
    src = work / "ext.c"
    src.write_text(_EXT_C)
    link_dir = work / "link"
    link_dir.mkdir(exist_ok=True)
    (link_dir / "libcudnn.so.9").write_bytes(cudnn_library(*CUDNN_A[2:]))
    out = work / f"_C{extension_suffix()}"
    _gcc(
        "-shared",
        "-fPIC",
        "-O1",
        f"-I{include}",
        "-o",
        str(out),
        str(src),
        "-Wl,--no-as-needed",
        "-Wl,--disable-new-dtags",  # DT_RPATH, as torch's libraries have
        "-Wl,-rpath,$ORIGIN/../nvidia/cudnn/lib",
        str(link_dir / "libcudnn.so.9"),
    )
    return out.read_bytes()


@dataclass(frozen=True)
class SeedWheels:
    cudnn_a: Path
    cudnn_b: Path
    torchlike: Path
    find_links: Path  # the directory holding all three: --find-links for reinstalls


def build_seed_wheels(make_wheel: WheelFactory) -> SeedWheels:
    tag = native_tag()

    def cudnn(spec: tuple[str, str, int, int]) -> Path:
        name, version, lib_version, padding = spec
        return make_wheel(
            name,
            version,
            {
                "nvidia/__init__.py": b"",
                "nvidia/cudnn/__init__.py": b"",
                LIB_REL: cudnn_library(lib_version, padding),
            },
            tag=tag,
        )

    torchlike = make_wheel(
        "torchlike",
        "1.0",
        {
            "torchlike/__init__.py": b"from torchlike._C import version\n",
            EXT_REL: extension_module(),
        },
        requires=["cudnn-a==9.1.0"],
        tag=tag,
    )
    return SeedWheels(cudnn(CUDNN_A), cudnn(CUDNN_B), torchlike, make_wheel.dest)


def import_version(python: Path) -> tuple[int, str]:
    """Import torchlike for real in the target's interpreter: (returncode, output)."""
    done = subprocess.run(
        [str(python), "-c", "import torchlike; print(torchlike.version())"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    return done.returncode, (done.stdout + done.stderr).strip()
