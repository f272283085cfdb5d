"""Issue 2 acceptance: ``libdoctor check`` against real venvs that real pip broke for real.

Most states live in one module-scoped venv (the "zoo"): each scenario has its own distributions,
and each test looks only at the findings that name them. States that a test changes (uninstall,
fix, cache) get their own venv.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import libdoctor
from support.venvs import (
    Libdoctor,
    LibdoctorRun,
    Venv,
    VenvFactory,
    base_site_packages,
    diff_snapshots,
    pip_env,
    pip_install,
    pip_uninstall,
    snapshot,
    strace_path,
)
from support.wheels import (
    WheelFactory,
    extension_suffix,
    native_tag,
    record_hash,
    record_line,
    sample_elf,
)

Doc = dict[str, Any]
Finding = dict[str, Any]

SEVERITIES = ("error", "warning", "info")
CODES = {
    "missing-files",
    "shared-path",
    "shared-path-identical",
    "altered-files",
    "duplicate-distribution",
    "record-invalid",
    "untracked-library",
}
FINDING_KEYS = {"code", "severity", "message", "distribution", "paths", "evidence", "fix"}
OPTIONAL_KEYS = {"distribution", "paths", "evidence", "fix"}
EXT = extension_suffix()  # ".cpython-311-x86_64-linux-gnu.so"
NATIVE = native_tag()  # "cp311-cp311-linux_x86_64"


def lib(tag: str) -> bytes:
    """A valid ELF whose trailing bytes carry TAG: equal-length tags give equal-size files."""
    return sample_elf() + b"\0LDTEST:" + tag.encode("ascii") + b"\0"


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def names_in(finding: Finding) -> set[str]:
    """Canonical names of every distribution a finding is about (its own, or the claimants)."""
    names = set()
    dist = finding.get("distribution")
    if dist:
        names.add(canon(dist["name"]))
    for claimant in finding.get("evidence", {}).get("claimants", []):
        names.add(canon(claimant["name"]))
    return names


def not_bytecode(paths: Sequence[str]) -> list[str]:
    """PATHS without ``__pycache__/*.pyc`` (pip records those without hash or size)."""
    return [p for p in paths if not (p.endswith(".pyc") and "/__pycache__/" in p)]


def select(doc: Doc, code: str | None = None, dist: str | None = None) -> list[Finding]:
    return [
        f
        for f in doc["findings"]
        if (code is None or f["code"] == code) and (dist is None or canon(dist) in names_in(f))
    ]


def only(findings: Sequence[Finding]) -> Finding:
    assert len(findings) == 1, json.dumps(findings, indent=1)[:4000]
    return findings[0]


def codes_for(doc: Doc, dist: str) -> set[str]:
    return {f["code"] for f in select(doc, dist=dist)}


def reinstall_argv(venv: Venv, requirement: str) -> list[str]:
    return [
        str(venv.python),
        "-m",
        "pip",
        "install",
        "--force-reinstall",
        "--no-deps",
        requirement,
    ]


def assert_fix_argv(finding: Finding, venv: Venv, requirement: str) -> None:
    fix = finding["fix"]
    argv = fix["argv"]
    assert argv[1:] == reinstall_argv(venv, requirement)[1:], fix
    # The venv's own interpreter path, not its symlink target (that would be the base python).
    assert Path(argv[0]).parent == venv.bin and Path(argv[0]).name.startswith("python"), fix
    assert shlex.split(fix["command"]) == argv, fix


def rewrite_record_row(dist_info: Path, rel: str, data: bytes) -> None:
    """Give REL's RECORD row the hash and size of DATA, as an installer writing DATA would."""
    record = dist_info / "RECORD"
    lines = record.read_text("utf-8").splitlines()
    lines = [record_line(rel, data) if line.split(",")[0] == rel else line for line in lines]
    record.write_text("\n".join(lines) + "\n", "utf-8")


def append_record_rows(dist_info: Path, *rows: str) -> None:
    with (dist_info / "RECORD").open("a", encoding="utf-8") as handle:
        handle.write("".join(row + "\n" for row in rows))


def check_ok(run: LibdoctorRun) -> Doc:
    assert run.rc in (0, 1), run.describe()
    assert "Traceback" not in run.stderr, run.describe()
    doc: Doc = run.json()
    return doc


# =============================================================================== the zoo

# Malformed RECORD rows, each appended to its own distribution's RECORD. "{p}" is its package dir.
EMPTY_SHA = record_hash(b"")
MALFORMED_ROWS: dict[str, str | None] = {
    "two-columns": "{p}/two.py,sha256=abc",
    "four-columns": "{p}/__init__.py," + EMPTY_SHA + ",0,extra",
    "hash-without-algorithm": "{p}/noalgo.py,47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0",
    "hash-not-base64": "{p}/badb64.py,sha256=!!!not*base64!!!,0",
    "hash-wrong-length": "{p}/short.py,sha256=AAAA,0",
    "size-not-integer": "{p}/sizeword.py," + EMPTY_SHA + ",zero",
    "size-negative": "{p}/sizeneg.py," + EMPTY_SHA + ",-5",
    "empty-path": "," + EMPTY_SHA + ",0",
    "no-record-file": None,  # RECORD deleted
}

ESCAPE_ROWS = (
    "../../../../etc/passwd",  # <zoo root>/etc/passwd: exists, wrong size
    "../../../../ldt-escape-sentinel/libesc.so",  # does not exist
)
BAD_NAME = b"lib\xff\xfe.so"  # not UTF-8
BAD_DIR = b"\xfejunk"


@dataclass(frozen=True)
class Zoo:
    root: Path
    venv: Venv
    abs_sentinel: Path

    @property
    def site(self) -> Path:
        return self.venv.site_packages

    def path(self, rel: str) -> str:
        return str(self.site / rel)


def _build_zoo(root: Path, venv: Venv, make_wheel: WheelFactory) -> Zoo:
    site = venv.site_packages
    first: list[Path] = []
    second: list[Path] = []

    # Two wheels, one path set, different bytes (different sizes); b installed last.
    first.append(
        make_wheel(
            "ldt-ovr-a",
            "1.0",
            {
                "ovr/__init__.py": b"",
                "ovr/lib/libovr.so.1": lib("a"),
                "ovr/lib/libovr_ops.so.1": lib("a-ops"),
                "ovr/version.py": b"V = 'a'\n",
                "ovr/only_a.py": b"A = 1\n",
            },
        )
    )
    second.append(
        make_wheel(
            "ldt-ovr-b",
            "2.0",
            {
                "ovr/__init__.py": b"",
                "ovr/lib/libovr.so.1": lib("bb"),
                "ovr/lib/libovr_ops.so.1": lib("bb-ops"),
                "ovr/version.py": b"V = 'bb'\n",
                "ovr/only_b.py": b"B = 1\n",
            },
        )
    )
    # Same path, same size, different bytes: only --deep can say whose they are.
    first.append(make_wheel("ldt-same-a", "1.0", {"same/lib/libsame.so": lib("x1")}))
    second.append(make_wheel("ldt-same-b", "1.0", {"same/lib/libsame.so": lib("x2")}))
    # Namespace-style identical __init__.py shared by two wheels: harmless.
    first.append(make_wheel("ldt-ns-a", "1.0", {"ldtns/__init__.py": b"", "ldtns/a.py": b"A=1\n"}))
    second.append(make_wheel("ldt-ns-b", "1.0", {"ldtns/__init__.py": b"", "ldtns/b.py": b"B=1\n"}))
    # Files altered after install.
    first.append(
        make_wheel(
            "ldt-alt-native",
            "1.0",
            {"altn/__init__.py": b"", f"altn/_core{EXT}": lib("n")},
            tag=NATIVE,
        )
    )
    first.append(
        make_wheel("ldt-alt-pure", "1.0", {"altp/__init__.py": b"", "altp/util.py": b"X = 1\n"})
    )
    first.append(make_wheel("ldt-alt-flip", "1.0", {"altf/libflip.so.3": lib("f")}))
    # A script and a data file (.data/scripts, .data/data), left intact: must stay silent.
    first.append(
        make_wheel(
            "ldt-tool",
            "1.0",
            {"ldttool/__init__.py": b"def main() -> None:\n    pass\n"},
            data={
                "scripts/ldt-tool": b"#!python\nimport ldttool\nldttool.main()\n",
                "data/share/ldt-tool/readme.txt": b"hello\n",
            },
        )
    )
    # A deleted file (and deleted bytecode, which does not count).
    first.append(
        make_wheel(
            "ldt-del",
            "1.0",
            {
                "del/__init__.py": b"",
                "del/gone.py": b"GONE = 1\n",
                "del/keep.py": b"KEEP = 1\n",
                "del/lib/libdel.so": lib("d"),
            },
        )
    )
    # Installed by uv (INSTALLER says so): its fix must use uv.
    first.append(
        make_wheel("ldt-uvdist", "1.0", {"uvd/__init__.py": b"", "uvd/lib/libuvd.so": lib("u")})
    )
    # Malformed RECORDs.
    for case in MALFORMED_ROWS:
        pkg = "rec_" + case.replace("-", "_")
        first.append(make_wheel(f"ldt-rec-{case}", "1.0", {f"{pkg}/__init__.py": b""}))
    # RECORD paths escaping the prefix.
    first.append(make_wheel("ldt-esc", "1.0", {"esc/__init__.py": b""}))
    # Two dist-info dirs for one normalized name; 1.0's metadata is left behind by hand below.
    dup_old = make_wheel("Foo_Bar", "1.0", {"foobar/__init__.py": b""}, dist_info_name="Foo_Bar")
    first.append(
        make_wheel(
            "foo.bar",
            "2.0",
            {"foobar/__init__.py": b"", "foobar/new.py": b"NEW = 2\n"},
            dist_info_name="foo.bar",
        )
    )
    # Non-UTF-8 names; symlink loops.
    first.append(
        make_wheel(
            "ldt-bytes", "1.0", {"bytespkg/__init__.py": b"", "bytespkg/lib/libreal.so": lib("r")}
        )
    )
    first.append(
        make_wheel(
            "ldt-loop",
            "1.0",
            {"loop/__init__.py": b"", "loop/mod.py": b"M = 1\n", "loop/lib/libl.so": lib("l")},
        )
    )

    pip_install(venv, *first)
    pip_install(venv, *second)

    # --- break things, the way a crash, an editor or a careless copy would
    with open(site / f"altn/_core{EXT}", "ab") as handle:
        handle.write(b"\0" * 8)
    (site / "altp/util.py").write_bytes(b"X = 12345\n")
    flip = site / "altf/libflip.so.3"
    data = bytearray(flip.read_bytes())
    data[-2] ^= 0x01  # the tag's last character: same size, other bytes
    flip.write_bytes(bytes(data))

    (site / "del/gone.py").unlink()
    shutil.rmtree(site / "del/__pycache__", ignore_errors=True)

    uv_info = site / "ldt_uvdist-1.0.dist-info"
    (uv_info / "INSTALLER").write_bytes(b"uv\n")
    rewrite_record_row(uv_info, "ldt_uvdist-1.0.dist-info/INSTALLER", b"uv\n")
    (site / "uvd/lib/libuvd.so").unlink()

    for case, row in MALFORMED_ROWS.items():
        info = site / f"ldt_rec_{case.replace('-', '_')}-1.0.dist-info"
        if row is None:
            (info / "RECORD").unlink()
        else:
            append_record_rows(info, row.format(p="rec_" + case.replace("-", "_")))

    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/passwd").write_bytes(b"root:x:0:0:sentinel, not the real one:/root:/bin/sh\n")
    abs_sentinel = root / "ldt-abs-sentinel" / "libabs.so"
    append_record_rows(
        site / "ldt_esc-1.0.dist-info",
        *(f"{row},{record_hash(b'x')},1" for row in ESCAPE_ROWS),
        f"{abs_sentinel},{record_hash(b'x')},1",
    )

    with zipfile.ZipFile(dup_old) as archive:
        for member in archive.namelist():
            if member.startswith("Foo_Bar-1.0.dist-info/"):
                archive.extract(member, site)
    (site / "Foo_Bar-1.0.dist-info/INSTALLER").write_bytes(b"pip\n")

    lib_dir = os.fsencode(site / "bytespkg/lib")
    with open(os.path.join(lib_dir, BAD_NAME), "wb") as handle:
        handle.write(lib("bad-name"))
    os.mkdir(os.path.join(os.fsencode(site), BAD_DIR))
    with open(os.path.join(os.fsencode(site), BAD_DIR, b"mod\xff.py"), "wb") as handle:
        handle.write(b"")

    (site / "loop/mod.py").unlink()
    os.symlink("mod.py", site / "loop/mod.py")  # ELOOP at a RECORD path
    os.symlink("libcycle.so", site / "loop/lib/libcycle.so")  # ELOOP, untracked, in a package dir
    os.symlink("..", site / "loop/lib/up")  # a directory cycle for any walker that follows links
    return Zoo(root, venv, abs_sentinel)


@pytest.fixture(scope="module")
def zoo(module_venv: VenvFactory, module_wheels: WheelFactory) -> Zoo:
    venv = module_venv("zoo")
    return _build_zoo(venv.path.parent, venv, module_wheels)


@pytest.fixture(scope="module")
def zoo_default(zoo: Zoo, module_libdoctor: Libdoctor) -> Doc:
    """``check --json``: what a user sees by default."""
    return check_ok(module_libdoctor.check(zoo.venv.path, "--json"))


@pytest.fixture(scope="module")
def zoo_all(zoo: Zoo, module_libdoctor: Libdoctor) -> Doc:
    return check_ok(module_libdoctor.check(zoo.venv.path, "--json", "--all"))


@pytest.fixture(scope="module")
def zoo_deep(zoo: Zoo, module_libdoctor: Libdoctor) -> Doc:
    return check_ok(module_libdoctor.check(zoo.venv.path, "--json", "--all", "--deep"))


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


# ------------------------------------------------------------------------ zoo-wide contracts


def test_zoo_exit_code_and_summary(zoo: Zoo, zoo_default: Doc, zoo_all: Doc) -> None:
    for doc in (zoo_default, zoo_all):
        summary = doc["summary"]
        counts = {s: sum(f["severity"] == s for f in doc["findings"]) for s in SEVERITIES}
        assert (summary["errors"], summary["warnings"], summary["infos"]) == (
            counts["error"],
            counts["warning"],
            counts["info"],
        )
        dist_infos = list(zoo.site.glob("*.dist-info"))
        assert summary["distributions"] == len(dist_infos)
        assert isinstance(summary["files"], int) and summary["files"] > 0


def test_every_zoo_finding_is_expected(zoo_all: Doc) -> None:
    """Nothing but the scenarios: pip and setuptools from `python -m venv` are clean."""
    for finding in zoo_all["findings"]:
        names = names_in(finding)
        assert names, finding
        assert all(n.startswith(("ldt-", "foo-bar")) for n in names), finding


@pytest.mark.parametrize("doc_name", ["default", "all", "deep"])
def test_json_schema_shape(
    zoo: Zoo, zoo_default: Doc, zoo_all: Doc, zoo_deep: Doc, doc_name: str
) -> None:
    doc = {"default": zoo_default, "all": zoo_all, "deep": zoo_deep}[doc_name]
    assert set(doc) == {"schema_version", "tool", "target", "summary", "findings"}
    assert doc["schema_version"] == 1
    assert doc["tool"]["name"] == "libdoctor"
    assert doc["tool"]["version"] == libdoctor.__version__
    target = doc["target"]
    assert {"prefix", "python", "site_packages", "chosen_by"} <= set(target)
    assert os.path.realpath(target["prefix"]) == os.path.realpath(zoo.venv.path)
    assert target["site_packages"][0] == str(zoo.site)
    assert isinstance(target["chosen_by"], str) and target["chosen_by"]
    assert set(doc["summary"]) >= {"distributions", "files", "errors", "warnings", "infos"}
    assert all(isinstance(v, int) for v in doc["summary"].values())
    assert doc["findings"]
    for finding in doc["findings"]:
        assert set(finding) <= FINDING_KEYS, finding
        assert {"code", "severity", "message"} <= set(finding), finding
        for key in OPTIONAL_KEYS & set(finding):
            assert finding[key], f"{key} present but empty: {finding}"
        assert finding["code"] in CODES
        assert finding["severity"] in SEVERITIES
        assert isinstance(finding["message"], str) and finding["message"]
        if "distribution" in finding:
            assert set(finding["distribution"]) == {"name", "version"}
        for path in finding.get("paths", []):
            assert isinstance(path, str) and os.path.isabs(path), path
        if "fix" in finding:
            fix = finding["fix"]
            assert isinstance(fix["command"], str) and fix["command"]
            assert isinstance(fix["argv"], list) and all(isinstance(a, str) for a in fix["argv"])
    if doc_name == "deep":
        hashing = doc["tool"]["hashing"]
        assert {"files_hashed", "cache_hits", "bytes_hashed"} <= set(hashing)
    else:
        assert "hashing" not in doc["tool"]


def test_text_output(zoo: Zoo, zoo_default: Doc, module_libdoctor: Libdoctor) -> None:
    run = module_libdoctor.check(zoo.venv.path, env={"NO_COLOR": "1", "COLUMNS": "80"})
    assert run.rc == 1, run.describe()
    out = run.stdout
    assert "\x1b[" not in out, "no colour when not a tty"
    assert str(zoo.venv.path) in out.splitlines()[0], "says first which target was chosen"
    positions = [out.find(heading) for heading in ("Errors", "Warnings")]
    assert -1 < positions[0] < positions[1], "grouped by severity, errors first"
    assert "error" in out.splitlines()[-1], "ends with a one-line summary"
    # Every path and fix whole: a command or path split by wrapping can't be pasted or grepped.
    for finding in zoo_default["findings"]:
        assert finding["code"] in out
        for path in finding.get("paths", []):
            assert path in out, path
        if "fix" in finding:
            assert finding["fix"]["command"] in out, finding["fix"]["command"]


# ------------------------------------------------------------------ select, ignore, fail-on


@dataclass(frozen=True)
class FilterCase:
    args: tuple[str, ...]
    rc: int
    codes: frozenset[str] | None  # exactly these codes shown; None: only check "absent"
    absent: frozenset[str] = frozenset()


FILTERS = {
    "default-fails-on-errors": FilterCase((), 1, None, frozenset({"shared-path-identical"})),
    "select-warning-only": FilterCase(
        ("--select", "record-invalid"), 0, frozenset({"record-invalid"})
    ),
    "select-warning-fail-on-warning": FilterCase(
        ("--select", "record-invalid", "--fail-on", "warning"), 1, frozenset({"record-invalid"})
    ),
    "select-info-only": FilterCase(
        ("--select", "untracked-library"), 0, frozenset({"untracked-library"})
    ),
    "select-info-fail-on-warning": FilterCase(
        ("--select", "untracked-library", "--fail-on", "warning"),
        0,
        frozenset({"untracked-library"}),
    ),
    "select-info-fail-on-info": FilterCase(
        ("--select", "untracked-library", "--fail-on", "info"), 1, frozenset({"untracked-library"})
    ),
    "select-two-codes": FilterCase(
        ("--select", "missing-files,duplicate-distribution"),
        1,
        frozenset({"missing-files", "duplicate-distribution"}),
    ),
    "select-hidden-code-shows-it": FilterCase(
        ("--select", "shared-path-identical"), 0, frozenset({"shared-path-identical"})
    ),
    "ignore-every-error-code": FilterCase(
        ("--ignore", "missing-files,shared-path,altered-files,duplicate-distribution"),
        0,
        None,
        frozenset({"missing-files", "shared-path", "altered-files", "duplicate-distribution"}),
    ),
    "select-then-ignore": FilterCase(
        ("--select", "missing-files", "--ignore", "missing-files"), 0, frozenset()
    ),
}


@pytest.mark.parametrize("case", list(FILTERS.values()), ids=list(FILTERS))
def test_select_ignore_fail_on(zoo: Zoo, module_libdoctor: Libdoctor, case: FilterCase) -> None:
    run = module_libdoctor.check(zoo.venv.path, "--json", *case.args)
    assert run.rc == case.rc, run.describe()
    doc = run.json()
    shown = {f["code"] for f in doc["findings"]}
    if case.codes is not None:
        assert shown == case.codes
    assert not shown & case.absent
    summary = doc["summary"]
    assert summary["errors"] + summary["warnings"] + summary["infos"] == len(doc["findings"])


@pytest.mark.parametrize(
    "args",
    [
        ("--select", "no-such-code"),
        ("--ignore", "no-such-code"),
        ("--fail-on", "fatal"),
    ],
    ids=["select-unknown-code", "ignore-unknown-code", "fail-on-unknown-severity"],
)
def test_bad_option_values_exit_2(
    zoo: Zoo, module_libdoctor: Libdoctor, args: Sequence[str]
) -> None:
    run = module_libdoctor.check(zoo.venv.path, "--json", *args)
    assert run.rc == 2, run.describe()
    assert "Traceback" not in run.stderr


# ---------------------------------------------------------------------- never writes target


def test_check_never_writes_to_the_target(zoo: Zoo, module_libdoctor: Libdoctor) -> None:
    before = snapshot(zoo.venv.path)
    runs = [
        module_libdoctor.check(zoo.venv.path),
        module_libdoctor.check(zoo.venv.path, "--json", "--all"),
        module_libdoctor.check(zoo.venv.path, "--deep", "--json"),
        module_libdoctor.check(zoo.venv.path, "--deep"),  # the cached re-verify
        module_libdoctor.check("--python", zoo.venv.python, "--deep", "--json"),
    ]
    for run in runs:
        assert run.rc == 1, run.describe()
    assert diff_snapshots(before, snapshot(zoo.venv.path)) == []
    assert module_libdoctor.cache_dir.exists(), "the hash cache went to --cache-dir"


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

    fix = subprocess.run(
        finding["fix"]["argv"],
        env=pip_env(find_links=[make_wheel.dest]),
        capture_output=True,
        text=True,
        check=False,
    )
    assert fix.returncode == 0, fix.stdout + fix.stderr
    run = libdoctor.check(venv.path, "--json")
    assert run.rc == 0, run.describe()
    assert run.json()["findings"] == []
    assert (site / "unin/lib/libunin.so.2").read_bytes() == lib("a")


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


# ---------------------------------------------------------------------------- --deep cache


def hashing(run: LibdoctorRun) -> dict[str, int]:
    doc = check_ok(run)
    stats: dict[str, int] = doc["tool"]["hashing"]
    return stats


def _age(tree: Path, seconds: int = 60) -> None:
    """Backdate every mtime: files written moments ago are never trusted from the cache."""
    for path in [tree, *tree.rglob("*")]:
        if not path.is_symlink():
            st = path.stat()
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - seconds * 10**9))


def test_deep_cache_rereads_nothing_when_unchanged(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    venv = new_venv("cache")
    pip_install(
        venv,
        make_wheel("ldt-cache", "1.0", {"cache/__init__.py": b"", "cache/lib/libc1.so": lib("c1")}),
    )
    _age(venv.path)
    first = hashing(libdoctor.check(venv.path, "--json", "--deep"))
    assert first["files_hashed"] > 0 and first["bytes_hashed"] > 0
    assert first["cache_hits"] == 0

    second = hashing(libdoctor.check(venv.path, "--json", "--deep"))
    assert second["files_hashed"] == 0 and second["bytes_hashed"] == 0
    assert second["cache_hits"] == first["files_hashed"]

    target = venv.site_packages / "cache/lib/libc1.so"
    data = bytearray(target.read_bytes())
    data[-2] ^= 0x01
    target.write_bytes(bytes(data))
    run = libdoctor.check(venv.path, "--json", "--deep")
    third = hashing(run)
    assert third["files_hashed"] == 1 and third["bytes_hashed"] == len(data)
    assert third["cache_hits"] == first["files_hashed"] - 1
    finding = only(select(run.json(), "altered-files", "ldt-cache"))
    assert finding["paths"] == [str(target)]

    uncached = hashing(libdoctor.check(venv.path, "--json", "--deep", "--no-cache"))
    assert uncached["files_hashed"] == first["files_hashed"] and uncached["cache_hits"] == 0


def test_deep_cache_never_trusts_a_file_written_moments_ago(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    """A same-size rewrite inside one timestamp tick keeps (size, mtime_ns, inode): git's
    "racy clean" case. A digest of a just-written file is not cached, so it is re-read."""
    venv = new_venv("cache-racy")
    pip_install(venv, make_wheel("ldt-racy", "1.0", {"racy/lib/libr.so": lib("r")}))
    _age(venv.path)
    target = venv.site_packages / "racy/lib/libr.so"
    target.write_bytes(target.read_bytes())  # fresh mtime, same bytes
    st = target.stat()
    first = hashing(libdoctor.check(venv.path, "--json", "--deep"))
    data = bytearray(target.read_bytes())
    data[-2] ^= 0x01
    target.write_bytes(bytes(data))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, inode and mtime
    run = libdoctor.check(venv.path, "--json", "--deep")
    assert hashing(run)["cache_hits"] == first["files_hashed"] - 1
    assert only(select(run.json(), "altered-files", "ldt-racy"))["paths"] == [str(target)]


def test_deep_cache_defaults_to_the_user_cache_dir(
    new_venv: VenvFactory, libdoctor: Libdoctor
) -> None:
    venv = new_venv("cache-default")
    before = snapshot(venv.path)
    run = libdoctor("check", venv.path, "--json", "--deep")
    assert run.rc == 0, run.describe()
    assert any(libdoctor.cache_root.rglob("*")), "cached under $XDG_CACHE_HOME"
    assert diff_snapshots(before, snapshot(venv.path)) == []


# -------------------------------------------------------------------------- target discovery


@pytest.fixture(scope="module")
def disc(module_venv: VenvFactory, module_wheels: WheelFactory) -> Venv:
    venv = module_venv("disc")
    pip_install(venv, module_wheels("ldt-disc", "1.0", {"disc/__init__.py": b""}))
    return venv


def _same(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


@pytest.mark.parametrize(
    "how",
    ["venv-dir", "site-packages-dir", "--python", "$VIRTUAL_ENV", "$CONDA_PREFIX", "both-env"],
)
def test_target_discovery(disc: Venv, module_libdoctor: Libdoctor, how: str) -> None:
    args: list[str | os.PathLike[str]] = []
    env: dict[str, str | None] = {}
    if how == "venv-dir":
        args = [disc.path]
    elif how == "site-packages-dir":
        args = [disc.site_packages]
    elif how == "--python":
        args = ["--python", disc.python]
    elif how == "$VIRTUAL_ENV":
        env = {"VIRTUAL_ENV": str(disc.path)}
    elif how == "$CONDA_PREFIX":
        env = {"CONDA_PREFIX": str(disc.path)}
    else:
        env = {"VIRTUAL_ENV": str(disc.path), "CONDA_PREFIX": "/nonexistent/conda"}
    run = module_libdoctor.check(*args, "--json", env=env)
    assert run.rc == 0, run.describe()
    doc = run.json()
    target = doc["target"]
    assert _same(target["prefix"], disc.path), target
    assert [os.path.realpath(p) for p in target["site_packages"]] == [
        os.path.realpath(disc.site_packages)
    ]
    if how != "site-packages-dir":
        assert target["python"] and _same(target["python"], disc.python), target
    if how.startswith("$"):
        assert how.lstrip("$") in target["chosen_by"], target
    if how == "both-env":
        assert "VIRTUAL_ENV" in target["chosen_by"], target
    assert doc["summary"]["distributions"] == 3


def test_default_target_is_the_running_interpreter(module_libdoctor: Libdoctor) -> None:
    run = module_libdoctor.check("--json", "--select", "duplicate-distribution")
    assert run.rc == 0, run.describe()
    assert _same(run.json()["target"]["prefix"], sys.prefix)


def test_prefix_dir_target(
    disc: Venv, module_wheels: WheelFactory, module_libdoctor: Libdoctor, tmp_path: Path
) -> None:
    prefix = tmp_path / "prefix"
    wheel = module_wheels("ldt-prefixed", "1.0", {"prefixed/__init__.py": b""})
    pip_install(disc, wheel, extra_args=["--prefix", str(prefix)])
    site = next(prefix.glob("lib/python3*/site-packages"))
    run = module_libdoctor.check(prefix, "--json")
    assert run.rc == 0, run.describe()
    target = run.json()["target"]
    assert _same(target["prefix"], prefix)
    assert [os.path.realpath(p) for p in target["site_packages"]] == [os.path.realpath(site)]
    assert run.json()["summary"]["distributions"] == 1


