"""Real virtual environments, real pip and the real libdoctor CLI, for tests.

A template venv (with pip, made once per session by ``python -m venv``) is copied per test with
``cp -a`` and its absolute paths are rewritten, the bin/ scripts' RECORD rows included, so the copy
is byte-for-byte what ``python -m venv`` would have made at the new path. Copying costs tens of
milliseconds instead of seconds.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from support.wheels import record_line

__all__ = [
    "REPO_ROOT",
    "SRC_DIR",
    "WITH_UV",
    "Libdoctor",
    "LibdoctorRun",
    "Venv",
    "VenvFactory",
    "clone_venv",
    "create_template_venv",
    "diff_snapshots",
    "installed_names",
    "libdoctor_env",
    "pip_env",
    "pip_install",
    "pip_uninstall",
    "real_env",
    "run_libdoctor",
    "run_libdoctor_inprocess",
    "snapshot",
    "strace_path",
    "uv_install",
    "uv_path",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
SRC_DIR = REPO_ROOT / "src"
PY_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"

# Variables that would make a child pip or libdoctor depend on the developer's shell.
_FOREIGN_ENV_PREFIXES = ("PIP_", "PYTHON", "VIRTUAL_ENV", "CONDA_", "UV_")


@dataclass(frozen=True, slots=True)
class Venv:
    path: Path

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    @property
    def python(self) -> Path:
        """``<venv>/bin/python``: the path libdoctor's fix commands must name (not its target)."""
        return self.path / "bin" / "python"

    @property
    def site_packages(self) -> Path:
        return self.path / "lib" / f"python{PY_VERSION}" / "site-packages"

    def dist_info(self, dirname: str) -> Path:
        return self.site_packages / dirname


# --------------------------------------------------------------------------- venv creation


def create_template_venv(dest: Path, python: str | os.PathLike[str] | None = None) -> Venv:
    """``python -m venv DEST`` with pip: the slow (~3 s) one-off that clones are made from."""
    base = str(python) if python is not None else sys.executable
    subprocess.run(
        [base, "-m", "venv", str(dest)],
        check=True,
        env=_clean_env(),
        capture_output=True,
    )
    venv = Venv(dest)
    if not (venv.site_packages / "pip").is_dir():
        raise RuntimeError(f"template venv at {dest} has no pip")
    return venv


def clone_venv(template: Venv, dest: Path) -> Venv:
    """Copy TEMPLATE to DEST (``cp -a``: symlinks, modes and mtimes kept) and re-home it."""
    if dest.exists():
        raise FileExistsError(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(template.path), str(dest)], check=True)
    venv = Venv(dest)
    _rehome(venv, old=os.fsencode(template.path), new=os.fsencode(dest))
    return venv


def _rehome(venv: Venv, *, old: bytes, new: bytes) -> None:
    """Rewrite the template's absolute path in bin/ and pyvenv.cfg, and fix the RECORD rows.

    pip writes console-script shebangs with the venv's absolute python and records their hashes;
    a clone must carry the new shebang *and* the matching RECORD row, as pip would have written.
    """
    rewritten: dict[Path, bytes] = {}
    for entry in venv.bin.iterdir():
        if entry.is_symlink() or not entry.is_file():
            continue
        content = entry.read_bytes()
        if old in content:
            updated = content.replace(old, new)
            _write_keeping_mode(entry, updated)
            rewritten[entry] = updated
    cfg = venv.path / "pyvenv.cfg"
    content = cfg.read_bytes()
    if old in content:
        _write_keeping_mode(cfg, content.replace(old, new))
    if rewritten:
        _fix_records(venv, rewritten)


def _write_keeping_mode(path: Path, data: bytes) -> None:
    mode = path.stat().st_mode
    path.write_bytes(data)
    path.chmod(mode)


