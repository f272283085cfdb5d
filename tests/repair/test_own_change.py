"""Issue 13, item 5: a rollback or a restore undoes libdoctor's own change and nothing else.

Real venvs and real pip: another process writing into the environment while a fix fails, a
later ``pip install`` before a restore, a later change to the fix's own paths (refused without
``--yes``, the later version kept), and owners put back with the bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.repairs import Cli, diff_states, fault_injector, tree_state
from support.venvs import Venv, VenvFactory, pip_install
from support.wheels import WheelFactory, offline

FILES = {f"ldtown/m{i:02d}.py": f"X = {i}\n".encode() for i in range(12)}
FILES["ldtown/__init__.py"] = b""
FILES["ldtown/data.bin"] = b"\x00\x01 the wheel's data\n" * 300
LATER = {"ldtlater/__init__.py": b"LATER = 1\n", "ldtlater/big.bin": b"later bytes\n" * 100}

_WRITER = """
import hashlib, json, os, sys, time
env, stop, manifest = sys.argv[1:4]
written = {}
n = 0
while not os.path.exists(stop):
    for path in (
        os.path.join(env, "logs", f"run-{n:04d}.log"),
        os.path.join(env, "nested", "lib", "site-packages", f"fresh{n:04d}", "__init__.py"),
    ):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = f"{path} {time.time_ns()}\\n".encode()
        with open(path, "wb") as handle:
            handle.write(data)
        written[path] = hashlib.sha256(data).hexdigest()
    n += 1
    time.sleep(0.005)
with open(manifest, "w") as handle:
    json.dump(written, handle)
"""


def damaged(new_venv: VenvFactory, make_wheel: WheelFactory, name: str) -> tuple[Venv, Path]:
    """A venv whose ldt-own lost a file (fix reinstalls it), and the find-links dir."""
    venv = new_venv(name)
    pip_install(venv, make_wheel("ldt-own", "1.0", FILES))
    (venv.site_packages / "ldtown" / "data.bin").unlink()
    return venv, make_wheel.dest


def is_later(path: str) -> bool:
    return "ldtlater" in path or "ldt_later" in path


def test_a_failing_fix_leaves_what_another_process_wrote_meanwhile(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli, tmp_path: Path
) -> None:
    venv, links = damaged(new_venv, make_wheel, "writer")
    before = tree_state(venv.path)
    stop, manifest = tmp_path / "stop", tmp_path / "written.json"
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    writer = subprocess.Popen([sys.executable, str(script), str(venv.path), str(stop), manifest])
    try:
        while not (venv.path / "logs").exists():
            time.sleep(0.01)
        hook = fault_injector(tmp_path, venv.python, "fail")  # pip fails after a first write
        run = cli("fix", venv.path, "--yes", *offline(links), "--installer-cmd", hook, "--json")
    finally:
        stop.touch()
        writer.wait(timeout=60)
    assert run.rc == 2, run.describe()
    doc = run.json()["fix"]
    assert doc["rolled_back"] is True and doc["rollback_problems"] == [], run.describe()
    written = json.loads(manifest.read_text())
    assert len(written) > 20, "the writer wrote while the fix ran"
    import hashlib

    for path, digest in written.items():  # every file the other process wrote is still there
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest, path
    theirs = (str(venv.path / "logs"), str(venv.path / "nested"))
    left = [line for line in diff_states(before, tree_state(venv.path)) if theirs[0] not in line]
    assert [line for line in left if theirs[1] not in line] == [], "the fix was not undone"


def test_a_restore_after_a_later_install_leaves_it_and_asks_before_a_later_change(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli
) -> None:
    venv, links = damaged(new_venv, make_wheel, "later")
    before = tree_state(venv.path)
    assert cli("fix", venv.path, "--yes", *offline(links)).rc == 0
    (backup,) = (p.name for p in cli.backups.iterdir())
    pip_install(venv, make_wheel("ldt-later", "1.0", LATER))  # someone else, afterwards
    later = {p: v for p, v in tree_state(venv.path).items() if is_later(p)}

    run = cli("restore", backup, "--json")
    assert run.rc == 0, run.describe()
    result = run.json()
    assert result["ok"] and not result["refused"] and result["changed_later"] == []
    assert any("ldtlater" in e["path"] for e in result["left_alone"]), run.describe()
    now = tree_state(venv.path)
    assert {p: v for p, v in now.items() if is_later(p)} == later, "the later install is intact"
    assert [d for d in diff_states(before, now) if not is_later(d)] == [], "fix not undone"


def test_a_later_change_to_the_runs_own_paths_needs_yes_and_is_kept(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli
) -> None:
    venv, links = damaged(new_venv, make_wheel, "relater")
    before = tree_state(venv.path)
    assert cli("fix", venv.path, "--yes", *offline(links)).rc == 0
    (backup,) = (p.name for p in cli.backups.iterdir())
    data = venv.site_packages / "ldtown" / "data.bin"
    data.unlink()
    data.write_bytes(b"someone's own version\n")  # after the fix ended
    changed = tree_state(venv.path)

    refused = cli("restore", backup)
    assert refused.rc == 1, refused.describe()
    assert "Refused: nothing was changed" in refused.stdout and "--yes" in refused.stdout
    assert str(data) in refused.stdout
    assert tree_state(venv.path) == changed

    run = cli("restore", backup, "--yes", "--json")
    assert run.rc == 0, run.describe()
    result = run.json()
    assert result["changed_later"] == [str(data)]
    kept = Path(result["displaced"])
    assert [p.read_bytes() for p in kept.iterdir() if p.name != "displaced.json"] == [
        b"someone's own version\n"
    ]
    assert diff_states(before, tree_state(venv.path)) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another owner needs root")
def test_owners_are_restored_with_the_bytes(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli
) -> None:
    venv = new_venv("owners")
    pip_install(venv, make_wheel("ldt-own", "1.0", FILES))
    package = venv.site_packages / "ldtown"
    os.chown(package / "m03.py", 4321, 4322)
    os.chown(package, 4321, 4322)
    before = tree_state(venv.path)
    assert cli("uninstall", "--force", "ldt-own", venv.path).rc == 0
    assert not package.exists()
    (backup,) = (p.name for p in cli.backups.iterdir())
    run = cli("restore", backup)
    assert run.rc == 0, run.describe()
    assert diff_states(before, tree_state(venv.path)) == []
    assert (os.stat(package / "m03.py").st_uid, os.stat(package / "m03.py").st_gid) == (4321, 4322)
    assert (os.stat(package).st_uid, os.stat(package).st_gid) == (4321, 4322)
    assert os.stat(package / "m04.py").st_uid == os.geteuid()
