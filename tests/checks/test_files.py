"""Issue 2 acceptance: ``libdoctor check``'s file findings against real venvs that real pip broke.

missing-files, altered-files, untracked-library, record-invalid and duplicate-distribution.
Most states live in the module-scoped zoo (``support.zoo``): each scenario has its own
distributions, and each test looks only at the findings that name them. States that a test
changes get their own venv. Shared paths: ``test_check_shared``; the command itself:
``test_check_cli``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.checkdoc import Doc, assert_fix_argv, canon, check_ok, codes_for, only, run_fix, select
from support.venvs import Libdoctor, VenvFactory, pip_env, pip_install, strace_path
from support.wheels import WheelFactory
from support.zoo import ESCAPE_ROWS, EXT, MALFORMED_ROWS, NATIVE, Zoo, lib

# ----------------------------------------------------------------------------- altered-files


@dataclass(frozen=True)
class AlteredCase:
    dist: str
    rel: str
    severity_default: str | None  # None: not reported without --deep
    severity_deep: str


ALTERED = [
    AlteredCase("ldt-alt-native", f"altn/_core{EXT}", "error", "error"),
    AlteredCase("ldt-alt-pure", "altp/util.py", "warning", "warning"),
    AlteredCase("ldt-alt-flip", "altf/libflip.so.3", None, "error"),
]


@pytest.mark.parametrize("case", ALTERED, ids=[c.dist for c in ALTERED])
@pytest.mark.parametrize("mode", ["default", "deep"])
def test_altered_file(
    zoo: Zoo, zoo_default: Doc, zoo_deep: Doc, case: AlteredCase, mode: str
) -> None:
    doc = zoo_default if mode == "default" else zoo_deep
    expected = case.severity_default if mode == "default" else case.severity_deep
    findings = select(doc, "altered-files", case.dist)
    if expected is None:
        assert findings == [], "a same-size change is only visible to --deep"
        assert select(doc, dist=case.dist) == []
        return
    finding = only(findings)
    assert finding["severity"] == expected
    assert canon(finding["distribution"]["name"]) == case.dist
    assert finding["distribution"]["version"] == "1.0"
    assert finding["paths"] == [zoo.path(case.rel)]
    assert zoo.path(case.rel) in json.dumps(finding["evidence"])
    assert finding["fix"]["argv"][-1] == f"{case.dist}==1.0"
    assert codes_for(doc, case.dist) == {"altered-files"}


def test_scripts_and_data_files_installed_by_pip_are_clean(zoo_deep: Doc) -> None:
    assert select(zoo_deep, dist="ldt-tool") == []


# ----------------------------------------------------------------------------- missing-files


def test_deleted_file_is_missing_and_bytecode_is_not(zoo: Zoo, zoo_default: Doc) -> None:
    finding = only(select(zoo_default, "missing-files", "ldt-del"))
    assert finding["severity"] == "error"
    assert finding["paths"] == [zoo.path("del/gone.py")], "__pycache__/*.pyc never count"
    assert finding["evidence"]["missing"] == 1
    assert finding["evidence"]["phantom"] is False
    assert_fix_argv(finding, zoo.venv, "ldt-del==1.0")
    assert codes_for(zoo_default, "ldt-del") == {"missing-files"}


def test_fix_for_a_uv_installed_distribution_uses_uv(zoo: Zoo, zoo_default: Doc) -> None:
    finding = only(select(zoo_default, "missing-files", "ldt-uvdist"))
    assert finding["evidence"]["phantom"] is True
    argv = finding["fix"]["argv"]
    assert Path(argv[0]).name == "uv"
    assert argv[1:] == [
        "pip",
        "install",
        "--reinstall",
        "--no-deps",
        "--python",
        str(zoo.venv.python),
        "ldt-uvdist==1.0",
    ]


# ---------------------------------------------------------------------------- record-invalid


@pytest.mark.parametrize("case", list(MALFORMED_ROWS))
def test_malformed_record_is_record_invalid(zoo: Zoo, zoo_default: Doc, case: str) -> None:
    dist = f"ldt-rec-{case}"
    findings = select(zoo_default, "record-invalid", dist)
    assert findings, f"no record-invalid for {dist}: {codes_for(zoo_default, dist)}"
    for finding in findings:
        assert finding["severity"] == "warning"
        assert finding["distribution"]["version"] == "1.0"
        assert all(os.path.isabs(p) for p in finding.get("paths", []))
    info = zoo.site / f"ldt_rec_{case.replace('-', '_')}-1.0.dist-info"
    mentioned = json.dumps(findings)
    assert str(info) in mentioned, "names the dist-info or its RECORD"


def test_escaping_record_paths_are_reported_never_followed(zoo: Zoo, zoo_deep: Doc) -> None:
    findings = select(zoo_deep, dist="ldt-esc")
    assert {f["code"] for f in findings} == {"record-invalid"}, (
        "a followed escaping path would show up as missing-files or altered-files"
    )
    text = json.dumps(findings)
    for row in ESCAPE_ROWS:
        assert row in text
    assert str(zoo.abs_sentinel) in text
    for finding in findings:
        assert finding["severity"] == "warning"
        for path in finding.get("paths", []):
            assert path.startswith(str(zoo.venv.path)), "reported paths stay inside the prefix"


@pytest.mark.skipif(strace_path() is None, reason="strace is not installed or may not trace here")
def test_escaping_record_paths_are_never_stat_ed(
    zoo: Zoo, module_libdoctor: Libdoctor, tmp_path: Path
) -> None:
    log = tmp_path / "strace.log"
    run = module_libdoctor.check(zoo.venv.path, "--json", "--deep", "--no-cache", strace_log=log)
    check_ok(run)
    trace = log.read_text("utf-8", "replace")
    assert str(zoo.site) in trace, "the trace sees libdoctor's own file accesses"
    for needle in ("ldt-escape-sentinel", "ldt-abs-sentinel", str(zoo.root / "etc/passwd")):
        hits = [line for line in trace.splitlines() if needle in line]
        assert hits == [], f"{needle} was touched:\n" + "\n".join(hits[:10])


# -------------------------------------------------------------------- duplicate-distribution


def test_two_dist_info_dirs_for_one_name_are_a_duplicate(zoo: Zoo, zoo_default: Doc) -> None:
    finding = only(select(zoo_default, "duplicate-distribution", "foo-bar"))
    assert finding["severity"] == "error"
    text = json.dumps(finding)
    assert str(zoo.site / "Foo_Bar-1.0.dist-info") in text
    assert str(zoo.site / "foo.bar-2.0.dist-info") in text


def test_duplicate_distribution_fix_leaves_one_whole_install(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    """An interrupted upgrade left 1.0's metadata beside 2.0's files: the fix deletes the
    stale directory (the one the disk disagrees with) and reinstalls 2.0; then all is clean."""
    venv = new_venv("dup")
    old = make_wheel("ldt-dup", "1.0", {"dup/__init__.py": b"OLD = 1\n"})
    pip_install(venv, old)
    stale = venv.site_packages / "ldt_dup-1.0.dist-info"
    kept = Path(str(stale) + ".kept")
    stale.rename(kept)
    pip_install(venv, make_wheel("ldt-dup", "2.0", {"dup/__init__.py": b"NEW = 22\n"}))
    kept.rename(stale)
    finding = only(select(libdoctor.check(venv.path, "--json").json(), "duplicate-distribution"))
    assert finding["distribution"] == {"name": "ldt-dup", "version": "2.0"}
    assert finding["fix"]["steps"][0] == ["rm", "-rf", "--", str(stale)]
    run_fix(finding, make_wheel.dest)
    after = libdoctor.check(venv.path, "--json", "--fail-on", "info")
    assert after.rc == 0, after.describe()
    assert (venv.site_packages / "dup/__init__.py").read_bytes() == b"NEW = 22\n"


# ------------------------------------------------------------------ non-UTF-8, symlink loops


def test_untracked_library_with_non_utf8_name(zoo: Zoo, zoo_default: Doc) -> None:
    finding = only(select(zoo_default, "untracked-library", "ldt-bytes"))
    assert finding["severity"] == "info"
    escaped = zoo.path("bytespkg/lib/lib\\xff\\xfe.so")
    assert finding["paths"] == [escaped]
    assert codes_for(zoo_default, "ldt-bytes") == {"untracked-library"}


@pytest.mark.parametrize("output", ["json", "text"])
def test_non_utf8_names_do_not_break_output(
    zoo: Zoo, module_libdoctor: Libdoctor, output: str
) -> None:
    args = ["--json"] if output == "json" else []
    run = module_libdoctor.check(zoo.venv.path, *args, "--all", env={"COLUMNS": "80"})
    assert run.rc == 1, run.describe()
    assert "Traceback" not in run.stderr, run.describe()
    run.stdout.encode("utf-8")  # strict: raises if libdoctor wrote raw non-UTF-8 bytes
    escaped = zoo.path("bytespkg/lib/lib\\xff\\xfe.so")
    if output == "json":
        paths = [p for f in run.json()["findings"] for p in f.get("paths", [])]
        assert escaped in paths
    else:
        # Whole, on one line: a path split by wrapping can be neither copied nor grepped.
        assert escaped in run.stdout, run.stdout[-3000:]


def test_symlink_loop_at_a_record_path(zoo: Zoo, zoo_default: Doc) -> None:
    findings = select(zoo_default, dist="ldt-loop")
    mod = zoo.path("loop/mod.py")
    about_mod = [f for f in findings if mod in f.get("paths", [])]
    assert about_mod, json.dumps(findings, indent=1)
    assert {f["severity"] for f in about_mod} <= {"error", "warning"}


def test_symlink_loop_in_a_package_dir(zoo: Zoo, zoo_default: Doc) -> None:
    findings = select(zoo_default, "untracked-library", "ldt-loop")
    paths = [p for f in findings for p in f.get("paths", [])]
    assert zoo.path("loop/lib/libcycle.so") in paths
    assert zoo.path("loop/lib/up") not in paths


# ================================================================ own venvs: states that change


def test_clean_venv_is_clean(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    venv = new_venv("clean")
    pip_install(
        venv,
        make_wheel("ldt-ns-a", "1.0", {"ldtns/__init__.py": b"", "ldtns/a.py": b"A=1\n"}),
        make_wheel(
            "ldt-native",
            "1.0",
            {"nat/__init__.py": b"", f"nat/_x{EXT}": lib("x"), "nat/lib/libnat.so.1": lib("y")},
            tag=NATIVE,
            data={"scripts/ldt-nat": b"#!python\nprint(1)\n"},
        ),
    )
    pip_install(venv, make_wheel("ldt-ns-b", "1.0", {"ldtns/__init__.py": b"", "ldtns/b.py": b""}))
    for extra in ((), ("--deep",)):
        run = libdoctor.check(venv.path, "--json", *extra)
        assert run.rc == 0, run.describe()
        doc = run.json()
        assert doc["findings"] == []
        assert doc["summary"]["errors"] == doc["summary"]["warnings"] == 0
        assert doc["summary"]["distributions"] == 5  # pip, setuptools and ours
    text = libdoctor.check(venv.path, "--fail-on", "info")
    assert text.rc == 0, text.describe()
    shown = check_ok(libdoctor.check(venv.path, "--json", "--all", "--fail-on", "info"))
    assert {f["code"] for f in shown["findings"]} == {"shared-path-identical"}
    assert libdoctor.check(venv.path, "--all", "--fail-on", "info").rc == 1


def test_lost_record_is_reported_and_its_fix_works(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    """pip refuses --force-reinstall without RECORD ("Cannot uninstall"): the fix for a lost
    RECORD must be one pip accepts, and running it must leave a clean check."""
    venv = new_venv("norecord")
    wheel = make_wheel("ldt-norecord", "1.0", {"norec/__init__.py": b"x = 1\n"})
    pip_install(venv, wheel)
    (venv.site_packages / "ldt_norecord-1.0.dist-info" / "RECORD").unlink()
    run = libdoctor.check(venv.path, "--json", "--fail-on", "warning")
    assert run.rc == 1, run.describe()
    finding = only(select(run.json(), "record-invalid"))
    assert finding["severity"] == "warning"
    assert "--ignore-installed" in finding["fix"]["argv"]
    run_fix(finding, make_wheel.dest)
    after = libdoctor.check(venv.path, "--json", "--fail-on", "warning")
    assert after.rc == 0, after.describe()


def test_empty_record_is_reported_and_uninstall_says_pip_would_remove_nothing(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    """A 0-byte RECORD: pip's uninstall "succeeds" removing nothing. check reports it with a
    fix pip accepts; plan uninstall and uninstall say the files would stay, and exit 2."""
    venv = new_venv("emptyrecord")
    wheel = make_wheel("ldt-emptyrec", "1.0", {"emptyrec/__init__.py": b"x = 1\n"})
    pip_install(venv, wheel)
    (venv.site_packages / "ldt_emptyrec-1.0.dist-info" / "RECORD").write_bytes(b"")
    run = libdoctor.check(venv.path, "--json", "--fail-on", "warning")
    assert run.rc == 1, run.describe()
    finding = only(select(run.json(), "record-invalid"))
    assert finding["severity"] == "warning"
    assert finding["evidence"]["reason"] == "an empty RECORD"
    assert "would remove none" in finding["message"]
    assert "--ignore-installed" in finding["fix"]["argv"]
    for command in (("plan", "uninstall"), ("uninstall", "--force")):
        said = libdoctor(*command, "ldt-emptyrec", venv.path)
        assert said.rc == 2, said.describe()
        assert "pip would remove none of its files" in said.stderr, said.describe()
        assert "Traceback" not in said.stderr
        assert (venv.site_packages / "emptyrec" / "__init__.py").is_file()
    run_fix(finding, make_wheel.dest)
    after = libdoctor.check(venv.path, "--json", "--fail-on", "warning")
    assert after.rc == 0, after.describe()


def test_pip_target_directory_is_checked_scripts_included(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    """``pip install --target DIR`` records scripts as ``../../bin/x`` (relative to the
    temporary scheme it installed into) and moves them to ``DIR/bin/x``: they are checked
    there, byte for byte, like every other file, and nothing is "outside the prefix"."""
    venv = new_venv("target")
    wheel = make_wheel(
        "ldt-target",
        "1.0",
        {"tgt/__init__.py": b"", "tgt/lib/libt.so": lib("t")},
        data={"scripts/ldt-target-tool": b"#!python\nprint(1)\n"},
    )
    target = tmp_path / "target-dir"
    done = subprocess.run(
        [str(venv.python), "-m", "pip", "install", "--target", str(target), str(wheel)],
        env=pip_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run = libdoctor.check(target, "--json", "--all", "--deep", "--fail-on", "info")
    assert run.rc == 0, run.describe()
    doc = run.json()
    assert doc["target"]["site_packages"] == [str(target)]
    (target / "bin/ldt-target-tool").unlink()
    (target / "tgt/lib/libt.so").unlink()
    broken = libdoctor.check(target, "--json")
    assert broken.rc == 1
    assert sorted(only(select(broken.json(), "missing-files"))["paths"]) == [
        str(target / "bin/ldt-target-tool"),
        str(target / "tgt/lib/libt.so"),
    ]


# ---------------------------------------------------------------- record-mismatch-upstream


def _wrong_record(wheel: Path, path: str, size: int, digest: str) -> None:
    """Rewrite the wheel's own RECORD row for PATH: the upstream packaging bug."""
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        members = {i.filename: archive.read(i) for i in archive.infolist()}
    record = next(n for n in members if n.endswith(".dist-info/RECORD"))
    rows = members[record].decode().splitlines()
    members[record] = (
        "\n".join(f"{path},{digest},{size}" if r.startswith(path + ",") else r for r in rows) + "\n"
    ).encode()
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


