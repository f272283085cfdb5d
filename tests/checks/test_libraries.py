"""Loader truth end to end: real wheels carrying gcc-built libraries, installed by real pip.

A "torch-like" extension module finds ``libcudnn.so.9`` through its RPATH in a directory
another wheel owns, the way torch finds nvidia-cudnn. Then the states users hit are made
for real, and ``check``, ``why`` and ``tree`` are read back.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sysconfig
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from support.cc import compile_lib, require_gcc
from support.venvs import Libdoctor, LibdoctorRun, Venv, VenvFactory, pip_install
from support.wheels import WheelFactory, extension_suffix

Doc = dict[str, Any]
EXT = extension_suffix()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_gcc()
    return tmp_path_factory.mktemp("libs")


def so(built: Path, name: str, **kwargs: Any) -> bytes:
    directory = built / name.replace("/", "_")
    directory.mkdir(exist_ok=True)
    return compile_lib(directory, os.path.basename(name), **kwargs).read_bytes()


def findings(run: LibdoctorRun, code: str | None = None) -> list[Doc]:
    doc = run.json()
    return [f for f in doc["findings"] if code is None or f["code"] == code]


def install(venv: Venv, *wheels: Path) -> None:
    pip_install(venv, *wheels)


@pytest.fixture
def seed(
    built: Path, new_venv: VenvFactory, make_wheel: WheelFactory
) -> tuple[Venv, Mapping[str, Path]]:
    """cudnn-a owns nvidia/cudnn/lib/libcudnn.so.9; torchy's extension finds it by RPATH."""
    venv = new_venv("seed")
    cudnn = make_wheel(
        "cudnn-a",
        "9.1",
        {"nvidia/cudnn/lib/libcudnn.so.9": so(built, "a/libcudnn.so.9", soname="libcudnn.so.9")},
    )
    module = so(
        built,
        f"torchy/_C{EXT}",
        needed=["libcudnn.so.9"],
        rpath="$ORIGIN/../nvidia/cudnn/lib",
    )
    torchy = make_wheel(
        "torchy",
        "2.0",
        {"torchy/__init__.py": b"", f"torchy/_C{EXT}": module},
        requires=["cudnn-a==9.1"],
    )
    install(venv, cudnn, torchy)
    return venv, {
        "lib": venv.site_packages / "nvidia/cudnn/lib/libcudnn.so.9",
        "module": venv.site_packages / f"torchy/_C{EXT}",
    }


def test_healthy_env_has_no_library_findings(
    seed: tuple[Venv, Mapping[str, Path]], libdoctor: Libdoctor
) -> None:
    venv, _ = seed
    run = libdoctor.check(venv.path, "--json", "--all")
    assert run.rc == 0, run.describe()
    assert findings(run) == []


def test_deleted_library_is_unresolved_and_names_owner_and_fix(
    seed: tuple[Venv, Mapping[str, Path]], libdoctor: Libdoctor
) -> None:
    venv, paths = seed
    paths["lib"].unlink()
    run = libdoctor.check(venv.path, "--json")
    assert run.rc == 1
    (unresolved,) = findings(run, "unresolved-library")
    assert unresolved["severity"] == "error"
    assert unresolved["distribution"] == {"name": "torchy", "version": "2.0"}
    assert str(paths["module"]) in unresolved["paths"]
    evidence = unresolved["evidence"]
    assert evidence["library"] == "libcudnn.so.9"
    assert evidence["modules"] == ["torchy._C"]
    (request,) = evidence["requests"]
    assert request["requester_owner"] == [{"name": "torchy", "version": "2.0"}]
    tried = [(s["source"], os.path.normpath(s["directory"])) for s in request["searched"]]
    assert tried[0] == ("rpath", str(paths["lib"].parent))
    assert [s for s, _ in tried[1:]] and all(s == "default" for s, _ in tried[1:])
    assert evidence["shipped_by"] == [
        {"name": "cudnn-a", "version": "9.1", "path": str(paths["lib"]), "present": False}
    ]
    assert unresolved["fix"]["argv"][-1] == "cudnn-a==9.1"
    assert "--force-reinstall" in unresolved["fix"]["argv"]
    # torchy requires cudnn-a==9.1, still "installed" without its library: a phantom.
    codes = {f["code"] for f in findings(run)}
    assert codes == {"unresolved-library", "missing-files", "requirement-phantom"}
    (phantom,) = findings(run, "requirement-phantom")
    assert phantom["fix"]["argv"] == unresolved["fix"]["argv"]


