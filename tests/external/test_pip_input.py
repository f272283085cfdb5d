"""``pip_input`` against the real pip (a venv's own, run in its interpreter): the option
tables, a command line's options and words, each requirement word, requirements files and
pip's configuration must read as pip's own parser reads them (issue 23: ``idna==3.20``,
``-yr FILE``, ``--requirem FILE``, ``PIP_REQUIREMENT`` all got past the guard)."""

from __future__ import annotations

import codecs
import itertools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from libdoctor.environment.distributions import canonicalize_name
from libdoctor.external.invocation import read_invocation
from libdoctor.external.pip_input import (
    PIP_GENERAL,
    PIP_INSTALL,
    PIP_UNINSTALL,
    REQFILE_DEPTH,
    REQFILE_LIMIT,
    REQFILE_OPTIONS,
    pip_config_list,
    requirement_files,
    requirement_name,
)
from support.venvs import Venv, VenvFactory, pip_env

# Runs in the venv's own interpreter: its pip's reading of each case, as JSON.
_REAL_PIP = r"""
import json, os, sys
from pip._internal.cli import cmdoptions
from pip._internal.cli.main_parser import parse_command
from pip._internal.commands import create_command
from pip._internal.network.session import PipSession
from pip._internal.req import parse_requirements, req_file
from pip._internal.req.constructors import (
    install_req_from_line, install_req_from_parsed_requirement)

def table(options):
    return [[o._short_opts + o._long_opts, bool(o.takes_value())] for o in options]

def command_table(name):
    parser = create_command(name).parser
    options = [o for g in parser.option_groups for o in g.option_list] + parser.option_list
    return table(options)

def argv(args):
    try:
        name, rest = parse_command(list(args))
        options, words = create_command(name).parse_args(rest)
    except BaseException as exc:
        return {"error": type(exc).__name__}
    return {"command": name, "files": options.requirements, "words": words}

def word(text):
    try:
        return {"name": install_req_from_line(text).name}
    except BaseException as exc:
        return {"error": type(exc).__name__}

def names(path):
    try:
        reqs = parse_requirements(path, session=PipSession())
        return {"names": [install_req_from_parsed_requirement(r).name for r in reqs]}
    except BaseException as exc:
        return {"error": type(exc).__name__}

def config(command):
    options, _ = create_command(command).parse_args([])
    return {"files": options.requirements}

case = json.load(sys.stdin)
kind = case["kind"]
if kind == "tables":
    lines = req_file.SUPPORTED_OPTIONS + req_file.SUPPORTED_OPTIONS_REQ
    out = {"general": table([f() for f in cmdoptions.general_group["options"]]),
           "install": command_table("install"), "uninstall": command_table("uninstall"),
           "reqfile": table([f() for f in lines])}
else:
    out = [globals()[kind](item) for item in case["items"]]
json.dump(out, sys.stdout)
"""


def _real_pip(venv: Venv, kind: str, items: list[Any], cwd: Path, env: dict[str, str]) -> Any:
    done = subprocess.run(
        [str(venv.python), "-c", _REAL_PIP],
        input=json.dumps({"kind": kind, "items": items}),
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        check=True,
        timeout=120,
    )
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def venv(module_venv: VenvFactory) -> Venv:
    return module_venv("real-pip")


def _ours(table: Any) -> dict[str, bool]:
    return {name: valued for spellings, valued in table for name in spellings}


def test_option_tables_hold_every_option_of_the_real_pip(venv: Venv, tmp_path: Path) -> None:
    real = _real_pip(venv, "tables", [], tmp_path, pip_env())
    general = _ours(PIP_GENERAL)
    for command, ours in (("install", PIP_INSTALL), ("uninstall", PIP_UNINSTALL)):
        known = {**general, **_ours(ours)}
        for spellings, valued in real[command]:
            for name in spellings:
                assert known.get(name) == valued, f"pip {command} {name}: valued={valued}"
    for key, ours in (("general", PIP_GENERAL), ("reqfile", REQFILE_OPTIONS)):
        known = _ours(ours)
        for spellings, valued in real[key]:
            assert all(known.get(n) == valued for n in spellings), (key, spellings)


