"""A project's page on a simple index (PEP 503 HTML or PEP 691 JSON): its files and their
sha256, as an installer sees them.

``release_files`` keeps what it found for one release in the user cache
(``<cache>/index-release/<key>.json``): a release's files on an index do not change once
uploaded (PyPI never lets a file be replaced), so planning the same pins again asks nothing.

One GET through ``remote.Http`` (the same deadline, credentials and proxies as a wheel's
reading), asking for JSON first; the page is read at most ``MAX_PAGE`` bytes. What the page
says is what a lock's hash is checked against, and where a pinned requirement's wheels are.
"""

from __future__ import annotations

import hashlib
import html.parser
import json
import os
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.client import HTTPException

from libdoctor.bounded import loads_json, read_file
from libdoctor.environment.distributions import canonicalize_name
from libdoctor.environment.parsed import write_atomic
from libdoctor.errors import LibdoctorError
from libdoctor.external.remote import Http

__all__ = ["MAX_PAGE", "PYPI", "IndexFile", "project_files", "release_files"]

PYPI = "https://pypi.org/simple"
MAX_PAGE = 64 << 20  # torch's JSON page on PyPI is a few MB
_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"


@dataclass(frozen=True, slots=True)
class IndexFile:
    filename: str
    url: str  # absolute
    sha256: str | None  # lower-case hex, when the index gives one


def project_files(
    index: str,
    name: str,
    credentials: Sequence[str] = (),
    wanted: Callable[[str], bool] | None = None,
) -> tuple[IndexFile, ...]:
    """Every file INDEX lists for project NAME (those whose file name WANTED accepts); one
    ``LibdoctorError`` line when it cannot."""
    page = f"{index.rstrip('/')}/{canonicalize_name(name)}/"
    conn = Http(page, (index, *credentials), what="index page")
    response = conn.open(None, accept=_ACCEPT)
    try:
        body = response.read(MAX_PAGE + 1)
    except (OSError, HTTPException) as exc:
        raise LibdoctorError(f"cannot read index page {conn.url}: {exc}") from None
    finally:
        response.close()
    if len(body) > MAX_PAGE:
        raise LibdoctorError(f"index page {conn.url} is over {MAX_PAGE:,} bytes (MAX_PAGE)")
    kind = response.headers.get("Content-Type", "")
    base = response.geturl() or conn.url
    try:
        if "json" in kind:
            return _from_json(json.loads(body), base, wanted)
        found = _from_html(body.decode("utf-8", "replace"), base)
        return tuple(f for f in found if wanted is None or wanted(f.filename))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise LibdoctorError(f"index page {conn.url} does not parse: {exc}") from None


def _from_json(
    doc: dict[str, object], base: str, wanted: Callable[[str], bool] | None = None
) -> tuple[IndexFile, ...]:
    """The page's files; those WANTED refuses are left before their URL is made (torch's
    page lists a thousand files for the one release a pin wants)."""
    files = doc["files"]
    if not isinstance(files, list):
        raise TypeError("files is not a list")
    out = []
    for entry in files:
        if wanted is not None and not wanted(str(entry["filename"])):
            continue
        hashes = entry.get("hashes") or {}
        url = urllib.parse.urljoin(base, str(entry["url"]))
        out.append(IndexFile(str(entry["filename"]), url, _hex(hashes.get("sha256"))))
    return tuple(out)


def _hex(value: object) -> str | None:
    return value.lower() if isinstance(value, str) and value else None


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str]] = []  # (href, text)
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href") or ""
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.found.append((self._href, "".join(self._text).strip()))
            self._href = None


def _from_html(text: str, base: str) -> tuple[IndexFile, ...]:
    parser = _Anchors()
    parser.feed(text)
    out = []
    for href, label in parser.found:
        url, _, fragment = urllib.parse.urljoin(base, href).partition("#")
        algorithm, _, digest = fragment.partition("=")
        filename = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rpartition("/")[2])
        sha256 = _hex(digest) if algorithm == "sha256" else None
        out.append(IndexFile(filename or label, url, sha256))
    return tuple(out)


def _of_version(version: str) -> Callable[[str], bool]:
    """Whether a file name is of release VERSION: its version field (a wheel's second,
    an sdist's last) compared as a version, each distinct field parsed once, and the few
    that match parsed whole, as ``_is_version`` does."""
    from packaging.version import InvalidVersion, Version

    try:
        pinned = Version(version)
    except InvalidVersion:
        return lambda filename: False
    same: dict[str, bool] = {}

    def of_version(filename: str) -> bool:
        field = _version_field(filename)
        if field is None:
            return False
        if field not in same:
            try:
                same[field] = Version(field) == pinned
            except InvalidVersion:
                same[field] = False
        return same[field] and _is_version(filename, version)

    return of_version


def _version_field(filename: str) -> str | None:
    """The version part of a wheel's or an sdist's file name, as packaging splits them."""
    if filename.endswith(".whl"):
        parts = filename[: -len(".whl")].split("-")
        return parts[1] if len(parts) in (5, 6) else None
    for suffix in (".tar.gz", ".zip"):
        if filename.endswith(suffix):
            return filename[: -len(suffix)].rpartition("-")[2] or None
    return None


def _is_version(filename: str, version: str) -> bool:
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        parse_sdist_filename,
        parse_wheel_filename,
    )
    from packaging.version import InvalidVersion, Version

    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1] == Version(version)
        return parse_sdist_filename(filename)[1] == Version(version)
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return False


def _release_file(cache_dir: str, index: str, name: str, version: str) -> str:
    key = hashlib.sha256(f"{index.rstrip('/')}|{canonicalize_name(name)}|{version}".encode())
    return os.path.join(cache_dir, "index-release", f"{key.hexdigest()}.json")


def release_files(
    index: str,
    name: str,
    version: str,
    *,
    cache_dir: str | None,
    credentials: Sequence[str] = (),
    offline: bool = False,
) -> tuple[IndexFile, ...] | None:
    """The files of NAME VERSION on INDEX, from the cache when it holds them; None when
    OFFLINE and it does not."""
    path = _release_file(cache_dir, index, name, version) if cache_dir else None
    if path is not None:
        try:  # bounded as any input (a FIFO is not waited on, a deep nesting refused)
            rows = loads_json(read_file(path))
            return tuple(IndexFile(str(f), str(u), _hex(s)) for f, u, s in rows)
        except (OSError, ValueError, TypeError):
            pass
    if offline:
        return None
    files = project_files(index, name, credentials, wanted=_of_version(version))
    if path is not None and files:
        _keep(path, [[f.filename, f.url, f.sha256] for f in files])
    return files


def _keep(path: str, rows: list[list[str | None]]) -> None:
    """Best effort, as the wheel-index cache: a failed write costs a request next time."""
    write_atomic(path, json.dumps(rows).encode())  # one C-encoded write, not one per token
