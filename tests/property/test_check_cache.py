"""Issue 26: ``check``'s caches never change a finding: the parsed files, and the whole result
reused while nothing the check read has changed (``analysis.reuse``).

One small real venv (wheels built here, installed by real pip) per module. Hypothesis draws
sequences of the changes the file-truth tests make (``tests/checks/test_files.py``): files
rewritten at the same size or another, deleted, malformed RECORD rows, a RECORD emptied,
deleted or rewritten at its own size, libraries swapped, an untracked library, METADATA
edited, a distribution restored. After each change ``check`` with a warm cache (the run
before the change stored it; reusing its result if it decides nothing changed) must give
exactly the findings and model of ``check`` without one, the reference; run again at once,
it must reuse (nothing changed) and still agree. Changes outside the env that the loader
reads (``LD_LIBRARY_PATH`` set, a library appearing in a directory it names) have their own
test. ``snapshot`` reuses the same way: after each change its document is the bytes of a
snapshot without the cache, and run again at once it is reused.

The default tier trusts a file as soon as it is written (``RACY_NS`` 0), so every change
lands on a stored entry; each write then gets its own mtime, since a same-size rewrite within
one timestamp tick is exactly what the racy rule exists for (``test_parsed`` checks that
rule). The slow variant keeps the real rule: the venv ages past it once, then every change
is fresh.
"""

from __future__ import annotations

import itertools
import marshal
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libdoctor.analysis.run import Report
from libdoctor.api import check, encoded_snapshot, snapshot
from libdoctor.environment import parsed
from libdoctor.loader.fs import ELF
from support.cc import compile_lib, require_gcc
from support.venvs import Venv, VenvFactory, pip_install
from support.wheels import WheelFactory
from support.zoo import EXT, MALFORMED_ROWS, NATIVE, append_record_rows, lib, rewrite_record_row

PURE = "ldc_pure-1.0.dist-info"
NATIVE_DIST = "ldc_native-1.0.dist-info"
FILES = ("ldcp/a.py", "ldcp/b.py", f"ldcn/_core{EXT}", "ldcn/lib/libldc.so.1", "ldco/data.txt")
OUTSIDE = "libldcout.so.1"  # what ldcn/_out needs: found only through LD_LIBRARY_PATH
DISTS = (PURE, NATIVE_DIST, "ldc_other-1.0.dist-info")
ROWS = tuple(r for r in MALFORMED_ROWS.values() if r is not None)
_stamp = itertools.count(1)


@dataclass
class Env:
    venv: Venv
    original: dict[Path, bytes]  # every file of the ldc distributions, as installed
    cache_dir: Path

    @property
    def site(self) -> Path:
        return self.venv.site_packages


