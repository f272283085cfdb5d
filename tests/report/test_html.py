"""The HTML page of ``check``, ``diff`` and ``fleet`` (report.html): one self-contained file,
well-formed, everything escaped, no reference to anything outside it.

The broken environment is the seed in miniature (``support.seed``): torchlike's extension
module needs ``libcudnn.so.9``, whose file is deleted from ``cudnn-a``; the page must carry
the diagnosis, the findings by distribution and the chain from ``torchlike._C`` to the
missing library. The slow test renders a page in headless Chromium, when it is installed.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pytest

from libdoctor.findings import DistRef, Finding, Fix, Severity
from libdoctor.remedy import Install, Via
from libdoctor.report.html import check_html
from libdoctor.report.text import Line
from support.seed import LIB_REL, build_seed_wheels
from support.venvs import Libdoctor, Venv, VenvFactory, pip_install
from support.wheels import WheelFactory

VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "area", "base", "source"}


class Page(HTMLParser):
    """Checks nesting as it parses: every end tag closes the innermost open element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str | None]] = []
        self.text: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += attrs
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.open[-1:] or 'nothing'}")
        else:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(document: str) -> Page:
    """DOCUMENT parsed and checked: well-formed enough, self-contained."""
    page = Page()
    page.feed(document)
    page.close()
    assert page.errors == [] and page.open == [], (page.errors, page.open)
    assert document.startswith("<!DOCTYPE html>")
    assert "http://" not in document and "https://" not in document
    assert "<script" not in document and "<link" not in document
    assert not any(name in ("src", "href") for name, _ in page.attributes)
    return page


def _broken(new_venv: VenvFactory, make_wheel: WheelFactory) -> Venv:
    """torchlike installed, the libcudnn.so.9 its extension module needs deleted."""
    seed = build_seed_wheels(make_wheel)
    venv = new_venv("a&b")  # a path that needs escaping
    pip_install(venv, seed.cudnn_a, seed.torchlike)
    (venv.site_packages / LIB_REL).unlink()
    return venv


