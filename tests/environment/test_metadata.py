"""METADATA, WHEEL, INSTALLER and entry_points.txt read as their reference reads them.

Differential: libdoctor's readers against the reference libraries themselves
(support.readers): email.parser (compat32), importlib.metadata (pip's reader) and
packaging.metadata, on hand-made edge cases and on every real METADATA of the
environments at hand. The hypothesis side is tests/property/test_metadata_fuzz.py.
"""

from __future__ import annotations

import email.parser
import email.policy

import pytest
from packaging.requirements import InvalidRequirement, Requirement

from libdoctor.environment.metadata import (
    parse_entry_points,
    parse_installer,
    parse_metadata,
    parse_wheel_tags,
    read_header_lines,
    read_headers,
    script_names,
)
from support.readers import (
    email_headers,
    email_headers_of_bytes,
    importlib_entry_points,
    importlib_metadata,
    packaging_requires,
    pip_requires,
    real_dist_infos,
)

# pandas 2.3.3's METADATA, shortened: the License field's continuation lines include
# whitespace-only ones, and every Requires-Dist comes after it.
PANDAS_SHAPE = (
    "Metadata-Version: 2.1\n"
    "Name: pandas\n"
    "Version: 2.3.3\n"
    "License: BSD 3-Clause License\n"
    "         \n"
    "         Copyright (c) 2008-2011, AQR Capital Management, LLC\n"
    "         All rights reserved.\n"
    "         \n"
    "\t\n"
    "         Redistribution and use in source and binary forms\n"
    "Classifier: Programming Language :: Python\n"
    'Requires-Dist: numpy>=1.23.2; python_version == "3.11"\n'
    "Requires-Dist: python-dateutil>=2.8.2\n"
    "Requires-Dist: pytz>=2020.1\n"
    "Requires-Dist: tzdata>=2022.7\n"
    "Provides-Extra: test\n"
    "Requires-Dist: pytest>=7.3.2; extra == 'test'\n"
    "Description-Content-Type: text/markdown\n"
    "\n"
    "# pandas\n"
    "Requires-Dist: not-a-header-in-the-body\n"
)

CASES: dict[str, str] = {
    "pandas shape": PANDAS_SHAPE,
    "pandas shape, CRLF": PANDAS_SHAPE.replace("\n", "\r\n"),
    "pandas shape, bare CR": PANDAS_SHAPE.replace("\n", "\r"),
    "mixed line ends": "Name: a\r\nVersion: 1\rRequires-Dist: b\nRequires-Dist: c\r\n\r\nbody",
    "CR CR ends the headers": "Name: a\r\rRequires-Dist: b\n",
    "folded value": "Name: a\nRequires-Dist: foo\n  >=1.0\nRequires-Dist: bar\n",
    "tab continuation": "Name: a\nSummary: one\n\ttwo\nRequires-Dist: x\n",
    "whitespace-only first line": " \nName: a\nRequires-Dist: x\n",
    "continuation first": "  lost\nName: a\n",
    "body after blank line": "Name: a\n\nRequires-Dist: b\n",
    "blank line of spaces is a continuation": "Name: a\n   \nRequires-Dist: b\n",
    "a non-header line ends them": "Name: a\ngarbage line\nRequires-Dist: b\n",
    "a name with a space ends them": "Name: a\nRequires-Dist : b\nRequires-Dist: c\n",
    "lower-case names": "name: a\nversion: 1\nrequires-dist: b\nREQUIRES-DIST: c\n",
    "duplicate Name and Version": "Name: first\nName: second\nVersion: 1\nVersion: 2\n",
    "missing Name": "Version: 1.0\nRequires-Dist: x\n",
    "From first": "From someone\nName: a\nRequires-Dist: b\n",
    "From in the middle": "Name: a\nFrom x\n cont\nRequires-Dist: b\n",
    "From last": "Name: a\nRequires-Dist: b\nFrom x\n",
    "colon first": "Name: a\n: no name\n continued\nRequires-Dist: b\n",
    "no space after colon": "Name:a\nRequires-Dist:b\n",
    "empty value": "Name: a\nRequires-Dist:\nRequires-Dist: b\n",
    "trailing blanks": "Name: a  \t\nVersion:\t1.0 \nRequires-Dist:  b  \n",
    "no final newline": "Name: a\nRequires-Dist: b",
    "empty": "",
    "just a newline": "\n",
    "form feed in a value": "Name: a\nSummary: x\x0cy\nRequires-Dist: b\n",
    "form feed first": "Name: a\n\x0cSummary: x\nRequires-Dist: b\n",
    "NEL, LS, PS, VT, FS in values": (
        "Name: a\nSummary: 1\x852\u20283\u20294\x0b5\x1c6\x1d7\x1e8\nRequires-Dist: b\n"
    ),
    "LS splitting a requirement": "Name: a\nRequires-Dist: b\u2028Requires-Dist: c\n",
    "NUL in a value": "Name: a\nSummary: x\x00y\nRequires-Dist: b\n",
    "odd name characters": "Name: a\nX-Weird!#$%&'*+-.^_`|~\"(),/;<=>?@[]{}: v\nRequires-Dist: b\n",
    "non-ASCII in a name ends them": "Name: a\nNäme: x\nRequires-Dist: b\n",
    "BOM": "\ufeffName: a\nRequires-Dist: b\n",
    "whitespace continuation, CRLF": "Name: a\r\nLicense: x\r\n \r\n y\r\nRequires-Dist: b\r\n",
    "long line": "Name: a\nSummary: " + "x" * 100_000 + "\nRequires-Dist: b\n",
    "header after many continuations": "Name: a\nLicense: l\n"
    + " .\n" * 5000
    + "Requires-Dist: b\n",
    "8192-byte chunk boundary in CR LF": "Name: a\nSummary: "
    + "x" * 8171
    + "\r\nRequires-Dist: b\n",
}


