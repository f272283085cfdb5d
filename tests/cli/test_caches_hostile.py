"""Issue 23: a compile cache is hostile input. Its metadata is read bounded (a kernel's JSON
swapped for /dev/zero, a FIFO or a huge file records nothing and costs nothing), an --env-file
is read bounded, ``clear --dry-run`` answers exactly what the real run does (a refused root
is refused by both), and a damaged backup beside the cache's does not stop a clear.

The caches are laid out as the tools lay them out (``support.caches``), for a venv whose
torch and triton come from wheels built here.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from support.caches import KEY_NOW, KEY_OLD, Caches, kernel, write
from support.hostile import DEEP, one_error, sparse
from support.repairs import Cli, diff_states, tree_state
from support.rss import RSS_BOUND, measured, peak_rss
from support.venvs import Libdoctor

# --------------------------------------------------------------------------- --dry-run


def test_dry_run_refuses_a_root_as_the_real_run_does(cli: Cli, caches: Caches) -> None:
    """TRITON_CACHE_DIR=$HOME: the dry run said "would remove", the real run refused."""
    home = caches.root / "home"
    kernel(home / KEY_OLD, "add_kernel", "3.4.0")
    write(home / "thesis.tex", "years of work\n")
    env = {**caches.env, "TRITON_CACHE_DIR": str(home)}
    before = tree_state(home)
    args = ("caches", "clear", "--all", "triton", str(caches.venv.path))
    dry = cli(*args, "--dry-run", env=env)
    real = cli(*args, "--yes", env=env)
    line = one_error(real)
    assert f"triton: the root {home} is not a cache directory" in line
    assert one_error(dry) == line and dry.stdout == "", dry.describe()
    assert one_error(cli(*args, "--dry-run", "--json", env=env)) == line
    assert diff_states(before, tree_state(home)) == []


def test_dry_run_refuses_an_entry_in_use_as_the_real_run_does(
    cli: Cli, caches: Caches, holder: subprocess.Popen[bytes]
) -> None:
    before = caches.state()
    args = ("caches", "clear", "triton", str(caches.venv.path))
    line = one_error(cli(*args, "--yes", env=caches.env))
    assert f"process {holder.pid}" in line
    assert one_error(cli(*args, "--dry-run", env=caches.env)) == line
    assert diff_states(before, caches.state()) == []


# --------------------------------------------------------------------------- metadata


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _huge(path: Path) -> None:
    sparse(path, 100 << 20)  # past MAX_SMALL_FILE_BYTES


METADATA = [("a link to /dev/zero", _dev_zero), ("a FIFO", os.mkfifo), ("100 MB", _huge)]


@pytest.mark.parametrize(("case", "make"), METADATA, ids=[c[0] for c in METADATA])
def test_hostile_metadata_records_nothing_and_costs_nothing(
    cli: Cli,
    libdoctor: Libdoctor,
    caches: Caches,
    tmp_path: Path,
    case: str,
    make: Callable[[Path], None],
) -> None:
    """A kernel's metadata JSON is read whole for its triton_version: /dev/zero was read
    until memory ran out, a FIFO hung ``caches`` and ``check`` both."""
    metadata = caches.triton / KEY_OLD / "add_kernel.json"
    metadata.unlink()
    make(metadata)
    rss = tmp_path / "rss"
    run = cli("caches", str(caches.venv.path), "--json", env=caches.env, prefix=measured(rss))
    assert run.rc == 1, run.describe()  # the other kinds' stale entries
    assert peak_rss(rss) < RSS_BOUND
    (triton,) = (c for c in run.json()["caches"] if c["kind"] == "triton")
    entries = {e["name"]: e for e in triton["entries"]}
    assert entries[KEY_OLD]["recorded"] == [] and not entries[KEY_OLD]["stale"]
    assert entries[KEY_NOW]["recorded"][0]["value"] == "3.5.0"  # its neighbours still read
    checked = libdoctor.check(caches.venv.path, "--json", env=caches.env, timeout=60)
    assert checked.rc in (0, 1), checked.describe()


# --------------------------------------------------------------------------- --env-file


def test_an_env_file_that_never_ends_is_one_line(cli: Cli, caches: Caches, tmp_path: Path) -> None:
    rss = tmp_path / "rss"
    run = cli(
        "caches",
        str(caches.venv.path),
        "--env-file",
        "/dev/zero",
        env=caches.env,
        prefix=measured(rss),
    )
    assert one_error(run) == (
        "libdoctor: error: /dev/zero: more than 16 MiB (MAX_SMALL_FILE_BYTES), not read"
    )
    assert peak_rss(rss) < RSS_BOUND


def test_an_env_file_may_be_a_pipe(cli: Cli, caches: Caches, tmp_path: Path) -> None:
    """``--env-file <(env)`` is a stream the user named: read (bounded), not refused."""
    other = tmp_path / "elsewhere"
    kernel(other / KEY_OLD, "mul_kernel", "3.1.0")
    fifo = tmp_path / "job.env"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "w") as handle:
            handle.write(f"TRITON_CACHE_DIR={other}\n")

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    run = cli("caches", str(caches.venv.path), "--json", "--env-file", fifo, env=caches.env)
    writer.join(timeout=30)
    assert run.rc == 1, run.describe()
    (triton,) = (c for c in run.json()["caches"] if c["kind"] == "triton")
    assert triton["root"] == str(other)


# --------------------------------------------------------------------------- backups


def test_a_damaged_backup_does_not_stop_a_clear(cli: Cli, caches: Caches) -> None:
    bad = caches.root / "xdg" / "libdoctor" / "backups" / "20200101-000000-badbad"
    bad.mkdir(parents=True)
    (bad / "journal.json").write_bytes(DEEP)
    run = cli("caches", "clear", "triton", "--yes", str(caches.venv.path), env=caches.env)
    assert run.rc == 0, run.describe()
    notes = [line for line in run.stderr.splitlines() if "damaged" in line]
    assert notes == [
        f"libdoctor: skipped a damaged backup, {bad} is not a readable libdoctor backup: "
        "JSON nested deeper than 64 (MAX_JSON_DEPTH), not read"
    ], run.describe()
    assert not (caches.triton / KEY_OLD).exists()
