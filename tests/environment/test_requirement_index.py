"""The requirement index on values: markers for the target's Python, extras requested and
inferred, what counts as installed, egg-info ``requires.txt``.

The findings built on it are checked on real venvs in ``tests/checks/test_requirements.py``
(named for ``RequirementIndex``: test module names must be unique across ``tests/``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from libdoctor.environment.distributions import Distribution, parse_requires_txt, scan_site
from libdoctor.environment.requirements import (
    RequirementIndex,
    Requirers,
    extras_named,
    marker_environment,
)
from libdoctor.environment.target import SiteDir
from support.dists import env_of, fake_dist


def keys(index: RequirementIndex, dist: Distribution) -> list[str]:
    return sorted(d.requirement for d in index.dependencies(dist))


# --------------------------------------------------------------------------- markers


@pytest.mark.parametrize(
    ("python", "applies"),
    [((3, 8), True), ((3, 12), False)],
    ids=["old-target", "new-target"],
)
def test_markers_are_evaluated_for_the_targets_python(
    python: tuple[int, int], applies: bool
) -> None:
    """libdoctor runs on 3.11; the target's interpreter decides."""
    app = fake_dist("app", "1.0", requires=['backport>=1; python_version < "3.9"'])
    env = env_of(app, python=python)
    assert keys(RequirementIndex(env), app) == (["backport>=1"] if applies else [])
    assert marker_environment(env.target)["python_version"] == f"{python[0]}.{python[1]}"


def test_unparsable_lines_are_kept_with_why() -> None:
    app = fake_dist("app", "1.0", requires=["good>=1", "bad (>=1.0-beta", "pytz (>dev)"])
    index = RequirementIndex(env_of(app))
    assert keys(index, app) == ["good>=1"]
    assert [line for line, _ in index.invalid(app)] == ["bad (>=1.0-beta", "pytz (>dev)"]
    assert all(why for _, why in index.invalid(app))


@pytest.mark.parametrize(
    ("marker", "extras"),
    [
        ('extra == "cuda12"', ["cuda12"]),
        ("'with_cuda' == extra", ["with-cuda"]),
        ('python_version >= "3" and (extra == "a" or extra == "B.c")', ["a", "b-c"]),
        ('python_version >= "3"', []),
    ],
)
def test_extras_named_in_a_marker(marker: str, extras: list[str]) -> None:
    assert extras_named(marker) == extras


# --------------------------------------------------------------------------- extras


def jax_like() -> dict[str, Distribution]:
    """jax[cuda12] → jax-cuda12-plugin[with-cuda] → nvidia-cudnn-cu12, as real jax states it."""
    return {
        "jax": fake_dist(
            "jax",
            "0.4.35",
            requires=[
                "jaxlib<=0.4.35,>=0.4.34",
                'jax-cuda12-plugin[with_cuda]<=0.4.35,>=0.4.35; extra == "cuda12"',
                'jax-cuda12-plugin<=0.4.35,>=0.4.35; extra == "cuda12-local"',
            ],
        ),
        "jaxlib": fake_dist("jaxlib", "0.4.35"),
        "plugin": fake_dist(
            "jax-cuda12-plugin",
            "0.4.35",
            requires=[
                "jax-cuda12-pjrt==0.4.35",
                'nvidia-cudnn-cu12<10.0,>=9.1; extra == "with-cuda"',
                'nvidia-nccl-cu12>=2.18.1; extra == "with_cuda" and sys_platform == "linux"',
            ],
        ),
        "pjrt": fake_dist("jax-cuda12-pjrt", "0.4.35"),
        "cudnn": fake_dist("nvidia-cudnn-cu12", "9.10.2.21"),
        "nccl": fake_dist("nvidia-nccl-cu12", "2.26.2"),
    }


