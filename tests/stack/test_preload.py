"""torch's preload models: checked against the text, replayed in the loader emulation.

The text checks run on ``TORCH_INIT`` (torch 2.14's flow, as the fake torch ships it), on
mutations of it and on ``TORCH_INITS`` (one text per shape the preload has had since 2.4);
the replay runs on gcc-built libraries laid out like a site-packages dir.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from libdoctor.disk.stat import FileState, RealDisk
from libdoctor.loader.model import Process, SearchConfig
from libdoctor.loader.search import Loader
from libdoctor.loader.system import LoaderSystem
from libdoctor.stack.frameworks import FrameworkBuild, Reader
from libdoctor.stack.preload import TorchStart, dlopen_into, glob_dir, start_torch
from libdoctor.stack.torchsource import choose_model, extract_preload, verify_model
from libdoctor.stack.torchversions import (
    MODELS,
    TORCH_2_4,
    TORCH_2_6,
    TORCH_2_7,
    TORCH_2_9,
    TORCH_2_11,
    TORCH_2_14,
    PreloadModel,
)
from support.cc import compile_lib, require_gcc
from support.dists import fake_dist
from support.stackfake import TORCH_INIT, TORCH_INITS

# --------------------------------------------------------------------------- the text


def test_torch_2_14_flow_matches_its_model() -> None:
    found = extract_preload(TORCH_INIT)
    assert found.libs == TORCH_2_14.libs
    assert found.optional_libs == (("nvtx", "libnvToolsExt.so.*[0-9]"),)
    assert found.dirs == ("nvidia/{folder}/lib", "nvidia/cu{cuda_major}/lib", "{folder}/lib")
    assert verify_model(TORCH_2_14, found) == []


@pytest.mark.parametrize(
    ("old", "new", "difference"),
    [
        ('("cudnn", "libcudnn.so.*[0-9]"),\n', "", "the cuda_libs list differs"),
        ('("nccl", "libnccl.so.*[0-9]")', '("nccl", "libnccl.so.2")', "the cuda_libs list differs"),
        ('"libcudart.so" not in _maps', '"libcudart" not in _maps', "no longer contains"),
        ("_preload_cuda_deps(required=False)", "pass", "no longer contains"),
        ('f"cu{maj_cuda_version}", ', "", "the searched directories differ"),
        ('_preload_cuda_lib("nvtx", "libnvToolsExt.so.*[0-9]", required=False)', "pass",
         "the optional preloads differ"),
        ("def _load_global_deps", "def _load_deps", "functions not found: _load_global_deps"),
        ("lib_path = None", "lib_path = (", "does not parse"),
    ],
)  # fmt: skip
def test_changed_text_is_not_the_model(old: str, new: str, difference: str) -> None:
    assert old in TORCH_INIT
    differences = verify_model(TORCH_2_14, extract_preload(TORCH_INIT.replace(old, new, 1)))
    assert any(difference in d for d in differences), differences


def test_column_zero_text_inside_a_function_falls_back_to_a_full_parse() -> None:
    text = TORCH_INIT.replace(
        "    lib_path = None\n",
        '    """Preloads.\n\nA column-0 docstring line.\n"""\n    lib_path = None\n',
        1,
    )
    assert verify_model(TORCH_2_14, extract_preload(text)) == []


def _build(site: Path, version: str, cuda: str | None = "13.0") -> FrameworkBuild:
    dist = fake_dist("torch", version.split("+")[0], site=str(site))
    return FrameworkBuild("torch", dist, "torch", version, cuda, "torch/version.py")


def _reader(text: str) -> Reader:
    return lambda path: text.encode() if path.endswith("torch/__init__.py") else None


@pytest.mark.parametrize(
    ("version", "text", "model", "reason"),
    [
        ("2.14.1+cu130", TORCH_INIT, "torch-2.14", None),
        ("2.14.0+cu128", TORCH_INIT, "torch-2.14", None),
        ("2.16.0+cu132", TORCH_INIT, None, "matches model torch-2.14, known for other versions"),
        ("2.3.1+cu121", TORCH_INITS["2.4"], None, "matches model torch-2.4, known for other"),
        ("2.9.1+cu128", "import ctypes\n", None, "does not match model torch-2.9"),
        ("2.9.1+cu128", TORCH_INIT, None, "does not match model torch-2.9"),
        ("2.14.1+cu130", "import ctypes\n", None, "does not match model torch-2.14"),
        ("banana", TORCH_INIT, None, "not a valid version"),
    ],
)
def test_choose_model(version: str, text: str, model: str | None, reason: str | None) -> None:
    choice = choose_model(_build(Path("/s"), version), _reader(text))
    assert (choice.model.id if choice.model else None) == model
    if reason is not None:
        assert choice.reason is not None and reason in choice.reason


def test_unreadable_init_is_a_reason() -> None:
    choice = choose_model(_build(Path("/s"), "2.14.1"), lambda path: None)
    assert choice.model is None and choice.reason == "torch/__init__.py cannot be read"


# The fixture of each shape, the release its lists are from, and that release's model.
SHAPES = [
    ("2.4", "2.4.1+cu121", "torch-2.4"),
    ("2.6", "2.6.0+cu124", "torch-2.6"),
    ("2.7", "2.8.0+cu128", "torch-2.8"),
    ("2.9", "2.9.1+cu128", "torch-2.9"),
    ("2.10", "2.13.0+cu130", "torch-2.11"),
    ("2.14", "2.14.1+cu130", "torch-2.14"),
]


@pytest.mark.parametrize(("shape", "version", "model_id"), SHAPES)
def test_each_shape_is_read_and_chosen(shape: str, version: str, model_id: str) -> None:
    choice = choose_model(_build(Path("/s"), version), _reader(TORCH_INITS[shape]))
    (table,) = [m for m in MODELS if m.id == model_id]
    assert choice.model == table  # the text's lists are those the release shipped
    assert choice.lists_from == "torch/__init__.py" and choice.list_differences == ()
    found = extract_preload(TORCH_INITS[shape])
    assert [m.id for m in MODELS if not verify_model(m, found)] == [model_id]


NVRTC = ("cuda_nvrtc", "libnvrtc.so.*[0-9]")
NVJITLINK = ("nvjitlink", "libnvJitLink.so.*[0-9]")
NVTX = (("nvtx", "libnvToolsExt.so.*[0-9]"),)
DIRS_CU = ("nvidia/{folder}/lib", "nvidia/cu{cuda_major}/lib", "{folder}/lib")


@pytest.mark.parametrize(
    ("shape", "dirs", "needle", "mapped", "optional", "from_major", "first", "last"),
    [
        ("2.4", ("nvidia/{folder}/lib",), None, None, (), (), "cublas", "nvtx"),
        ("2.6", ("nvidia/{folder}/lib", "{folder}/lib"), "nvidia/cuda_runtime/lib/libcudart.so",
         (NVRTC, NVJITLINK), (), (), "cublas", "nvtx"),
        ("2.7", ("nvidia/{folder}/lib", "{folder}/lib"), "nvidia/cuda_runtime/lib/libcudart.so",
         (NVRTC, NVJITLINK), (), ((12, "cufile", "libcufile.so.*[0-9]"),), "cublas", "nccl"),
        ("2.9", DIRS_CU, "libcudart.so",
         (NVRTC, ("cuda_nvrtc", "libnvrtc-builtins.so.*[0-9]"), NVJITLINK), NVTX, (),
         "cublas", "cufile"),
        ("2.10", DIRS_CU, "libcudart.so", None, NVTX, (), "cublas", "cufile"),
    ],
)  # fmt: skip
def test_what_each_shape_says(
    shape: str,
    dirs: tuple[str, ...],
    needle: str | None,
    mapped: tuple[tuple[str, str], ...] | None,
    optional: tuple[tuple[str, str], ...],
    from_major: tuple[tuple[int, str, str], ...],
    first: str,
    last: str,
) -> None:
    found = extract_preload(TORCH_INITS[shape])
    assert found.problem is None and found.libs is not None
    assert (found.dirs, found.trigger_needle, found.mapped_libs) == (dirs, needle, mapped)
    assert (found.optional_libs, found.libs_from_major) == (optional, from_major)
    assert (found.libs[0][0], found.libs[-1][0]) == (first, last)


def test_the_text_s_list_is_replayed_not_the_table_s() -> None:
    """A 2.15 whose text still lists cuRAND (2.15.0 dropped it): the text is what runs."""
    choice = choose_model(_build(Path("/s"), "2.15.0+cu132"), _reader(TORCH_INIT))
    assert choice.model is not None and choice.model.id == "torch-2.15"
    assert ("curand", "libcurand.so.*[0-9]") in choice.model.libs
    assert choice.list_differences == ("the cuda_libs list differs",)


def test_a_list_the_text_does_not_spell_out_comes_from_the_model() -> None:
    text = TORCH_INIT.replace("cuda_libs: list = [", "cuda_libs: list = _known() or [", 1)
    choice = choose_model(_build(Path("/s"), "2.14.1+cu130"), _reader(text))
    assert choice.model == TORCH_2_14 and choice.lists_from == "model"
    assert "no cuda_libs list of (folder, glob) pairs" in choice.list_differences


def test_cufile_only_for_cuda_12_and_later() -> None:
    cufile = ("cufile", "libcufile.so.*[0-9]")
    assert cufile not in TORCH_2_7.cuda_libs(11) and cufile not in TORCH_2_7.cuda_libs(None)
    assert TORCH_2_7.cuda_libs(12)[-1] == cufile == TORCH_2_7.cuda_libs(13)[-1]


# --------------------------------------------------------------------------- glob


class ListingDisk:
    """A Disk whose listings come in a chosen (unsorted) order."""

    def __init__(self, listings: dict[str, tuple[str, ...]]) -> None:
        self.listings = listings

    def stat(self, path: str) -> FileState:
        return FileState(exists=False)

    def listdir(self, path: str) -> tuple[str, ...]:
        return self.listings.get(path, ())

    @property
    def removed(self) -> frozenset[str]:
        return frozenset()


@pytest.mark.parametrize(
    ("names", "pattern", "hits"),
    [
        (("libcudnn.so.9", "libcudnn_ops.so.9"), "libcudnn.so.*[0-9]", ["libcudnn.so.9"]),
        (("libnvrtc-builtins.so.13.0",), "libnvrtc-builtins.so.*[0-9]",
         ["libnvrtc-builtins.so.13.0"]),
        (("libcublasLt.so.13", "libcublas.so.13"), "libcublas.so.*[0-9]", ["libcublas.so.13"]),
        (("libcudnn.so", "libcudnn.so.9.x"), "libcudnn.so.*[0-9]", []),
        # readdir order, not sorted order: glob.glob returns what the directory lists.
        (("libx.so.2", "libx.so.10", "libx.so.1"), "libx.so.*[0-9]",
         ["libx.so.2", "libx.so.10", "libx.so.1"]),
        ((".libx.so.1", "libx.so.1"), "libx.so.*[0-9]", ["libx.so.1"]),
    ],
)  # fmt: skip
def test_glob_dir(names: tuple[str, ...], pattern: str, hits: list[str]) -> None:
    disk = ListingDisk({"/d": names})
    assert glob_dir(disk, "/d", pattern) == tuple(f"/d/{h}" for h in hits)


def test_glob_dir_agrees_with_glob_on_disk(tmp_path: Path) -> None:
    import glob

    for name in ("libx.so.1", "libx.so.10", "libx.so.2", "libx.so", ".libx.so.3", "libx.so.4a"):
        (tmp_path / name).write_bytes(b"")
    pattern = "libx.so.*[0-9]"
    assert list(glob_dir(RealDisk(), str(tmp_path), pattern)) == glob.glob(
        os.path.join(str(tmp_path), pattern)
    )


# --------------------------------------------------------------------------- the replay


def lib(
    path: Path,
    soname: str | None = None,
    needed: Iterable[str] = (),
    rpath: str | None = None,
    runpath: str | None = None,
) -> Path:
    return compile_lib(
        path.parent,
        path.name,
        soname=soname or path.name,
        needed=list(needed),
        rpath=rpath,
        runpath=runpath,
    )


def replay(
    site: Path, system: LoaderSystem, model: PreloadModel = TORCH_2_14, cuda: str | None = "13.0"
) -> tuple[Loader, Process, TorchStart]:
    loader = Loader(SearchConfig(system, cwd=str(site)))
    process = loader.start_interpreter(sys.executable)
    build = _build(site, "2.14.1+cu130", cuda)
    start = start_torch(loader, process, model, build, [str(site)], RealDisk())
    return loader, process, start


RPATH = "$ORIGIN/../../nvidia/cudnn/lib:$ORIGIN/../../nvidia/cu13/lib"


def test_no_cudart_mapped_no_preload(tmp_path: Path, system: LoaderSystem) -> None:
    require_gcc()
    lib(tmp_path / "torch/lib/libtorch_global_deps.so", rpath=RPATH)
    lib(tmp_path / "nvidia/cudnn/lib/libcudnn.so.9")
    _, _, start = replay(tmp_path, system)
    assert not start.ran and start.steps == () and start.error is None
    assert "not mapped" in start.why


def test_preload_order_and_a_failure_ends_the_loop(tmp_path: Path, system: LoaderSystem) -> None:
    require_gcc()
    lib(tmp_path / "torch/lib/libtorch_global_deps.so", needed=["libcudart.so.13"], rpath=RPATH)
    cu13 = tmp_path / "nvidia/cu13/lib"
    lib(cu13 / "libcudart.so.13")
    lib(cu13 / "libcublasLt.so.13")
    lib(cu13 / "libcublas.so.13", needed=["libcublasLt.so.13"], runpath="$ORIGIN")
    # cuDNN needs a library nobody ships: its CDLL raises, the loop ends, torch swallows it.
    lib(tmp_path / "nvidia/cudnn/lib/libcudnn.so.9", needed=["libnowhere.so.1"])
    lib(cu13 / "libcusparse.so.12")
    _, _, start = replay(tmp_path, system)
    assert start.ran and start.error is None
    outcomes = [(s.folder, s.pattern.split(".")[0], s.outcome) for s in start.steps]
    assert outcomes[:4] == [
        ("cublas", "libcublasLt", "loaded"),
        ("cublas", "libcublas", "loaded"),
        ("cudnn", "libcudnn", "failed"),
        ("cuda_nvrtc", "libnvrtc", "not-run"),
    ]
    assert all(o == "not-run" for _, _, o in outcomes[3:])
    failed = start.steps[2]
    assert failed.error is not None and "libnowhere.so.1" in failed.error
    names = {o.soname for o in start.process.objects}
    assert {"libcublas.so.13", "libcublasLt.so.13", "libcudart.so.13"} <= names
    assert "libcudnn.so.9" not in names and "libcusparse.so.12" not in names


def test_global_deps_error_makes_every_preload_required(
    tmp_path: Path, system: LoaderSystem
) -> None:
    require_gcc()
    # A soname no ld.so.cache has (this machine's caches /usr/local/cuda-13.0/lib).
    lib(tmp_path / "torch/lib/libtorch_global_deps.so", needed=["libcudart.so.99"], rpath="$ORIGIN")
    _, process, start = replay(tmp_path, system)
    assert start.ran
    assert start.error == "ValueError: libcublasLt.so.*[0-9] not found in the system path"
    assert start.process is process


def test_global_deps_error_preload_then_retry(tmp_path: Path, system: LoaderSystem) -> None:
    require_gcc()
    lib(tmp_path / "torch/lib/libtorch_global_deps.so", needed=["libcudart.so.99"], rpath="$ORIGIN")
    lib(tmp_path / "nvidia/cuda_runtime/lib/libcudart.so.99")
    model = dataclasses.replace(
        TORCH_2_14, libs=(("cuda_runtime", "libcudart.so.*[0-9]"),), optional_libs=()
    )
    _, _, start = replay(tmp_path, system, model)
    assert start.error is None and len(start.attempts) == 2
    retry = start.attempts[1]
    (cudart,) = [r for r in retry.resolutions if r.name == "libcudart.so.99"]
    assert cudart.via == "loaded"
    assert cudart.path == str(tmp_path / "nvidia/cuda_runtime/lib/libcudart.so.99")


def test_other_global_deps_errors_are_raised(tmp_path: Path, system: LoaderSystem) -> None:
    require_gcc()
    lib(tmp_path / "torch/lib/libtorch_global_deps.so", needed=["libgomp-x.so.1"])
    _, _, start = replay(tmp_path, system)
    assert not start.ran
    assert start.error is not None
    assert start.error.startswith("OSError: libgomp-x.so.1: cannot open")


def test_cpu_build_skips_the_cu_directory(tmp_path: Path, system: LoaderSystem) -> None:
    require_gcc()
    lib(tmp_path / "torch/lib/libtorch_global_deps.so", needed=["libcudart.so.13"], rpath=RPATH)
    lib(tmp_path / "nvidia/cu13/lib/libcudart.so.13")
    lib(tmp_path / "cusparse/lib/libcusparse.so.12")  # p/<folder>/lib, the third template
    _, _, start = replay(tmp_path, system, cuda=None)
    loaded = {s.pattern: s.hits for s in start.steps if s.outcome == "loaded"}
    assert loaded == {"libcusparse.so.*[0-9]": (str(tmp_path / "cusparse/lib/libcusparse.so.12"),)}


def test_dlopen_into_keeps_objects_for_later_requests(tmp_path: Path, system: LoaderSystem) -> None:
    require_gcc()
    a = lib(tmp_path / "a/libA.so.1")
    b = lib(tmp_path / "b/libB.so", needed=["libA.so.1"])
    loader = Loader(SearchConfig(system, cwd=str(tmp_path)))
    process = loader.start_interpreter(sys.executable)
    alone = loader.import_extension(process, str(b))
    assert [r.status for r in alone.resolutions if r.name == "libA.so.1"] == ["not_found"]
    after, closure = dlopen_into(loader, process, str(a))
    assert closure.ok and len(after.objects) == len(process.objects) + 1
    with_a = loader.import_extension(after, str(b))
    (res,) = [r for r in with_a.resolutions if r.name == "libA.so.1"]
    assert (res.via, res.path) == ("loaded", str(a))
    failed_process, failed = dlopen_into(loader, process, str(b))
    assert not failed.ok and failed_process is process


def start(
    site: Path,
    system: LoaderSystem,
    model: PreloadModel,
    sys_path: Iterable[Path] = (),
    cuda: str = "12.8",
) -> TorchStart:
    loader = Loader(SearchConfig(system, cwd=str(site)))
    process = loader.start_interpreter(sys.executable)
    build = _build(site, "2.9.1+cu128", cuda)
    paths = [str(p) for p in sys_path] or [str(site)]
    return start_torch(loader, process, model, build, paths, RealDisk())


def loaded(start: TorchStart) -> dict[str, tuple[str, ...]]:
    return {s.pattern: s.hits for s in start.steps if s.outcome == "loaded"}


CUDART12_RPATH = "$ORIGIN/../../nvidia/cuda_runtime/lib"


def test_before_2_6_only_an_error_preloads(tmp_path: Path, system: LoaderSystem) -> None:
    require_gcc()
    lib(
        tmp_path / "torch/lib/libtorch_global_deps.so",
        needed=["libcudart.so.12"],
        rpath=CUDART12_RPATH,
    )
    lib(tmp_path / "nvidia/cuda_runtime/lib/libcudart.so.12")
    lib(tmp_path / "nvidia/cublas/lib/libcublas.so.12")
    done = start(tmp_path, system, TORCH_2_4)
    assert not done.ran and done.steps == () and done.error is None
    assert "only when libtorch_global_deps fails" in done.why
    assert start(tmp_path, system, TORCH_2_9).ran  # 2.9 preloads once libcudart is mapped


def test_search_directories_by_version(tmp_path: Path, system: LoaderSystem) -> None:
    """Up to 2.6 an entry without nvidia/ is skipped, and 2.6 looks in p/<folder>/lib only
    when p/nvidia/<folder>/lib has no hit; 2.7 on join the hits of both."""
    require_gcc()
    site, other = tmp_path / "site", tmp_path / "other"
    lib(
        site / "torch/lib/libtorch_global_deps.so", needed=["libcudart.so.12"], rpath=CUDART12_RPATH
    )
    lib(site / "nvidia/cuda_runtime/lib/libcudart.so.12")
    lib(site / "nvidia/cusparse/lib/libcusparse.so.12")
    lib(site / "cusparse/lib/libcusparse.so.12")
    lib(other / "cusparse/lib/libcusparse.so.12")
    cusparse = (("cusparse", "libcusparse.so.*[0-9]"),)
    v26 = dataclasses.replace(TORCH_2_6, mapped_libs=cusparse)
    v27 = dataclasses.replace(TORCH_2_7, mapped_libs=cusparse)
    pattern = "libcusparse.so.*[0-9]"
    only_site = loaded(start(site, system, v26, [other, site]))[pattern]
    assert only_site == (str(site / "nvidia/cusparse/lib/libcusparse.so.12"),)
    assert loaded(start(site, system, v27, [site]))[pattern] == (
        str(site / "nvidia/cusparse/lib/libcusparse.so.12"),
        str(site / "cusparse/lib/libcusparse.so.12"),
    )
    assert loaded(start(site, system, v27, [other, site]))[pattern] == (
        str(other / "cusparse/lib/libcusparse.so.12"),
    )
    (other / "nvidia").mkdir()
    assert loaded(start(site, system, v26, [other, site]))[pattern] == (
        str(other / "cusparse/lib/libcusparse.so.12"),
    )


def test_the_trigger_path_by_version(tmp_path: Path, system: LoaderSystem) -> None:
    """2.6-2.8 trigger on nvidia/cuda_runtime/lib's libcudart only; 2.9-2.13 end the loop at
    the first library no directory has (torch swallows the ValueError); 2.14 skips it."""
    require_gcc()
    rpath = "$ORIGIN/../../nvidia/cu12/lib"
    lib(tmp_path / "torch/lib/libtorch_global_deps.so", needed=["libcudart.so.12"], rpath=rpath)
    lib(tmp_path / "nvidia/cu12/lib/libcudart.so.12")
    lib(tmp_path / "nvidia/cuda_nvrtc/lib/libnvrtc.so.12")
    lib(tmp_path / "nvidia/nvjitlink/lib/libnvJitLink.so.12")
    cudart = str(tmp_path / "nvidia/cu12/lib/libcudart.so.12")

    v26 = start(tmp_path, system, TORCH_2_6)
    assert not v26.ran and "nvidia/cuda_runtime/lib/libcudart.so is not mapped" in v26.why

    v29 = start(tmp_path, system, TORCH_2_9)
    assert v29.ran and v29.error is None
    assert [s.outcome for s in v29.steps] == ["loaded", "no-match", "not-run"]
    assert (
        v29.steps[1].error == "ValueError: libnvrtc-builtins.so.*[0-9] not found in the system path"
    )

    v211 = start(tmp_path, system, TORCH_2_11)
    assert v211.ran and v211.error is None and loaded(v211) == {}
    assert v211.steps[0].outcome == "no-match" and v211.steps[0].pattern.startswith("libcublasLt")

    v214 = start(tmp_path, system, TORCH_2_14)
    assert v214.ran and v214.error is None
    assert set(loaded(v214)) == {
        "libnvrtc.so.*[0-9]", "libcudart.so.*[0-9]", "libnvJitLink.so.*[0-9]"
    }  # fmt: skip
    assert loaded(v214)["libcudart.so.*[0-9]"] == (cudart,)


# --------------------------------------------------------------------------- real tier


@pytest.mark.realenv
def test_real_torch_init_matches_the_model() -> None:
    env = Path(os.environ.get("LIBDOCTOR_TORCH_ENV") or "/work/envs/torchenv")
    inits = sorted(env.glob("lib/python3*/site-packages/torch/__init__.py"))
    if not inits:
        pytest.skip(f"no torch in {env}")
    assert verify_model(TORCH_2_14, extract_preload(inits[0].read_text())) == []
