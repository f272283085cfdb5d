"""Issue 5: ``libdoctor plan uninstall|install`` predicts, from the files alone, what a change
breaks — checked against what real pip then really does.

The seed in miniature (``support.seed``): ``torchlike._C`` finds ``libcudnn.so.9`` through its
RPATH in ``nvidia/cudnn/lib``, owned by ``cudnn-a``; ``cudnn-b`` installed over it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from libdoctor.disk.stat import FileState, RealDisk
from libdoctor.findings import Code, DistRef, Finding, Severity
from libdoctor.whatif.plan import diff_findings
from libdoctor.whatif.simulation import Overlay
from support.repairs import Cli
from support.seed import LIB_REL, SeedWheels, import_version
from support.venvs import (
    Venv,
    VenvFactory,
    diff_snapshots,
    pip_env,
    pip_install,
    pip_uninstall,
    snapshot,
)
from support.wheels import WheelFactory

Doc = dict[str, Any]


def new_findings(doc: Doc, code: str) -> list[Doc]:
    return [f for f in doc["plan"]["new_findings"] if f["code"] == code]


# =============================================================================== fixtures


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    return Cli(tmp_path_factory.mktemp("plan-cache-home"))


@pytest.fixture(scope="module")
def seed_plan(seed_venv: Venv, cli: Cli) -> Doc:
    before = snapshot(seed_venv.path)
    run = cli("plan", "uninstall", "cudnn-b", seed_venv.path, "--json")
    assert run.rc == 1, run.describe()
    assert diff_snapshots(before, snapshot(seed_venv.path)) == [], "plan wrote to the target"
    return run.json()


# =============================================================================== plan uninstall


def test_seed_reproduced(seed_venv: Venv) -> None:
    assert import_version(seed_venv.python) == (0, "92400"), "cudnn-b's bytes are loaded"


def test_plan_uninstall_predicts_the_phantom(seed_plan: Doc, seed_venv: Venv) -> None:
    plan = seed_plan["plan"]
    assert plan["verdict"] == "breaks"
    (missing,) = new_findings(seed_plan, "missing-files")
    assert missing["distribution"] == {"name": "cudnn-a", "version": "9.1.0"}
    assert missing["evidence"]["phantom"] is True
    assert str(seed_venv.site_packages / LIB_REL) in missing["paths"]


def test_plan_uninstall_predicts_the_unresolved_library(seed_plan: Doc, seed_venv: Venv) -> None:
    (unresolved,) = new_findings(seed_plan, "unresolved-library")
    assert unresolved["severity"] == "error"
    assert unresolved["evidence"]["library"] == "libcudnn.so.9"
    assert unresolved["distribution"]["name"] == "torchlike"
    assert any(p.endswith(".so") and "/torchlike/_C" in p for p in unresolved["paths"])
    assert "import torchlike._C fails" in unresolved["message"]
    assert seed_plan["plan"]["breaks"] == 3
    assert seed_plan["summary"]["errors"] == 3


def test_plan_uninstall_predicts_the_requirement_met_by_a_phantom(seed_plan: Doc) -> None:
    """torchlike requires cudnn-a==9.1.0: still "installed", but its library goes with
    cudnn-b's files. pip check would call that satisfied."""
    (phantom,) = new_findings(seed_plan, "requirement-phantom")
    assert phantom["distribution"] == {"name": "torchlike", "version": "1.0"}
    assert phantom["evidence"]["name"] == "cudnn-a"
    assert phantom["evidence"]["phantom"]["native_libraries"] == 1
    assert phantom["fix"]["argv"][-1] == "cudnn-a==9.1.0"  # the reinstall of missing-files


