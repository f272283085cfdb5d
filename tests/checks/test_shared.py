"""Issue 2 acceptance: shared-path and shared-path-identical, with real pip and real wheels.

Two distributions writing one path: in the zoo (``support.zoo``), where the second install
overwrote the first's files, and in a venv of their own, where uninstalling one leaves the
other without its files and the suggested fix repairs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from support.checkdoc import (
    Doc,
    assert_fix_argv,
    canon,
    check_ok,
    codes_for,
    names_in,
    not_bytecode,
    only,
    run_fix,
    select,
)
from support.venvs import Libdoctor, VenvFactory, pip_install, pip_uninstall
from support.wheels import WheelFactory
from support.zoo import Zoo, lib

# ------------------------------------------------------------------------------- shared-path


@pytest.mark.parametrize("mode", ["default", "deep"])
def test_overwrite_is_one_shared_path_naming_the_last_installer(
    zoo: Zoo, zoo_default: Doc, zoo_deep: Doc, mode: str
) -> None:
    doc = zoo_default if mode == "default" else zoo_deep
    finding = only(select(doc, "shared-path", "ldt-ovr-a"))
    assert finding["severity"] == "error"
    assert "distribution" not in finding
    assert sorted(finding["paths"]) == sorted(
        zoo.path(p) for p in ("ovr/lib/libovr.so.1", "ovr/lib/libovr_ops.so.1", "ovr/version.py")
    ), "the identical ovr/__init__.py is not part of it"
    evidence = finding["evidence"]
    assert canon(evidence["on_disk_owner"]) == "ldt-ovr-b"
    assert evidence["decided_by"] == ("size" if mode == "default" else "hash")
    claimants = {canon(c["name"]): c for c in evidence["claimants"]}
    assert set(claimants) == {"ldt-ovr-a", "ldt-ovr-b"}
    assert (claimants["ldt-ovr-a"]["version"], claimants["ldt-ovr-a"]["on_disk"]) == ("1.0", 0)
    assert (claimants["ldt-ovr-b"]["version"], claimants["ldt-ovr-b"]["on_disk"]) == ("2.0", 3)
    # Reported once, as shared-path: not also as a's altered or b's anything.
    assert codes_for(doc, "ldt-ovr-a") <= {"shared-path", "shared-path-identical"}
    assert codes_for(doc, "ldt-ovr-b") <= {"shared-path", "shared-path-identical"}


def test_same_size_overwrite_is_undecided_without_deep(zoo_default: Doc) -> None:
    finding = only(select(zoo_default, "shared-path", "ldt-same-a"))
    evidence = finding["evidence"]
    assert evidence["on_disk_owner"] is None
    assert {c["on_disk"] for c in evidence["claimants"]} == {0}
    assert codes_for(zoo_default, "ldt-same-b") == {"shared-path"}


def test_same_size_overwrite_is_decided_by_hash_with_deep(zoo: Zoo, zoo_deep: Doc) -> None:
    finding = only(select(zoo_deep, "shared-path", "ldt-same-a"))
    evidence = finding["evidence"]
    assert canon(evidence["on_disk_owner"]) == "ldt-same-b"
    assert evidence["decided_by"] == "hash"
    assert finding["paths"] == [zoo.path("same/lib/libsame.so")]
    assert codes_for(zoo_deep, "ldt-same-a") == {"shared-path"}


def test_identical_shared_init_is_silent_by_default(zoo_default: Doc) -> None:
    assert select(zoo_default, dist="ldt-ns-a") == []
    assert select(zoo_default, dist="ldt-ns-b") == []
    assert select(zoo_default, "shared-path-identical") == []


def test_identical_shared_init_is_info_with_all(zoo: Zoo, zoo_all: Doc) -> None:
    finding = only(select(zoo_all, "shared-path-identical", "ldt-ns-a"))
    assert finding["severity"] == "info"
    assert not_bytecode(finding["paths"]) == [zoo.path("ldtns/__init__.py")]
    assert names_in(finding) == {"ldt-ns-a", "ldt-ns-b"}
    assert codes_for(zoo_all, "ldt-ns-b") == {"shared-path-identical"}


# ================================================================ own venvs: states that change


@dataclass(frozen=True)
class UninstallCase:
    extra_files: Mapping[str, bytes]  # files of unin-a that unin-b does not share
    phantom: bool
    missing: int


UNINSTALL_CASES = {
    "every-library-gone": UninstallCase({}, True, 2),
    "own-library-left": UninstallCase({"unin/lib/libown.so": lib("own")}, False, 2),
}


@pytest.mark.parametrize("case", list(UNINSTALL_CASES.values()), ids=list(UNINSTALL_CASES))
def test_uninstall_breaks_the_other_and_its_fix_repairs_it(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor, case: UninstallCase
) -> None:
    venv = new_venv("unin")
    site = venv.site_packages
    shared = {"unin/__init__.py": b"", "unin/lib/libunin.so.2": lib("a")}
    wheel_a = make_wheel("ldt-unin-a", "1.0", {**shared, **case.extra_files})
    wheel_b = make_wheel(
        "ldt-unin-b", "1.5", {"unin/__init__.py": b"", "unin/lib/libunin.so.2": lib("bbb")}
    )
    pip_install(venv, wheel_a)
    pip_install(venv, wheel_b)

    overwritten = check_ok(libdoctor.check(venv.path, "--json"))
    finding = only(select(overwritten, "shared-path"))
    assert canon(finding["evidence"]["on_disk_owner"]) == "ldt-unin-b"
    assert finding["paths"] == [str(site / "unin/lib/libunin.so.2")]

    pip_uninstall(venv, "ldt-unin-b")
    run = libdoctor.check(venv.path, "--json")
    assert run.rc == 1, run.describe()
    broken = run.json()
    finding = only(broken["findings"])
    assert finding["code"] == "missing-files"
    assert finding["distribution"] == {"name": "ldt-unin-a", "version": "1.0"}
    assert sorted(finding["paths"]) == sorted(str(site / p) for p in shared)
    assert finding["evidence"]["missing"] == case.missing
    assert finding["evidence"]["phantom"] is case.phantom
    assert_fix_argv(finding, venv, "ldt-unin-a==1.0")

    text = libdoctor.check(venv.path)
    assert text.rc == 1
    assert "ldt-unin-a==1.0" in text.stdout and "--force-reinstall" in text.stdout

    run_fix(finding, make_wheel.dest)
    run = libdoctor.check(venv.path, "--json")
    assert run.rc == 0, run.describe()
    assert run.json()["findings"] == []
    assert (site / "unin/lib/libunin.so.2").read_bytes() == lib("a")
