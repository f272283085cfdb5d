"""Issue 18: the Python API (``libdoctor.check``, ``plan_uninstall``, ``snapshot``) on real
venvs: values, never printed; failures are ``LibdoctorError``; the CLI's JSON is the same.
Issue 24: the changes (``fix``, ``install``, ``uninstall``, ``restore``) through it, with real
pip, a rollback included."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

import libdoctor
from libdoctor.external.installers import InstallerOptions
from support.repairs import diff_states, tree_state
from support.venvs import Libdoctor, Venv, VenvFactory, installed_names, pip_env, pip_install
from support.wheels import WheelFactory


@pytest.fixture
def broken_venv(new_venv: VenvFactory, make_wheel: WheelFactory) -> Venv:
    """``apikit`` installed, then one of its files deleted."""
    venv = new_venv("broken")
    wheel = make_wheel("apikit", "1.0", {"apikit/__init__.py": b"", "apikit/data.txt": b"x\n"})
    pip_install(venv, wheel)
    (venv.site_packages / "apikit" / "data.txt").unlink()
    return venv


def offline(make_wheel: WheelFactory, tmp_path: Path) -> libdoctor.ChangeOptions:
    """Installs from this test's wheels only; backups under its tmp."""
    return libdoctor.ChangeOptions(
        installer=InstallerOptions(find_links=(str(make_wheel.dest),), no_index=True),
        cache_dir=str(tmp_path / "cache"),
        environ=pip_env(extra={"PIP_NO_CACHE_DIR": "1"}),
    )


def test_public_names() -> None:
    assert set(libdoctor.__all__) == {
        "check",
        "plan_uninstall",
        "snapshot",
        "fix",
        "install",
        "uninstall",
        "restore",
        "backups",
        "Backups",
        "ChangeOptions",
        "Progress",
        "Outcome",
        "FixResult",
        "GuardedResult",
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


def test_fix_rolls_back_a_failing_step_then_repairs_and_restores(
    broken_venv: Venv, make_wheel: WheelFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = offline(make_wheel, tmp_path)
    data = broken_venv.site_packages / "apikit" / "data.txt"
    planned = libdoctor.fix(broken_venv.path, dry_run=True, options=options)
    assert planned.outcome is None and len(planned.plan.steps) == 1
    assert [f.code for f in planned.before] == ["missing-files"] and planned.predicted == ()
    declined = libdoctor.fix(broken_venv.path, options=options, confirm=lambda _fix: False)
    assert declined.outcome is None and not data.exists()

    false = shutil.which("false")  # the installer fails: everything is rolled back
    assert false is not None
    before = tree_state(broken_venv.path)
    told: list[str] = []
    failing = replace(options, wrapper=(false,))
    failed = libdoctor.fix(
        broken_venv.path, options=failing, progress=libdoctor.Progress(told.append)
    )
    assert failed.outcome is not None and not failed.outcome.ok and failed.outcome.after is None
    assert failed.outcome.run.rollback is not None and failed.outcome.run.rollback.ok
    assert failed.outcome.findings == failed.before and failed.outcome.diff is None
    assert diff_states(before, tree_state(broken_venv.path)) == []
    (rolled_back,) = libdoctor.backups(options.cache_dir).found
    assert rolled_back.state == "rolled-back"
    assert f"rolled back: the target is as before (backup {rolled_back.id})" in told

    fixed = libdoctor.fix(broken_venv.path, options=options)
    outcome = fixed.outcome
    assert isinstance(fixed, libdoctor.FixResult) and isinstance(outcome, libdoctor.Outcome)
    assert outcome.ok and not outcome.errors_left and not outcome.new_errors
    assert outcome.diff is not None and [f.code for f in outcome.diff.resolved] == ["missing-files"]
    assert outcome.after == fixed.findings == ()
    assert data.read_bytes() == b"x\n"
    backup = libdoctor.backups(options.cache_dir).found[-1]
    assert backup.state == "done" and backup.command == f"libdoctor fix {broken_venv.path}"
    restored = libdoctor.restore(backup.id, cache_dir=options.cache_dir)
    assert restored.ok and not data.exists()
    assert capsys.readouterr() == ("", "")


def test_install_then_uninstall(
    new_venv: VenvFactory,
    make_wheel: WheelFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    venv = new_venv("api-change")
    wheel = make_wheel("apinew", "1.0", {"apinew/__init__.py": b"X = 1\n"})
    options = offline(make_wheel, tmp_path)
    dry = libdoctor.install(venv.path, [str(wheel)], dry_run=True, options=options)
    assert dry.outcome is None and dry.refusal is None and dry.plan.verdict == "safe"
    installed = libdoctor.install(venv.path, [str(wheel)], options=options)
    assert isinstance(installed, libdoctor.GuardedResult) and installed.outcome is not None
    assert installed.outcome.ok and not installed.outcome.new_errors
    assert "apinew" in installed_names(venv.site_packages)
    clash = make_wheel("apiclash", "1.0", {"apinew/__init__.py": b"X = 2\n"})
    refused = libdoctor.install(venv.path, [str(clash)], options=options)
    assert refused.outcome is None and refused.refusal is not None
    assert refused.refusal.startswith("refused: the install breaks 1 thing(s)")
    assert "apiclash" not in installed_names(venv.site_packages)
    removed = libdoctor.uninstall(venv.path, "apinew", options=options)
    assert removed.refusal is None and removed.outcome is not None and removed.outcome.ok
    assert "apinew" not in installed_names(venv.site_packages)
    commands = [b.command for b in libdoctor.backups(options.cache_dir).found]
    assert commands == [
        f"libdoctor install {wheel} {venv.path}",
        f"libdoctor uninstall apinew {venv.path}",
    ]
    assert capsys.readouterr() == ("", "")


def test_check_reads_a_target_as_the_cli_does(tmp_path: Path) -> None:
    """TARGET, --python and --root are resolved in one place, api.check, for the CLI too:
    there a file is no TARGET, and --root wants one (and no --python)."""
    a_file = tmp_path / "python3"
    a_file.write_bytes(b"")
    with pytest.raises(libdoctor.LibdoctorError, match="is not a directory"):
        libdoctor.check(a_file, files_are_interpreters=False)
    with pytest.raises(libdoctor.LibdoctorError, match="--root needs TARGET"):
        libdoctor.check(None, root=os.fspath(tmp_path))
    with pytest.raises(libdoctor.LibdoctorError, match="--root needs TARGET"):
        libdoctor.check(tmp_path, python=os.fspath(a_file), root=os.fspath(tmp_path))
