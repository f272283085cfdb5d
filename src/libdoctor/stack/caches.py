"""Compile caches outside the environment: where each lives, what it says it was built for.

GPU stacks keep compiled code in caches that outlive the torch, triton or CUDA they were built
by. ``KINDS`` is the table, one entry per kind: which variables move its root (read from a
mapping, never ``os.environ``), how its directory is laid out (which children are entries,
which are not the tool's and are only reported), and where an entry records the versions it
was built for. What each records, as the tools write it:

- torch extensions (``torch.utils.cpp_extension``): ``<root>/py311_cu130/<ext>/`` under the
  default root; the directory name is the only record (Python, and CUDA as ``torch.version.cuda``
  without the dot, ``cpu`` without CUDA). Under ``$TORCH_EXTENSIONS_DIR`` the ``py*_cu*`` level
  is not made and an extension records nothing libdoctor reads. ``<ext>/lock`` is torch's
  build baton: it exists while a build runs.
- triton: ``<root>/<key>/`` (base32 of a sha256; hex in old releases) holding the IR stages,
  the binary, ``__grp__<kernel>.json`` (the group's file list) and ``<kernel>.json``, the
  kernel's metadata. Releases from 3.2 on write ``triton_version`` into it; older ones, and
  launcher entries (``cuda_utils.so``, ``__triton_launcher.so``) record no version.
- torch inductor (``$TORCHINDUCTOR_CACHE_DIR``, else ``<tmp>/torchinductor_<user>``): its
  ``triton/<device>/<key>/`` entries are triton's (above); ``py311_cu130/`` (the C++ wrapper
  builds) is named like torch extensions; ``fxgraph/``, ``aotautograd/`` and the code dirs are
  keyed by hashes of torch's sources: no version is readable there.
- flashinfer: ``$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/<version>/<archs>/`` (releases
  before 0.3 have no ``<version>`` level: ``<archs>/`` records nothing).
- vllm (``$VLLM_CACHE_ROOT``): ``torch_compile_cache/<hash>/``: a hash, no readable version.
- CUDA's JIT cache (``$CUDA_CACHE_PATH``, ``~/.nv/ComputeCache``): the driver's own format
  (``index`` and hashed dirs); the driver invalidates it itself. No version is read.
- bytecode: ``__pycache__/<module>.<tag>.pyc`` in the environment's own site dirs; a tag other
  than the interpreter's (``cpython-311``) is never read by it.

Where an entry records nothing, it is reported (size, files, age) without a verdict.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from libdoctor.environment.target import Target

if TYPE_CHECKING:  # a reused check's cache look needs neither (analysis.reuse)
    from libdoctor.environment.distributions import Distribution

__all__ = [
    "KINDS",
    "CacheKind",
    "CacheScan",
    "Entry",
    "Recorded",
    "Root",
    "Versions",
    "cache_roots",
    "kind_named",
    "quick_stale",
    "read_env_file",
    "scan_caches",
    "size_text",
]

TOOL_DISTRIBUTIONS: Mapping[str, frozenset[str]] = {
    "torch": frozenset({"torch"}),
    "triton": frozenset({"triton", "pytorch-triton", "pytorch-triton-rocm", "triton-rocm"}),
    "flashinfer": frozenset({"flashinfer-python", "flashinfer"}),
    "vllm": frozenset({"vllm"}),
}
LABELS = {"python": "Python", "cuda": "CUDA", "cache_tag": "bytecode"}

_PY_CU = re.compile(r"py(\d)(\d+)_(cu\d+|cpu)")
_TRITON_KEY = re.compile(r"[A-Z2-7]{52}|[0-9a-f]{32}|[0-9a-f]{64}")
_LOCAL = re.compile(r"\+.*$")
_VERSION_DIR = re.compile(r"\d+\.\d+(\.\d+)*([a-z]+\d*)?(\.(post|dev)\d+)?")
_ARCH_DIR = re.compile(r"\d+(_\d+)*|noarch")
_PYC = re.compile(r"\.([a-z]+-\d+)(\.opt-\d)?\.pyc$")
_INDUCTOR_KNOWN = frozenset(
    {"fxgraph", "aotautograd", "locks", "cache", "aotinductor", "precompile", "dynamo", "pgo"}
)
_VLLM_KNOWN = frozenset({"modelinfos", "xla_cache", "assets"})
_NINJA_PYTHON = re.compile(rb"include/python(\d)\.(\d+)")
_TRITON_VERSION = re.compile(rb'"triton_version":\s*"([^"\\]{1,64})"')


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class Versions:
    """What the target has now, read statically: the versions its caches are judged by."""

    python: str | None  # "3.11"
    cache_tag: str | None  # "cpython-311"
    cuda: str | None  # torch's CUDA spelt as torch_extensions spells it: "cu130", "cpu"
    tools: Mapping[str, str]  # tool -> public version: "torch" -> "2.14.1", "triton" -> "3.5.0"

    @classmethod
    def of(cls, target: Target, dists: Iterable[Distribution]) -> Versions:
        tools: dict[str, str] = {}
        cuda = None
        for dist in dists:
            for tool, names in TOOL_DISTRIBUTIONS.items():
                if dist.key in names and tool not in tools:
                    tools[tool] = _public(dist.version)
                    if tool == "torch":
                        cuda = _torch_cuda(dist)
        major_minor = target.python_version
        python = f"{major_minor[0]}.{major_minor[1]}" if major_minor else None
        tag = None
        if major_minor and not any("pypy" in s.path for s in target.site_dirs):
            tag = f"cpython-{major_minor[0]}{major_minor[1]}"
        return cls(python, tag, cuda, tools)

    def value(self, what: str) -> str | None:
        if what == "python":
            return self.python
        if what == "cache_tag":
            return self.cache_tag
        if what == "cuda":
            return self.cuda
        return self.tools.get(what)

    def describe(self) -> str:
        parts = [f"{tool} {version}" for tool, version in self.tools.items()]
        if self.cuda:
            parts.append(f"CUDA {cuda_display(self.cuda)}" if self.cuda != "cpu" else "CPU torch")
        if self.cache_tag:
            parts.append(self.cache_tag)
        return ", ".join(parts) or "no compile tool"


def _public(version: str) -> str:
    return _LOCAL.sub("", version)


def _torch_cuda(dist: Distribution) -> str | None:
    """torch/version.py's ``cuda`` when the file is there, else the local label (+cu130)."""
    from libdoctor.stack.frameworks import parse_torch_version_py, read_file

    data = read_file(os.path.join(dist.base_dir, "torch", "version.py"))
    if data is not None:
        values, problem = parse_torch_version_py(data)
        if problem is None:
            cuda = values.get("cuda")
            return "cpu" if cuda is None else "cu" + cuda.replace(".", "")
    local = dist.version.partition("+")[2]
    if re.fullmatch(r"cu\d+|cpu", local):
        return local
    return None