def test_an_extra_requested_by_an_installed_requirement_is_certain() -> None:
    dists = jax_like()
    app = fake_dist("app", "1.0", requires=["jax[cuda12]>=0.4"])
    index = RequirementIndex(env_of(app, *dists.values()))
    by_name = {e.name: e for e in index.extras(dists["jax"])}
    cuda12 = by_name["cuda12"]
    assert cuda12.certain and not cuda12.inferred
    assert not by_name["cuda12-local"].certain  # only inferred: its plugin is installed
    assert cuda12.evidence == "requested as jax[cuda12] by app 1.0"
    (with_cuda,) = index.extras(dists["plugin"])
    assert with_cuda.certain
    assert with_cuda.evidence == "requested as jax-cuda12-plugin[with-cuda] by jax 0.4.35"
    assert keys(index, dists["plugin"]) == [
        "jax-cuda12-pjrt==0.4.35",
        "nvidia-cudnn-cu12<10.0,>=9.1",
        "nvidia-nccl-cu12>=2.18.1",
    ]
    (cudnn,) = index.requirements_on(dists["cudnn"])
    assert cudnn.extra == "with-cuda" and cudnn.certain
    assert index.why(cudnn) == (
        "through its extra with-cuda, requested as jax-cuda12-plugin[with-cuda] by jax 0.4.35"
    )
    (nccl,) = index.requirements_on(dists["nccl"])
    assert index.why(nccl).endswith('; where extra == "with-cuda" and sys_platform == "linux"')


def test_an_extra_whose_requirements_are_installed_is_inferred_never_certain() -> None:
    """``pip install 'jax[cuda12]'`` leaves no trace of the extra: what is installed says it.
    It counts for required_by, never as a requirement to report."""
    dists = jax_like()
    index = RequirementIndex(env_of(*dists.values()))
    assert keys(index, dists["plugin"]) == ["jax-cuda12-pjrt==0.4.35"]
    assert keys(index, dists["jax"]) == ["jaxlib<=0.4.35,>=0.4.34"]
    assert index.required_by(dists["cudnn"]) == [dists["plugin"]]
    by_name = {e.name: e for e in index.extras(dists["jax"])}
    # cuda12-local adds the plugin without CUDA wheels: installed too, so inferred as well.
    assert set(by_name) == {"cuda12", "cuda12-local"}
    assert by_name["cuda12"].inferred and not by_name["cuda12"].certain
    assert by_name["cuda12"].evidence == "inferred: all of cuda12's requirements are installed"
    (with_cuda,) = index.extras(dists["plugin"])
    assert not with_cuda.certain  # requested, but through an inferred extra
    assert "nvidia-cudnn-cu12<10.0,>=9.1 through its extra with-cuda" in index.requirers_text(
        dists["cudnn"]
    )
    requirers = index.requirers(dists["cudnn"])  # both in one value
    assert requirers.dists == (dists["plugin"],)
    assert requirers.text == index.requirers_text(dists["cudnn"])
    assert index.requirers(dists["jax"]) == Requirers((), "")


def test_an_extra_with_a_requirement_not_installed_is_not_inferred() -> None:
    dists = jax_like()
    del dists["nccl"], dists["jax"]
    index = RequirementIndex(env_of(*dists.values()))
    assert index.extras(dists["plugin"]) == []
    assert index.required_by(dists["cudnn"]) == []
    # With jax back, its inferred cuda12 requests with-cuda: active, though not certain.
    index = RequirementIndex(env_of(*dists.values(), jax_like()["jax"]))
    (with_cuda,) = index.extras(dists["plugin"])
    assert not with_cuda.inferred and not with_cuda.certain
    assert index.required_by(dists["cudnn"]) == [dists["plugin"]]


def test_direct_request_is_said_when_the_extra_is_inferred(tmp_path: Path) -> None:
    site = tmp_path / "site"
    app = fake_dist("tfish", "2.0", requires=['nvidia-cudnn-cu12; extra == "and-cuda"'])
    cudnn = fake_dist("nvidia-cudnn-cu12", "9.3")
    app = _at(app, site)
    Path(app.metadata_dir).mkdir(parents=True)
    Path(app.metadata_dir, "REQUESTED").write_bytes(b"")
    (extra,) = RequirementIndex(env_of(app, cudnn)).extras(app)
    assert extra.requested_directly
    assert extra.evidence == (
        "inferred: tfish was requested directly and all of and-cuda's requirements are installed"
    )


def _at(dist: Distribution, site: Path) -> Distribution:
    from dataclasses import replace

    return replace(dist, metadata_dir=str(site / f"{dist.key}-{dist.version}.dist-info"))


# --------------------------------------------------------------------------- what is installed