def test_truncated_library_is_found_and_broken_not_missing(
    seed: tuple[Venv, Mapping[str, Path]], libdoctor: Libdoctor
) -> None:
    """glibc stops at a file it found but cannot load ("cannot read file data"): the finding
    says found-and-broken at that path, and reinstalling its owner is the fix."""
    venv, paths = seed
    data = paths["lib"].read_bytes()
    paths["lib"].unlink()  # a new inode: the wheel's bytes elsewhere stay untouched
    paths["lib"].write_bytes(data[:300])
    run = libdoctor.check(venv.path, "--json")
    (unresolved,) = findings(run, "unresolved-library")
    assert f"is found at {paths['lib']} but cannot be loaded" in unresolved["message"]
    assert "not on the search path" not in unresolved["message"]
    assert "cudnn-a 9.1's; reinstalling restores it" in unresolved["message"]
    assert unresolved["fix"]["argv"][-1] == "cudnn-a==9.1"
    assert {f["code"] for f in findings(run)} == {
        "unresolved-library",
        "elf-invalid",
        "altered-files",
    }


def test_why_walks_the_search_and_tree_shows_owners(
    seed: tuple[Venv, Mapping[str, Path]], libdoctor: Libdoctor
) -> None:
    venv, paths = seed
    why = libdoctor("why", "libcudnn.so.9", venv.path)
    assert why.rc == 0, why.describe()
    assert "found: " + str(paths["lib"].parent / "..") not in why.stdout
    assert "rpath of torchy/_C" in why.stdout and "(cudnn-a 9.1)" in why.stdout
    tree = libdoctor("tree", "torchy._C", venv.path, "--json")
    assert tree.rc == 0, tree.describe()
    doc = tree.json()
    assert doc["root"] == str(paths["module"])
    (entry,) = [lib for lib in doc["libraries"] if lib["name"] == "libcudnn.so.9"]
    assert os.path.normpath(entry["path"]) == str(paths["lib"])
    assert entry["via"] == "rpath"
    assert entry["owner"] == [{"name": "cudnn-a", "version": "9.1"}]
    assert entry["needed_by"] == str(paths["module"])
    text = libdoctor("tree", str(paths["module"]), venv.path)
    assert "libcudnn.so.9 => nvidia/cudnn/lib/libcudnn.so.9" in text.stdout
    assert "(cudnn-a 9.1)" in text.stdout

    paths["lib"].unlink()
    why = libdoctor("why", "libcudnn.so.9", venv.path, "--json")
    assert why.rc == 1
    doc = why.json()
    (request,) = doc["requests"]
    assert request["status"] == "not_found"
    assert doc["shipped_by"][0]["present"] is False
    assert [f["code"] for f in doc["findings"]] == ["unresolved-library"]
    assert "NOT FOUND" in libdoctor("tree", "torchy._C", venv.path).stdout


