"""Issue 23: a backup is hostile input. Whoever could write the cache directory wrote its
journal, listing, closing listing and copies: each is read bounded, each name in it is checked
to stay under the prefix, and a copy is opened without following a link. One bad backup is
skipped with one line and blocks nothing else; restoring twice says "already restored".

Every backup here is a real one, taken by a real ``libdoctor uninstall --force`` of a wheel
real pip installed; the attack is then made on it (or on a copy of it) on disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.hostile import DEEP, one_error, sparse
from support.repairs import Cli, copy_backup, diff_states, tree_state
from support.rss import RSS_BOUND, measured, peak_rss
from support.venvs import Venv, VenvFactory, pip_install
from support.wheels import WheelFactory

Doc = dict[str, Any]
FILES = {
    "hst/__init__.py": b"A = 1\n",
    "hst/data.txt": b"the wheel's data\n" * 50,
    "hst/more.txt": b"more of it\n" * 40,
    "hst/last.txt": b"and the last\n" * 30,
}


@dataclass
class Taken:
    venv: Venv
    cli: Cli
    path: Path  # the backup directory

    def journal(self) -> Doc:
        doc: Doc = json.loads((self.path / "journal.json").read_text())
        return doc

    def saved(self, name: str) -> Doc:
        """The journal's entry for the saved file hst/NAME."""
        target = str(self.venv.site_packages / "hst" / name)
        (item,) = (f for f in self.journal()["files"] if f["path"] == target)
        found: Doc = item
        return found


def _take(venv: Venv, wheels: WheelFactory, cache: Path) -> Taken:
    pip_install(venv, wheels("ldt-hostile", "1.0", FILES))
    cli = Cli(cache)
    run = cli("uninstall", "--force", "ldt-hostile", venv.path)
    assert run.rc == 0, run.describe()
    (path,) = (p for p in cli.backups.iterdir() if p.is_dir())
    return Taken(venv, cli, path)


@pytest.fixture(scope="module")
def taken(
    module_venv: VenvFactory, module_wheels: WheelFactory, tmp_path_factory: pytest.TempPathFactory
) -> Taken:
    """One backup for the cases refused before anything changes (each damages a copy)."""
    return _take(module_venv("hostile"), module_wheels, tmp_path_factory.mktemp("hostile-cache"))


@pytest.fixture
def fresh(new_venv: VenvFactory, make_wheel: WheelFactory, tmp_path: Path) -> Taken:
    """A backup of this test's own, for the cases that do restore."""
    return _take(new_venv("hostile"), make_wheel, tmp_path / "cache-home")


def _edit(path: Path, edit: Callable[[Doc], None]) -> None:
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


# --------------------------------------------------------------------------- refused whole


def _files0(field: str, value: Any) -> Callable[[Doc], None]:
    def edit(doc: Doc) -> None:
        doc["files"][0][field] = value

    return edit


def _journal(edit: Callable[[Doc], None]) -> Callable[[Path, Taken], None]:
    return lambda copy, taken: _edit(copy / "journal.json", edit)


def _write(name: str, data: bytes) -> Callable[[Path, Taken], None]:
    def write(copy: Path, taken: Taken) -> None:
        (copy / name).write_bytes(data)

    return write


def _sparse(name: str) -> Callable[[Path, Taken], None]:
    def make(copy: Path, taken: Taken) -> None:
        sparse(copy / name)

    return make


def _outside_path(copy: Path, taken: Taken) -> None:
    climbing = f"{taken.venv.path}/lib/../../outside.txt"
    _edit(copy / "journal.json", _files0("path", climbing))


def _listing_outside(copy: Path, taken: Taken) -> None:
    def edit(doc: Doc) -> None:
        first = next(iter(doc["entries"].values()))
        doc["entries"]["/etc/passwd"] = first

    _edit(copy / "listing.json", edit)


def _deep_history(copy: Path, taken: Taken) -> None:
    doc = taken.journal()
    history = '[{"x": ' + "[" * 70 + "]" * 70 + "}]"
    text = json.dumps(doc)[:-1] + f', "history": {history}}}'
    (copy / "journal.json").write_text(text)


# (case, attack on the copy, what the one line says)
REFUSED = [
    ("journal nested 100,000 deep", _write("journal.json", DEEP), "(MAX_JSON_DEPTH)"),
    ("history nested 71 deep", _deep_history, "(MAX_JSON_DEPTH)"),
    ("journal of 600 MB", _sparse("journal.json"), "(MAX_FILE_BYTES)"),
    (
        "schema_version true",
        _journal(lambda doc: doc.update(schema_version=True)),
        "journal schema true unknown",
    ),
    (
        "a saved file outside the prefix",
        _journal(_files0("path", "/etc/passwd")),
        'files[0].path is "/etc/passwd", expected a normalized absolute path inside',
    ),
    ("a saved file climbing out with ..", _outside_path, "files[0].path is"),
    (
        "a copy in another directory",
        _journal(_files0("copy", "tmp/000000")),
        'files[0].copy is "tmp/000000", expected a copy inside the backup',
    ),
    ("a listing nested 100,000 deep", _write("listing.json", DEEP), "(MAX_JSON_DEPTH)"),
    ("a listing of 600 MB", _sparse("listing.json"), "(MAX_FILE_BYTES)"),
    ("a listing entry outside the prefix", _listing_outside, "damaged prefix listing"),
    ("a closing listing nested deep", _write("after.json", DEEP), "(MAX_JSON_DEPTH)"),
]


