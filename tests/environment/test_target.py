from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from libdoctor.environment.target import (
    Interpreter,
    discover,
    from_directory,
    from_python,
    mismatch,
    prefix_of_site_dir,
    read_built_for,
    resolve_interpreter,
)
from libdoctor.errors import TargetError


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return root


def _site(venv: Path) -> Path:
    return next((venv / "lib").glob("python3.*/site-packages"))


def test_venv_directory(bare_venv: Path) -> None:
    target = from_directory(bare_venv, "argument")
    assert target.prefix == str(bare_venv)
    assert target.site_packages == (str(_site(bare_venv)),)
    assert target.python == str(bare_venv / "bin" / "python")
    assert target.python_version == sys.version_info[:2]


def test_site_packages_directory(bare_venv: Path) -> None:
    target = from_directory(_site(bare_venv), "argument")
    assert target.prefix == str(bare_venv)
    assert target.site_packages == (str(_site(bare_venv)),)
    assert target.python == str(bare_venv / "bin" / "python")


def test_python_option_runs_isolated_and_agrees(bare_venv: Path) -> None:
    target = from_python(str(bare_venv / "bin" / "python"))
    assert Path(target.prefix) == bare_venv
    assert [Path(p).resolve() for p in target.site_packages] == [_site(bare_venv).resolve()]


def test_include_system_site_packages(tmp_path: Path) -> None:
    root = tmp_path / "env"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(root)],
        check=True,
    )
    target = from_directory(root, "argument")
    assert target.site_dirs[0].inherited is False
    inherited = [s for s in target.site_dirs if s.inherited]
    if not inherited:
        pytest.skip("the base interpreter has no site-packages of its own here")
    assert all(not s.path.startswith(str(root)) for s in inherited)


def test_defaults_follow_virtual_env_then_conda(bare_venv: Path) -> None:
    assert discover(None, None, {"VIRTUAL_ENV": str(bare_venv)}).chosen_by == "$VIRTUAL_ENV"
    assert discover(None, None, {"CONDA_PREFIX": str(bare_venv)}).chosen_by == "$CONDA_PREFIX"
    assert discover(None, None, {}).chosen_by == "the interpreter running libdoctor"


