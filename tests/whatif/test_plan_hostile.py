"""``plan install`` of hostile wheel files (issue 23): a zip bomb, a size that lies, a central
directory of too many members, members named outside the directories they install into.
Each asserts the exact outcome (exit code, the one line or the one finding), that nothing
in or beside the target changed, and for the bombs the child's peak RSS; for the misplaced
members, that real pip refuses the wheel and real uv leaves them out, as the finding says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from libdoctor.environment.model import build_environment
from libdoctor.environment.target import from_directory
from libdoctor.environment.wheel import MAX_MEMBERS, read_wheel
from libdoctor.whatif.request import proven_harmless
from support.bombs import bomb_wheel, hostile_wheel, lie_about_size, many_members_wheel
from support.rss import run_measured
from support.venvs import (
    Libdoctor,
    Venv,
    VenvFactory,
    diff_snapshots,
    pip_env,
    snapshot,
    uv_install,
)

RSS_BOUND_MB = 200
INFLATED = 256 << 20  # past the member bound, and past RSS_BOUND_MB read whole


@pytest.fixture(scope="module")
def venv(module_venv: VenvFactory) -> Venv:
    return module_venv("hostile")


def plan(libdoctor: Libdoctor, wheel: Path, venv: Venv, *extra: str) -> tuple[int, str, str]:
    before = snapshot(venv.path.parent)
    run = run_measured(
        [sys.executable, "-m", "libdoctor", "plan", "install", wheel, venv.path, *extra],
        cache_home=libdoctor.cache_root,
    )
    assert diff_snapshots(before, snapshot(venv.path.parent)) == []
    assert run.peak_mb < RSS_BOUND_MB, run.describe()
    return run.rc, run.stdout, run.stderr


def test_a_record_bomb_is_one_line_in_bounded_memory(
    venv: Venv, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    """1 MB of wheel whose RECORD inflates to 256 MB (issue 23: 940 MB took 9.4 GB)."""
    wheel = bomb_wheel(tmp_path, INFLATED)
    rc, out, err = plan(libdoctor, wheel, venv)
    assert (rc, out) == (2, "")
    assert err == (
        f"libdoctor: error: cannot read wheel {wheel}: bomb-1.0.dist-info/RECORD is "
        f"{INFLATED:,} bytes, over the {32 << 20:,} a member libdoctor reads may have "
        "(MAX_MEMBER_BYTES)\n"
    )


def test_a_record_that_lies_about_its_size_is_one_line_in_bounded_memory(
    venv: Venv, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    wheel = bomb_wheel(tmp_path, INFLATED)
    lie_about_size(wheel, "bomb-1.0.dist-info/RECORD", 4096)
    rc, out, err = plan(libdoctor, wheel, venv)
    assert (rc, out) == (2, "")
    assert err == (
        f"libdoctor: error: cannot read wheel {wheel}: "
        "Bad CRC-32 for file 'bomb-1.0.dist-info/RECORD'\n"
    )


def test_too_many_members_is_one_line(venv: Venv, libdoctor: Libdoctor, tmp_path: Path) -> None:
    wheel = many_members_wheel(tmp_path, MAX_MEMBERS + 1)
    rc, out, err = plan(libdoctor, wheel, venv)
    assert (rc, out) == (2, "")
    assert err == (
        f"libdoctor: error: cannot read wheel {wheel}: {MAX_MEMBERS + 4:,} members, over "
        f"the {MAX_MEMBERS:,} a wheel may have (MAX_MEMBERS)\n"
    )


# --------------------------------------------------------------------------- misplaced members

SITE = "lib/python{v}/site-packages"


@pytest.mark.parametrize(
    ("member", "lands", "inside"),
    [
        ("../../x", "lib/x", SITE),  # inside the prefix, outside site-packages: refused too
        ("pkg/../../../../../outside-x", "../outside-x", SITE),
        ("{abs}/abs-x", "{abs}/abs-x", SITE),
        ("evil-1.0.data/scripts/../../escape-x", "../escape-x", "bin"),
        ("evil-1.0.data/nosuch/y", "y", None),
    ],
)
def test_a_member_that_lands_outside_its_directory_is_an_error(
    member: str,
    lands: str,
    inside: str | None,
    new_venv: VenvFactory,
    libdoctor: Libdoctor,
    tmp_path: Path,
) -> None:
    """pip refuses each of these wheels part-way, so the install is never "safe": the plan
    names the member as a record-invalid error and says "breaks" (exit 1)."""
    venv = new_venv("hostile")
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    prefix = os.path.realpath(venv.path)
    outside = tmp_path / "outside"  # where an absolute member points
    member = member.format(abs=outside)
    wheel = hostile_wheel(tmp_path, "evil", "1.0", {"evil/__init__.py": b"", member: b"bad\n"})
    rc, out, _ = plan(libdoctor, wheel, venv, "--json")
    assert rc == 1, out
    doc = json.loads(out)
    assert doc["plan"]["verdict"] == "breaks"
    (finding,) = doc["plan"]["new_findings"]
    where = os.path.normpath(os.path.join(prefix, lands.format(abs=outside)))
    assert (finding["code"], finding["severity"], finding["paths"]) == (
        "record-invalid",
        "error",
        [where],
    )
    assert finding["evidence"]["members"] == [
        {
            "member": member,
            "lands": where,
            "inside": None if inside is None else os.path.join(prefix, inside.format(v=version)),
        }
    ]
    assert finding["message"].startswith(f"evil 1.0: the member {member} ")
    target = from_directory(venv.path, "argument")
    assert not proven_harmless(build_environment(target), [read_wheel(str(wheel))])

    # What the finding says, with real pip: it fails part-way; what it wrote is in the env.
    before = snapshot(tmp_path)
    pip = subprocess.run(
        [str(venv.python), "-m", "pip", "install", "--no-deps", str(wheel)],
        env=pip_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert pip.returncode == 1 and "ERROR: For req: evil==1.0." in pip.stderr, pip.stderr
    changed = diff_snapshots(before, snapshot(tmp_path))
    assert changed and all(repr(prefix)[:-1] in line for line in changed), changed
    assert (venv.site_packages / "evil" / "__init__.py").exists()  # left behind
    assert not os.path.lexists(where)


def test_uv_installs_such_a_wheel_without_the_member(new_venv: VenvFactory, tmp_path: Path) -> None:
    """What the finding says of uv, checked: the wheel is installed, the member is nowhere."""
    venv = new_venv("uv")
    wheel = hostile_wheel(tmp_path, "evil", "1.0", {"evil/__init__.py": b"", "../../x": b"bad\n"})
    before = snapshot(tmp_path)
    uv_install(venv.python, wheel, cache=tmp_path / "uv-cache")
    created = [line for line in diff_snapshots(before, snapshot(tmp_path)) if "created" in line]
    assert any("evil-1.0.dist-info" in line for line in created)
    assert not any(line.endswith("/x'") for line in created), created
