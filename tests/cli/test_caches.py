"""``libdoctor caches``: real cache entries laid out as torch, triton and inductor lay them
out, for the target's versions and older ones, against a venv whose torch and triton come
from wheels built here; stale ones found, current ones kept, ``clear --stale`` removing only
the stale ones, and ``restore`` putting them back byte for byte."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from libdoctor.environment.target import SiteDir, Target
from libdoctor.stack.caches import Versions, read_env_file
from support.caches import (
    KEY_INDUCTOR_OLD,
    KEY_LAUNCHER,
    KEY_NOW,
    KEY_OLD,
    PY_NOW,
    PY_OLD,
    TAG_NOW,
    TAG_OLD,
    Caches,
    kernel,
    write,
)
from support.repairs import Cli, diff_states, tree_state
from support.venvs import VenvFactory, pip_install
from support.wheels import WheelFactory


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
    write(caches.extensions / f"{PY_OLD}_cu121" / "fused_old" / "lock", b"")
    before = caches.state()
    run = cli("caches", "clear", "--yes", str(caches.venv.path), env=caches.env)
    assert run.rc == 2 and "being built" in run.stderr, run.describe()
    assert diff_states(before, caches.state()) == []


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
    kernel(other / KEY_OLD, "mul_kernel", "3.1.0")
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
    kernel(home / KEY_OLD, "add_kernel", "3.4.0")
    write(home / "thesis.tex", "years of work\n")
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
    write(flashinfer / "0.4.1" / "90" / "cached_ops" / "a.so", b"now")
    write(flashinfer / "0.3.0" / "90" / "cached_ops" / "a.so", b"old")
    write(flashinfer / "80_90" / "cached_ops" / "a.so", b"before 0.3: no version")
    write(caches.inductor / f"{PY_OLD}_cu130" / "wrapper" / "w.so", b"cpp wrapper")
    env = {**caches.env, "FLASHINFER_WORKSPACE_BASE": str(caches.root / "fi")}
    doc = cli("caches", str(caches.venv.path), "--json", env=env).json()
    stale = _stale_names(doc)
    assert stale["flashinfer"] == {"0.3.0"}
    assert f"{PY_OLD}_cu130" in stale["torch-inductor"]