@pytest.mark.parametrize("kind", ["missing", "file", "empty"])
def test_not_an_environment_is_one_clear_error(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "x"
    if kind == "file":
        path.write_text("")
    elif kind == "empty":
        path.mkdir()
    with pytest.raises(TargetError) as excinfo:
        from_directory(path, "argument")
    assert "\n" not in str(excinfo.value)


def test_target_and_python_together_is_an_error(bare_venv: Path) -> None:
    with pytest.raises(TargetError):
        discover(str(bare_venv), sys.executable, {})


@pytest.mark.parametrize(
    ("site", "prefix"),
    [
        ("/p/lib/python3.11/site-packages", "/p"),
        ("/p/lib64/python3.12/site-packages", "/p"),
        ("/usr/lib/python3/dist-packages", "/usr"),
        ("/p/Lib/site-packages", "/p"),
        ("/opt/custom/target", "/opt/custom/target"),
    ],
)
def test_prefix_of_site_dir(site: str, prefix: str) -> None:
    assert prefix_of_site_dir(Path(site)) == Path(prefix)


# --------------------------------------------------------------------------- real interpreters


def _binary(path: Path) -> Path:
    """A stand-in interpreter binary: not a script, so nothing to see through."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF" + bytes(60))
    path.chmod(0o755)
    return path


def _pyenv(root: Path, *versions: str) -> Path:
    """A pyenv layout with a shim named python3, written as pyenv writes them, and one
    binary per version. The shim's exec target does not exist: running it would fail."""
    for version in versions:
        _binary(root / "versions" / version / "bin" / "python3.11")
        (root / "versions" / version / "bin" / "python3").symlink_to("python3.11")
    shim = root / "shims" / "python3"
    shim.parent.mkdir(parents=True)
    shim.write_text(
        "#!/usr/bin/env bash\nset -e\n"
        '[ -n "$PYENV_DEBUG" ] && set -x\n\nprogram="${0##*/}"\n\n'
        f'export PYENV_ROOT="{root}"\nexec "{root}/libexec/pyenv" exec "$program" "$@"\n'
    )
    shim.chmod(0o755)
    return shim


def test_a_venv_python_is_kept_even_behind_a_symlink(bare_venv: Path, tmp_path: Path) -> None:
    """Its symlink target is the base interpreter: pip run by that installs into the base."""
    link = tmp_path / "bin" / "py"
    link.parent.mkdir()
    link.symlink_to(bare_venv / "bin" / "python")
    assert resolve_interpreter(str(link)) == str(bare_venv / "bin" / "python")
    assert resolve_interpreter(str(bare_venv / "bin" / "python")) == str(
        bare_venv / "bin" / "python"
    )


def test_a_base_interpreter_resolves_to_the_real_binary(tmp_path: Path) -> None:
    real = _binary(tmp_path / "opt" / "bin" / "python3.11")
    (tmp_path / "opt" / "bin" / "python3").symlink_to("python3.11")
    (tmp_path / "usr-bin").mkdir()
    (tmp_path / "usr-bin" / "python").symlink_to(tmp_path / "opt" / "bin" / "python3")
    assert resolve_interpreter(str(tmp_path / "usr-bin" / "python")) == str(real)


@pytest.mark.parametrize(
    ("environ", "version_file", "local_file", "expected"),
    [
        ({"PYENV_VERSION": "3.11.9"}, "3.10.4", None, "3.11.9"),
        ({}, "3.10.4", "3.11.9", "3.11.9"),  # .python-version in the working dir wins
        ({}, "3.10.4", None, "3.10.4"),  # then $PYENV_ROOT/version
        ({"PYENV_VERSION": "3.11"}, None, None, "3.11.9"),  # a prefix: the newest match
        ({"PYENV_VERSION": "system"}, None, None, None),  # pyenv would search PATH
        ({}, None, None, None),  # no version at all: "system"
    ],
)
def test_a_pyenv_shim_is_read_through_its_layout(
    tmp_path: Path,
    environ: dict[str, str],
    version_file: str | None,
    local_file: str | None,
    expected: str | None,
) -> None:
    root = tmp_path / "pyenv"
    shim = _pyenv(root, "3.10.4", "3.11.2", "3.11.9")
    if version_file:
        (root / "version").write_text(version_file + "\n")
    work = tmp_path / "project" / "sub"
    work.mkdir(parents=True)
    if local_file:
        (tmp_path / "project" / ".python-version").write_text(f"# pinned\n{local_file}\n")
    found = resolve_interpreter(str(shim), environ, str(work))
    if expected is None:
        assert found is None
    else:
        assert found == str(root / "versions" / expected / "bin" / "python3.11")


def test_a_script_that_is_no_pyenv_shim_is_not_guessed(tmp_path: Path) -> None:
    script = tmp_path / "python3"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    script.chmod(0o755)
    assert resolve_interpreter(str(script), {}, str(tmp_path)) is None
    assert resolve_interpreter(str(tmp_path / "absent"), {}, str(tmp_path)) is None


def test_python_option_sees_through_a_wrapper_script(bare_venv: Path, tmp_path: Path) -> None:
    """A wrapper libdoctor cannot read is run (-I -S) and asked which binary it is."""
    script = tmp_path / "python3"
    script.write_text(f'#!/bin/sh\nexec {bare_venv / "bin" / "python"} "$@"\n')
    script.chmod(0o755)
    target = from_python(str(script), environ={"PATH": os.environ.get("PATH", "")})
    assert target.python == str(bare_venv / "bin" / "python")
    assert Path(target.prefix) == bare_venv


# --------------------------------------------------------------------------- --target folders


def _folder(tmp_path: Path, tag: str, record: str = "") -> Path:
    folder = tmp_path / "folder"
    info = folder / "ldt_x-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "WHEEL").write_text(f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n")
    (info / "RECORD").write_text(record + "ldt_x-1.0.dist-info/RECORD,,\n")
    return folder


def _interp(version: tuple[int, int], platform: str = "linux-x86_64") -> Interpreter:
    suffix = f".cpython-{version[0]}{version[1]}-x86_64-linux-gnu.so"
    return Interpreter("/x/python", version, "cpython", suffix, platform)


