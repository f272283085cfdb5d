"""Lock files read into values (``external.lockfile``), and which packages apply here.

The files are written the way the tools write them (``uv lock``, ``uv export --format
pylock.toml``, ``pip lock``, pip-compile's ``--generate-hashes``); the real tools' own output
is read in ``tests/cli/test_verify.py``. Bad files are one ``LockfileError`` line each.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from libdoctor.external.lockfile import (
    LockfileError,
    installed_from,
    read_lock,
    wheel_tags,
)
from libdoctor.external.lockselect import SyncOptions, select

HERE = {
    "python_version": f"{sys.version_info.major}.{sys.version_info.minor}",
    "python_full_version": "{}.{}.{}".format(*sys.version_info[:3]),
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}
NOT_HERE = f"python_version < '{sys.version_info.major}.{sys.version_info.minor}'"
SHA_A = "a" * 64
SHA_B = "b" * 64

PYLOCK = f"""\
lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.10"

[[packages]]
name = "six"
version = "1.16.0"
index = "https://pypi.org/simple"

[packages.sdist]
url = "https://example.org/six-1.16.0.tar.gz"
upload-time = 2021-05-05T14:18:18Z
size = 1
hashes = {{ sha256 = "{SHA_B}" }}

[[packages.wheels]]
url = "https://example.org/six-1.16.0-py2.py3-none-any.whl"
hashes = {{ sha256 = "{SHA_A}" }}

[[packages]]
name = "Tomli"
version = "2.0.1"
marker = "{NOT_HERE}"
wheels = [{{ name = "tomli-2.0.1-py3-none-any.whl", hashes = {{ sha256 = "{SHA_B}" }} }}]

[[packages]]
name = "mine"
directory = {{ path = "src/mine", editable = true }}
"""

UV_LOCK = f"""\
version = 1
revision = 3
requires-python = ">=3.10"
resolution-markers = ["sys_platform == 'linux'", "sys_platform != 'linux'"]

[[package]]
name = "demo"
version = "0.1.0"
source = {{ editable = "." }}
dependencies = [
    {{ name = "six" }},
    {{ name = "tomli", marker = "{NOT_HERE}" }},
    {{ name = "fork", version = "2.0", marker = "sys_platform == 'linux'" }},
    {{ name = "fork", version = "1.0", marker = "sys_platform != 'linux'" }},
    {{ name = "withextra", extra = ["fast"] }},
]

[package.optional-dependencies]
docs = [{{ name = "sphinxish" }}]

[package.dev-dependencies]
dev = [{{ name = "pytestish" }}]
lint = [{{ name = "ruffish" }}]

[[package]]
name = "six"
version = "1.16.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [{{ url = "https://e.org/six-1.16.0-py2.py3-none-any.whl", hash = "sha256:{SHA_A}" }}]

[[package]]
name = "tomli"
version = "2.0.1"
source = {{ registry = "https://pypi.org/simple" }}

[[package]]
name = "fork"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}
resolution-markers = ["sys_platform != 'linux'"]

[[package]]
name = "fork"
version = "2.0"
source = {{ registry = "https://pypi.org/simple" }}
resolution-markers = ["sys_platform == 'linux'"]

[[package]]
name = "withextra"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}

[package.optional-dependencies]
fast = [{{ name = "speedup" }}]
slow = [{{ name = "slowdown" }}]

[[package]]
name = "speedup"
version = "1.0"
source = {{ git = "https://example.org/speedup?rev=main#0123abcd" }}

[[package]]
name = "slowdown"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}

[[package]]
name = "pytestish"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}

[[package]]
name = "ruffish"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}