@pytest.mark.parametrize("deep", [False, True], ids=["size", "hash"])
def test_a_wheel_whose_own_record_is_wrong_is_upstream_not_altered(
    deep: bool, new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    """The bytes are what the wheel shipped (unchanged since pip wrote RECORD): information
    about an upstream bug. A file changed after the install is still altered."""
    from support.wheels import record_hash

    data = b"VALUE = 1\n"
    wheel = make_wheel("ldt-upstream", "1.0", {"up/__init__.py": b"", "up/data.py": data})
    if deep:  # same size, other bytes: only --deep sees it
        _wrong_record(wheel, "up/data.py", len(data), record_hash(b"VALUE = 2\n"))
    else:
        _wrong_record(wheel, "up/data.py", len(data) + 3, record_hash(data))
    venv = new_venv("upstream")
    pip_install(venv, wheel)
    args = ("--json", "--all", "--deep") if deep else ("--json", "--all")
    doc = libdoctor.check(venv.path, *args).json()
    (upstream,) = select(doc, "record-mismatch-upstream", "ldt-upstream")
    assert upstream["severity"] == "info"
    assert upstream["paths"] == [str(venv.site_packages / "up/data.py")]
    assert select(doc, "altered-files", "ldt-upstream") == []
    time.sleep(0.01)
    (venv.site_packages / "up/__init__.py").write_bytes(b"# edited\n")
    doc = libdoctor.check(venv.path, *args).json()
    (altered,) = select(doc, "altered-files", "ldt-upstream")
    assert altered["paths"] == [str(venv.site_packages / "up/__init__.py")]
