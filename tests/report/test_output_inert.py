"""Output is inert (issue 23): names read from the environment (file names, distribution names
and versions, a snapshot's node) may hold terminal escapes, a newline, C1 controls or bytes
that are no UTF-8. Text output spells each as its escape (``\\x1b``) and stays one line per
line; HTML and SARIF carry no raw control byte; JSON keeps every value exact. Text without
such characters is unchanged (``inert`` is the identity on it).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from libdoctor.report.text import inert
from support.bombs import hostile_wheel
from support.venvs import Libdoctor, Venv, VenvFactory, pip_install
from support.wheels import WheelFactory, record_hash

TITLE = "\x1b]0;pwned\x07"  # sets the terminal's title
MISSING = [f"{TITLE}.so", "\x9b2J.so", "\x1b[31mred.so", "tab\there.so"]
ON_DISK = b"lib\x1b[2J\nfake line\xff.so"  # a real file no RECORD lists, not UTF-8
NAME, VERSION = "ldt-evil\x1b[31m", "1.0\x07"
# Every control character but the newline that ends a line; and the C1 ones, as UTF-8.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")
SGR = re.compile("\x1b\\[[0-9;]*m")  # the colours rich writes, and nothing else


@pytest.fixture(scope="module")
def hostile(module_venv: VenvFactory, module_wheels: WheelFactory) -> Venv:
    """A venv with ldt-inert, whose RECORD lists files named MISSING (gone from disk) and
    whose package directory holds ON_DISK; and a hand-written dist-info NAME VERSION."""
    venv = module_venv("inert")
    pip_install(venv, module_wheels("ldt-inert", "1.0", {"inert/__init__.py": b""}))
    record = venv.dist_info("ldt_inert-1.0.dist-info") / "RECORD"
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for name in MISSING:
        writer.writerow([f"inert/{name}", record_hash(b"x"), "1"])
    record.write_text(record.read_text() + out.getvalue())
    (venv.site_packages / "inert" / os.fsdecode(ON_DISK)).write_bytes(b"\x7fELF")
    evil = venv.site_packages / "ldt_evil-1.0.dist-info"
    evil.mkdir()
    (evil / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n\n")
    (evil / "INSTALLER").write_text("pip\n")
    (evil / "RECORD").write_text(f"evil/{TITLE}.py,{record_hash(b'y')},1\n")
    return venv


def no_raw_controls(text: str) -> None:
    hits = sorted({f"\\x{ord(c):02x}" for c in RAW.findall(text)})
    assert hits == [], f"raw control characters in the output: {hits}"


def test_check_text_spells_every_control_character(hostile: Venv, libdoctor: Libdoctor) -> None:
    run = libdoctor.check(hostile.path, "-v", "--all", "--color", "never", "--no-libraries")
    assert run.rc == 1, run.describe()
    no_raw_controls(run.stdout)
    site = hostile.site_packages
    for name in MISSING:
        assert inert(str(site / "inert" / name)) in run.stdout, name
    assert "\\x1b]0;pwned\\x07.so" in run.stdout
    assert "lib\\x1b[2J\\nfake line\\xff.so" in run.stdout  # on disk: one line, bytes spelled
    assert not any(line.startswith("fake line") for line in run.stdout.splitlines())
    assert "ldt-evil\\x1b[31m 1.0\\x07" in run.stdout  # the distribution's name and version


def test_check_in_colour_writes_only_its_own_escapes(hostile: Venv, libdoctor: Libdoctor) -> None:
    run = libdoctor.check(hostile.path, "-v", "--color", "always", "--no-libraries")
    assert run.rc == 1, run.describe()
    assert SGR.search(run.stdout)  # it is in colour
    no_raw_controls(SGR.sub("", run.stdout))


def test_check_json_keeps_every_name_exact(hostile: Venv, libdoctor: Libdoctor) -> None:
    run = libdoctor.check(hostile.path, "--json", "--all", "--no-libraries")
    assert run.rc == 1, run.describe()
    assert RAW.search(run.stdout) is None  # JSON escapes them itself
    doc = run.json()
    paths = {p for f in doc["findings"] for p in f.get("paths", [])}
    site = hostile.site_packages
    assert {str(site / "inert" / n) for n in MISSING} <= paths
    assert {"name": NAME, "version": VERSION} in [f.get("distribution") for f in doc["findings"]]


def test_html_and_sarif_carry_no_raw_control_byte(
    hostile: Venv, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    page = tmp_path / "page.html"
    sarif = libdoctor.check(
        hostile.path, "--all", "--no-libraries", "--format", "sarif", "--html", page
    )
    assert sarif.rc == 1, sarif.describe()
    no_raw_controls(page.read_text("utf-8"))
    assert "\\x1b]0;pwned\\x07.so" in page.read_text("utf-8")
    no_raw_controls(sarif.stdout)
    log = json.loads(sarif.stdout)
    messages = [r["message"]["text"] for r in log["runs"][0]["results"]]
    for message in messages:
        no_raw_controls(message.replace("\nFix: ", " "))  # the decoded text is inert too
    assert any("ldt-evil\\x1b[31m" in m for m in messages)


def test_fleet_spells_a_hostile_node_name(
    hostile: Venv, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    """A snapshot's node field is a string anyone on that node wrote."""
    files: list[Path] = []
    for node in ("node-a", f"{TITLE}node-b\nFAKE: all nodes match"):
        out = tmp_path / f"{len(files)}.json"
        run = libdoctor("snapshot", hostile.path, "-o", out)
        assert run.rc == 0, run.describe()
        doc = json.loads(out.read_bytes())
        doc["node"] = node
        if files:  # node-b differs: a distribution fewer
            doc["distributions"] = doc["distributions"][1:]
        out.write_text(json.dumps(doc))
        files.append(out)
    text = libdoctor("fleet", *files, "--reference", "node-a", "--color", "never")
    assert text.rc == 1, text.describe()
    no_raw_controls(text.stdout)
    assert "\\x1b]0;pwned\\x07node-b\\nFAKE: all nodes match" in text.stdout
    assert not any(line.startswith("FAKE") for line in text.stdout.splitlines())
    page = tmp_path / "fleet.html"
    html = libdoctor("fleet", *files, "--reference", "node-a", "--html", page)
    assert html.rc == 1, html.describe()
    no_raw_controls(page.read_text("utf-8"))
    doc = libdoctor("fleet", *files, "--reference", "node-a", "--json").json()
    assert doc["differing"] == [f"{TITLE}node-b\nFAKE: all nodes match"]


