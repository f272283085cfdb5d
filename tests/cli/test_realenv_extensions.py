"""Opt-in tier (``pytest -m realenv``): real torch extension packages (issue 28).

LIBDOCTOR_SGL_ENV: sgl-kernel 0.3.21 beside the torch 2.9.1 (CUDA 12.8) it is built for::

    uv venv E && uv pip install --python E/bin/python torch==2.9.1
    uv pip install --python E/bin/python --no-deps sgl-kernel==0.3.21

LIBDOCTOR_SGL_CU13_ENV: the same wheel beside torch 2.14.1 (CUDA 13): a hard-link copy of
the torch env with ``uv pip install --no-deps sgl-kernel==0.3.21``. Both are only read.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support.venvs import Libdoctor

pytestmark = pytest.mark.realenv


def _env(variable: str, default: str) -> Path:
    path = Path(os.environ.get(variable, default))
    if not (path / "pyvenv.cfg").is_file():
        pytest.skip(f"no environment at {path} (set {variable})")
    return path


def test_sgl_kernel_beside_its_torch_is_clean(libdoctor: Libdoctor) -> None:
    env = _env("LIBDOCTOR_SGL_ENV", "/work/envs/sgl291")
    doc = libdoctor.check(env, "--json").json()
    assert doc["summary"]["errors"] == 0 and doc["summary"]["warnings"] == 0, doc["findings"]


def test_sgl_kernel_beside_a_cuda_13_torch(libdoctor: Libdoctor) -> None:
    env = _env("LIBDOCTOR_SGL_CU13_ENV", "/work/envs/torch-sgl")
    run = libdoctor.check(env, "--json")
    assert run.rc == 1
    found = {f["code"]: f for f in run.json()["findings"]}
    cuda = found["extension-cuda-mismatch"]
    assert cuda["distribution"]["name"] == "sgl-kernel"
    assert "built for CUDA 12" in cuda["message"] and "built for CUDA 13" in cuda["message"]
    abi = found["extension-abi-mismatch"]
    assert abi["evidence"]["missing_count"] > 0
    assert "unresolved-library" not in found  # the CUDA 12 runtime: folded into the mismatch