COMMAND_LINES = [
    ["uninstall", "-y", "idna"],
    ["uninstall", "-yr", "r.txt"],
    ["uninstall", "-y", "--requirem", "r.txt"],
    ["uninstall", "--req=r.txt", "-y"],
    ["uninstall", "-rr.txt", "idna", "-r", "s.txt"],
    ["uninstall", "-y", "--", "-r", "idna"],
    ["-v", "--log", "uninstall", "uninstall", "-y", "idna"],
    ["--log", "install", "uninstall", "idna"],
    ["--isolated", "uninstall", "--yes", "idna[x]==1", "idna no-such"],
    ["uninstall", "-qqyr", "r.txt"],
    ["uninstall", "--frob", "idna"],
    ["--frob", "uninstall", "idna"],
    ["uninstall", "-y", "-r"],
    ["install", "-Ur", "r.txt", "x"],
    ["install", "--requirement=r.txt", "--no-deps", "./w.whl"],
    ["install", "--no-dep", "x"],
    ["install", "-e", ".", "--upgrade-strat", "eager", "x"],
]


def test_a_command_line_reads_as_pip_reads_it(venv: Venv, tmp_path: Path) -> None:
    real = _real_pip(venv, "argv", COMMAND_LINES, tmp_path, pip_env())
    for args, theirs in zip(COMMAND_LINES, real, strict=True):
        ours = read_invocation("pip", args)
        if "error" in theirs:
            assert ours.action is None or ours.unreadable, (args, ours)
            continue
        assert ours.action == theirs["command"], args
        assert ours.unreadable is None, args
        assert list(ours.requirements) + list(ours.wheels) == theirs["words"], args
        if ours.action == "uninstall":
            assert list(ours.requirement_files) == theirs["files"], args


def _project(path: Path, name: str) -> None:
    path.mkdir()
    (path / "pyproject.toml").write_text(f"[project]\nname = '{name}'\nversion = '1'\n")


WORDS = [
    "idna",
    "IDNA==3.20",
    "idna>=1,<9",
    "idna[x, y]",
    "idna [x]",
    'idna; python_version < "3"',
    "idna;python_version<'3'",
    "idna @ https://example.org/idna-3.20-py3-none-any.whl",
    "idna-3.20-py3-none-any.whl",
    "./dist/idna-3.20-py3-none-any.whl",
    "Foo_Bar-1.0-py3-none-any.whl",
    "https://example.org/x/idna-3.20-py3-none-any.whl",
    "git+https://example.org/r.git#egg=idna",
    "https://example.org/pkg.tar.gz#egg=idna&subdirectory=x",
    "./proj",
    "./proj[x]",
    "idna-3.20.tar.gz",
    "./sdist/idna-3.20.tar.gz",
    "bad req!!",
    "./not-a-project",
]


def test_each_word_names_what_pips_constructors_name(venv: Venv, tmp_path: Path) -> None:
    _project(tmp_path / "proj", "myproj")
    (tmp_path / "not-a-project").mkdir()
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "idna-3.20-py3-none-any.whl").write_bytes(b"")
    (tmp_path / "sdist").mkdir()
    (tmp_path / "sdist" / "idna-3.20.tar.gz").write_bytes(b"")
    real = _real_pip(venv, "word", WORDS, tmp_path, pip_env())
    for word, theirs in zip(WORDS, real, strict=True):
        ours = requirement_name(word, str(tmp_path))
        if "error" in theirs:  # pip stops before it uninstalls anything
            continue
        expected = canonicalize_name(theirs["name"]) if theirs["name"] else None
        got = canonicalize_name(ours.name) if ours.name else None
        assert (got, ours.doubt) == (expected, None), word


