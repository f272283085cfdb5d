"""Optional extension modules judged by evidence (checks.optional), on real venvs.

numbalike has numba's shape: ``import numbalike`` imports its core extension; its TBB
threading layer ``numbalike/np/tbbpool*.so`` (DT_NEEDED ``libtbb.so.12``, which nothing
installed ships) is imported only inside a function. Healthy, that is one info; each piece
of evidence taken away makes it an error again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.cc import compile_lib, require_gcc
from support.checkdoc import by_code
from support.venvs import Libdoctor, Venv, VenvFactory, pip_install
from support.wheels import WheelFactory, extension_suffix, native_tag

EXT = extension_suffix()
Doc = dict[str, Any]

PARALLEL = b"""\
def launch_threads():
    try:
        from numbalike.np import tbbpool as lib
    except ImportError:
        lib = None
    return lib
"""


def _numbalike(
    make_wheel: WheelFactory, tmp_path: Path, *, init: bytes, requires: tuple[str, ...] = ()
) -> Path:
    require_gcc()
    build = tmp_path / "build"
    (build / "core").mkdir(parents=True, exist_ok=True)
    (build / "tbb").mkdir(parents=True, exist_ok=True)
    files = {
        "numbalike/__init__.py": init,
        "numbalike/np/__init__.py": b"",
        "numbalike/np/parallel.py": PARALLEL,
        f"numbalike/_core{EXT}": compile_lib(build / "core", f"_core{EXT}").read_bytes(),
        f"numbalike/np/tbbpool{EXT}": compile_lib(
            build / "tbb", f"tbbpool{EXT}", needed=["libtbb.so.12"], rpath="$ORIGIN/../../tbb/lib"
        ).read_bytes(),
    }
    return make_wheel("numbalike", "0.68.1", files, requires=requires, tag=native_tag())


HEALTHY_INIT = b"from numbalike import _core\nfrom numbalike.np import parallel\n"


@pytest.fixture
def venv_with(
    make_wheel: WheelFactory, new_venv: VenvFactory, tmp_path: Path
) -> Callable[..., Venv]:
    def make(init: bytes = HEALTHY_INIT, *extra: Path, requires: tuple[str, ...] = ()) -> Venv:
        venv = new_venv("numbalike")
        wheel = _numbalike(make_wheel, tmp_path, init=init, requires=requires)
        pip_install(venv, *extra, wheel)
        return venv

    return make


def test_an_optional_feature_is_one_info_with_its_evidence(
    venv_with: Callable[..., Venv], libdoctor: Libdoctor
) -> None:
    venv = venv_with()
    doc = libdoctor.check(venv.path, "--json", "--all").json()
    assert doc["summary"]["errors"] == 0 and doc["summary"]["warnings"] == 0, doc["findings"]
    (info,) = doc["findings"]
    assert info["code"] == "optional-library-missing" and info["severity"] == "info"
    assert info["message"].startswith(
        "optional: numbalike.np.tbbpool needs libtbb.so.12, which no installed distribution "
        "ships (install tbb to enable)"
    )
    (evidence,) = info["evidence"]["optional_modules"]
    assert "matches its RECORD hash" in evidence["bytes"]
    assert evidence["imported_only_at"] == [
        {"file": "numbalike/np/parallel.py", "line": 3, "at_import": False}
    ]
    assert libdoctor.check(venv.path).rc == 0


@pytest.mark.parametrize(
    "init",
    [
        b"from numbalike.np import tbbpool\n",
        b"try:\n    from numbalike.np import tbbpool\nexcept ImportError as e:\n    raise\n",
    ],
    ids=["imported-at-import", "guard-that-raises"],
)
def test_reached_by_import_it_is_an_error(
    init: bytes, venv_with: Callable[..., Venv], libdoctor: Libdoctor
) -> None:
    venv = venv_with(init)
    found = by_code(libdoctor.check(venv.path, "--json", "--all").json())
    (error,) = found["unresolved-library"]
    assert error["evidence"]["library"] == "libtbb.so.12"
    assert "optional-library-missing" not in found


def test_altered_bytes_make_it_an_error(
    venv_with: Callable[..., Venv], libdoctor: Libdoctor
) -> None:
    venv = venv_with()
    module = venv.site_packages / f"numbalike/np/tbbpool{EXT}"
    data = bytearray(module.read_bytes())
    data[-1] ^= 0xFF  # the last byte: same size, other bytes (the section table's padding)
    module.unlink()
    module.write_bytes(bytes(data))
    found = by_code(libdoctor.check(venv.path, "--json", "--all").json())
    assert "unresolved-library" in found and "optional-library-missing" not in found


def test_a_library_that_was_there_is_still_an_error(
    venv_with: Callable[..., Venv], make_wheel: WheelFactory, tmp_path: Path, libdoctor: Libdoctor
) -> None:
    (tmp_path / "tbb").mkdir()
    tbb = make_wheel(
        "tbb",
        "2022.3.0",
        {"tbb/lib/libtbb.so.12": compile_lib(tmp_path / "tbb", "libtbb.so.12").read_bytes()},
    )
    venv = venv_with(HEALTHY_INIT, tbb)
    (venv.site_packages / "tbb/lib/libtbb.so.12").unlink()
    found = by_code(libdoctor.check(venv.path, "--json", "--all").json())
    assert "unresolved-library" in found and "optional-library-missing" not in found


def test_a_missing_requirement_keeps_it_an_error(
    venv_with: Callable[..., Venv], libdoctor: Libdoctor
) -> None:
    venv = venv_with(HEALTHY_INIT, requires=("tbb-provider>=1",))
    found = by_code(libdoctor.check(venv.path, "--json", "--all").json())
    assert "unresolved-library" in found and "optional-library-missing" not in found


def test_plan_uninstall_of_what_provides_it_is_not_safe(
    venv_with: Callable[..., Venv], make_wheel: WheelFactory, tmp_path: Path, libdoctor: Libdoctor
) -> None:
    """Uninstalling the library a working optional feature loads breaks that module: the
    plan says so, as it would for any module (it was there; after the change it is gone)."""
    (tmp_path / "tbb").mkdir()
    lib = compile_lib(tmp_path / "tbb", "libtbb.so.12", soname="libtbb.so.12").read_bytes()
    tbb = make_wheel("tbb", "2022.3.0", {"tbb/lib/libtbb.so.12": lib})
    assert libdoctor.check(venv_with(HEALTHY_INIT, tbb).path, "--all").rc == 0
    venv = venv_with(HEALTHY_INIT, tbb)
    run = libdoctor("plan", "uninstall", "tbb", str(venv.path))
    assert run.rc == 1 and "libtbb.so.12" in run.stdout, run.describe()
