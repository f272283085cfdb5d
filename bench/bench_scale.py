"""Benchmark: ``libdoctor check`` on synthetic environments of 200k and 1M recorded files.

Not a test. ``make DIR`` writes two environments under DIR once (``files-200000``, 400
distributions, and ``files-1000000``, 2,000 distributions; 500 recorded files each: small
Python files with their real sha256 and size in a pip-style RECORD, the metadata files, and
in every 50th distribution an ELF extension module built by gcc), each finished by a
``complete`` marker so a second ``make`` reuses it. ``run DIR`` checks each environment in
paired rounds (a child per run, its peak RSS and CPU time from ``wait4``) and reports the
per-file cost (CPU: less moved by other load than wall) and the peak; ``--compare SRC`` runs
the same with another libdoctor tree's ``src`` first on the path, in the same rounds.
Budget (issue 26): the 1M per-file cost within 1.3x of 200k's, peak under 600 MB.

    python -m compileall -q src   # else every run pays to compile libdoctor
    python bench/bench_scale.py make /big/disk/dir       # ~1.2M small files, a few minutes
    python bench/bench_scale.py run /big/disk/dir [--rounds 3] [--snapshot] [--compare SRC]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

FILES_PER_DIST = 500
SIZES = {200_000: 400, 1_000_000: 2_000}  # recorded files -> distributions
PYTHON = "3.11"
ELF_EVERY = 50  # every 50th distribution ships an extension module
_ELF_SOURCE = "#include <math.h>\ndouble synth_value(double x) { return cos(x); }\n"


def _hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def _extension(work: Path) -> bytes | None:
    """An ELF extension module (DT_NEEDED libm, libc), or None without gcc."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    source, out = work / "ext.c", work / "ext.so"
    source.write_text(_ELF_SOURCE)
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-o", out, source, "-lm"], check=True)
    return out.read_bytes()


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _make_dist(site: str, index: int, total: int, extension: bytes | None) -> None:
    """Distribution INDEX: a package of FILES_PER_DIST recorded files (with its metadata)."""
    name, version = f"synth-pkg-{index:04d}", f"1.{index % 7}.0"
    package = f"synthpkg{index:04d}"
    info = f"synth_pkg_{index:04d}-{version}.dist-info"
    rows: list[str] = []
    requires = f"Requires-Dist: synth-pkg-{index - 1:04d}\n" if index else ""
    metadata = {
        "METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{requires}"
        ).encode(),
        "WHEEL": b"Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
        "INSTALLER": b"pip\n",
    }
    os.makedirs(os.path.join(site, info))
    for file_name, data in metadata.items():
        _write(os.path.join(site, info, file_name), data)
        rows.append(f"{info}/{file_name},{_hash(data)},{len(data)}")
    count = FILES_PER_DIST - len(metadata) - 1  # the RECORD is a row too
    if extension is not None and index % ELF_EVERY == 0:
        count -= 1
        relative = f"{package}/_native.cpython-311-x86_64-linux-gnu.so"
        os.makedirs(os.path.join(site, package))
        _write(os.path.join(site, relative), extension)
        rows.append(f"{relative},{_hash(extension)},{len(extension)}")
    for i in range(count):
        directory = f"{package}/sub{i // 25:02d}"
        if i % 25 == 0:
            os.makedirs(os.path.join(site, directory), exist_ok=True)
        relative = f"{directory}/mod{i % 25:02d}.py"
        data = f"# synthetic module {index}.{i} of {total}\nVALUE = {index * 1000 + i}\n".encode()
        _write(os.path.join(site, relative), data)
        rows.append(f"{relative},{_hash(data)},{len(data)}")
    rows.append(f"{info}/RECORD,,")
    _write(os.path.join(site, info, "RECORD"), ("\n".join(rows) + "\n").encode())


