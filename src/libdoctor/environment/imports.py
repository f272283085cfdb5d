"""What a package imports when it is imported, read from its source with ``ast``, never run.

``import numba`` runs ``numba/__init__.py``, which imports other modules at module level,
which import others: the package's top-level import chain. An extension module that chain
reaches is loaded by ``import numba``; one that only a function body imports, or only an
import guarded by ``try: ... except ImportError`` (numba's TBB threading layer,
``numba.np.ufunc.tbbpool``), is loaded when a feature asks for it, and its failure is that
feature's, not the package's.

Rules, as CPython executes a module (what counts as "reached"):

- statements at module level run, inside ``if``/``else``, ``with``, ``for``/``while`` and
  class bodies too (both branches of an ``if`` are taken as run: the finding that rests on
  this errs towards "reached", which keeps an error an error);
- a function body does not run at import; ``try`` bodies whose handlers catch
  ``ImportError`` (or ``ModuleNotFoundError``, ``Exception``, ``BaseException``, a bare
  ``except``) are guarded: a failure there is handled;
- ``import a.b.c`` and ``from a.b import c`` import ``a``, ``a.b`` and ``a.b.c`` (when ``c``
  is a module), so importing a module runs every parent package's ``__init__`` first;
- relative imports resolve against the importing module's package.

Not followed: ``importlib.import_module`` and ``__import__`` with computed names, star
imports of a submodule listed only in another module's ``__all__``, and ``.pth`` hooks.
Bounded: files over ``MAX_SOURCE`` bytes and searches over ``MAX_FILES`` files give
"unknown", which callers treat as "reached".
"""

from __future__ import annotations

import ast
import os
import re
import stat
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "MAX_FILES",
    "MAX_FOLLOWED",
    "MAX_MODULES",
    "MAX_SOURCE",
    "FirstImport",
    "ImportSite",
    "LoadByPath",
    "Reach",
    "imported_before",
    "loaded_first",
    "module_imports",
    "reach",
]

MAX_SOURCE = 4 << 20
"""A Python file larger than this is not parsed (generated tables, not import chains)."""
MAX_FILES = 4000
"""The most source files one reachability question reads."""

_TRY = (ast.Try, getattr(ast, "TryStar", ast.Try))  # try/except* from Python 3.11
_HANDLED = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


@dataclass(frozen=True, slots=True)
class ImportSite:
    """One import statement: the module it imports and whether it runs at import."""

    module: str  # absolute dotted name imported (``from a import b`` gives ``a`` and ``a.b``)
    line: int
    runs: bool  # at module level and not guarded: it runs whenever its file is imported


@dataclass(frozen=True, slots=True)
class Reach:
    """Whether importing PACKAGE loads MODULE, and the evidence."""

    status: Literal["reached", "not-reached", "unknown"]
    chain: tuple[tuple[str, int], ...]  # reached: (importing module, line) from the top down
    # not reached: where it is imported (file, line, runs): runs False = in a function or a
    # guarded try; True = at module level of a module that is itself not reached
    only: tuple[tuple[str, int, bool], ...]
    reason: str = ""  # unknown: why

    @property
    def reached(self) -> bool:
        return self.status != "not-reached"


def _guarded(handlers: list[ast.ExceptHandler]) -> bool:
    """Whether a handler catches an import's failure and does not raise again (numba's
    ``except ImportError as e: ... raise ImportError(msg)`` only rewords the failure)."""
    for handler in handlers:
        kind = handler.type
        names = kind.elts if isinstance(kind, ast.Tuple) else [kind] if kind else []
        catches = kind is None or any(isinstance(n, ast.Name) and n.id in _HANDLED for n in names)
        if catches and not any(
            isinstance(node, ast.Raise) for node, _ in _walk(handler.body, True)
        ):
            return True
    return False


