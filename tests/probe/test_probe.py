"""``libdoctor probe``: real imports in the target interpreter, read back from /proc/self/maps.

Every module here is real: extension modules compiled with gcc in the test, shipped in wheels
installed by the real pip, imported by the venv's own python through the real CLI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from libdoctor.errors import LibdoctorError
from libdoctor.findings import Code, Finding, Fix, Severity
from libdoctor.probe.analyse import explain_failure
from libdoctor.remedy import RemoveMetadata
from support.stackfake import EXT, TorchStack, compile_extension, fake_lib
from support.venvs import (
    SRC_DIR,
    LibdoctorRun,
    Venv,
    VenvFactory,
    libdoctor_env,
    pip_env,
    pip_install,
)
from support.wheels import WheelFactory, native_tag

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="probe reads /proc/self/maps (Linux)"
)

# Runs the CLI with `probe` registered even before cli.COMMANDS lists it.
_MAIN = (
    "import sys\n"
    "from libdoctor.cli import main as cli\n"
    "if 'probe' not in cli.COMMANDS:\n"
    "    cli.COMMANDS = (*cli.COMMANDS, 'probe')\n"
    "sys.exit(cli.main(sys.argv[1:]))\n"
)

Doc = dict[str, Any]


def probe(
    *args: str | os.PathLike[str] | Venv, env: Mapping[str, str | None] | None = None
) -> LibdoctorRun:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _MAIN,
            "probe",
            *(os.fspath(a.path if isinstance(a, Venv) else a) for a in args),
        ],
        env=libdoctor_env(env),
        capture_output=True,
        timeout=300,
        check=False,
        cwd=SRC_DIR.parent,
    )
    return LibdoctorRun(
        proc.returncode,
        proc.stdout.decode("utf-8", "surrogateescape"),
        proc.stderr.decode("utf-8", "surrogateescape"),
    )


def findings(doc: Doc, code: str) -> list[Doc]:
    return [f for f in doc["findings"] if f["code"] == code]


def loaded(doc: Doc, module: str | None = None) -> dict[str, Doc]:
    (entry,) = [p for p in doc["probes"] if module is None or p["module"] == module]
    return {item["path"]: item for item in entry["loaded"]}


def owner_names(item: Doc) -> list[str]:
    return [o["name"] for o in item["owners"]]


# --------------------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("names", "modules", "target"),
    [
        ([], [], None),
        (["torch"], ["torch"], None),
        (["torch", "jax.numpy"], ["torch", "jax.numpy"], None),
        (["torch", "/x/venv"], ["torch"], "/x/venv"),
        (["./venv"], [], "./venv"),
        ([".venv"], [], ".venv"),
        (["torch", "my-env"], ["torch"], "my-env"),
    ],
)
def test_split_names(names: list[str], modules: list[str], target: str | None) -> None:
    from libdoctor.cli.probe import split_names

    assert split_names(names) == (modules, target)


def test_split_names_rejects_a_target_before_modules() -> None:
    from libdoctor.cli.probe import split_names

    with pytest.raises(LibdoctorError, match="not a module name"):
        split_names(["/x/venv", "torch"])


def _f(code: Code, message: str = "", paths: tuple[str, ...] = (), **evidence: Any) -> Finding:
    return Finding(
        code,
        Severity.ERROR,
        message,
        paths=paths,
        evidence=evidence,
        fix=Fix((RemoveMetadata("x"),)),
    )


def test_explain_failure_by_soname_and_by_symbol() -> None:
    unresolved = _f("unresolved-library", "libgone.so.1 not found", library="libgone.so.1")
    missing = _f(
        "missing-files", "gonelib is missing files", paths=("/s/gonelib/lib/libgone.so.1",)
    )
    other = _f("unresolved-library", "libz.so.9", library="libz.so.9")
    foreign = _f("foreign-bytes", "x")
    static = [missing, other, foreign, unresolved]
    text = "libgone.so.1: cannot open shared object file: No such file or directory"
    assert explain_failure(text, static) == [unresolved, missing]
    assert explain_failure("/a/libtorch.so: undefined symbol: ncclX", static) == [foreign]
    assert explain_failure("No module named 'nope'", static) == []


def test_child_reports_facts_and_survives_a_hanging_fact(tmp_path: Path) -> None:
    from libdoctor.probe.child import run_child

    facts = [("indent", "json.dumps([1], indent=1).count(' ')"), ("bad", "json.nope")]
    child = run_child(sys.executable, "json", timeout=60, facts=facts, cwd=str(tmp_path))
    assert child.ok and not child.timed_out and child.maps
    assert child.facts["indent"] == 1
    assert child.facts["bad"] == {"error": "AttributeError: module 'json' has no attribute 'nope'"}

    slow = [("slow", "__import__('time').sleep(120)")]
    started = time.monotonic()
    hung = run_child(sys.executable, "json", timeout=3, facts=slow, cwd=str(tmp_path))
    assert time.monotonic() - started < 60
    assert hung.ok and hung.facts_timed_out and not hung.timed_out
    assert hung.maps, "the import's maps were written before the facts"
    assert "did not finish within 3 s" in hung.facts["error"]


# --------------------------------------------------------------------------- a zoo of modules


@pytest.fixture(scope="module")
def zoo(module_venv: VenvFactory, module_wheels: WheelFactory) -> Venv:
    venv = module_venv("zoo")
    tag = native_tag()
    extpkg = module_wheels(
        "extpkg",
        "1.0",
        {
            "extpkg/__init__.py": b"from . import _ext\n",
            f"extpkg/_ext{EXT}": compile_extension(
                "_ext", needed=["libfoo.so.1"], rpath="$ORIGIN/lib"
            ),
            "extpkg/lib/libfoo.so.1": fake_lib("libfoo.so.1"),
            # A second copy of libfoo.so.1, loaded by path through ctypes.
            "extpkg/dup.py": b"import ctypes, os\nfrom . import _ext\n"
            b"ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'copy', 'libfoo.so.1'))\n",
            "extpkg/copy/libfoo.so.1": fake_lib("libfoo.so.1", pad=64),
        },
        tag=tag,
    )
    broken = module_wheels(
        "brokenext",
        "1.0",
        {
            "brokenext/__init__.py": b"from . import _ext\n",
            f"brokenext/_ext{EXT}": compile_extension(
                "_ext", needed=["libgone.so.1"], rpath="$ORIGIN/../gonelib/lib"
            ),
        },
        requires=["gonelib"],
        tag=tag,
    )
    gonelib = module_wheels(
        "gonelib", "2.0", {"gonelib/lib/libgone.so.1": fake_lib("libgone.so.1")}
    )
    llpmod = module_wheels(
        "llpmod",
        "1.0",
        {
            "llpmod/__init__.py": b"from . import _ext\n",
            f"llpmod/_ext{EXT}": compile_extension(
                "_ext", needed=["libbar.so.1"], runpath="$ORIGIN/lib"
            ),
            "llpmod/lib/libbar.so.1": fake_lib("libbar.so.1"),
            "llpmod/again.py": b"from . import _ext\n",
        },
        tag=tag,
    )
    # An extension module named like one of the stdlib's (lib-dynload/_csv...so): both load.
    csvlike = module_wheels(
        "csvlike",
        "1.0",
        {
            "csvlike/__init__.py": b"import _csv, importlib\n"
            b"own = importlib.import_module('csvlike._csv')\n",
            f"csvlike/_csv{EXT}": compile_extension("_csv"),
        },
        tag=tag,
    )
    hang = module_wheels(
        "hangmod",
        "1.0",
        {
            "hangmod.py": b"import os, subprocess, time\n"
            b"child = subprocess.Popen(['sleep', '300'])\n"
            b"open(os.environ['HANGMOD_PIDFILE'], 'w').write(str(child.pid))\n"
            b"time.sleep(300)\n",
            "crashmod.py": b"import os\nos.abort()\n",
        },
    )
    # Loads its library by absolute path before the import that needs it (no RPATH): a
    # runtime loader the emulation does not know, so check calls the library unresolved.
    preload = module_wheels(
        "preloadmod",
        "1.0",
        {
            # Loaded in another module than the one importing _ext: a load the static
            # import context (imports.loaded_first: same file, before the import) cannot see.
            "preloadmod/__init__.py": b"from . import _loader\nfrom . import _ext\n",
            "preloadmod/_loader.py": b"import ctypes, os\n"
            b"ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'libs', 'libpre.so.1'),"
            b" ctypes.RTLD_GLOBAL)\n",
            f"preloadmod/_ext{EXT}": compile_extension("_ext", needed=["libpre.so.1"]),
            "preloadmod/libs/libpre.so.1": fake_lib("libpre.so.1"),
        },
        tag=tag,
    )
    pip_install(venv, extpkg, broken, gonelib, llpmod, hang, csvlike, preload)
    # The state an uninstall of a path-sharing package leaves: metadata, no library.
    (venv.site_packages / "gonelib/lib/libgone.so.1").unlink()
    return venv


def test_loaded_files_are_listed_with_owners(zoo: Venv) -> None:
    run = probe("extpkg", zoo, "--json")
    assert run.rc == 0, run.describe()
    assert "RUNS code from the target" in run.stderr
    doc = run.json()
    assert doc["findings"] == []
    items = loaded(doc)
    site = os.path.realpath(zoo.site_packages)
    ext = items[f"{site}/extpkg/_ext{EXT}"]
    foo = items[f"{site}/extpkg/lib/libfoo.so.1"]
    for item in (ext, foo):
        assert owner_names(item) == ["extpkg"]
        assert item["record_match"] is True and item["decided_by"] == "size"
        assert item["inside_env"] is True
    assert foo["soname"] == "libfoo.so.1"
    assert foo["predicted"] == [f"{site}/extpkg/lib/libfoo.so.1"]
    libc = [i for p, i in items.items() if os.path.basename(p).startswith("libc.so")]
    assert libc and libc[0]["owners"] == [] and libc[0]["inside_env"] is False


def test_loaded_files_by_hash_with_deep(zoo: Venv) -> None:
    run = probe("extpkg", zoo, "--json", "--deep")
    assert run.rc == 0, run.describe()
    foo = loaded(run.json())[f"{os.path.realpath(zoo.site_packages)}/extpkg/lib/libfoo.so.1"]
    assert foo["record_match"] is True and foo["decided_by"] == "hash"


def test_text_output(zoo: Venv) -> None:
    run = probe("extpkg", zoo, "--color", "never")
    assert run.rc == 0, run.describe()
    assert "extpkg: imported in" in run.stdout
    assert "extpkg/lib/libfoo.so.1  extpkg 1.0  RECORD ok (size)" in run.stdout


def test_second_copy_through_ctypes_is_a_duplicate(zoo: Venv) -> None:
    run = probe("extpkg.dup", zoo, "--json")
    doc = run.json()
    (dup,) = findings(doc, "duplicate-library")
    site = os.path.realpath(zoo.site_packages)
    assert dup["severity"] == "warning"
    assert dup["evidence"]["library"] == "libfoo.so.1"
    assert sorted(c["path"] for c in dup["evidence"]["copies"]) == [
        f"{site}/extpkg/copy/libfoo.so.1",
        f"{site}/extpkg/lib/libfoo.so.1",
    ]
    # The predicted copy is loaded too: a dlopen by path is not a misprediction.
    assert findings(doc, "static-runtime-mismatch") == []
    assert run.rc == 0, run.describe()  # a warning does not fail the default --fail-on


def test_failed_import_is_joined_to_the_static_finding(zoo: Venv) -> None:
    run = probe("brokenext", zoo, "--json")
    assert run.rc == 1, run.describe()
    (failed,) = findings(run.json(), "import-failed")
    assert "libgone.so.1: cannot open shared object file" in failed["message"]
    explained = failed["evidence"]["explained_by"]
    assert explained, failed
    assert explained[0]["code"] == "unresolved-library"
    assert "missing-files" in [e["code"] for e in explained]
    assert failed["fix"]["argv"][-1] == "gonelib==2.0"
    assert "Explained by unresolved-library" in failed["message"]


def test_hanging_import_hits_the_timeout(zoo: Venv, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    started = time.monotonic()
    run = probe("hangmod", zoo, "--timeout", "3", "--json", env={"HANGMOD_PIDFILE": str(pidfile)})
    assert time.monotonic() - started < 60
    assert run.rc == 1, run.describe()
    assert "import hangmod did not finish within 3 s; libdoctor killed its process group" in (
        run.stderr
    )
    (failed,) = findings(run.json(), "import-failed")
    assert failed["evidence"]["timeout"] == 3
    grandchild = int(pidfile.read_text())
    assert not _running(grandchild), "the import's own child outlived the timeout"


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_crashing_import_is_reported(zoo: Venv) -> None:
    run = probe("crashmod", zoo, "--json")
    assert run.rc == 1, run.describe()
    (failed,) = findings(run.json(), "import-failed")
    assert "died with SIGABRT" in failed["message"]


def test_library_from_ld_library_path_is_outside_the_env(zoo: Venv, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "libbar.so.1").write_bytes(fake_lib("libbar.so.1", pad=8))
    run = probe("llpmod", zoo, "--json", env={"LD_LIBRARY_PATH": str(outside)})
    doc = run.json()
    (found,) = findings(doc, "loaded-outside-env")
    assert found["evidence"]["loaded"] == str(outside / "libbar.so.1")
    site = os.path.realpath(zoo.site_packages)
    assert [os.path.realpath(p) for p in found["evidence"]["environment_copies"]] == [
        f"{site}/llpmod/lib/libbar.so.1"
    ]
    assert found["evidence"]["ld_library_path"] == str(outside)
    # The emulation saw LD_LIBRARY_PATH too: it predicted exactly this.
    assert findings(doc, "static-runtime-mismatch") == []


def test_one_finding_for_a_library_every_probed_module_loads(zoo: Venv, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "libbar.so.1").write_bytes(fake_lib("libbar.so.1", pad=8))
    run = probe("llpmod", "llpmod.again", zoo, "--json", env={"LD_LIBRARY_PATH": str(outside)})
    doc = run.json()
    assert [p["module"] for p in doc["probes"]] == ["llpmod", "llpmod.again"]
    assert len(findings(doc, "loaded-outside-env")) == 1


def test_a_module_named_like_a_stdlib_one_is_not_loaded_outside(zoo: Venv) -> None:
    """The stdlib's lib-dynload/_csv and csvlike/_csv share a file name, not an identity:
    both are mapped, neither instead of the other."""
    run = probe("csvlike", zoo, "--json")
    doc = run.json()
    paths = [os.path.basename(p) for p in loaded(doc)]
    assert paths.count(f"_csv{EXT}") == 2, paths
    assert findings(doc, "loaded-outside-env") == []
    assert doc["findings"] == [], doc["findings"]


def test_a_module_check_calls_unloadable_but_the_process_loads_is_a_mismatch(zoo: Venv) -> None:
    doc = probe("preloadmod", zoo, "--json").json()
    (mismatch,) = findings(doc, "static-runtime-mismatch")
    assert mismatch["evidence"]["library"] == "libpre.so.1"
    assert [os.path.basename(p) for p in mismatch["paths"]] == [f"_ext{EXT}"]


def test_no_framework_and_no_module_is_a_clear_error(zoo: Venv) -> None:
    run = probe(zoo)
    assert run.rc == 2
    assert "no framework found" in run.stderr


# --------------------------------------------------------------------------- fake torch


@pytest.fixture(scope="module")
def stack(module_wheels: WheelFactory) -> TorchStack:
    return TorchStack(module_wheels)


def test_probe_fake_torch_agrees_with_the_prediction(
    stack: TorchStack, module_venv: VenvFactory
) -> None:
    venv = module_venv("torch-coherent")
    pip_install(venv, *stack.coherent())
    run = probe(venv, "--json")  # default module: the detected framework
    assert run.rc == 0, run.describe()
    doc = run.json()
    assert doc["findings"] == []
    (entry,) = doc["probes"]
    assert entry["module"] == "torch" and entry["ok"]
    assert entry["facts"]["cuda"] == "13.0"
    assert "error" in entry["facts"]["cudnn"]  # no torch.backends here: reported, not fatal
    items = loaded(doc)
    site = os.path.realpath(venv.site_packages)
    cudnn = items[f"{site}/nvidia/cudnn/lib/libcudnn.so.9"]
    assert owner_names(cudnn) == ["nvidia-cudnn-cu13"] and cudnn["record_match"] is True
    assert cudnn["predicted"] == [f"{site}/nvidia/cudnn/lib/libcudnn.so.9"]


def test_probe_fake_torch_loads_the_wrong_majors_copy(
    stack: TorchStack, module_venv: VenvFactory
) -> None:
    venv = module_venv("torch-wrong-major")
    pip_install(venv, *stack.coherent())
    pip_install(venv, stack.cusparse12())
    run = probe("torch", venv, "--json")
    doc = run.json()
    site = os.path.realpath(venv.site_packages)
    items = loaded(doc)
    cusparse = [p for p in items if os.path.basename(p) == "libcusparse.so.12"]
    assert cusparse == [f"{site}/nvidia/cusparse/lib/libcusparse.so.12"]  # cu12's, as predicted
    assert owner_names(items[cusparse[0]]) == ["nvidia-cusparse-cu12"]
    assert findings(doc, "static-runtime-mismatch") == []


def test_probe_fake_torch_overwritten_cudnn(stack: TorchStack, module_venv: VenvFactory) -> None:
    venv = module_venv("torch-overwritten")
    pip_install(venv, *stack.coherent())
    pip_install(venv, stack.cudnn12())
    run = probe("torch", venv, "--json")
    assert run.rc == 1, run.describe()
    (foreign,) = findings(run.json(), "loaded-foreign-bytes")
    assert foreign["distribution"] == {"name": "nvidia-cudnn-cu13", "version": "9.24.0.43"}
    assert foreign["evidence"]["bytes_of"] == [
        {"name": "nvidia-cudnn-cu12", "version": "9.10.2.21"}
    ]
    # The static foreign-bytes fix: drop the leftover, then restore what it overwrote.
    assert foreign["fix"]["steps"][0][-1] == "nvidia-cudnn-cu12"
    assert foreign["fix"]["steps"][1][-1] == "nvidia-cudnn-cu13==9.24.0.43"


# --------------------------------------------------------------------------- real tier


@pytest.mark.realenv
def test_real_probe_torch() -> None:
    env = Path(os.environ.get("LIBDOCTOR_TORCH_ENV") or "/work/envs/torchenv")
    if not (env / "pyvenv.cfg").exists():
        pytest.skip(f"no torch environment at {env}")
    run = probe("torch", env, "--json")
    assert run.rc == 0, run.describe()
    doc = run.json()
    assert [f["code"] for f in doc["findings"]] == []
    (entry,) = doc["probes"]
    assert entry["facts"]["version"].startswith("2.14.1")
    assert isinstance(entry["facts"]["cudnn"], int)
    items = loaded(doc)
    (cudnn,) = [i for p, i in items.items() if p.endswith("/nvidia/cudnn/lib/libcudnn.so.9")]
    assert owner_names(cudnn) == ["nvidia-cudnn-cu13"]
    assert cudnn["record_match"] is True
    assert cudnn["predicted"] == [cudnn["path"]]
    predicted = [i for i in items.values() if i["predicted"]]
    assert all(i["path"] in i["predicted"] for i in predicted)


@pytest.mark.realenv
def test_real_probe_torch_without_cudnn() -> None:
    """The seed, for real: libcudnn.so.9 gone, `import torch` fails, the static finding says why.

    The copy is made with hard links next to the torch env (same file system) and only has
    a link removed: the original's bytes are never touched.
    """
    env = Path(os.environ.get("LIBDOCTOR_TORCH_ENV") or "/work/envs/torchenv")
    if not (env / "pyvenv.cfg").exists():
        pytest.skip(f"no torch environment at {env}")
    copy = env.parent / f".libdoctor-probe-test-{os.getpid()}"
    made = subprocess.run(["cp", "-al", str(env), str(copy)], capture_output=True, check=False)
    if made.returncode != 0:
        shutil.rmtree(copy, ignore_errors=True)
        pytest.skip(f"cannot make a hard-linked copy next to {env}: {made.stderr!r}")
    try:
        (cudnn,) = copy.glob("lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9")
        cudnn.unlink()
        run = probe("torch", copy, "--json")
        assert run.rc == 1, run.describe()
        (failed,) = findings(run.json(), "import-failed")
        assert "libcudnn.so.9: cannot open shared object file" in failed["message"]
        explained = failed["evidence"]["explained_by"]
        assert explained and explained[0]["code"] == "unresolved-library"
        assert failed["fix"]["argv"][-1] == "nvidia-cudnn-cu13==9.24.0.43"
    finally:
        shutil.rmtree(copy, ignore_errors=True)


DEBIAN_PYTHON = "/usr/bin/python3"
DEBIAN_YAML = "/usr/lib/python3/dist-packages/yaml/_yaml.cpython-311-x86_64-linux-gnu.so"


@pytest.mark.skipif(
    not os.path.exists(DEBIAN_YAML), reason="needs Debian's python3 with python3-yaml (apt)"
)
def test_debian_system_python_probe_has_no_errors_or_warnings() -> None:
    """Debian's interpreter is a non-PIE executable (mapped as the main program, not a
    misprediction); its packages' extensions are stripped by the distro (their RECORD
    sizes differ on purpose: information, not foreign bytes)."""
    run = probe("yaml", "--python", DEBIAN_PYTHON, "--json")
    doc = run.json()
    loud = [f for f in doc["findings"] if f["severity"] in ("error", "warning")]
    assert loud == [], loud
    assert {f["code"] for f in doc["findings"]} <= {"loaded-foreign-bytes"}


# --------------------------------------------------------------------------- --target folders


def test_a_target_folder_is_imported_from_the_folder(
    zoo: Venv, module_wheels: WheelFactory, tmp_path: Path
) -> None:
    """``pip install --target DIR`` is used through PYTHONPATH (pip's own advice): the child
    gets DIR first on it, else every import of the folder's modules failed (a false
    import-failed for each). The modules come before ``--python`` and the folder, as a user
    types them."""
    wheel = module_wheels(
        "tgtmod",
        "1.0",
        {
            "tgtmod/__init__.py": b"from . import _ext\n",
            f"tgtmod/_ext{EXT}": compile_extension("_ext", needed=["libtg.so.1"], rpath="$ORIGIN"),
            "tgtmod/libtg.so.1": fake_lib("libtg.so.1"),
        },
        tag=native_tag(),
    )
    folder = tmp_path / "folder"
    pip = [str(zoo.python), "-m", "pip", "install", "-q", "--no-deps", "--target"]
    subprocess.run(
        [*pip, str(folder), str(wheel)],
        env=pip_env(),
        check=True,
    )
    run = probe("tgtmod", "--json", "--python", zoo.python, folder)
    assert run.rc == 0, run.describe()
    doc = run.json()
    assert doc["findings"] == []
    (module,) = doc["probes"]
    assert module["ok"] is True
    loaded = {os.path.basename(f["path"]) for f in module["loaded"]}
    assert {f"_ext{EXT}", "libtg.so.1"} <= loaded


def test_a_cpu_framework_is_a_default_module(tmp_path: Path) -> None:
    """A CPU jax or onnxruntime (no CUDA plugin) is probed by default: the trial's
    ``libdoctor probe ENV`` on jax + jaxlib said "no framework found"."""
    from libdoctor.environment.model import build_environment
    from libdoctor.environment.target import discover
    from libdoctor.probe.analyse import default_modules

    site = tmp_path / "env" / "lib/python{}.{}/site-packages".format(*sys.version_info[:2])
    for name in ("jax", "jaxlib", "onnxruntime", "numpy"):
        info = site / f"{name}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "RECORD").write_text(f"{name}-1.0.dist-info/METADATA,,\n")
    cfg = "home = /usr/bin\ninclude-system-site-packages = false\n"
    (tmp_path / "env" / "pyvenv.cfg").write_text(cfg)
    env = build_environment(discover(str(tmp_path / "env"), None, {}))
    assert default_modules(env) == ["jax", "onnxruntime"]
