"""Opt-in tier (``pytest -m realenv``): ``check`` on a real CUDA torch 2.14.1 environment.

Set LIBDOCTOR_TORCH_ENV to a venv made with ``pip install torch==2.14.1`` (default
/work/envs/torchenv). The environment is only read; the broken variant is a hard-link copy
in a temp dir from which one file is deleted (a link removed, never a byte changed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support.venvs import Libdoctor

pytestmark = pytest.mark.realenv
TORCH_ENV = Path(os.environ.get("LIBDOCTOR_TORCH_ENV", "/work/envs/torchenv"))
CUDNN = "lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9"


@pytest.fixture(scope="module")
def torch_env() -> Path:
    if not (TORCH_ENV / "pyvenv.cfg").is_file():
        pytest.skip(f"no torch environment at {TORCH_ENV} (set LIBDOCTOR_TORCH_ENV)")
    return TORCH_ENV


def test_healthy_torch_env_is_clean(torch_env: Path, libdoctor: Libdoctor) -> None:
    run = libdoctor.check(torch_env, "--json", "--all")
    assert run.rc == 0, run.describe()
    doc = run.json()
    assert doc["summary"]["errors"] == 0 and doc["summary"]["warnings"] == 0
    assert doc["summary"]["distributions"] >= 25 and doc["summary"]["files"] > 20_000
    codes = {f["code"] for f in doc["findings"]}
    assert codes <= {"driver-library-absent", "optional-library-missing", "shared-path-identical"}


def test_deleted_cudnn_is_explained(torch_env: Path, libdoctor: Libdoctor, tmp_path: Path) -> None:
    broken = tmp_path / "env"
    subprocess.run(["cp", "-al", str(torch_env), str(broken)], check=True)
    try:
        (broken / CUDNN).unlink()
        run = libdoctor.check(broken, "--json")
        assert run.rc == 1, run.describe()
        doc = run.json()
        (missing,) = [f for f in doc["findings"] if f["code"] == "missing-files"]
        assert missing["distribution"]["name"] == "nvidia-cudnn-cu13"
        assert (
            missing["fix"]["argv"][-1] == f"nvidia-cudnn-cu13=={missing['distribution']['version']}"
        )
        (unresolved,) = [f for f in doc["findings"] if f["code"] == "unresolved-library"]
        assert unresolved["evidence"]["library"] == "libcudnn.so.9"
        requesters = {os.path.relpath(p, broken) for p in unresolved["paths"]}
        assert "lib/python3.11/site-packages/torch/lib/libtorch_cuda.so" in requesters
        (cuda_request,) = [
            r
            for r in unresolved["evidence"]["requests"]
            if r["requester"].endswith("torch/lib/libtorch_cuda.so")
        ]
        rpath_dirs = [s["directory"] for s in cuda_request["searched"] if s["source"] == "rpath"]
        assert rpath_dirs[0].endswith("torch/lib/../../nvidia/cudnn/lib")
        assert [c["name"] for c in unresolved["evidence"]["shipped_by"]] == ["nvidia-cudnn-cu13"]
        assert unresolved["fix"]["argv"][-1].startswith("nvidia-cudnn-cu13==")
    finally:
        shutil.rmtree(broken, ignore_errors=True)


def test_native_model_gives_the_full_models_findings(torch_env: Path) -> None:
    """``check`` runs the loader and stack checks on a model of the shared objects alone."""
    from libdoctor.analysis.overlap import native_model
    from libdoctor.analysis.run import loader_context, native_checks
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.environment.target import from_directory

    target = from_directory(torch_env, "test")
    context = loader_context({}, str(torch_env))
    light = native_model(target)
    assert len(light.claims) < len(build_environment(target).claims) / 10
    expected = native_checks(build_environment(target), RealDisk(), None, context)[0]
    assert native_checks(light, RealDisk(), None, context)[0] == expected
    assert {f.code for f in expected} == {"driver-library-absent", "optional-library-missing"}


def _copy(torch_env: Path, tmp_path: Path) -> Path:
    broken = tmp_path / "env"
    subprocess.run(["cp", "-al", str(torch_env), str(broken)], check=True)
    return broken


def test_cu13_cudnn_uninstall_is_import_torch_fails(
    torch_env: Path, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    """Issue 22: torch reaches cuda-pathfinder only through cuda-bindings; libcudnn.so.9 is
    DT_NEEDED by libtorch_python.so: an error whose cause reads "import torch fails"."""
    broken = _copy(torch_env, tmp_path)
    try:
        subprocess.run(
            [str(broken / "bin/python"), "-m", "pip", "uninstall", "-y", "-q", "nvidia-cudnn-cu13"],
            check=True,
            env={"PATH": os.environ["PATH"], "PIP_NO_INPUT": "1"},
        )
        doc = libdoctor.check(broken, "--json").json()
        (unresolved,) = [f for f in doc["findings"] if f["code"] == "unresolved-library"]
        assert unresolved["severity"] == "error"
        assert unresolved["evidence"]["library"] == "libcudnn.so.9"
        assert any((c["title"] or "").startswith("import torch fails") for c in doc["causes"])
    finally:
        shutil.rmtree(broken, ignore_errors=True)


SUBLIB = "lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn_graph.so.9"


@pytest.mark.parametrize("row", ["kept", "removed", "outside"])
def test_a_lost_cudnn_sublibrary(
    row: str, torch_env: Path, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    """The real cuDNN 9 wheel: libcudnn.so.9 dlopens libcudnn_graph.so.9 at run time."""
    broken = _copy(torch_env, tmp_path)
    try:
        graph = broken / SUBLIB
        system = tmp_path / "system"
        system.mkdir()
        os.link(graph, system / graph.name)
        graph.unlink()
        env: dict[str, str | None] = {}
        if row != "kept":
            (record,) = broken.glob("lib/python3.11/site-packages/nvidia_cudnn_cu13-*/RECORD")
            kept = [x for x in record.read_text().splitlines(True) if graph.name not in x]
            record.unlink()
            record.write_text("".join(kept))
        if row == "outside":
            env["LD_LIBRARY_PATH"] = str(system)
        doc = libdoctor.check(broken, "--json", env=env).json()
        code = "runtime-library-outside" if row == "outside" else "runtime-library-missing"
        (finding,) = [f for f in doc["findings"] if f["code"] == code]
        assert finding["evidence"]["library"] == "libcudnn_graph.so.9"
        assert finding["distribution"]["name"] == "nvidia-cudnn-cu13"
        assert finding["severity"] == ("warning" if row == "outside" else "error")
    finally:
        shutil.rmtree(broken, ignore_errors=True)
