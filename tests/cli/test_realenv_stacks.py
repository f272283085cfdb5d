"""Opt-in tier (``pytest -m realenv``): healthy non-torch CUDA stacks are clean.

Each env is a real install, made once with uv and one shared cache (see the README), and
only read here. Set the variables to where they are; an env that is not there is skipped:

- LIBDOCTOR_JAX_ENV (default /work/envs/jax-cuda12): ``uv pip install 'jax[cuda12]'``
- LIBDOCTOR_CUPY_ENV (default /work/envs/cupy-ctk): ``uv pip install 'cupy-cuda12x[ctk]'``
- LIBDOCTOR_TF_ENV (default /work/envs/tf-cuda): ``uv pip install 'tensorflow[and-cuda]'``
- LIBDOCTOR_ORT_ENV (default /work/envs/ort-gpu): ``uv pip install 'onnxruntime-gpu[cuda,cudnn]'``
- LIBDOCTOR_SCI_ENV (default /work/envs/sci): numpy scipy pandas scikit-learn matplotlib pyarrow
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.venvs import Libdoctor, real_env, run_libdoctor

pytestmark = pytest.mark.realenv

STACKS = {
    "jax": ("LIBDOCTOR_JAX_ENV", "/work/envs/jax-cuda12", ["jax"]),
    "cupy": ("LIBDOCTOR_CUPY_ENV", "/work/envs/cupy-ctk", ["cupy", "cupyx.scipy.linalg"]),
    "tensorflow": ("LIBDOCTOR_TF_ENV", "/work/envs/tf-cuda", ["tensorflow"]),
    "onnxruntime": ("LIBDOCTOR_ORT_ENV", "/work/envs/ort-gpu", ["onnxruntime"]),
    "sci": ("LIBDOCTOR_SCI_ENV", "/work/envs/sci", ["pandas", "sklearn.model_selection"]),
}


def _env(name: str) -> Path:
    variable, default, _ = STACKS[name]
    return real_env(variable, default, f"{name} ")


@pytest.mark.parametrize("name", sorted(STACKS))
def test_healthy_stack_has_no_errors_or_warnings(name: str, libdoctor: Libdoctor) -> None:
    env = _env(name)
    for args in (("--json", "--all"), ("--json", "--all", "--deep")):
        run = libdoctor.check(env, *args)
        assert run.rc == 0, run.describe()
        doc = run.json()
        bad = [f for f in doc["findings"] if f["severity"] in ("error", "warning")]
        assert bad == [], bad


@pytest.mark.parametrize("name", sorted(STACKS))
def test_healthy_stack_probe_has_no_false_findings(name: str, tmp_path: Path) -> None:
    env = _env(name)
    modules = STACKS[name][2]
    run = run_libdoctor("probe", *modules, env, "--json", cache_home=tmp_path, timeout=600)
    doc = run.json()
    assert doc["findings"] == [], doc["findings"]


EXTRA_ONLY = {  # a CUDA wheel the framework needs only through an extra pip does not record
    "jax": ("nvidia-cudnn-cu12", "jax-cuda12-plugin"),
    "tensorflow": ("nvidia-cudnn-cu12", "tensorflow"),
    "cupy": ("nvidia-cublas-cu12", "cuda-toolkit"),
    "onnxruntime": ("nvidia-cudnn-cu13", "onnxruntime-gpu"),
}


@pytest.mark.parametrize("name", sorted(EXTRA_ONLY))
def test_plan_uninstall_of_an_extra_only_cuda_wheel_breaks(name: str, tmp_path: Path) -> None:
    env = _env(name)
    package, dependent = EXTRA_ONLY[name]
    run = run_libdoctor("plan", "uninstall", package, env, "--json", cache_home=tmp_path)
    assert run.rc == 1, run.describe()
    plan = run.json()["plan"]
    assert plan["verdict"] == "breaks"
    assert dependent in {f["distribution"]["name"] for f in plan["new_findings"]}
