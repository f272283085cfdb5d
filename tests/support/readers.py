"""The reference readers of the standard formats: the oracles libdoctor's own readers are
held to (differential tests in tests/environment and tests/property).

Each is the reference library itself, called the way pip, importlib.metadata or CPython
call it, never a transcription of its rules:

- METADATA/PKG-INFO and WHEEL: ``email.parser`` with the compat32 policy (what
  ``email.message_from_string`` uses), ``importlib.metadata`` (pip's reader), and
  ``packaging.metadata.parse_email``.
- RECORD: the csv module on the file opened with ``newline=""``.
- entry_points.txt: ``importlib.metadata``'s ``Distribution.entry_points``.
- pyvenv.cfg: CPython's ``site.venv()``, run by a real venv interpreter.
"""

from __future__ import annotations

import csv
import email.message
import email.parser
import email.policy
import glob
import importlib.metadata
import io
import json
import os
import site
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path
from typing import cast

from libdoctor.environment.record import RecordEntry, normalize_hash

__all__ = [
    "MemoryDistribution",
    "csv_rows",
    "email_headers",
    "email_headers_of_bytes",
    "importlib_entry_points",
    "importlib_metadata",
    "packaging_requires",
    "pip_requires",
    "real_dist_infos",
    "record_from_csv",
    "site_venv",
]


def email_headers(text: str) -> list[tuple[str, str]]:
    """Every header of TEXT as ``email.message_from_string`` stores it (``raw_items``)."""
    parser = email.parser.Parser(policy=email.policy.compat32)
    return list(parser.parsestr(text).raw_items())


def email_headers_of_bytes(data: bytes) -> list[tuple[bytes, bytes]]:
    """Every header of DATA as ``email.parser.BytesParser`` (packaging.metadata's reader)
    stores it, as the bytes they were (it decodes ASCII with surrogate escapes)."""
    parser = email.parser.BytesParser(policy=email.policy.compat32)
    return [
        (name.encode("ascii", "surrogateescape"), str(value).encode("ascii", "surrogateescape"))
        for name, value in parser.parsebytes(data).raw_items()
    ]


class MemoryDistribution(importlib.metadata.Distribution):
    """An ``importlib.metadata`` distribution whose files are strings in memory: its own
    readers (``metadata``, ``requires``, ``entry_points``) on exactly the text given."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.files_text = dict(files)

    def read_text(self, filename: str) -> str | None:
        return self.files_text.get(filename)

    def locate_file(self, path: str | os.PathLike[str]) -> Path:
        return Path("/nonexistent") / str(path)


def importlib_metadata(text: str) -> tuple[str | None, str | None, list[str]]:
    """(Name, Version, Requires-Dist) of a METADATA text as importlib.metadata reads it."""
    if not text:
        return None, None, []  # importlib.metadata would go on to PKG-INFO, then fail
    # importlib.metadata's PackageMetadata is an email Message (pip relies on it too)
    meta = cast(email.message.Message, MemoryDistribution({"METADATA": text}).metadata)
    return meta.get("Name"), meta.get("Version"), list(meta.get_all("Requires-Dist") or [])


def pip_requires(text: str) -> list[str]:
    """The Requires-Dist strings pip's ``iter_dependencies`` parses: importlib.metadata's
    values, each stripped (pip's own comment: a folded value may start with a newline)."""
    return [value.strip() for value in importlib_metadata(text)[2]]


def packaging_requires(data: bytes) -> list[str]:
    """Requires-Dist as ``packaging.metadata.parse_email`` reads DATA (a field with bytes
    that are not UTF-8 lands in its ``unparsed``, decoded as latin-1)."""
    from packaging.metadata import parse_email

    raw, unparsed = parse_email(data)
    return list(raw.get("requires_dist", unparsed.get("requires-dist", [])))


def csv_rows(text: str) -> list[list[str]]:
    """A RECORD's rows as the csv module reads the file (``open(..., newline="")``)."""
    return list(csv.reader(io.StringIO(text, newline="")))


def record_from_csv(text: str) -> tuple[list[RecordEntry], int]:
    """The entries, and the number of malformed rows, of a RECORD TEXT read as the csv
    module reads it: each row of three fields is an entry unless its path is empty, its hash
    (libdoctor's ``normalize_hash``) or its size invalid; a row of one blank field is a blank
    line, any other row a malformed one."""
    entries: list[RecordEntry] = []
    problems = 0
    for row in csv_rows(text):
        if len(row) != 3:
            problems += len(row) > 1 or bool(row and row[0].strip())
            continue
        path, digest, size = row
        try:
            entry = RecordEntry(
                path, normalize_hash(digest) if digest else None, _size(size) if size else None
            )
        except ValueError:
            problems += 1
            continue
        if not path:
            problems += 1
            continue
        entries.append(entry)
    return entries, problems


def _size(text: str) -> int:
    if not (text.isdigit() and text.isascii()):
        raise ValueError(text)
    return int(text)


def importlib_entry_points(text: str) -> list[tuple[str, str, str]]:
    """(group, name, value) of every entry point importlib.metadata reads from TEXT."""
    points = MemoryDistribution({"entry_points.txt": text}).entry_points
    return [(e.group, e.name, e.value) for e in points]


_SITE_PROBE = (
    "import json, site, sys; print(json.dumps({'system_site': sys.base_prefix in site.PREFIXES,"
    " 'home': sys._home, 'prefix': sys.prefix}))"
)


def site_venv(python: Path) -> dict[str, object]:
    """What CPython's ``site.venv()`` made of PYTHON's venv's pyvenv.cfg: whether the base
    site-packages are on the path (``system_site``) and the ``home`` it read."""
    done = subprocess.run(
        [str(python), "-c", _SITE_PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    doc = json.loads(done.stdout)
    assert isinstance(doc, dict)
    return doc


def real_dist_infos(*roots: str | os.PathLike[str]) -> list[Path]:
    """Every dist-info and egg-info directory of the environments at hand: this
    interpreter's, its base's, ROOTS, and the real envs of the machine
    (``$LIBDOCTOR_TORCH_ENV``, ``/work/envs/*``): real files nobody here wrote."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    sites = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
    sites.add(os.path.join(sys.base_prefix, "lib", version, "site-packages"))
    envs = [os.fspath(r) for r in roots] + glob.glob("/work/envs/*")
    if os.environ.get("LIBDOCTOR_TORCH_ENV"):
        envs.append(os.environ["LIBDOCTOR_TORCH_ENV"])
    for env in envs:
        sites.update(glob.glob(os.path.join(env, "lib", "python3*", "site-packages")))
    found = {p for s in sites for p in glob.glob(os.path.join(s, "*.dist-info"))}
    found |= {p for s in sites for p in glob.glob(os.path.join(s, "*.egg-info"))}
    return sorted(Path(p) for p in found if os.path.isdir(p))
