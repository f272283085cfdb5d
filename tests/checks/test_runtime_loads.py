"""Runtime loads as findings (checks.runtime), on real venvs with gcc-built libraries.

cudnnlike is cuDNN 9's shape: ``libcudnn.so.9`` (DT_RPATH ``$ORIGIN``) loads its
sublibraries by name at run time, ``libcudnn_graph.so.9`` loads the engines; nothing has
them as DT_NEEDED, so ``import torchlike`` works whatever is gone. plugpkg's library holds
the name of a plugin its own wheel ships (``libplug_extra.so.1``) as a read-only string.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from support.cc import lib_bytes, require_gcc
from support.checkdoc import by_code
from support.venvs import Libdoctor, Venv, VenvFactory, pip_install
from support.wheels import WheelFactory, extension_suffix, native_tag

EXT = extension_suffix()
Doc = dict[str, Any]
CUDNN = "9.24.0.43"
SUBS = (
    "graph", "ops", "cnn", "adv",
    "engines_precompiled", "engines_runtime_compiled", "heuristic",
)  # fmt: skip


@pytest.fixture
def cudnn_venv(make_wheel: WheelFactory, new_venv: VenvFactory, tmp_path: Path) -> Venv:
    require_gcc()
    build = tmp_path / "build"
    lib = "nvidia/cudnn/lib"
    files = {f"{lib}/libcudnn.so.9": lib_bytes(build, "libcudnn.so.9", soname="libcudnn.so.9",
                                           rpath="$ORIGIN")}  # fmt: skip
    for sub in SUBS:
        name = f"libcudnn_{sub}.so.9"
        files[f"{lib}/{name}"] = lib_bytes(build, name, soname=name, runpath="$ORIGIN")
    cudnn = make_wheel("nvidia-cudnn-cu13", CUDNN, files)
    torchlike = make_wheel(
        "torchlike",
        "1.0",
        {
            "torchlike/__init__.py": b"from torchlike import _C\n",
            f"torchlike/_C{EXT}": lib_bytes(
                build, f"_C{EXT}", needed=["libcudnn.so.9"], rpath="$ORIGIN/../nvidia/cudnn/lib"
            ),
        },
        requires=[f"nvidia-cudnn-cu13=={CUDNN}"],
        tag=native_tag(),
    )
    venv = new_venv("cudnnlike")
    pip_install(venv, cudnn, torchlike)
    return venv


def _drop_record_row(venv: Venv, dist_info: str, needle: str) -> None:
    record = venv.dist_info(dist_info) / "RECORD"
    kept = [line for line in record.read_text().splitlines(True) if needle not in line]
    record.unlink()
    record.write_text("".join(kept))


def test_a_healthy_cudnn_has_no_runtime_finding(cudnn_venv: Venv, libdoctor: Libdoctor) -> None:
    doc = libdoctor.check(cudnn_venv.path, "--json", "--all").json()
    assert doc["findings"] == [], doc["findings"]


@pytest.mark.parametrize("row", ["kept", "removed"])
def test_a_lost_sublibrary_is_an_error_naming_cudnn(
    row: str, cudnn_venv: Venv, libdoctor: Libdoctor
) -> None:
    (cudnn_venv.site_packages / "nvidia/cudnn/lib/libcudnn_graph.so.9").unlink()
    if row == "removed":
        _drop_record_row(cudnn_venv, f"nvidia_cudnn_cu13-{CUDNN}.dist-info", "libcudnn_graph.so.9")
    run = libdoctor.check(cudnn_venv.path, "--json")
    assert run.rc == 1, run.describe()
    (missing,) = by_code(run.json())["runtime-library-missing"]
    assert missing["evidence"]["library"] == "libcudnn_graph.so.9"
    assert missing["evidence"]["loaded_by"].endswith("nvidia/cudnn/lib/libcudnn.so.9")
    assert missing["distribution"]["name"] == "nvidia-cudnn-cu13"
    assert "cuDNN fails at its first use" in missing["message"]
    assert missing["fix"]["argv"][-1] == f"nvidia-cudnn-cu13=={CUDNN}"


def test_an_engine_the_graph_library_loads_is_followed(
    cudnn_venv: Venv, libdoctor: Libdoctor
) -> None:
    (cudnn_venv.site_packages / "nvidia/cudnn/lib/libcudnn_heuristic.so.9").unlink()
    (missing,) = by_code(libdoctor.check(cudnn_venv.path, "--json").json())[
        "runtime-library-missing"
    ]
    assert missing["evidence"]["loaded_by"].endswith("libcudnn_graph.so.9")


def test_a_sublibrary_from_outside_the_env_is_a_warning(
    cudnn_venv: Venv, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    graph = cudnn_venv.site_packages / "nvidia/cudnn/lib/libcudnn_graph.so.9"
    system = tmp_path / "system-cudnn"
    system.mkdir()
    shutil.copy(graph, system / graph.name)
    graph.unlink()
    _drop_record_row(cudnn_venv, f"nvidia_cudnn_cu13-{CUDNN}.dist-info", "libcudnn_graph.so.9")
    run = libdoctor.check(cudnn_venv.path, "--json", env={"LD_LIBRARY_PATH": str(system)})
    found = by_code(run.json())
    (outside,) = found["runtime-library-outside"]
    assert outside["severity"] == "warning"
    assert outside["evidence"]["resolved"] == str(system / graph.name)
    assert "runtime-library-missing" not in found
    assert run.rc == 0, run.describe()


@pytest.fixture
def plug_venv(make_wheel: WheelFactory, new_venv: VenvFactory, tmp_path: Path) -> Venv:
    require_gcc()
    build = tmp_path / "build"
    plug = make_wheel(
        "plugpkg",
        "2.0",
        {
            "plugpkg/__init__.py": b"from plugpkg import _ext\n",
            f"plugpkg/_ext{EXT}": lib_bytes(
                build, f"_ext{EXT}", needed=["libplug.so.1"], rpath="$ORIGIN/lib"
            ),
            "plugpkg/lib/libplug.so.1": lib_bytes(
                build,
                "libplug.so.1",
                soname="libplug.so.1",
                rpath="$ORIGIN",
                strings=["libplug_extra.so.1"],
            ),
            "plugpkg/lib/libplug_extra.so.1": lib_bytes(
                build, "libplug_extra.so.1", soname="libplug_extra.so.1"
            ),
        },
        tag=native_tag(),
    )
    venv = new_venv("plugpkg")
    pip_install(venv, plug)
    return venv


def test_a_plugin_named_in_strings_is_an_error_only_when_lost(
    plug_venv: Venv, libdoctor: Libdoctor
) -> None:
    assert libdoctor.check(plug_venv.path, "--json", "--all").json()["findings"] == []
    (plug_venv.site_packages / "plugpkg/lib/libplug_extra.so.1").unlink()
    found = by_code(libdoctor.check(plug_venv.path, "--json").json())
    (missing,) = found["runtime-library-missing"]
    assert missing["evidence"]["how"] == "dlopen by name at run time (its read-only strings)"
    assert missing["fix"]["argv"][-1] == "plugpkg==2.0"
    _drop_record_row(plug_venv, "plugpkg-2.0.dist-info", "libplug_extra.so.1")
    assert "runtime-library-missing" not in by_code(
        libdoctor.check(plug_venv.path, "--json").json()
    )


def test_why_shows_the_runtime_edge(cudnn_venv: Venv, libdoctor: Libdoctor) -> None:
    run = libdoctor("why", "libcudnn_graph.so.9", cudnn_venv.path)
    assert run.rc == 0, run.describe()
    assert "at run time" in run.stdout, run.stdout