def test_plan_uninstall_names_the_co_owned_files(seed_plan: Doc, seed_venv: Venv) -> None:
    lib = str(seed_venv.site_packages / LIB_REL)
    co = {c["path"]: c for c in seed_plan["plan"]["co_owned"]}
    assert co[lib]["owners"] == [{"name": "cudnn-a", "version": "9.1.0"}]
    assert co[lib]["identical"] is False
    init = str(seed_venv.site_packages / "nvidia/__init__.py")
    assert co[init]["identical"] is True
    (removal,) = seed_plan["plan"]["removals"]
    assert lib in removal["files"]


def test_plan_uninstall_gives_the_verified_safe_sequence(seed_plan: Doc, seed_venv: Venv) -> None:
    sequence = seed_plan["plan"]["safe_sequence"]
    assert sequence["verified"] is True and sequence["remaining"] == []
    python = str(seed_venv.python)
    assert [s["argv"] for s in sequence["steps"]] == [
        [python, "-m", "pip", "uninstall", "--yes", "cudnn-b"],
        [python, "-m", "pip", "install", "--force-reinstall", "--no-deps", "cudnn-a==9.1.0"],
    ]
    for step in sequence["steps"]:
        assert shlex.split(step["command"]) == step["argv"]


def test_plan_uninstall_text(seed_venv: Venv, cli: Cli) -> None:
    run = cli("plan", "uninstall", "cudnn-b", seed_venv.path)
    assert run.rc == 1, run.describe()
    out = run.stdout
    assert "Verdict: breaks 3 things (safe with the sequence above)" in out
    assert "missing-files  cudnn-a 9.1.0" in out
    assert "unresolved-library" in out
    assert f"libdoctor uninstall cudnn-b --repair {seed_venv.path}" in out
    assert "(different bytes)" in out


def make_egg_info(site: Path) -> None:
    """A distribution as ``setup.py install --record`` left them: egg-info with
    installed-files.txt (paths relative to the egg-info dir), one file in it not listed."""
    (site / "eggpkg").mkdir()
    (site / "eggpkg/__init__.py").write_text("E = 1\n")
    info = site / "eggpkg-1.0-py3.11.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: eggpkg\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("eggpkg\n")
    (info / "not-listed.txt").write_text("x\n")
    listed = ["../eggpkg/__init__.py", "PKG-INFO", "top_level.txt", "installed-files.txt"]
    (info / "installed-files.txt").write_text("\n".join(listed) + "\n")


def test_removal_set_is_what_pip_really_deletes(
    new_venv: VenvFactory, seed: SeedWheels, make_wheel: WheelFactory, cli: Cli
) -> None:
    """The predicted files and directories are exactly the entries pip uninstall removes:
    bytecode, emptied directories, scripts, a shared namespace dir kept for its other owner,
    a directory kept because a user file lives in it."""
    rich = make_wheel(
        "richpkg",
        "2.0",
        {
            "richpkg/__init__.py": b"X = 1\n",
            "richpkg/sub/__init__.py": b"",
            "richpkg/sub/deep/mod.py": b"Y = 2\n",
            "richpkg/data/keep.txt": b"data\n",
            "richtop.py": b"Z = 3\n",
            "nvidia/richshare.py": b"",
        },
        data={"scripts/richtool": b"#!/bin/sh\necho rich\n"},
    )
    venv = new_venv("removal")
    pip_install(venv, seed.cudnn_a, seed.torchlike, seed.cudnn_b, rich)
    (venv.site_packages / "richpkg/data/user-notes.txt").write_text("mine\n")
    make_egg_info(venv.site_packages)
    for name in ("cudnn-b", "richpkg", "eggpkg"):
        run = cli("plan", "uninstall", name, venv.path, "--json")
        assert run.rc in (0, 1), run.describe()
        (removal,) = run.json()["plan"]["removals"]
        predicted = set(removal["files"]) | set(removal["directories"])
        before = snapshot(venv.path)
        pip_uninstall(venv, name)
        after = snapshot(venv.path)
        deleted = set(before) - set(after)
        assert predicted == deleted, (
            f"{name}: predicted but kept {sorted(predicted - deleted)}; "
            f"deleted but not predicted {sorted(deleted - predicted)}"
        )
    assert (venv.site_packages / "richpkg/data/user-notes.txt").exists()