[[package]]
name = "sphinxish"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}
"""


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_a_pylock_toml_as_uv_exports_it(tmp_path: Path) -> None:
    lock = read_lock(_write(tmp_path, "pylock.toml", PYLOCK))
    assert (lock.format, lock.created_by, lock.requires_python) == ("pylock.toml", "uv", ">=3.10")
    six, tomli, mine = lock.packages
    assert (six.key, six.version, six.source) == ("six", "1.16.0", "registry")
    assert six.hashes == {f"sha256:{SHA_A}", f"sha256:{SHA_B}"}
    assert [a.filename for a in six.artifacts] == [
        "six-1.16.0-py2.py3-none-any.whl",
        "six-1.16.0.tar.gz",
    ]
    assert tomli.key == "tomli" and tomli.marker == NOT_HERE
    assert (mine.version, mine.source, mine.local) == (None, "editable", True)
    chosen = select(lock, HERE)
    assert [p.key for p in chosen.required] == ["six", "mine"]
    assert [(e.package.key, e.why) for e in chosen.excluded] == [
        ("tomli", f"marker {NOT_HERE} does not hold here")
    ]


def test_uv_lock_is_walked_from_the_project_along_edges_that_hold(tmp_path: Path) -> None:
    lock = read_lock(_write(tmp_path, "uv.lock", UV_LOCK))
    chosen = select(lock, HERE)
    required = sorted(p.display for p in chosen.required)
    # dev is uv's default group; the fork's linux version; the extra an edge asks for
    # the project itself too: uv sync installs it (editable)
    assert required == [
        "demo 0.1.0", "fork 2.0", "pytestish 1.0", "six 1.16.0", "speedup 1.0", "withextra 1.0"
    ]  # fmt: skip
    assert chosen.optional == ()
    why = {e.package.display: e.why for e in chosen.excluded}
    assert why["tomli 2.0.1"] == f"demo needs it only where {NOT_HERE}"
    assert set(why) == {"tomli 2.0.1", "fork 1.0", "slowdown 1.0", "ruffish 1.0", "sphinxish 1.0"}
    speedup = next(p for p in chosen.required if p.key == "speedup")
    assert (speedup.source, speedup.artifacts[0].commit) == ("vcs", "0123abcd")
    six = next(p for p in chosen.required if p.key == "six")
    assert six.hashes == {f"sha256:{SHA_A}"}
    assert six.index == "https://pypi.org/simple" and speedup.index is None


def test_uv_lock_without_a_project_is_taken_whole(tmp_path: Path) -> None:
    text = UV_LOCK.replace('source = { editable = "." }', 'source = { registry = "x" }')
    chosen = select(read_lock(_write(tmp_path, "uv.lock", text)), HERE)
    assert len(chosen.required) == len(
        {p.key for p in read_lock(str(tmp_path / "uv.lock")).packages}
    )
    assert any("every package taken as required" in n for n in chosen.notes)


def test_a_requirements_file_with_hashes_continuations_comments_and_includes(
    tmp_path: Path,
) -> None:
    _write(tmp_path, "base/common.txt", f"idna==3.10 --hash=sha256:{SHA_B}\n")
    path = _write(
        tmp_path,
        "requirements.txt",
        "# generated by pip-compile\n"
        "--index-url https://pypi.org/simple\n"
        "-r base/common.txt\n"
        "six==1.16.0 \\\n"
        f"    --hash=sha256:{SHA_A} \\\n"
        f"    --hash=sha256:{SHA_B}\n"
        "    # via demo\n"
        f"tomli==2.0.1 ; {NOT_HERE}  # a comment\n"
        "Foo.Bar[extra]===1.0\n"
        "-e ./local\n",
    )
    lock = read_lock(path)
    assert [(p.key, p.version) for p in lock.packages] == [
        ("idna", "3.10"),
        ("six", "1.16.0"),
        ("tomli", "2.0.1"),
        ("foo-bar", "1.0"),
    ]
    assert lock.packages[1].hashes == {f"sha256:{SHA_A}", f"sha256:{SHA_B}"}
    assert lock.packages[2].marker is not None
    assert any("an editable with no name (#egg=) left aside" in n for n in lock.notes)
    chosen = select(lock, HERE)
    assert [p.key for p in chosen.required] == ["idna", "six", "foo-bar"]


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("pylock.toml", 'lock-version = "1.0"\n[[packages]]\nname = "six', "is not valid TOML"),
        ("uv.lock", UV_LOCK[: len(UV_LOCK) // 2], "is not valid TOML"),
        ("pylock.toml", 'lock-version = "2.0"\n', "unknown lock-version '2.0'"),
        ("pylock.toml", "packages = []\n", "no lock-version"),
        ("uv.lock", "version = 7\n", "unknown uv.lock version 7"),
        ("pylock.toml", 'lock-version = "1.0"\npackages = [{version = "1"}]\n', "name is NoneType"),
        ("req.txt", f"--hash=sha256:{SHA_A}\n--hash=sha256:{SHA_B}\n", "--hash without a"),
        ("req.txt", "six>=1.0\n", "pins no version"),
        ("req.txt", "# nothing\n", "no pinned requirement"),
        ("req.txt", "six==1.0\n-r missing.txt\n", "cannot read missing.txt"),
        ("req.txt", "six ==\n", "does not parse"),
        ("req.txt", b"six==1.0\xff\n", "is not UTF-8"),
        ("any.toml", "a = 1\n", "neither a pylock.toml"),
    ],
)
def test_a_bad_lock_is_one_line_naming_the_cause(
    tmp_path: Path, name: str, text: str | bytes, expected: str
) -> None:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(LockfileError) as raised:
        read_lock(str(path))
    assert expected in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('lock-version = "1.0"\nrequires-python = ">=9.0"\n', "is for requires-python >=9.0"),
        (
            'lock-version = "1.0"\nenvironments = ["sys_platform == \'win32\'"]\n',
            "matches none",
        ),
    ],
)
def test_a_lock_for_other_pythons_cannot_be_verified(
    tmp_path: Path, text: str, expected: str
) -> None:
    lock = read_lock(_write(tmp_path, "pylock.toml", text))
    with pytest.raises(LockfileError, match=expected):
        select(lock, HERE)


def test_wheel_tags_expand_compressed_sets() -> None:
    assert wheel_tags("six-1.16.0-py2.py3-none-any.whl") == {"py2-none-any", "py3-none-any"}
    assert wheel_tags(
        "x-1.0-1build-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    ) == {
        "cp311-cp311-manylinux_2_17_x86_64",
        "cp311-cp311-manylinux2014_x86_64",
    }
    assert wheel_tags("six-1.16.0.tar.gz") == frozenset()


@pytest.mark.parametrize(
    ("direct_url", "kind", "hashes"),
    [
        (None, None, set()),
        (
            {"url": "file:///w.whl", "archive_info": {"hashes": {"sha256": SHA_A.upper()}}},
            "archive",
            {f"sha256:{SHA_A}"},
        ),
        (
            {"url": "file:///w.whl", "archive_info": {"hash": f"sha256={SHA_B}"}},
            "archive",
            {f"sha256:{SHA_B}"},
        ),
        ({"url": "file:///w.whl", "archive_info": {}}, "archive", set()),  # what uv writes
        ({"url": "file:///src", "dir_info": {"editable": True}}, "directory", set()),
        ("not json {", None, set()),
    ],
)
def test_what_a_dist_info_says_of_its_artifact(
    tmp_path: Path, direct_url: object, kind: str | None, hashes: set[str]
) -> None:
    info = tmp_path / "six-1.16.0.dist-info"
    info.mkdir()
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nTag: py2-none-any\nTag: py3-none-any\n")
    if direct_url is not None:
        text = direct_url if isinstance(direct_url, str) else json.dumps(direct_url)
        (info / "direct_url.json").write_text(text)
    found = installed_from(str(info))
    assert (found.kind, set(found.hashes)) == (kind, hashes)
    assert found.tags == ("py2-none-any", "py3-none-any")


def test_requirements_sources_are_read_as_their_source(tmp_path: Path) -> None:
    """``NAME @ git+URL@COMMIT``, a URL, a file, ``-e`` a directory (named by its
    pyproject.toml or ``#egg=``): each keeps its source, and the fix installs it."""
    from libdoctor.external.lockfile import source_requirement

    commit = "c" * 40
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "pyproject.toml").write_text('[project]\nname = "local-pkg"\n')
    path = _write(
        tmp_path,
        "requirements.txt",
        f"gitpkg @ git+https://e.org/g.git@{commit}#subdirectory=py\n"
        "tagged @ git+https://e.org/t.git@v1.0\n"
        f"web @ https://e.org/web-1.0-py3-none-any.whl#sha256={SHA_A}\n"
        "./dist/filed-2.0-py3-none-any.whl\n"
        "-e ./local\n"
        "-e git+https://e.org/ed.git#egg=ed\n",
    )
    lock = read_lock(str(path))
    got = {p.key: (p.source, source_requirement(p, lock.base)) for p in lock.packages}
    assert got == {
        "gitpkg": ("vcs", f"gitpkg @ git+https://e.org/g.git@{commit}#subdirectory=py"),
        "tagged": ("vcs", "tagged @ git+https://e.org/t.git@v1.0"),
        "web": ("url", f"web @ https://e.org/web-1.0-py3-none-any.whl#sha256={SHA_A}"),
        "filed": ("path", f"filed @ file://{tmp_path}/dist/filed-2.0-py3-none-any.whl"),
        "local-pkg": ("editable", f"local-pkg @ file://{tmp_path}/local"),
        "ed": ("vcs", "ed @ git+https://e.org/ed.git"),
    }
    tagged = next(p for p in lock.packages if p.key == "tagged").artifacts[0]
    assert (tagged.commit, tagged.revision) == (None, "v1.0")  # a tag is no commit
    web = next(p for p in lock.packages if p.key == "web")
    assert web.hashes == {f"sha256:{SHA_A}"}


