"""Issue 13: a hand-edited journal.json or listing.json is a one-line error naming the field,
never a TypeError or OverflowError traceback; ``restore --list`` skips it with a note.

Each corruption is made on a copy of one real backup, taken by a real
``libdoctor uninstall --force`` of a real wheel installed by real pip.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.repairs import Cli, copy_backup
from support.venvs import Venv, VenvFactory, pip_install
from support.wheels import WheelFactory

Doc = dict[str, Any]
Corruption = Callable[[Doc], None]


class Backup:
    def __init__(self, venv: Venv, path: Path) -> None:
        self.venv = venv
        self.path = path


@pytest.fixture(scope="module")
def backup(
    module_venv: VenvFactory, module_wheels: WheelFactory, tmp_path_factory: pytest.TempPathFactory
) -> Backup:
    venv = module_venv("journal")
    files = {"jrn/__init__.py": b"A = 1\n", "jrn/data.txt": b"data\n" * 100}
    pip_install(venv, module_wheels("ldt-journal", "1.0", files))
    cli = Cli(tmp_path_factory.mktemp("journal-cache"))
    run = cli("uninstall", "--force", "ldt-journal", venv.path)
    assert run.rc == 0, run.describe()
    (path,) = (p for p in cli.backups.iterdir() if p.is_dir())
    return Backup(venv, path)


def _first_entry(doc: Doc) -> list[Any]:
    entries: list[Any] = doc["entries"][sorted(doc["entries"])[-1]]
    return entries


def _set(where: Callable[[Doc], Any], key: Any, value: Any) -> Corruption:
    def corrupt(doc: Doc) -> None:
        where(doc)[key] = value

    return corrupt


def _file0(doc: Doc) -> Doc:
    item: Doc = doc["files"][0]
    return item


def _step0(doc: Doc) -> Doc:
    step: Doc = doc["steps"][0]
    return step


JOURNAL_CASES = [
    ("files[0].mtime_ns", _set(_file0, "mtime_ns", 1e30)),
    ("files[0].mtime_ns", _set(_file0, "mtime_ns", 10**30)),
    ("files[0].mode", _set(_file0, "mode", "644")),
    ("files[0].mode", _set(_file0, "mode", 1 << 40)),
    ("files[0].size", _set(_file0, "size", -1)),
    ("files[0].path", _set(_file0, "path", 5)),
    ("files[0].path", _set(_file0, "path", "relative/x.py")),
    ("files[0].copy", _set(_file0, "copy", "../../../etc/passwd")),
    ("files[0].sha256", _set(_file0, "sha256", "abc")),
    ("files[0].original", _set(_file0, "original", "yes")),
    ("files[0].kind", _set(_file0, "kind", "fifo")),
    ("files[0].mtime_ns", lambda doc: _file0(doc).pop("mtime_ns")),
    ("files[0]", _set(lambda doc: doc["files"], 0, "x")),
    ("files", _set(lambda doc: doc, "files", {})),
    ("state", _set(lambda doc: doc, "state", "paused")),
    ("prefix", _set(lambda doc: doc, "prefix", None)),
    ("steps[0].argv", _set(_step0, "argv", "pip uninstall")),
    ("steps[0].returncode", _set(_step0, "returncode", "0")),
    ("steps[0].state", _set(_step0, "state", 3)),
]
LISTING_CASES = [
    ("mtime_ns", _set(_first_entry, 3, 1e300)),
    ("mode", _set(_first_entry, 1, 99999)),
    ("size", _set(_first_entry, 2, None)),
    ("kind", _set(_first_entry, 0, "device")),
    ("expected [kind, mode, size, mtime_ns, uid, gid]", lambda doc: _first_entry(doc).pop()),
    ("entries", _set(lambda doc: doc, "entries", [])),
]


def _damaged_copy(backup: Backup, tmp_path: Path, name: str, corrupt: Corruption) -> Cli:
    cli = Cli(tmp_path / "cache-home")
    copy = copy_backup(backup.path, cli)
    doc = json.loads((copy / name).read_text())
    corrupt(doc)
    (copy / name).write_text(json.dumps(doc))
    return cli


@pytest.mark.parametrize(
    ("field", "corrupt"), JOURNAL_CASES, ids=[f"{i}-{c[0]}" for i, c in enumerate(JOURNAL_CASES)]
)
def test_a_damaged_journal_is_one_line_naming_the_field(
    backup: Backup, tmp_path: Path, field: str, corrupt: Corruption
) -> None:
    cli = _damaged_copy(backup, tmp_path, "journal.json", corrupt)
    run = cli("restore", cli.backups / backup.path.name)
    assert run.rc == 2, run.describe()
    assert "Traceback" not in run.stderr, run.describe()
    assert run.stderr.count("\n") == 1, run.describe()
    assert f"damaged backup journal: {field}" in run.stderr, run.describe()
    assert not (backup.venv.site_packages / "jrn").exists()  # nothing was touched

    listed = cli("restore", "--list")
    assert listed.rc == 0, listed.describe()
    assert "Skipped 1 damaged backup(s)" in listed.stdout, listed.describe()
    assert field in listed.stdout, listed.describe()
    as_json = cli("restore", "--list", "--json").json()
    assert as_json["backups"] == [] and len(as_json["skipped"]) == 1


@pytest.mark.parametrize(
    ("field", "corrupt"), LISTING_CASES, ids=[f"{i}-{c[0]}" for i, c in enumerate(LISTING_CASES)]
)
def test_a_damaged_listing_is_one_line_naming_the_field(
    backup: Backup, tmp_path: Path, field: str, corrupt: Corruption
) -> None:
    cli = _damaged_copy(backup, tmp_path, "listing.json", corrupt)
    run = cli("restore", backup.path.name)
    assert run.rc == 2, run.describe()
    assert "Traceback" not in run.stderr, run.describe()
    assert run.stderr.count("\n") == 1, run.describe()
    assert "damaged prefix listing: " in run.stderr and field in run.stderr, run.describe()
    assert not (backup.venv.site_packages / "jrn").exists()


def test_the_undamaged_backup_restores(backup: Backup, tmp_path: Path) -> None:
    """The reference: the same copy, not edited, restores (run last: it changes the venv)."""
    cli = _damaged_copy(backup, tmp_path, "journal.json", lambda doc: None)
    run = cli("restore", backup.path.name)
    assert run.rc == 0, run.describe()
    assert (backup.venv.site_packages / "jrn" / "data.txt").read_bytes() == b"data\n" * 100