def _files(root: Path, env: dict[str, str]) -> list[Path]:
    files = {
        "plain.txt": "# comment\nidna==3.20  # trailing\n\n  certifi ; python_version>'3'\n",
        "nested.txt": "-r plain.txt\n--requirement=sub/deeper.txt\nurllib3\n",
        "sub/deeper.txt": "-c ../constraints.txt\nrequests[socks]\n",
        "constraints.txt": "charset-normalizer<9\n",
        "continued.txt": "id\\\nna\n# a comment \\\nfoo\n",
        "options.txt": "--index-url https://x\n-e git+https://x/r.git#egg=Editable\n"
        "six --hash=sha256:abc\n--no-index\n",
        "vars.txt": "${NAME_FROM_ENV}\n",
        "wheel.txt": "pkg_one-2.0-py3-none-any.whl\nhttps://h/p/pkg_two-1.0-py3-none-any.whl\n",
    }
    paths = []
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        paths.append(path)
    bom = root / "bom.txt"
    bom.write_bytes(codecs.BOM_UTF16_LE + "idna\nsix\n".encode("utf-16-le"))
    coding = root / "coding.txt"
    coding.write_bytes("# -*- coding: latin-1 -*-\nidna\nsix\n".encode("latin-1"))
    return [*paths, bom, coding]


def test_requirements_files_read_as_pips_parse_requirements(venv: Venv, tmp_path: Path) -> None:
    env = pip_env(extra={"NAME_FROM_ENV": "from-env"})
    files = _files(tmp_path, env)
    real = _real_pip(venv, "names", [str(f) for f in files], tmp_path, env)
    for path, theirs in zip(files, real, strict=True):
        assert "error" not in theirs, (path, theirs)
        ours = requirement_files([str(path)], env, str(tmp_path))
        assert [a.doubt for a in ours] == [None] * len(ours), path
        assert [canonicalize_name(a.name or "") for a in ours] == [
            canonicalize_name(n or "") for n in theirs["names"]
        ], path


def test_pips_configuration_adds_its_requirement_files(venv: Venv, tmp_path: Path) -> None:
    (venv.path / "pip.conf").write_text("[global]\nrequirement = g.txt\n[uninstall]\n")
    env = pip_env(extra={"PIP_CONFIG_FILE": None, "HOME": str(tmp_path / "home")})
    try:
        cases: list[tuple[dict[str, str], str]] = [
            ({}, "[uninstall]\n"),
            ({}, "[uninstall]\nrequirement = a.txt b.txt\n"),
            ({"PIP_REQUIREMENT": "e.txt"}, "[uninstall]\nrequirement = a.txt\n"),
            ({"PIP_REQUIREMENT": ""}, "[uninstall]\nrequirement = a.txt\n"),
        ]
        for extra, uninstall in cases:
            (venv.path / "pip.conf").write_text(f"[global]\nrequirement = g.txt\n{uninstall}")
            case_env = {**env, **extra}
            (theirs,) = _real_pip(venv, "config", ["uninstall"], tmp_path, case_env)
            ours, why = pip_config_list(
                "requirement", "uninstall", str(venv.path), case_env, isolated=False
            )
            assert (ours, why) == (theirs["files"], None), extra
        devnull = pip_config_list(
            "requirement", "uninstall", str(venv.path), {"PIP_CONFIG_FILE": os.devnull},
            isolated=False,
        )  # fmt: skip
        assert devnull == ([], None)
    finally:
        (venv.path / "pip.conf").unlink()


def test_bounded_reading_names_its_limit(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)
    big = tmp_path / "big.txt"
    with big.open("wb") as handle:
        handle.truncate(REQFILE_LIMIT + 1)
    chain = [tmp_path / f"c{i}.txt" for i in range(REQFILE_DEPTH + 2)]
    for here, there in itertools.pairwise(chain):
        here.write_text(f"-r {there.name}\n")
    chain[-1].write_text("idna\n")
    loop = tmp_path / "loop.txt"
    loop.write_text("-r loop.txt\nsix\n")
    cases = {
        fifo: "not a regular file",
        big: f"over {REQFILE_LIMIT} bytes",
        chain[0]: "REQFILE_DEPTH",
        "https://example.invalid/r.txt": "over the network",
    }
    for path, why in cases.items():
        (asked,) = requirement_files([str(path)], {}, str(tmp_path))
        assert asked.name is None and why in (asked.doubt or ""), path
    looped = requirement_files([str(loop)], {}, str(tmp_path))
    assert [(a.name, a.doubt) for a in looped] == [("six", None)], "a loop is read once"
    assert requirement_files([str(tmp_path / "absent.txt")], {}, str(tmp_path)) == []
