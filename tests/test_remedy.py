"""Remedies as values (libdoctor.remedy): the command line each installer gets, the
placeholder where no interpreter was found, adjacent reinstalls merged, the key causes merge
by (analysis.causes), what libdoctor runs itself, and the plain form the check cache stores."""

from __future__ import annotations

import marshal

import pytest

from libdoctor.analysis.causes import combined_fix, group_causes
from libdoctor.findings import DistRef, Finding, Fix, Severity
from libdoctor.remedy import (
    NO_PIP_UNINSTALL,
    ClearCache,
    Install,
    LockRemove,
    Pin,
    Reinstall,
    Remedy,
    RemoveMetadata,
    Uninstall,
    Via,
    argv,
    merge_reinstalls,
    program,
    remedy_of,
    to_plain,
    uninstalled,
)

PY = "/env/bin/python"
PIP = Via("pip", PY, (3, 11))
UV = Via("uv", PY, (3, 11))
CONDA = Via("conda", prefix="/conda/envs/x", exe="/conda/bin/mamba")
FOLDER = Via("pip", None, (3, 11), "/f")
A, B = Pin("a", "1"), Pin("b", "2")


@pytest.mark.parametrize(
    ("remedy", "expected"),
    [
        (
            Reinstall((A,), PIP),
            (PY, "-m", "pip", "install", "--force-reinstall", "--no-deps", "a==1"),
        ),
        (
            Reinstall((A,), PIP, ignore_installed=True),
            (PY, "-m", "pip", "install", "--ignore-installed", "--no-deps", "a==1"),
        ),
        (
            Reinstall((A, B), FOLDER),
            (
                "<python3.11>",
                "-m",
                "pip",
                "install",
                "--target",
                "/f",
                "--upgrade",
                "--no-deps",
                "a==1",
                "b==2",
            ),
        ),
        (
            Reinstall((A,), Via("uv", None, None, "/f")),
            (
                "uv",
                "pip",
                "install",
                "--target",
                "/f",
                "--reinstall",
                "--no-deps",
                "--python",
                "<python>",
                "a==1",
            ),
        ),
        (
            Reinstall((Pin("x", "1", "x=1=py_0"),), CONDA),
            (
                "/conda/bin/mamba",
                "install",
                "--yes",
                "--prefix",
                "/conda/envs/x",
                "--force-reinstall",
                "--no-deps",
                "x=1=py_0",
            ),
        ),
        (
            Reinstall((Pin("x", "1"),), CONDA),
            (
                "/conda/bin/mamba",
                "install",
                "--yes",
                "--prefix",
                "/conda/envs/x",
                "--force-reinstall",
                "--no-deps",
                "x=1",
            ),
        ),
        (Uninstall("a", PIP), (PY, "-m", "pip", "uninstall", "--yes", "a")),
        (Uninstall("a", UV), ("uv", "pip", "uninstall", "--python", PY, "a")),
        (Uninstall("a", FOLDER), (NO_PIP_UNINSTALL, "a")),
        (
            Uninstall("x", CONDA),
            ("/conda/bin/mamba", "remove", "--yes", "--prefix", "/conda/envs/x", "--force", "x"),
        ),
        (Install(("numpy>=1",), PIP), (PY, "-m", "pip", "install", "numpy>=1")),
        (
            Install(("a==1",), UV, deps=False),
            ("uv", "pip", "install", "--no-deps", "--python", PY, "a==1"),
        ),
        (
            Install(("a==1",), FOLDER, reinstall=True, deps=False),
            (
                "<python3.11>",
                "-m",
                "pip",
                "install",
                "--target",
                "/f",
                "--upgrade",
                "--no-deps",
                "a==1",
            ),
        ),
        (
            Install(("a==1",), UV, reinstall=True, deps=False, index_url="https://i/simple"),
            (
                "uv",
                "pip",
                "install",
                "--reinstall",
                "--no-deps",
                "--python",
                PY,
                "--index-url",
                "https://i/simple",
                "a==1",
            ),
        ),
        (
            Install(("/src/a",), PIP, deps=False, editable=True),
            (PY, "-m", "pip", "install", "--no-deps", "--editable", "/src/a"),
        ),
        (RemoveMetadata("/env/a-1.dist-info"), ("rm", "-rf", "--", "/env/a-1.dist-info")),
        (
            ClearCache(("triton", "inductor"), "/env"),
            ("libdoctor", "caches", "clear", "--stale", "triton", "inductor", "/env"),
        ),
        (LockRemove(("a", "b")), ("uv", "remove", "a", "b")),
    ],
)
def test_each_installer_gets_its_own_command_line(
    remedy: Remedy, expected: tuple[str, ...]
) -> None:
    assert argv(remedy) == expected


def test_adjacent_reinstalls_through_one_installer_and_interpreter_merge() -> None:
    other = Via("pip", "/other/python", (3, 11))
    assert merge_reinstalls((Reinstall((A,), PIP), Reinstall((B,), PIP))) == (
        Reinstall((A, B), PIP),
    )
    apart: list[tuple[Remedy, ...]] = [
        (Reinstall((A,), PIP), Reinstall((B,), UV)),
        (Reinstall((A,), PIP), Reinstall((B,), other)),  # two interpreters
        (Uninstall("x", PIP), Reinstall((A,), PIP)),
        (Reinstall((A,), PIP, ignore_installed=True), Reinstall((B,), PIP)),
        (Reinstall((A,), CONDA), Reinstall((B,), CONDA)),  # conda: a build each
    ]
    for remedies in apart:
        assert merge_reinstalls(remedies) == remedies


