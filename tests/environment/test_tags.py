"""The interpreter and platform ``plan lock`` plans for: ``--python X.Y[.Z]`` and
``--platform TAG`` read strictly, their markers and accepted tags as pip and uv see them.

X.Y is planned as X.Y.0, as ``uv pip compile --python-version X.Y`` resolves it (checked
with uv 0.13.9 on a 3.11.7 interpreter: ``python_full_version == "3.11.0"`` held, ``>=
"3.11.1"`` did not), even where the running interpreter is a later X.Y.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from libdoctor.environment.tags import choose_wheel, planned
from libdoctor.errors import LibdoctorError
from support.venvs import run_libdoctor_inprocess


@pytest.mark.parametrize(
    ("given", "version", "full"),
    [
        ("3.11", "3.11", "3.11.0"),
        ("3.11.5", "3.11", "3.11.5"),
        ("3.13.0", "3.13", "3.13.0"),
        (f"{sys.version_info[0]}.{sys.version_info[1]}", None, None),  # running X.Y: still .0
    ],
)
def test_python_markers(given: str, version: str | None, full: str | None) -> None:
    markers = planned(given, "manylinux_2_28_x86_64").markers
    major, minor = given.split(".")[:2]
    assert markers["python_version"] == (version or f"{major}.{minor}")
    assert markers["python_full_version"] == (full or f"{major}.{minor}.0")
    assert markers["implementation_version"] == markers["python_full_version"]


@pytest.mark.parametrize(
    "junk",
    ["3", "3.11.x", "3.11.", " 3.11", "3.11.5.1", "3.11rc1", "03.11", "3.1111", "", "3.11\n"],
)
def test_python_junk_is_refused(junk: str) -> None:
    with pytest.raises(LibdoctorError, match=r"expected a version X\.Y or X\.Y\.Z") as raised:
        planned(junk, None)
    assert "\n" not in str(raised.value)


def test_manylinux_accepts_the_older_manylinux_and_linux_last() -> None:
    tags = planned("3.11", "manylinux_2_28_x86_64").tags
    py311 = [t.split("-", 2)[2] for t in tags if t.startswith("cp311-cp311-")]
    assert py311[0] == "manylinux_2_28_x86_64" and py311[-1] == "linux_x86_64"
    order = ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_5_x86_64",
             "manylinux1_x86_64"]  # fmt: skip
    assert [py311.index(t) for t in order] == sorted(py311.index(t) for t in order)
    assert "manylinux_2_29_x86_64" not in py311


@pytest.mark.parametrize(
    ("tag", "accepted", "refused", "sys_platform"),
    [
        ("manylinux2014_aarch64", "manylinux_2_17_aarch64", "manylinux_2_18_aarch64", "linux"),
        ("musllinux_1_2_x86_64", "musllinux_1_0_x86_64", "manylinux_2_17_x86_64", "linux"),
        ("macosx_14_0_arm64", "macosx_11_0_universal2", "macosx_15_0_arm64", "darwin"),
        ("win_amd64", "win_amd64", "win32", "win32"),
        ("linux_x86_64", "linux_x86_64", "manylinux_2_17_x86_64", "linux"),
    ],
)
def test_platform_families(tag: str, accepted: str, refused: str, sys_platform: str) -> None:
    found = planned("3.12", tag)
    platforms = {t.split("-", 2)[2] for t in found.tags}
    assert accepted in platforms and refused not in platforms
    assert found.markers["sys_platform"] == sys_platform


@pytest.mark.parametrize(
    "junk",
    [
        "foo", "any", "x86_64", "manylinux", "manylinux_2_28", "manylinux_3_0_x86_64",
        "manylinux_2_99999999_x86_64", "manylinux2015_x86_64", "musllinux_2_0_x86_64",
        "macosx_arm64", "win_amd64 ", "linux_x86_64/../x", "manylinux_2_28_X86_64", "",
    ],
)  # fmt: skip
def test_platform_junk_is_refused(junk: str) -> None:
    with pytest.raises(LibdoctorError, match="expected a wheel platform tag"):
        planned(None, junk)


WHEELS = [
    "x-1.0-py3-none-any.whl",
    "x-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    "x-1.0-cp311-cp311-manylinux_2_28_x86_64.whl",
    "x-1.0-cp39-abi3-manylinux_2_17_aarch64.whl",
    "x-1.0-cp311-cp311-macosx_11_0_arm64.whl",
    "x-1.0-cp312-cp312-win_amd64.whl",
    "not a wheel.whl",
]


@pytest.mark.parametrize(
    ("python", "platform", "chosen"),
    [
        ("3.11", "manylinux_2_28_x86_64", "x-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"),
        ("3.11", "manylinux_2_27_x86_64", WHEELS[1]),  # the newest it accepts
        ("3.12", "manylinux_2_28_aarch64", "x-1.0-cp39-abi3-manylinux_2_17_aarch64.whl"),
        ("3.11", "macosx_14_0_arm64", "x-1.0-cp311-cp311-macosx_11_0_arm64.whl"),
        ("3.11", "win_amd64", "x-1.0-py3-none-any.whl"),  # cp312's is not for 3.11
        ("3.12", "win_amd64", "x-1.0-cp312-cp312-win_amd64.whl"),
    ],
)
def test_choose_wheel_as_the_installer_would(python: str, platform: str, chosen: str) -> None:
    assert choose_wheel(WHEELS, planned(python, platform).tags) == chosen


def test_choose_wheel_none_fits() -> None:
    assert choose_wheel(WHEELS[1:3], planned("3.11", "win_amd64").tags) is None


def test_cli_says_one_line_and_exits_2(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text("beta==1.0\n")
    for option in (["--python", "3.11.x"], ["--platform", "manylinux_2_99999999_x86_64"]):
        run = run_libdoctor_inprocess("plan", "lock", lock, "--offline", *option)
        assert (run.rc, run.stdout) == (2, ""), run.stderr
        assert len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_markers_select_for_the_planned_python_and_platform(tmp_path: Path) -> None:
    """A pin under ``python_full_version >= "3.11.1"``: out for 3.11 (3.11.0), in for 3.11.5;
    one under ``sys_platform == "darwin"``: in for a macOS tag only."""
    lock = tmp_path / "requirements.txt"
    lock.write_text(
        'beta==1.0 ; python_full_version >= "3.11.1"\ngamma==1.0 ; sys_platform == "darwin"\n'
    )

    def excluded(python: str, platform: str = "manylinux_2_28_x86_64") -> list[str]:
        run = run_libdoctor_inprocess(
            "plan", "lock", lock, "--offline", "--cache-dir", tmp_path / "c", "--json",
            "--python", python, "--platform", platform,
        )  # fmt: skip
        doc = json.loads(run.stdout)
        assert doc["lock"]["planned_for"]["python_full_version"] == (
            python if python.count(".") == 2 else f"{python}.0"
        )
        return [e["name"] for e in doc["lock"]["excluded"]]

    assert excluded("3.11") == ["beta", "gamma"]
    assert excluded("3.11.5") == ["gamma"]
    assert excluded("3.11.5", "macosx_14_0_arm64") == []
