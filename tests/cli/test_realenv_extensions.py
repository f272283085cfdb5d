"""Opt-in tier (``pytest -m realenv``): real torch extension packages (issue 28).

LIBDOCTOR_SGL_ENV: sgl-kernel 0.3.21 beside the torch 2.9.1 (CUDA 12.8) it is built for::

    uv venv E && uv pip install --python E/bin/python torch==2.9.1
    uv pip install --python E/bin/python --no-deps sgl-kernel==0.3.21

LIBDOCTOR_SGL_CU13_ENV: the same wheel beside torch 2.14.1 (CUDA 13): a hard-link copy of
the torch env with ``uv pip install --no-deps sgl-kernel==0.3.21``. Both are only read.

LIBDOCTOR_EXT_ENVS: a directory of envs (or symlinks to them) named ``KEY-right`` and
``KEY-wrong`` for each KEY of ``TRIAL`` (the field trial of issue 28). Make two torch envs,
T291 (``uv pip install torch==2.9.1``: CUDA 12.8) and T2141 (``pip install torch==2.14.1``:
CUDA 13), then for each package a ``cp -al`` copy of the torch it is built for (``right``:
``uv pip install PACKAGE==VERSION``, with ``--no-deps`` where ``TRIAL`` says so) and one of
the other torch (``wrong``: ``uv pip install --no-deps PACKAGE==VERSION`` and its other
requirements, ``numpy``, ``pillow``...). ``right`` must be clean (no error or warning, with
and without ``--deep``); ``wrong`` names the mismatch once per code, with the fix.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from support.venvs import Libdoctor, real_env

pytestmark = pytest.mark.realenv

CUDA = "extension-cuda-mismatch"
ABI = "extension-abi-mismatch"


class Trial(NamedTuple):
    name: str  # the distribution, as its metadata spells it
    version: str
    built_for: str  # the torch it is built for (its right env)
    codes: frozenset[str]  # beside the other torch
    no_deps: bool = False  # right env made with --no-deps: its missing requirements are true


TRIAL = {
    "sgl": Trial("sgl-kernel", "0.3.21", "2.9.1", frozenset({CUDA, ABI}), no_deps=True),
    "torchvision": Trial("torchvision", "0.24.1", "2.9.1", frozenset({CUDA, ABI})),
    "torchaudio": Trial("torchaudio", "2.9.1", "2.9.1", frozenset({CUDA, ABI})),
    "xformers": Trial("xformers", "0.0.33.post2", "2.9.1", frozenset({CUDA, ABI})),
    "fbgemm": Trial("fbgemm_gpu", "1.4.0", "2.9.1", frozenset({CUDA, ABI})),
    "torchao": Trial("torchao", "0.14.1", "2.9.1", frozenset({CUDA, ABI})),
    "torchcodec": Trial("torchcodec", "0.8.1", "2.9.1", frozenset({ABI})),  # a CPU build
    "vllm": Trial("vllm", "0.16.0", "2.9.1", frozenset({CUDA, ABI}), no_deps=True),
    "torchvision-cu13": Trial("torchvision", "0.29.1", "2.14.1", frozenset({CUDA, ABI})),
}
"""bitsandbytes (0.50.2) was tried too: it links no torch library (ctypes loads its own), so
it is clean beside either torch and has no place here."""

Doc = dict[str, Any]


def _trial_env(key: str, side: str) -> Path:
    root = os.environ.get("LIBDOCTOR_EXT_ENVS")
    if not root:
        pytest.skip("set LIBDOCTOR_EXT_ENVS to a directory of KEY-right / KEY-wrong envs")
    path = (Path(root) / f"{key}-{side}").resolve()
    if not (path / "pyvenv.cfg").is_file():
        pytest.skip(f"no environment at {path}")
    return path


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_sgl_kernel_beside_its_torch_is_clean(libdoctor: Libdoctor) -> None:
    env = real_env("LIBDOCTOR_SGL_ENV", "/work/envs/sgl291")
    doc = libdoctor.check(env, "--json").json()
    assert doc["summary"]["errors"] == 0 and doc["summary"]["warnings"] == 0, doc["findings"]


def test_sgl_kernel_beside_a_cuda_13_torch(libdoctor: Libdoctor) -> None:
    env = real_env("LIBDOCTOR_SGL_CU13_ENV", "/work/envs/torch-sgl")
    run = libdoctor.check(env, "--json")
    assert run.rc == 1
    found = {f["code"]: f for f in run.json()["findings"]}
    cuda = found["extension-cuda-mismatch"]
    assert cuda["distribution"]["name"] == "sgl-kernel"
    assert "built for CUDA 12" in cuda["message"] and "built for CUDA 13" in cuda["message"]
    abi = found["extension-abi-mismatch"]
    assert abi["evidence"]["missing_count"] > 0
    assert "unresolved-library" not in found  # the CUDA 12 runtime: folded into the mismatch


@pytest.mark.parametrize("key", sorted(TRIAL))
def test_an_extension_beside_the_torch_it_is_built_for_is_clean(
    key: str, libdoctor: Libdoctor
) -> None:
    trial = TRIAL[key]
    env = _trial_env(key, "right")
    for args in (("--json",), ("--json", "--deep")):
        doc = libdoctor.check(env, *args, timeout=600).json()
        bad = [
            f
            for f in doc["findings"]
            if f["severity"] in ("error", "warning")
            and not (trial.no_deps and f["code"] == "requirement-missing")
        ]
        assert bad == [], (args, bad)


@pytest.mark.parametrize("key", sorted(TRIAL))
def test_an_extension_beside_another_torch_names_the_mismatch_once(
    key: str, libdoctor: Libdoctor
) -> None:
    trial = TRIAL[key]
    env = _trial_env(key, "wrong")
    run = libdoctor.check(env, "--json", timeout=600)
    assert run.rc == 1, run.describe()
    found: dict[str, list[Doc]] = {}
    for finding in run.json()["findings"]:
        if finding["severity"] in ("error", "warning"):
            found.setdefault(finding["code"], []).append(finding)
    for code in trial.codes:
        (one,) = found.pop(code)
        assert _canonical(one["distribution"]["name"]) == _canonical(trial.name)
        assert one["distribution"]["version"] == trial.version
        assert f"Install {one['distribution']['name']}'s build for " in one["message"]
    # what may stand beside it: its own metadata's pin on the torch it was built for (pip
    # check's finding), and what --no-deps left out
    for conflict in found.pop("requirement-conflict", []):
        assert conflict["evidence"]["name"] == "torch", conflict
    found.pop("requirement-missing", None)
    assert found == {}, found