def test_pylock_extras_and_groups_follow_the_options(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "pylock.toml",
        'lock-version = "1.0"\nextras = ["fast"]\ndependency-groups = ["dev", "docs"]\n'
        'default-groups = ["dev"]\n'
        '[[packages]]\nname = "base"\nversion = "1"\n'
        '[[packages]]\nname = "speed"\nversion = "1"\nmarker = "\'fast\' in extras"\n'
        '[[packages]]\nname = "lint"\nversion = "1"\nmarker = "\'dev\' in dependency_groups"\n'
        '[[packages]]\nname = "sphinx"\nversion = "1"\nmarker = "\'docs\' in dependency_groups"\n',
    )
    lock = read_lock(str(path))

    def required(**options: object) -> list[str]:
        return [p.key for p in select(lock, HERE, SyncOptions(**options)).required]  # type: ignore[arg-type]

    assert required() == ["base", "lint"]
    assert required(extras=("fast",), no_default_groups=True) == ["base", "speed"]
    assert required(all_groups=True, dev="exclude") == ["base", "sphinx"]
    assert required(only_groups=("docs",)) == ["base", "sphinx"]
    with pytest.raises(LockfileError, match=r"apply to a uv\.lock only"):
        select(lock, HERE, SyncOptions(all_packages=True))


@pytest.mark.parametrize(
    ("source", "options"),
    [
        ('{ editable = "." }', SyncOptions(no_install_project=True)),
        ('{ editable = "." }', SyncOptions(no_install_packages=("demo",))),
        ('{ virtual = "." }', SyncOptions()),  # no build system, or package = false
    ],
)
def test_a_project_uv_sync_does_not_install_is_optional(
    tmp_path: Path, source: str, options: SyncOptions
) -> None:
    text = UV_LOCK.replace('source = { editable = "." }', f"source = {source}")
    chosen = select(read_lock(_write(tmp_path, "uv.lock", text)), HERE, options)
    assert [p.display for p in chosen.optional] == ["demo 0.1.0"]
    assert "demo" not in {p.key for p in chosen.required}