def _walk(body: list[ast.stmt], runs: bool) -> Iterator[tuple[ast.stmt, bool]]:
    """Every statement of BODY, nested ones included, with whether it runs at import."""
    for node in body:
        yield node, runs
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(node.body, False)
        elif isinstance(node, _TRY):
            yield from _walk(node.body, runs and not _guarded(node.handlers))
            for handler in node.handlers:
                yield from _walk(handler.body, False)
            yield from _walk(node.orelse, runs)
            yield from _walk(node.finalbody, runs)
        elif isinstance(node, ast.If) and _type_checking(node.test):
            yield from _walk(node.body, False)  # for type checkers only: never at run time
            yield from _walk(node.orelse, runs)
        elif isinstance(node, ast.If | ast.For | ast.AsyncFor | ast.While):
            yield from _walk(node.body, runs)
            yield from _walk(node.orelse, runs)
        elif isinstance(node, ast.With | ast.AsyncWith | ast.ClassDef):
            yield from _walk(node.body, runs)
        elif isinstance(node, ast.Match):
            for case in node.cases:
                yield from _walk(case.body, runs)


def _type_checking(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` / ``if typing.TYPE_CHECKING:``: False whenever the code runs."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _absolute(module: str | None, level: int, importer: str, is_package: bool) -> str | None:
    """A relative import's absolute name, as importlib resolves it (None: beyond the top)."""
    if level == 0:
        return module
    parts = importer.split(".")
    if not is_package:
        parts = parts[:-1]
    if level - 1 >= len(parts):
        return None
    parts = parts[: len(parts) - (level - 1)]
    return ".".join([*parts, module]) if module else ".".join(parts)


def module_imports(source: bytes, importer: str, is_package: bool) -> list[ImportSite]:
    """The imports of one module's source. IMPORTER is its dotted name; IS_PACKAGE: it is
    a package's ``__init__`` (relative imports resolve against itself). A file that does not
    parse imports nothing (Python would fail to import it: another finding's business)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    sites: list[ImportSite] = []
    for node, runs in _walk(tree.body, True):
        if isinstance(node, ast.Import):
            sites += [ImportSite(alias.name, node.lineno, runs) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, importer, is_package)
            if base is None:
                continue
            sites.append(ImportSite(base, node.lineno, runs))
            sites += [
                ImportSite(f"{base}.{alias.name}", node.lineno, runs)
                for alias in node.names
                if alias.name != "*"
            ]
    return sites


class _Package:
    """The source files of one top-level package under a site directory, read on demand."""

    def __init__(self, site: str, top: str) -> None:
        self.site = site
        self.top = top
        self.files_read = 0
        self._sources: dict[str, bytes | None] = {}
        self._imports: dict[str, list[ImportSite]] = {}
        self._listing: list[str] | None = None
        self._paths: dict[str, tuple[str, bool]] = {}

    def listing(self) -> list[str]:
        """Dotted names of the package's .py modules (``a.b`` for a/b.py and a/b/__init__.py)."""
        if self._listing is None:
            found: dict[str, tuple[str, bool]] = {}
            root = os.path.join(self.site, self.top)
            for directory, dirs, files in os.walk(root):
                dirs[:] = sorted(d for d in dirs if d.isidentifier())
                rel = os.path.relpath(directory, self.site).replace(os.sep, ".")
                for name in sorted(files):
                    if name.endswith(".py"):
                        stem = name[:-3]
                        key = rel if stem == "__init__" else f"{rel}.{stem}"
                        found[key] = (os.path.join(directory, name), stem == "__init__")
                if len(found) > MAX_FILES:
                    break
            self._paths = found
            self._listing = list(found)
        return self._listing

    def path(self, module: str) -> tuple[str, bool] | None:
        if self._listing is not None:
            return self._paths.get(module)
        base = os.path.join(self.site, *module.split("."))
        init = os.path.join(base, "__init__.py")
        if os.path.isfile(init):
            return init, True
        if os.path.isfile(base + ".py"):
            return base + ".py", False
        return None

    def source(self, module: str) -> bytes | None:
        if module not in self._sources:
            found = self.path(module)
            data = None
            if found is not None:
                try:
                    fd = os.open(found[0], os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                    try:
                        st = os.fstat(fd)
                        if stat.S_ISREG(st.st_mode) and st.st_size <= MAX_SOURCE:
                            data = os.read(fd, st.st_size + 1)
                    finally:
                        os.close(fd)
                except OSError:
                    data = None
                self.files_read += 1
            self._sources[module] = data
        return self._sources[module]

    def naming(self, module: str) -> list[str]:
        """The package's modules whose text names MODULE's last component as a word."""
        last = module.rsplit(".", 1)[-1].encode()
        word = re.compile(rb"\b" + re.escape(last) + rb"\b")
        found = []
        for importer in self.listing():
            if self.files_read > MAX_FILES:
                raise _Unknown(f"more than {MAX_FILES} source files")
            data = self.source(importer)
            if importer != module and data and last in data and word.search(data):
                found.append(importer)
        return found

    def index(self) -> dict[str, dict[str, int]]:
        """imported module (and each package above it) -> {module whose import lines name
        it: the line of such an import at column 0, which runs at import; 0 when every such
        line is indented (``imports`` then decides)}. Read by a regular expression."""
        index: dict[str, dict[str, int]] = {}
        for importer in self.listing():
            if self.files_read > MAX_FILES:
                raise _Unknown(f"more than {MAX_FILES} source files")
            data = self.source(importer)
            if data is None or b"import" not in data:
                continue
            found = self.path(importer)
            is_package = found is not None and found[1]
            for line, match in _import_lines(data):
                indent, source, names = match.group(1), match.group(2), _named(match.group(3))
                line = 0 if indent else line
                if source is not None:
                    text = source.decode("utf-8", "replace")
                    level = len(text) - len(text.lstrip("."))
                    base = _absolute(text[level:] or None, level, importer, is_package)
                    if base is None:
                        continue
                    modules = [base, *(f"{base}.{n}" for n in names)]
                else:
                    modules = names
                for name in modules:
                    parts = name.split(".")
                    for i in range(1, len(parts) + 1):
                        seen = index.setdefault(".".join(parts[:i]), {})
                        seen[importer] = seen.get(importer) or line
        return index

    def imports(self, module: str) -> list[ImportSite]:
        if module not in self._imports:
            data = self.source(module)
            found = self.path(module)
            is_package = found is not None and found[1]
            self._imports[module] = (
                module_imports(data, module, is_package) if data is not None else []
            )
        return self._imports[module]


_IMPORT_LINE = re.compile(
    rb"([ \t]*)(?:from[ \t]+(\.*[\w.]*)[ \t]+)?import[ \t]+(\([^)]*\)|[^\n#;]*)"
)


def _import_lines(data: bytes) -> Iterator[tuple[int, re.Match[bytes]]]:
    """(line number, match) of each line that is an import statement: found from the word
    ``import`` (a regular expression tried at every line start costs ten times more)."""
    at, line, counted = 0, 1, 0
    while True:
        at = data.find(b"import", at)
        if at < 0:
            return
        start = data.rfind(b"\n", 0, at) + 1
        match = _IMPORT_LINE.match(data, start)
        if match is not None and match.end() > at:
            line += data.count(b"\n", counted, start)
            counted = start
            yield line, match
            at = max(match.end(), at + 6)
        else:
            at += 6


def _named(raw: bytes) -> list[str]:
    """The names an import statement lists (``a.b as c, d`` -> a.b, d)."""
    names = []
    for part in raw.decode("utf-8", "replace").strip("()").split(","):
        name = part.split(" as ")[0].strip()
        if name and all(p.isidentifier() for p in name.split(".")):
            names.append(name)
    return names


def reach(site: str, module: str) -> Reach:
    """Whether ``import TOP`` (MODULE's top-level package, under SITE) imports MODULE.

    Cheapest evidence first: the package ``__init__`` files above MODULE importing it
    down the line; else the modules that name it (a word search, each confirmed by
    parsing it): when none imports it at import time, it is not reached; else a search
    backwards, breadth first, over the package's import lines (one scan of its files),
    each step confirmed: a statement at column 0 runs at import, an indented one is parsed.
    """
    top = module.split(".")[0]
    if "." not in module:
        return Reach("reached", (), ())
    package = _Package(site, top)
    try:
        chain = _down_the_packages(package, module)
        if chain is not None:
            return Reach("reached", chain, ())
        only = [
            (_display(package, importer), site.line, site.runs)
            for importer in package.naming(module)
            for site in package.imports(importer)
            if site.module == module or site.module.startswith(module + ".")
        ]
        if any(runs for _, _, runs in only):
            found = _backwards(package, module, package.index())
            if found.reached:
                return found
        return Reach("not-reached", (), tuple(dict.fromkeys(only)))
    except _Unknown as exc:
        return Reach("unknown", (), (), str(exc))


def _down_the_packages(package: _Package, module: str) -> tuple[tuple[str, int], ...] | None:
    """The packages above MODULE, top down, each imported at import time by one above it
    (``numba`` imports ``numba.np.ufunc``, which imports ``numba.np.ufunc._internal``): the
    common shape, read from those ``__init__`` files alone."""
    parts = module.split(".")
    reached = [package.top]
    chain: list[tuple[str, int]] = []
    for i in range(2, len(parts) + 1):
        child = ".".join(parts[:i])
        if child in reached:
            continue
        for parent in reached:
            found = package.path(parent)
            line = (
                _runs_at_import(package, parent, child) if found is not None and found[1] else None
            )
            if line is not None:
                if (parent, line) not in chain:
                    chain.append((parent, line))
                reached.append(child)
                break
        else:
            return None
    return tuple(chain)


def _backwards(package: _Package, module: str, index: dict[str, dict[str, int]]) -> Reach:
    top = package.top
    via: dict[str, tuple[str, int] | None] = {module: None}
    frontier = [module]
    while frontier:
        following: list[str] = []
        for target in frontier:
            for importer, column0_line in index.get(target, {}).items():
                if importer in via:
                    continue
                line = column0_line or _runs_at_import(package, importer, target)
                if line is None:
                    continue
                via[importer] = (target, line)
                if importer == top:
                    return Reach("reached", _chain(via, top), ())
                following.append(importer)
        if len(via) > MAX_MODULES:
            return Reach("unknown", (), (), f"more than {MAX_MODULES} importing modules")
        frontier = following
    return Reach("not-reached", (), ())


MAX_MODULES = 2000
"""The most importing modules one reachability question follows before it says "unknown"."""


class _Unknown(Exception):
    pass


def _runs_at_import(package: _Package, importer: str, target: str) -> int | None:
    """The line of IMPORTER's first statement importing TARGET (or a module inside it) that
    runs at import; None if none does."""
    for found in package.imports(importer):
        if found.runs and (found.module == target or found.module.startswith(target + ".")):
            return found.line
    return None


def _chain(via: dict[str, tuple[str, int] | None], top: str) -> tuple[tuple[str, int], ...]:
    """(importer, line) pairs from the top down to the module the search started from."""
    chain = []
    current: str | None = top
    while current is not None:
        step = via.get(current)
        if step is None:
            break
        chain.append((current, step[1]))
        current = step[0]
    return tuple(chain)


def _display(package: _Package, module: str) -> str:
    found = package.path(module)
    return os.path.relpath(found[0], package.site) if found else module


@dataclass(frozen=True, slots=True)
class FirstImport:
    """Another top-level package imported before a module, and the statement that does it."""

    package: str  # "torch"
    file: str  # relative to the site dir: "sgl_kernel/__init__.py"
    line: int


MAX_FOLLOWED = 200
"""The most modules of a package followed to collect what it imports before a module."""


def imported_before(
    site: str, module: str, wanted: Collection[str] | None = None
) -> tuple[FirstImport, ...]:
    """Top-level packages other than MODULE's own that are imported before MODULE runs.

    Python runs every package above MODULE first (``import a.b.c`` runs ``a/__init__.py``
    and ``a/b/__init__.py``). In each, the statements that run at import before the one
    that imports the next step down (all of them when none does: MODULE is then imported
    later, by a function or by the user) import other packages; so do the package's own
    modules those statements import, followed in turn. ``import torch`` there means torch's
    libraries are in the process when MODULE is loaded. Read statically, never run.
    With WANTED, only those packages are looked for, and the search stops once all are found.
    """
    parts = module.split(".")
    top = parts[0]
    package = _Package(site, top)
    found: dict[str, FirstImport] = {}
    followed: set[str] = set()

    def done() -> bool:
        return wanted is not None and all(w in found for w in wanted)

    def follow(name: str, limit: int | None) -> None:
        if name in followed or len(followed) >= MAX_FOLLOWED or done():
            return
        followed.add(name)
        where = package.path(name)
        if where is None:
            return
        for site_ in package.imports(name):
            if not site_.runs or (limit is not None and site_.line >= limit):
                continue
            head = site_.module.split(".")[0]
            if head != top:
                if wanted is None or head in wanted:
                    rel = os.path.relpath(where[0], site)
                    found.setdefault(head, FirstImport(head, rel, site_.line))
            elif site_.module != module and not module.startswith(site_.module + "."):
                follow(_module_of(package, site_.module), None)

    for i in range(1, len(parts)):
        parent = ".".join(parts[:i])
        below = ".".join(parts[: i + 1])
        lines = [s.line for s in package.imports(parent) if s.runs and _leads_to(s.module, below)]
        follow(parent, min(lines) if lines else None)
    return tuple(found.values())


def _leads_to(imported: str, step: str) -> bool:
    return imported == step or imported.startswith(step + ".")


def _module_of(package: _Package, name: str) -> str:
    """NAME if it is a module of the package, else the module it names a member of
    (``from pkg.utils import helper`` imports ``pkg.utils``)."""
    while "." in name and package.path(name) is None:
        name = name.rsplit(".", 1)[0]
    return name


@dataclass(frozen=True, slots=True)
class LoadByPath:
    """A call that names a library of the package, run before the import of a module."""

    literal: str  # the string it passes: "libtorchaudio"
    file: str  # relative to the site dir: "torchaudio/_extension/__init__.py"
    line: int


_SIMPLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign)


def loaded_first(site: str, module: str, names: Collection[str]) -> LoadByPath | None:
    """Where MODULE's package loads a library of its own by path before importing MODULE.

    torchaudio's ``_extension/__init__.py`` runs ``_load_lib("libtorchaudio")`` (a
    ``torch.ops.load_library`` of ``torchaudio/lib/libtorchaudio.so``) and then imports
    ``torchaudio.lib._torchaudio``, whose DT_NEEDED ``libtorchaudio.so`` is then satisfied
    by the soname already in the process. Every module of the package that imports MODULE
    at import time must do so after a call, run at import and earlier in the same file,
    with a string literal whose last path component is one of NAMES; the first such call
    is the evidence. None when a module imports it without one, or none imports it.
    """
    if "." not in module:
        return None
    package = _Package(site, module.split(".")[0])
    try:
        importers = package.naming(module)
    except _Unknown:
        return None
    first: LoadByPath | None = None
    for importer in importers:
        lines = [
            s.line for s in package.imports(importer) if s.runs and _leads_to(s.module, module)
        ]
        if not lines:
            continue
        call = _call_naming(package, importer, min(lines), names)
        if call is None:
            return None
        first = first or call
    return first


def _call_naming(
    package: _Package, importer: str, before: int, names: Collection[str]
) -> LoadByPath | None:
    """IMPORTER's first call before line BEFORE, run at import, passing a literal in NAMES."""
    data = package.source(importer)
    try:
        tree = ast.parse(data or b"")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node, runs in _walk(tree.body, True):
        if not runs or node.lineno >= before or not isinstance(node, _SIMPLE):
            continue
        for call in ast.walk(node):
            if not isinstance(call, ast.Call):
                continue
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                if (
                    isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str)
                    and arg.value.rsplit("/", 1)[-1] in names
                ):
                    return LoadByPath(arg.value, _display(package, importer), node.lineno)
    return None