def test_visible_copies_are_those_of_the_first_site() -> None:
    """A venv's numpy shadows the base interpreter's: only it answers a requirement."""
    own = fake_dist("numpy", "2.1")
    base = fake_dist("numpy", "1.21", site="/base/site")
    index = RequirementIndex(env_of(base, own))
    assert index.visible("numpy") == (own,)
    assert index.installed("numpy") == (base, own)
    assert index.visible("nothing") == ()


def test_pins_only_through_the_extras_the_framework_asks_for() -> None:
    torch = fake_dist("torch", "2.14.1", requires=["cuda-toolkit[cublas]==13.0.3"])
    toolkit = fake_dist(
        "cuda-toolkit",
        "13.0.3",
        requires=[
            "nvidia-cublas==13.1.1.3.*; extra == 'cublas'",
            "nvidia-cufft==12.0.0.61.*; extra == 'cufft'",
        ],
    )
    other = fake_dist("other", "1.0", requires=["cuda-toolkit[cufft]"])
    index = RequirementIndex(env_of(torch, toolkit, other))
    assert [p.requirement for p in index.pins(torch)] == [
        "cuda-toolkit==13.0.3",
        "nvidia-cublas==13.1.1.3.*",
    ]
    assert {e.name for e in index.extras(toolkit)} == {"cublas", "cufft"}


# --------------------------------------------------------------------------- egg-info


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("numpy>=1.2\n\n# comment\nsix\n", ("numpy>=1.2", "six")),
        ("[Fast_Path]\ncython\n", ('cython ; extra == "fast-path"',)),
        ('[:python_version < "3.8"]\nzipp\n', ('zipp ; python_version < "3.8"',)),
        (
            '[gpu:sys_platform == "linux"]\ncupy\n',
            ('cupy ; (sys_platform == "linux") and extra == "gpu"',),
        ),
    ],
    ids=["plain", "extra", "marker", "both"],
)
def test_requires_txt_reads_as_pip_reads_it(text: str, lines: tuple[str, ...]) -> None:
    assert parse_requires_txt(text.encode()) == lines


def test_an_egg_info_without_requires_dist_takes_requires_txt(tmp_path: Path) -> None:
    info = tmp_path / "legacy-1.0-py3.11.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: legacy\nVersion: 1.0\n")
    (info / "requires.txt").write_text("numpy>=1.20\n\n[plot]\nmatplotlib\n")
    (dist,) = scan_site(SiteDir(str(tmp_path), str(tmp_path)))
    assert dist.requires_dist == ("numpy>=1.20", 'matplotlib ; extra == "plot"')


REQUIRES_TXT = {
    "plain, comments, blanks": "numpy>=1.2\n\n# comment\n  six  \n",
    "extras and markers": (
        "a>=1\n[Extra_One]\nb\n[:python_version<'4']\nc\n[x:sys_platform=='linux']\nd\n"
        "[:python_version<'3']\nnever\n"
    ),
    "url requirement in an extra": "[gpu]\ncupy @ https://example.invalid/cupy.whl\n",
    "CRLF and CR": "a\r\n[e]\r\nb\rc\r\n",
}


@pytest.mark.parametrize("text", REQUIRES_TXT.values(), ids=REQUIRES_TXT.keys())
def test_requires_txt_means_what_pip_reads(tmp_path: Path, text: str) -> None:
    """pip's own egg-info reader (``metadata.get_all("Requires-Dist")`` of pip's directory
    distribution) as the oracle. Compared by meaning: pip before 24 spells an extra
    ``extra_one`` where pip 24 and libdoctor spell it ``extra-one``, and markers normalise
    both alike."""
    from packaging.requirements import Requirement
    from pip._internal.metadata import get_directory_distribution

    info = tmp_path / "ldt_egg-1.0.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: ldt-egg\nVersion: 1.0\n")
    (info / "requires.txt").write_bytes(text.encode())
    theirs = get_directory_distribution(str(info)).metadata.get_all("Requires-Dist") or []
    ours = parse_requires_txt(text.encode())
    extras = [{"extra": e} for e in ("", "extra-one", "Extra_One", "x", "gpu", "e")]

    def meaning(line: str) -> tuple[str, str, str | None, tuple[bool, ...]]:
        req = Requirement(line)
        applies = tuple(req.marker.evaluate(e) if req.marker else True for e in extras)
        return req.name, str(req.specifier), req.url, applies

    assert [meaning(r) for r in ours] == [meaning(r) for r in theirs]
