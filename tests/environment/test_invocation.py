"""What a pip or uv command line asks for: the guard plans installs and uninstalls aimed at
the environment, and passes everything else through untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from libdoctor.environment.installers import InstallerOptions
from libdoctor.environment.invocation import read_invocation


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
        ("pip", ["install", "-h"], "-h given"),
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
    assert invocation.pip_args == ("-q", "-U", "-r", "req.txt")
    assert invocation.options == InstallerOptions(find_links=("/w",), no_index=True)


def test_a_uv_pip_install_spelled_for_pips_resolve() -> None:
    args = ["pip", "install", "-p", "/e/bin/python", "--upgrade", "--reinstall", "x", "-c", "c"]
    invocation = read_invocation("uv", args)
    assert invocation.action == "install" and invocation.python == "/e/bin/python"
    assert invocation.requirements == ("x",)
    assert invocation.pip_args == ("-U", "--force-reinstall", "-c", "c")


def test_an_uninstall_names_what_its_requirement_file_lists(tmp_path: Path) -> None:
    listed = tmp_path / "gone.txt"
    listed.write_text("# comment\nldt-a==1.0\n--index-url x\n  ldt-b ; python_version>'3'\n")
    invocation = read_invocation("pip", ["uninstall", "-y", "ldt-c", "-r", str(listed)])
    assert invocation.action == "uninstall"
    assert invocation.requirements == ("ldt-c", "ldt-a", "ldt-b")
    uv = read_invocation("uv", ["pip", "uninstall", "--python", "/e", "ldt-c"])
    assert (uv.action, uv.python, uv.requirements) == ("uninstall", "/e", ("ldt-c",))