def test_check_html_of_a_broken_env_has_diagnosis_findings_and_chain(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    venv = _broken(new_venv, make_wheel)
    run = libdoctor("check", venv.path, "--format", "html")
    assert run.rc == 1, run.describe()
    page = parse(run.stdout)
    text = "".join(page.text)
    assert "&amp;" in run.stdout and str(venv.path) in text  # escaped in the source
    assert escape(str(venv.path / LIB_REL)) in run.stdout or LIB_REL in text
    for code in ("missing-files", "unresolved-library"):
        assert code in text
    assert "Diagnosis" in text and "Findings by distribution" in text
    assert "cudnn-a 9.1.0" in text and "torchlike 1.0" in text
    assert "import torchlike._C fails: libcudnn.so.9 not found" in text
    assert "libcudnn.so.9  NOT FOUND" in text
    assert page.tags.count("table") == 0 and "details" in page.tags

    out = tmp_path / "report.html"
    both = libdoctor("check", venv.path, "--html", out, "--json")
    assert both.rc == 1 and both.json()["findings"], both.describe()
    assert out.read_text(encoding="utf-8") == run.stdout


def test_check_html_of_a_healthy_env(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor
) -> None:
    venv = new_venv("healthy")
    pip_install(venv, make_wheel("ldt-plain", "1.0", {"ldt_plain/__init__.py": b"V = 1\n"}))
    run = libdoctor("check", venv.path, "--format", "html")
    assert run.rc == 0, run.describe()
    text = "".join(parse(run.stdout).text)
    assert "No problems found" in text
    assert "Library trees" not in text


def test_everything_from_the_environment_is_escaped() -> None:
    nasty = "/env/<script>alert(1)</script>&x'\"/lib.so"
    finding = Finding(
        "missing-files",
        Severity.ERROR,
        f"gone: {nasty}",
        DistRef("<b>pkg</b>", "1&2"),
        paths=(nasty,),
        fix=Fix((Install(("<pkg>",), Via("pip", "pip")),)),
    )
    diagnosis = [Line.of("✗ <cause> & more", "bold red")]
    document = check_html(f"libdoctor: {nasty}", diagnosis, [finding])
    page = parse(document)
    assert "<script>" not in document and "<b>pkg" not in document
    assert "&lt;script&gt;" in document and "&lt;b&gt;pkg&lt;/b&gt; 1&amp;2" in document
    assert "✗ &lt;cause&gt; &amp; more" in document
    assert nasty in "".join(page.text)  # the reader sees the path as it is


def _snapshot(libdoctor: Libdoctor, venv: Venv, out: Path, node: str) -> Path:
    run = libdoctor("snapshot", venv.path, "-o", out)
    assert run.rc == 0, run.describe()
    doc = json.loads(out.read_bytes())
    doc["node"] = node
    out.write_text(json.dumps(doc))
    return out


def test_fleet_html_is_the_node_by_difference_table(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    venv = new_venv("fleet")
    pip_install(venv, make_wheel("ldt-plain", "1.0", {"ldt_plain/__init__.py": b"V = 1\n"}))
    files = [_snapshot(libdoctor, venv, tmp_path / f"n{i}.json", f"gpu-0{i}") for i in (1, 2)]
    pip_install(venv, make_wheel("ldt-plain", "2.0", {"ldt_plain/__init__.py": b"V = 2\n"}))
    files.append(_snapshot(libdoctor, venv, tmp_path / "n3.json", "gpu<03>&"))
    run = libdoctor("fleet", *files, "--format", "html")
    assert run.rc == 1, run.describe()
    page = parse(run.stdout)
    assert page.tags.count("table") == 1 and page.tags.count("tr") == 3
    text = "".join(page.text)
    assert "gpu-01, gpu-02 (reference)" in text
    assert "gpu&lt;03&gt;&amp;" in run.stdout and "gpu<03>&" in text
    assert "ldt-plain 1.0 → 2.0 (upgraded)" in text
    diff = libdoctor("diff", files[0], files[2], "--format", "html")
    assert diff.rc == 1 and "ldt-plain 1.0 → 2.0 (upgraded)" in "".join(parse(diff.stdout).text)
    same = libdoctor("diff", files[0], files[1], "--json")
    assert same.rc == 0 and same.json()["identical"], same.describe()


@pytest.mark.slow
def test_chromium_renders_the_page_without_console_errors(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no chromium or chromium-browser on PATH (Debian: apt-get install chromium)")
    page = tmp_path / "check.html"
    run = libdoctor("check", _broken(new_venv, make_wheel).path, "--html", page)
    assert run.rc == 1 and page.is_file(), run.describe()
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1200,900",
            "--enable-logging=stderr",
            "--v=0",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000, shot.stat().st_size  # a page, not a blank
    width, height = struct.unpack(">II", shot.read_bytes()[16:24])  # IHDR
    assert (width, height) == (1200, 900)
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line]
    assert console == [], console


def test_the_chain_runs_from_the_module_through_each_loader_to_the_requester() -> None:
    from types import SimpleNamespace
    from typing import cast

    from libdoctor.analysis.tree import chain_to
    from libdoctor.loader.model import Closure

    def obj(path: str, loader: str | None) -> SimpleNamespace:
        return SimpleNamespace(path=path, loader=loader)

    def res(requester: str, name: str, status: str) -> SimpleNamespace:
        return SimpleNamespace(requester=requester, name=name, status=status)

    closure = SimpleNamespace(
        root="/m/_C.so",
        loaded=[obj("/m/_C.so", None), obj("/l/a.so", "/m/_C.so"), obj("/l/b.so", "/l/a.so")],
        resolutions=[res("/m/_C.so", "a.so", "found"), res("/l/b.so", "libgone.so", "not_found")],
    )
    chain = chain_to(cast(Closure, closure), "libgone.so")
    assert chain == ("/m/_C.so", "/l/a.so", "/l/b.so")
    assert chain_to(cast(Closure, closure), "a.so") is None