def test_plan_uninstall_of_a_sole_owner_is_safe(healthy: Venv, cli: Cli) -> None:
    run = cli("plan", "uninstall", "torchlike", healthy.path, "--json")
    assert run.rc == 0, run.describe()
    plan = run.json()["plan"]
    assert plan["verdict"] == "safe"
    assert plan["co_owned"] == [] and plan["safe_sequence"] is None
    assert "Verdict: safe" in cli("plan", "uninstall", "torchlike", healthy.path).stdout


def test_plan_uninstall_of_the_only_provider_breaks_with_no_repair(healthy: Venv, cli: Cli) -> None:
    """Nobody else ships libcudnn.so.9: no reinstall makes it safe, and the plan says so.
    torchlike also requires cudnn-a by name."""
    run = cli("plan", "uninstall", "cudnn-a", healthy.path, "--json")
    assert run.rc == 1, run.describe()
    plan = run.json()["plan"]
    codes = sorted(f["code"] for f in plan["new_findings"])
    assert codes == ["requirement-missing", "unresolved-library"]
    assert plan["safe_sequence"] is None


def test_plan_unknown_distribution_is_exit_2(healthy: Venv, cli: Cli) -> None:
    run = cli("plan", "uninstall", "no-such-dist", healthy.path)
    assert run.rc == 2
    assert run.stderr.strip() == (
        f"libdoctor: error: no-such-dist is not installed in {healthy.path}"
    )


# =============================================================================== plan install


def _assert_overwrite(doc: Doc, venv: Venv) -> None:
    plan = doc["plan"]
    assert plan["verdict"] == "breaks"
    lib = str(venv.site_packages / LIB_REL)
    overwrites = {o["path"]: o for o in plan["overwrites"]}
    assert overwrites[lib]["owners"] == [{"name": "cudnn-a", "version": "9.1.0"}]
    assert overwrites[lib]["identical"] is False
    assert overwrites[str(venv.site_packages / "nvidia/__init__.py")]["identical"] is True
    (shared,) = new_findings(doc, "shared-path")
    assert shared["paths"] == [lib]
    assert shared["evidence"]["on_disk_owner"] == "cudnn-b"


def test_plan_install_wheel_predicts_the_overwrite(
    healthy: Venv, seed: SeedWheels, cli: Cli
) -> None:
    before = snapshot(healthy.path)
    run = cli("plan", "install", seed.cudnn_b, healthy.path, "--json")
    assert run.rc == 1, run.describe()
    _assert_overwrite(run.json(), healthy)
    text = cli("plan", "install", seed.cudnn_b, healthy.path).stdout
    assert "Overwrites 1 file with different bytes:" in text
    assert diff_snapshots(before, snapshot(healthy.path)) == []


def test_plan_install_requirement_resolves_with_the_target_pip(
    healthy: Venv, seed: SeedWheels, cli: Cli
) -> None:
    before = snapshot(healthy.path)
    run = cli(
        "plan",
        "install",
        "cudnn-b==9.24.0",
        healthy.path,
        "--no-index",
        "--find-links",
        seed.find_links,
        "--json",
    )
    assert run.rc == 1, run.describe()
    doc = run.json()
    assert doc["plan"]["subjects"] == ["cudnn-b 9.24.0"]
    _assert_overwrite(doc, healthy)
    assert diff_snapshots(before, snapshot(healthy.path)) == []
    satisfied = cli("plan", "install", "cudnn-a", healthy.path, "--no-index", "-f", seed.find_links)
    assert satisfied.rc == 0, satisfied.describe()
    assert "already satisfied" in satisfied.stdout


