"""Finding codes: one ``Code`` literal, one registry (``CODES``), and a README that agrees."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from libdoctor.findings import CODES, Code, Finding, Severity

README = Path(__file__).resolve().parent.parent / "README.md"


def _section(title: str) -> str:
    return README.read_text().partition(title)[2].partition("\n## ")[0]


def test_the_literal_and_the_registry_list_the_same_codes() -> None:
    assert get_args(Code) == tuple(CODES)
    assert all(info.summary and "\n" not in info.summary for info in CODES.values())


def test_the_readme_table_lists_every_check_code_and_whether_it_is_hidden() -> None:
    rows = re.findall(r"^\| `([a-z-]+)` \| ([^|]+) \|", _section("## `libdoctor check`"), re.M)
    table = {code: severity for code, severity in rows}
    others = ("probe:", "verify:", "caches:", "plan lock:")
    checks = {c for c, info in CODES.items() if not info.summary.startswith(others)}
    assert set(table) == checks
    for code, severity in table.items():
        assert ("hidden" in severity) == (not CODES[code].shown_by_default), code


def test_the_readme_names_every_probe_code() -> None:
    section = _section("## `libdoctor probe")
    probe = [c for c, info in CODES.items() if info.summary.startswith("probe:")]
    assert probe and all(f"`{code}`" in section for code in probe)


def test_the_readme_table_of_verify_lists_every_verify_code() -> None:
    rows = re.findall(r"^\| `([a-z-]+)` \|", _section("## `libdoctor verify"), re.M)
    verify = [c for c, info in CODES.items() if info.summary.startswith("verify:")]
    assert verify and sorted(rows) == sorted(verify)


def test_the_readme_names_every_caches_code() -> None:
    section = _section("## `libdoctor caches")
    codes = [c for c, info in CODES.items() if info.summary.startswith("caches:")]
    assert codes and all(f"`{code}`" in section for code in codes)


def test_an_unknown_code_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown finding code"):
        Finding("no-such-code", Severity.ERROR, "m")  # type: ignore[arg-type]


def test_the_readme_of_plan_lock_names_every_plan_lock_code() -> None:
    section = _section("## `libdoctor plan lock")
    codes = [c for c, info in CODES.items() if info.summary.startswith("plan lock:")]
    assert codes and all(f"`{code}`" in section for code in codes)
