"""Stack truth: framework builds, CUDA majors, pins and the bytes a framework really loads.

Pure parts are table tests on values. The findings are checked on real venvs: a fake CUDA 13
torch (torch 2.14's preload flow, gcc-built libraries) and fake nvidia wheels for CUDA 12
and 13 that share paths, installed by the real pip; then the fixes are run for real.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from libdoctor.analysis import overlap, run
from libdoctor.analysis.overlap import native_model
from libdoctor.analysis.run import CheckOptions, native_checks
from libdoctor.checks.files import check_files, hash_jobs
from libdoctor.checks.stack import analyse_stack, check_stack
from libdoctor.disk.hashing import HashCache, HashStats, hash_many
from libdoctor.disk.stat import RealDisk
from libdoctor.environment.model import build_environment
from libdoctor.environment.requirements import RequirementIndex
from libdoctor.environment.target import from_directory
from libdoctor.findings import Finding, Severity
from libdoctor.loader.extensions import LoaderContext, analyse
from libdoctor.loader.system import probe_loader_system
from libdoctor.stack.cuda import cuda_major_of
from libdoctor.stack.frameworks import (
    FRAMEWORKS,
    detect_frameworks,
    parse_cupy_name,
    parse_onnxruntime_info,
    parse_tf_build_info,
    parse_torch_version_py,
)
from support.checkdoc import run_fix_argv
from support.dists import env_of, fake_dist
from support.stackfake import (
    TORCH_INITS,
    Torch29Stack,
    TorchStack,
    fake_lib,
    framework_wheel,
    tf_build_info,
    torch_version_py,
)
from support.venvs import Libdoctor, Venv, VenvFactory, pip_env, pip_install
from support.wheels import WheelFactory

# --------------------------------------------------------------------------- pure parts

REAL_VERSION_PY = b"""from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']
__version__ = '2.14.1+cu130'
debug = False
cuda: Optional[str] = '13.0'
git_version = '5c4886908584029761b579af026dcfb627c84070'
hip: Optional[str] = None
rocm: Optional[str] = None
xpu: Optional[str] = None
"""


@pytest.mark.parametrize(
    ("text", "version", "cuda", "problem"),
    [
        (REAL_VERSION_PY, "2.14.1+cu130", "13.0", None),
        (torch_version_py("2.9.1+cu128", "12.8"), "2.9.1+cu128", "12.8", None),
        (torch_version_py("2.14.1+cpu", None), "2.14.1+cpu", None, None),
        (b"__version__ = '2.0'\n", "2.0", None, "assigns no cuda"),
        (b"cuda = '12.1'\n", None, "12.1", "no __version__"),
        (b"__version__ = (\n", None, None, "does not parse"),
        (b"__version__ = '2.1'\ncuda = get()\n", "2.1", None, "assigns no cuda"),
    ],
)
def test_parse_torch_version_py(
    text: bytes, version: str | None, cuda: str | None, problem: str | None
) -> None:
    values, found = parse_torch_version_py(text)
    assert values.get("__version__") == version
    assert values.get("cuda") == cuda
    assert (found is None) == (problem is None)
    if problem:
        assert found is not None and problem in found


@pytest.mark.parametrize(
    ("key", "cuda"),
    [
        ("cupy-cuda12x", "12"),
        ("cupy-cuda13x", "13"),
        ("cupy-cuda11x", "11"),
        ("cupy-cuda102", "10.2"),
        ("cupy-cuda92", "9.2"),
        ("cupy-rocm-5-0", None),
        ("cupy", None),
    ],
)
def test_parse_cupy_name(key: str, cuda: str | None) -> None:
    assert parse_cupy_name(key) == cuda


@pytest.mark.parametrize(
    ("text", "cuda", "cudnn", "problem"),
    [
        (tf_build_info("12.5.1"), "12.5.1", "9", None),
        (tf_build_info(None), None, None, None),
        (b"build_info = {'cuda_version': '11.8', 'is_cuda_build': True}\n", "11.8", None, None),
        (b"build_info = collections.OrderedDict(make())\n", None, None, "not made of constants"),
        (b"build_info = [1, 2]\n", None, None, "not a mapping"),
        (b"info = {}\n", None, None, "assigns no build_info"),
        (b"build_info = (\n", None, None, "does not parse"),
    ],
)
def test_parse_tf_build_info(
    text: bytes, cuda: str | None, cudnn: str | None, problem: str | None
) -> None:
    info, found = parse_tf_build_info(text)
    assert (info.get("cuda_version"), info.get("cudnn_version")) == (cuda, cudnn)
    assert (found is None) == (problem is None)
    if problem:
        assert found is not None and problem in found


@pytest.mark.parametrize(
    ("text", "cuda", "problem"),
    [
        (b"package_name = 'onnxruntime-gpu'\n__version__ = '1.31.1'\ncuda_version = '13.0'\n",
         "13.0", None),
        (b"package_name = 'onnxruntime'\n__version__ = '1.31.1'\ncuda_version = ''\n", None, None),
        (b"package_name = 'onnxruntime'\n", None, None),
        (b"cuda_version = (\n", None, "does not parse"),
    ],
)  # fmt: skip
def test_parse_onnxruntime_info(text: bytes, cuda: str | None, problem: str | None) -> None:
    found, why = parse_onnxruntime_info(text)
    assert found == cuda
    assert (why is None) == (problem is None)
    if problem:
        assert why is not None and problem in why


def test_probe_facts_name_only_their_module() -> None:
    """The probe child evaluates each fact with only the imported module bound to its name."""
    import ast

    for spec in FRAMEWORKS:
        for name, expression in spec.facts:
            tree = ast.parse(expression, mode="eval")
            names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            assert names <= {spec.module, "len"}, (spec.name, name, names)


@pytest.mark.parametrize(
    ("name", "version", "paths", "major", "evidence"),
    [
        ("nvidia-cudnn-cu12", "9.10.2.21", ["nvidia/cudnn/lib/libcudnn.so.9"], 12, "-cu12"),
        ("nvidia-cudnn-cu13", "9.24.0.43", ["nvidia/cudnn/lib/libcudnn.so.9"], 13, "-cu13"),
        # CUDA 13's cuFFT is version 12.x: the files decide, not the version.
        ("nvidia-cufft", "12.0.0.61", ["nvidia/cu13/lib/libcufft.so.12"], 13, "nvidia/cu13/"),
        ("nvidia-cublas", "13.1.1.3", ["nvidia/cu13/lib/libcublas.so.13"], 13, "nvidia/cu13/"),
        ("nvidia-cuda-runtime", "9.9", ["x/lib/libcudart.so.12"], 12, "ships libcudart.so.12"),
        ("nvidia-cufft", "11.3", ["x/lib/libcufft.so.11"], 12, "ships libcufft.so.11"),
        ("cuda-toolkit", "13.0.3", [], 13, "versioned with CUDA"),
        ("nvidia-curand", "10.3.0", ["nvidia/curand/lib/libcurand.so.10"], None, None),
        ("nvidia-ml-py", "13.580.82", ["pynvml.py"], None, None),
        ("numpy", "2.0", ["numpy/cu13/x.py"], None, None),
    ],
)
def test_cuda_major_from_evidence(
    name: str, version: str, paths: list[str], major: int | None, evidence: str | None
) -> None:
    found = cuda_major_of(fake_dist(name, version, paths))
    if major is None:
        assert found is None
    else:
        assert found is not None and found.major == major
        assert evidence is not None and evidence in found.evidence


def test_pins_direct_and_through_extras() -> None:
    torch = fake_dist(
        "torch",
        "2.14.1",
        requires=[
            "cuda-toolkit[cublas,cudart]==13.0.3; platform_system == 'Linux'",
            "nvidia-cudnn-cu13==9.24.0.43; platform_system == 'Linux'",
            "sympy>=1.13",
            "triton~=3.8.0",
            "optree>=0.13.0; extra == 'optree'",
            "nvidia-nccl-cu13==2.30.7; python_version < '3.0'",
        ],
    )
    toolkit = fake_dist(
        "cuda-toolkit",
        "13.0.3",
        requires=[
            "nvidia-cublas==13.1.1.3.*; extra == 'cublas'",
            "nvidia-cuda-runtime==13.0.96.*; extra == 'cudart'",
            "nvidia-cufft==12.0.0.61.*; extra == 'cufft'",  # not an extra torch asks for
        ],
    )
    cublas = fake_dist("nvidia-cublas", "13.1.1.3")
    cudnn = fake_dist("nvidia-cudnn-cu13", "9.20.0.1")
    index = RequirementIndex(env_of(torch, toolkit, cublas, cudnn))
    pins = {p.requirement: p for p in index.pins(torch)}
    assert set(pins) == {
        "cuda-toolkit==13.0.3",
        "nvidia-cudnn-cu13==9.24.0.43",
        "nvidia-cublas==13.1.1.3.*",
        "nvidia-cuda-runtime==13.0.96.*",
    }
    assert pins["nvidia-cublas==13.1.1.3.*"].via == "cuda-toolkit[cublas]"
    assert pins["nvidia-cublas==13.1.1.3.*"].satisfied
    assert not pins["nvidia-cudnn-cu13==9.24.0.43"].satisfied
    assert pins["nvidia-cuda-runtime==13.0.96.*"].installed == ()
    assert index.required_by(toolkit) == [torch]
    # Through the extra torch asks for: cuda-toolkit[cublas] brings nvidia-cublas in.
    assert index.required_by(cublas) == [toolkit]
    (extra,) = [e for e in index.extras(toolkit) if e.name == "cublas"]
    assert extra.evidence == "requested as cuda-toolkit[cublas] by torch 2.14.1"
    assert extra.certain and not extra.inferred


def test_frameworks_registry_reads_each_kind(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "version.py").write_bytes(torch_version_py("2.14.1+cu130", "13.0"))
    (site / "tensorflow/python/platform").mkdir(parents=True)
    (site / "tensorflow/python/platform/build_info.py").write_bytes(tf_build_info("12.5.1"))
    (site / "onnxruntime/capi").mkdir(parents=True)
    (site / "onnxruntime/capi/build_and_package_info.py").write_bytes(b"cuda_version = '13.0'\n")
    torch = fake_dist("torch", "2.14.1", ["torch/version.py"], site=str(site))
    tf = fake_dist("tensorflow", "2.21.0", site=str(site))
    jax = fake_dist("jax-cuda12-plugin", "0.4.35", site=str(site))
    pjrt = fake_dist("jax-cuda13-pjrt", "0.7.0", site=str(site))
    ort = fake_dist("onnxruntime-gpu", "1.31.1", site=str(site))
    cupy = fake_dist("cupy-cuda12x", "13.3.0", site=str(site))
    other = fake_dist("numpy", "2.0", site=str(site))
    builds = detect_frameworks(env_of(torch, tf, jax, pjrt, ort, cupy, other))
    assert [(b.framework, b.module, b.cuda_major, b.version) for b in builds] == [
        ("torch", "torch", 13, "2.14.1+cu130"),
        ("tensorflow", "tensorflow", 12, "2.21.0"),
        ("jax", "jax", 12, "0.4.35"),
        ("jax", "jax", 13, "0.7.0"),
        ("onnxruntime", "onnxruntime", 13, "1.31.1"),
        ("cupy", "cupy", 12, "13.3.0"),
    ]


def test_unreadable_version_py_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    torch = fake_dist("torch", "2.14.1", ["torch/version.py"], site=str(tmp_path))
    (build,) = detect_frameworks(env_of(torch))
    assert build.cuda is None and build.problem and "cannot be read" in build.problem


@pytest.mark.parametrize("name", ["tensorflow", "onnxruntime-gpu"])
def test_unreadable_build_files_are_a_problem_not_a_crash(name: str, tmp_path: Path) -> None:
    (build,) = detect_frameworks(env_of(fake_dist(name, "1.0", site=str(tmp_path))))
    assert build.cuda is None and build.problem and "cannot be read" in build.problem


# --------------------------------------------------------------------------- real venvs


def stack_findings(venv: Venv, *, deep: bool = False) -> list[Finding]:
    """check_stack with the loader context, as ``libdoctor check`` runs it."""
    target = from_directory(venv.path, "test")
    env = build_environment(target)
    disk = RealDisk()
    analysis = analyse(env, disk, LoaderContext(probe_loader_system(), None, str(venv.path)))
    digests = None
    if deep:
        digests = hash_many(hash_jobs(env, disk), HashCache.load(None, target.prefix), HashStats())
    return check_stack(env, disk, digests, analysis)


def codes(findings: Sequence[Finding]) -> list[str]:
    return sorted(f.code for f in findings)


def only(findings: Sequence[Finding], code: str) -> Finding:
    matching = [f for f in findings if f.code == code]
    assert len(matching) == 1, [(f.code, f.message) for f in findings]
    return matching[0]


@pytest.fixture(scope="module")
def stack(module_wheels: WheelFactory) -> TorchStack:
    return TorchStack(module_wheels)


@pytest.fixture(scope="module")
def coherent(stack: TorchStack, module_venv: VenvFactory) -> Venv:
    venv = module_venv("coherent")
    pip_install(venv, *stack.coherent())
    return venv


@pytest.fixture(scope="module")
def overwritten(stack: TorchStack, module_venv: VenvFactory) -> Venv:
    """The seed: a CUDA 12 cuDNN installed after the CUDA 13 one overwrites its files."""
    venv = module_venv("overwritten")
    pip_install(venv, *stack.coherent())
    pip_install(venv, stack.cudnn12())
    return venv


@pytest.fixture(scope="module")
def wrong_major(stack: TorchStack, module_venv: VenvFactory) -> Venv:
    """A leftover CUDA 12 cuSPARSE: its own path, but torch's preload globs it first."""
    venv = module_venv("wrong-major")
    pip_install(venv, *stack.coherent())
    pip_install(venv, stack.cusparse12())
    return venv


