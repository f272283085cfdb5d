"""torch's CUDA preload (LOADER_SPEC §4), one model per range of torch versions, as data.

Before ``from torch._C import *``, every torch from 2.4 on runs ``_load_global_deps``:

1. ``ctypes.CDLL(torch/lib/libtorch_global_deps.so, RTLD_GLOBAL)``;
2. if that worked and a path containing the trigger (``libcudart.so``; 2.6-2.8:
   ``nvidia/cuda_runtime/lib/libcudart.so``) is now in ``/proc/self/maps``, preloads a list
   of (folder, glob): 2.6-2.9 a short fixed list (nvrtc, nvJitLink), 2.10 on the whole
   ``cuda_libs`` list and the optional libraries. For each, the first ``sys.path`` entry ``p``
   with any hit among the directory templates (2.9 on: ``p/nvidia/<folder>/lib``,
   ``p/nvidia/cu<major>/lib``, ``p/<folder>/lib``) is taken and ``ctypes.CDLL(hits[0])``
   runs. One ``try`` wraps the loop and swallows the first exception, which ends it; a
   library no directory has is such an exception up to 2.13 and skipped from 2.14 on.
   2.4 and 2.5 have no step 2;
3. if step 1 raised an OSError naming a library of ``cuda_libs``, preloads all of them with
   misses fatal (ValueError), then the optional ones, then retries step 1; any other OSError
   is re-raised.

How the versions differ (each checked against the wheels on PyPI, see ``verified_on``):

- 2.4-2.6 search only entries that have a ``nvidia/`` directory; 2.4-2.5 only
  ``p/nvidia/<folder>/lib``, 2.6 ``p/<folder>/lib`` when that has no hit. 2.7 on join the
  hits of every template (``_get_cuda_dep_paths``), 2.9 on with ``nvidia/cu<major>/lib``.
- ``cuda_libs`` is a dict inside ``_load_global_deps`` up to 2.9 (2.7-2.8 add cuFile to it
  for CUDA 12 and later), a list in ``_preload_cuda_deps`` from 2.10 on; nvToolsExt is a
  required entry up to 2.7 and an optional preload after the list from 2.9 on.
- 2.4's split-build branch (global deps from a ``libtorchsplit`` package, which PyPI does not
  have) is not followed.

``PreloadModel`` holds the flow of one torch version range. Each release's model is what
changed from the one before (``_after``); the statements the flow hinges on, which the
installed text must contain for a model to be used (``stack.torchsource``), are one table
(``MARKERS``) saying for which releases each holds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "MARKERS",
    "MODELS",
    "TORCH_2_4",
    "TORCH_2_5_0",
    "TORCH_2_5_1",
    "TORCH_2_6",
    "TORCH_2_7",
    "TORCH_2_8",
    "TORCH_2_9",
    "TORCH_2_10",
    "TORCH_2_11",
    "TORCH_2_14",
    "TORCH_2_15",
    "Libs",
    "PreloadModel",
]

Libs = tuple[tuple[str, str], ...]  # (folder, glob) in preload order
Trigger = Literal["cudart-mapped", "global-deps-error"]  # the latter: only on step 1's error


@dataclass(frozen=True, slots=True)
class PreloadModel:
    """What one range of torch versions does before importing ``torch._C``."""

    id: str
    versions: str  # PEP 440 specifier set of the torch versions this model is for
    verified_on: tuple[str, ...]  # versions whose wheel was checked against this model
    global_deps: str  # relative to the site dir torch is in
    extension: str  # the module ``from torch._C import *`` loads: path stem, site-relative
    libs: Libs  # cuda_libs, as the release shipped it: preloaded on step 1's error
    optional_libs: Libs  # preloaded after libs, a miss never fatal
    dirs: tuple[str, ...]  # per sys.path entry p: p/<dir>/<glob>; {folder}, {cuda_major}
    trigger: Trigger  # when the preload runs after global deps loaded fine
    trigger_needle: str  # the /proc/self/maps substring that triggers it
    retry_on_error: bool  # global deps failing with an error naming a lib: preload, retry
    # Statements the flow hinges on: (function, text that ast.unparse of it must contain).
    markers: tuple[tuple[str, str], ...]
    # (lowest CUDA major, folder, glob) appended to libs for a build of that major or later
    libs_from_major: tuple[tuple[int, str, str], ...] = ()
    # What the trigger preloads; None: libs, libs_from_major, then optional_libs
    mapped_libs: Libs | None = None
    # A library no directory has, on the triggered path: skipped, or the end of the loop
    mapped_miss: Literal["skip", "stop"] = "skip"
    # "all": the hits of every template, in order; "first": those of the first with any
    dir_mode: Literal["all", "first"] = "all"
    entry_needs: str | None = None  # a sys.path entry without this subdirectory is skipped

    def cuda_libs(self, major: int | None) -> Libs:
        """The cuda_libs list for a build of MAJOR (None: not a CUDA build)."""
        extra = tuple(
            (folder, glob)
            for lowest, folder, glob in self.libs_from_major
            if major is not None and major >= lowest
        )
        return self.libs + extra


def _libs(spec: str) -> Libs:
    """``"cublas:libcublas cudnn:libcudnn"`` -> ``(("cublas", "libcublas.so.*[0-9]"), ...)``:
    every glob torch has used is a library stem and ``.so.*[0-9]``."""
    pairs = (item.split(":") for item in spec.split())
    return tuple((folder, f"{stem}.so.*[0-9]") for folder, stem in pairs)


_LGD, _PCD, _PCL = "_load_global_deps", "_preload_cuda_deps", "_preload_cuda_lib"

# (function, statement, releases): the statements each release's flow hinges on, in the
# order its text has them; "2.6-2.13" is those two releases and every one between, "2.9-"
# 2.9 and every later one.
MARKERS: tuple[tuple[str, str, str], ...] = (
    (_LGD, "ctypes.CDLL(global_deps_lib_path, mode=ctypes.RTLD_GLOBAL)", "2.4-"),
    (_LGD, "except Exception:", "2.6-2.13"),
    (_LGD, "'nvidia/cuda_runtime/lib/libcudart.so' not in _maps", "2.6-2.8"),
    (_LGD, "'libcudart.so' not in _maps", "2.9-"),
    (_LGD, "_preload_cuda_deps()", "2.10-2.13"),
    (_LGD, "_preload_cuda_deps(required=False)", "2.14-"),
    (_LGD, "_preload_cuda_deps(err)", "2.10-"),
    (_LGD, "except OSError as err:", "2.4-2.9"),
    (_LGD, "in err.args[0]", "2.4-2.9"),
    (_LGD, "for lib_folder, lib_name in cuda_libs.items():", "2.4-2.9"),
    (_LGD, "_preload_cuda_deps(lib_folder, lib_name)", "2.4-2.9"),
    (_LGD, "t_major = int(t_version[0])", "2.7-2.8"),
    (_PCD, "in err.args[0]", "2.10-2.13"),
    (_PCD, "_preload_cuda_lib(lib_folder, lib_name)", "2.10-2.13"),
    (_PCD, "for path in sys.path:", "2.4-2.9"),
    (_PCL, "for path in sys.path:", "2.10-"),
    (_PCD, "lib_path = candidate_lib_paths[0]", "2.4-2.9"),
    (_PCL, "lib_path = candidate_lib_paths[0]", "2.10-"),
    (_PCD, "if not lib_path:", "2.4-2.8"),
    (_PCD, "if not lib_path and required:", "2.9-2.9"),
    (_PCL, "if not lib_path and required:", "2.10-2.13"),
    (_PCD, "ctypes.CDLL(lib_path)", "2.4-2.9"),
    (_PCL, "ctypes.CDLL(lib_path)", "2.10-"),
    (_PCD, "if not os.path.exists(nvidia_path):", "2.4-2.6"),
    (_PCD, "if not candidate_lib_paths:", "2.6-2.6"),
    (_PCD, "_get_cuda_dep_paths(path, lib_folder, lib_name)", "2.7-2.9"),
    (_PCL, "_get_cuda_dep_paths(path, lib_folder, lib_name)", "2.10-2.13"),
    (_PCD, "_preload_cuda_lib(lib_folder, lib_name, required=required)", "2.14-"),
    ("_get_cuda_dep_paths", "return nvidia_lib_paths + lib_paths", "2.7-"),
)


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2])


def _markers(release: str) -> tuple[tuple[str, str], ...]:
    """The statements of ``MARKERS`` that hold for RELEASE ("2.5.1": its major.minor)."""
    at = _release(release)
    held = []
    for function, statement, releases in MARKERS:
        first, _, last = releases.partition("-")
        if _release(first) <= at and (not last or at <= _release(last)):
            held.append((function, statement))
    return tuple(held)


def _after(
    previous: PreloadModel, release: str, versions: str, *verified: str, **changes: Any
) -> PreloadModel:
    """RELEASE's model: PREVIOUS's with CHANGES, its own markers and versions."""
    return dataclasses.replace(
        previous,
        id=f"torch-{release}",
        versions=versions,
        verified_on=verified,
        markers=_markers(release),
        **changes,
    )


_LIBS_2_4 = _libs(
    "cublas:libcublas cudnn:libcudnn cuda_nvrtc:libnvrtc cuda_runtime:libcudart "
    "cuda_cupti:libcupti cufft:libcufft curand:libcurand cusolver:libcusolver "
    "cusparse:libcusparse nccl:libnccl nvtx:libnvToolsExt"
)
_LIBS_2_5_1 = _libs(
    "cublas:libcublas cudnn:libcudnn cuda_nvrtc:libnvrtc cuda_runtime:libcudart "
    "cuda_cupti:libcupti cufft:libcufft curand:libcurand nvjitlink:libnvJitLink "
    "cusparse:libcusparse cusolver:libcusolver nccl:libnccl nvtx:libnvToolsExt"
)
_LIBS_2_5_0 = _LIBS_2_5_1[:6] + _libs("cufile:libcufile") + _LIBS_2_5_1[6:]
_LIBS_2_6 = _LIBS_2_5_1[:9] + _libs("cusparselt:libcusparseLt") + _LIBS_2_5_1[9:]
_LIBS_2_8 = _LIBS_2_6[:-1]  # no nvToolsExt
_LIBS_2_9 = _LIBS_2_8 + _libs("nvshmem:libnvshmem_host cufile:libcufile")
_LIBS_2_10 = _LIBS_2_9[:3] + _libs("cuda_nvrtc:libnvrtc-builtins") + _LIBS_2_9[3:]
_LIBS_2_11 = _libs("cublas:libcublasLt") + _LIBS_2_10
_LIBS_2_15 = tuple(lib for lib in _LIBS_2_11 if lib[0] != "curand")
_MAPPED_2_6 = _libs("cuda_nvrtc:libnvrtc nvjitlink:libnvJitLink")
_MAPPED_2_9 = _libs("cuda_nvrtc:libnvrtc cuda_nvrtc:libnvrtc-builtins nvjitlink:libnvJitLink")
_DIRS_FALLBACK = ("nvidia/{folder}/lib", "{folder}/lib")
_DIRS_CU = ("nvidia/{folder}/lib", "nvidia/cu{cuda_major}/lib", "{folder}/lib")

TORCH_2_4 = PreloadModel(
    id="torch-2.4",
    versions=">=2.4,<2.5",
    verified_on=("2.4.0", "2.4.1"),
    global_deps="torch/lib/libtorch_global_deps.so",
    extension="torch/_C",
    libs=_LIBS_2_4,
    optional_libs=(),
    dirs=("nvidia/{folder}/lib",),
    trigger="global-deps-error",
    trigger_needle="",
    retry_on_error=True,
    markers=_markers("2.4"),
    entry_needs="nvidia",
)
TORCH_2_5_0 = _after(TORCH_2_4, "2.5.0", "==2.5.0", "2.5.0", libs=_LIBS_2_5_0)
TORCH_2_5_1 = _after(TORCH_2_4, "2.5.1", ">=2.5.1,<2.6", "2.5.1", libs=_LIBS_2_5_1)
TORCH_2_6 = _after(
    TORCH_2_5_1, "2.6", ">=2.6,<2.7", "2.6.0",
    libs=_LIBS_2_6, dirs=_DIRS_FALLBACK, dir_mode="first",
    trigger="cudart-mapped", trigger_needle="nvidia/cuda_runtime/lib/libcudart.so",
    mapped_libs=_MAPPED_2_6, mapped_miss="stop",
)  # fmt: skip
TORCH_2_7 = _after(
    TORCH_2_6, "2.7", ">=2.7,<2.8", "2.7.0", "2.7.1",
    dir_mode="all", entry_needs=None, libs_from_major=((12, "cufile", "libcufile.so.*[0-9]"),),
)  # fmt: skip
TORCH_2_8 = _after(TORCH_2_7, "2.8", ">=2.8,<2.9", "2.8.0", libs=_LIBS_2_8)
TORCH_2_9 = _after(
    TORCH_2_8, "2.9", ">=2.9,<2.10", "2.9.0", "2.9.1",
    libs=_LIBS_2_9, libs_from_major=(), optional_libs=_libs("nvtx:libnvToolsExt"),
    dirs=_DIRS_CU, trigger_needle="libcudart.so", mapped_libs=_MAPPED_2_9,
)  # fmt: skip
TORCH_2_10 = _after(TORCH_2_9, "2.10", ">=2.10,<2.11", "2.10.0", libs=_LIBS_2_10, mapped_libs=None)
TORCH_2_11 = _after(
    TORCH_2_10, "2.11", ">=2.11,<2.14", "2.11.0", "2.12.0", "2.12.1", "2.13.0", libs=_LIBS_2_11
)
TORCH_2_14 = _after(TORCH_2_11, "2.14", ">=2.14,<2.15", "2.14.0", "2.14.1", mapped_miss="skip")
TORCH_2_15 = _after(TORCH_2_14, "2.15", ">=2.15,<2.16", "2.15.0", libs=_LIBS_2_15)

MODELS: tuple[PreloadModel, ...] = (
    TORCH_2_4,
    TORCH_2_5_0,
    TORCH_2_5_1,
    TORCH_2_6,
    TORCH_2_7,
    TORCH_2_8,
    TORCH_2_9,
    TORCH_2_10,
    TORCH_2_11,
    TORCH_2_14,
    TORCH_2_15,
)
"""Known models, oldest first, disjoint ranges. Adding a torch version range is one entry
(and the markers' releases), verified against its wheel's ``torch/__init__.py``."""
