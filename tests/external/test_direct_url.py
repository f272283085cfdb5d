"""``direct_url.json`` (PEP 610) read as pip reads it: ``DirectUrl.from_json`` is the oracle.

pip treats a file it cannot parse as "no direct URL" (installed from an index): so must
``lockfile.installed_from``, or a broken file would pass for a locked git source.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from libdoctor.external.lockfile import installed_from

pip_direct_url = pytest.importorskip("pip._internal.models.direct_url")

GIT = {"url": "https://example.org/x.git", "vcs_info": {"vcs": "git", "commit_id": "a" * 40}}
ARCHIVE = {"url": "file:///w/x-1.0-py3-none-any.whl", "archive_info": {"hashes": {"sha256": "ab"}}}
CASES: dict[str, bytes] = {
    "git": json.dumps(GIT).encode(),
    "archive": json.dumps(ARCHIVE).encode(),
    "directory": json.dumps({"url": "file:///w/x", "dir_info": {"editable": True}}).encode(),
    "two infos": json.dumps({**GIT, "archive_info": {}}).encode(),
    "no info": json.dumps({"url": "file:///w/x"}).encode(),
    "url not a string": json.dumps({**GIT, "url": 7}).encode(),
    "no url": json.dumps({"vcs_info": GIT["vcs_info"]}).encode(),
    "vcs without vcs": json.dumps({"url": "u", "vcs_info": {"commit_id": "c"}}).encode(),
    "vcs without commit": json.dumps({"url": "u", "vcs_info": {"vcs": "git"}}).encode(),
    "a BOM": b"\xef\xbb\xbf" + json.dumps(GIT).encode(),
    "UTF-16": json.dumps(GIT).encode("utf-16"),
    "not JSON": b"{",
    "a list": b"[]",
    "info not an object": json.dumps({"url": "u", "dir_info": []}).encode(),
}


def _pip_reads(data: bytes) -> tuple[str | None, str | None]:
    """(kind, url) as pip's DirectUrl reads DATA; (None, None): pip sees no direct URL."""
    try:
        found = pip_direct_url.DirectUrl.from_json(data.decode("utf-8"))
    except Exception:  # pip catches every parse failure and warns
        return None, None
    kind = {
        "ArchiveInfo": "archive",
        "DirInfo": "directory",
        "VcsInfo": "vcs",
    }[type(found.info).__name__]
    return kind, found.url


@pytest.mark.parametrize("case", sorted(CASES))
def test_direct_url_reads_as_pip_reads_it(case: str, tmp_path: Path) -> None:
    (tmp_path / "direct_url.json").write_bytes(CASES[case])
    found = installed_from(str(tmp_path))
    kind, url = _pip_reads(CASES[case])
    assert (found.kind, found.url) == (kind, url), case
