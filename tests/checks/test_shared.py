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


# ================================================================ the keeper, chosen by evidence


def test_without_evidence_there_is_no_keeper_and_no_fix(zoo_default: Doc) -> None:
    """Same size, no --deep, nobody requires either: keeping the last installed for being
    last would be a guess."""
    finding = only(select(zoo_default, "shared-path", "ldt-same-a"))
    keep = finding["evidence"]["keep"]
    assert (keep["name"], keep["by"]) == (None, None)
    assert keep["reason"].startswith("nothing installed requires any of them")
    assert "fix" not in finding


def test_bytes_on_disk_decide_when_nothing_else_does(zoo_default: Doc) -> None:
    finding = only(select(zoo_default, "shared-path", "ldt-ovr-a"))
    keep = finding["evidence"]["keep"]
    assert (canon(keep["name"]), keep["by"]) == ("ldt-ovr-b", "bytes-on-disk")
    assert keep["reason"] == "its bytes are on disk"
    assert finding["fix"]["note"].startswith("keeps ldt-ovr-b: its bytes are on disk")


def test_the_required_claimant_is_kept_though_through_an_extra_and_overwritten(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    """ldt-user requires ldt-meta[gpu], whose gpu extra requires ldt-cud-a; ldt-cud-b, which
    nothing requires, was installed last over ldt-cud-a's files. Keep ldt-cud-a."""
    venv = new_venv("keeper")
    shared = "cud/lib/libcud.so.9"
    cud_a = make_wheel("ldt-cud-a", "1.0", {shared: lib("a")})
    cud_b = make_wheel("ldt-cud-b", "2.0", {shared: lib("bbbb")})
    meta = make_wheel(
        "ldt-meta",
        "1.0",
        {"ldtmeta.py": b""},
        requires=['ldt-cud-a; extra == "gpu"'],
        extra_metadata=[("Provides-Extra", "gpu")],
    )
    user = make_wheel("ldt-user", "1.0", {"ldtuser.py": b""}, requires=["ldt-meta[gpu]"])
    pip_install(venv, cud_a, meta, user)
    pip_install(venv, cud_b)
    finding = only(select(check_ok(libdoctor.check(venv.path, "--json")), "shared-path"))
    assert canon(finding["evidence"]["on_disk_owner"]) == "ldt-cud-b"
    claimants = {canon(c["name"]): c["required_by"] for c in finding["evidence"]["claimants"]}
    assert claimants == {"ldt-cud-a": ["ldt-meta"], "ldt-cud-b": []}
    keep = finding["evidence"]["keep"]
    assert (canon(keep["name"]), keep["by"], keep["leaves_unmet"]) == (
        "ldt-cud-a",
        "requirement",
        [],
    )
    assert keep["reason"] == (
        "required by ldt-meta (ldt-cud-a through its extra gpu, requested as ldt-meta[gpu] by "
        "ldt-user 1.0)"
    )
    run_fix(finding, make_wheel.dest)
    after = check_ok(libdoctor.check(venv.path, "--json"))
    assert after["findings"] == []
    assert (venv.site_packages / shared).read_bytes() == lib("a")


def test_the_claimant_built_for_the_frameworks_cuda_is_kept(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    """Nothing requires either cuDNN; torch is built for CUDA 13: keep the cu13 one, though
    the cu12 one was installed last and its bytes are on disk."""
    from support.stackfake import torch_version_py

    venv = new_venv("cuda-keeper")
    torch = make_wheel(
        "torch", "2.14.1", {"torch/version.py": torch_version_py("2.14.1+cu130", "13.0")}
    )
    shared = "nvidia/cudnn/lib/libcudnn.so.9"
    cu13 = make_wheel("nvidia-cudnn-cu13", "9.24.0.43", {shared: lib("cu13")})
    cu12 = make_wheel("nvidia-cudnn-cu12", "9.10.2.21", {shared: lib("cu12-longer")})
    pip_install(venv, torch, cu13)
    pip_install(venv, cu12)
    finding = only(select(check_ok(libdoctor.check(venv.path, "--json")), "shared-path"))
    assert finding["evidence"]["on_disk_owner"] == "nvidia-cudnn-cu12"
    keep = finding["evidence"]["keep"]
    assert (keep["name"], keep["by"]) == ("nvidia-cudnn-cu13", "cuda-build")
    assert keep["reason"] == "built for CUDA 13, as torch 2.14.1+cu130 (CUDA 13.0) is"
    assert finding["fix"]["argv"][-1].endswith(
        "uninstall --yes nvidia-cudnn-cu12 && "
        f"{venv.python} -m pip install --force-reinstall --no-deps nvidia-cudnn-cu13==9.24.0.43"
    )
