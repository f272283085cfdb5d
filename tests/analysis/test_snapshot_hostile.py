"""Issue 23: a snapshot is hostile input, whoever wrote it (a file given to ``diff`` or
``fleet``, a node's answer). It is read bounded: a device or FIFO is refused, gzip's output is
capped, JSON nesting is capped, srun's stdout keeps only frame lines; each refusal is one
line, and peak RSS stays under the bound. What it says is data: a node name with terminal
escapes is printed inert, a row's path is never opened, a node name never escapes ``-o``.

The good snapshot is taken by the real ``libdoctor snapshot`` of a real venv.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.hostile import DEEP, gzip_bomb, one_error, sparse
from support.repairs import Cli
from support.rss import RSS_BOUND, measured, peak_rss
from support.slurm import fake_srun
from support.venvs import Libdoctor, Venv, VenvFactory, pip_install, strace_path
from support.wheels import WheelFactory

ESCAPES = "evil\x1b]0;pwned\x07\x1b[2J"  # retitles the terminal, then clears it
SHOWN = "evil\\x1b]0;pwned\\x07\\x1b[2J"


@pytest.fixture(scope="module")
def venv(module_venv: VenvFactory, module_wheels: WheelFactory) -> Venv:
    venv = module_venv("snapped")
    files = {"snp/__init__.py": b"A = 1\n", "snp/data.txt": b"data\n"}
    pip_install(venv, module_wheels("ldt-snapped", "1.0", files))
    return venv


@pytest.fixture(scope="module")
def good(venv: Venv, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("snapshots") / "good.json"
    run = Cli(out.parent / "cache")("snapshot", venv.path, "-o", out)
    assert run.rc == 0, run.describe()
    return out


def _doc(good: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(good.read_text())
    return doc


# --------------------------------------------------------------------------- refused


def _bomb(path: Path, good: Path) -> Path:
    out = path.with_name("bomb.json.gz")
    out.write_bytes(gzip_bomb())
    return out


def _fifo(path: Path, good: Path) -> Path:
    os.mkfifo(path)
    return path


def _bytes(data: Callable[[Path], bytes]) -> Callable[[Path, Path], Path]:
    def make(path: Path, good: Path) -> Path:
        path.write_bytes(data(good))
        return path

    return make


def _huge(path: Path, good: Path) -> Path:
    sparse(path)
    return path


def _edited(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], bytes]:
    def data(good: Path) -> bytes:
        doc = _doc(good)
        edit(doc)
        return json.dumps(doc).encode()

    return data


def _nul_row(doc: dict[str, Any]) -> None:
    doc["distributions"][0]["files"][0][0] = "snp/\x00data.txt"


# (case, make the bad file from the good one, what the one line says after the name)
REFUSED = [
    (
        "2 MB of gzip inflating to 2 GB",
        _bomb,
        "MiB from 2 MiB (MAX_INFLATE_RATIO), not read",
    ),
    ("/dev/zero", lambda path, good: Path("/dev/zero"), "a device, not read"),
    ("a FIFO", _fifo, "a FIFO, not read"),
    ("JSON nested 100,000 deep", _bytes(lambda good: DEEP), "(MAX_JSON_DEPTH)"),
    ("the same gzip'd", _bytes(lambda good: gzip.compress(DEEP)), "(MAX_JSON_DEPTH)"),
    ("600 MB", _huge, "over 512 MiB (MAX_FILE_BYTES)"),
    (
        "schema_version true",
        _bytes(_edited(lambda doc: doc.update(schema_version=True))),
        "snapshot schema_version True, this libdoctor reads 1",
    ),
    ("a row path with a NUL", _bytes(_edited(_nul_row)), "is not [path, size, hash(, digest)]"),
    (
        "gzip cut short",
        _bytes(lambda good: gzip.compress(good.read_bytes())[:-12]),
        "not a readable gzip file (gzip data cut short)",
    ),
]


# diff and fleet read a file the same way (read_snapshot): both for the three, which
# differ in how the file is opened; diff for the rest, which differ in its bytes.
CASES = [
    (command, *case)
    for i, case in enumerate(REFUSED)
    for command in (("diff", "fleet") if i < 3 else ("diff",))
]


@pytest.mark.parametrize(
    ("command", "case", "make", "says"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES]
)
def test_a_hostile_snapshot_is_one_line_and_bounded(
    good: Path,
    tmp_path: Path,
    command: str,
    case: str,
    make: Callable[[Path, Path], Path],
    says: str,
) -> None:
    bad = make(tmp_path / "bad.json", good)
    rss = tmp_path / "rss"
    run = Cli(tmp_path / "cache")(command, bad, good, timeout=60, prefix=measured(rss))
    line = one_error(run, no_stdout=True)
    assert line.startswith(f"libdoctor: error: {bad}: ") and says in line, run.describe()
    assert peak_rss(rss) < RSS_BOUND


# --------------------------------------------------------------------------- data


def _pair(good: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Two snapshots of the same environment: one from a node named with escapes, one with
    a file whose bytes changed and whose name holds an escape too."""
    one = _doc(good)
    one["node"] = ESCAPES
    two = _doc(good)
    two["node"] = "plain"
    row = two["distributions"][0]["files"][0]
    row[0], row[1] = "snp/\x1b[31mred.txt", 12345
    one["distributions"][0]["files"].append(["snp/\x1b[31mred.txt", 1, row[2]])
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(one))
    b.write_text(json.dumps(two))
    return a, b


