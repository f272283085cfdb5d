"""What a pip or uv command line asks for: the guard plans installs and uninstalls aimed at
the environment, and passes everything else through untouched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from libdoctor.external.installers import InstallerOptions
from libdoctor.external.invocation import read_invocation, uninstall_asked


@pytest.mark.parametrize(
    ("tool", "args", "why"),
    [
        ("pip", ["list"], "not an install or uninstall"),
        ("pip", ["-q", "download", "x"], "not an install or uninstall"),
        ("pip", ["--log", "install", "show", "x"], "not an install or uninstall"),
        ("pip", ["install", "--target", "d", "x"], "--target given"),
        ("pip", ["install", "--user", "x"], "--user given"),
        ("pip", ["install", "--prefix=/p", "x"], "--prefix given"),
        ("pip", ["install", "--dry-run", "x"], "--dry-run given"),
        ("pip", ["install", "-h"], "--help given"),
        ("pip", ["install", "--no-user", "--user", "x"], "--user given"),
        ("pip", ["install", "--targ=d", "x"], "--target given"),
        ("pip", ["install", "--dry", "x"], "--dry-run given"),
        ("pip", ["--frob", "install", "x"], "pip stops at its options: no such option: --frob"),
        ("uv", ["pip", "uninstall", "--dry-run", "x"], "--dry-run given"),
        ("uv", ["venv", "install"], "not an install or uninstall"),
        ("uv", ["tool", "install", "ruff"], "not an install or uninstall"),
        ("uv", ["run", "pip", "install", "x"], "not an install or uninstall"),
        ("uv", ["pip", "install", "--system", "x"], "--system given"),
        ("uv", ["pip", "list"], "not an install or uninstall"),
    ],
)
def test_what_passes_through(tool: str, args: list[str], why: str) -> None:
    invocation = read_invocation("uv" if tool == "uv" else "pip", args)
    assert invocation.action is None
    assert invocation.why == why
    assert invocation.argv == tuple(args)


def test_a_pip_install_read_as_pip_reads_it(tmp_path: Path) -> None:
    wheel = tmp_path / "a-1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    args = ["-q", "install", "-U", str(wheel), "b>=1", "-rreq.txt", "--no-index", "-f", "/w"]
    invocation = read_invocation("pip", [*args, "--force"])
    assert invocation.action == "install" and invocation.force
    assert invocation.argv == tuple(args), "the guard's --force is not pip's"
    assert invocation.wheels == (str(wheel),)
    assert invocation.requirements == ("b>=1",)
    assert invocation.pip_args == ("--quiet", "--upgrade", "-r", "req.txt")
    assert invocation.options == InstallerOptions(find_links=("/w",), no_index=True)


@pytest.mark.parametrize(
    "args",
    [
        ["install", "--requirement=r.txt"],
        ["install", "-Ur", "r.txt"],
        ["install", "--requirement", "r.txt"],
        ["install", "--user", "--no-user", "-r", "r.txt"],
    ],
)
def test_every_spelling_of_an_install_source_resolves(args: list[str]) -> None:
    invocation = read_invocation("pip", args)
    assert invocation.action == "install", invocation.why
    assert invocation.pip_args[-2:] == ("-r", "r.txt")
    group = read_invocation("pip", ["install", "--gro=dev"])
    assert group.pip_args == ("--group", "dev"), "pip >= 25.1 installs a dependency group"
    ambiguous = read_invocation("pip", ["install", "--requirem", "r.txt"])
    assert ambiguous.unreadable == (
        "pip cannot read its options: ambiguous option: --requirem (--requirement, "
        "--requirements-from-script?)"
    ), "pip >= 26 has both: not read as either"


def test_a_uv_pip_install_spelled_for_pips_resolve() -> None:
    args = ["pip", "install", "-p", "/e/bin/python", "--upgrade", "--reinstall", "x", "-c", "c"]
    invocation = read_invocation("uv", args)
    assert invocation.action == "install" and invocation.python == "/e/bin/python"
    assert invocation.requirements == ("x",)
    assert invocation.pip_args == ("-U", "--force-reinstall", "-c", "c")


@pytest.mark.parametrize(
    ("args", "files", "words"),
    [
        (["pip", "uninstall", "-qr", "r.txt"], ("r.txt",), ()),
        (["pip", "uninstall", "-r=r.txt", "x"], ("r.txt",), ("x",)),
        (["pip", "uninstall", "-rr.txt"], ("r.txt",), ()),
        (["-q", "pip", "uninstall", "--requirements=r.txt", "--", "-x"], ("r.txt",), ("-x",)),
    ],
)
def test_a_uv_uninstall_read_as_clap_reads_it(
    args: list[str], files: tuple[str, ...], words: tuple[str, ...]
) -> None:
    invocation = read_invocation("uv", args)
    assert (invocation.requirement_files, invocation.requirements) == (files, words)


def test_an_uninstall_names_what_its_requirement_file_lists(tmp_path: Path) -> None:
    listed = tmp_path / "gone.txt"
    listed.write_text("# comment\nldt-a==1.0\n--index-url x\n  ldt-b ; python_version>'3'\n")
    invocation = read_invocation("pip", ["uninstall", "-y", "ldt-c[x]", "-r", str(listed)])
    assert invocation.action == "uninstall"
    asked = uninstall_asked(invocation, str(tmp_path), {"PIP_CONFIG_FILE": os.devnull}, "/")
    assert [(a.name, a.doubt) for a in asked] == [("ldt-c", None), ("ldt-a", None), ("ldt-b", None)]
    uv = read_invocation("uv", ["pip", "uninstall", "--python", "/e", "ldt-c"])
    assert (uv.action, uv.python, uv.requirements) == ("uninstall", "/e", ("ldt-c",))


def test_what_uv_reads_otherwise_is_a_doubt(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    args = ["pip", "uninstall", "-r", "pyproject.toml", "./ldt_a-1.0-py3-none-any.whl", "ldt-b"]
    asked = uninstall_asked(read_invocation("uv", args), str(tmp_path), {}, str(tmp_path))
    assert [(a.name, bool(a.doubt)) for a in asked] == [
        (None, True),  # a project file: refused
        ("ldt-a", True),  # uv matches where it was installed from: planned as if it went
        ("ldt-b", False),
    ]


def test_pips_configuration_names_what_an_uninstall_removes(tmp_path: Path) -> None:
    (tmp_path / "r.txt").write_text("ldt-a\n")
    environ = {"PIP_CONFIG_FILE": os.devnull, "PIP_REQUIREMENT": str(tmp_path / "r.txt")}
    invocation = read_invocation("pip", ["uninstall", "-y"])
    assert [a.name for a in uninstall_asked(invocation, str(tmp_path), environ, "/")] == ["ldt-a"]
    isolated = read_invocation("pip", ["--isolated", "uninstall", "-y"])
    assert uninstall_asked(isolated, str(tmp_path), environ, "/") == [], "--isolated: no PIP_*"
