"""``--format sarif`` (issue 18): ``check``, ``verify --lock`` and ``plan`` as SARIF 2.1.0.

Every log is validated against the official schema (``tests/data/sarif-schema-2.1.0.json``,
OASIS) on real venvs made by real pip from the seed's wheels: the phantom state (cudnn-a's
library gone under its metadata) and a healthy one.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest

from libdoctor.findings import CODES
from support.seed import EXT_REL, SeedWheels
from support.venvs import Libdoctor, Venv

jsonschema = pytest.importorskip("jsonschema")

SCHEMA = Path(__file__).resolve().parent.parent / "data" / "sarif-schema-2.1.0.json"
Doc = dict[str, Any]


@cache
def validator() -> Any:
    schema = json.loads(SCHEMA.read_text())
    return jsonschema.Draft4Validator(schema)


def schema_errors(doc: Doc) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator().iter_errors(doc)]


def sarif(libdoctor: Libdoctor, *args: str | Path, rc: int) -> Doc:
    run = libdoctor(*args, "--format", "sarif")
    assert run.rc == rc, run.describe()
    doc = json.loads(run.stdout)
    assert isinstance(doc, dict)
    assert schema_errors(doc) == []
    return doc


def run_of(doc: Doc) -> Doc:
    assert doc["version"] == "2.1.0"
    (run,) = doc["runs"]
    return dict(run)


def target_base(run: Doc, venv: Venv) -> Path:
    base = run["originalUriBaseIds"]["TARGET"]["uri"]
    assert base.startswith("file://") and base.endswith("/")
    assert Path(unquote(urlparse(base).path)) == venv.path
    return venv.path


def test_check_sarif_on_the_phantom_state(module_libdoctor: Libdoctor, phantom: Venv) -> None:
    run = run_of(sarif(module_libdoctor, "check", phantom.path, "--no-cache", rc=1))
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(CODES)
    assert all(r["shortDescription"]["text"] == CODES[r["id"]].summary for r in rules)
    by_rule = {r["ruleId"]: r for r in run["results"]}
    assert {"unresolved-library", "requirement-phantom"} <= set(by_rule)
    assert all(r["level"] in ("error", "warning", "note") for r in run["results"])
    assert all(rules[r["ruleIndex"]]["id"] == r["ruleId"] for r in run["results"])
    unresolved = by_rule["unresolved-library"]
    assert unresolved["level"] == "error"
    artifact = unresolved["locations"][0]["physicalLocation"]["artifactLocation"]
    # the extension that needs the library, relative to the target
    assert artifact["uriBaseId"] == "TARGET"
    assert not artifact["uri"].startswith(("/", "file:"))
    assert artifact["uri"].endswith(EXT_REL)
    assert (target_base(run, phantom) / unquote(artifact["uri"])).is_file()


def test_check_sarif_on_a_healthy_env(module_libdoctor: Libdoctor, healthy: Venv) -> None:
    doc = sarif(module_libdoctor, "check", healthy.path, "--no-cache", rc=0)
    run = run_of(doc)
    assert [r for r in run["results"] if r["level"] == "error"] == []
    target_base(run, healthy)


def test_json_alias_and_format_json_agree(module_libdoctor: Libdoctor, healthy: Venv) -> None:
    by_alias = module_libdoctor("check", healthy.path, "--json")
    by_format = module_libdoctor("check", healthy.path, "--format", "json")
    assert by_alias.rc == by_format.rc == 0
    assert by_alias.json()["findings"] == by_format.json()["findings"]
    assert by_alias.json()["schema_version"] == 1


def test_verify_lock_sarif(module_libdoctor: Libdoctor, healthy: Venv, tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text("cudnn-a==9.1.0\ntorchlike==2.0\nabsent-package==1.0\n")
    run = run_of(sarif(module_libdoctor, "verify", "--lock", lock, healthy.path, rc=1))
    by_rule = {r["ruleId"]: r for r in run["results"]}
    assert {"lock-version", "lock-missing"} <= set(by_rule)
    missing = by_rule["lock-missing"]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert missing == {"uri": lock.as_uri()}  # no path in the env: the lock file itself
    matching = tmp_path / "ok.txt"
    matching.write_text("cudnn-a==9.1.0\ntorchlike==1.0\n")
    ok = run_of(sarif(module_libdoctor, "verify", "--lock", matching, healthy.path, rc=0))
    assert [r for r in ok["results"] if r["level"] != "note"] == []


def test_plan_uninstall_sarif(module_libdoctor: Libdoctor, healthy: Venv) -> None:
    breaks = run_of(sarif(module_libdoctor, "plan", "uninstall", "cudnn-a", healthy.path, rc=1))
    assert "unresolved-library" in {r["ruleId"] for r in breaks["results"]}
    safe = run_of(sarif(module_libdoctor, "plan", "uninstall", "torchlike", healthy.path, rc=0))
    assert [r for r in safe["results"] if r["level"] == "error"] == []


def test_plan_install_sarif(module_libdoctor: Libdoctor, healthy: Venv, seed: SeedWheels) -> None:
    run = run_of(sarif(module_libdoctor, "plan", "install", str(seed.cudnn_b), healthy.path, rc=1))
    assert run["results"], "installing cudnn-b over cudnn-a overwrites its library"
    assert all(r["locations"] for r in run["results"])


def test_render_levels_and_locations_in_and_outside_the_target(tmp_path: Path) -> None:
    from libdoctor.findings import DistRef, Finding, Severity
    from libdoctor.report import sarif as sarif_report

    prefix = tmp_path / "env"
    odd = str(prefix / "lib" / "caf\udce9 dir" / "x.so")  # an undecodable byte, escaped
    findings = [
        Finding("unresolved-library", Severity.ERROR, "e", DistRef("a", "1"), paths=(odd,)),
        Finding("shadowed-library", Severity.WARNING, "w", paths=("/usr/lib/libz.so.1",)),
        Finding("untracked-library", Severity.INFO, "i"),
    ]
    doc = json.loads(sarif_report.render(findings, str(prefix)))
    assert schema_errors(doc) == []
    results = doc["runs"][0]["results"]
    assert [r["level"] for r in results] == ["error", "warning", "note"]
    where = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in results]
    # the file's own byte (0xE9), percent-encoded: the URI names the file on disk
    assert where[0] == {"uri": "lib/caf%E9%20dir/x.so", "uriBaseId": "TARGET"}
    assert where[1] == {"uri": "file:///usr/lib/libz.so.1"}
    assert where[2] == {"uri": "./", "uriBaseId": "TARGET"}
    assert results[0]["properties"]["distribution"] == {"name": "a", "version": "1"}