def test_what_the_distribution_recorded_is_no_part_of_the_command() -> None:
    poetry = Via("pip", PY, (3, 11), recorded="poetry")
    assert poetry == PIP and not poetry.runnable and Via("pip", PY, recorded="pip").runnable
    assert Via("uv", PY).runnable and not CONDA.runnable
    (one,) = merge_reinstalls((Reinstall((A,), PIP), Reinstall((B,), poetry)))
    assert argv(one)[-2:] == ("a==1", "b==2")


def test_a_fix_of_several_remedies_is_one_shell_line() -> None:
    fix = Fix((Uninstall("x", PIP), Reinstall((A,), PIP), Reinstall((B,), PIP)), note="n")
    assert fix.remedies == (Uninstall("x", PIP), Reinstall((A, B), PIP))
    assert fix.command == (
        f"{PY} -m pip uninstall --yes x && {PY} -m pip install --force-reinstall --no-deps "
        "a==1 b==2"
    )
    assert fix.argv == ("sh", "-c", fix.command) and len(fix.steps) == 2
    assert fix.to_json()["steps"] == [list(s) for s in fix.steps]
    one = Fix((Reinstall((A,), PIP), Reinstall((B,), PIP)))
    assert one.argv == one.steps[0] and "steps" not in one.to_json()


def _finding(fix: Fix, name: str = "a") -> Finding:
    evidence = {"modules": ["torch._C"]}
    return Finding("unresolved-library", Severity.ERROR, "m", DistRef(name, "1"), (), evidence, fix)


def test_causes_group_by_remedy_and_merge_reinstalls_by_the_remedy_less_its_last_pin() -> None:
    a, b = Fix((Reinstall((A,), PIP),)), Fix((Reinstall((B,), PIP),))
    (cause,) = group_causes([_finding(a), _finding(b, "b"), _finding(a, "c")])
    assert cause.fix == Fix((Reinstall((A, B), PIP),), "one command reinstalls them all")
    assert len(cause.findings) == 3
    # through uv, or two pip installs of exact pins: apart, and one command for the pip ones
    causes = group_causes([_finding(a), _finding(Fix((Reinstall((B,), UV),)), "b")])
    assert len(causes) == 2 and combined_fix(causes) is None
    pins = [Fix((Install((f"{n}==1",), PIP, deps=False),)) for n in "xy"]
    everything = combined_fix(
        group_causes([Finding("pin-mismatch", Severity.ERROR, "m", fix=f) for f in pins])
    )
    assert everything is not None
    assert everything.argv == (PY, "-m", "pip", "install", "--no-deps", "x==1", "y==1")
    # a reinstall of several merges only with those that share all but its last
    several = Fix((Reinstall((A, B), PIP),))
    assert len(group_causes([_finding(several), _finding(Fix((Reinstall((B,), PIP),)))])) == 2
    for other in (
        Install(("numpy>=1",), PIP),
        Install(("/src/a",), PIP, editable=True),
        Reinstall((Pin("x", "1", "x=1=b"),), CONDA),
        Reinstall((Pin("odd name", "1"),), PIP),
    ):
        lone = Fix((other,))
        assert len(group_causes([_finding(lone), _finding(a, "b")])) == 2


def test_a_cached_fix_comes_back_as_it_was() -> None:
    fix = Fix(
        (
            Uninstall("x", Via("pip", PY, (3, 11), recorded="poetry")),
            Reinstall((A, B), FOLDER, ignore_installed=False),
            Install(("a==1",), UV, reinstall=True, deps=False, index_url="https://i"),
            RemoveMetadata("/d"),
            ClearCache(("triton",), "/env"),
            LockRemove(("a",)),
            Reinstall((Pin("x", "1", "x=1=b"),), CONDA),
        ),
        note="why",
    )
    plain = fix.to_plain()
    back = Fix.from_plain(marshal.loads(marshal.dumps(plain)))
    assert back == fix and back is not None
    assert [r.via.recorded for r in back.remedies if isinstance(r, Uninstall)] == ["poetry"]
    for bad in (
        ("Reinstall", (), ("pip",) * 7, False),  # no distributions
        ("Uninstall", "x"),
        ("Nothing", "x"),
        ("RemoveMetadata", 1),
        ("Install", ("a",), to_plain(Uninstall("x", PIP))[2], "yes", True, False, None),
    ):
        assert remedy_of(bad) is None
    assert Fix.from_plain(((("RemoveMetadata", 1),), "")) is None
    assert Fix.from_plain("x") is None


def test_the_installer_a_remedy_runs_is_its_value_and_agrees_with_its_command() -> None:
    remedies: list[Remedy] = [
        Reinstall((A,), UV),
        Install(("a==1",), UV),
        Uninstall("a", UV),
        LockRemove(("a",)),
        Reinstall((A,), PIP),
        Uninstall("a", CONDA),
        RemoveMetadata("/env/x.dist-info"),
    ]
    for remedy in remedies:
        assert (program(remedy) == "uv") == (argv(remedy)[0] == "uv"), remedy
    assert program(Uninstall("a", CONDA)) == "conda"
    assert program(ClearCache(("triton",), "/env")) is None


def test_what_an_uninstall_names_is_read_from_the_value() -> None:
    assert uninstalled(Uninstall("a", PIP)) == "a"
    assert uninstalled(Uninstall("a", UV)) == "a"
    assert uninstalled(Uninstall("a", CONDA)) is None  # conda removes: another command
    assert uninstalled(Uninstall("a", FOLDER)) is None  # pip cannot uninstall from a folder
    assert uninstalled(Reinstall((A,), PIP)) is None
