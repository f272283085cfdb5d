"""Issue 2 acceptance: ``libdoctor check`` as a command, against real venvs.

Target discovery, exit codes, the JSON document's shape and the text report, --select,
--ignore and --fail-on, never writing to the target, and the --deep hash cache. Most runs
read the zoo (``support.zoo``); the file findings themselves are ``checks/test_files``'s.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from base64 import urlsafe_b64encode
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

import libdoctor
from support.checkdoc import Doc, check_ok, names_in, only, select
from support.venvs import (
    Libdoctor,
    LibdoctorRun,
    Venv,
    VenvFactory,
    base_site_packages,
    diff_snapshots,
    pip_install,
    snapshot,
)
from support.wheels import WheelFactory
from support.zoo import Zoo, lib

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
    assert set(doc) == {"schema_version", "tool", "target", "summary", "findings", "causes"}
    assert doc["schema_version"] == 1
    covered = sorted(i for cause in doc["causes"] for i in cause["findings"])
    assert covered == list(range(len(doc["findings"]))), "each finding in exactly one cause"
    for cause in doc["causes"]:
        assert cause["severity"] in SEVERITIES
        assert (cause["title"] is None) == (len(cause["findings"]) == 1), cause
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


def test_deep_shortcut_keeps_what_differed_and_notices_a_new_record(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    """An unchanged env is re-verified from one fingerprint (nothing read, no per-file
    lookup); a file that differed from RECORD still does, and a rewritten RECORD counts."""
    venv = new_venv("shortcut")
    pip_install(venv, make_wheel("ldt-short", "1.0", {"short/lib/libs1.so": lib("s1")}))
    target = venv.site_packages / "short/lib/libs1.so"
    data = bytearray(target.read_bytes())
    data[-2] ^= 0x01  # same size, other bytes: only a digest tells
    target.write_bytes(bytes(data))
    _age(venv.path)
    for run_number in (1, 2):
        run = libdoctor.check(venv.path, "--json", "--deep")
        assert only(select(run.json(), "altered-files", "ldt-short"))["paths"] == [str(target)]
        assert (hashing(run)["files_hashed"] == 0) == (run_number == 2)

    # RECORD now names the bytes on disk: the next run must see the new RECORD.
    (record,) = venv.site_packages.glob("ldt_short-1.0.dist-info/RECORD")
    old = f"sha256={urlsafe_b64encode(hashlib.sha256(lib('s1')).digest()).rstrip(b'=').decode()}"
    new = f"sha256={urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()}"
    record.write_text(record.read_text().replace(old, new))
    _age(record)
    run = libdoctor.check(venv.path, "--json", "--deep")
    assert select(run.json(), "altered-files", "ldt-short") == []
    assert hashing(run)["files_hashed"] == 0, "the file itself is unchanged: per-file cache"


def test_damaged_cache_files_are_ignored_not_fatal(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    venv = new_venv("cache-damaged")
    pip_install(venv, make_wheel("ldt-dmg", "1.0", {"dmg/lib/libd.so": lib("d")}))
    _age(venv.path)
    first = hashing(libdoctor.check(venv.path, "--json", "--deep"))
    files = list((libdoctor.cache_dir / "hashes").iterdir())
    assert {f.suffix for f in files} == {".marshal", ".native", ".unchanged"}
    for file in files:
        file.write_bytes(b"\xff not marshal")
    again = hashing(libdoctor.check(venv.path, "--json", "--deep"))
    assert again["files_hashed"] == first["files_hashed"] and again["cache_hits"] == 0


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


def test_the_console_script_runs_the_program(zoo: Zoo, zoo_default: Doc) -> None:
    """``libdoctor`` (the script pip writes, entry point libdoctor.__main__:run) is the same
    program as ``python -m libdoctor``."""
    import json
    import subprocess

    script = Path(sys.executable).parent / "libdoctor"
    if not script.exists():
        pytest.skip(f"no console script beside {sys.executable} (libdoctor not pip-installed)")
    run = subprocess.run(
        [str(script), "check", str(zoo.venv.path), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == (1 if zoo_default["summary"]["errors"] else 0), run.stderr
    assert json.loads(run.stdout)["findings"] == zoo_default["findings"]