@pytest.mark.parametrize("state", ["coherent", "overwritten", "wrong_major"])
def test_native_model_gives_the_full_models_findings(
    state: str, request: pytest.FixtureRequest
) -> None:
    """``check`` runs the loader and stack checks on a model of the shared objects alone."""
    venv: Venv = request.getfixturevalue(state)
    target = from_directory(venv.path, "test")
    context = LoaderContext(probe_loader_system(), None, str(venv.path))
    full = build_environment(target)
    disk = RealDisk()
    digests = hash_many(hash_jobs(full, disk), HashCache.load(None, target.prefix), HashStats())
    for known in (None, digests):
        expected = native_checks(full, RealDisk(), known, context, facts=True)
        assert native_checks(native_model(target), RealDisk(), known, context, True) == expected
    assert state == "coherent" or expected[0]
    assert expected[1] is not None and expected[1].libraries  # what a snapshot keeps


@pytest.mark.parametrize("state", ["coherent", "overwritten", "wrong_major"])
@pytest.mark.parametrize("deep", [False, True], ids=["sizes", "deep"])
def test_the_overlapped_check_equals_the_plain_one(
    state: str, deep: bool, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """analysis.overlap (the loader work in a forked child) against analysis.run's plain
    sequential run, the reference: the same findings, counts and snapshot facts; with --deep
    once from a cold hash cache and once from the warm one (the unchanged-env shortcut), and
    against hashing one file after the other (workers=1, no cache: hashpool's reference)."""
    venv: Venv = request.getfixturevalue(state)
    target = from_directory(venv.path, "test")
    context = LoaderContext(probe_loader_system(), None, str(venv.path))
    options = CheckOptions(deep=deep, cache_dir=str(tmp_path), libraries=context, facts=deep)
    cold = None
    for _ in range(2 if deep else 1):
        fast = overlap.run_check(target, options)
        cold = cold or fast.hashing
        plain = run.run_check(target, options)
        assert fast.findings == plain.findings
        assert (fast.distributions, fast.files) == (plain.distributions, plain.files)
        assert fast.facts == plain.facts and (fast.facts is not None) == deep
    if deep:
        one_by_one = run.run_check(target, replace(options, workers=1, cache_dir=None))
        assert one_by_one.findings == fast.findings and one_by_one.hashing == cold
    assert state == "coherent" or fast.findings


def test_check_without_a_second_core_gives_the_same_report(
    overwritten: Venv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On one core nothing is forked: the loader and stack checks run in the process, with
    the digests at hand instead of sent down a pipe."""
    target = from_directory(overwritten.path, "test")
    context = LoaderContext(probe_loader_system(), None, str(overwritten.path))
    options = CheckOptions(deep=True, cache_dir=str(tmp_path), libraries=context)
    forked = overlap.run_check(target, options).findings
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert overlap.run_check(target, options).findings == forked
    assert "foreign-bytes" in codes(forked)


def test_coherent_env_reports_nothing(coherent: Venv) -> None:
    assert stack_findings(coherent) == []
    assert stack_findings(coherent, deep=True) == []


def test_preload_replay_on_the_coherent_env(coherent: Venv) -> None:
    target = from_directory(coherent.path, "test")
    env = build_environment(target)
    disk = RealDisk()
    analysis = analyse(env, disk, LoaderContext(probe_loader_system(), None, "/"))
    stack = analyse_stack(env, disk, analysis)
    (start,) = stack.starts.values()
    assert start.ran and start.error is None
    assert "libcudart.so" in start.why
    site = str(coherent.site_packages)
    assert start.preloaded == (
        f"{site}/nvidia/cudnn/lib/libcudnn.so.9",
        f"{site}/nvidia/cu13/lib/libcudart.so.13",
        f"{site}/nvidia/cu13/lib/libcusparse.so.12",
    )


def test_overwritten_cudnn_is_mixed_major_and_foreign_bytes(overwritten: Venv) -> None:
    findings = stack_findings(overwritten)
    assert codes(findings) == ["cuda-mixed-major", "foreign-bytes"]
    site = str(overwritten.site_packages)
    python = str(overwritten.python)

    mixed = only(findings, "cuda-mixed-major")
    assert mixed.severity is Severity.WARNING
    (package,) = mixed.evidence["packages"]
    assert package["name"] == "nvidia-cudnn-cu12"
    assert package["leftover"] and package["required_by"] == []
    assert package["evidence"] == "name suffix -cu12"
    assert mixed.evidence["framework_majors"] == [13]
    assert mixed.fix is not None
    assert mixed.fix.steps == (
        (python, "-m", "pip", "uninstall", "--yes", "nvidia-cudnn-cu12"),
        (python, "-m", "pip", "install", "--force-reinstall", "--no-deps",
         "nvidia-cudnn-cu13==9.24.0.43"),
    )  # fmt: skip
    assert "also claim" in mixed.fix.note

    foreign = only(findings, "foreign-bytes")
    assert foreign.severity is Severity.ERROR
    assert foreign.paths == (f"{site}/nvidia/cudnn/lib/libcudnn.so.9",)
    assert foreign.evidence["bytes_of"] == {"name": "nvidia-cudnn-cu12", "version": "9.10.2.21"}
    assert foreign.evidence["decided_by"] == "size"
    assert foreign.evidence["pinned"]["name"] == "nvidia-cudnn-cu13"
    assert foreign.evidence["pinned"]["pin"] == "nvidia-cudnn-cu13==9.24.0.43"
    assert "preloaded by torch/__init__.py" in foreign.evidence["how"]
    assert "nvidia-cudnn-cu12 9.10.2.21's (by size)" in foreign.message
    assert foreign.fix is not None and foreign.fix.steps == mixed.fix.steps


def test_overwritten_cudnn_by_hash_with_deep(
    stack: TorchStack, new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    """Same size, other bytes: only --deep can tell, and it does."""
    venv = new_venv("same-size")
    pip_install(venv, *stack.coherent())
    same_size = bytearray(fake_lib("libcudnn.so.9", rpath="$ORIGIN", pad=300))
    same_size[-1] = 1  # differs in the padding only
    cu12 = make_wheel(
        "nvidia-cudnn-cu12", "9.10.2.21", {"nvidia/cudnn/lib/libcudnn.so.9": bytes(same_size)}
    )
    pip_install(venv, cu12)
    shallow = stack_findings(venv)
    assert codes(shallow) == ["cuda-mixed-major"]  # same size: cannot tell without hashes
    deep = only(stack_findings(venv, deep=True), "foreign-bytes")
    assert deep.evidence["decided_by"] == "hash"
    assert deep.evidence["bytes_of"]["name"] == "nvidia-cudnn-cu12"
    # The CLI runs these checks in a forked child, which gets the digests from the parent
    # (first run) or reads the hash cache itself (second run): same finding both times.
    # Files written within 2 s are never cached (racy): age them.
    past = time.time_ns() - 60 * 10**9
    for root, _, names in os.walk(venv.path):
        for name in names:
            os.utime(os.path.join(root, name), ns=(past, past), follow_symlinks=False)
    for run_number in (1, 2):
        run = libdoctor.check(venv.path, "--json", "--deep")
        doc = run.json()
        (cli,) = [f for f in doc["findings"] if f["code"] == "foreign-bytes"]
        assert cli["evidence"]["decided_by"] == "hash", run_number
        assert cli["evidence"]["bytes_of"]["name"] == "nvidia-cudnn-cu12"
        hashing = doc["tool"]["hashing"]
        assert (hashing["files_hashed"] == 0) == (run_number == 2), hashing


def test_running_the_fix_makes_the_env_coherent(stack: TorchStack, new_venv: VenvFactory) -> None:
    venv = new_venv("fix")
    pip_install(venv, *stack.coherent())
    pip_install(venv, stack.cudnn12())
    mixed = only(stack_findings(venv), "cuda-mixed-major")
    assert mixed.fix is not None
    run_fix_argv(mixed.fix.argv, stack.wheels.dest)
    assert stack_findings(venv) == []
    env = build_environment(from_directory(venv.path, "test"))
    problems = [f for f in check_files(env, RealDisk()) if f.severity >= Severity.WARNING]
    assert problems == []


def test_preload_picks_the_wrong_majors_copy(wrong_major: Venv) -> None:
    findings = stack_findings(wrong_major)
    assert codes(findings) == ["cuda-mixed-major", "foreign-bytes"]
    site = str(wrong_major.site_packages)
    foreign = only(findings, "foreign-bytes")
    assert foreign.paths == (f"{site}/nvidia/cusparse/lib/libcusparse.so.12",)
    assert foreign.evidence["bytes_of"] == {"name": "nvidia-cusparse-cu12", "version": "12.5.8.93"}
    assert foreign.evidence["pinned"]["name"] == "nvidia-cusparse"
    assert foreign.evidence["pinned"]["via"] == "cuda-toolkit[cusparse]"
    assert foreign.evidence["pinned"]["ships"] == [f"{site}/nvidia/cu13/lib/libcusparse.so.12"]
    assert foreign.evidence["preload"]["folder"] == "cusparse"
    assert foreign.evidence["preload"]["hits"] == [
        f"{site}/nvidia/cusparse/lib/libcusparse.so.12",
        f"{site}/nvidia/cu13/lib/libcusparse.so.12",
    ]
    # Its own path: the uninstall deletes nothing another distribution claims.
    assert foreign.fix is not None
    assert foreign.fix.steps == (
        (str(wrong_major.python), "-m", "pip", "uninstall", "--yes", "nvidia-cusparse-cu12"),
    )
    assert "deletes no file another distribution claims" in foreign.fix.note
    mixed = only(findings, "cuda-mixed-major")
    assert [p["name"] for p in mixed.evidence["packages"]] == ["nvidia-cusparse-cu12"]


def test_what_if_view_replays_the_preload_without_the_removed_files(wrong_major: Venv) -> None:
    """A plan's what-if: with the leftover's files hidden, torch preloads CUDA 13's copy."""
    from libdoctor.disk.stat import WithoutPaths

    env = build_environment(from_directory(wrong_major.path, "test"))
    (leftover,) = [d for d in env.distributions if d.key == "nvidia-cusparse-cu12"]
    disk = WithoutPaths(RealDisk(), [c.path for c in env.claims_of(leftover)])
    context = LoaderContext(probe_loader_system(), None, str(wrong_major.path))
    findings = check_stack(env, disk, None, analyse(env, disk, context))
    assert codes(findings) == ["cuda-mixed-major"]  # its metadata is still in this model
    stack = analyse_stack(env, disk, analyse(env, disk, context))
    (start,) = stack.starts.values()
    site = str(wrong_major.site_packages)
    assert f"{site}/nvidia/cu13/lib/libcusparse.so.12" in start.preloaded


def test_pin_mismatch_and_missing_pin(stack: TorchStack, new_venv: VenvFactory) -> None:
    venv = new_venv("pins")
    # cuDNN 9.20 instead of the pinned 9.24; the CUDA runtime (pinned via an extra) missing.
    pip_install(venv, stack.toolkit(), stack.cusparse13(), stack.cudnn13("9.20.0.1", 200))
    pip_install(venv, stack.torch())
    findings = [f for f in stack_findings(venv) if f.code == "pin-mismatch"]
    by_pin = {f.evidence["pin"]: f for f in findings}
    assert set(by_pin) == {"nvidia-cudnn-cu13==9.24.0.43", "nvidia-cuda-runtime==13.0.96.*"}
    cudnn = by_pin["nvidia-cudnn-cu13==9.24.0.43"]
    assert cudnn.severity is Severity.ERROR
    assert cudnn.evidence["installed"] == ["9.20.0.1"]
    assert "but 9.20.0.1 is installed" in cudnn.message
    assert cudnn.fix is not None
    assert cudnn.fix.argv == (
        str(venv.python), "-m", "pip", "install", "--no-deps", "nvidia-cudnn-cu13==9.24.0.43"
    )  # fmt: skip
    runtime = by_pin["nvidia-cuda-runtime==13.0.96.*"]
    assert runtime.evidence["via"] == "cuda-toolkit[cudart]"
    assert runtime.evidence["installed"] == []
    assert "not installed" in runtime.message
    run_fix_argv(cudnn.fix.argv, stack.wheels.dest)
    assert runtime.fix is not None
    run_fix_argv(runtime.fix.argv, stack.wheels.dest)
    assert stack_findings(venv) == []


@pytest.mark.parametrize(
    ("torch_kwargs", "reason"),
    [
        ({"version": "2.99.0+cu130", "dist_version": "2.99.0"}, "no preload model for torch"),
        ({"init": "import ctypes\nfrom torch._C import *\n"}, "does not match model torch-2.14"),
    ],
    ids=["unknown-version", "changed-text"],
)
def test_model_unknown(
    torch_kwargs: dict[str, str],
    reason: str,
    stack: TorchStack,
    new_venv: VenvFactory,
    make_wheel: WheelFactory,
) -> None:
    venv = new_venv("unknown")
    other = TorchStack(make_wheel)
    deps = [stack.toolkit(), stack.cudart13(), stack.cusparse13(), stack.cudnn13()]
    pip_install(venv, *deps, other.torch(**torch_kwargs, requires=()))
    finding = only(stack_findings(venv), "model-unknown")
    assert finding.severity is Severity.INFO
    assert reason in finding.message
    assert finding.paths[0].endswith("torch/__init__.py")


def test_cpu_torch_has_no_preload_model_question(
    stack: TorchStack, new_venv: VenvFactory, make_wheel: WheelFactory
) -> None:
    venv = new_venv("cpu")
    pip_install(venv, TorchStack(make_wheel).torch(version="2.99.0+cpu", cuda=None, requires=()))
    assert stack_findings(venv) == []


def test_frameworks_of_two_majors(
    stack: TorchStack, new_venv: VenvFactory, make_wheel: WheelFactory
) -> None:
    venv = new_venv("two-frameworks")
    cupy = make_wheel("cupy-cuda12x", "13.3.0", {"cupy/__init__.py": b""})
    pip_install(venv, *stack.coherent(), cupy)
    finding = only(stack_findings(venv), "cuda-mixed-major")
    assert "different CUDA majors" in finding.message
    assert finding.fix is None
    assert {f["name"] for f in finding.evidence["frameworks"]} == {"torch", "cupy-cuda12x"}


# --------------------------------------------------------------------------- torch versions


@pytest.mark.parametrize(
    ("shape", "version", "cuda", "model_id"),
    [
        ("2.4", "2.4.1+cu121", "12.1", "torch-2.4"),
        ("2.6", "2.6.0+cu124", "12.4", "torch-2.6"),
        ("2.7", "2.8.0+cu128", "12.8", "torch-2.8"),
        ("2.9", "2.9.1+cu128", "12.8", "torch-2.9"),
        ("2.10", "2.13.0+cu130", "13.0", "torch-2.11"),
        ("2.14", "2.14.1+cu130", "13.0", "torch-2.14"),
    ],
)
def test_each_preload_shape_installed_by_pip(
    shape: str,
    version: str,
    cuda: str,
    model_id: str,
    new_venv: VenvFactory,
    make_wheel: WheelFactory,
) -> None:
    venv = new_venv(f"torch-{shape}")
    torch = TorchStack(make_wheel).torch(
        version=version, dist_version=version.split("+")[0], cuda=cuda, init=TORCH_INITS[shape],
        requires=(),
    )  # fmt: skip
    pip_install(venv, torch)
    env = build_environment(from_directory(venv.path, "test"))
    stack = analyse_stack(env, RealDisk())
    (choice,) = stack.choices.values()
    assert choice.model is not None and choice.model.id == model_id
    assert choice.lists_from == "torch/__init__.py" and choice.list_differences == ()
    assert "model-unknown" not in codes(stack_findings(venv))


@pytest.fixture(scope="module")
def torch29(module_wheels: WheelFactory) -> Torch29Stack:
    return Torch29Stack(module_wheels)


def test_torch_2_9_on_cuda_12_is_modelled(torch29: Torch29Stack, new_venv: VenvFactory) -> None:
    """torch 2.9.1+cu128 with its CUDA 12 wheels: no model-unknown, and the replay preloads
    what 2.9 preloads once libcudart is mapped (nvrtc, its builtins, nvJitLink)."""
    venv = new_venv("torch-2.9")
    pip_install(venv, *torch29.coherent())
    assert stack_findings(venv) == []
    env = build_environment(from_directory(venv.path, "test"))
    disk = RealDisk()
    analysis = analyse(env, disk, LoaderContext(probe_loader_system(), None, "/"))
    stack = analyse_stack(env, disk, analysis)
    (start,) = stack.starts.values()
    assert start.model.id == "torch-2.9" and start.ran and start.error is None
    assert "nvidia/cuda_runtime/lib/libcudart.so.12 is mapped" in start.why
    site = str(venv.site_packages)
    assert start.preloaded == (
        f"{site}/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
        f"{site}/nvidia/cuda_nvrtc/lib/libnvrtc-builtins.so.12.8",
        f"{site}/nvidia/nvjitlink/lib/libnvJitLink.so.12",
    )


def test_torch_2_9_with_a_cuda_13_cudnn_over_its_own(
    torch29: Torch29Stack, new_venv: VenvFactory
) -> None:
    """The seed the other way round: nvidia-cudnn-cu13 installed over torch 2.9's CUDA 12
    cuDNN. A leftover of a major no framework uses, and torch will load its bytes."""
    venv = new_venv("torch-2.9-cudnn13")
    pip_install(venv, *torch29.coherent())
    pip_install(venv, torch29.cuda13.cudnn13())
    findings = stack_findings(venv)
    assert codes(findings) == ["cuda-mixed-major", "foreign-bytes"]
    mixed = only(findings, "cuda-mixed-major")
    assert [p["name"] for p in mixed.evidence["packages"]] == ["nvidia-cudnn-cu13"]
    foreign = only(findings, "foreign-bytes")
    assert foreign.evidence["bytes_of"]["name"] == "nvidia-cudnn-cu13"
    assert foreign.evidence["pinned"]["name"] == "nvidia-cudnn-cu12"
    assert foreign.evidence["how"].startswith("rpath of")


# --------------------------------------------------------------------------- other frameworks


@pytest.mark.parametrize(
    ("name", "version", "cuda", "needed", "framework", "major"),
    [
        ("tensorflow", "2.21.0", "12.5.1", (), "tensorflow", 12),
        ("tensorflow-cpu", "2.21.0", None, (), "tensorflow", None),
        ("tf-nightly", "2.23.0.dev20261026", "12.5.1", (), "tensorflow", 12),
        ("onnxruntime-gpu", "1.31.1", "13.0", (), "onnxruntime", 13),
        ("onnxruntime-gpu", "1.20.1", None, ("libcublasLt.so.12", "libcudart.so.12"),
         "onnxruntime", 12),
        ("onnxruntime-gpu", "1.17.1", None, ("libcublasLt.so.11", "libcudart.so.11.0"),
         "onnxruntime", 11),
        ("jax-cuda13-plugin", "0.10.2", None, (), "jax", 13),
        ("cupy-cuda11x", "13.6.0", None, (), "cupy", 11),
    ],
)  # fmt: skip
def test_framework_builds_from_wheels_installed_by_pip(
    name: str,
    version: str,
    cuda: str | None,
    needed: tuple[str, ...],
    framework: str,
    major: int | None,
    new_venv: VenvFactory,
    make_wheel: WheelFactory,
) -> None:
    venv = new_venv("framework")
    pip_install(venv, framework_wheel(make_wheel, name, version, cuda, needed=needed))
    (build,) = detect_frameworks(build_environment(from_directory(venv.path, "test")))
    assert (build.framework, build.dist.name, build.version) == (framework, name, version)
    assert build.cuda_major == major and build.problem is None
    if needed:
        assert build.source == "DT_NEEDED of onnxruntime/capi/libonnxruntime_providers_cuda.so"


def test_a_cuda_12_framework_keeps_its_nvidia_wheels(
    stack: TorchStack, new_venv: VenvFactory, make_wheel: WheelFactory
) -> None:
    """TensorFlow built for CUDA 12 beside a CUDA 13 torch: the CUDA 12 cuSPARSE it uses is
    no leftover (before TensorFlow was known, the fix uninstalled it); the two majors are."""
    venv = new_venv("tf-and-torch")
    tf = framework_wheel(make_wheel, "tensorflow", "2.21.0", "12.5.1")
    pip_install(venv, *stack.coherent(), tf, stack.cusparse12())
    findings = stack_findings(venv)
    mixed = only(findings, "cuda-mixed-major")
    assert "different CUDA majors" in mixed.message and "packages" not in mixed.evidence
    frameworks = {(f["name"], f["cuda"]) for f in mixed.evidence["frameworks"]}
    assert frameworks == {("torch", "13.0"), ("tensorflow", "12.5.1")}
    assert mixed.fix is None


@pytest.mark.parametrize(
    ("name", "version", "cuda"),
    [("onnxruntime-gpu", "1.31.1", "13.0"), ("tensorflow-cpu", "2.21.0", None)],
)
def test_frameworks_of_the_same_major_or_none(
    name: str,
    version: str,
    cuda: str | None,
    new_venv: VenvFactory,
    stack: TorchStack,
    make_wheel: WheelFactory,
) -> None:
    venv = new_venv("same-major")
    pip_install(venv, *stack.coherent(), framework_wheel(make_wheel, name, version, cuda))
    assert stack_findings(venv) == []


def test_check_stack_without_loader_context_skips_foreign_bytes(overwritten: Venv) -> None:
    env = build_environment(from_directory(overwritten.path, "test"))
    assert codes(check_stack(env, RealDisk())) == ["cuda-mixed-major"]


# --------------------------------------------------------------------------- needed through extras


def jax_cuda12(wheels: WheelFactory) -> list[Path]:
    """jax[cuda12] as real jax states it: jax's cuda12 extra asks for
    jax-cuda12-plugin[with-cuda], whose with-cuda extra asks for the cu12 cuDNN."""
    return [
        wheels(
            "jax",
            "0.4.35",
            {"jax/__init__.py": b""},
            requires=['jax-cuda12-plugin[with-cuda]==0.4.35; extra == "cuda12"'],
            extra_metadata=[("Provides-Extra", "cuda12")],
        ),
        wheels(
            "jax-cuda12-plugin",
            "0.4.35",
            {"jax_plugins/xla_cuda12/__init__.py": b""},
            requires=['nvidia-cudnn-cu12<10.0,>=9.1; extra == "with-cuda"'],
            extra_metadata=[("Provides-Extra", "with-cuda")],
        ),
    ]


def test_a_cudnn_jax_needs_through_its_extras_is_never_required_by_nothing(
    stack: TorchStack, new_venv: VenvFactory, make_wheel: WheelFactory
) -> None:
    """torch (CUDA 13) and jax[cuda12]; the cu12 cuDNN installed last holds torch's libcudnn
    path. It is jax's, through two extras: the fix reinstalls torch's cuDNN and keeps it."""
    venv = new_venv("jax-and-torch")
    pip_install(venv, *stack.coherent(), *jax_cuda12(make_wheel))
    pip_install(venv, stack.cudnn12())
    findings = stack_findings(venv)
    foreign = only(findings, "foreign-bytes")
    assert foreign.evidence["bytes_of"]["name"] == "nvidia-cudnn-cu12"
    assert "required by nothing" not in foreign.message
    assert (
        "nvidia-cudnn-cu12 is required by jax-cuda12-plugin (nvidia-cudnn-cu12<10.0,>=9.1 "
        "through its extra with-cuda, requested as jax-cuda12-plugin[with-cuda] by jax 0.4.35)"
        in foreign.message
    )
    assert foreign.fix is not None
    assert foreign.fix.steps == (
        (str(venv.python), "-m", "pip", "install", "--force-reinstall", "--no-deps",
         "nvidia-cudnn-cu13==9.24.0.43"),
    )  # fmt: skip
    mixed = only(findings, "cuda-mixed-major")
    assert "different CUDA majors" in mixed.message and mixed.fix is None


def test_shared_path_between_two_frameworks_cudnns_has_no_keeper(
    stack: TorchStack, new_venv: VenvFactory, make_wheel: WheelFactory
) -> None:
    """torch requires the cu13 cuDNN, jax the cu12 one, each framework built for its own:
    no evidence says which to keep, and the last installed is not evidence."""
    venv = new_venv("two-keepers")
    pip_install(venv, *stack.coherent(), *jax_cuda12(make_wheel))
    pip_install(venv, stack.cudnn12())
    env = build_environment(from_directory(venv.path, "test"))
    (shared,) = [f for f in check_files(env, RealDisk()) if f.code == "shared-path"]
    assert shared.evidence["on_disk_owner"] == "nvidia-cudnn-cu12"
    keep = shared.evidence["keep"]
    assert (keep["name"], keep["by"]) == (None, None)
    assert keep["reason"].startswith("each is required (")
    assert "nvidia-cudnn-cu13 by torch (nvidia-cudnn-cu13==9.24.0.43)" in keep["reason"]
    assert "nvidia-cudnn-cu12 by jax-cuda12-plugin" in keep["reason"]
    assert shared.fix is None


def test_tensorflow_and_cuda_keeps_its_cudnn_out_of_the_leftovers(
    stack: TorchStack, new_venv: VenvFactory, make_wheel: WheelFactory
) -> None:
    """``pip install 'tfish[and-cuda]'`` beside a CUDA 13 torch: tfish is no framework
    libdoctor models, so CUDA 12 is "a major no framework uses", but the cu12 cuDNN is
    tfish's through its extra (inferred: every requirement of and-cuda is installed)."""
    venv = new_venv("tfish")
    tfish = make_wheel(
        "tfish",
        "2.20.0",
        {"tfish/__init__.py": b""},
        requires=['nvidia-cudnn-cu12==9.10.2.21; extra == "and-cuda"'],
        extra_metadata=[("Provides-Extra", "and-cuda")],
    )
    pip_install(venv, *stack.coherent(), tfish)
    pip_install(venv, stack.cudnn12())
    findings = stack_findings(venv)
    mixed = only(findings, "cuda-mixed-major")
    (package,) = mixed.evidence["packages"]
    assert package["name"] == "nvidia-cudnn-cu12"
    assert package["required_by"] == ["tfish"] and not package["leftover"]
    assert not package["uninstalled_by_fix"] and mixed.fix is None
    assert "all of and-cuda's requirements are installed" in mixed.message
    foreign = only(findings, "foreign-bytes")
    assert foreign.fix is not None and "nvidia-cudnn-cu12 stays" in foreign.fix.note
    # The shared path: both required; torch's CUDA build says keep cu13, and the note says
    # what that leaves unmet.
    env = build_environment(from_directory(venv.path, "test"))
    (shared,) = [f for f in check_files(env, RealDisk()) if f.code == "shared-path"]
    keep = shared.evidence["keep"]
    assert (keep["name"], keep["by"]) == ("nvidia-cudnn-cu13", "cuda-build")
    assert keep["leaves_unmet"] == [
        "nvidia-cudnn-cu12 (required by tfish (nvidia-cudnn-cu12==9.10.2.21 through its extra "
        "and-cuda, inferred: tfish was requested directly and all of and-cuda's requirements "
        "are installed))"
    ]
    assert shared.fix is not None and "leaves unmet" in shared.fix.note


# --------------------------------------------------------------------------- real tier

TORCH_ENV = os.environ.get("LIBDOCTOR_TORCH_ENV") or "/work/envs/torchenv"


@pytest.fixture(scope="module")
def torch_env() -> Iterator[Path]:
    path = Path(TORCH_ENV)
    if not (path / "pyvenv.cfg").exists():
        pytest.skip(f"no torch environment at {path} (set LIBDOCTOR_TORCH_ENV)")
    yield path


@pytest.mark.realenv
def test_real_torch_env_has_no_stack_findings(torch_env: Path) -> None:
    assert stack_findings(Venv(torch_env)) == []


@pytest.mark.realenv
def test_real_torch_preload_replay(torch_env: Path) -> None:
    target = from_directory(torch_env, "test")
    env = build_environment(target)
    disk = RealDisk()
    analysis = analyse(env, disk, LoaderContext(probe_loader_system(), None, "/"))
    stack = analyse_stack(env, disk, analysis)
    (build,) = stack.builds
    assert (build.version, build.cuda) == ("2.14.1+cu130", "13.0")
    (choice,) = stack.choices.values()
    assert choice.model is not None and choice.model.id == "torch-2.14"
    (start,) = stack.starts.values()
    names = [os.path.basename(p) for p in start.preloaded]
    assert names == [
        "libcublasLt.so.13", "libcublas.so.13", "libcudnn.so.9", "libnvrtc.so.13",
        "libnvrtc-builtins.so.13.0", "libcudart.so.13", "libcupti.so.13", "libcufft.so.12",
        "libcurand.so.10", "libnvJitLink.so.13", "libcusparse.so.12", "libcusparseLt.so.0",
        "libcusolver.so.12", "libnccl.so.2", "libnvshmem_host.so.3", "libcufile.so.0",
    ]  # fmt: skip
    assert all(len(s.hits) == 1 for s in start.steps if s.outcome == "loaded")


def test_two_lost_distributions_are_one_cause_and_one_command_repairs_both(
    stack: TorchStack, new_venv: VenvFactory, libdoctor: Libdoctor
) -> None:
    """The seed's shape: files of two distributions gone, torch's import broken. check's
    text shows one cause with one command; JSON keeps every finding and names the cause;
    running that one command leaves a clean check."""
    venv = new_venv("two-lost")
    pip_install(venv, *stack.coherent())
    (venv.site_packages / "nvidia/cudnn/lib/libcudnn.so.9").unlink()
    # (not libcudart: this machine's ld.so.cache has a system CUDA 13 runtime)
    (venv.site_packages / "nvidia/cu13/lib/libcusparse.so.12").unlink()
    text = libdoctor.check(venv.path, env={"NO_COLOR": "1"})
    assert text.rc == 1, text.describe()
    assert "import torch fails: 2 distributions lost their files" in text.stdout
    assert text.stdout.count("fix: ") == 1, text.stdout
    doc = libdoctor.check(venv.path, "--json").json()
    (cause,) = [c for c in doc["causes"] if c["title"]]
    assert len(cause["findings"]) >= 4
    argv = cause["fix"]["argv"]
    assert sorted(argv[-2:]) == ["nvidia-cudnn-cu13==9.24.0.43", "nvidia-cusparse==12.6.3.3"]
    done = subprocess.run(argv, env=pip_env([stack.dest]), capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    after = libdoctor.check(venv.path, "--json")
    assert after.rc == 0, after.describe()