def test_plan_install_prediction_matches_what_pip_then_does(
    new_venv: VenvFactory, seed: SeedWheels, cli: Cli
) -> None:
    venv = new_venv("install-then-check")
    pip_install(venv, seed.cudnn_a, seed.torchlike)
    predicted = cli("plan", "install", seed.cudnn_b, venv.path, "--json").json()
    pip_install(venv, seed.cudnn_b)
    real = cli("check", venv.path, "--json").json()

    def key(f: Doc) -> tuple[str, str, tuple[str, ...]]:
        return (f["code"], json.dumps(f.get("distribution")), tuple(f.get("paths", ())))

    assert {key(f) for f in predicted["plan"]["new_findings"]} == {key(f) for f in real["findings"]}


def test_plan_install_of_an_upgrade_that_drops_the_library(
    new_venv: VenvFactory, seed: SeedWheels, make_wheel: WheelFactory, cli: Cli
) -> None:
    """pip uninstalls the old version first: the plan sees the library go, as check then does."""
    upgrade = make_wheel(
        "cudnn-a",
        "10.0.0",
        {"nvidia/__init__.py": b"", "nvidia/cudnn/__init__.py": b"# no library any more\n"},
    )
    venv = new_venv("upgrade")
    pip_install(venv, seed.cudnn_a, seed.torchlike)
    run = cli("plan", "install", upgrade, venv.path, "--json")
    assert run.rc == 1, run.describe()
    doc = run.json()
    assert "cudnn-a 10.0.0 replaces the installed cudnn-a 9.1.0" in doc["plan"]["notes"][0]
    # torchlike pins cudnn-a==9.1.0: the upgrade breaks that requirement too.
    new = sorted(f["code"] for f in doc["plan"]["new_findings"])
    assert new == ["requirement-conflict", "unresolved-library"]
    assert doc["plan"]["overwrites"] == []
    pip_install(venv, upgrade)
    real = cli("check", venv.path, "--json").json()
    assert sorted(f["code"] for f in real["findings"] if f["severity"] == "error") == new
    same = cli("plan", "install", upgrade, venv.path)
    assert same.rc == 0 and "already installed: pip would do nothing" in same.stdout


# =============================================================================== requirements


@pytest.fixture(scope="module")
def numpy_world(module_wheels: WheelFactory) -> dict[str, Path]:
    """ldt-pandas requires ldt-numpy>=1.26; an old ldt-numpy; a wheel needing what is absent."""
    w = module_wheels
    return {
        "numpy": w("ldt-numpy", "1.26.0", {"ldtnumpy/__init__.py": b""}),
        "old-numpy": w("ldt-numpy", "1.20.0", {"ldtnumpy/__init__.py": b""}),
        "pandas": w(
            "ldt-pandas", "2.2.0", {"ldtpandas/__init__.py": b""}, requires=["ldt-numpy>=1.26"]
        ),
        "needy": w("ldt-needy", "1.0", {"ldtneedy.py": b""}, requires=["ldt-elsewhere>=2"]),
    }


@pytest.fixture
def numpy_venv(new_venv: VenvFactory, numpy_world: dict[str, Path]) -> Venv:
    venv = new_venv("numpy-pandas")
    pip_install(venv, numpy_world["numpy"], numpy_world["pandas"])
    return venv