def test_include_system_site_packages_is_honoured(
    new_venv: VenvFactory, libdoctor: Libdoctor
) -> None:
    venv = new_venv("system-site")
    cfg = venv.path / "pyvenv.cfg"
    cfg.write_text(
        cfg.read_text().replace(
            "include-system-site-packages = false", "include-system-site-packages = true"
        )
    )
    run = libdoctor.check(venv.path, "--json", "--fail-on", "info")
    assert run.rc in (0, 1), run.describe()
    sites = [os.path.realpath(p) for p in run.json()["target"]["site_packages"]]
    assert sites[0] == os.path.realpath(venv.site_packages)
    assert any(os.path.realpath(p) in sites for p in base_site_packages()), sites


@pytest.fixture
def not_a_target(tmp_path: Path) -> Iterator[dict[str, Path]]:
    empty = tmp_path / "empty"
    empty.mkdir()
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    yield {
        "missing": tmp_path / "does-not-exist",
        "empty-dir": empty,
        "regular-file": a_file,
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing",
        "empty-dir",
        "regular-file",
        "--python-missing",
        "--python-not-python",
        "$VIRTUAL_ENV-missing",
    ],
)
def test_unusable_target_exits_2_with_one_line(
    not_a_target: dict[str, Path], libdoctor: Libdoctor, case: str
) -> None:
    env: dict[str, str | None] = {}
    args: list[str | os.PathLike[str]]
    if case == "--python-missing":
        args = ["--python", not_a_target["missing"]]
    elif case == "--python-not-python":
        true = shutil.which("true")
        assert true is not None
        args = ["--python", true]
    elif case == "$VIRTUAL_ENV-missing":
        args = []
        env = {"VIRTUAL_ENV": str(not_a_target["missing"])}
    else:
        args = [not_a_target[case]]
    for extra in ((), ("--json",)):
        run = libdoctor.check(*args, *extra, env=env)
        assert run.rc == 2, run.describe()
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("libdoctor: error:"), run.describe()
        assert run.stdout == "", run.describe()


# --------------------------------------------------------------------------- in-process runner


def test_inprocess_runner_matches_subprocess(disc: Venv, module_libdoctor: Libdoctor) -> None:
    sub = module_libdoctor.check(disc.path, "--json")
    inproc = module_libdoctor.inprocess(
        "check", disc.path, "--json", "--cache-dir", module_libdoctor.cache_dir
    )
    assert (inproc.rc, inproc.json()["findings"]) == (sub.rc, sub.json()["findings"])
    assert inproc.json()["target"] == sub.json()["target"]


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
    fix = subprocess.run(
        finding["fix"]["argv"],
        env=pip_env(find_links=[make_wheel.dest]),
        capture_output=True,
        text=True,
        check=False,
    )
    assert fix.returncode == 0, fix.stdout + fix.stderr
    after = libdoctor.check(venv.path, "--json", "--fail-on", "warning")
    assert after.rc == 0, after.describe()
