"""Which CUDA major each CUDA package is for, from real evidence only.

Strongest first (``MAJOR_RULES``): the ``-cuNN`` name suffix; files under ``nvidia/cuNN/``
(the suffix-less CUDA 13 toolkit wheels); a library file whose soname tracks the CUDA major
(``libcudart.so.13``, ``libcublas.so.12``...). A version number alone is not evidence:
``nvidia-cufft 12.x`` is CUDA 13's cuFFT.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from libdoctor.environment.distributions import Distribution

if TYPE_CHECKING:
    from libdoctor.environment.model import Environment

__all__ = [
    "MAJOR_RULES",
    "CudaPackage",
    "cuda_major_of",
    "cuda_packages",
    "is_cuda_package_name",
    "soname_major",
]


@dataclass(frozen=True, slots=True)
class CudaPackage:
    """A distribution built for one CUDA major, and the evidence that says so."""

    dist: Distribution
    major: int
    evidence: str


# Libraries whose soname number is the CUDA major they belong to.
_TRACKS_CUDA = re.compile(r"^lib(cudart|cublas|cublasLt|nvblas|nvrtc|nvJitLink|cupti)\.so\.(\d+)")
# Libraries whose soname number differs from the CUDA major, where one value is unambiguous.
_SONAME_MAJOR: Mapping[str, int] = {
    "libcufft.so.11": 12,
    "libcufft.so.12": 13,
    "libcusolver.so.12": 13,
}
# Distributions versioned with the CUDA toolkit by NVIDIA's own scheme (the version is the CUDA
# version by definition, unlike the nvidia-* library wheels).
_VERSIONED_WITH_CUDA = frozenset({"cuda-toolkit", "cuda-bindings", "cuda-python"})
_CU_SUFFIX = re.compile(r"-cu(\d+)$")
_CU_DIR = re.compile(r"(?:^|/)nvidia/cu(\d+)/")


def _paths(dist: Distribution) -> tuple[str, ...]:
    return tuple(e.path for e in dist.record.entries) if dist.record is not None else ()


def _by_suffix(dist: Distribution) -> tuple[int, str] | None:
    match = _CU_SUFFIX.search(dist.key)
    return (int(match[1]), f"name suffix -cu{match[1]}") if match else None


def _by_cu_dir(dist: Distribution) -> tuple[int, str] | None:
    for path in _paths(dist):
        match = _CU_DIR.search(path)
        if match:
            return int(match[1]), f"files in nvidia/cu{match[1]}/ ({path})"
    return None


def soname_major(name: str) -> int | None:
    """The CUDA major a library file name belongs to (``libcudart.so.12`` -> 12), if it says."""
    match = _TRACKS_CUDA.match(name)
    if match:
        return int(match[2])
    return _SONAME_MAJOR.get(name)


def _by_soname(dist: Distribution) -> tuple[int, str] | None:
    for path in _paths(dist):
        name = path.rpartition("/")[2]
        major = soname_major(name)
        if major is not None:
            return major, f"ships {name}"
    return None


def _by_cuda_version(dist: Distribution) -> tuple[int, str] | None:
    if dist.key not in _VERSIONED_WITH_CUDA:
        return None
    head = dist.version.split(".", 1)[0]
    if not head.isdigit():
        return None
    return int(head), f"{dist.name} is versioned with CUDA ({dist.version})"


MAJOR_RULES: tuple[Callable[[Distribution], tuple[int, str] | None], ...] = (
    _by_suffix,
    _by_cu_dir,
    _by_soname,
    _by_cuda_version,
)
"""Tried in order; the first that answers decides."""


def is_cuda_package_name(key: str) -> bool:
    return key.startswith("nvidia-") or key in _VERSIONED_WITH_CUDA


def cuda_major_of(dist: Distribution) -> CudaPackage | None:
    """The CUDA major of an nvidia-* (or cuda-toolkit-like) distribution, from evidence."""
    if not is_cuda_package_name(dist.key):
        return None
    for rule in MAJOR_RULES:
        found = rule(dist)
        if found is not None:
            return CudaPackage(dist, found[0], found[1])
    return None


def cuda_packages(env: Environment) -> list[CudaPackage]:
    return [p for d in env.distributions if (p := cuda_major_of(d)) is not None]
