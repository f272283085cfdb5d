"""The static import chain (environment.imports): what ``import TOP`` runs, read with ast.

Each case is a small package written to disk; the oracle for "reached" is CPython itself:
the target module raises ImportError, as an extension module whose library is missing
does, and the test imports the package in a child interpreter: reached means
``import pkg`` fails (the modules are plain Python the test wrote: running them is the
point).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from libdoctor.environment.imports import module_imports, reach

TARGET = "pkg.sub.target"

CASES: dict[str, dict[str, str]] = {
    "module level": {"pkg/__init__.py": "from pkg.sub import target\n"},
    "relative from a subpackage": {
        "pkg/__init__.py": "from . import sub\n",
        "pkg/sub/__init__.py": "from . import target\n",
    },
    "relative two levels up": {
        "pkg/__init__.py": "from .a import b\n",
        "pkg/a/__init__.py": "",
        "pkg/a/b.py": "from ..sub.target import X\n",
    },
    "through a chain of modules": {
        "pkg/__init__.py": "import pkg.core\n",
        "pkg/core.py": "from pkg import helpers\n",
        "pkg/helpers.py": "import pkg.sub.target as t\n",
    },
    "in both branches of an if": {
        "pkg/__init__.py": "import os\nif os.sep == '/':\n    from pkg.sub import target\n",
    },
    "in a class body": {"pkg/__init__.py": "class C:\n    from pkg.sub import target\n"},
    "guarded, but the handler raises again": {
        "pkg/__init__.py": textwrap.dedent(
            """\
            try:
                from pkg.sub import target
            except ImportError as e:
                raise ImportError("pkg could not be imported") from e
            """
        )
    },
    "a cycle on the way": {
        "pkg/__init__.py": "from pkg import a\n",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": "from pkg import a\nfrom pkg.sub import target\n",
    },
    "only inside a function": {
        "pkg/__init__.py": "def enable():\n    from pkg.sub import target\n",
    },
    "guarded by except ImportError": {
        "pkg/__init__.py": (
            "try:\n    from pkg.sub import target\nexcept ImportError:\n    target = None\n"
        ),
    },
    "guarded by a bare except": {
        "pkg/__init__.py": "try:\n    import pkg.sub.target\nexcept:\n    pass\n",
    },
    "at module level of a module nothing imports": {
        "pkg/__init__.py": "",
        "pkg/tests.py": "from pkg.sub import target\n",
    },
    "named in a string only": {
        "pkg/__init__.py": "import importlib\nNAME = 'pkg.sub.target'\n",
    },
    "a similar name": {"pkg/__init__.py": "from pkg.sub import target_other\n"},
}


def _write(root: Path, files: dict[str, str]) -> None:
    base = {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/target.py": "raise ImportError('libtbb.so.12: cannot open shared object file')\n",
        "pkg/sub/target_other.py": "",
    }
    for rel, text in {**base, **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _import_fails(root: Path) -> bool:
    code = f"import sys; sys.path.insert(0, {str(root)!r}); import pkg"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 or "ImportError" in done.stderr, done.stderr
    return done.returncode != 0


@pytest.mark.parametrize("case", sorted(CASES))
def test_reach_agrees_with_python(case: str, tmp_path: Path) -> None:
    _write(tmp_path, CASES[case])
    expected = _import_fails(tmp_path)
    found = reach(str(tmp_path), TARGET)
    assert found.status == ("reached" if expected else "not-reached"), (case, found)
    if expected:
        assert found.chain and found.chain[0][0] == "pkg"


def test_not_reached_names_where_it_is_imported(tmp_path: Path) -> None:
    _write(tmp_path, {**CASES["only inside a function"], "pkg/extra.py": "import pkg.sub.target\n"})
    found = reach(str(tmp_path), TARGET)
    assert found.status == "not-reached"
    assert set(found.only) == {("pkg/__init__.py", 2, False), ("pkg/extra.py", 1, True)}


def test_a_top_level_module_is_its_own_chain(tmp_path: Path) -> None:
    assert reach(str(tmp_path), "_cffi_backend").status == "reached"


def test_an_unparsable_file_imports_nothing() -> None:
    assert module_imports(b"def (:\n", "pkg", True) == []
    assert module_imports(b"\xff\xfe import x", "pkg", True) == []


def test_relative_imports_resolve_as_importlib_does() -> None:
    source = b"from . import a\nfrom ..b import c\nfrom ... import d\n"
    sites = module_imports(source, "p.q.r", False)
    assert [s.module for s in sites] == ["p.q", "p.q.a", "p.b", "p.b.c"]  # ... is beyond p
    package = module_imports(b"from . import a\nfrom .. import b\n", "p.q", True)
    assert [s.module for s in package] == ["p.q", "p.q.a", "p", "p.b"]
