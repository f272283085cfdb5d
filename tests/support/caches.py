"""Compile caches laid out as torch, triton and inductor lay them out, for a venv whose torch
and triton come from wheels built in the test: current entries and stale ones (older Python,
CUDA, triton), and a file that is not the tool's. For ``caches`` and its kill -9 sweep."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.repairs import tree_state
from support.venvs import Venv, VenvFactory, pip_install
from support.wheels import WheelFactory

__all__ = [
    "KEY_INDUCTOR_OLD",
    "KEY_LAUNCHER",
    "KEY_NOW",
    "KEY_OLD",
    "PY_NOW",
    "PY_OLD",
    "TAG_NOW",
    "TAG_OLD",
    "Caches",
    "holding",
    "kernel",
    "make_caches",
    "write",
]

MAJOR, MINOR = sys.version_info[:2]
PY_NOW = f"py{MAJOR}{MINOR}"
PY_OLD = f"py{MAJOR}{MINOR - 1}"
TAG_NOW = f"cpython-{MAJOR}{MINOR}"
TAG_OLD = f"cpython-{MAJOR}{MINOR - 1}"
KEY_NOW = "A" * 52
KEY_OLD = "B" * 52
KEY_LAUNCHER = "C" * 52
KEY_INDUCTOR_OLD = "D" * 52


@dataclass
class Caches:
    """A venv with torch and triton, and the cache roots its tools use (the backups live
    beside them, under ``xdg/libdoctor``)."""

    venv: Venv
    root: Path
    env: dict[str, str | None]

    @property
    def extensions(self) -> Path:
        return self.root / "xdg" / "torch_extensions"

    @property
    def triton(self) -> Path:
        return self.root / "triton"

    @property
    def inductor(self) -> Path:
        return self.root / "inductor"

    def state(self) -> dict[str, tuple[Any, ...]]:
        out = {}
        for root in (self.extensions, self.triton, self.inductor):
            out.update(tree_state(root))
        return out


def write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def _extension(root: Path, build: str, name: str) -> None:
    """A torch extension build dir as cpp_extension leaves it after a build."""
    ext = root / build / name
    write(ext / "build.ninja", f"ninja_required_version = 1.3\ncxx = c++\n# {name}\n")
    write(ext / f"{name}.so", b"\x7fELF" + name.encode() * 50)
    write(ext / "main.o", b"object " + name.encode())
    write(ext / ".ninja_log", "# ninja log v5\n")


def kernel(entry: Path, name: str, version: str | None) -> None:
    """A triton cache entry: the metadata JSON, the group file and the binary."""
    meta: dict[str, Any] = {
        "hash": "0" * 64,
        "target": {"backend": "cuda", "arch": 90, "warp_size": 32},
        "num_warps": 4,
        "name": name,
    }
    if version is not None:
        meta["triton_version"] = version
    write(entry / f"{name}.json", json.dumps(meta))
    write(entry / f"{name}.cubin", b"cubin" + name.encode())
    group = {"child_paths": {f"{name}.json": str(entry / f"{name}.json")}}
    write(entry / f"__grp__{name}.json", json.dumps(group))


def _lay_out(root: Path) -> None:
    ext = root / "xdg" / "torch_extensions"
    _extension(ext, f"{PY_NOW}_cu130", "fused_now")
    _extension(ext, f"{PY_OLD}_cu121", "fused_old")
    _extension(ext, f"{PY_NOW}_cu121", "fused_cuda_old")
    triton = root / "triton"
    kernel(triton / KEY_NOW, "add_kernel", "3.5.0")
    kernel(triton / KEY_OLD, "add_kernel", "3.4.0")
    write(triton / KEY_LAUNCHER / "cuda_utils.so", b"\x7fELF launcher")
    write(triton / "notes.txt", "mine, not triton's\n")
    inductor = root / "inductor"
    kernel(inductor / "triton" / "0" / KEY_INDUCTOR_OLD, "triton_poi_fused_0", "3.4.0")
    write(inductor / "fxgraph" / "ab" / "fabcdef" / "entry", b"pickled graph")
    write(inductor / "ab" / "cabcdef.py", "# generated code\n")


def make_caches(new_venv: VenvFactory, make_wheel: WheelFactory, tmp_path: Path) -> Caches:
    """The venv (torch 2.14.1+cu130, triton 3.5.0, bytecode of two Pythons) and its caches
    under TMP_PATH/caches; ``Caches.env`` points the tools there."""
    venv = new_venv("gpu")
    torch = make_wheel("torch", "2.14.1+cu130", {"torch/__init__.py": b"__version__ = 1\n"})
    triton = make_wheel("triton", "3.5.0", {"triton/__init__.py": b""})
    pip_install(venv, torch, triton)
    pycache = venv.site_packages / "torch" / "__pycache__"
    write(pycache / f"__init__.{TAG_NOW}.pyc", b"current bytecode")
    write(pycache / f"__init__.{TAG_OLD}.pyc", b"old bytecode")
    root = tmp_path / "caches"
    _lay_out(root)
    env: dict[str, str | None] = {
        "XDG_CACHE_HOME": str(root / "xdg"),
        "TORCH_EXTENSIONS_DIR": None,
        "TRITON_CACHE_DIR": str(root / "triton"),
        "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
        "HOME": str(root / "home"),
    }
    return Caches(venv, root, env)


@contextlib.contextmanager
def holding(path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process with PATH open for as long as the block runs."""
    code = f"import time; f=open({str(path)!r},'rb'); print('open', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"open\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()
