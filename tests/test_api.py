"""Issue 18: the Python API (``libdoctor.check``, ``plan_uninstall``, ``snapshot``) on real
venvs: values, never printed; failures are ``LibdoctorError``; the CLI's JSON is the same."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import libdoctor
from support.venvs import Libdoctor, Venv, VenvFactory, pip_install
from support.wheels import WheelFactory


@pytest.fixture
def broken_venv(new_venv: VenvFactory, make_wheel: WheelFactory) -> Venv:
    """``apikit`` installed, then one of its files deleted."""
    venv = new_venv("broken")
    wheel = make_wheel("apikit", "1.0", {"apikit/__init__.py": b"", "apikit/data.txt": b"x\n"})
    pip_install(venv, wheel)
    (venv.site_packages / "apikit" / "data.txt").unlink()
    return venv


def test_public_names() -> None:
    assert set(libdoctor.__all__) == {
        "check",
        "plan_uninstall",
        "snapshot",
        "Report",
        "Finding",
        "Severity",
        "Plan",
        "Snapshot",
        "LibdoctorError",
        "__version__",
    }
    for name in libdoctor.__all__:
        assert getattr(libdoctor, name) is not None
    with pytest.raises(AttributeError):
        libdoctor.nothing_here  # noqa: B018


def test_check_finds_missing_files(broken_venv: Venv, capsys: pytest.CaptureFixture[str]) -> None:
    report = libdoctor.check(broken_venv.path)
    assert isinstance(report, libdoctor.Report)
    (finding,) = [f for f in report.findings if f.code == "missing-files"]
    assert isinstance(finding, libdoctor.Finding)
    assert finding.severity is libdoctor.Severity.ERROR
    doc = finding.to_json()
    assert doc["code"] == "missing-files" and doc["severity"] == "error"
    assert doc["distribution"] == {"name": "apikit", "version": "1.0"}
    assert any(p.endswith("apikit/data.txt") for p in doc["paths"])
    assert "pip" in doc["fix"]["command"]
    json.dumps(doc)  # JSON-safe as it is
    with pytest.raises(AttributeError):
        finding.code = "shared-path"  # type: ignore[misc]  # frozen
    assert capsys.readouterr() == ("", "")


def test_report_to_json_is_the_cli_document(
    broken_venv: Venv, libdoctor: Libdoctor, capsys: pytest.CaptureFixture[str]
) -> None:
    import libdoctor as api

    doc = api.check(broken_venv.path).to_json()
    assert capsys.readouterr() == ("", "")
    run = libdoctor("check", broken_venv.path, "--json", "--no-cache")
    assert run.rc == 1, run.describe()
    cli = run.json()
    assert doc["findings"] == cli["findings"] and doc["causes"] == cli["causes"]
    assert doc["summary"] == cli["summary"]
    assert doc["target"]["prefix"] == cli["target"]["prefix"] == str(broken_venv.path)


def test_an_interpreter_is_a_target(broken_venv: Venv) -> None:
    report = libdoctor.check(broken_venv.python, select=["missing-files"])
    assert report.target.prefix == str(broken_venv.path)
    assert [f.code for f in report.findings] == ["missing-files"]
    assert libdoctor.check(os.fspath(broken_venv.path), ignore=["missing-files"]).findings == ()


def test_plan_uninstall_of_a_co_owned_distribution_breaks(
    new_venv: VenvFactory, make_wheel: WheelFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    venv = new_venv("coowned")
    a = make_wheel("owner-a", "1.0", {"shared/data.txt": b"a\n", "owner_a.py": b""})
    b = make_wheel("owner-b", "1.0", {"shared/data.txt": b"b\n", "owner_b.py": b""})
    pip_install(venv, a)
    pip_install(venv, b)
    plan = libdoctor.plan_uninstall(venv.path, ["owner-b"])
    assert isinstance(plan, libdoctor.Plan)
    assert plan.verdict == "breaks"
    assert any(f.code == "missing-files" and f.distribution for f in plan.breaks)
    assert next(c.path for c in plan.co_owned).endswith("shared/data.txt")
    assert (venv.site_packages / "shared" / "data.txt").read_bytes() == b"b\n"  # never wrote
    assert libdoctor.plan_uninstall(venv.path, "owner-a").verdict in ("safe", "breaks")
    assert capsys.readouterr() == ("", "")


def test_snapshot_is_the_cli_snapshot(
    broken_venv: Venv, libdoctor: Libdoctor, capsys: pytest.CaptureFixture[str]
) -> None:
    import libdoctor as api

    snap = api.snapshot(broken_venv.path)
    assert isinstance(snap, api.Snapshot)
    assert capsys.readouterr() == ("", "")
    run = libdoctor("snapshot", broken_venv.path)
    assert run.rc == 0, run.describe()
    assert snap.to_json() == json.loads(run.stdout)


@pytest.mark.parametrize("kind", ["missing", "empty-dir"])
def test_a_bad_target_is_a_libdoctor_error(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "nope"
    if kind == "empty-dir":
        target.mkdir()
    for call in (
        lambda: libdoctor.check(target),
        lambda: libdoctor.snapshot(target),
        lambda: libdoctor.plan_uninstall(target, ["six"]),
    ):
        with pytest.raises(libdoctor.LibdoctorError) as caught:
            call()
        assert "\n" not in str(caught.value) and str(caught.value)
    assert capsys.readouterr() == ("", "")


def test_plan_uninstall_of_an_unknown_name_is_a_libdoctor_error(broken_venv: Venv) -> None:
    with pytest.raises(libdoctor.LibdoctorError):
        libdoctor.plan_uninstall(broken_venv.path, ["not-installed-here"])
    with pytest.raises(libdoctor.LibdoctorError):
        libdoctor.plan_uninstall(broken_venv.path, [])