def test_an_error_naming_a_hostile_path_is_one_line(libdoctor: Libdoctor, tmp_path: Path) -> None:
    target = tmp_path / f"env{TITLE}\nlibdoctor: everything is fine"
    run = libdoctor("check", target)
    assert (run.rc, run.stdout) == (2, "")
    assert run.stderr == f"libdoctor: error: target {inert(str(target))} does not exist\n"


def test_plan_names_a_hostile_member_inertly(
    new_venv: VenvFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    venv = new_venv("plan")
    member = f"../../{TITLE}x"
    wheel = hostile_wheel(tmp_path, "evil", "1.0", {"evil/__init__.py": b"", member: b"x"})
    run = libdoctor("plan", "install", wheel, venv.path, "--color", "never")
    assert run.rc == 1, run.describe()
    no_raw_controls(run.stdout)
    assert f"the member ../../{inert(TITLE)}x would land outside" in run.stdout


# --------------------------------------------------------------------------- inert itself

_SAFE = st.text(st.characters(blacklist_categories=("Cc", "Cs")))


@given(_SAFE)
def test_inert_is_the_identity_on_text_without_controls(text: str) -> None:
    assert inert(text) == text


@given(st.text())
def test_inert_leaves_no_control_character(text: str) -> None:
    spelled = inert(text)
    assert RAW.search(spelled) is None and "\n" not in spelled
    spelled.encode("utf-8")  # no lone surrogate either: any stream takes it
