"""The GitHub Action (``action.yml``) and the pre-commit hooks (``.pre-commit-hooks.yaml``).

The action's check step is run as the runner runs it: its ``run:`` text in ``bash --noprofile
--norc -eo pipefail``, with the step's ``env:`` (the ``INPUT_*`` variables, ``${{ inputs.X }}``
filled from the inputs given or their defaults), ``GITHUB_ACTION_PATH`` the worktree and a
``GITHUB_OUTPUT`` file. ``install: false`` skips pipx: ``libdoctor`` on PATH is this
checkout's. The hooks run under real ``pre-commit`` (``slow``: it builds its own env).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.httpindex import FileServer, serve
from support.venvs import Venv

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent.parent
EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


def action() -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "action.yml").read_text())
    assert isinstance(doc, dict)
    return doc


def check_step() -> dict[str, Any]:
    (step,) = [s for s in action()["runs"]["steps"] if s.get("id") == "check"]
    return dict(step)


def expand(text: str, inputs: dict[str, str]) -> str:
    """``${{ inputs.X }}`` and ``${{ github.action_path }}`` as the runner fills them."""

    def value(match: re.Match[str]) -> str:
        expr = match.group(1)
        if expr.startswith("inputs."):
            return inputs[expr.removeprefix("inputs.")]
        if expr == "github.action_path":
            return str(ROOT)
        raise AssertionError(f"the check step uses an expression the test cannot fill: {expr}")

    return EXPRESSION.sub(value, text)


def libdoctor_bin(tmp_path: Path) -> Path:
    """A PATH directory holding only ``libdoctor``: this checkout's, next to the interpreter."""
    found = Path(sys.executable).parent / "libdoctor"
    if not found.exists():
        pytest.skip(f"no libdoctor script next to {sys.executable} (pip install -e .)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "libdoctor").symlink_to(found)
    return bin_dir


def run_step(
    tmp_path: Path, given: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The check step run as the runner runs it; returns the process and GITHUB_OUTPUT."""
    declared = action()["inputs"]
    unknown = set(given) - set(declared)
    assert not unknown, f"not inputs of action.yml: {unknown}"
    inputs = {name: str(spec.get("default", "")) for name, spec in declared.items()}
    inputs.update(given)
    step = check_step()
    assert step["shell"] == "bash"
    output = tmp_path / "github-output"
    output.touch()
    env = {name: expand(str(v), inputs) for name, v in step["env"].items()}
    env |= {
        "PATH": f"{libdoctor_bin(tmp_path)}:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_OUTPUT": str(output),
        "GITHUB_WORKSPACE": str(tmp_path),
    }
    script = tmp_path / "step.sh"
    script.write_text(expand(step["run"], inputs))
    argv = ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)]
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    return done, output


def outputs(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def test_action_declares_its_inputs_and_upload_step() -> None:
    doc = action()
    assert {"target", "python", "args", "format", "sarif-file", "upload-sarif"} <= set(
        doc["inputs"]
    )
    assert doc["runs"]["using"] == "composite"
    (upload,) = [s for s in doc["runs"]["steps"] if "upload-sarif" in s.get("uses", "")]
    assert "inputs.upload-sarif == 'true'" in upload["if"]
    assert "steps.check.outputs.sarif-file" in upload["with"]["sarif_file"]
    assert "scripts/action-run.sh" in check_step()["run"]


def test_action_on_the_phantom_state_fails_with_sarif(tmp_path: Path, phantom: Venv) -> None:
    given = {"target": str(phantom.path), "format": "sarif", "install": "false"}
    given["sarif-file"] = "reports/libdoctor.sarif"
    done, output = run_step(tmp_path, given)
    assert done.returncode == 1, done.stderr
    sarif = tmp_path / "reports" / "libdoctor.sarif"
    doc = json.loads(sarif.read_text())
    rule_ids = {r["ruleId"] for r in doc["runs"][0]["results"]}
    assert "unresolved-library" in rule_ids
    assert outputs(output) == {"sarif-file": "reports/libdoctor.sarif", "exit-code": "1"}
    assert "::error::libdoctor check exited 1" in done.stderr


def test_action_on_a_healthy_env_passes(tmp_path: Path, healthy: Venv) -> None:
    done, output = run_step(tmp_path, {"target": str(healthy.path), "install": "false"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert str(healthy.path) in done.stdout  # the text report in the log
    assert outputs(output) == {"exit-code": "0"}
    second = tmp_path / "second"
    second.mkdir()
    done, output = run_step(
        second,
        {"target": str(healthy.path), "install": "false", "format": "sarif", "args": "--all"},
    )
    assert done.returncode == 0, done.stderr
    assert outputs(output)["exit-code"] == "0"


def test_action_refuses_an_unknown_format(tmp_path: Path, healthy: Venv) -> None:
    given = {"target": str(healthy.path), "install": "false", "format": "xml"}
    done, _ = run_step(tmp_path, given)
    assert done.returncode == 2
    assert "format must be text or sarif" in done.stderr


# --------------------------------------------------------------------------- pre-commit


def local_pylock(directory: Path) -> Path:
    """DIRECTORY/pylock.toml locking two wheels (files beside it) that install one path."""
    from support.wheels import build_wheel

    one = build_wheel(directory / "w", "one", "1.0", {"shared/lib.so": b"one"})
    two = build_wheel(directory / "w", "two", "1.0", {"shared/lib.so": b"two"})
    lock = directory / "pylock.toml"
    lock.write_text(
        'lock-version = "1.0"\ncreated-by = "test"\n'
        + "".join(
            f'[[packages]]\nname = "{n}"\nversion = "1.0"\nwheels = [{{ path = "w/{w.name}" }}]\n'
            for n, w in (("one", one), ("two", two))
        )
    )
    return lock


def test_action_plans_a_lock(tmp_path: Path) -> None:
    """``plan-lock: FILE``: two locked wheels (local files) installing one path, stopped."""
    local_pylock(tmp_path)
    done, output = run_step(tmp_path, {"plan-lock": "pylock.toml", "install": "false"})
    assert done.returncode == 1, done.stderr
    assert "lock-path-conflict" in done.stdout and "shared/lib.so" in done.stdout
    assert outputs(output) == {"exit-code": "1"}
    assert "::error::libdoctor plan lock exited 1" in done.stderr


def test_action_plans_a_lock_into_sarif(tmp_path: Path) -> None:
    """``plan-lock: locks/pylock.toml`` with ``format: sarif``: the result is located at the
    line of the package to drop, by a URI relative to the workspace (code scanning reads a
    relative URI from the repository's root)."""
    (tmp_path / "locks").mkdir()
    lines = local_pylock(tmp_path / "locks").read_text().splitlines()
    given = {"plan-lock": "locks/pylock.toml", "install": "false", "format": "sarif"}
    done, output = run_step(tmp_path, given)
    assert done.returncode == 1, done.stderr
    assert outputs(output) == {"sarif-file": "libdoctor.sarif", "exit-code": "1"}
    run = json.loads((tmp_path / "libdoctor.sarif").read_text())["runs"][0]
    (result,) = run["results"]
    assert result["ruleId"] == "lock-path-conflict"
    where = result["locations"][0]["physicalLocation"]
    assert where["artifactLocation"] == {"uri": "locks/pylock.toml", "uriBaseId": "TARGET"}
    assert run["originalUriBaseIds"]["TARGET"]["uri"] == tmp_path.as_uri() + "/"
    assert lines[where["region"]["startLine"] - 1] == 'name = "two"'


def hooks() -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    return {h["id"]: h for h in doc}


def test_hooks_manifest() -> None:
    found = hooks()
    check, verify = found["libdoctor-check"], found["libdoctor-verify-lock"]
    assert check["entry"] == "libdoctor check" and check["language"] == "python"
    assert check["pass_filenames"] is False and check["always_run"] is True
    assert verify["entry"] == "libdoctor verify --lock"
    pattern = re.compile(verify["files"])
    assert all(pattern.search(f) for f in ("pylock.toml", "uv.lock", "requirements-dev.txt"))
    assert not pattern.search("setup.py")
    plan = found["libdoctor-plan-lock"]
    assert plan["entry"] == "libdoctor plan lock" and plan["pass_filenames"] is True
    pattern = re.compile(plan["files"])
    assert all(pattern.search(f) for f in ("a/pylock.toml", "uv.lock", "requirements.txt"))
    assert not pattern.search("pyproject.toml")


def git(cwd: Path, *args: str) -> str:
    argv = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    done = subprocess.run([*argv, *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def hook_repo(dest: Path) -> str:
    """This checkout's working tree as a committed repo (what ``try-repo`` makes), its sha."""
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(ROOT / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__"))
    git(dest, "init", "-q")
    git(dest, "add", ".")
    git(dest, "commit", "-q", "-m", "hooks")
    return git(dest, "rev-parse", "HEAD")


# Every proxy variable at the discard port (nothing answers there), but for 127.0.0.1.
LOCAL_ONLY = {name: "http://127.0.0.1:9" for name in ("http_proxy", "https_proxy", "HTTP_PROXY",
              "HTTPS_PROXY")} | {"no_proxy": "127.0.0.1", "NO_PROXY": "127.0.0.1"}  # fmt: skip


def served_pylock(server: FileServer, wheels: list[Path]) -> str:
    """A pylock.toml of WHEELS as SERVER serves them, with their sha256."""
    text = 'lock-version = "1.0"\ncreated-by = "test"\n'
    for wheel in wheels:
        name, version = wheel.name.split("-")[:2]
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        text += (
            f'[[packages]]\nname = "{name}"\nversion = "{version}"\n'
            f'wheels = [{{ url = "{server.url}/files/{wheel.name}", '
            f'hashes = {{ sha256 = "{digest}" }} }}]\n'
        )
    return text


@pytest.mark.slow
def test_pre_commit_hooks_for_real(tmp_path: Path, healthy: Venv, phantom: Venv) -> None:
    """The three hooks in a project's config, run by real pre-commit. Its env is built from
    the hook repo first (``install-hooks``: pip reaches the package index); the runs after
    it go through a proxy that answers nothing but to 127.0.0.1, where the plan-lock hook's
    wheels are served: the hooks themselves reach no other host."""
    from support.wheels import build_wheel

    pre_commit = Path(sys.executable).parent / "pre-commit"
    if not pre_commit.exists():
        pytest.skip("pre-commit is not installed (the dev extra has it)")
    repo = tmp_path / "hooks"
    repo.mkdir()
    rev = hook_repo(repo)
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q")
    (project / "requirements.txt").write_text("cudnn-a==9.1.0\ntorchlike==1.0\n")
    (project / "locks").mkdir()
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k == "HOME"}
    env |= {"PATH": "/usr/bin:/bin", "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    built = tmp_path / "w"
    one = build_wheel(built, "one", "1.0", {"shared/lib.so": b"one " * 10, "one/a.py": b""})
    two = build_wheel(built, "two", "1.0", {"shared/lib.so": b"two " * 10, "two/a.py": b""})
    plan_args = ["--cache-dir", str(tmp_path / "wheel-cache"), "--platform", "linux_x86_64"]

    def config(target: Venv) -> None:
        hooks = [
            {"id": "libdoctor-check", "args": [str(target.path)]},
            {"id": "libdoctor-verify-lock", "args": ["requirements.txt", str(target.path)]},
            {"id": "libdoctor-plan-lock", "args": plan_args, "files": r"^locks/pylock\.toml$"},
        ]
        doc = {"repos": [{"repo": str(repo), "rev": rev, "hooks": hooks}]}
        (project / ".pre-commit-config.yaml").write_text(yaml.safe_dump(doc))

    def run(target: Venv, lock: str) -> subprocess.CompletedProcess[str]:
        config(target)
        (project / "locks" / "pylock.toml").write_text(lock)
        git(project, "add", ".")
        argv = [str(pre_commit), "run", "--all-files"]
        return subprocess.run(
            argv, cwd=project, env=env | LOCAL_ONLY, capture_output=True, text=True, timeout=600
        )

    config(healthy)
    installed = subprocess.run(
        [str(pre_commit), "install-hooks"], cwd=project, env=env, capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    with serve() as server:
        server.add_wheel(one)
        server.add_wheel(two)
        ok = run(healthy, served_pylock(server, [one]))
        broken = run(phantom, served_pylock(server, [one, two]))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert re.search(r"libdoctor check\.+Passed", ok.stdout), ok.stdout
    assert re.search(r"libdoctor verify --lock\.+Passed", ok.stdout), ok.stdout
    assert re.search(r"libdoctor plan lock\.+Passed", ok.stdout), ok.stdout
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert re.search(r"libdoctor check\.+Failed", broken.stdout), broken.stdout
    assert "torchlike 1.0 needs libcudnn.so.9: not found" in broken.stdout
    assert re.search(r"libdoctor verify --lock\.+Failed", broken.stdout), broken.stdout
    assert "lock-files" in broken.stdout
    assert re.search(r"libdoctor plan lock\.+Failed", broken.stdout), broken.stdout
    assert "lock-path-conflict" in broken.stdout and "shared/ (1)" in broken.stdout
    assert "one 1.0 and two 1.0 both install 1 path(s) with different bytes" in broken.stdout
    # try-repo takes no args: the hook then reads pre-commit's own env (its $VIRTUAL_ENV; that
    # env is often healthy, so --verbose shows the output of a passing hook too),
    # which is why the README's config names the target in args
    tried = subprocess.run(
        [str(pre_commit), "try-repo", str(repo), "libdoctor-check", "--all-files", "--verbose"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert tried.returncode in (0, 1), tried.stdout + tried.stderr
    assert re.search(r"libdoctor check\.+(Passed|Failed)", tried.stdout), tried.stdout
    assert "(chosen by $VIRTUAL_ENV)" in tried.stdout
