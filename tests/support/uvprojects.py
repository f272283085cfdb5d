"""Projects that real uv locks and syncs offline: wheels from a find-links folder, and local
packages (a workspace member, a git repository) built by a tiny in-tree PEP 517 backend, so
no build backend has to come from an index.

``write_package(dir, name, version)`` writes a buildable package (``pyproject.toml`` with
``backend-path = ["."]``, ``_backend.py``, ``NAME/__init__.py``); ``git_repo(dir)`` commits
it and returns the commit; ``uv(...)`` runs the real uv with the test's cache and no config;
``lock_project(dir, pyproject, index, cache)`` is a project's uv.lock against an index.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from support.venvs import uv_path

# A PEP 517 backend of ~40 lines: wheel and editable wheel (a .pth to the source folder).
BACKEND = """\
import base64, hashlib, os, tomllib, zipfile

def _project():
    with open("pyproject.toml", "rb") as handle:
        project = tomllib.load(handle)["project"]
    return project["name"].replace("-", "_"), project["version"]

def _row(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arc},sha256={digest},{len(data)}"

def _wheel(directory, entries):
    name, version = _project()
    info = f"{name}-{version}.dist-info"
    entries = list(entries) + [
        (f"{info}/METADATA", f"Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n"
         .encode()),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\n"
         b"Tag: py3-none-any\\n"),
    ]
    rows = [_row(a, d) for a, d in entries] + [f"{info}/RECORD,,"]
    filename = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, filename), "w") as archive:
        for arc, data in entries:
            archive.writestr(arc, data)
        archive.writestr(f"{info}/RECORD", "\\n".join(rows) + "\\n")
    return filename

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name, _ = _project()
    files = [os.path.join(r, f) for r, _, fs in os.walk(name) for f in fs if f.endswith(".py")]
    return _wheel(wheel_directory, [(p, open(p, "rb").read()) for p in sorted(files)])

def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    name, _ = _project()
    return _wheel(wheel_directory, [(f"_{name}_editable.pth", os.getcwd().encode() + b"\\n")])

def build_sdist(sdist_directory, config_settings=None):
    raise NotImplementedError
"""


def write_package(
    directory: Path, name: str, version: str, *, extra: str = "", text: str = "X = 1\n"
) -> Path:
    """A package uv can build with no index: NAME VERSION in DIRECTORY; EXTRA is more
    pyproject.toml text (dependencies, groups, [tool.uv])."""
    module = name.replace("-", "_")
    (directory / module).mkdir(parents=True, exist_ok=True)
    (directory / module / "__init__.py").write_text(text)
    (directory / "_backend.py").write_text(BACKEND)
    (directory / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "_backend"\nbackend-path = ["."]\n\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\nrequires-python = ">=3.10"\n'
        f"{extra}"
    )
    return directory


def git_repo(directory: Path) -> str:
    """DIRECTORY committed as a new git repository; its commit."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    for argv in (
        ["git", "init", "-q", "."],
        ["git", "add", "-A"],
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "locked"],
    ):
        subprocess.run(argv, cwd=directory, env=env, check=True, capture_output=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=directory, env=env, check=True, capture_output=True
    )
    return head.stdout.decode().strip()


def uv_env(cache: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """uv with CACHE, no download of Pythons, no progress bars, no user git config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "VIRTUAL_ENV"))}
    env |= {
        "UV_CACHE_DIR": str(cache),
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_NO_PROGRESS": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return env | dict(extra or {})


def uv(args: Sequence[str | Path], cwd: Path, env: Mapping[str, str]) -> str:
    """The real uv; fails the test with its stderr when it fails."""
    proc = subprocess.run(
        [str(uv_path()), *(str(a) for a in args)],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(f"uv {' '.join(map(str, args))}: {proc.stdout}\n{proc.stderr}")
    return proc.stdout + proc.stderr


def lock_project(project: Path, pyproject: str, index: str, cache: Path) -> Path:
    """PROJECT/uv.lock: PYPROJECT (the text of its pyproject.toml) locked by the real uv
    against INDEX (a PEP 503 URL), with uv's cache in CACHE."""
    project.mkdir()
    (project / "pyproject.toml").write_text(pyproject)
    uv(["lock", "--default-index", index], project, uv_env(cache))
    return project / "uv.lock"
