"""libdoctor's children: the installer dies with libdoctor; a journaled one is recognised."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from libdoctor.external.process import run_installer, still_running


def _gone(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return True
    return fields[0] in ("Z", "X")


def test_exit_code_and_the_last_lines_come_back() -> None:
    lines = "\\n".join(str(i) for i in range(50))
    code, out = run_installer(
        [sys.executable, "-c", f"print('{lines}'); raise SystemExit(3)"], dict(os.environ), False
    )
    assert code == 3 and out.splitlines() == [str(i) for i in range(20, 50)]


def test_a_missing_program_is_127() -> None:
    code, out = run_installer(["/nonexistent/pip"], {}, False)
    assert code == 127 and "cannot run /nonexistent/pip" in out


def test_started_is_told_the_pid() -> None:
    seen: list[int] = []
    code, _ = run_installer([sys.executable, "-c", "pass"], dict(os.environ), False, seen.append)
    assert code == 0 and len(seen) == 1 and seen[0] > 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_the_child_dies_with_its_parent_even_by_sigkill(tmp_path: Path) -> None:
    """A parent runs a slow child through run_installer and is SIGKILLed: the child goes too."""
    pidfile = tmp_path / "child.pid"
    child = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    parent = (
        "import os, sys; from libdoctor.external.process import run_installer; "
        f"run_installer([sys.executable, '-c', {child!r}], dict(os.environ), False)"
    )
    proc = subprocess.Popen([sys.executable, "-c", parent])
    deadline = time.monotonic() + 30
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not _gone(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the child outlived its SIGKILLed parent")


def test_still_running_knows_the_command_not_just_the_pid() -> None:
    argv = [sys.executable, "-c", "import time; time.sleep(600)", "pip", "install", "x"]
    slow = subprocess.Popen(argv)
    try:
        # Popen returns mid-exec (vfork): the new command line shows a moment later
        deadline = time.monotonic() + 10
        while b"sleep" not in Path(f"/proc/{slow.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert still_running(slow.pid, argv, grace=0)
        assert still_running(slow.pid, ["/other/python", *argv[1:]], grace=0), "any spelling"
        assert not still_running(slow.pid, ["python", "-m", "pip", "install", "y"], grace=0)
    finally:
        slow.kill()
        slow.wait()
    assert not still_running(slow.pid, argv, grace=0)