def _fix_records(venv: Venv, rewritten: Mapping[Path, bytes]) -> None:
    site = venv.site_packages
    for record in site.glob("*.dist-info/RECORD"):
        lines = record.read_text("utf-8").splitlines()
        changed = False
        for index, line in enumerate(lines):
            rel = line.rsplit(",", 2)[0]
            target = Path(os.path.normpath(site / rel))
            if target in rewritten:
                lines[index] = record_line(rel, rewritten[target])
                changed = True
        if changed:
            record.write_text("\n".join(lines) + "\n", "utf-8")


class VenvFactory:
    """``factory(name)`` clones the template into a new venv under one root directory."""

    def __init__(self, template: Venv, root: Path) -> None:
        self.template = template
        self.root = root
        self._count = 0

    def __call__(self, name: str = "venv") -> Venv:
        self._count += 1
        return clone_venv(self.template, self.root / f"{self._count:02d}-{name}")


# --------------------------------------------------------------------------- pip


def _clean_env(overrides: Mapping[str, str | None] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN_ENV_PREFIXES)}
    for key, value in (overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def pip_env(
    find_links: Sequence[Path] = (), extra: Mapping[str, str | None] | None = None
) -> dict[str, str]:
    """An environment in which pip reads no config file and no index: it sees only FIND_LINKS.

    Test distributions have made-up names; an index lookup would be slow at best and install a
    stranger's package of the same name at worst.
    """
    env = _clean_env(
        {
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_NO_INDEX": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            "PIP_NO_WARN_SCRIPT_LOCATION": "1",
        }
    )
    if find_links:
        env["PIP_FIND_LINKS"] = " ".join(str(p) for p in find_links)
    for key, value in (extra or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _run_pip(venv: Venv, args: Sequence[str], env: Mapping[str, str]) -> str:
    proc = subprocess.run(
        [str(venv.python), "-m", "pip", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"pip {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc.stdout


def pip_install(
    venv: Venv,
    *wheels: Path,
    extra_args: Sequence[str] = (),
    find_links: Sequence[Path] = (),
) -> str:
    """``<venv>/bin/python -m pip install --no-deps WHEEL...`` offline; returns pip's stdout."""
    args = ["install", "--no-deps", *extra_args, *(str(w) for w in wheels)]
    return _run_pip(venv, args, pip_env(find_links))


def pip_uninstall(venv: Venv, *names: str) -> str:
    return _run_pip(venv, ["uninstall", "-y", *names], pip_env())


def uv_path() -> Path:
    """The real uv of the dev extra, beside the interpreter running the tests."""
    return Path(sys.executable).parent / "uv"


# uv on PATH: libdoctor runs `uv` for what uv installed (never a python from PATH).
WITH_UV = {"PATH": f"{uv_path().parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def installed_names(site: Path) -> set[str]:
    """The distributions in SITE, by the names of their dist-info directories."""
    return {p.name.split("-")[0] for p in site.glob("*.dist-info")}


def uv_install(python: Path, *wheels: Path, cache: Path, target: Path | None = None) -> str:
    """``uv pip install --no-deps WHEEL...`` with PYTHON (into its venv, or into the --target
    folder TARGET), offline, uv's cache under CACHE."""
    args = [str(uv_path()), "pip", "install", "--no-deps", "--no-index", "--python", str(python)]
    args += ["--target", str(target)] if target else []
    proc = subprocess.run(
        [*args, *(str(w) for w in wheels)],
        env=_clean_env({"UV_CACHE_DIR": str(cache), "UV_NO_PROGRESS": "1"}),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"uv pip install failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


# --------------------------------------------------------------------------- libdoctor


class LibdoctorRun(NamedTuple):
    rc: int
    stdout: str  # decoded with surrogateescape: lossless; .encode("utf-8") fails on bad bytes
    stderr: str

    def json(self) -> dict[str, Any]:
        try:
            doc = json.loads(self.stdout)
        except json.JSONDecodeError as exc:
            raise AssertionError(
                f"stdout is not JSON ({exc}); rc={self.rc}\n--- stdout\n{self.stdout[:4000]}"
                f"\n--- stderr\n{self.stderr[-4000:]}"
            ) from exc
        if not isinstance(doc, dict):
            raise AssertionError(f"JSON document is not an object: {type(doc).__name__}")
        return doc

    def describe(self) -> str:
        """For assertion messages."""
        return f"rc={self.rc}\n--- stdout\n{self.stdout[-6000:]}\n--- stderr\n{self.stderr[-6000:]}"


def cache_variables(cache_home: Path) -> dict[str, str | None]:
    """Every compile cache's variable under CACHE_HOME: no test reads (or clears) the
    machine's own torch, triton, CUDA or flashinfer caches."""
    return {
        "TRITON_CACHE_DIR": str(cache_home / "triton"),
        "TRITON_HOME": str(cache_home),
        "TORCHINDUCTOR_CACHE_DIR": str(cache_home / "torchinductor"),
        "TORCH_EXTENSIONS_DIR": None,
        "CUDA_CACHE_PATH": str(cache_home / "nv-compute"),
        "FLASHINFER_WORKSPACE_BASE": str(cache_home),
        "VLLM_CACHE_ROOT": str(cache_home / "vllm"),
    }


def libdoctor_env(
    env: Mapping[str, str | None] | None = None, cache_home: Path | None = None
) -> dict[str, str]:
    """The environment for a libdoctor child: no VIRTUAL_ENV/CONDA_PREFIX/PYTHON* from the
    developer's shell unless given in ENV (a None value removes a key), src/ on PYTHONPATH, and
    the default cache dir under CACHE_HOME so no test writes to ~/.cache."""
    overrides: dict[str, str | None] = {"PYTHONPATH": str(SRC_DIR)}
    if cache_home is not None:
        overrides["XDG_CACHE_HOME"] = str(cache_home)
        overrides.update(cache_variables(cache_home))
    overrides.update(env or {})
    return _clean_env(overrides)


def strace_path() -> str | None:
    """strace, if installed and allowed to trace here (ptrace may be forbidden in a sandbox)."""
    exe = shutil.which("strace")
    if exe is None:
        return None
    probe = subprocess.run([exe, "-f", "-qq", "-o", os.devnull, "true"], capture_output=True)
    return exe if probe.returncode == 0 else None


def run_libdoctor(
    *args: str | os.PathLike[str],
    env: Mapping[str, str | None] | None = None,
    cache_home: Path | None = None,
    timeout: float = 120,
    strace_log: Path | None = None,
    cwd: Path | None = None,
) -> LibdoctorRun:
    """``python -m libdoctor ARGS`` from the dev venv with PYTHONPATH=src, as a subprocess.

    STRACE_LOG: run under ``strace -f -e trace=%file``, logging every path-taking syscall there
    (the caller checks ``strace_path()`` first).
    """
    argv = [sys.executable, "-m", "libdoctor", *(os.fspath(a) for a in args)]
    if strace_log is not None:
        exe = strace_path()
        if exe is None:
            raise RuntimeError("strace is not usable here")
        argv = [exe, "-f", "-qq", "-e", "trace=%file", "-o", str(strace_log), *argv]
    proc = subprocess.run(
        argv,
        env=libdoctor_env(env, cache_home),
        capture_output=True,
        timeout=timeout,
        check=False,
        cwd=cwd if cwd is not None else REPO_ROOT,
    )
    return LibdoctorRun(
        proc.returncode,
        proc.stdout.decode("utf-8", "surrogateescape"),
        proc.stderr.decode("utf-8", "surrogateescape"),
    )


@contextlib.contextmanager
def _patched_environ(overrides: Mapping[str, str | None]) -> Iterator[None]:
    saved = dict(os.environ)
    try:
        for key, value in overrides.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_libdoctor_inprocess(
    *args: str | os.PathLike[str],
    env: Mapping[str, str | None] | None = None,
    cache_home: Path | None = None,
) -> LibdoctorRun:
    """``libdoctor.cli.main.main(argv)`` in this process, stdout/stderr captured, SystemExit caught.

    Faster than a subprocess and visible to coverage; the subprocess runner stays the reference.
    """
    from libdoctor.cli.main import (
        main,
    )  # imported late: the CLI may not exist while harness tests run

    overrides: dict[str, str | None] = {"VIRTUAL_ENV": None, "CONDA_PREFIX": None}
    if cache_home is not None:
        overrides["XDG_CACHE_HOME"] = str(cache_home)
        overrides.update(cache_variables(cache_home))
    overrides.update(env or {})
    out, err = io.StringIO(), io.StringIO()
    with (
        _patched_environ(overrides),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            rc = main([os.fspath(a) for a in args])
        except SystemExit as exc:  # argparse errors exit through SystemExit
            code = exc.code
            rc = code if isinstance(code, int) else (0 if code is None else 2)
    return LibdoctorRun(int(rc), out.getvalue(), err.getvalue())


class Libdoctor:
    """The real CLI with every cache outside every target: ``--cache-dir`` for ``check`` and
    ``$XDG_CACHE_HOME`` for whatever else would land in the user's cache."""

    def __init__(self, cache_root: Path) -> None:
        self.cache_root = cache_root
        self.cache_dir = cache_root / "libdoctor-cache"

    def __call__(
        self,
        *args: str | os.PathLike[str],
        env: Mapping[str, str | None] | None = None,
        timeout: float = 120,
        strace_log: Path | None = None,
    ) -> LibdoctorRun:
        """Subprocess ``python -m libdoctor ARGS``."""
        return run_libdoctor(
            *args, env=env, cache_home=self.cache_root, timeout=timeout, strace_log=strace_log
        )

    def check(
        self,
        *args: str | os.PathLike[str],
        env: Mapping[str, str | None] | None = None,
        timeout: float = 120,
        strace_log: Path | None = None,
    ) -> LibdoctorRun:
        """``libdoctor check ARGS --cache-dir <outside every target>``."""
        return self(
            "check",
            *args,
            "--cache-dir",
            self.cache_dir,
            env=env,
            timeout=timeout,
            strace_log=strace_log,
        )

    def inprocess(
        self, *args: str | os.PathLike[str], env: Mapping[str, str | None] | None = None
    ) -> LibdoctorRun:
        return run_libdoctor_inprocess(*args, env=env, cache_home=self.cache_root)


# --------------------------------------------------------------------------- snapshots


def snapshot(tree: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of TREE and everything under it, by path, never following symlinks.

    Directories are included, so a created or removed entry shows up as a changed directory mtime
    as well as a new or missing key. Non-UTF-8 names are kept (surrogateescape).
    """
    result: dict[str, tuple[int, int]] = {}
    root = os.fspath(tree)
    st = os.lstat(root)
    result[root] = (st.st_size, st.st_mtime_ns)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            result[path] = (st.st_size, st.st_mtime_ns)
    return result


def diff_snapshots(
    before: Mapping[str, tuple[int, int]], after: Mapping[str, tuple[int, int]]
) -> list[str]:
    """Human-readable differences, empty when identical."""
    lines = [f"created: {p!r}" for p in sorted(after.keys() - before.keys())]
    lines += [f"removed: {p!r}" for p in sorted(before.keys() - after.keys())]
    lines += [
        f"changed: {p!r} {before[p]} -> {after[p]}"
        for p in sorted(before.keys() & after.keys())
        if before[p] != after[p]
    ]
    return lines


def base_site_packages() -> list[Path]:
    """The base interpreter's purelib/platlib: what ``include-system-site-packages`` adds."""
    paths = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})
    seen: list[Path] = []
    for key in ("purelib", "platlib"):
        path = Path(paths[key])
        if path not in seen:
            seen.append(path)
    return seen


def real_env(variable: str, default: str, what: str = "") -> Path:
    """The real environment VARIABLE names (else DEFAULT) for the opt-in realenv tier, or the
    test skipped, naming the path and the variable: WHAT says which ("jax ")."""
    path = Path(os.environ.get(variable, default))
    if not (path / "pyvenv.cfg").is_file():
        pytest.skip(f"no {what}environment at {path} (set {variable})")
    return path