@pytest.mark.parametrize(
    ("tag", "version", "fits"),
    [
        ("py3-none-any", (3, 12), True),
        ("py2.py3-none-any", (3, 9), True),
        ("py312-none-any", (3, 11), False),
        ("cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64", (3, 11), True),
        ("cp311-cp311-manylinux_2_17_x86_64", (3, 12), False),
        ("cp311-cp311-manylinux_2_17_aarch64", (3, 11), False),
        ("cp38-abi3-linux_x86_64", (3, 11), True),
        ("cp312-abi3-linux_x86_64", (3, 11), False),
        ("pp39-pypy39_pp73-manylinux_2_17_x86_64", (3, 9), False),
    ],
)
def test_a_folder_fits_an_interpreter_by_its_wheel_tags(
    tmp_path: Path, tag: str, version: tuple[int, int], fits: bool
) -> None:
    built = read_built_for(_folder(tmp_path, tag))
    assert (mismatch(built, _interp(version)) is None) is fits


def test_extension_suffixes_name_the_version(tmp_path: Path) -> None:
    record = "x/_c.cpython-311-x86_64-linux-gnu.so,sha256=abc,10\n"
    built = read_built_for(_folder(tmp_path, "py3-none-any", record))
    assert built.suffixes == (".cpython-311-x86_64-linux-gnu.so",)
    assert built.version == (3, 11) and built.describe() == "Python 3.11"
    assert mismatch(built, _interp((3, 11))) is None
    assert "cpython-311" in (mismatch(built, _interp((3, 12))) or "")


def test_a_target_folder_has_no_interpreter_until_python_names_one(
    bare_venv: Path, tmp_path: Path
) -> None:
    py = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    tag = f"{py}-{py}-linux_{platform.machine()}"
    folder = _folder(tmp_path, tag)
    alone = discover(str(folder), None, {})
    assert alone.target_dir == str(folder) and alone.python is None
    assert alone.python_version == sys.version_info[:2]
    served = discover(str(folder), str(bare_venv / "bin" / "python"), os.environ)
    assert served.python == str(bare_venv / "bin" / "python")
    (folder / "ldt_x-1.0.dist-info" / "WHEEL").write_text("Tag: cp27-cp27mu-linux_x86_64\n")
    with pytest.raises(TargetError, match=r"cannot use .*built for cp27-cp27mu-linux_x86_64"):
        discover(str(folder), str(bare_venv / "bin" / "python"), os.environ)


@pytest.mark.parametrize("spelling", ["dotdot", "symlink"])
def test_a_target_has_one_identity_whatever_its_spelling(
    bare_venv: Path, tmp_path: Path, spelling: str
) -> None:
    """``../env`` and a symlink to the venv are the venv's real path, site dirs included."""
    if spelling == "dotdot":
        (tmp_path / "sub").mkdir()
        given = tmp_path / "sub" / ".." / os.path.relpath(bare_venv, tmp_path)
    else:
        given = tmp_path / "link"
        given.symlink_to(bare_venv)
    canonical = from_directory(bare_venv, "argument")
    for target in (from_directory(given, "argument"), from_python(str(given / "bin/python"))):
        assert target.prefix == os.path.realpath(bare_venv)
        assert target.site_packages == canonical.site_packages
        assert all(s.prefix == target.prefix for s in target.site_dirs)


# --------------------------------------------------------------------------- pyvenv.cfg


def _cfg_cases(home: str) -> dict[str, str]:
    """pyvenv.cfg texts, each keeping a home the interpreter can start from."""
    head = f"home = {home}\n"
    return {
        "as venv writes it": head + "include-system-site-packages = false\nversion = 3\n",
        "no include key: site.py says yes": head + "version = 3\n",
        "TRUE in capitals": head + "Include-System-Site-Packages = TRUE\n",
        "no blanks": f"home={home}\ninclude-system-site-packages=false\n",
        "padded": f"  home   =   {home}  \n   include-system-site-packages   =  false \n",
        "the last one wins": head + "include-system-site-packages = false\n"
        "include-system-site-packages = true\n",
        "bare CR": (head + "include-system-site-packages = false\n").replace("\n", "\r"),
        "CRLF": (head + "include-system-site-packages = false\n").replace("\n", "\r\n"),
        "LS is no line end": head + "version = 3\u2028include-system-site-packages = false\n",
        "FF is no line end": head + "version = 3\x0cinclude-system-site-packages = false\n",
        "yes is not true": head + "include-system-site-packages = yes\n",
        "a comment is a key": head + "#include-system-site-packages = false\n",
        "no equals": head + "include-system-site-packages false\n",
        "empty": "",
    }


