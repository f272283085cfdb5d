"""conda prefixes: real ``conda-meta`` records written by py-rattler installing small ``.conda``
packages (built here with conda-package-handling) from a local ``file://`` channel, offline.

The packages: ``libfoo`` ships a shared library and a data file, ``foocfg`` a text file with a
prefix placeholder (rewritten at install: rattler records its ``sha256_in_prefix``), ``pyfoo``
a Python package with its own dist-info (INSTALLER ``conda``). Then the usual conda breakages
are made for real: a deleted file, an edited placeholder file, and a pip package whose wheel
overwrote a conda package's file.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.cc import compile_lib, require_gcc
from support.venvs import Libdoctor, pip_env
from support.wheels import WheelFactory, extension_suffix

rattler = pytest.importorskip(
    "rattler", reason="py-rattler is not installed (pip install py-rattler)"
)
cph = pytest.importorskip(
    "conda_package_handling.api", reason="conda-package-handling is not installed"
)

PLACEHOLDER = "/opt/anaconda1anaconda2anaconda3"
SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
PYFOO_INIT = b"VALUE = 'conda'\n"
EXT = extension_suffix()


def build_package(
    channel: Path, name: str, version: str, files: dict[str, bytes], placeholder: tuple[str, ...]
) -> None:
    src = channel.parent / f"src-{name}"
    (src / "info").mkdir(parents=True)
    paths = []
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
        entry: dict[str, Any] = {
            "_path": rel,
            "path_type": "hardlink",
            "sha256": hashlib.sha256(data).hexdigest(),
            "size_in_bytes": len(data),
        }
        if rel in placeholder:
            entry.update(prefix_placeholder=PLACEHOLDER, file_mode="text")
        paths.append(entry)
    info = src / "info"
    (info / "paths.json").write_text(json.dumps({"paths": paths, "paths_version": 1}))
    (info / "has_prefix").write_text("".join(f"{PLACEHOLDER} text {p}\n" for p in placeholder))
    (info / "files").write_text("".join(f"{p}\n" for p in files))
    index = {"name": name, "version": version, "build": "0", "build_number": 0, "depends": []}
    index.update(subdir="linux-64", platform="linux", arch="x86_64", timestamp=1700000000000)
    (info / "index.json").write_text(json.dumps(index))
    out = channel / "linux-64"
    out.mkdir(parents=True, exist_ok=True)
    cph.create(str(src), None, f"{name}-{version}-0.conda", out_folder=str(out))


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Any], Path]:
    """The solved records of the three packages, and the package cache to install them from."""
    from rattler.index import index_fs

    base = tmp_path_factory.mktemp("conda")
    channel = base / "channel"
    (channel / "noarch").mkdir(parents=True)
    require_gcc()
    built = base / "built"
    built.mkdir()
    libfoo = compile_lib(built, "libfoo.so.1", soname="libfoo.so.1").read_bytes()
    # site-packages/pyfoo/ -> $ORIGIN/../../.. is the prefix's lib/, as conda builds set it
    ext = compile_lib(built, f"_ext{EXT}", needed=["libfoo.so.1"], runpath="$ORIGIN/../../..")
    build_package(
        channel, "libfoo", "1.0", {"lib/libfoo.so.1": libfoo, "share/foo.txt": b"hello\n"}, ()
    )
    build_package(
        channel,
        "foocfg",
        "2.0",
        {"etc/foo.cfg": f"prefix={PLACEHOLDER}\n".encode()},
        ("etc/foo.cfg",),
    )
    dist_info = f"{SITE}/pyfoo-1.0.dist-info"
    build_package(
        channel,
        "pyfoo",
        "1.0",
        {
            f"{SITE}/pyfoo/__init__.py": PYFOO_INIT,
            f"{SITE}/pyfoo/_ext{EXT}": ext.read_bytes(),
            f"{dist_info}/METADATA": b"Metadata-Version: 2.1\nName: pyfoo\nVersion: 1.0\n",
            f"{dist_info}/INSTALLER": b"conda\n",
        },
        (),
    )

    async def solve() -> list[Any]:
        await index_fs(channel)
        found: list[Any] = await rattler.solve(
            [rattler.Channel(channel.as_uri())],
            ["libfoo", "foocfg", "pyfoo"],
            platforms=["linux-64", "noarch"],
            virtual_packages=[],
        )
        return found

    return asyncio.run(solve()), base / "pkgs"


@pytest.fixture
def prefix(records: tuple[list[Any], Path], tmp_path: Path) -> Path:
    found, cache = records
    target = tmp_path / "env"
    asyncio.run(rattler.install(found, target, cache_dir=cache, show_progress=False))
    return target


def findings(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return list(doc["findings"])


def conda_fix(prefix: Path, spec: str) -> list[str]:
    from libdoctor.external.installers import conda_exe

    head = [conda_exe(str(prefix)), "install", "--yes", "--prefix", str(prefix)]
    return [*head, "--force-reinstall", "--no-deps", spec]


def test_the_records_are_condas(prefix: Path) -> None:
    """What rattler wrote is what the reader expects: paths_data, and for the placeholder
    file the installed file's sha256 beside the package's."""
    record = json.loads((prefix / "conda-meta/foocfg-2.0-0.json").read_text())
    (row,) = record["paths_data"]["paths"]
    assert row["prefix_placeholder"] == PLACEHOLDER
    installed = (prefix / "etc/foo.cfg").read_bytes()
    assert installed == f"prefix={prefix}\n".encode()
    assert row["sha256_in_prefix"] == hashlib.sha256(installed).hexdigest() != row["sha256"]


def test_a_healthy_prefix_is_clean(prefix: Path, libdoctor: Libdoctor) -> None:
    run = libdoctor.check(prefix, "--json", "--all", "--deep")
    assert run.rc == 0, run.describe()
    assert findings(run.json()) == []


def test_each_conda_package_is_a_distribution(prefix: Path) -> None:
    from libdoctor.environment.model import build_environment
    from libdoctor.environment.target import discover

    env = build_environment(discover(str(prefix), None, {}))
    by_name = {d.name: d for d in env.distributions}
    assert set(by_name) == {"libfoo", "foocfg", "pyfoo"}  # pyfoo's dist-info is conda's
    assert by_name["pyfoo"].conda_spec == "pyfoo=1.0=0"
    assert [d.name for d in env.owners(str(prefix / "lib/libfoo.so.1"))] == ["libfoo"]


def test_a_deleted_conda_file_is_reported_once_with_condas_reinstall(
    prefix: Path, libdoctor: Libdoctor
) -> None:
    (prefix / "share/foo.txt").unlink()
    run = libdoctor.check(prefix, "--json")
    assert run.rc == 1, run.describe()
    (missing,) = findings(run.json())
    assert missing["code"] == "missing-files"
    assert missing["distribution"] == {"name": "libfoo", "version": "1.0"}
    assert missing["fix"]["argv"] == conda_fix(prefix, "libfoo=1.0=0")


def test_an_edited_placeholder_file_is_judged_by_its_installed_sha256(
    prefix: Path, libdoctor: Libdoctor
) -> None:
    path = prefix / "etc/foo.cfg"
    path.write_bytes(path.read_bytes().replace(b"prefix=", b"prefiX="))
    run = libdoctor.check(prefix, "--json", "--deep")
    (altered,) = findings(run.json())
    assert altered["code"] == "altered-files"
    assert altered["distribution"]["name"] == "foocfg"
    assert altered["fix"]["argv"] == conda_fix(prefix, "foocfg=2.0=0")
    assert "its conda-meta record" in altered["message"]  # conda has no RECORD
    assert "RECORD" not in altered["message"]


def test_a_placeholder_file_without_sha256_in_prefix_is_not_a_false_alarm(
    prefix: Path, libdoctor: Libdoctor
) -> None:
    """Older conda records only the package's sha256 for a rewritten file: it must differ
    from the installed file, so only its presence can be checked."""
    meta = prefix / "conda-meta/foocfg-2.0-0.json"
    record = json.loads(meta.read_text())
    for row in record["paths_data"]["paths"]:
        row.pop("sha256_in_prefix", None)
    meta.write_text(json.dumps(record))
    run = libdoctor.check(prefix, "--json", "--all", "--deep")
    assert findings(run.json()) == [], run.describe()


def test_a_pip_package_that_overwrote_a_conda_file(
    prefix: Path, libdoctor: Libdoctor, make_wheel: WheelFactory, tmp_path: Path
) -> None:
    """The most common conda breakage: a wheel ships a path a conda package owns."""
    wheel = make_wheel("clobber", "3.0", {"pyfoo/__init__.py": b"VALUE = 'pip'\n"})
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--prefix", str(prefix), wheel],
        env=pip_env(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    run = libdoctor.check(prefix, "--json")
    shared = [f for f in findings(run.json()) if f["code"] == "shared-path"]
    assert len(shared) == 1, run.describe()
    text = json.dumps(shared[0])
    assert "pyfoo" in text and "clobber" in text
    assert shared[0]["evidence"]["keep"]["name"] == "pyfoo"
    assert shared[0]["evidence"]["keep"]["by"] == "conda-package"
    # never pip over a conda-owned file: the pip package goes, conda puts its file back
    fix = shared[0]["fix"]["command"]
    uninstall, reinstall = fix.split(" && ")
    assert "pip uninstall --yes clobber" in uninstall
    assert reinstall.split() == conda_fix(prefix, "pyfoo=1.0=0")


def test_conda_findings_name_the_conda_meta_record(prefix: Path, libdoctor: Libdoctor) -> None:
    lib = prefix / "lib/libfoo.so.1"
    (prefix / "lib/libstray.so").write_bytes(lib.read_bytes())
    data = lib.read_bytes()
    lib.unlink()
    lib.write_bytes(data + b"x")
    run = libdoctor.check(prefix, "--json", "--all")
    by_code = {f["code"]: f["message"] for f in findings(run.json())}
    assert "differs from its conda-meta record (by size)" in by_code["altered-files"]
    assert "claimed by no RECORD or conda-meta record" in by_code["untracked-library"]
    (prefix / "share/foo.txt").unlink()
    plan = libdoctor("plan", "uninstall", "libfoo", str(prefix))
    assert "1 path(s) its conda-meta record lists already gone" in plan.stdout, plan.stdout


def test_plan_uninstall_of_a_conda_package(prefix: Path, libdoctor: Libdoctor) -> None:
    """``plan uninstall`` reads a conda package's files from its record: the library goes,
    and the extension module of another conda package that needs it breaks."""
    run = libdoctor("plan", "uninstall", "libfoo", str(prefix))
    assert run.rc == 1, run.describe()
    text = run.stdout
    assert "conda remove libfoo 1.0 would delete 2 files" in text, text
    assert "libfoo.so.1" in text and "import pyfoo._ext fails" in text, text


def test_why_a_conda_library_is_found_and_who_owns_it(prefix: Path, libdoctor: Libdoctor) -> None:
    why = libdoctor("why", "libfoo.so.1", str(prefix), "--json")
    assert why.rc == 0, why.describe()
    (request,) = why.json()["requests"]
    assert request["via"] == "runpath"
    assert request["owner"] == [{"name": "libfoo", "version": "1.0"}]
    tree = libdoctor("tree", "pyfoo._ext", str(prefix)).stdout
    assert "libfoo.so.1 => " in tree and "(libfoo 1.0)" in tree, tree
    (prefix / "lib/libfoo.so.1").unlink()
    run = libdoctor.check(prefix, "--json")
    codes = sorted(f["code"] for f in run.json()["findings"])
    assert codes == ["missing-files", "unresolved-library"], run.describe()
    for finding in run.json()["findings"]:
        assert finding["fix"]["argv"] == conda_fix(prefix, "libfoo=1.0=0")
