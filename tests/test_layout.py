"""The shape of the source tree, read with ``ast``: the pipeline is the tree (STYLE rules 8, 9).

One package per stage, lower stages never importing higher ones, no import circles, no reach
into another module's ``_private`` names or another package's ``_private`` modules, no
families of prefixed module names, and few modules at the top. Function-level imports count:
a circle through a lazy import is still a circle in the design. How long a module or a
function may be is no rule here: split by concept, never by size (CONTRIBUTING.md).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "libdoctor"

# Lowest first. A module may import its own stage and the stages before it, never after.
STAGES = (
    "libdoctor",  # __init__, version, errors, findings, bounded, document, digests: shared
    "environment",
    "disk",
    "elf",
    "loader",
    "stack",
    "external",  # installers, child processes, HTTP, lock files, OS package databases
    "checks",
    "analysis",
    "whatif",
    "repair",
    "probe",
    "report",
    "api",  # the Python API: check, plan_uninstall, snapshot; the CLI is its client
    "cli",
    "__main__",
)
MAX_TOP_LEVEL_MODULES = 12


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    target: str  # dotted module name (a submodule when the imported name is one)
    name: str | None  # the imported name, for ``from x import name`` of a non-module
    line: int
    typing_only: bool = False  # under ``if TYPE_CHECKING:``: names for the type checker


# The package's ``__init__`` is the lowest stage (everything imports its ``__version__``), yet
# it offers the API of the highest: it names those modules for the type checker only and
# imports them on first use (PEP 562 ``__getattr__``, by module name). Those names are no
# import of the design; ``test_importing_the_package_loads_nothing_else`` keeps them lazy.
FACADE = "libdoctor"


def _is_facade_name(i: Import) -> bool:
    return i.importer == FACADE and i.typing_only


def _typing_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            for child in node.body:
                assert child.end_lineno is not None
                lines.update(range(child.lineno, child.end_lineno + 1))
    return lines


@cache
def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _imports_of(module: str, path: Path) -> Iterator[Import]:
    known = modules()
    tree = ast.parse(path.read_text(), str(path))
    typing = _typing_lines(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "libdoctor":
                    yield Import(module, alias.name, None, node.lineno, node.lineno in typing)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package_of(module, path).split(".")
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, *([base] if base else [])])
            if base.split(".")[0] != "libdoctor":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                only = node.lineno in typing
                if sub in known:
                    yield Import(module, sub, None, node.lineno, only)
                else:
                    yield Import(module, base, alias.name, node.lineno, only)


@cache
def imports() -> tuple[Import, ...]:
    return tuple(i for m, p in modules().items() for i in _imports_of(m, p))


def _stage(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "libdoctor"
    if top in ("errors", "findings", "remedy", "bounded", "version", "document", "digests"):
        top = "libdoctor"
    return STAGES.index(top)


def test_every_module_belongs_to_a_stage() -> None:
    strays = []
    for module in modules():
        try:
            _stage(module)
        except ValueError:
            strays.append(module)
    assert strays == [], f"add these to STAGES (and the README's code map): {strays}"


def test_lower_stages_never_import_higher_ones() -> None:
    upward = [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in imports()
        if _stage(i.target) > _stage(i.importer) and not _is_facade_name(i)
    ]
    assert upward == []


def test_importing_the_package_loads_nothing_else() -> None:
    """``import libdoctor`` is the version and the API's names, nothing of the stack."""
    code = "import sys, libdoctor; print(sorted(m for m in sys.modules if 'libdoctor' in m))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['libdoctor', 'libdoctor.version']"


def test_no_import_circles() -> None:
    graph: dict[str, set[str]] = {m: set() for m in modules()}
    for i in imports():
        if i.target in graph and i.target != i.importer and not _is_facade_name(i):
            graph[i.importer].add(i.target)
    circles = _strongly_connected(graph)
    assert circles == [], f"import circles: {circles}"


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively: every component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_private_names_imported_across_modules() -> None:
    reach_ins = [
        f"{i.importer}:{i.line} imports {i.name} from {i.target}"
        for i in imports()
        if i.name is not None
        and i.name.startswith("_")
        and not (i.name.startswith("__") and i.name.endswith("__"))
        and i.target != i.importer
    ]
    assert reach_ins == []


def test_private_modules_stay_in_their_package() -> None:
    reach_ins = []
    for i in imports():
        parts = i.target.split(".")
        if parts[-1].startswith("_") and not parts[-1].startswith("__"):
            owner = ".".join(parts[:-1])
            if not (i.importer == owner or i.importer.startswith(owner + ".")):
                reach_ins.append(f"{i.importer}:{i.line} imports {i.target}")
    assert reach_ins == []


def _names_by_folder() -> dict[Path, list[str]]:
    folders: dict[Path, list[str]] = {}
    for path in PACKAGE.rglob("*"):
        if path.name.startswith("__") or "__pycache__" in path.parts:
            continue
        if path.suffix == ".py" or (path.is_dir() and (path / "__init__.py").exists()):
            folders.setdefault(path.parent, []).append(path.stem)
    return folders


def test_no_families_of_prefixed_names() -> None:
    """``loader.py`` + ``loaderfs.py``, or ``probe.py`` + ``probe_child.py``: a concept split
    by size under one prefix. Sibling names must not start with one another, nor share a
    ``word_`` prefix."""
    families = []
    for folder, names in _names_by_folder().items():
        for a in names:
            for b in names:
                if a != b and b.startswith(a.lstrip("_")):
                    families.append(f"{folder.name}/: {a} ~ {b}")
        heads: dict[str, list[str]] = {}
        for name in names:
            head, sep, _ = name.lstrip("_").partition("_")
            if sep:
                heads.setdefault(head, []).append(name)
        families += [f"{folder.name}/: {v}" for v in heads.values() if len(v) > 1]
    assert families == []


def test_few_modules_at_the_top() -> None:
    top = [p.name for p in PACKAGE.glob("*.py")]
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from libdoctor.loader.model import Closure", ["libdoctor.loader.model"]),
        ("from libdoctor.loader import model", ["libdoctor.loader.model"]),
        ("from . import model", ["libdoctor.loader.model"]),
        ("from .model import Closure", ["libdoctor.loader.model"]),
        ("from .. import findings", ["libdoctor.findings"]),
        ("import libdoctor.elf.dynamic", ["libdoctor.elf.dynamic"]),
        ("def f():\n    from libdoctor.cli import common", ["libdoctor.cli.common"]),
        ("import json", []),
    ],
)
def test_imports_are_read_as_python_resolves_them(
    source: str, expected: list[str], tmp_path: Path
) -> None:
    path = tmp_path / "search.py"
    path.write_text(source + "\n")
    assert [i.target for i in _imports_of("libdoctor.loader.search", path)] == expected


def test_a_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _strongly_connected(graph) == [["a", "b", "c"]]


def test_the_code_map_names_every_package() -> None:
    readme = (PACKAGE.parent.parent / "README.md").read_text()
    section = readme.partition("## Code map")[2].partition("\n## ")[0]
    listed = set(re.findall(r"^- `([a-z_]+)/`", section, re.M))
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert listed == packages