@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_headers_are_emails(text: str) -> None:
    assert read_headers(text) == email_headers(text)
    assert read_header_lines(text) == email_headers(text)  # the reference path, any text


@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_metadata_is_what_pip_and_packaging_read(text: str) -> None:
    meta = parse_metadata(text.encode("utf-8"))
    name, version, _ = importlib_metadata(text)
    assert meta.name == (name or "").strip()
    assert meta.version == (version or "").strip()
    assert list(meta.requires_dist) == pip_requires(text)
    assert meta.problem is None
    # packaging.metadata keeps a folded value as email has it, where importlib.metadata
    # re-indents it: either way no requirement (a line break never parses as one).
    theirs = packaging_requires(text.encode())
    assert len(theirs) == len(meta.requires_dist)
    for ours, raw in zip(meta.requires_dist, theirs, strict=True):
        if "\n" in raw:
            assert not _parses(ours) and not _parses(raw)
        else:
            assert ours == raw.strip()


def _parses(text: str) -> bool:
    try:
        Requirement(text)
    except InvalidRequirement:
        return False
    return True


def test_pandas_requirements_are_all_read() -> None:
    meta = parse_metadata(PANDAS_SHAPE.encode())
    assert [r.split(">=")[0] for r in meta.requires_dist] == [
        "numpy",
        "python-dateutil",
        "pytz",
        "tzdata",
        "pytest",
    ]


# Bytes that are not UTF-8: pip cannot read the file at all (strict UTF-8); libdoctor reads
# the headers as email's BytesParser does (packaging.metadata's reader), byte for byte, and
# says why pip cannot.
UNDECODABLE = {
    "latin-1 author": b"Name: a\nAuthor: Jos\xe9\nRequires-Dist: b\n",
    "in a requirement": b"Name: a\nRequires-Dist: b\xff\nRequires-Dist: c\n",
    "in the body only": b"Name: a\nRequires-Dist: b\n\ncaf\xe9\n",
    "in a name": b"Name: a\nX-\xe9: v\nRequires-Dist: b\n",
    "truncated UTF-8": b"Name: a\nSummary: \xe2\x82\nRequires-Dist: b\n",
    "continuation": b"Name: a\nLicense: x\n \xa9 2024\nRequires-Dist: b\n",
}


@pytest.mark.parametrize("data", UNDECODABLE.values(), ids=UNDECODABLE.keys())
def test_undecodable_metadata_reads_as_bytes_parser_and_says_so(data: bytes) -> None:
    text = data.decode("utf-8", "surrogateescape")
    ours = [
        (k.encode("utf-8", "surrogateescape"), v.encode("utf-8", "surrogateescape"))
        for k, v in read_headers(text)
    ]
    assert ours == email_headers_of_bytes(data)
    meta = parse_metadata(data)
    assert meta.problem is not None and meta.problem.startswith("not UTF-8 (byte 0x")
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")  # importlib.metadata's read_text: pip stops here


def test_every_real_metadata_reads_as_email_and_pip_read_it() -> None:
    files = [
        d / ("METADATA" if d.suffix == ".dist-info" else "PKG-INFO") for d in real_dist_infos()
    ]
    files = [f for f in files if f.is_file()]
    assert len(files) >= 10, files  # the dev venv alone holds dozens
    differ = []
    for path in files:
        data = path.read_bytes()
        text = data.decode("utf-8", "surrogateescape")
        meta = parse_metadata(data)
        if not read_headers(text) == read_header_lines(text) == email_headers(text):
            differ.append((path, "headers"))
        elif meta.problem is None and list(meta.requires_dist) != pip_requires(text):
            differ.append((path, "requires"))
    assert differ == []


