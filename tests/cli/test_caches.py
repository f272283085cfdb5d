"""``libdoctor caches``: real cache entries laid out as torch, triton and inductor lay them
out, for the target's versions and older ones, against a venv whose torch and triton come
from wheels built here; stale ones found, current ones kept, ``clear --stale`` removing only
the stale ones, and ``restore`` putting them back byte for byte."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from libdoctor.environment.target import SiteDir, Target
from libdoctor.stack.caches import Versions, read_env_file
from support.repairs import Cli, diff_states, tree_state
from support.venvs import Venv, VenvFactory, pip_install
from support.wheels import WheelFactory

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


def _write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def _extension(root: Path, build: str, name: str) -> None:
    """A torch extension build dir as cpp_extension leaves it after a build."""
    ext = root / build / name
    _write(ext / "build.ninja", f"ninja_required_version = 1.3\ncxx = c++\n# {name}\n")
    _write(ext / f"{name}.so", b"\x7fELF" + name.encode() * 50)
    _write(ext / "main.o", b"object " + name.encode())
    _write(ext / ".ninja_log", "# ninja log v5\n")


def _kernel(entry: Path, name: str, version: str | None) -> None:
    """A triton cache entry: the metadata JSON, the group file and the binary."""
    meta: dict[str, Any] = {
        "hash": "0" * 64,
        "target": {"backend": "cuda", "arch": 90, "warp_size": 32},
        "num_warps": 4,
        "name": name,
    }
    if version is not None:
        meta["triton_version"] = version
    _write(entry / f"{name}.json", json.dumps(meta))
    _write(entry / f"{name}.cubin", b"cubin" + name.encode())
    group = {"child_paths": {f"{name}.json": str(entry / f"{name}.json")}}
    _write(entry / f"__grp__{name}.json", json.dumps(group))


def _lay_out(root: Path) -> None:
    ext = root / "xdg" / "torch_extensions"
    _extension(ext, f"{PY_NOW}_cu130", "fused_now")
    _extension(ext, f"{PY_OLD}_cu121", "fused_old")
    _extension(ext, f"{PY_NOW}_cu121", "fused_cuda_old")
    triton = root / "triton"
    _kernel(triton / KEY_NOW, "add_kernel", "3.5.0")
    _kernel(triton / KEY_OLD, "add_kernel", "3.4.0")
    _write(triton / KEY_LAUNCHER / "cuda_utils.so", b"\x7fELF launcher")
    _write(triton / "notes.txt", "mine, not triton's\n")
    inductor = root / "inductor"
    _kernel(inductor / "triton" / "0" / KEY_INDUCTOR_OLD, "triton_poi_fused_0", "3.4.0")
    _write(inductor / "fxgraph" / "ab" / "fabcdef" / "entry", b"pickled graph")
    _write(inductor / "ab" / "cabcdef.py", "# generated code\n")


@pytest.fixture
def caches(new_venv: VenvFactory, make_wheel: WheelFactory, tmp_path: Path) -> Caches:
    venv = new_venv("gpu")
    torch = make_wheel("torch", "2.14.1+cu130", {"torch/__init__.py": b"__version__ = 1\n"})
    triton = make_wheel("triton", "3.5.0", {"triton/__init__.py": b""})
    pip_install(venv, torch, triton)
    pycache = venv.site_packages / "torch" / "__pycache__"
    _write(pycache / f"__init__.{TAG_NOW}.pyc", b"current bytecode")
    _write(pycache / f"__init__.{TAG_OLD}.pyc", b"old bytecode")
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


def _scan(cli: Cli, caches: Caches, *args: str) -> dict[str, Any]:
    run = cli("caches", str(caches.venv.path), "--json", *args, env=caches.env)
    assert run.rc in (0, 1), run.describe()
    return run.json()


def _by_kind(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["kind"]: c for c in doc["caches"]}


def _stale_names(doc: dict[str, Any]) -> dict[str, set[str]]:
    return {
        c["kind"]: {e["name"] for e in c["entries"] if e["stale"]}
        for c in doc["caches"]
        if any(e["stale"] for e in c["entries"])
    }


EXPECTED_STALE = {
    "torch-extensions": {f"{PY_OLD}_cu121/fused_old", f"{PY_NOW}_cu121/fused_cuda_old"},
    "triton": {KEY_OLD},
    "torch-inductor": {f"triton/0/{KEY_INDUCTOR_OLD}"},
    "bytecode": {TAG_OLD},
}


def test_stale_entries_are_found_and_current_ones_kept(cli: Cli, caches: Caches) -> None:
    run = cli("caches", str(caches.venv.path), "--json", env=caches.env)
    assert run.rc == 1, run.describe()
    doc = run.json()
    assert doc["versions"]["torch"] == "2.14.1"
    assert doc["versions"]["cuda"] == "cu130"
    assert doc["versions"]["triton"] == "3.5.0"
    assert _stale_names(doc) == EXPECTED_STALE
    kinds = _by_kind(doc)
    triton = {e["name"]: e for e in kinds["triton"]["entries"]}
    assert triton[KEY_NOW]["recorded"] == [
        {"what": "triton", "value": "3.5.0", "where": "triton_version in add_kernel.json"}
    ]
    assert triton[KEY_LAUNCHER]["recorded"] == [] and not triton[KEY_LAUNCHER]["stale"]
    assert [e["name"] for e in kinds["triton"]["unknown"]] == ["notes.txt"]
    current = {e["name"]: e for e in kinds["torch-extensions"]["entries"]}[
        f"{PY_NOW}_cu130/fused_now"
    ]
    assert not current["stale"] and current["files"] == 4
    codes = {f["code"] for f in doc["findings"]}
    assert codes == {"stale-cache-entry"}
    fixes = {f["fix"]["command"] for f in doc["findings"]}
    assert f"libdoctor caches clear --stale triton {caches.venv.path}" in fixes


def test_text_names_the_versions_and_the_clear_command(cli: Cli, caches: Caches) -> None:
    run = cli("caches", str(caches.venv.path), env=caches.env)
    assert run.rc == 1, run.describe()
    assert "torch 2.14.1" in run.stdout and "CUDA 13.0" in run.stdout
    assert "built for triton 3.4.0" in run.stdout
    assert f"libdoctor caches clear --stale torch-extensions {caches.venv.path}" in run.stdout


def test_clear_stale_removes_only_stale_and_restore_puts_it_back(cli: Cli, caches: Caches) -> None:
    before = caches.state()
    site_before = tree_state(caches.venv.site_packages)
    run = cli(
        "caches", "clear", "--stale", "--yes", str(caches.venv.path), "--json", env=caches.env
    )
    assert run.rc == 0, run.describe()
    cleared = run.json()["cleared"]
    assert {c["kind"]: set(c["entries"]) for c in cleared} == EXPECTED_STALE
    after = _scan(cli, caches)
    assert _stale_names(after) == {}
    gone = set(diff_states(before, caches.state()))
    assert all(line.startswith("removed: ") for line in gone), sorted(gone)
    assert any(KEY_OLD in line for line in gone)
    assert not any(KEY_NOW in line or "fused_now" in line or "notes.txt" in line for line in gone)
    assert (caches.triton / "notes.txt").exists()
    assert (
        caches.venv.site_packages / "torch" / "__pycache__" / f"__init__.{TAG_NOW}.pyc"
    ).exists()
    for item in cleared:
        restored = cli("restore", item["backup"], env=caches.env)
        assert restored.rc == 0, restored.describe()
    assert diff_states(before, caches.state()) == []
    assert diff_states(site_before, tree_state(caches.venv.site_packages)) == []


def test_clear_all_never_deletes_what_is_not_the_tools(cli: Cli, caches: Caches) -> None:
    run = cli("caches", "clear", "--all", "triton", "--yes", str(caches.venv.path), env=caches.env)
    assert run.rc == 0, run.describe()
    assert sorted(p.name for p in caches.triton.iterdir()) == ["notes.txt"]
    assert (caches.extensions / f"{PY_OLD}_cu121" / "fused_old").is_dir()  # another kind


def test_a_build_lock_refuses_the_clear(cli: Cli, caches: Caches) -> None:
    _write(caches.extensions / f"{PY_OLD}_cu121" / "fused_old" / "lock", b"")
    before = caches.state()
    run = cli("caches", "clear", "--yes", str(caches.venv.path), env=caches.env)
    assert run.rc == 2 and "being built" in run.stderr, run.describe()
    assert diff_states(before, caches.state()) == []


@pytest.fixture
def holder(caches: Caches) -> Iterator[subprocess.Popen[bytes]]:
    path = caches.triton / KEY_OLD / "add_kernel.cubin"
    code = f"import sys,time; f=open({str(path)!r},'rb'); print('open', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"open\n"
    yield proc
    proc.kill()
    proc.wait()


def test_an_open_file_refuses_the_clear(
    cli: Cli, caches: Caches, holder: subprocess.Popen[bytes]
) -> None:
    before = caches.state()
    run = cli("caches", "clear", "triton", "--yes", str(caches.venv.path), env=caches.env)
    assert run.rc == 2, run.describe()
    assert f"process {holder.pid}" in run.stderr
    assert diff_states(before, caches.state()) == []


def test_env_file_moves_a_root(cli: Cli, caches: Caches, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    _kernel(other / KEY_OLD, "mul_kernel", "3.1.0")
    env_file = tmp_path / "job.env"
    env_file.write_text(f"# the job's variables\nexport TRITON_CACHE_DIR='{other}'\n")
    doc = _scan(cli, caches, "--env-file", str(env_file))
    triton = _by_kind(doc)["triton"]
    assert triton["root"] == str(other) and triton["source"] == "$TRITON_CACHE_DIR"
    assert [e["name"] for e in triton["entries"] if e["stale"]] == [KEY_OLD]


def test_check_says_one_line_only_when_a_cache_is_stale(libdoctor: Any, caches: Caches) -> None:
    doc = libdoctor.check(caches.venv.path, "--json", env=caches.env).json()
    found = [f for f in doc["findings"] if f["code"] == "stale-caches"]
    assert len(found) == 1, found
    assert "triton" in found[0]["message"] and "torch-extensions" in found[0]["message"]
    for path in (
        caches.extensions / f"{PY_OLD}_cu121",
        caches.extensions / f"{PY_NOW}_cu121",
        caches.triton / KEY_OLD,
        caches.inductor / "triton",
    ):
        subprocess.run(["rm", "-rf", str(path)], check=True)
    doc = libdoctor.check(caches.venv.path, "--json", env=caches.env).json()
    assert [f for f in doc["findings"] if f["code"] == "stale-caches"] == []


def test_no_tool_no_verdict(cli: Cli, new_venv: VenvFactory, caches: Caches) -> None:
    """An environment without torch or triton uses none of their caches: nothing is stale."""
    plain = new_venv("plain")
    run = cli("caches", str(plain.path), "--json", env=caches.env)
    assert run.rc == 0, run.describe()
    assert {c["kind"] for c in run.json()["caches"]} <= {"cuda-jit", "bytecode"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A=1\n", {"A": "1"}),
        ("export B='two words'\n# c=3\n\n", {"B": "two words"}),
        ('C="x=y"\nnot a line\n9X=1\n', {"C": "x=y"}),
    ],
)
def test_env_file_lines(text: str, expected: dict[str, str]) -> None:
    assert read_env_file(text) == expected


def test_torch_cuda_from_the_local_label(tmp_path: Path) -> None:
    from libdoctor.environment.distributions import Distribution

    site = SiteDir(str(tmp_path), str(tmp_path))
    target = Target(str(tmp_path), None, (site,), "test", python_version=(3, 11))
    dist = Distribution(
        "torch",
        "2.14.1+cu130",
        "torch",
        str(tmp_path / "d"),
        "dist-info",
        site,
        str(tmp_path),
        "pip",
        (),
        None,
        None,
    )
    versions = Versions.of(target, [dist])
    assert (versions.tools["torch"], versions.cuda, versions.cache_tag) == (
        "2.14.1",
        "cu130",
        "cpython-311",
    )


def test_a_root_that_is_the_home_dir_is_refused(cli: Cli, caches: Caches) -> None:
    """TRITON_CACHE_DIR=$HOME by mistake: --all must not empty the home directory."""
    home = caches.root / "home"
    _kernel(home / KEY_OLD, "add_kernel", "3.4.0")
    _write(home / "thesis.tex", "years of work\n")
    env = {**caches.env, "TRITON_CACHE_DIR": str(home)}
    before = tree_state(home)
    run = cli("caches", "clear", "--all", "triton", "--yes", str(caches.venv.path), env=env)
    assert run.rc == 2 and "not a cache directory" in run.stderr, run.describe()
    assert diff_states(before, tree_state(home)) == []


def test_dry_run_changes_nothing(cli: Cli, caches: Caches) -> None:
    before = caches.state()
    run = cli("caches", "clear", "--dry-run", str(caches.venv.path), "--json", env=caches.env)
    assert run.rc == 0, run.describe()
    assert {c["kind"]: set(c["entries"]) for c in run.json()["cleared"]} == EXPECTED_STALE
    assert diff_states(before, caches.state()) == []


def test_flashinfer_and_inductor_name_their_versions(
    cli: Cli, caches: Caches, make_wheel: WheelFactory
) -> None:
    pip_install(caches.venv, make_wheel("flashinfer-python", "0.4.1", {"flashinfer/x.py": b""}))
    flashinfer = caches.root / "fi" / ".cache" / "flashinfer"
    _write(flashinfer / "0.4.1" / "90" / "cached_ops" / "a.so", b"now")
    _write(flashinfer / "0.3.0" / "90" / "cached_ops" / "a.so", b"old")
    _write(flashinfer / "80_90" / "cached_ops" / "a.so", b"before 0.3: no version")
    _write(caches.inductor / f"{PY_OLD}_cu130" / "wrapper" / "w.so", b"cpp wrapper")
    env = {**caches.env, "FLASHINFER_WORKSPACE_BASE": str(caches.root / "fi")}
    doc = cli("caches", str(caches.venv.path), "--json", env=env).json()
    stale = _stale_names(doc)
    assert stale["flashinfer"] == {"0.3.0"}
    assert f"{PY_OLD}_cu130" in stale["torch-inductor"]