def _pip_check(venv: Venv) -> str:
    done = subprocess.run(
        [str(venv.python), "-m", "pip", "check"],
        env=pip_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout


def test_plan_uninstall_of_a_requirement_breaks_and_names_the_requirer(
    numpy_venv: Venv, cli: Cli
) -> None:
    """``pip uninstall ldt-numpy`` deletes no file another owns, and pip check was clean
    before: the plan still says it breaks ldt-pandas. Then pip does it, and check agrees."""
    run = cli("plan", "uninstall", "ldt-numpy", numpy_venv.path, "--json")
    assert run.rc == 1, run.describe()
    doc = run.json()
    assert doc["plan"]["verdict"] == "breaks" and doc["plan"]["co_owned"] == []
    (missing,) = new_findings(doc, "requirement-missing")
    assert missing["distribution"] == {"name": "ldt-pandas", "version": "2.2.0"}
    assert missing["evidence"]["name"] == "ldt-numpy"
    text = cli("plan", "uninstall", "ldt-numpy", numpy_venv.path).stdout
    assert "requirement-missing  ldt-pandas 2.2.0" in text and "Verdict: breaks" in text
    pip_uninstall(numpy_venv, "ldt-numpy")
    assert "ldt-pandas 2.2.0 requires ldt-numpy, which is not installed." in _pip_check(numpy_venv)
    real = cli("check", numpy_venv.path, "--json").json()
    assert [(f["code"], f["distribution"]) for f in real["findings"]] == [
        (f["code"], f["distribution"]) for f in doc["plan"]["new_findings"]
    ]


def test_plan_uninstall_of_what_nothing_requires_stays_safe(numpy_venv: Venv, cli: Cli) -> None:
    run = cli("plan", "uninstall", "ldt-pandas", numpy_venv.path, "--json")
    assert run.rc == 0, run.describe()
    assert run.json()["plan"]["verdict"] == "safe"


def test_plan_install_of_a_conflicting_wheel_breaks_the_requirer(
    numpy_venv: Venv, numpy_world: dict[str, Path], cli: Cli
) -> None:
    run = cli("plan", "install", numpy_world["old-numpy"], numpy_venv.path, "--json")
    assert run.rc == 1, run.describe()
    doc = run.json()
    (conflict,) = new_findings(doc, "requirement-conflict")
    assert conflict["distribution"]["name"] == "ldt-pandas"
    assert conflict["evidence"]["installed"] == [{"name": "ldt-numpy", "version": "1.20.0"}]
    pip_install(numpy_venv, numpy_world["old-numpy"])
    assert "ldt-pandas 2.2.0 has requirement ldt-numpy>=1.26" in _pip_check(numpy_venv)
    real = cli("check", numpy_venv.path, "--json").json()
    assert [f["code"] for f in real["findings"]] == ["requirement-conflict"]


def test_plan_install_of_a_wheel_with_unmet_requirements_leaves_them_to_pip(
    numpy_venv: Venv, numpy_world: dict[str, Path], cli: Cli
) -> None:
    """pip installs what a wheel requires along with it (or fails): not breakage, a note."""
    run = cli("plan", "install", numpy_world["needy"], numpy_venv.path, "--json")
    assert run.rc == 0, run.describe()
    plan = run.json()["plan"]
    assert plan["verdict"] == "safe" and plan["new_findings"] == []
    (note,) = [n for n in plan["notes"] if "ldt-elsewhere" in n]
    assert "pip resolves this itself when it installs ldt-needy" in note


# =============================================================================== units


def test_split_target(tmp_path: Path) -> None:
    from libdoctor.cli.common import split_target

    venv = str(tmp_path)
    assert split_target(["a", "b"]) == (["a", "b"], None)
    assert split_target(["a", venv]) == (["a"], venv)
    assert split_target([venv]) == ([venv], None)
    assert split_target(["a", "./missing/venv"]) == (["a"], "./missing/venv")
    assert split_target(["x.whl", "dir/y.whl"], wheels=True) == (["x.whl", "dir/y.whl"], None)


def test_overlay_removes_and_writes(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/a.py").write_text("a")
    (tmp_path / "pkg/b.py").write_text("bb")
    a, b = str(tmp_path / "pkg/a.py"), str(tmp_path / "pkg/b.py")
    new = str(tmp_path / "newdir/sub/c.so")
    view = Overlay(RealDisk(), [a, str(tmp_path / "pkg")], {new: FileState(True, True, 7)})
    assert not view.stat(a).exists
    assert view.listdir(str(tmp_path / "pkg")) == ()
    assert view.stat(new) == FileState(True, True, 7)
    assert view.stat(str(tmp_path / "newdir")).exists
    assert not view.stat(str(tmp_path / "newdir")).is_file
    assert view.listdir(str(tmp_path / "newdir")) == ("sub",)
    assert sorted(view.listdir(str(tmp_path))) == ["newdir"]
    assert view.removed == frozenset({a, str(tmp_path / "pkg")})
    rewritten = Overlay(view, (), {b: FileState(True, True, 2)})
    assert b not in rewritten.removed and rewritten.stat(b).size == 2


def test_diff_findings_by_code_distribution_paths_and_subject() -> None:
    def f(code: Code, paths: tuple[str, ...], **evidence: str) -> Finding:
        return Finding(code, Severity.ERROR, "m", DistRef("x", "1"), paths=paths, evidence=evidence)

    before = [
        f("missing-files", ("/a",)),
        f("unresolved-library", ("/m",), library="libA"),
        f("driver-library-absent", ("/p", "/q"), library="libcuda.so.1"),
        f("elf-invalid", ("/gone",)),
    ]
    after = [
        f("missing-files", ("/a", "/b")),  # more paths: worse, so new (and not resolved)
        f("unresolved-library", ("/m",), library="libA"),
        f("unresolved-library", ("/m",), library="libB"),
        f("driver-library-absent", ("/p",), library="libcuda.so.1"),  # fewer paths: kept
    ]
    diff = diff_findings(before, after)
    assert [(d.code, d.paths, dict(d.evidence)) for d in diff.new] == [
        ("missing-files", ("/a", "/b"), {}),
        ("unresolved-library", ("/m",), {"library": "libB"}),
    ]
    assert [(d.code, d.paths) for d in diff.resolved] == [("elf-invalid", ("/gone",))]
    assert [(d.code, d.paths) for d in diff.kept] == [
        ("unresolved-library", ("/m",)),
        ("driver-library-absent", ("/p",)),
    ]


def test_plan_never_writes_outside(healthy: Venv, cli: Cli, tmp_path: Path) -> None:
    """plan uninstall leaves the cache dir untouched too: it only reads."""
    run = cli("plan", "uninstall", "torchlike", healthy.path)
    assert run.rc == 0
    assert not (cli.cache_home / "libdoctor" / "backups").exists()
    assert os.path.isdir(healthy.path)


# =============================================================================== real tier

TORCH_ENV = Path(os.environ.get("LIBDOCTOR_TORCH_ENV", "/work/envs/torchenv"))
CU12_WHEEL = os.environ.get("LIBDOCTOR_CUDNN_CU12_WHEEL")  # a real nvidia-cudnn-cu12 wheel
SITE_REL = "lib/python3.11/site-packages"


def _cu12_stand_in(make_wheel: WheelFactory, env: Path) -> Path:
    """Without a real nvidia-cudnn-cu12 wheel (not in the local mirror): one that, like it,
    ships nvidia/cudnn/lib/libcudnn.so.9 — the env's own bytes plus a tail, so they differ."""
    from support.wheels import native_tag

    lib = (env / SITE_REL / LIB_REL).read_bytes() + b"\0LDTEST-cu12-stand-in\0"
    return make_wheel(
        "nvidia-cudnn-cu12",
        "9.10.2.21",
        {LIB_REL: lib, "nvidia/cudnn/__init__.py": b""},
        tag=native_tag(),
    )


@pytest.mark.realenv
def test_realenv_plan_uninstall_cudnn_cu12_over_torch(
    tmp_path: Path, make_wheel: WheelFactory, cli: Cli
) -> None:
    """On a copy of a torch 2.14.1 env with nvidia-cudnn-cu12 installed over it, the plan
    predicts that ``import torch`` breaks and names the reinstall that makes it safe."""
    if not (TORCH_ENV / "pyvenv.cfg").is_file():
        pytest.skip(f"no torch environment at {TORCH_ENV} (set LIBDOCTOR_TORCH_ENV)")
    env = tmp_path / "env"
    # A hard-link copy: pip unlinks before it writes and renames to stash, so the original
    # env's bytes are never touched; the copy's pyvenv.cfg is rewritten as a new file.
    subprocess.run(["cp", "-al", str(TORCH_ENV), str(env)], check=True)
    cfg = (env / "pyvenv.cfg").read_text()
    (env / "pyvenv.cfg").unlink()
    (env / "pyvenv.cfg").write_text(cfg)
    wheel = Path(CU12_WHEEL) if CU12_WHEEL else _cu12_stand_in(make_wheel, env)
    pip_install(Venv(env), wheel)
    cu13 = next((env / SITE_REL).glob("nvidia_cudnn_cu13-*.dist-info")).name
    cu13_version = cu13.removesuffix(".dist-info").split("-", 1)[1]
    run = cli("plan", "uninstall", "nvidia-cudnn-cu12", env, "--json")
    assert run.rc == 1, run.describe()
    plan = run.json()["plan"]
    (unresolved,) = new_findings(run.json(), "unresolved-library")
    assert unresolved["evidence"]["library"] == "libcudnn.so.9"
    requesters = {os.path.relpath(p, env / SITE_REL) for p in unresolved["paths"]}
    assert "torch/lib/libtorch_cuda.so" in requesters
    assert "import torch._C fails" in unresolved["message"]
    (missing,) = new_findings(run.json(), "missing-files")
    assert missing["distribution"]["name"] == "nvidia-cudnn-cu13"
    sequence = plan["safe_sequence"]
    assert sequence is not None and sequence["verified"] is True
    assert sequence["steps"][-1]["argv"][-1] == f"nvidia-cudnn-cu13=={cu13_version}"


def _uv() -> str:
    uv = Path(sys.executable).parent / "uv"
    if not uv.exists():
        pytest.skip("uv is not installed (pip install -e '.[dev]')")
    return str(uv)


def test_plan_install_requirement_in_a_uv_env_without_pip(
    tmp_path: Path, seed: SeedWheels, cli: Cli
) -> None:
    """A uv-made env has no pip of its own: libdoctor's pip resolves for it (--python)."""
    uv, env = _uv(), tmp_path / "uv-env"
    offline = {**os.environ, "UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, env], check=True, env=offline)
    subprocess.run(
        [
            uv,
            "pip",
            "install",
            "-q",
            "--python",
            env / "bin/python",
            "--no-index",
            "-f",
            seed.find_links,
            "cudnn-a==9.1.0",
            "torchlike",
        ],
        check=True,
        env=offline,
    )
    assert not list((env / "lib").glob("python*/site-packages/pip")), "uv made pip after all"
    before = snapshot(env)
    run = cli(
        "plan", "install", "cudnn-b==9.24.0", env, "--no-index", "-f", seed.find_links, "--json"
    )
    assert run.rc == 1, run.describe()
    doc = run.json()
    assert doc["plan"]["subjects"] == ["cudnn-b 9.24.0"]
    assert [f["code"] for f in doc["plan"]["new_findings"]] == ["shared-path"]
    assert diff_snapshots(before, snapshot(env)) == []


_BACKEND = """
import os


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = os.path.join(metadata_directory, "srcpkg-1.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as out:
        out.write("Metadata-Version: 2.1\\nName: srcpkg\\nVersion: 1.0\\n")
    return "srcpkg-1.0.dist-info"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise RuntimeError("a plan never builds")
"""


def _sdist(dest: Path) -> Path:
    """srcpkg 1.0 as an sdist whose in-tree backend gives metadata without any download."""
    import io
    import tarfile

    files = {
        "pyproject.toml": b'[build-system]\nrequires = []\nbuild-backend = "backend"\n'
        b'backend-path = ["."]\n',
        "backend.py": _BACKEND.encode(),
        "PKG-INFO": b"Metadata-Version: 2.1\nName: srcpkg\nVersion: 1.0\n",
    }
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "srcpkg-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"srcpkg-1.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_plan_install_of_an_sdist_cannot_tell(healthy: Venv, cli: Cli, tmp_path: Path) -> None:
    """pip would build it from source: the files are unknown, so the plan is not "safe"."""
    links = _sdist(tmp_path / "sdists").parent
    run = cli("plan", "install", "srcpkg", healthy.path, "--no-index", "-f", links, "--json")
    assert run.rc == 1, run.describe()
    plan = run.json()["plan"]
    assert (plan["verdict"], plan["unknown"]) == ("unknown", ["srcpkg 1.0"])
    text = cli("plan", "install", "srcpkg", healthy.path, "--no-index", "-f", links)
    assert text.rc == 1 and "Verdict: cannot tell" in text.stdout, text.describe()


def test_a_finding_deleted_with_its_files_is_not_resolved(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli
) -> None:
    """Uninstalling the only library that needed the driver makes driver-library-absent go
    away: that is no repair, and the plan does not list it as resolved."""
    from support.stackfake import fake_lib

    venv = new_venv("driver-user")
    plugin = make_wheel(
        "gpuplugin",
        "1.0",
        {"gpuplugin/libplug.so": fake_lib("libplug.so", needed=("libcuda.so.1",))},
    )
    pip_install(venv, plugin)
    before = cli("check", venv.path, "--json", "--all").json()
    assert "driver-library-absent" in {f["code"] for f in before["findings"]}
    doc = cli("plan", "uninstall", "gpuplugin", venv.path, "--json").json()
    assert doc["plan"]["resolved_findings"] == []
    assert doc["plan"]["verdict"] == "safe"


def test_plan_uninstall_of_what_an_extra_in_use_needs_breaks_and_names_it(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli
) -> None:
    """jax[cuda12]'s shape: the CUDA wheels come only through an extra, which pip and uv do
    not record. Every requirement of the extra installed: the environment uses it, and an
    uninstall of one of them breaks it (check itself stays quiet about inferred extras)."""
    venv = new_venv("extra-in-use")
    wheels = [
        make_wheel(
            "jaxish",
            "1.0",
            {"jaxish/__init__.py": b""},
            requires=["cudnnish>=9; extra == 'cuda'"],
            extra_metadata=[("Provides-Extra", "cuda")],
        ),
        make_wheel("cudnnish", "9.1", {"cudnnish/__init__.py": b""}),
    ]
    pip_install(venv, *wheels)
    assert cli("check", venv.path, "--json").json()["findings"] == []
    run = cli("plan", "uninstall", "cudnnish", venv.path, "--json")
    assert run.rc == 1, run.describe()
    plan = run.json()["plan"]
    assert plan["verdict"] == "breaks"
    (broken,) = plan["new_findings"]
    assert broken["code"] == "requirement-missing"
    assert broken["distribution"]["name"] == "jaxish"
    assert "through its extra cuda" in broken["message"]


def test_an_overwrite_is_identical_when_the_disk_already_holds_the_incoming_bytes(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli
) -> None:
    """owner-a's RECORD says A, but the file on disk holds incoming-c's bytes (as after an
    earlier install of it): writing them again changes no byte. Same size, other bytes: not."""
    rel = "shared/lib/libsame.so.1"
    owner = make_wheel("owner-a", "1.0", {rel: b"A" * 4000})
    incoming = make_wheel("incoming-c", "1.0", {rel: b"C" * 4000})
    venv = new_venv("disk-identical")
    pip_install(venv, owner)
    lib = venv.site_packages / rel

    def overwrite() -> Doc:
        run = cli("plan", "install", incoming, venv.path, "--json")
        found: Doc = {o["path"]: o for o in run.json()["plan"]["overwrites"]}[str(lib)]
        assert found["owners"] == [{"name": "owner-a", "version": "1.0"}]
        return found

    assert overwrite()["identical"] is False
    lib.write_bytes(b"C" * 4000)
    assert overwrite()["identical"] is True
    text = cli("plan", "install", incoming, venv.path).stdout
    assert "Overwrites no file of another distribution with other bytes" in text, text
    assert "and 1 file with identical bytes" in text, text