def test_pyvenv_cfg_reads_as_site_venv_reads_it(tmp_path: Path) -> None:
    """The oracle is CPython's own site.venv(), run by the venv's interpreter on each
    pyvenv.cfg: whether it puts the base site-packages on the path, and the home it read."""
    from libdoctor.environment.target import includes_system_site, read_pyvenv_cfg
    from support.readers import site_venv

    root = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    home = str(Path(os.path.realpath(sys.executable)).parent)
    differ: list[tuple[str, object, object]] = []
    for name, text in _cfg_cases(home).items():
        (root / "pyvenv.cfg").write_bytes(text.encode())
        truth = site_venv(root / "bin" / "python")
        cfg = read_pyvenv_cfg(root)
        assert cfg is not None
        ours = {"system_site": includes_system_site(cfg), "home": cfg.get("home")}
        if ours != {k: truth[k] for k in ours}:
            differ.append((name, ours, truth))
        # and the model holds the base's site-packages exactly then (libdoctor finds the
        # base from home: without one it looks no further)
        target = from_directory(root, "argument")
        inherited = any(s.inherited for s in target.site_dirs)
        if inherited != (bool(truth["system_site"]) and "home" in cfg):
            differ.append((name, "inherited site dirs", inherited))
    assert differ == []


def _laid_out_venv(root: Path, version_line: str) -> Path:
    """A venv by its layout alone: pyvenv.cfg and an empty site-packages of this X.Y."""
    major, minor = sys.version_info[:2]
    (root / f"lib/python{major}.{minor}/site-packages").mkdir(parents=True)
    cfg = f"home = /usr/bin\ninclude-system-site-packages = false\n{version_line}\n"
    (root / "pyvenv.cfg").write_text(cfg)
    return root


@pytest.mark.parametrize(
    ("line", "full"),
    [
        ("version_info = {v}.2", "{v}.2"),  # uv
        ("version = {v}.7", "{v}.7"),  # venv
        ("version_info = {v}.0.final.0", "{v}.0"),  # virtualenv
        ("version_info = {v}", None),  # no micro: not known
    ],
)
def test_the_full_python_version_is_the_environments_own(
    tmp_path: Path, line: str, full: str | None
) -> None:
    v = "{}.{}".format(*sys.version_info[:2])
    target = from_directory(_laid_out_venv(tmp_path / "env", line.format(v=v)), "argument")
    assert target.python_full_version == (full.format(v=v) if full else None)


def test_python_option_reports_the_full_version(bare_venv: Path) -> None:
    assert from_python(str(bare_venv / "bin" / "python")).python_full_version == (
        platform.python_version()
    )


def test_a_micro_version_marker_is_read_at_the_environments_micro(tmp_path: Path) -> None:
    """redis requires async-timeout where python_full_version < '3.11.3': in a 3.11.2 venv
    pip check reports it missing, whatever Python runs libdoctor (3.11.7 read it as false)."""
    import libdoctor

    major, minor, micro = sys.version_info[:3]
    own = 0 if micro else 1  # a micro version that is not the running interpreter's
    env = _laid_out_venv(tmp_path / "env", f"version_info = {major}.{minor}.{own}")
    dist = next(env.glob("lib/*/site-packages")) / "ldt_redis-1.0.dist-info"
    dist.mkdir()
    marker = f'python_full_version == "{major}.{minor}.{own}"'
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: ldt-redis\nVersion: 1.0\n"
        f"Requires-Dist: ldt-async-timeout>=4; {marker}\n"
    )
    (dist / "RECORD").write_text(
        "ldt_redis-1.0.dist-info/METADATA,,\nldt_redis-1.0.dist-info/RECORD,,\n"
    )
    report = libdoctor.check(str(env))
    missing = [f for f in report.findings if f.code == "requirement-missing"]
    assert [f.to_json()["evidence"]["name"] for f in missing] == ["ldt-async-timeout"]