def test_driver_library_is_info_not_error(
    built: Path, new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    venv = new_venv("driver")
    module = so(built, f"gpu/_C{EXT}", needed=["libcuda.so.1"])
    install(venv, make_wheel("gpu", "1.0", {"gpu/__init__.py": b"", f"gpu/_C{EXT}": module}))
    run = libdoctor.check(venv.path, "--json")
    assert run.rc == 0, run.describe()
    (driver,) = findings(run, "driver-library-absent")
    assert driver["severity"] == "info"
    assert driver["evidence"]["library"] == "libcuda.so.1"


def test_plugins_nothing_loads_are_optional_and_hidden(
    built: Path, new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    venv = new_venv("optional")
    plugin = so(built, "plug/lib/libtransport_mpi.so.3", needed=["libmpi.so.40"])
    # A plain ``x.so`` without PyInit_x is a library, not a module: never imported.
    plain = so(built, "plug/lib/libplugin.so", needed=["libucx.so.0"])
    install(
        venv,
        make_wheel(
            "plug",
            "1.0",
            {
                "plug/__init__.py": b"",
                "plug/lib/libtransport_mpi.so.3": plugin,
                "plug/lib/libplugin.so": plain,
            },
        ),
    )
    run = libdoctor.check(venv.path, "--json")
    assert run.rc == 0, run.describe()
    assert findings(run) == []
    shown = findings(libdoctor.check(venv.path, "--json", "--all"), "optional-library-missing")
    assert sorted(f["evidence"]["library"] for f in shown) == ["libmpi.so.40", "libucx.so.0"]
    assert all(f["severity"] == "info" for f in shown)


def test_library_loaded_by_a_dependency_first_is_found_in_context(
    built: Path, new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    """vision's module needs libcore.so with no RPATH to it: it works because ``import
    vision`` imports core first, whose module loads libcore.so. Only a declared dependency
    counts."""
    core_lib = so(built, "core/lib/libcore.so", soname="libcore.so")
    core_mod = so(built, f"core/_C{EXT}", needed=["libcore.so"], rpath="$ORIGIN/lib")
    vision_mod = so(built, f"vision/_C{EXT}", needed=["libcore.so"])
    core = make_wheel(
        "core",
        "1.0",
        {
            "core/__init__.py": b"",
            "core/lib/libcore.so": core_lib,
            f"core/_C{EXT}": core_mod,
        },
    )
    files = {"vision/__init__.py": b"", f"vision/_C{EXT}": vision_mod}
    ok = new_venv("context-ok")
    install(ok, core, make_wheel("vision", "1.0", files, requires=["core"]))
    assert findings(libdoctor.check(ok.path, "--json"), "unresolved-library") == []
    bad = new_venv("context-bad")
    install(bad, core, make_wheel("vision", "2.0", files))
    (unresolved,) = findings(libdoctor.check(bad.path, "--json"), "unresolved-library")
    assert unresolved["evidence"]["modules"] == ["vision._C"]
    assert "not on the search path" in unresolved["message"]


@pytest.mark.parametrize(("dtag", "shadowed"), [("runpath", True), ("rpath", False)])
def test_ld_library_path_shadows_runpath_but_not_rpath(
    built: Path,
    new_venv: VenvFactory,
    make_wheel: WheelFactory,
    libdoctor: Libdoctor,
    tmp_path: Path,
    dtag: str,
    shadowed: bool,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "libfoo.so.1").write_bytes(so(built, "out/libfoo.so.1", soname="libfoo.so.1"))
    own = so(built, "own/libfoo.so.1", soname="libfoo.so.1")
    module = so(built, f"sh_{dtag}/_C{EXT}", needed=["libfoo.so.1"], **{dtag: "$ORIGIN/lib"})
    venv = new_venv(f"shadow-{dtag}")
    pkg = f"sh_{dtag}"
    install(
        venv,
        make_wheel(
            pkg,
            "1.0",
            {
                f"{pkg}/__init__.py": b"",
                f"{pkg}/_C{EXT}": module,
                f"{pkg}/lib/libfoo.so.1": own,
            },
        ),
    )
    run = libdoctor.check(venv.path, "--json", env={"LD_LIBRARY_PATH": str(outside)})
    found = findings(run, "shadowed-library")
    if not shadowed:
        assert found == []
        return
    (finding,) = found
    assert finding["severity"] == "warning"
    assert finding["evidence"]["via"] == "ld_library_path"
    assert finding["evidence"]["resolved"] == str(outside / "libfoo.so.1")
    assert os.path.normpath(finding["evidence"]["own_copy"]) == str(
        venv.site_packages / pkg / "lib/libfoo.so.1"
    )
    assert finding["evidence"]["own_copy_owners"] == [{"name": pkg, "version": "1.0"}]


def test_truncated_files_are_elf_invalid(
    built: Path, new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    module = so(built, f"bad/_C{EXT}", needed=[])
    venv = new_venv("elf")
    install(
        venv,
        make_wheel(
            "bad",
            "1.0",
            {
                "bad/__init__.py": b"",
                f"bad/_C{EXT}": module[:200],
                "bad/lib/libx.so.1": b"not elf",
            },
        ),
    )
    run = libdoctor.check(venv.path, "--json")
    invalid = {os.path.basename(f["paths"][0]): f for f in findings(run, "elf-invalid")}
    assert set(invalid) == {f"_C{EXT}", "libx.so.1"}
    assert invalid[f"_C{EXT}"]["severity"] == "error"
    assert invalid["libx.so.1"]["severity"] == "warning"
    assert invalid["libx.so.1"]["evidence"]["reason"] == "not an ELF file"
    assert "Traceback" not in run.stderr


def test_no_libraries_option_skips_the_loader(
    seed: tuple[Venv, Mapping[str, Path]], libdoctor: Libdoctor
) -> None:
    venv, paths = seed
    paths["lib"].unlink()
    codes = {f["code"] for f in findings(libdoctor.check(venv.path, "--json", "--no-libraries"))}
    assert codes == {"missing-files", "requirement-phantom"}  # no loader needed for either


# ----------------------------------------------------- a garbage PT_DYNAMIC (import segfaults)

_EXT_SOURCE = """#include <Python.h>
#include <math.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__C(void) {
    volatile double x = cos(1.0);
    (void)x;
    return PyModule_Create(&def);
}
"""


@pytest.fixture(scope="module")
def extension(built: Path) -> bytes:
    """A real CPython extension module (DT_NEEDED libm.so.6, libc.so.6), built by gcc."""
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").is_file():
        pytest.skip(f"Python.h not found in {include}: cannot compile an extension module")
    src = built / "ext.c"
    src.write_text(_EXT_SOURCE)
    out = built / f"_C{EXT}"
    gcc = require_gcc()
    cmd = [gcc, "-shared", "-fPIC", "-O1", f"-I{include}", "-o", str(out), str(src), "-lm"]
    subprocess.run([*cmd, "-Wl,--no-as-needed"], check=True, capture_output=True)
    return out.read_bytes()


class DynamicPatch:
    """Where an x86-64 little-endian object's PT_DYNAMIC and dynamic entries live."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        (phoff,) = struct.unpack_from("<Q", data, 32)
        (phnum,) = struct.unpack_from("<H", data, 56)
        self.phdrs = [phoff + 56 * i for i in range(phnum)]
        self.dyn_ph = next(o for o in self.phdrs if struct.unpack_from("<I", data, o)[0] == 2)
        dyn_off, _vaddr, _paddr, size = struct.unpack_from("<QQQQ", data, self.dyn_ph + 8)
        self.dyn_off = int(dyn_off)
        table = data[self.dyn_off : self.dyn_off + size]
        self.tags = [int(tag) for tag, _ in struct.iter_unpack("<qQ", table)]

    def entry(self, tag: int) -> int:
        return self.dyn_off + 16 * self.tags.index(tag)

    def value(self, tag: int) -> int:
        (value,) = struct.unpack_from("<Q", self.data, self.entry(tag) + 8)
        return int(value)

    def put(self, offset: int, value: int) -> bytes:
        out = bytearray(self.data)
        struct.pack_into("<Q", out, offset, value)
        return bytes(out)


GARBAGE: list[tuple[str, Callable[[DynamicPatch], bytes], str]] = [
    (
        "strtab-unmapped",
        lambda p: p.put(p.entry(5) + 8, 0x7FFF_0000_0000_0000),
        "DT_STRTAB address 0x7fff000000000000 is not in any PT_LOAD segment",
    ),
    (
        "needed-beyond-strsz",
        lambda p: p.put(p.entry(1) + 8, p.value(10) + 8),
        "is outside the string table",
    ),
    (
        "symtab-unmapped",
        lambda p: p.put(p.entry(6) + 8, 0x7FFF_0000_0000_0000),
        "DT_SYMTAB address 0x7fff000000000000 is not in any PT_LOAD segment",
    ),
    (
        "dynamic-address-unmapped",
        lambda p: p.put(p.dyn_ph + 16, 0x7FFF_0000_0000),
        "PT_DYNAMIC address 0x7fff00000000 is not in any PT_LOAD segment",
    ),
]


def test_a_garbage_dynamic_section_is_elf_invalid(
    extension: bytes, new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    """The extension, byte-patched in each way, installed by real pip: importing it fails
    (the oracle; a segfault for an unmapped address), and check says elf-invalid, an error,
    with why. The unpatched copy beside them imports and is not reported."""
    venv = new_venv("garbage")
    wheels = [
        make_wheel(
            "ldt-garb-ok", "1.0", {"garb_ok/__init__.py": b"", f"garb_ok/_C{EXT}": extension}
        )
    ]
    for i, (_name, patch, _reason) in enumerate(GARBAGE):
        patched = patch(DynamicPatch(extension))
        wheels.append(
            make_wheel(
                f"ldt-garb{i}", "1.0", {f"garb{i}/__init__.py": b"", f"garb{i}/_C{EXT}": patched}
            )
        )
    install(venv, *wheels)
    for i, (name, _patch, _reason) in enumerate([("ok", None, ""), *GARBAGE], start=-1):
        package = "garb_ok" if i < 0 else f"garb{i}"
        imported = subprocess.run(
            [str(venv.python), "-c", f"import {package}._C"], capture_output=True, check=False
        )
        assert (imported.returncode == 0) == (i < 0), (name, imported)
    run = libdoctor.check(venv.path, "--json")
    assert run.rc == 1, run.describe()
    invalid = {f["paths"][0]: f for f in findings(run, "elf-invalid")}
    expected = {str(venv.site_packages / f"garb{i}" / f"_C{EXT}"): g for i, g in enumerate(GARBAGE)}
    assert set(invalid) == set(expected), run.describe()
    for path, (name, _patch, reason) in expected.items():
        assert invalid[path]["severity"] == "error", name
        assert reason in invalid[path]["evidence"]["reason"], (name, invalid[path])
    assert "Traceback" not in run.stderr


def test_why_and_tree_name_the_system_package_of_a_library_outside_the_env(
    built: Path, new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    """libstdc++.so.6 found in the system dirs is owned by its Debian package (``dpkg -S``
    is the oracle); with --deep its bytes are checked against the md5 dpkg recorded."""
    import shutil

    if shutil.which("dpkg") is None:
        pytest.skip("not a Debian system")
    venv = new_venv("sysowner")
    module = so(built, f"cxx/_ext{EXT}", needed=["libstdc++.so.6"])
    install(venv, make_wheel("cxx", "1.0", {"cxx/__init__.py": b"", f"cxx/_ext{EXT}": module}))
    doc = libdoctor("why", "libstdc++.so.6", venv.path, "--json", "--deep").json()
    (request,) = doc["requests"]
    package = request["system_package"]
    oracle = subprocess.run(
        ["dpkg", "-S", os.path.realpath(request["path"])], capture_output=True, text=True
    )
    assert package["manager"] == "dpkg"
    assert package["name"] == oracle.stdout.split(": ", 1)[0]
    assert package["intact"] is True
    text = libdoctor("tree", "cxx._ext", venv.path).stdout
    assert f"(dpkg: {package['name']})" in text


def test_why_names_the_system_package_that_would_provide_a_missing_library(
    built: Path, new_venv: VenvFactory, make_wheel: WheelFactory, tmp_path: Path
) -> None:
    """A library nothing finds that a dpkg package lists: who would provide it, and whether
    its file is gone (reinstall the package) or just not on the search path."""
    from libdoctor.analysis.tree import dependency_tree
    from libdoctor.analysis.why import explain_library
    from libdoctor.environment.target import discover
    from libdoctor.external.ospackages import SystemPackages
    from libdoctor.report.tree import tree_text
    from libdoctor.report.why import why_json, why_text

    venv = new_venv("sysmissing")
    module = so(built, f"gone/_ext{EXT}", needed=["libdoctor-gone.so.3"])
    install(venv, make_wheel("gone", "1.0", {"gone/__init__.py": b"", f"gone/_ext{EXT}": module}))
    root = tmp_path / "image"
    info = root / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    (info / "libgone3:amd64.list").write_text("/.\n/usr/lib/x86_64-linux-gnu/libdoctor-gone.so.3\n")
    packages = SystemPackages(root=str(root), rpm=None)
    target = discover(str(venv.path), None, {})
    why = explain_library(target, "libdoctor-gone.so.3", {}, "/", packages=packages)
    assert not why.found
    assert (
        "dpkg package libgone3:amd64 lists /usr/lib/x86_64-linux-gnu/libdoctor-gone.so.3 "
        "(missing from disk; apt-get install --reinstall libgone3:amd64)" in why_text(why)
    )
    (provider,) = json.loads(why_json(why, {}))["system_providers"]
    assert (provider["name"], provider["present"]) == ("libgone3:amd64", False)
    (root / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    (root / "usr/lib/x86_64-linux-gnu/libdoctor-gone.so.3").write_bytes(b"")
    tree = dependency_tree(target, "gone._ext", {}, "/", packages=packages)
    assert "on disk, in no directory the loader tried" in tree_text(tree)
