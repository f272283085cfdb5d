"""Opt-in tier (``pytest -m realenv``): the issue 22 field trial's envs, fresh from PyPI.

Each env is only read (a removal happens in a hard-link copy). Point the variables at them;
an env that is not there is skipped:

- LIBDOCTOR_TRIAL_PIP_ENV (default /work/envs/i22-pipA): ``pip install`` numpy pandas scipy
  matplotlib scikit-learn pillow lxml cryptography pydantic orjson ujson msgpack pyyaml psutil
  grpcio protobuf pyarrow statsmodels scikit-image h5py shapely
- LIBDOCTOR_TRIAL_UV_ENV (default /work/envs/i22-uvB): ``uv pip install`` polars duckdb numba
  llvmlite opencv-python-headless onnxruntime tokenizers safetensors sentencepiece regex
  aiohttp yarl frozenlist multidict lz4 zstandard bcrypt cffi greenlet sqlalchemy uvloop
  httptools watchfiles rpds-py jiter pymupdf xgboost lightgbm (numba's TBB layer: one info)
- LIBDOCTOR_TRIAL_SYMLINK_ENV (default /work/envs/i22-uvC): ``uv pip install --link-mode
  symlink`` jax jaxlib transformers tiktoken pyzmq pycryptodome markupsafe pyrsistent wrapt
  simplejson
- LIBDOCTOR_TRIAL_TARGET (default /work/envs/i22-target/site) with
  LIBDOCTOR_TRIAL_TARGET_PYTHON (default /work/envs/i22-targetpy/bin/python, a venv without
  packages): ``pip install --target`` tornado pyzmq numpy pandas cryptography cffi psutil lxml.
  ``probe`` of that folder failed every import before the folder was put on PYTHONPATH.

The lock projects of the same trial are ``test_realenv_locks.py`` (LIBDOCTOR_LOCK_TRIAL).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.checkdoc import check_ok
from support.pipcheck import libdoctor_pairs, pip_check_pairs
from support.venvs import Libdoctor, real_env, run_libdoctor

pytestmark = pytest.mark.realenv

ENVS = {
    "pip": ("LIBDOCTOR_TRIAL_PIP_ENV", "/work/envs/i22-pipA", ["pandas", "sklearn.ensemble"]),
    "uv": ("LIBDOCTOR_TRIAL_UV_ENV", "/work/envs/i22-uvB", ["numba", "polars", "cv2"]),
    "symlink": ("LIBDOCTOR_TRIAL_SYMLINK_ENV", "/work/envs/i22-uvC", ["jax", "zmq"]),
}
# What each env's healthy check may say at info level, and nothing else.
INFOS = {"pip": set(), "uv": {"optional-library-missing"}, "symlink": set()}
# Removed one at a time in a copy: pip check's pairs must all be libdoctor's.
REMOVALS = {
    "pip": ["numpy", "packaging", "pyparsing", "six", "typing-extensions", "python-dateutil"],
    "uv": ["numpy", "packaging", "typing-extensions", "idna", "attrs", "cffi"],
    "symlink": ["numpy", "packaging", "typing-extensions", "regex", "requests"],
}


def _env(name: str) -> Path:
    variable, default, _ = ENVS[name]
    return real_env(variable, default, f"trial {name} ")


@pytest.mark.parametrize("name", sorted(ENVS))
def test_a_fresh_install_is_healthy(name: str, libdoctor: Libdoctor, tmp_path: Path) -> None:
    env = _env(name)
    for args in (("--json", "--all"), ("--json", "--all", "--deep")):
        doc = check_ok(libdoctor.check(env, *args))
        bad = [f for f in doc["findings"] if f["severity"] in ("error", "warning")]
        assert bad == [], bad
        assert {f["code"] for f in doc["findings"]} <= INFOS[name]
    modules = ENVS[name][2]
    run = run_libdoctor("probe", *modules, env, "--json", cache_home=tmp_path, timeout=600)
    assert run.rc == 0, run.describe()
    assert run.json()["findings"] == []


@pytest.mark.parametrize("name", sorted(ENVS))
def test_each_removal_is_every_pair_pip_check_reports(
    name: str, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    env = _env(name)
    uv = Path(sys.executable).parent / "uv"
    seen = 0
    for victim in REMOVALS[name]:
        copy = tmp_path / victim
        subprocess.run(["cp", "-al", str(env), str(copy)], check=True)
        python = copy / "bin" / "python"
        subprocess.run([str(uv), "pip", "uninstall", "-q", "--python", str(python), victim])
        doc = check_ok(libdoctor.check(copy, "--json", "--all"))
        pip_pairs = pip_check_pairs(python)
        assert pip_pairs <= libdoctor_pairs(doc), (victim, pip_pairs - libdoctor_pairs(doc))
        seen += len(pip_pairs)  # a victim nothing requires (or not installed) breaks nothing
        subprocess.run(["rm", "-rf", str(copy)], check=True)
    assert seen, f"no removal of {REMOVALS[name]} broke anything pip check sees"


def test_a_target_folder_checks_and_probes_clean(libdoctor: Libdoctor, tmp_path: Path) -> None:
    folder = Path(os.environ.get("LIBDOCTOR_TRIAL_TARGET", "/work/envs/i22-target/site"))
    python = os.environ.get("LIBDOCTOR_TRIAL_TARGET_PYTHON", "/work/envs/i22-targetpy/bin/python")
    if not (folder.is_dir() and Path(python).exists()):
        pytest.skip(f"no --target folder at {folder} (set LIBDOCTOR_TRIAL_TARGET and _PYTHON)")
    for args in (("--json", "--all"), ("--json", "--all", "--deep")):
        doc = check_ok(libdoctor.check(folder, "--python", python, *args))
        assert doc["findings"] == [], doc["findings"]
    modules = ("tornado", "zmq", "numpy", "pandas", "cffi", "psutil", "lxml.etree")
    run = run_libdoctor(
        "probe", *modules, "--python", python, folder, "--json", cache_home=tmp_path, timeout=600
    )
    assert run.rc == 0, run.describe()
    assert run.json()["findings"] == []