def test_node_names_and_paths_reach_the_terminal_inert(good: Path, tmp_path: Path) -> None:
    a, b = _pair(good, tmp_path)
    cli = Cli(tmp_path / "cache")
    for run in (cli("fleet", a, b), cli("diff", a, b), cli("diff", a, b, "--verbose")):
        assert run.rc == 1, run.describe()
        assert "\x1b" not in run.stdout and "\x07" not in run.stdout, run.describe()
        assert SHOWN in run.stdout, run.describe()
    assert "snp/\\x1b[31mred.txt" in cli("diff", a, b).stdout
    doc = cli("fleet", a, b, "--json").json()  # JSON carries the name as it is: data
    assert ESCAPES in [n for g in doc["groups"] for n in g["nodes"]]


@pytest.mark.skipif(strace_path() is None, reason="strace is not usable here")
def test_a_row_path_is_never_opened(good: Path, tmp_path: Path) -> None:
    """Rows naming a file outside, absolutely and by climbing: compared, printed, never
    opened (nor stat'ed) by diff or fleet."""
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"outside\n")
    doc = _doc(good)
    rows = doc["distributions"][0]["files"]
    rows += [[str(secret), 8, None], ["../" * 30 + str(secret).lstrip("/"), 8, None]]
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(doc))
    libdoctor = Libdoctor(tmp_path / "cache")
    for command in ("diff", "fleet"):
        log = tmp_path / f"{command}.strace"
        run = libdoctor(command, good, hostile, strace_log=log)
        assert run.rc == 1, run.describe()
        assert secret.name in run.stdout, run.describe()
        assert secret.name not in log.read_text(errors="replace"), command


def test_a_flooding_node_costs_no_memory(venv: Venv, tmp_path: Path) -> None:
    """srun's stdout was read whole: a node (or srun) writing 512 MB without a newline
    held it all. Only frame lines are kept now."""
    env = fake_srun(tmp_path, [("n1", str(venv.path)), ("n2", str(venv.path))], flood=512 << 20)
    rss = tmp_path / "rss"
    run = Cli(tmp_path / "cache")("fleet", "--slurm", env=env, timeout=300, prefix=measured(rss))
    assert run.rc == 0, run.describe()
    assert "n1, n2 (2 nodes)  same as the reference" in run.stdout
    assert peak_rss(rss) < RSS_BOUND


def test_a_node_name_is_one_file_name(venv: Venv, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    env = {"SLURMD_NODENAME": "../escaped"}
    run = Cli(tmp_path / "cache")("snapshot", venv.path, "-o", out / "{node}.json", env=env)
    assert one_error(run, no_stdout=True) == (
        f"libdoctor: error: the node name '../escaped' cannot be a file name in {out}/{{node}}.json"
    )
    assert [p.name for p in tmp_path.iterdir() if p.name != "cache"] == ["out"]
    assert list(out.iterdir()) == []


def test_hostile_metadata_in_the_environment_is_data(
    new_venv: VenvFactory, make_wheel: WheelFactory, tmp_path: Path
) -> None:
    """direct_url.json nested 100,000 deep was a RecursionError traceback in ``snapshot``;
    a FIFO in its place hung it."""
    venv = new_venv("metadata")
    pip_install(venv, make_wheel("ldt-meta", "1.0", {"meta/__init__.py": b""}))
    (dist_info,) = venv.site_packages.glob("ldt_meta-1.0.dist-info")
    cli = Cli(tmp_path / "cache")
    for case, make in (("deep", lambda p: p.write_bytes(DEEP)), ("fifo", os.mkfifo)):
        target = dist_info / "direct_url.json"
        target.unlink(missing_ok=True)
        make(target)
        run = cli("snapshot", venv.path, timeout=60)
        assert run.rc == 0, f"{case}: {run.describe()}"
        (dist,) = (d for d in run.json()["distributions"] if d["name"] == "ldt-meta")
        if case == "deep":
            assert dist["direct_url"] == {"unreadable": "[" * 200}
        else:
            assert dist["direct_url"] is None
