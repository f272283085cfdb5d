"""Issue 18, item 5: a progress bar on stderr for long work, only when stderr is a terminal.

``check --deep`` and ``snapshot --deep`` on a cold hash cache show bytes done and left;
``fleet`` shows nodes done and left. Each command is run for real with its stderr on a
pseudo-terminal (stdout on a pipe), then with stderr piped, then with ``--quiet``.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

from support.venvs import REPO_ROOT, Libdoctor, Venv, VenvFactory, libdoctor_env, pip_install
from support.wheels import WheelFactory

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\r")


def _on_terminal(args: list[str], cache_home: Path) -> tuple[int, str, str]:
    """``python -m libdoctor ARGS`` with stderr on a pseudo-terminal: (rc, stdout, terminal
    text without escape codes)."""
    master, slave = pty.openpty()
    env = libdoctor_env({"TERM": "xterm", "COLUMNS": "200"}, cache_home)
    proc = subprocess.Popen(
        [sys.executable, "-m", "libdoctor", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
        cwd=REPO_ROOT,
    )
    os.close(slave)
    seen = bytearray()
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                chunk = b""
            if not chunk and proc.poll() is not None:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    proc.stdout.close()
    return proc.wait(timeout=60), out, ANSI.sub(b"", bytes(seen)).decode("utf-8", "replace")


@pytest.fixture
def big_venv(new_venv: VenvFactory, make_wheel: WheelFactory) -> Venv:
    """A venv with 3 MB of package files, so a cold --deep hashes something worth a bar."""
    payload = {f"ldt_big/blob{i}.bin": os.urandom(1_000_000) for i in range(3)}
    wheel = make_wheel("ldt-big", "1.0", {"ldt_big/__init__.py": b"", **payload})
    venv = new_venv("big")
    pip_install(venv, wheel)
    return venv


def test_check_deep_shows_bytes_done_and_left_on_a_terminal(big_venv: Venv, tmp_path: Path) -> None:
    cache = tmp_path / "cold-cache"
    rc, out, terminal = _on_terminal(
        ["check", "--deep", "--cache-dir", str(cache), str(big_venv.path)], tmp_path
    )
    assert rc == 0, terminal
    assert re.search(r"hashing [\d,]+ files", terminal), terminal
    assert re.search(r"[\d.]+ ?[kM]?B left", terminal), terminal
    assert "hashing" not in out


def test_check_deep_quiet_or_piped_has_no_bar(
    big_venv: Venv, tmp_path: Path, libdoctor: Libdoctor
) -> None:
    quiet_cache = tmp_path / "quiet-cache"
    rc, _, terminal = _on_terminal(
        ["check", "--deep", "-q", "--cache-dir", str(quiet_cache), str(big_venv.path)], tmp_path
    )
    assert rc == 0
    assert "hashing" not in terminal and "left" not in terminal
    piped = libdoctor.check("--deep", big_venv.path)  # stderr is a pipe, the cache cold
    assert piped.rc == 0
    assert piped.stderr == ""


def test_snapshot_deep_shows_bytes_on_a_terminal(big_venv: Venv, tmp_path: Path) -> None:
    rc, _, terminal = _on_terminal(
        ["snapshot", "--deep", "--no-cache", "-o", str(tmp_path / "s.json"), str(big_venv.path)],
        tmp_path,
    )
    assert rc == 0, terminal
    assert re.search(r"hashing [\d,]+ files", terminal), terminal
    assert " left" in terminal
    rc, _, terminal = _on_terminal(
        [
            "snapshot",
            "--deep",
            "--no-cache",
            "--quiet",
            "-o",
            str(tmp_path / "q.json"),
            str(big_venv.path),
        ],
        tmp_path,
    )
    assert rc == 0 and "hashing" not in terminal and "left" not in terminal


def _snapshots(venv: Venv, libdoctor: Libdoctor, where: Path, count: int) -> list[str]:
    files = []
    for i in range(count):
        path = where / f"node{i}.json"
        done = libdoctor("snapshot", "-o", path, venv.path, env={"SLURMD_NODENAME": f"node{i}"})
        assert done.rc == 0, done.stderr
        files.append(str(path))
    return files


def test_fleet_shows_nodes_done_and_left_on_a_terminal(
    new_venv: VenvFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    files = _snapshots(new_venv("plain"), libdoctor, tmp_path, 3)
    rc, out, terminal = _on_terminal(["fleet", *files], tmp_path)
    assert rc == 0, terminal
    assert re.search(r"\d/3 nodes done, \d left", terminal), terminal
    assert "nodes done" not in out
    rc, _, terminal = _on_terminal(["fleet", "-q", *files], tmp_path)
    assert rc == 0 and "nodes done" not in terminal
    piped = libdoctor("fleet", *files)
    assert piped.rc == 0 and "nodes done" not in piped.stderr


def test_install_shows_steps_done_and_left_on_a_terminal(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    one = make_wheel("ldt-one", "1.0", {"ldt_one/__init__.py": b"V = 1\n"})
    two = make_wheel("ldt-two", "1.0", {"ldt_two/__init__.py": b"V = 2\n"})
    three = make_wheel("ldt-three", "1.0", {"ldt_three/__init__.py": b"V = 3\n"})
    venv = new_venv("install")
    rc, out, terminal = _on_terminal(["install", str(one), str(venv.path), "--no-index"], tmp_path)
    assert rc == 0, terminal
    assert re.search(r"installing .*[01]/1 steps done, [01] left", terminal), terminal
    assert "steps done" not in out
    rc, _, terminal = _on_terminal(
        ["install", str(two), str(venv.path), "--no-index", "--quiet"], tmp_path
    )
    assert rc == 0, terminal
    assert "steps done" not in terminal
    piped = libdoctor("install", three, venv.path, "--no-index")
    assert piped.rc == 0, piped.stderr
    assert "steps done" not in piped.stderr


def test_plan_install_shows_wheels_read_on_a_terminal(
    new_venv: VenvFactory, make_wheel: WheelFactory, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    make_wheel("ldt-one", "1.0", {"ldt_one/__init__.py": b"V = 1\n"})
    make_wheel("ldt-two", "1.0", {"ldt_two/__init__.py": b"V = 2\n"}, requires=["ldt-one"])
    venv = new_venv("plan")
    links = ["--no-index", "--find-links", str(make_wheel.dest)]
    argv = ["plan", "install", "ldt-two", str(venv.path), *links]
    rc, out, terminal = _on_terminal(argv, tmp_path)
    assert rc == 0, terminal
    assert re.search(r"reading wheel indexes .*[0-2]/2 wheels done, [0-2] left", terminal), terminal
    assert "wheels done" not in out
    rc, _, terminal = _on_terminal([*argv, "-q"], tmp_path)
    assert rc == 0 and "wheels done" not in terminal
    piped = libdoctor(*argv)
    assert piped.rc == 0 and "wheels done" not in piped.stderr