def size_text(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def cuda_display(encoded: str) -> str:
    """``cu130`` -> ``13.0`` (torch drops the dot; every CUDA minor so far is one digit)."""
    digits = encoded[2:]
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else encoded


@dataclass(frozen=True, slots=True)
class Recorded:
    """One version an entry says it was built for, and where it says it."""

    what: str  # "python", "cuda", "cache_tag", or a tool: "triton", "flashinfer"
    value: str
    where: str  # "directory name py311_cu130", "triton_version in add_kernel.json"

    @property
    def display(self) -> str:
        value = (
            cuda_display(self.value)
            if self.what == "cuda" and self.value != "cpu"
            else (self.value)
        )
        if self.what == "cuda" and self.value == "cpu":
            return "no CUDA (cpu)"
        return f"{LABELS.get(self.what, self.what)} {value}"


@dataclass(frozen=True, slots=True)
class Entry:
    name: str  # relative to the root: "py311_cu130/my_ext", "triton/0/KEY", "cpython-310"
    path: str  # the entry's directory or file (for bytecode: the site dir)
    size: int
    files: int
    newest: float  # newest mtime inside, seconds since the epoch
    recorded: tuple[Recorded, ...] = ()
    stale: tuple[str, ...] = ()  # why it is not for this environment's versions
    members: tuple[str, ...] = ()  # the files it is made of, when not one directory or file


@dataclass(frozen=True, slots=True)
class CacheScan:
    """One cache root as it is now: its entries, judged against the target's versions."""

    kind: str
    root: str
    source: str  # which variable chose the root, or "default"
    used: bool  # the target has the tool that writes it
    exists: bool
    records: str  # where this kind records versions, in words
    entries: tuple[Entry, ...] = ()
    unknown: tuple[Entry, ...] = ()  # not the tool's layout: reported, never deleted

    @property
    def stale(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.stale)

    @property
    def size(self) -> int:
        return sum(e.size for e in self.entries) + sum(e.size for e in self.unknown)


# --------------------------------------------------------------------------- the table

Reader = Callable[[str, str], tuple[Recorded, ...]]
"""(entry path, entry name) -> what the entry records."""


@dataclass(frozen=True, slots=True)
class Found:
    """An entry a layout recognised (or not), before it is measured."""

    name: str
    path: str
    reader: Reader | None = None  # None: this entry records no version
    cheap: bool = False  # the reader needs the name only (no file read)
    known: bool = True
    members: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Root:
    path: str
    source: str


@dataclass(frozen=True, slots=True)
class CacheKind:
    """One kind of compile cache. Adding one is one entry in ``KINDS``."""

    name: str
    tool: str | None  # whose installed version its entries are judged by (None: any env)
    variables: tuple[str, ...]  # the variables that move its root, as the tool reads them
    roots: Callable[[Mapping[str, str], Target], list[Root]]
    layout: Callable[[str], Iterator[Found]]  # a root -> its entries
    records: str
    lock: str | None = None  # a file inside an entry that exists while the tool builds it
    in_check: bool = True  # ``check`` looks at it (bounded); bytecode is left to ``caches``


def _home(environ: Mapping[str, str]) -> str:
    return environ.get("HOME") or os.path.expanduser("~")


def _xdg_cache(environ: Mapping[str, str]) -> str:
    return environ.get("XDG_CACHE_HOME") or os.path.join(_home(environ), ".cache")


def _tempdir(environ: Mapping[str, str]) -> str:
    """``tempfile.gettempdir()``'s choice: $TMPDIR, $TEMP, $TMP (an existing dir), else /tmp."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        value = environ.get(name)
        if value and os.path.isdir(value):
            return value
    return "/tmp"


def _user(environ: Mapping[str, str]) -> str:
    """``getpass.getuser()``, sanitised as inductor does."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if environ.get(name):
            user = environ[name]
            break
    else:
        import pwd

        user = pwd.getpwuid(os.getuid()).pw_name
    return re.sub(r'[\\/:*?"<>|]', "_", user)


def _variable_or(
    environ: Mapping[str, str], name: str, default: Callable[[], str], how: str
) -> list[Root]:
    value = environ.get(name, "").strip()
    if value:
        return [Root(os.path.abspath(os.path.expanduser(value)), f"${name}")]
    return [Root(os.path.abspath(default()), how)]


def _triton_roots(environ: Mapping[str, str], target: Target) -> list[Root]:
    home = environ.get("TRITON_HOME") or _home(environ)
    how = "default ($TRITON_HOME/.triton/cache)" if environ.get("TRITON_HOME") else "default"
    return _variable_or(
        environ, "TRITON_CACHE_DIR", lambda: os.path.join(home, ".triton", "cache"), how
    )


def _inductor_roots(environ: Mapping[str, str], target: Target) -> list[Root]:
    return _variable_or(
        environ,
        "TORCHINDUCTOR_CACHE_DIR",
        lambda: os.path.join(_tempdir(environ), f"torchinductor_{_user(environ)}"),
        "default",
    )


def _extension_roots(environ: Mapping[str, str], target: Target) -> list[Root]:
    return _variable_or(
        environ,
        "TORCH_EXTENSIONS_DIR",
        lambda: os.path.join(_xdg_cache(environ), "torch_extensions"),
        "default",
    )


def _flashinfer_roots(environ: Mapping[str, str], target: Target) -> list[Root]:
    base = environ.get("FLASHINFER_WORKSPACE_BASE", "").strip()
    how = "$FLASHINFER_WORKSPACE_BASE" if base else "default"
    return [
        Root(os.path.join(os.path.abspath(base or _home(environ)), ".cache", "flashinfer"), how)
    ]


def _vllm_roots(environ: Mapping[str, str], target: Target) -> list[Root]:
    return _variable_or(
        environ, "VLLM_CACHE_ROOT", lambda: os.path.join(_xdg_cache(environ), "vllm"), "default"
    )


def _cuda_roots(environ: Mapping[str, str], target: Target) -> list[Root]:
    return _variable_or(
        environ,
        "CUDA_CACHE_PATH",
        lambda: os.path.join(_home(environ), ".nv", "ComputeCache"),
        "default",
    )


def _bytecode_roots(environ: Mapping[str, str], target: Target) -> list[Root]:
    return [Root(s.path, "the environment's site dir") for s in target.site_dirs if not s.inherited]


def _children(root: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(root) as entries:
            return sorted(entries, key=lambda e: e.name)
    except OSError:
        return []


def _is_dir(item: os.DirEntry[str]) -> bool:
    try:
        return item.is_dir(follow_symlinks=False)
    except OSError:
        return False


# --------------------------------------------------------------------------- readers


def _read_py_cu(path: str, name: str) -> tuple[Recorded, ...]:
    """``py311_cu130`` in the entry's own name or its parent's: Python and CUDA."""
    match = next(filter(None, (_PY_CU.fullmatch(p) for p in name.split("/"))), None)
    if match is None:
        return ()
    where = f"directory name {match.group(0)}"
    return (
        Recorded("python", f"{match.group(1)}.{match.group(2)}", where),
        Recorded("cuda", match.group(3), where),
    )


def _read_ninja(path: str, name: str) -> tuple[Recorded, ...]:
    """An extension under $TORCH_EXTENSIONS_DIR: the Python headers build.ninja compiles with."""
    from libdoctor.stack.frameworks import read_file

    data = read_file(os.path.join(path, "build.ninja"))
    match = _NINJA_PYTHON.search(data or b"")
    if match is None:
        return ()
    version = f"{match.group(1).decode()}.{match.group(2).decode()}"
    return (Recorded("python", version, "build.ninja (include/python" + version + ")"),)


def _read_triton(path: str, name: str) -> tuple[Recorded, ...]:
    """``triton_version`` of the kernel's metadata JSON (not the ``__grp__`` file list).

    Read by a pattern, not parsed: a kernel's metadata is a flat JSON object whose keys are
    triton's options, and a cache holds thousands of them."""
    from libdoctor.stack.frameworks import read_file

    try:
        names = sorted(os.listdir(path))
    except OSError:
        return ()
    for item in names:
        if not item.endswith(".json") or item.startswith("__grp__"):
            continue
        match = _TRITON_VERSION.search(read_file(os.path.join(path, item)) or b"")
        if match is not None:
            version = _public(match.group(1).decode("utf-8", "replace"))
            return (Recorded("triton", version, f"triton_version in {item}"),)
    return ()


def _read_flashinfer(path: str, name: str) -> tuple[Recorded, ...]:
    return (Recorded("flashinfer", _public(name), f"directory name {name}"),)


# --------------------------------------------------------------------------- layouts


def _triton_layout(root: str, prefix: str = "") -> Iterator[Found]:
    for item in _children(root):
        if _is_dir(item) and _TRITON_KEY.fullmatch(item.name):
            yield Found(prefix + item.name, item.path, _read_triton)
        else:
            yield Found(prefix + item.name, item.path, known=False)


def _extension_layout(root: str) -> Iterator[Found]:
    for item in _children(root):
        if _is_dir(item) and _PY_CU.fullmatch(item.name):
            for ext in _children(item.path):
                name = f"{item.name}/{ext.name}"
                yield Found(name, ext.path, _read_py_cu, cheap=True, known=_is_dir(ext))
        elif _is_dir(item) and any(
            os.path.lexists(os.path.join(item.path, n)) for n in ("build.ninja", "lock")
        ):
            yield Found(item.name, item.path, _read_ninja)
        else:
            yield Found(item.name, item.path, known=False)


def _inductor_layout(root: str) -> Iterator[Found]:
    for item in _children(root):
        if item.name == "triton" and _is_dir(item):
            for device in _children(item.path):
                if _is_dir(device) and device.name.isdigit():
                    yield from _triton_layout(device.path, f"triton/{device.name}/")
                else:
                    yield Found(f"triton/{device.name}", device.path, known=False)
        elif _is_dir(item) and _PY_CU.fullmatch(item.name):
            yield Found(item.name, item.path, _read_py_cu, cheap=True)
        elif _is_dir(item) and (item.name in _INDUCTOR_KNOWN or len(item.name) == 2):
            yield Found(item.name, item.path)
        else:
            yield Found(item.name, item.path, known=False)


def _flashinfer_layout(root: str) -> Iterator[Found]:
    for item in _children(root):
        if not _is_dir(item):
            yield Found(item.name, item.path, known=False)
        elif _VERSION_DIR.fullmatch(item.name):
            yield Found(item.name, item.path, _read_flashinfer, cheap=True)
        elif _ARCH_DIR.fullmatch(item.name) or item.name == "cubins":
            yield Found(item.name, item.path)
        else:
            yield Found(item.name, item.path, known=False)


def _vllm_layout(root: str) -> Iterator[Found]:
    for item in _children(root):
        if item.name == "torch_compile_cache" and _is_dir(item):
            for entry in _children(item.path):
                yield Found(f"{item.name}/{entry.name}", entry.path, known=_is_dir(entry))
        elif item.name in _VLLM_KNOWN:
            yield Found(item.name, item.path)
        else:
            yield Found(item.name, item.path, known=False)


def _cuda_layout(root: str) -> Iterator[Found]:
    for item in _children(root):
        hashed = _is_dir(item) and re.fullmatch(r"[0-9a-f]{1,2}", item.name) is not None
        yield Found(item.name, item.path, known=hashed or item.name == "index")


def _bytecode_layout(root: str) -> Iterator[Found]:
    """One entry per bytecode tag found in the site dir's ``__pycache__`` dirs."""
    by_tag: dict[str, list[str]] = {}
    for directory, dirs, files in os.walk(root):
        if os.path.basename(directory) != "__pycache__":
            continue
        dirs.clear()
        for name in files:
            match = _PYC.search(name)
            if match:
                by_tag.setdefault(match.group(1), []).append(os.path.join(directory, name))
    for tag, members in sorted(by_tag.items()):
        yield Found(tag, root, _read_tag, cheap=True, members=tuple(members))


def _read_tag(path: str, name: str) -> tuple[Recorded, ...]:
    return (Recorded("cache_tag", name, f"file names *.{name}.pyc"),)


KINDS: tuple[CacheKind, ...] = (
    CacheKind(
        "torch-extensions",
        "torch",
        ("TORCH_EXTENSIONS_DIR", "XDG_CACHE_HOME", "HOME"),
        _extension_roots,
        _extension_layout,
        "the directory name py<XY>_cu<CUDA> (default root only); build.ninja's Python headers",
        lock="lock",
    ),
    CacheKind(
        "torch-inductor",
        "torch",
        ("TORCHINDUCTOR_CACHE_DIR", "TMPDIR", "TEMP", "TMP", "LOGNAME", "USER"),
        _inductor_roots,
        _inductor_layout,
        "triton/<device>/<key>/<kernel>.json: triton_version; py<XY>_cu<CUDA>/: the name; "
        "fxgraph/, aotautograd/ and code dirs: hashes only",
    ),
    CacheKind(
        "triton",
        "triton",
        ("TRITON_CACHE_DIR", "TRITON_HOME", "HOME"),
        _triton_roots,
        _triton_layout,
        "<key>/<kernel>.json: triton_version (triton 3.2 on); launcher entries: nothing",
    ),
    CacheKind(
        "flashinfer",
        "flashinfer",
        ("FLASHINFER_WORKSPACE_BASE", "HOME"),
        _flashinfer_roots,
        _flashinfer_layout,
        "the directory name <version>/ (flashinfer 0.3 on); <archs>/ and cubins/: nothing",
    ),
    CacheKind(
        "vllm",
        "vllm",
        ("VLLM_CACHE_ROOT", "XDG_CACHE_HOME", "HOME"),
        _vllm_roots,
        _vllm_layout,
        "nothing readable: torch_compile_cache/<hash>/ is keyed by a hash",
    ),
    CacheKind(
        "cuda-jit",
        None,
        ("CUDA_CACHE_PATH", "HOME"),
        _cuda_roots,
        _cuda_layout,
        "nothing readable: the driver's own index; the driver invalidates it itself",
    ),
    CacheKind(
        "bytecode",
        None,
        (),
        _bytecode_roots,
        _bytecode_layout,
        "the file name's tag: <module>.cpython-<XY>.pyc",
        in_check=False,
    ),
)


def kind_named(name: str) -> CacheKind | None:
    return next((k for k in KINDS if k.name == name), None)


# --------------------------------------------------------------------------- reading


def read_env_file(text: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (``export`` and quotes allowed, ``#`` comments): the variables a
    service or job sets for the tools, read instead of the caller's."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        key, sep, value = line.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key.strip()):
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def cache_roots(
    environ: Mapping[str, str], target: Target, versions: Versions
) -> list[tuple[CacheKind, Root, bool]]:
    """Every (kind, root, used) the target's tools would write to, each root once."""
    out = []
    seen: set[tuple[str, str]] = set()
    for kind in KINDS:
        used = kind.tool is None or kind.tool in versions.tools
        for root in kind.roots(environ, target):
            real = os.path.realpath(root.path)
            if (kind.name, real) in seen:
                continue
            seen.add((kind.name, real))
            out.append((kind, root, used))
    return out


def _measure(found: Found) -> tuple[int, int, float]:
    """(bytes, files, newest mtime) of an entry: its members, its tree, or the file itself."""
    if found.members:
        return _measure_paths(found.members)
    try:
        st = os.lstat(found.path)
    except OSError:
        return 0, 0, 0.0
    if not stat.S_ISDIR(st.st_mode):  # a file, or a symlink (never followed)
        return st.st_size, 1, st.st_mtime
    size, files, newest = 0, 0, st.st_mtime
    stack = [found.path]
    while stack:
        try:
            with os.scandir(stack.pop()) as listing:
                items = list(listing)
        except OSError:
            continue
        for item in items:
            try:
                info = item.stat(follow_symlinks=False)
            except OSError:
                continue
            newest = max(newest, info.st_mtime)
            if _is_dir(item):
                stack.append(item.path)
            else:
                size += info.st_size
                files += 1
    return size, files, newest


def _measure_paths(paths: Iterable[str]) -> tuple[int, int, float]:
    size, files, newest = 0, 0, 0.0
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        size += st.st_size
        files += 1
        newest = max(newest, st.st_mtime)
    return size, files, newest


def judge(recorded: Iterable[Recorded], versions: Versions) -> tuple[str, ...]:
    """Why an entry is not for the target's versions: each recorded value the target has
    another of. A value the target does not know (no torch, unreadable) decides nothing."""
    why = []
    for item in recorded:
        now = versions.value(item.what)
        if now is not None and now != item.value:
            have = Recorded(item.what, now, "").display
            why.append(f"built for {item.display}; this environment has {have}")
    return tuple(why)


def _entry(found: Found, versions: Versions, used: bool) -> Entry:
    size, files, newest = _measure(found)
    recorded = found.reader(found.path, found.name) if found.reader else ()
    stale = judge(recorded, versions) if used else ()
    return Entry(found.name, found.path, size, files, newest, recorded, stale, found.members)


def scan_caches(
    environ: Mapping[str, str],
    target: Target,
    versions: Versions,
    kinds: Iterable[str] | None = None,
) -> list[CacheScan]:
    """Every cache root of the target's tools, every entry measured and judged."""
    wanted = None if kinds is None else set(kinds)
    scans = []
    for kind, root, used in cache_roots(environ, target, versions):
        if wanted is not None and kind.name not in wanted:
            continue
        if not used and kind.tool is not None:
            continue
        exists = os.path.isdir(root.path)
        entries: list[Entry] = []
        unknown: list[Entry] = []
        for found in kind.layout(root.path) if exists else ():
            (entries if found.known else unknown).append(_entry(found, versions, used))
        scans.append(
            CacheScan(
                kind.name,
                root.path,
                root.source,
                used,
                exists,
                kind.records,
                tuple(entries),
                tuple(unknown),
            )
        )
    return scans


# --------------------------------------------------------------------------- check's look

QUICK_ENTRIES = 2000  # entries looked at per root, at most
QUICK_READS = 16  # entry files read per root, at most (triton's metadata)


@dataclass(frozen=True, slots=True)
class QuickHit:
    """What ``check`` saw of one root: stale entries among those it looked at."""

    kind: str
    root: str
    stale: int
    looked_at: int
    complete: bool  # every entry of the root was looked at
    reasons: tuple[str, ...]  # what the stale entries were built for: "triton 3.4.0"


def quick_stale(environ: Mapping[str, str], target: Target, versions: Versions) -> list[QuickHit]:
    """Bounded: per root, the names of at most QUICK_ENTRIES entries (their version is in
    the name for torch extensions, inductor's C++ builds and flashinfer) and at most
    QUICK_READS metadata files (triton). No size is measured."""
    hits = []
    for kind, root, used in cache_roots(environ, target, versions):
        if not (used and kind.tool is not None and kind.in_check):
            continue
        stale, looked, reads = 0, 0, 0
        reasons: set[str] = set()
        complete = True
        for found in kind.layout(root.path) if os.path.isdir(root.path) else ():
            if looked >= QUICK_ENTRIES:
                complete = False
                break
            looked += 1
            if found.reader is None or not found.known:
                continue
            if not found.cheap:
                if reads >= QUICK_READS:
                    complete = False
                    continue
                reads += 1
            why = judge(found.reader(found.path, found.name), versions)
            if why:
                stale += 1
                reasons.update(w.partition(";")[0].removeprefix("built for ") for w in why)
        if stale:
            hits.append(
                QuickHit(kind.name, root.path, stale, looked, complete, tuple(sorted(reasons)))
            )
    return hits