# --------------------------------------------------------------------------- WHEEL


WHEELS = {
    "plain": "Wheel-Version: 1.0\nGenerator: x\nRoot-Is-Purelib: false\nTag: cp311-none-any\n",
    "two tags, CRLF": "Wheel-Version: 1.0\r\nTag: py2-none-any\r\nTag: py3-none-any\r\n",
    "tag in the body": "Wheel-Version: 1.0\n\nTag: py3-none-any\n",
    "lower-case and padded": "wheel-version: 1.0\ntag:   py3-none-any  \n",
    "folded": "Wheel-Version: 1.0\nTag: py3-none-any\n more\n",
}


@pytest.mark.parametrize("text", WHEELS.values(), ids=WHEELS.keys())
def test_wheel_tags_are_emails_get_all(text: str) -> None:
    parsed = email.parser.Parser(policy=email.policy.compat32).parsestr(text)
    expected = tuple(v.strip() for v in parsed.get_all("Tag") or [])
    assert parse_wheel_tags(text) == expected


def test_every_real_wheel_file_reads_as_email_reads_it() -> None:
    files = [d / "WHEEL" for d in real_dist_infos() if (d / "WHEEL").is_file()]
    assert files
    for path in files:
        text = path.read_text("utf-8")
        parsed = email.parser.Parser(policy=email.policy.compat32).parsestr(text)
        assert parse_wheel_tags(text) == tuple(v.strip() for v in parsed.get_all("Tag") or [])


# --------------------------------------------------------------------------- INSTALLER


@pytest.mark.parametrize(
    ("data", "installer"),
    [
        (b"pip\n", "pip"),
        (b"uv", "uv"),
        (b"\n  conda  \r\n", "conda"),
        (b"pip\nsomething else\n", "pip"),  # pip reads the first non-blank line only
        (b"", ""),
        (b" \n\t\n", ""),
        (b"p\xe9p\n", "p\ufffdp"),  # pip says "" (its read_text fails): still an installer's
    ],
)
def test_installer_reads_as_pip_reads_it(data: bytes, installer: str) -> None:
    assert parse_installer(data) == installer


# --------------------------------------------------------------------------- entry_points.txt


ENTRY_POINTS = {
    "plain": "[console_scripts]\ntool = pkg.cli:main\n\n[gui_scripts]\ngui = pkg.gui:main\n",
    "padded and commented": "  [console_scripts]  \n # comment\n  tool   =   pkg:main  \n",
    "semicolon is no comment": "[console_scripts]\n;tool = pkg:main\n",
    "duplicate names": "[console_scripts]\ntool = a:main\ntool = b:main\n",
    "duplicate groups": "[console_scripts]\na = a:m\n[other]\nx = y\n[console_scripts]\nb = b:m\n",
    "indented line is its own": "[console_scripts]\ntool = a:main\n  more = b:main\n",
    "equals in the value": "[console_scripts]\ntool = a:main [extra=1]\n",
    "before any group": "orphan = a:b\n[console_scripts]\ntool = a:main\n",
    "group spelled oddly": "[[console_scripts]]\ntool = a:main\n[ console_scripts ]\nno = b:c\n",
    "CRLF and CR": "[console_scripts]\r\ntool = a:main\rother = b:main\r\n",
    "colon is no delimiter": "[console_scripts]\ntool = a:main\n",
    "empty": "",
}


@pytest.mark.parametrize("text", ENTRY_POINTS.values(), ids=ENTRY_POINTS.keys())
def test_entry_points_are_importlib_metadatas(text: str) -> None:
    assert [tuple(e) for e in parse_entry_points(text)] == importlib_entry_points(text)


def test_a_line_without_equals_is_dropped_where_importlib_metadata_raises() -> None:
    text = "[console_scripts]\ntool = a:main\nbroken\nother = b:main\n"
    with pytest.raises((ValueError, TypeError)):  # Python 3.11: TypeError, 3.12: ValueError
        importlib_entry_points(text)
    assert script_names(text) == ["tool", "other"]


def test_every_real_entry_points_file_reads_as_importlib_metadata_reads_it() -> None:
    files = [d / "entry_points.txt" for d in real_dist_infos()]
    files = [f for f in files if f.is_file()]
    assert files  # pytest, mypy, ruff...
    for path in files:
        text = path.read_text("utf-8")
        assert [tuple(e) for e in parse_entry_points(text)] == importlib_entry_points(text), path


def test_script_names_are_the_console_and_gui_groups() -> None:
    text = ENTRY_POINTS["plain"] + "[other]\nnot_a_script = x:y\n"
    assert script_names(text) == ["tool", "gui"]