@pytest.fixture(scope="module")
def env(
    module_venv: VenvFactory, module_wheels: WheelFactory, tmp_path_factory: pytest.TempPathFactory
) -> Env:
    require_gcc()
    out = compile_lib(
        tmp_path_factory.mktemp("out-ext"), f"_out{EXT}", needed=(OUTSIDE,), imports=("ldc_out",)
    )
    venv = module_venv("cache")
    pip_install(
        venv,
        module_wheels(
            "ldc-pure",
            "1.0",
            {"ldcp/__init__.py": b"", "ldcp/a.py": b"A = 1\n", "ldcp/b.py": b"B = 22\n"},
        ),
        module_wheels(
            "ldc-native",
            "1.0",
            {
                "ldcn/__init__.py": b"",
                f"ldcn/_core{EXT}": lib("n1"),
                "ldcn/lib/libldc.so.1": lib("l1"),
                f"ldcn/_out{EXT}": out.read_bytes(),
            },
            tag=NATIVE,
        ),
        module_wheels("ldc-other", "1.0", {"ldco/__init__.py": b"", "ldco/data.txt": b"hi\n"}),
    )
    site = venv.site_packages
    original = {
        path: path.read_bytes()
        for top in ("ldcp", "ldcn", "ldco", *DISTS)
        for path in (site / top).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    return Env(venv, original, tmp_path_factory.mktemp("parsed-cache"))


def _written(path: Path, data: bytes) -> None:
    """Write DATA and give the file an mtime of its own (see the module's docstring)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    stamp = 1_700_000_000_000_000_000 + next(_stamp) * 1_000_000
    os.utime(path, ns=(stamp, stamp))


def _same_size(env: Env, rel: str) -> None:
    path = env.site / rel
    if path.exists():
        data = path.read_bytes()
        _written(path, data[:-1] + bytes([data[-1] ^ 1]) if data else b"")


def _grow(env: Env, rel: str) -> None:
    path = env.site / rel
    if path.exists():
        _written(path, path.read_bytes() + b"\0" * 8)


def _delete(env: Env, rel: str) -> None:
    (env.site / rel).unlink(missing_ok=True)


def _swap_library(env: Env, rel: str) -> None:
    _written(env.site / "ldcn/lib/libldc.so.1", lib("l2"))  # another ELF, the same size


def _not_elf(env: Env, rel: str) -> None:
    """An ELF file's bytes replaced by others of its size that are no ELF (elf-invalid)."""
    path = env.site / rel
    if path.exists() and rel.endswith((".so", ".so.1")):
        _written(path, b"\x7fELF" + b"\xff" * (path.stat().st_size - 4))


def _untracked(env: Env, rel: str) -> None:
    _written(env.site / "ldcn/lib/libextra.so", lib("xx"))


def _record(env: Env, dist: str) -> Path:
    return env.site / dist / "RECORD"


def _malformed_row(env: Env, dist: str, row: str) -> None:
    if _record(env, dist).exists():
        append_record_rows(env.site / dist, row.format(p=dist.partition("-")[0]))
        _written(_record(env, dist), _record(env, dist).read_bytes())


def _rewrite_row(env: Env, dist: str, rel: str) -> None:
    """REL's row made to match its bytes now, as an installer writing them would."""
    if _record(env, dist).exists() and (env.site / rel).exists():
        rewrite_record_row(env.site / dist, rel, (env.site / rel).read_bytes())
        _written(_record(env, dist), _record(env, dist).read_bytes())


def _empty_record(env: Env, dist: str) -> None:
    _written(_record(env, dist), b"")


def _delete_record(env: Env, dist: str) -> None:
    _record(env, dist).unlink(missing_ok=True)


def _reordered_record(env: Env, dist: str) -> None:
    """The same rows in another order: the same size, other bytes."""
    if _record(env, dist).exists():
        lines = _record(env, dist).read_bytes().splitlines(keepends=True)
        _written(_record(env, dist), b"".join(lines[1:] + lines[:1]))


def _renamed_over(env: Env, dist: str) -> None:
    """Another RECORD's file moved into place (rename: a new inode at the path)."""
    other = _record(env, DISTS[(DISTS.index(dist) + 1) % len(DISTS)])
    if other.exists():
        spare = other.with_name("RECORD.spare")
        shutil.copy2(other, spare)
        os.replace(spare, _record(env, dist))


def _metadata(env: Env, dist: str) -> None:
    path = env.site / dist / "METADATA"
    if path.exists():
        _written(path, path.read_bytes().replace(b"Version: 1.0", b"Version: 1.1"))


def _restore(env: Env, dist: str) -> None:
    """DIST's files and metadata as installed (and no untracked library)."""
    (env.site / "ldcn/lib/libextra.so").unlink(missing_ok=True)
    for path, data in env.original.items():
        _written(path, data)


FileChange = Callable[[Env, str], None]
DistChange = Callable[[Env, str], None]
FILE_CHANGES: tuple[FileChange, ...] = (
    _same_size,
    _grow,
    _delete,
    _not_elf,
    _swap_library,
    _untracked,
)
DIST_CHANGES: tuple[DistChange, ...] = (
    _empty_record,
    _delete_record,
    _reordered_record,
    _renamed_over,
    _metadata,
    _restore,
)


@st.composite
def changes(draw: st.DrawFn) -> Callable[[Env], None]:
    kind = draw(st.sampled_from(("file", "dist", "row", "rewrite")))
    rel = draw(st.sampled_from(FILES))
    dist = draw(st.sampled_from(DISTS))
    if kind == "file":
        change = draw(st.sampled_from(FILE_CHANGES))
        return lambda env: change(env, rel)
    if kind == "dist":
        dist_change = draw(st.sampled_from(DIST_CHANGES))
        return lambda env: dist_change(env, dist)
    if kind == "row":
        row = draw(st.sampled_from(ROWS))
        return lambda env: _malformed_row(env, dist, row)
    owner = PURE if rel.startswith("ldcp/") else NATIVE_DIST
    return lambda env: _rewrite_row(env, owner, rel)


def _checked(env: Env, cache_dir: Path | None) -> Report:
    """``check`` as the CLI runs it: with the cache dir, the result reused if it holds."""
    folder = None if cache_dir is None else str(cache_dir)
    report = check(env.venv.path, cache_dir=folder, reuse=folder is not None).run
    assert report is not None
    return report


def _reused(report: Report) -> bool:
    return report.environment is None  # a reused report holds no model


def _same(cached: Report, plain: Report) -> None:
    assert cached.findings == plain.findings
    assert plain.environment is not None
    if not _reused(cached):
        assert cached.environment is not None
        assert cached.environment.distributions == plain.environment.distributions
    assert (cached.distributions, cached.files) == (plain.distributions, plain.files)


def _same_again(env: Env, plain: Report) -> None:
    """Nothing changed since the last run: reused, and still the same."""
    again = _checked(env, env.cache_dir)
    assert _reused(again), "an unchanged env decided again"
    _same(again, plain)


def _each_change(env: Env, steps: list[Callable[[Env], None]]) -> Iterator[None]:
    _checked(env, env.cache_dir)  # warm: what the next run finds stored
    for step in steps:
        step(env)
        yield


@pytest.fixture
def trusting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parsed, "RACY_NS", 0)


