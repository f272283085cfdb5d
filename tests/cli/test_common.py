"""Issue 13: output on a stream that cannot encode it degrades to ASCII, never a traceback.

Real subprocess runs under ``PYTHONIOENCODING=ascii`` and ``LANG=C`` (``LC_ALL=C``), on a
real venv whose report holds the marks (✗, …) and a non-ASCII path.
"""

from __future__ import annotations

import codecs

import pytest

from libdoctor.cli.common import ascii_fallback, degrade_streams
from support.venvs import Libdoctor, VenvFactory, pip_install
from support.wheels import WheelFactory

NAMES = [f"asc/m{i}.py" for i in range(10)] + ["asc/dañs.py"]


@pytest.mark.parametrize(
    ("text", "ascii_text"),
    [("✗ x", "x x"), ("✓", "+"), ("… and 2 more", "... and 2 more"), ("a → b", "a -> b"),
     ("dañs", "da\\xf1s"), ("—", "--"), ("\U0001f600", "\\U0001f600")],
)  # fmt: skip
def test_ascii_fallback_spells_each_mark(text: str, ascii_text: str) -> None:
    degrade_streams()  # registers the error handler
    assert codecs.lookup_error("libdoctor-ascii") is ascii_fallback
    assert text.encode("ascii", "libdoctor-ascii") == ascii_text.encode()


@pytest.mark.parametrize(
    "env",
    [{"PYTHONIOENCODING": "ascii"}, {"LANG": "C", "LC_ALL": "C", "PYTHONUTF8": "0"}],
    ids=["PYTHONIOENCODING=ascii", "LANG=C"],
)
def test_reports_degrade_to_ascii(
    env: dict[str, str],
    new_venv: VenvFactory,
    make_wheel: WheelFactory,
    libdoctor: Libdoctor,
) -> None:
    venv = new_venv("ascii")
    pip_install(venv, make_wheel("ldt-ascii", "1.0", {n: b"x = 1\n" for n in NAMES}))
    for name in NAMES:
        (venv.site_packages / name).unlink()
    runs = {
        "check": libdoctor.check(venv.path, "--fail-on", "warning", env=env),
        "check --verbose": libdoctor.check(venv.path, "--verbose", env=env),
        "plan": libdoctor("plan", "uninstall", "ldt-ascii", venv.path, env=env),
        "uninstall --dry-run": libdoctor("uninstall", "--dry-run", "ldt-ascii", venv.path, env=env),
        "error": libdoctor("plan", "uninstall", "ldt-nosuch-dañs", venv.path, env=env),
    }
    for what, run in runs.items():
        assert "Traceback" not in run.stderr, (what, run.describe())
        assert "UnicodeEncodeError" not in run.stderr, (what, run.describe())
        assert (run.stdout + run.stderr).isascii(), (what, run.describe())
        assert run.rc in (0, 1, 2), (what, run.describe())
    assert runs["check"].rc == 1
    assert "x missing-files" in runs["check"].stdout, runs["check"].describe()
    assert "... and 3 more" in runs["check"].stdout, runs["check"].describe()
    assert "da\\xf1s.py" in runs["check --verbose"].stdout, runs["check --verbose"].describe()
    assert "libdoctor: error:" in runs["error"].stderr, runs["error"].describe()


@pytest.mark.parametrize(
    "words",
    [
        ["plan", "uninstall", "numpy", "--json", "/env"],
        ["plan", "install", "six", "--json", "/env"],
        ["uninstall", "numpy", "--dry-run", "/env"],
        ["install", "six", "--dry-run", "/env"],
        ["probe", "numpy", "--python", "/py", "/env"],
        ["caches", "clear", "--stale", "triton", "/env"],
    ],
)
def test_the_target_may_follow_options(words: list[str]) -> None:
    """`plan uninstall numpy --json ENV` is what a user types (the trial did): argparse alone
    stops the positionals at the first option and refused ENV ("unrecognized arguments")."""
    from libdoctor.cli.main import build_parser

    args = build_parser(words[0]).parse_args(words)
    positionals = getattr(args, "items", None) or getattr(args, "names", None) or args.targets
    assert positionals[-1] == "/env"
