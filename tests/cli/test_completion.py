"""Issue 18: ``libdoctor completion {bash,zsh}``, read off the argparse parser; and
``uninstall -y`` accepted (pip's habit)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from libdoctor.cli.main import build_parser
from support.venvs import Libdoctor

BASH = shutil.which("bash")


def complete(words: list[str], tmp_path: Path) -> list[str]:
    """What bash offers for WORDS (the last one being completed), through the function
    ``libdoctor completion bash`` registers."""
    script = tmp_path / "completion.bash"
    script.write_text(
        subprocess.run(
            [sys.executable, "-m", "libdoctor", "completion", "bash"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    program = (
        f"source {shlex.quote(str(script))}; complete -p libdoctor; "
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); "
        f"COMP_CWORD={len(words) - 1}; "
        "fn=$(complete -p libdoctor | sed -E 's/.*-F ([^ ]+) .*/\\1/'); $fn; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    assert BASH is not None
    out = subprocess.run([BASH, "-c", program], capture_output=True, text=True, check=True)
    first, *offered = out.stdout.splitlines()
    assert first.startswith("complete ") and first.endswith(" libdoctor")
    return offered


@pytest.mark.skipif(BASH is None, reason="no bash")
def test_bash_completes_subcommands_and_options(tmp_path: Path) -> None:
    assert complete(["libdoctor", "ch"], tmp_path) == ["check"]
    assert "--deep" in complete(["libdoctor", "check", "--d"], tmp_path)
    assert complete(["libdoctor", "plan", "un"], tmp_path) == ["uninstall"]
    assert "--no-libraries" in complete(["libdoctor", "plan", "uninstall", "--no"], tmp_path)
    assert complete(["libdoctor", "check", "--python", "/x", "--wor"], tmp_path) == ["--workers"]


@pytest.mark.skipif(BASH is None, reason="no bash")
def test_bash_script_as_the_issue_runs_it() -> None:
    assert BASH is not None
    python = shlex.quote(sys.executable)
    program = f"source <({python} -m libdoctor completion bash); complete -p libdoctor"
    out = subprocess.run([BASH, "-c", program], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("libdoctor") and "-F" in out.stdout


def test_every_subcommand_and_option_is_in_the_script(libdoctor: Libdoctor) -> None:
    run = libdoctor("completion", "bash")
    assert run.rc == 0, run.describe()
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action.choices, dict):
            for name, sub in action.choices.items():
                assert name in run.stdout
                for option in (o for a in sub._actions for o in a.option_strings):
                    assert option in run.stdout, (name, option)


def test_zsh_script_parses(libdoctor: Libdoctor, tmp_path: Path) -> None:
    run = libdoctor("completion", "zsh")
    assert run.rc == 0, run.describe()
    assert (
        "bashcompinit" in run.stdout and "complete -o default -F _libdoctor libdoctor" in run.stdout
    )
    zsh = shutil.which("zsh")
    if zsh is None:
        pytest.skip("no zsh to parse it with (the script was produced)")
    script = tmp_path / "completion.zsh"
    script.write_text(run.stdout)
    subprocess.run([zsh, "-n", str(script)], check=True)


def test_an_unknown_shell_is_exit_2(libdoctor: Libdoctor) -> None:
    run = libdoctor("completion", "fish")
    assert run.rc == 2 and "invalid choice" in run.stderr


def test_uninstall_accepts_y(libdoctor: Libdoctor, tmp_path: Path) -> None:
    """``-y`` parses (pip's habit); the missing target is what fails, not the flag."""
    run = libdoctor("uninstall", "-y", "six", tmp_path / "nope")
    assert run.rc == 2, run.describe()
    assert "-y" not in run.stderr and "unrecognized" not in run.stderr
    parsed = build_parser("uninstall").parse_args(["uninstall", "-y", "six"])
    assert parsed.yes is True and parsed.items == ["six"]