LIB, CORE = "ldcn/lib/libldc.so.1", f"ldcn/_core{EXT}"
EVERY_CHANGE: tuple[Callable[[Env], None], ...] = (
    *(lambda env, c=c: c(env, LIB) for c in FILE_CHANGES),
    lambda env: _not_elf(env, CORE),
    lambda env: _same_size(env, "ldcp/a.py"),
    lambda env: _rewrite_row(env, PURE, "ldcp/a.py"),
    *(lambda env, c=c: c(env, NATIVE_DIST) for c in DIST_CHANGES),
    lambda env: _malformed_row(env, PURE, ROWS[0]),
    lambda env: _reordered_record(env, PURE),
    lambda env: _restore(env, PURE),
)


def test_every_change_in_turn(env: Env, trusting: None) -> None:
    """Each kind of change once, on a file it matters for (an ELF file, a RECORD)."""
    for step, _ in enumerate(_each_change(env, list(EVERY_CHANGE))):
        cached = _checked(env, env.cache_dir)
        plain = _checked(env, None)
        _same(cached, plain)
        if step % 4 == 0:  # the reuse is live (the other tests check it too)
            _same_again(env, plain)


@settings(
    max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(changes(), min_size=1, max_size=3))
def test_the_cache_never_changes_a_finding(
    env: Env, trusting: None, steps: list[Callable[[Env], None]]
) -> None:
    for _ in _each_change(env, steps):
        cached = _checked(env, env.cache_dir)
        plain = _checked(env, None)
        _same(cached, plain)
        _same_again(env, plain)
    for part in (parsed.RECORDS, ELF):
        stored = parsed.ParsedFiles.load(str(env.cache_dir), str(env.venv.path), part)
        assert stored.entries, f"the warm runs stored {part}"


