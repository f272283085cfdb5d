"""Issue 15: ``libdoctor fleet`` over snapshot files, a (fake) Slurm allocation and a real
Ray cluster on this machine: the odd node is named, alike nodes share a line."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from libdoctor.analysis.snapshot import encode
from support.repairs import Cli
from support.rss import measured, peak_rss
from support.slurm import fake_srun
from support.snapshots import changed_row, made_snapshot, without_dist
from support.venvs import SRC_DIR, Libdoctor, Venv, VenvFactory, pip_install
from support.wheels import WheelFactory


@pytest.fixture(scope="module")
def two_envs(module_venv: VenvFactory, module_wheels: WheelFactory) -> tuple[Venv, Venv]:
    """Two venvs that differ in one thing: ldt-fleet 1.0 here, 2.0 there."""
    one = module_wheels("ldt-fleet", "1.0", {"ldt_fleet/__init__.py": b"V = 1\n"})
    two = module_wheels("ldt-fleet", "2.0", {"ldt_fleet/__init__.py": b"V = 2\n"})
    good, odd = module_venv("good"), module_venv("odd")
    pip_install(good, one)
    pip_install(odd, two)
    return good, odd


def _odd_one_out(doc: dict[str, object], odd: str, others: list[str]) -> None:
    assert doc["differing"] == [odd]
    groups = doc["groups"]
    assert isinstance(groups, list)
    assert sorted(groups[0]["nodes"]) == sorted(others) and groups[0]["identical"]
    [changes] = [g["distributions"] for g in groups[1:]]
    assert changes == [
        {"name": "ldt-fleet", "change": "upgraded", "before": ["1.0"], "after": ["2.0"]}
    ]


def test_fleet_of_files(two_envs: tuple[Venv, Venv], libdoctor: Libdoctor, tmp_path: Path) -> None:
    good, odd = two_envs
    files = []
    for name, venv in (("n1", good), ("n2", odd), ("n3", good)):
        out = tmp_path / f"{name}.json.gz"
        assert libdoctor("snapshot", venv.path, "-o", out).rc == 0
        files.append(out)
    run = libdoctor("fleet", *files, "--json")
    assert run.rc == 1, run.describe()
    _odd_one_out(run.json(), "n2", ["n1", "n3"])  # one host: named by file
    text = libdoctor("fleet", *files)
    assert text.rc == 1
    assert "n1, n3 (2 nodes)  same as the reference" in text.stdout
    assert "n2                1 distribution" in text.stdout
    assert "ldt-fleet 1.0 → 2.0 (upgraded)" in text.stdout
    run = libdoctor("fleet", *files, "--reference", "n2", "--json")
    assert run.rc == 1 and run.json()["differing"] == ["n1", "n3"]
    same = libdoctor("fleet", files[0], files[2])
    assert same.rc == 0, same.describe()


# Issue 26: 300 snapshots of 2,000 file rows each, two of them odd. Each file was parsed
# whole and kept: 205 MB at the peak, growing with every node; read by digest, ~25 MB.
FLEET_RSS_BOUND = 100 << 20


def _many(where: Path, count: int = 300) -> list[Path]:
    base = made_snapshot(20, 100, node="NODE-NAME", prefix="/envs/NODE-NAME")
    text = encode(base).decode()
    odd = {
        42: encode(changed_row(base, 3, 5)).decode(),
        count - 50: encode(without_dist(base, 7)).decode(),
    }
    files = []
    for i in range(count):
        files.append(where / f"f{i:04}.json")
        files[-1].write_text(odd.get(i, text).replace("NODE-NAME", f"node-{i:04}"))
    return files


def test_a_fleet_of_many_names_exactly_its_odd_nodes_in_bounded_memory(tmp_path: Path) -> None:
    files = _many(tmp_path)
    cli, rss, page = Cli(tmp_path / "cache"), tmp_path / "rss", tmp_path / "fleet.html"
    run = cli("fleet", *files, "--json", "--html", page, prefix=measured(rss))
    assert run.rc == 1, run.describe()
    assert peak_rss(rss) < FLEET_RSS_BOUND, peak_rss(rss)
    doc = run.json()
    assert doc["nodes"] == 300 and doc["differing"] == ["node-0042", "node-0250"]
    assert [len(g["nodes"]) for g in doc["groups"]] == [298, 1, 1]
    html = page.read_text()
    assert html.count("node-0042") >= 2 and html.count("node-0250") >= 2  # table and section
    text = cli("fleet", *files).stdout
    assert "300 nodes; reference: node-0000 (the majority)" in text
    assert "and 292 more (298 nodes)  same as the reference" in text
    assert "\nnode-0042" in text and "\nnode-0250" in text
    assert text.count("node-0") == 6 + 2 * 2 + 1  # the group's six, the odd two twice, the ref


# --------------------------------------------------------------------------- Slurm


@pytest.mark.parametrize("shared", [False, True])
def test_fleet_on_slurm(
    shared: bool, two_envs: tuple[Venv, Venv], libdoctor: Libdoctor, tmp_path: Path
) -> None:
    good, odd = two_envs
    nodes = [("gpu01", str(good.path)), ("gpu02", str(good.path)), ("gpu03", str(odd.path))]
    nodes += [("gpu04", str(good.path))]
    env = fake_srun(tmp_path, nodes)
    extra = ["--shared-dir", str(tmp_path)] if shared else []
    run = libdoctor("fleet", "--slurm", "--json", *extra, "--", "-N", "4", env=env)
    assert run.rc == 1, run.describe()
    _odd_one_out(run.json(), "gpu03", ["gpu01", "gpu02", "gpu04"])
    argv = json.loads(Path(env["FAKE_SRUN_LOG"]).read_text())
    assert argv[:3] == ["--ntasks-per-node=1", "-N", "4"]
    assert argv[3:7] == [sys.executable, "-m", "libdoctor", "snapshot"]
    assert argv[7:] == (["-o", argv[8]] if shared else ["--framed"])
    if shared:
        assert argv[8].endswith("{node}.json.gz")
        assert sorted(p.name for p in Path(argv[8]).parent.iterdir()) == [
            f"gpu0{i}.json.gz" for i in range(1, 5)
        ]


def test_fleet_on_slurm_with_a_target(
    two_envs: tuple[Venv, Venv], libdoctor: Libdoctor, tmp_path: Path
) -> None:
    good, odd = two_envs
    env = fake_srun(tmp_path, [("a", str(odd.path)), ("b", str(odd.path))])
    run = libdoctor("fleet", "--slurm", good.path, env=env)  # TARGET wins over $VIRTUAL_ENV
    assert run.rc == 0, run.describe()
    assert "a, b (2 nodes)  same as the reference" in run.stdout


def test_a_node_that_sends_nothing(libdoctor: Libdoctor, tmp_path: Path) -> None:
    env = fake_srun(tmp_path, [("a", str(tmp_path / "nowhere"))])
    run = libdoctor("fleet", "--slurm", env=env)
    assert run.rc == 2 and len(run.stderr.splitlines()) >= 1, run.describe()
    assert "no node sent a snapshot" in run.stderr.splitlines()[-1]


# --------------------------------------------------------------------------- Ray


def test_ray_missing_is_one_line(libdoctor: Libdoctor, tmp_path: Path) -> None:
    fake = tmp_path / "noray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no ray here')\n")
    run = libdoctor("fleet", "--ray", env={"PYTHONPATH": f"{fake.parent}{os.pathsep}{SRC_DIR}"})
    assert run.rc == 2 and run.stdout == "", run.describe()
    assert run.stderr.splitlines() == [
        "libdoctor: error: --ray needs Ray, which is not installed: pip install 'libdoctor[ray]'"
    ]


LOOPBACK = "127.0.0.1"


def _venv(venv: Venv) -> dict[str, str]:
    return {"VIRTUAL_ENV": str(venv.path)}


@pytest.mark.slow
def test_fleet_on_a_ray_cluster(
    two_envs: tuple[Venv, Venv], libdoctor: Libdoctor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three Ray nodes on loopback; the third's workers run with $VIRTUAL_ENV set to the odd
    venv, so its task snapshots that one. ~10 s: the slow tier."""
    utils: Any = pytest.importorskip(
        "ray.cluster_utils", reason="ray is not installed (pip install 'libdoctor[ray]')"
    )

    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    good, odd = two_envs
    started = time.monotonic()
    cluster = utils.Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "node_ip_address": LOOPBACK,
            "include_dashboard": False,
            "env_vars": _venv(good),
        },
    )
    try:
        cluster.add_node(num_cpus=1, node_ip_address=LOOPBACK, env_vars=_venv(good))
        odd_node = cluster.add_node(num_cpus=1, node_ip_address=LOOPBACK, env_vars=_venv(odd))
        cluster.wait_for_nodes()
        run = libdoctor("fleet", "--ray", cluster.address, "--json", timeout=300)
        assert run.rc == 1, run.describe()
        doc = run.json()
        [odd_label] = doc["differing"]
        assert odd_label.startswith(odd_node.node_id[:8])
        assert odd_label.endswith(LOOPBACK)
        groups = doc["groups"]
        assert len(groups[0]["nodes"]) == 2 and groups[0]["identical"]
        assert groups[1]["distributions"][0]["change"] == "upgraded"
    finally:
        cluster.shutdown()
    print(f"ray fleet test: {time.monotonic() - started:.1f} s")