def make_env(prefix: Path, dists: int, extension: bytes | None) -> None:
    if (prefix / "complete").exists():
        print(f"{prefix}: already made")
        return
    if prefix.exists():
        shutil.rmtree(prefix)
    site = prefix / "lib" / f"python{PYTHON}" / "site-packages"
    site.mkdir(parents=True)
    (prefix / "bin").mkdir()
    (prefix / "pyvenv.cfg").write_text(
        f"home = /usr/bin\ninclude-system-site-packages = false\nversion = {PYTHON}.9\n"
    )
    start = time.perf_counter()
    for index in range(dists):
        _make_dist(str(site), index, dists, extension)
    (prefix / "complete").write_text(f"{dists} distributions\n")
    print(f"{prefix}: {dists} distributions written in {time.perf_counter() - start:.0f} s")


def _env(root: Path, files: int) -> Path:
    return root / f"files-{files}"


# Runs ARGV in a child and writes its peak RSS (KiB) and CPU seconds to the first argument:
# the launcher's own pages are not the child's (a child forked from a big parent would
# report them as its peak).
_LAUNCH = """
import os, sys
pid = os.fork()
if pid == 0:
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(f"{usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}")
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""


class Run(NamedTuple):
    wall: float
    cpu: float
    peak_mb: float


def measured(argv: list[str], env: dict[str, str], peak: str) -> Run:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _LAUNCH, peak, *argv],
        stderr=subprocess.PIPE,
        env=env,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv} failed ({proc.returncode}): {proc.stderr.decode().strip()}")
    kib, cpu = Path(peak).read_text().split()
    return Run(elapsed, float(cpu), int(kib) / 1024)


def run(root: Path, rounds: int, snapshot: bool, compare: Path | None) -> None:
    libdoctor = [sys.executable, "-m", "libdoctor"]
    trees = {"": dict(os.environ)}
    if compare is not None:
        paths = [str(compare), os.environ.get("PYTHONPATH", "")]
        trees[f" [{compare}]"] = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    with tempfile.TemporaryDirectory(prefix="libdoctor-bench-") as work:
        commands: dict[str, tuple[int, list[str], dict[str, str]]] = {}
        for label, environ in trees.items():
            for files in SIZES:
                env = str(_env(root, files))
                argv = [*libdoctor, "check", env, "--no-cache"]
                commands[f"check {files}{label}"] = (files, argv, environ)
                if snapshot:
                    out = os.path.join(work, f"s{files}.json.gz")
                    argv = [*libdoctor, "snapshot", env, "-o", out]
                    commands[f"snapshot.gz {files}{label}"] = (files, argv, environ)
        peak = os.path.join(work, "peak")
        for _, argv, environ in commands.values():  # warm the page cache
            measured(argv, environ, peak)
        runs: dict[str, list[Run]] = {name: [] for name in commands}
        for round_ in range(rounds):
            names = list(commands)
            for name in names if round_ % 2 == 0 else reversed(names):
                _, argv, environ = commands[name]
                runs[name].append(measured(argv, environ, peak))
    print(f"{root}: {rounds} rounds, medians; load {os.getloadavg()[0]:.2f}")
    print("| command | wall s | CPU s | CPU us per file | vs 200k | peak RSS MB |")
    print("|---|---|---|---|---|---|")
    base: dict[str, float] = {}
    for name, (files, _, _) in commands.items():
        wall = statistics.median(r.wall for r in runs[name])
        cpu = statistics.median(r.cpu for r in runs[name])
        per_file = cpu / files * 1e6
        kind = name.split(" ", 2)[0] + name.partition("]")[0].partition("[")[2]
        base.setdefault(kind, per_file)
        peak_mb = max(r.peak_mb for r in runs[name])
        print(
            f"| {name} | {wall:.2f} | {cpu:.2f} | {per_file:.2f} | "
            f"{per_file / base[kind]:.2f}x | {peak_mb:.0f} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("make", "run"))
    parser.add_argument("root", type=Path, help="where the environments are (made)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--snapshot", action="store_true", help="also time snapshot -o X.gz")
    parser.add_argument("--compare", type=Path, help="another libdoctor's src directory")
    args = parser.parse_args()
    if args.action == "make":
        args.root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as work:
            extension = _extension(Path(work))
        for files, dists in SIZES.items():
            make_env(_env(args.root, files), dists, extension)
    else:
        run(args.root.resolve(), args.rounds, args.snapshot, args.compare)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
