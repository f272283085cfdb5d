"""Opt-in (``pytest -m realenv``; needs pypi.org): the seed's lock on the real registry.

torch 2.9.1 from PyPI (built for CUDA 12.8) with its CUDA 12 wheels, and the four ``-cu13``
wheels of the seed beside it: ``plan lock`` reads every wheel's RECORD by range and says
``lock-path-conflict`` for cuDNN, NCCL, cuSPARSELt and NVSHMEM, and
``lock-cuda-mixed-major`` for torch. Without the ``-cu13`` wheels it exits 0. Healthy stacks
(jax for CUDA 12, CuPy, onnxruntime-gpu, OpenCV, the SciPy stack) exit 0 too, with no
``lock-unresolved-library``: their extension modules' dynamic sections read by range
within 1 % of the wheels' bytes for the big locks. The pins are
what ``uv pip compile --python-version 3.11 --python-platform x86_64-manylinux_2_28``
resolved (cuSPARSELt 0.8.0: from 0.9 its CUDA 13 wheel installs under ``nvidia/cu13/``).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from support.venvs import run_libdoctor_inprocess

pytestmark = [pytest.mark.realenv, pytest.mark.network]

CLEAN = [
    "filelock==4.3.2",
    "fsspec==2026.9.0",
    "jinja2==3.1.6",
    "markupsafe==3.0.4",
    "mpmath==1.3.0",
    "networkx==3.6.1",
    "nvidia-cublas-cu12==12.8.4.1",
    "nvidia-cuda-cupti-cu12==12.8.90",
    "nvidia-cuda-nvrtc-cu12==12.8.93",
    "nvidia-cuda-runtime-cu12==12.8.90",
    "nvidia-cudnn-cu12==9.10.2.21",
    "nvidia-cufft-cu12==11.3.3.83",
    "nvidia-cufile-cu12==1.13.1.3",
    "nvidia-curand-cu12==10.3.9.90",
    "nvidia-cusolver-cu12==11.7.3.90",
    "nvidia-cusparse-cu12==12.5.8.93",
    "nvidia-cusparselt-cu12==0.7.1",
    "nvidia-nccl-cu12==2.27.5",
    "nvidia-nvjitlink-cu12==12.8.93",
    "nvidia-nvshmem-cu12==3.3.20",
    "nvidia-nvtx-cu12==12.8.90",
    "sympy==1.14.0",
    "torch==2.9.1",
    "triton==3.5.1",
    "typing-extensions==4.16.0",
]
CU13 = [
    "nvidia-cublas==13.10.0.20",
    "nvidia-cuda-cccl==13.3.5.0.6",
    "nvidia-cuda-nvrtc==13.5.37",
    "nvidia-cudnn-cu13==9.28.1.4",
    "nvidia-cusparselt-cu13==0.8.0",
    "nvidia-nccl-cu13==2.32.6",
    "nvidia-nvshmem-cu13==3.8.0",
]
PLATFORM = ("--python", "3.11", "--platform", "manylinux_2_28_x86_64")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError as exc:
        pytest.skip(f"pypi.org is unreachable: {exc}")
    return tmp_path_factory.mktemp("wheel-index")


def plan(pins: list[str], tmp_path: Path, cache: Path) -> tuple[int, dict[str, object]]:
    lock = tmp_path / "requirements.txt"
    lock.write_text("\n".join(pins) + "\n")
    run = run_libdoctor_inprocess("plan", "lock", lock, *PLATFORM, "--cache-dir", cache, "--json")
    assert run.stdout, run.stderr
    return run.rc, json.loads(run.stdout)


def test_the_seeds_lock_is_stopped(tmp_path: Path, cache: Path) -> None:
    rc, doc = plan(CLEAN + CU13, tmp_path, cache)
    assert rc == 1
    errors = [f for f in doc["findings"] if f["severity"] == "error"]  # type: ignore[attr-defined]
    conflicts = sorted(
        f["distribution"]["name"] for f in errors if f["code"] == "lock-path-conflict"
    )
    assert conflicts == [
        "nvidia-cudnn-cu13", "nvidia-cusparselt-cu13", "nvidia-nccl-cu13", "nvidia-nvshmem-cu13"
    ]  # fmt: skip
    mixed = [f for f in errors if f["code"] == "lock-cuda-mixed-major"]
    assert len(mixed) == 1 and mixed[0]["evidence"]["build"] == "12.8"
    assert len(errors) == 5
    summary = doc["summary"]
    assert summary["fetched"] < summary["wheel_bytes"] / 100  # type: ignore[index]


def test_without_the_cu13_wheels_it_exits_0(tmp_path: Path, cache: Path) -> None:
    rc, doc = plan(CLEAN, tmp_path, cache)
    assert rc == 0, doc["findings"]
    assert all(f["severity"] == "info" for f in doc["findings"])  # type: ignore[attr-defined]


HEALTHY = {
    "jax-cuda12": [
        "jax==0.10.2", "jax-cuda12-pjrt==0.10.2", "jax-cuda12-plugin==0.10.2", "jaxlib==0.10.2",
        "ml-dtypes==0.7.0", "numpy==2.4.6", "nvidia-cublas-cu12==12.9.3.13",
        "nvidia-cuda-cccl-cu12==12.9.27", "nvidia-cuda-cupti-cu12==12.9.79",
        "nvidia-cuda-nvcc-cu12==12.9.86", "nvidia-cuda-nvrtc-cu12==12.9.86",
        "nvidia-cuda-runtime-cu12==12.9.79", "nvidia-cudnn-cu12==9.28.0.42",
        "nvidia-cufft-cu12==11.4.1.4", "nvidia-cusolver-cu12==11.7.5.82",
        "nvidia-cusparse-cu12==12.5.10.65", "nvidia-nccl-cu12==2.32.3",
        "nvidia-nvjitlink-cu12==12.9.86", "nvidia-nvshmem-cu12==3.8.0", "opt-einsum==3.4.0",
        "scipy==1.17.1",
    ],
    "cupy": ["cuda-pathfinder==1.9.1", "cupy-cuda12x==14.2.0", "numpy==2.4.6"],
    "onnxruntime-gpu": [
        "flatbuffers==25.12.19", "numpy==2.4.6", "onnxruntime-gpu==1.31.1", "packaging==26.4",
        "protobuf==7.36.2",
    ],
    "opencv": ["numpy==2.4.6", "opencv-python==5.1.0.95"],
    "scipy-stack": [
        "cloudpickle==3.1.3", "joblib==1.6.0", "narwhals==2.29.0", "numpy==2.4.6",
        "pandas==3.1.1", "python-dateutil==4.0.0", "scikit-learn==1.9.1", "scipy==1.17.1",
        "threadpoolctl==3.8.0", "tzdata==2026.6",
    ],
}  # fmt: skip


@pytest.mark.parametrize("stack", sorted(HEALTHY))
def test_a_healthy_stacks_extensions_find_their_libraries(
    stack: str, tmp_path: Path, cache: Path
) -> None:
    rc, doc = plan(HEALTHY[stack], tmp_path, cache)
    found: Any = doc
    assert rc == 0, found["findings"]
    assert not [f for f in found["findings"] if f["code"] == "lock-unresolved-library"]
    assert found["lock"]["extensions"]["read"] > 0
    summary = found["summary"]
    if summary["wheel_bytes"] > 1e9:
        assert summary["fetched"] < summary["wheel_bytes"] / 100
