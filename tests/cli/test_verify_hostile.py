"""``verify --lock`` fed hostile input: each is exit 2 and one line (or a clean verdict),
in bounded memory and time, and never prints a line of a file outside the lock's tree.

Each case runs libdoctor under support.rss's launcher, which reports the child's own peak
RSS (never the test's, which a child forked from it starts with). The limits named in the
messages are the constants of ``external.lockfile``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import pytest

from libdoctor.external.lockfile import MAX_INCLUDE_DEPTH, MAX_INCLUDED_FILES
from support.rss import launched
from support.venvs import REPO_ROOT, Venv, VenvFactory, libdoctor_env

PEAK_RSS_MB = 200
SECRET = "root:$6$SECRET-HASH-NEVER-PRINTED:19000:0:99999:7:::"


class Child(NamedTuple):
    rc: int
    stdout: str
    stderr: str
    peak_mb: float


def _run(*args: str | os.PathLike[str], stdin: int | None = None, timeout: float = 60) -> Child:
    """As ``_libdoctor``, run by support.rss's launcher, which reads the child's own peak RSS
    (one forked from the test process starts with the test's resident pages as its peak)."""
    with tempfile.TemporaryDirectory() as work:
        peak = Path(work) / "peak"
        argv = launched(peak, [sys.executable, "-m", "libdoctor", *args])
        proc = subprocess.Popen(
            argv,
            env=libdoctor_env(None, None),
            cwd=REPO_ROOT,
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            stdout, stderr = _drain(proc, timeout)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        rc = proc.wait()
        kib = int(peak.read_text()) if peak.exists() else 0
    return Child(rc, stdout, stderr, kib / 1024)


def _drain(proc: subprocess.Popen[bytes], timeout: float) -> tuple[str, str]:
    """Both pipes read to their end (the child exits after closing them), within TIMEOUT."""
    import selectors
    import time

    assert proc.stdout is not None and proc.stderr is not None
    chunks: dict[int, list[bytes]] = {proc.stdout.fileno(): [], proc.stderr.fileno(): []}
    selector = selectors.DefaultSelector()
    for pipe in (proc.stdout, proc.stderr):
        selector.register(pipe, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while selector.get_map():
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"libdoctor still running after {timeout} s")
        for key, _ in selector.select(left):
            data = os.read(key.fd, 65536)
            if data:
                chunks[key.fd].append(data)
            else:
                selector.unregister(key.fileobj)
    out, err = (b"".join(chunks[p.fileno()]).decode() for p in (proc.stdout, proc.stderr))
    return out, err


def _one_line_exit_2(child: Child, *expected: str) -> None:
    assert child.rc == 2 and child.stdout == "", child
    assert child.stderr.count("\n") == 1, child.stderr
    for text in expected:
        assert text in child.stderr, child.stderr
    assert "Traceback" not in child.stderr
    assert child.peak_mb < PEAK_RSS_MB, f"peak RSS {child.peak_mb:.0f} MB"


@pytest.fixture(scope="module")
def target(module_venv: VenvFactory) -> Venv:
    return module_venv("hostile")


def _verify(lock: str | Path, target: Venv, *more: str | Path, stdin: int | None = None) -> Child:
    return _run("verify", "--lock", lock, target.path, *more, stdin=stdin)


# --------------------------------------------------------------------------- devices, pipes, size


def test_dev_zero_as_the_lock_is_refused_unread(target: Venv) -> None:
    _one_line_exit_2(_verify("/dev/zero", target), "/dev/zero is a device, not a regular file")


def test_dev_zero_on_stdin_stops_at_the_byte_limit(target: Venv) -> None:
    with open("/dev/zero", "rb") as zero:
        child = _verify("-", target, stdin=zero.fileno())
    _one_line_exit_2(child, "standard input", "MAX_LOCK_BYTES (32 MiB)")


def test_a_fifo_lock_does_not_hang(target: Venv, tmp_path: Path) -> None:
    fifo = tmp_path / "uv.lock"
    os.mkfifo(fifo)
    _one_line_exit_2(_verify(fifo, target), "is a FIFO, not a regular file")


def test_a_directory_as_the_lock(target: Venv, tmp_path: Path) -> None:
    _one_line_exit_2(_verify(tmp_path, target), "is a directory, not a regular file")


def test_a_sparse_huge_lock_is_refused_by_its_size(target: Venv, tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    with lock.open("wb") as handle:
        handle.truncate(64 * 1024**3)  # 64 GiB of holes: no disk used
    _one_line_exit_2(_verify(lock, target), "MAX_LOCK_BYTES")


@pytest.mark.parametrize("include", ["/dev/zero", "fifo", "/dev/stdin"])
def test_a_device_or_fifo_include_is_refused(target: Venv, tmp_path: Path, include: str) -> None:
    if include == "fifo":
        os.mkfifo(tmp_path / "fifo")
    lock = tmp_path / "requirements.txt"
    lock.write_text(f"six==1.16.0\n-r {include}\n")
    outside = "outside the lock's directory" if include.startswith("/") else "is a FIFO"
    _one_line_exit_2(_verify(lock, target), outside)
    allowed = _verify(lock, target, "--allow-include", "/dev", "--allow-include", "/proc")
    _one_line_exit_2(allowed, "not a regular file")


def test_a_pyproject_fifo_beside_a_uv_lock_does_not_hang(target: Venv, tmp_path: Path) -> None:
    (tmp_path / "uv.lock").write_text('version = 1\n[[package]]\nname = "six"\nversion = "1"\n')
    os.mkfifo(tmp_path / "pyproject.toml")
    _one_line_exit_2(_verify(tmp_path / "uv.lock", target), "pyproject.toml is a FIFO")


# --------------------------------------------------------------------------- depth and count


def test_a_3000_deep_include_chain_stops_at_the_depth_limit(target: Venv, tmp_path: Path) -> None:
    for i in range(3000):
        (tmp_path / f"r{i}.txt").write_text(f"-r r{i + 1}.txt\n")
    (tmp_path / "r3000.txt").write_text("six==1.16.0\n")
    _one_line_exit_2(
        _verify(tmp_path / "r0.txt", target), f"MAX_INCLUDE_DEPTH ({MAX_INCLUDE_DEPTH})"
    )


def test_too_many_includes(target: Venv, tmp_path: Path) -> None:
    count = MAX_INCLUDED_FILES + 5
    for i in range(count):
        (tmp_path / f"f{i}.txt").write_text(f"p{i}==1.0\n")
    (tmp_path / "requirements.txt").write_text("".join(f"-r f{i}.txt\n" for i in range(count)))
    _one_line_exit_2(_verify(tmp_path / "requirements.txt", target), "MAX_INCLUDED_FILES")


def test_an_include_cycle_is_read_once(target: Venv, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("-r b.txt\nsix==1.16.0\n")
    (tmp_path / "b.txt").write_text("-r a.txt\n-r ./a.txt\n")
    child = _verify(tmp_path / "a.txt", target, "--json")
    assert child.rc == 1 and '"lock-missing"' in child.stdout, child  # six is not installed


def test_deeply_nested_toml_is_one_line(target: Venv, tmp_path: Path) -> None:
    lock = tmp_path / "uv.lock"
    lock.write_text("version = 1\nx = " + "[" * 100_000 + "]" * 100_000 + "\n")
    _one_line_exit_2(_verify(lock, target), "nest deeper than the TOML reader goes")


def test_a_line_of_two_million_spaces_is_read_in_linear_time(target: Venv, tmp_path: Path) -> None:
    """pip's comment rule written as ``(^|\\s+)#`` backtracks quadratically over spaces."""
    lock = tmp_path / "requirements.txt"
    lock.write_text("six==1.16.0" + " " * 2_000_000 + "x\n" + " " * 2_000_000 + "\n")
    child = _run("verify", "--lock", lock, target.path, timeout=60)
    _one_line_exit_2(child, "does not parse")
    assert len(child.stderr) < 600  # the line is quoted clipped


# --------------------------------------------------------------------------- confinement


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "outside" / "shadow"
    secret.parent.mkdir()
    secret.write_text(SECRET + "\n")
    return secret


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink"])
def test_an_include_outside_the_lock_tree_is_refused_unread(
    target: Venv, tmp_path: Path, how: str
) -> None:
    secret = _secret(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    include = {"absolute": str(secret), "dotdot": "../outside/shadow", "symlink": "link.txt"}[how]
    if how == "symlink":
        (project / "link.txt").symlink_to(secret)
    (project / "requirements.txt").write_text(f"six==1.16.0\n-r {include}\n")
    child = _verify(project / "requirements.txt", target)
    _one_line_exit_2(child, "outside the lock's directory", "--allow-include")
    assert "SECRET" not in child.stderr


def test_an_allowed_include_outside_the_tree_is_never_quoted(target: Venv, tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    (secret.parent / "pins.txt").write_text("six==1.16.0\n" + SECRET + "\nidna>=3\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "requirements.txt").write_text("-r ../outside/pins.txt\n")
    child = _verify(project / "requirements.txt", target, "--allow-include", secret.parent)
    _one_line_exit_2(child, "pins.txt:2: does not parse")
    assert "SECRET" not in child.stderr and "$6$" not in child.stderr
    (secret.parent / "pins.txt").write_text("six==1.16.0\nidna>=3 ; os_name == 'SECRET'\n")
    child = _verify(project / "requirements.txt", target, "--allow-include", secret.parent)
    _one_line_exit_2(child, "pins.txt:2: its requirement pins no version")
    assert "SECRET" not in child.stderr


def test_a_line_of_the_lock_itself_is_quoted(target: Venv, tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("six ==\n")
    _one_line_exit_2(_verify(tmp_path / "requirements.txt", target), "'six ==' does not parse")