def test_what_the_loader_reads_outside_the_env(
    env: Env, trusting: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loader's inputs outside the env: the variables that steer it, a directory it
    searched, a library appearing there (compiled here) and going again."""
    _restore(env, NATIVE_DIST)  # whatever the tests before changed
    outside = tmp_path / "ld-library-path"
    outside.mkdir()

    def agrees() -> Report:
        cached = _checked(env, env.cache_dir)
        plain = _checked(env, None)
        _same(cached, plain)
        _same_again(env, plain)
        return plain

    def unresolved(report: Report) -> bool:
        return any(f"needs {OUTSIDE}" in f.message for f in report.findings)

    assert unresolved(agrees())
    monkeypatch.setenv("LD_LIBRARY_PATH", str(outside))
    assert unresolved(agrees())
    compile_lib(outside, OUTSIDE, soname=OUTSIDE, exports=("ldc_out",))
    assert not unresolved(agrees())
    (outside / OUTSIDE).unlink()
    assert unresolved(agrees())
    compile_lib(outside, OUTSIDE, soname=OUTSIDE, exports=("ldc_out",))
    assert not unresolved(agrees())
    monkeypatch.delenv("LD_LIBRARY_PATH")
    assert unresolved(agrees())


def _snapshot(env: Env, cache_dir: Path | None, node: str = "n1") -> bytes:
    """``libdoctor snapshot``'s bytes: with the cache dir, reused if nothing it read changed."""
    return encoded_snapshot(
        env.venv.path, cache_dir=None if cache_dir is None else str(cache_dir), node=node
    )


def _stored_snapshot(env: Env) -> tuple[int, int]:
    """Which stored snapshot there is: a run that decides (and, trusting, stores) replaces
    it, one that reuses it leaves it."""
    (stored,) = (env.cache_dir / "parsed").glob("*.result-snapshot")
    return stored.stat().st_ino, stored.stat().st_mtime_ns


def _requested(env: Env) -> None:
    (env.site / PURE / "REQUESTED").unlink(missing_ok=True)


def _direct_url(env: Env) -> None:
    _written(env.site / PURE / "direct_url.json", b'{"url": "file:///wheels/ldc_pure.whl"}')


def _wheel_tag(env: Env) -> None:
    wheel = env.site / NATIVE_DIST / "WHEEL"
    _written(wheel, wheel.read_bytes() + b"Tag: cp39-abi3-linux_x86_64\n")


def _pyvenv(env: Env) -> None:
    """The interpreter's patch version, as the snapshot records it from pyvenv.cfg."""
    cfg = env.venv.path / "pyvenv.cfg"
    lines = cfg.read_bytes().splitlines(keepends=True)
    patched = [
        b"version = %d.%d.99\n" % sys.version_info[:2] if line.startswith(b"version =") else line
        for line in lines
    ]
    _written(cfg, b"".join(patched))


# What the file checks read, and what only a snapshot reads (REQUESTED, direct_url.json,
# WHEEL's tags, pyvenv.cfg's version).
SNAPSHOT_CHANGES: tuple[Callable[[Env], None], ...] = (
    lambda env: _same_size(env, LIB),
    lambda env: _grow(env, "ldcp/a.py"),
    lambda env: _untracked(env, LIB),
    lambda env: _rewrite_row(env, PURE, "ldcp/a.py"),
    lambda env: _metadata(env, NATIVE_DIST),
    _requested,
    _direct_url,
    _wheel_tag,
    _pyvenv,
    lambda env: _restore(env, PURE),
)


def test_a_reused_snapshot_is_the_bytes_of_a_new_one(env: Env, trusting: None) -> None:
    """After each change the snapshot (reused or not) is byte for byte the one taken
    without the cache; run again at once it is reused and still the same. Another node's
    name is another document; check and snapshot keep a stored result each."""
    cfg = env.venv.path / "pyvenv.cfg"
    original_cfg = cfg.read_bytes()
    _snapshot(env, env.cache_dir)
    try:
        for step in SNAPSHOT_CHANGES:
            step(env)
            plain = _snapshot(env, None)
            assert _snapshot(env, env.cache_dir) == plain
            stored = _stored_snapshot(env)
            assert _snapshot(env, env.cache_dir) == plain
            assert _stored_snapshot(env) == stored, "an unchanged env decided again"
        assert (
            b'"version":"%d.%d.99"' % sys.version_info[:2] in plain and b'"direct_url":{' in plain
        )
        assert _snapshot(env, env.cache_dir, node="n2") == _snapshot(env, None, node="n2")
        assert _snapshot(env, env.cache_dir) == plain  # decided again: n2's replaced it
        stored = _stored_snapshot(env)
        _checked(env, env.cache_dir)
        assert _reused(_checked(env, env.cache_dir))
        assert _snapshot(env, env.cache_dir) == plain
        assert _stored_snapshot(env) == stored, "check evicted the stored snapshot"
        reused = snapshot(env.venv.path, cache_dir=str(env.cache_dir), node="n1", reuse=True)
        assert reused == snapshot(env.venv.path, node="n1")
        (file,) = (env.cache_dir / "parsed").glob("*.result-snapshot")
        file.write_bytes(b"\0" * 64)  # damaged: decided again
        assert _snapshot(env, env.cache_dir) == plain
        assert _stored_snapshot(env) != stored
    finally:
        (env.site / PURE / "direct_url.json").unlink(missing_ok=True)
        _written(cfg, original_cfg)
        _restore(env, PURE)


def test_a_damaged_stored_result_is_ignored(env: Env, trusting: None) -> None:
    """The stored result is untrusted input: cut short, garbage, empty, one byte changed, a
    FIFO in its place; each is ignored (the check decides again), never an error."""
    plain = _checked(env, None)
    _checked(env, env.cache_dir)
    _same_again(env, plain)
    stored = next((env.cache_dir / "parsed").glob("*.result"))
    good = stored.read_bytes()
    for damaged in (good[: len(good) // 2], b"\0" * 64, b"", good[:-1] + b"x"):
        stored.write_bytes(damaged)
        again = _checked(env, env.cache_dir)
        assert not _reused(again)
        _same(again, plain)
    stored.unlink()
    os.mkfifo(stored)
    again = _checked(env, env.cache_dir)  # never blocks on it
    assert not _reused(again)
    _same(again, plain)
    stored.unlink()
    _checked(env, env.cache_dir)
    _same_again(env, plain)


def test_a_stored_result_of_the_wrong_shape_is_ignored(env: Env, trusting: None) -> None:
    """The findings are stored as plain values, never pickled, and each field is checked on
    the way back: a well-formed file whose result holds a value of another type, an unknown
    code or severity, or a code object (marshal can carry one) is decided again."""
    plain = _checked(env, None)
    _checked(env, env.cache_dir)
    _same_again(env, plain)
    stored = next((env.cache_dir / "parsed").glob("*.result"))
    head = marshal.loads(stored.read_bytes())
    findings, *rest = head[-1]
    assert findings, "the test env has findings to forge"
    first = findings[0]
    forged = [
        (first[0], first[1], 42, *first[3:]),  # a message that is no string
        ("no-such-code", *first[1:]),
        (first[0], 99, *first[2:]),
        (*first[:5], {"x": compile("0", "f", "eval")}, first[6]),
        (*first[:6], ("pip", "install")),  # a fix that is not (argv, note, steps)
    ]
    for finding in forged:
        stored.write_bytes(marshal.dumps((*head[:-1], ((finding, *findings[1:]), *rest))))
        again = _checked(env, env.cache_dir)
        assert not _reused(again), finding
        _same(again, plain)


def test_a_stored_result_another_user_could_write_is_ignored(env: Env, trusting: None) -> None:
    """A stored result says "clean" for a broken env: written by the user, it is the
    user's own cache; owned by another user, or writable by the group or others (a shared
    ``--cache-dir``), it is never trusted."""

    _restore(env, NATIVE_DIST)
    _delete(env, LIB)
    try:
        plain = _checked(env, None)
        assert plain.findings
        _checked(env, env.cache_dir)  # stores the broken env's findings
        stored = next((env.cache_dir / "parsed").glob("*.result"))
        *kept, result = marshal.loads(stored.read_bytes())
        forged = marshal.dumps((*kept, ((), *result[1:])))
        stored.write_bytes(forged)
        stored.chmod(0o600)
        assert _checked(env, env.cache_dir).findings == ()  # the forgery itself holds
        owners = [(os.geteuid(), 0o660), (os.geteuid(), 0o606)]
        if os.geteuid() == 0:
            owners.append((65534, 0o600))  # nobody's
        for uid, mode in owners:
            stored.write_bytes(forged)
            os.chown(stored, uid, -1)
            stored.chmod(mode)
            again = _checked(env, env.cache_dir)
            assert not _reused(again), (uid, oct(mode))
            _same(again, plain)
    finally:
        _restore(env, NATIVE_DIST)


def test_a_deep_check_sees_bytes_rewritten_in_place_with_the_mtime_put_back(
    env: Env, trusting: None
) -> None:
    """``cp -p`` over a file of the same size, or ``touch -r``/``os.utime`` after an edit:
    size, inode and mtime are as before, only ctime tells. ``--deep`` with its caches
    (the hash cache, the stored result) must still report the altered file."""
    _restore(env, PURE)
    path = env.site / "ldcp/a.py"
    folder = str(env.cache_dir)

    def deep(cache_dir: str | None) -> Report:
        report = check(env.venv.path, True, cache_dir=cache_dir, reuse=cache_dir is not None).run
        assert report is not None
        return report

    try:
        before = deep(folder).findings  # the digests cached
        assert deep(folder).findings == before  # the result stored
        st = path.stat()
        with path.open("r+b") as handle:
            handle.write(b"B")  # "A = 1" -> "B = 1": the same size, in place
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        plain = deep(None)
        assert plain.findings != before  # altered-files
        assert deep(folder).findings == plain.findings
    finally:
        _restore(env, PURE)


def test_a_run_past_the_recording_cap_is_not_stored(
    env: Env, trusting: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from libdoctor.analysis import recording

    monkeypatch.setattr(recording, "MAX_PATHS", 5)
    for stored in (env.cache_dir / "parsed").glob("*.result"):
        stored.unlink()
    plain = _checked(env, None)
    for _ in range(2):
        again = _checked(env, env.cache_dir)
        assert not _reused(again)
        _same(again, plain)


@pytest.mark.slow
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(changes(), min_size=1, max_size=8))
def test_the_cache_never_changes_a_finding_with_the_racy_rule(
    env: Env, steps: list[Callable[[Env], None]]
) -> None:
    newest = max(p.stat().st_ctime_ns for p in env.site.rglob("*") if p.is_file())
    time.sleep(max(0.0, (newest + parsed.RACY_NS - time.time_ns()) / 1e9 + 0.1))
    for _ in _each_change(env, steps):
        plain = _checked(env, None)
        _same(_checked(env, env.cache_dir), plain)
