"""Requirement truth against the real thing: states built by real pip (and uv), every problem
``pip check`` reports found as a finding, and more; every fix run for real.

The little world: ldt-pandas requires ldt-numpy>=1.26 (a native library inside), ldt-tz under
a marker that holds and ldt-never under one that does not; ldt-app requires ldt-jaxish[cuda12],
which requires ldt-plugin[with-cuda], which requires ldt-cudnn-cu12.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from libdoctor.analysis.overlap import native_model
from libdoctor.analysis.run import native_checks
from libdoctor.checks.requirements import check_requirements
from libdoctor.disk.stat import RealDisk
from libdoctor.environment.model import build_environment
from libdoctor.environment.target import from_directory
from support.checkdoc import Doc, canon, check_ok, run_fix_argv
from support.pipcheck import assert_superset_of_pip_check, pip_check, requirement_findings
from support.stackfake import TorchStack
from support.venvs import Libdoctor, Venv, VenvFactory, pip_env, pip_install
from support.wheels import WheelFactory
from support.zoo import Zoo, lib, rewrite_record_row

UV = Path(sys.executable).parent / "uv"


# --------------------------------------------------------------------------- the world


@pytest.fixture(scope="module")
def world(module_wheels: WheelFactory) -> WheelFactory:
    w = module_wheels
    w("ldt-numpy", "1.26.0", {"ldtnumpy/__init__.py": b"", "ldtnumpy/_core.so": lib("np126")})
    w("ldt-numpy", "1.20.0", {"ldtnumpy/__init__.py": b"", "ldtnumpy/_core.so": lib("np120")})
    w("ldt-tz", "2024.1", {"ldttz.py": b""})
    w(
        "ldt-pandas",
        "2.2.0",
        {"ldtpandas/__init__.py": b""},
        requires=[
            "ldt-numpy>=1.26",
            'ldt-tz; python_version >= "3"',
            'ldt-never; python_version < "3"',  # never applies: never reported
            'ldt-fast; extra == "perf"',  # an extra nobody asks for
        ],
        extra_metadata=[("Provides-Extra", "perf")],
    )
    w("ldt-app", "1.0", {"ldtapp.py": b""}, requires=["ldt-jaxish[cuda12]>=0.4"])
    w(
        "ldt-jaxish",
        "0.4.35",
        {"ldtjaxish/__init__.py": b""},
        # with-cuda as the plugin spells it: pip 23.2 does not normalise extras (PEP 685)
        requires=['ldt-plugin[with-cuda]==0.4.35; extra == "cuda12"'],
        extra_metadata=[("Provides-Extra", "cuda12")],
    )
    w(
        "ldt-plugin",
        "0.4.35",
        {"ldtplugin/__init__.py": b""},
        requires=['ldt-cudnn-cu12>=9; extra == "with-cuda"'],
        extra_metadata=[("Provides-Extra", "with-cuda")],
    )
    w("ldt-cudnn-cu12", "9.1.0", {"ldtcudnn/lib/libcudnn.so.9": lib("cudnn")})
    return w


def pip(venv: Venv, world: WheelFactory, *args: str) -> None:
    done = subprocess.run(
        [str(venv.python), "-m", "pip", *args],
        env=pip_env([world.dest]),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def uv(venv: Venv, world: WheelFactory, *args: str) -> None:
    argv = [str(UV), "pip", *args, "--python", str(venv.python)]
    if args[0] == "install":
        argv += ["--no-index", "--find-links", str(world.dest), "--no-cache"]
    done = subprocess.run(argv, env=pip_env(), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


# --------------------------------------------------------------------------- states


def healthy(venv: Venv, world: WheelFactory) -> None:
    pip(venv, world, "install", "ldt-pandas", "ldt-app")


def delete(rel: str) -> Callable[[Venv, WheelFactory], None]:
    def step(venv: Venv, world: WheelFactory) -> None:
        (venv.site_packages / rel).unlink()

    return step


def run_pip(*args: str) -> Callable[[Venv, WheelFactory], None]:
    return lambda venv, world: pip(venv, world, *args)


def unparsable_line(venv: Venv, world: WheelFactory) -> None:
    """A Requires-Dist no parser accepts, with the RECORD row rewritten to match (no
    altered-files): as a broken build would have installed it."""
    info = venv.site_packages / "ldt_tz-2024.1.dist-info"
    meta = (
        (info / "METADATA")
        .read_bytes()
        .replace(b"Version: 2024.1\n", b"Version: 2024.1\nRequires-Dist: ldt-x[bar\n")
    )
    (info / "METADATA").write_bytes(meta)
    rewrite_record_row(info, "ldt_tz-2024.1.dist-info/METADATA", meta)


@dataclass(frozen=True)
class State:
    steps: Sequence[Callable[[Venv, WheelFactory], None]]
    found: dict[str, tuple[str, str]]  # code -> (requirer, required name)
    pip_sees: bool  # whether pip check reports it too


STATES = {
    "healthy": State([healthy], {}, False),
    "uninstalled": State(
        [healthy, run_pip("uninstall", "-y", "ldt-numpy")],
        {"requirement-missing": ("ldt-pandas", "ldt-numpy")},
        True,
    ),
    "downgraded": State(
        [healthy, run_pip("install", "--no-deps", "ldt-numpy==1.20.0")],
        {"requirement-conflict": ("ldt-pandas", "ldt-numpy")},
        True,
    ),
    "phantom": State(
        [healthy, delete("ldtnumpy/_core.so")],
        {"requirement-phantom": ("ldt-pandas", "ldt-numpy")},
        False,  # pip check: "No broken requirements found."
    ),
    "through-extras": State(
        [healthy, run_pip("uninstall", "-y", "ldt-cudnn-cu12")],
        {"requirement-missing": ("ldt-plugin", "ldt-cudnn-cu12")},
        False,  # pip check does not follow ldt-app → ldt-jaxish[cuda12] → ldt-plugin[with-cuda]
    ),
    "unparsable": State(
        [healthy, unparsable_line], {"requirement-invalid": ("ldt-tz", "ldt-tz")}, True
    ),
}


@pytest.mark.parametrize("name", list(STATES))
def test_every_pip_check_problem_is_a_finding_and_the_fix_repairs_it(
    name: str, world: WheelFactory, new_venv: VenvFactory, libdoctor: Libdoctor
) -> None:
    state = STATES[name]
    venv = new_venv(name)
    for step in state.steps:
        step(venv, world)
    doc = check_ok(libdoctor.check(venv.path, "--json", "--all"))
    problems = assert_superset_of_pip_check(venv, doc)
    assert bool(problems) == state.pip_sees, problems
    found = {
        f["code"]: (canon(f["distribution"]["name"]), canon(f["evidence"].get("name", "ldt-tz")))
        for f in requirement_findings(doc)
    }
    assert found == state.found
    for finding in requirement_findings(doc):
        assert finding["severity"] == ("warning" if name == "unparsable" else "error")
        if finding.get("fix") is None:
            continue
        run_fix_argv(finding["fix"]["argv"], world.dest)
        after = check_ok(libdoctor.check(venv.path, "--json", "--all"))
        assert requirement_findings(after) == [], after
        assert pip_check(venv) == (0, [])


def test_missing_requirement_says_who_requires_what_and_one_fix(
    world: WheelFactory, new_venv: VenvFactory, libdoctor: Libdoctor
) -> None:
    venv = new_venv("missing")
    healthy(venv, world)
    pip(venv, world, "uninstall", "-y", "ldt-numpy")
    doc = check_ok(libdoctor.check(venv.path, "--json"))
    (finding,) = requirement_findings(doc)
    assert finding["message"] == (
        "ldt-pandas 2.2.0 requires ldt-numpy>=1.26, but ldt-numpy is not installed."
    )
    assert finding["evidence"]["requirements"] == [
        {"requirement": "ldt-numpy>=1.26", "marker": None, "extra": None, "why": None}
    ]
    assert finding["evidence"]["installed"] == []
    assert finding["fix"]["argv"] == [str(venv.python), "-m", "pip", "install", "ldt-numpy>=1.26"]
    assert "ldt-never" not in str(doc) and "ldt-fast" not in str(doc)


def test_a_requirement_through_extras_names_the_chain(
    world: WheelFactory, new_venv: VenvFactory, libdoctor: Libdoctor
) -> None:
    venv = new_venv("chain")
    healthy(venv, world)
    pip(venv, world, "uninstall", "-y", "ldt-cudnn-cu12")
    (finding,) = requirement_findings(check_ok(libdoctor.check(venv.path, "--json")))
    assert finding["evidence"]["requirements"][0]["extra"] == "with-cuda"
    assert finding["message"] == (
        "ldt-plugin 0.4.35 requires ldt-cudnn-cu12>=9 (through its extra with-cuda, requested "
        "as ldt-plugin[with-cuda] by ldt-jaxish 0.4.35), but ldt-cudnn-cu12 is not installed."
    )


def test_an_extra_only_inferred_is_never_held_to_account(
    world: WheelFactory, new_venv: VenvFactory, libdoctor: Libdoctor
) -> None:
    """``pip install 'ldt-jaxish[cuda12]'`` leaves no record of the extra (nothing else asks
    for it): its CUDA wheel missing is no finding, since the user may have asked for less."""
    venv = new_venv("inferred")
    pip(venv, world, "install", "ldt-jaxish[cuda12]")
    pip(venv, world, "uninstall", "-y", "ldt-cudnn-cu12")
    doc = check_ok(libdoctor.check(venv.path, "--json", "--all"))
    assert requirement_findings(doc) == []
    assert pip_check(venv) == (0, [])


def test_phantom_joins_missing_files_and_shares_its_fix(
    world: WheelFactory, new_venv: VenvFactory, libdoctor: Libdoctor
) -> None:
    venv = new_venv("phantom")
    healthy(venv, world)
    (venv.site_packages / "ldtnumpy/_core.so").unlink()
    doc = check_ok(libdoctor.check(venv.path, "--json"))
    (phantom,) = requirement_findings(doc)
    (missing,) = [f for f in doc["findings"] if f["code"] == "missing-files"]
    assert missing["evidence"]["phantom"] is True
    assert phantom["evidence"]["phantom"] == {
        "name": "ldt-numpy",
        "version": "1.26.0",
        "native_libraries": 1,
        "see": "missing-files",
    }
    assert phantom["fix"]["argv"] == missing["fix"]["argv"]
    assert "missing-files" in phantom["message"] and "already satisfied" in phantom["message"]


def test_conflict_fix_meets_every_requirer(
    world: WheelFactory, new_venv: VenvFactory, libdoctor: Libdoctor, make_wheel: WheelFactory
) -> None:
    """Two requirers, one unhappy: the fix asks for what both accept, so it breaks neither."""
    venv = new_venv("two-requirers")
    healthy(venv, world)
    capped = make_wheel("ldt-stats", "1.0", {"ldtstats.py": b""}, requires=["ldt-numpy<1.27"])
    pip(venv, world, "install", "--no-deps", str(capped))
    pip(venv, world, "install", "--no-deps", "ldt-numpy==1.20.0")
    conflicts = requirement_findings(check_ok(libdoctor.check(venv.path, "--json")))
    assert {canon(f["distribution"]["name"]) for f in conflicts} == {"ldt-pandas"}
    (finding,) = conflicts
    assert finding["fix"]["argv"][-1] == "ldt-numpy<1.27,>=1.26"
    run_fix_argv(finding["fix"]["argv"], world.dest)
    assert pip_check(venv) == (0, [])


def test_uv_installed_requirer_gets_a_uv_fix(
    world: WheelFactory, new_venv: VenvFactory, libdoctor: Libdoctor
) -> None:
    venv = new_venv("uv")
    uv(venv, world, "install", "ldt-pandas")
    uv(venv, world, "uninstall", "ldt-tz")
    doc = check_ok(libdoctor.check(venv.path, "--json"))
    assert_superset_of_pip_check(venv, doc)
    (finding,) = requirement_findings(doc)
    assert finding["evidence"]["requirements"][0]["why"] == 'where python_version >= "3"'
    argv = finding["fix"]["argv"]
    assert argv == ["uv", "pip", "install", "--python", str(venv.python), "ldt-tz"]
    run_fix_argv(argv, world.dest)
    assert requirement_findings(check_ok(libdoctor.check(venv.path, "--json"))) == []


def test_egg_info_requirements_are_read_like_pip_reads_them(
    world: WheelFactory, new_venv: VenvFactory, libdoctor: Libdoctor
) -> None:
    venv = new_venv("egg")
    info = venv.site_packages / "ldt_legacy-1.0-py3.11.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: ldt-legacy\nVersion: 1.0\n")
    (info / "requires.txt").write_text("ldt-tz>=2024\n\n[plot]\nldt-never\n")
    doc = check_ok(libdoctor.check(venv.path, "--json"))
    assert assert_superset_of_pip_check(venv, doc) == [("missing", "ldt-legacy", "ldt-tz")]


def test_a_fix_installs_into_the_environment_not_the_base_it_inherits() -> None:
    """A venv with the system site-packages: the base's old numpy is what the venv sees, and
    the fix puts a good one in the venv (shadowing it), never into the base interpreter."""
    from dataclasses import replace

    from libdoctor.environment.model import Environment
    from libdoctor.environment.target import SiteDir, Target
    from support.dists import fake_dist

    base = SiteDir("/base/site", "/base", inherited=True)
    numpy = replace(fake_dist("numpy", "1.20.0", site="/base/site"), site=base)
    pandas = fake_dist("pandas", "2.2.0", requires=["numpy>=1.26"])
    target = Target("/env", "/env/bin/python", (SiteDir("/env/site", "/env"), base), "t", (3, 11))
    env = Environment(target, (pandas, numpy), {}, (), {})
    (finding,) = check_requirements(env, RealDisk())
    assert finding.code == "requirement-conflict"
    assert finding.fix is not None
    assert finding.fix.argv == ("/env/bin/python", "-m", "pip", "install", "numpy>=1.26")


def test_the_native_model_gives_the_full_models_requirement_findings(
    world: WheelFactory, new_venv: VenvFactory
) -> None:
    """``check`` runs this check in its forked child on the shared-object rows alone."""
    venv = new_venv("native")
    healthy(venv, world)
    pip(venv, world, "uninstall", "-y", "ldt-tz")
    (venv.site_packages / "ldtnumpy/_core.so").unlink()
    target = from_directory(venv.path, "test")
    full = check_requirements(build_environment(target), RealDisk())
    assert sorted(f.code for f in full) == ["requirement-missing", "requirement-phantom"]
    assert native_checks(native_model(target), RealDisk())[0] == full


def test_the_zoo_has_no_requirement_findings(zoo: Zoo, zoo_all: Doc) -> None:
    """Every file-level breakage the zoo holds, and no requirement problem: pip check agrees."""
    assert requirement_findings(zoo_all) == []
    assert assert_superset_of_pip_check(zoo.venv, zoo_all) == []


def test_a_frameworks_broken_pins_are_requirement_findings_too(
    module_wheels: WheelFactory, new_venv: VenvFactory, libdoctor: Libdoctor
) -> None:
    """The stack test's state (test_pin_mismatch_and_missing_pin): torch pins a cuDNN other
    than the installed one, and cuda-toolkit[cudart] (which torch asks for) needs a runtime
    that is missing. pip check sees the first only; pin-mismatch stays the framework's view."""
    stack = TorchStack(module_wheels)
    venv = new_venv("pins")
    pip_install(venv, stack.toolkit(), stack.cusparse13(), stack.cudnn13("9.20.0.1", 200))
    pip_install(venv, stack.torch())
    doc = check_ok(libdoctor.check(venv.path, "--json"))
    assert assert_superset_of_pip_check(venv, doc) == [("conflict", "torch", "nvidia-cudnn-cu13")]
    found = {(f["code"], f["evidence"]["name"]): f for f in requirement_findings(doc)}
    assert set(found) == {
        ("requirement-conflict", "nvidia-cudnn-cu13"),
        ("requirement-missing", "nvidia-cuda-runtime"),
    }
    missing = found[("requirement-missing", "nvidia-cuda-runtime")]
    assert missing["distribution"]["name"] == "cuda-toolkit"
    assert missing["evidence"]["requirements"][0]["why"] == (
        "through its extra cudart, requested as cuda-toolkit[cudart] by torch 2.14.1"
    )
    assert {f["code"] for f in doc["findings"]} >= {"pin-mismatch"}


# --------------------------------------------------------------------------- real envs

SCI_ENV = Path(os.environ.get("LIBDOCTOR_SCI_ENV", "/tmp/golden/envs/sci"))
TORCH_ENV = Path(os.environ.get("LIBDOCTOR_TORCH_ENV", "/work/envs/torchenv"))


def _real_env(path: Path) -> Path:
    if not (path / "pyvenv.cfg").is_file():
        pytest.skip(f"no environment at {path}")
    return path


def test_no_requirement_finding_on_a_real_scientific_env() -> None:
    """numpy, pandas, scipy, pyarrow as pip installed them: nothing to say. Only read."""
    env = build_environment(from_directory(_real_env(SCI_ENV), "test"))
    assert check_requirements(env, RealDisk()) == []


@pytest.mark.realenv
def test_no_requirement_finding_on_the_real_torch_env() -> None:
    env = build_environment(from_directory(_real_env(TORCH_ENV), "test"))
    assert check_requirements(env, RealDisk()) == []