@pytest.mark.parametrize(("case", "attack", "says"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_hostile_backup_is_refused_in_one_line(
    taken: Taken, tmp_path: Path, case: str, attack: Callable[[Path, Taken], None], says: str
) -> None:
    cli = Cli(tmp_path / "cache-home")
    copy = copy_backup(taken.path, cli)
    attack(copy, taken)
    before = tree_state(taken.venv.path, hashed=False)
    rss = tmp_path / "rss"
    run = cli("restore", copy.name, prefix=measured(rss))
    assert says in one_error(run), run.describe()
    assert peak_rss(rss) < RSS_BOUND
    assert diff_states(before, tree_state(taken.venv.path, hashed=False)) == []

    listed = cli("restore", "--list")
    if "journal" in case or "history" in case or "schema" in case or "saved" in case:
        assert listed.rc == 0 and "Skipped 1 damaged backup(s)" in listed.stdout, listed.describe()
    else:  # the journal itself is sound: the backup is listed, only restoring it fails
        assert listed.rc == 0 and copy.name in listed.stdout, listed.describe()


# --------------------------------------------------------------------------- blocks nothing


def test_one_bad_backup_blocks_nothing(
    new_venv: VenvFactory, make_wheel: WheelFactory, tmp_path: Path
) -> None:
    """A journal of 100,000 '[' beside a good backup: every command still runs, each says
    one line about it, and nothing removes or restores it."""
    taken = _take(new_venv("blocked"), make_wheel, tmp_path / "cache-home")
    cli = taken.cli
    bad = cli.backups / "20200101-000000-badbad"
    bad.mkdir()
    (bad / "journal.json").write_bytes(DEEP)
    why = "JSON nested deeper than 64 (MAX_JSON_DEPTH), not read"
    note = f"{bad} is not a readable libdoctor backup: {why}"

    listed = cli("restore", "--list")
    assert listed.rc == 0 and listed.stderr == "", listed.describe()
    assert taken.path.name in listed.stdout
    skipped = ["Skipped 1 damaged backup(s), not listed:", f"  {note}"]
    assert listed.stdout.splitlines()[-2:] == skipped, listed.describe()
    backups = cli("backups")
    assert backups.rc == 0 and backups.stdout.splitlines()[-2:] == skipped, backups.describe()
    assert cli("backups", "--json").json()["skipped"] == [note]
    assert "1 damaged backup(s) skipped" in one_error(cli("restore"))
    assert "backup 20200101-000000-badbad is damaged, not removed" in one_error(
        cli("backups", "remove", bad.name)
    )
    assert cli("backups", "prune", "--keep", "1").rc == 0

    pip_install(taken.venv, make_wheel("ldt-other", "1.0", {"oth/__init__.py": b""}))
    run = cli("uninstall", "--force", "ldt-other", taken.venv.path)
    assert run.rc == 0, run.describe()
    notes = [line for line in run.stderr.splitlines() if "damaged" in line]
    assert notes == [f"libdoctor: skipped a damaged backup, {note}"], run.describe()
    restored = cli("restore", taken.path.name)
    assert restored.rc == 0, restored.describe()
    assert (bad / "journal.json").read_bytes() == DEEP  # never touched


# --------------------------------------------------------------------------- the copies


def _point_copy_at(taken: Taken, name: str, make: Callable[[Path], None], data: bytes) -> str:
    """Replace hst/NAME's copy by what MAKE puts at its place, and make the journal claim
    DATA's size and hash (what an attacker who can write the backup would do)."""
    item = taken.saved(name)
    copy = taken.path / item["copy"]
    copy.unlink()
    make(copy)

    def claim(doc: Doc) -> None:
        for entry in doc["files"]:
            if entry["copy"] == item["copy"]:
                entry.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())

    _edit(taken.path / "journal.json", claim)
    return str(item["copy"])


def test_a_copy_is_never_followed_nor_read_from_a_device(fresh: Taken, tmp_path: Path) -> None:
    """Issue 23: a copy swapped for a symlink to a file outside was followed ("Restored and
    verified" with the foreign bytes). A link to /dev/zero filled the disk; a FIFO hung."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_bytes(b"not the environment's\n")
    outside_before = tree_state(outside)
    linked = _point_copy_at(fresh, "data.txt", lambda p: p.symlink_to(secret), secret.read_bytes())
    zero = _point_copy_at(fresh, "more.txt", lambda p: p.symlink_to("/dev/zero"), b"")
    fifo = _point_copy_at(fresh, "last.txt", lambda p: os.mkfifo(p), b"")

    rss = tmp_path / "rss"
    run = fresh.cli("restore", fresh.path.name, "--json", timeout=60, prefix=measured(rss))
    assert run.rc == 1, run.describe()
    assert peak_rss(rss) < RSS_BOUND
    site = fresh.venv.site_packages / "hst"
    assert {p["path"]: p["reason"] for p in run.json()["problems"]} == {
        str(site / "data.txt"): f"not restored, left as it is: the backup copy {linked} is "
        "a symlink, not followed",
        str(site / "more.txt"): f"not restored, left as it is: the backup copy {zero} is "
        "a symlink, not followed",
        str(site / "last.txt"): f"not restored, left as it is: the backup copy {fifo} is "
        "not a regular file",
    }
    assert sorted(p.name for p in site.iterdir()) == [
        "__init__.py",
        "__pycache__",
    ]  # no foreign bytes
    assert (site / "__init__.py").read_bytes() == FILES["hst/__init__.py"]
    assert diff_states(outside_before, tree_state(outside)) == []


def test_a_copies_directory_swapped_for_a_link_is_not_followed(
    fresh: Taken, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    (fresh.path / "files").rename(elsewhere)  # the very copies, only somewhere else
    (fresh.path / "files").symlink_to(elsewhere)
    run = fresh.cli("restore", fresh.path.name, "--json")
    assert run.rc == 1, run.describe()
    reasons = {p["reason"] for p in run.json()["problems"]}
    assert reasons == {
        "not restored, left as it is: the backup's files/ is a symlink, not followed"
    }
    hst = fresh.venv.site_packages / "hst"
    assert [p for p in hst.rglob("*") if not p.is_dir()] == []  # its directories only


def test_a_directory_now_a_link_out_keeps_the_outside_mode(fresh: Taken, tmp_path: Path) -> None:
    """The listing's directory hst/ is a symlink to a directory outside now: its mode and
    mtime are put back on directories only (chmod followed the link)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept.txt").write_bytes(b"outside\n")
    outside.chmod(0o751)
    before = tree_state(outside)
    (fresh.venv.site_packages / "hst").symlink_to(outside)
    run = fresh.cli("restore", fresh.path.name, "--json")
    assert run.rc == 1, run.describe()
    assert diff_states(before, tree_state(outside)) == []
    assert stat.S_IMODE(outside.stat().st_mode) == 0o751


# --------------------------------------------------------------------------- twice


def test_restoring_twice_says_already_restored(fresh: Taken) -> None:
    # An older libdoctor journaled what a RECORD named outside the prefix: dropped, harmless.
    _edit(
        fresh.path / "journal.json",
        lambda doc: doc["steps"][0].update(wrote=["/etc/passwd", *doc["steps"][0]["wrote"]]),
    )
    cli, name = fresh.cli, fresh.path.name
    first = cli("restore", name)
    assert first.rc == 0 and first.stdout.splitlines()[-1].startswith("Restored and verified")
    state = tree_state(fresh.venv.path)
    again = cli("restore", name)
    assert again.rc == 0, again.describe()
    assert again.stdout.splitlines()[-1] == (
        "Already restored: what the run changed is as it was before; nothing to do."
    )
    doc = cli("restore", name, "--json").json()
    assert doc["already"] is True and doc["ok"] is True and doc["changed_later"] == []
    assert cli("restore", name, "--dry-run", "--json").json()["already"] is True
    assert diff_states(state, tree_state(fresh.venv.path)) == []

    (fresh.venv.site_packages / "hst" / "data.txt").write_bytes(b"edited after the restore\n")
    refused = cli("restore", name)
    assert refused.rc == 1, refused.describe()
    assert "were changed after it was restored" in refused.stdout, refused.describe()


# --------------------------------------------------------------------------- the fix's reads


def test_a_wheel_whose_entry_points_inflate_to_gigabytes_costs_nothing(
    new_venv: VenvFactory, make_wheel: WheelFactory, tmp_path: Path
) -> None:
    """``fix`` reads each --find-links wheel's entry_points.txt to know the scripts a
    reinstall writes: 400 MB inflated from 400 kB was read whole (2.5 GB RSS)."""
    venv = new_venv("bomb")
    wheel = make_wheel("ldt-hostile", "1.0", FILES)
    pip_install(venv, wheel)
    (venv.site_packages / "hst" / "data.txt").unlink()
    bombs = tmp_path / "bombs"
    bombs.mkdir()
    bomb = bombs / wheel.name
    bomb.write_bytes(wheel.read_bytes())
    with (
        zipfile.ZipFile(bomb, "a", zipfile.ZIP_DEFLATED) as archive,
        archive.open("ldt_hostile-1.0.dist-info/entry_points.txt", "w") as member,
    ):
        member.write(b"[console_scripts]\nhst = hst:main\n#")
        for _ in range(400):
            member.write(b"A" * (1 << 20))
    cli = Cli(tmp_path / "cache-home")
    args = ("fix", venv.path, "--dry-run", "--no-index", "--find-links")
    clean = cli(*args, wheel.parent)
    rss = tmp_path / "rss"
    run = cli(*args, bombs, prefix=measured(rss))
    assert run.rc == clean.rc and run.stdout == clean.stdout.replace(
        str(wheel.parent), str(bombs)
    ), run.describe()
    assert peak_rss(rss) < RSS_BOUND
