"""The JSON documents, pinned byte for byte on the seed's state (issue 10: re-laying the tree
changes no output). Machine paths are replaced by placeholders; everything else is compared
as printed. After an intended change of the JSON, regenerate with
``LIBDOCTOR_UPDATE_GOLDEN=1 python -m pytest tests/report/test_golden_json.py`` and review
the diff of ``tests/report/golden/``."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from support.seed import build_seed_wheels
from support.venvs import Libdoctor, Venv, VenvFactory, pip_install
from support.wheels import WheelFactory

GOLDEN = Path(__file__).resolve().parent / "golden"
# A digest of a gcc-built file: the objects embed their build directory, which is random.
_DIGEST = re.compile(r"sha256=[A-Za-z0-9_-]{43}")
# Bytecode embeds its source's path, so the bytes hashed depend on the temp dir's length.
_BYTES = re.compile(r'"bytes_hashed": [0-9]+')


@pytest.fixture(scope="module")
def seed_env(module_venv: VenvFactory, module_wheels: WheelFactory) -> Venv:
    """cudnn-b installed over cudnn-a, torchlike needing their shared libcudnn.so.9."""
    seed = build_seed_wheels(module_wheels)
    venv = module_venv("golden")
    pip_install(venv, seed.cudnn_a, seed.torchlike)
    pip_install(venv, seed.cudnn_b)
    return venv


def _normalised(text: str, venv: Venv, cache: Path) -> str:
    text = text.replace(str(venv.path), "<ENV>").replace(str(cache), "<CACHE>")
    text = text.replace(sys.base_prefix, "<BASE>")
    return _BYTES.sub('"bytes_hashed": <BYTES>', _DIGEST.sub("sha256=<DIGEST>", text))


ENV = "{env}"
CASES = {
    "check": ("check", ENV, "--json", "--all"),
    "check-deep": ("check", ENV, "--json", "--all", "--deep", "--no-cache"),
    "why": ("why", "libcudnn.so.9", ENV, "--json"),
    "tree": ("tree", "torchlike._C", ENV, "--json"),
    "plan-uninstall": ("plan", "uninstall", "cudnn-a", ENV, "--json"),
    "fix-dry-run": ("fix", ENV, "--dry-run", "--json", "--no-index"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_json_is_what_it_was(
    name: str, seed_env: Venv, module_libdoctor: Libdoctor, tmp_path: Path
) -> None:
    argv = [str(seed_env.path) if a == ENV else a for a in CASES[name]]
    run = module_libdoctor(*argv, env={"LD_LIBRARY_PATH": None})
    assert run.rc in (0, 1), run.describe()
    got = _normalised(run.stdout, seed_env, module_libdoctor.cache_root)
    golden = GOLDEN / f"{name}.json"
    if os.environ.get("LIBDOCTOR_UPDATE_GOLDEN"):
        golden.write_text(got)
    assert got == golden.read_text(), f"{name}: JSON output changed (see the module docstring)"
