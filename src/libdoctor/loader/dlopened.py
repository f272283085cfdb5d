"""Libraries that libraries load by name at run time (``dlopen``), resolved from them.

``import torch`` works with cuDNN's ``libcudnn_graph.so.9`` gone: nothing has it as
DT_NEEDED. ``libcudnn.so.9`` dlopens it on first use, and the first convolution fails, or
finds the system's cuDNN instead (``CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH``). Such loads
are part of the graph: each is resolved as glibc's ``dlopen`` from that library resolves it
(``Loader.runtime_loads``: the library's DT_RPATH and its loaders', LD_LIBRARY_PATH, its
DT_RUNPATH, the cache, the default dirs), in the process its module's import builds.

Where the names come from:

- ``KNOWN``, a table of the well-known loaders, each checked against the real wheels
  (``verified_on``): cuDNN 9's dispatcher and its graph library (they load by name and find
  their siblings through DT_RPATH ``$ORIGIN``), nvrtc's builtins (by name, no RPATH of its
  own: found through the RPATH of whoever loaded nvrtc), cuBLASLt's nvrtc, NCCL's plugins,
  and the CUDA driver as the runtime loads it;
- the library's own read-only strings (``elf.rodata``): a whole string ``libX.so[.N]``
  counts only when the library's own distribution ships a file by that name (a plugin of
  its own wheel; ``libcudnn_graph.so`` completed to the ``.9`` the wheel ships). A name
  nothing installed ships is a feature the library may use, not a need.

How much each matters (``Need``): ``always``, the library cannot work without it, once its
distribution is of that layout (its RECORD lists any name of the loader's ``family``: a
cuDNN 9 wheel ships its sublibraries, cuDNN 8's or a build that links them in ships none);
``shipped``, as ``always`` when its distribution's RECORD lists it (a newer cuDNN's extra
sublibraries); ``optional``, a plugin: only one that was installed and is gone is a
problem; ``driver``, the NVIDIA driver: never installed by pip, never a problem of the env.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from libdoctor.environment.distributions import Distribution
from libdoctor.environment.model import Environment, is_inside
from libdoctor.loader.model import Closure, LoadedObject, Process, Resolution
from libdoctor.loader.search import Loader

__all__ = [
    "KNOWN",
    "KnownLoader",
    "Need",
    "RuntimeEdge",
    "RuntimeLoad",
    "expected",
    "runtime_edges",
]

Need = Literal["always", "shipped", "optional", "driver"]


@dataclass(frozen=True, slots=True)
class RuntimeLoad:
    """One name a library dlopens, and why libdoctor believes it does."""

    name: str
    need: Need
    what: str  # what stops working without it
    source: str  # "table: cuDNN 9" / "its read-only strings"
    family: tuple[str, ...] = ()  # every name the table gives this loader (see ``always``)


@dataclass(frozen=True, slots=True)
class KnownLoader:
    """A library (by soname) that loads others by name, as its releases do."""

    label: str
    soname: re.Pattern[str]
    loads: Callable[[re.Match[str], str | None], tuple[tuple[str, Need], ...]]
    what: str  # what stops working, "{name}" for the missing library
    verified_on: str


def _cudnn(match: re.Match[str], _: str | None) -> tuple[tuple[str, Need], ...]:
    major = match.group(1)
    always: tuple[tuple[str, Need], ...] = tuple(
        (f"libcudnn_{sub}.so.{major}", "always") for sub in ("graph", "ops", "cnn", "adv")
    )
    return (*always, (f"libcudnn_ext.so.{major}", "shipped"))


def _cudnn_graph(match: re.Match[str], _: str | None) -> tuple[tuple[str, Need], ...]:
    major = match.group(1)
    subs = ("engines_precompiled", "engines_runtime_compiled", "heuristic")
    always: tuple[tuple[str, Need], ...] = tuple(
        (f"libcudnn_{sub}.so.{major}", "always") for sub in subs
    )
    return (*always, (f"libcudnn_engines_tensor_ir.so.{major}", "shipped"))


def _nvrtc(match: re.Match[str], version: str | None) -> tuple[tuple[str, Need], ...]:
    """nvrtc N.M loads ``libnvrtc-builtins[.alt].so.N.M``; M is its distribution's minor."""
    alt, major = match.group(1) or "", match.group(2)
    parts = (version or "").split(".")
    if len(parts) < 2 or parts[0] != major or not parts[1].isdigit():
        return ()
    return ((f"libnvrtc-builtins{alt}.so.{major}.{parts[1]}", "always"),)


def _cublaslt(match: re.Match[str], _: str | None) -> tuple[tuple[str, Need], ...]:
    return ((f"libnvrtc.so.{match.group(1)}", "optional"),)


def _nccl(_match: re.Match[str], _: str | None) -> tuple[tuple[str, Need], ...]:
    plugins: tuple[tuple[str, Need], ...] = tuple(
        (f"libnccl-{kind}.so", "optional") for kind in ("net", "tuner", "profiler")
    )
    return (*plugins, ("libcuda.so.1", "driver"), ("libnvidia-ml.so.1", "driver"))


def _driver(_match: re.Match[str], _: str | None) -> tuple[tuple[str, Need], ...]:
    return (("libcuda.so.1", "driver"),)


KNOWN: tuple[KnownLoader, ...] = (
    KnownLoader(
        "cuDNN 9",
        re.compile(r"^libcudnn\.so\.(\d+)$"),
        _cudnn,
        "cuDNN fails at its first use ({name}: convolutions, RNNs, attention)",
        "nvidia-cudnn-cu12 9.10.2.21, nvidia-cudnn-cu13 9.24.0.43 (strings, DT_RPATH $ORIGIN)",
    ),
    KnownLoader(
        "cuDNN 9 graph",
        re.compile(r"^libcudnn_graph\.so\.(\d+)$"),
        _cudnn_graph,
        "cuDNN finds no engine ({name}): every cuDNN operation fails at its first use",
        "nvidia-cudnn-cu12 9.10.2.21, nvidia-cudnn-cu13 9.24.0.43",
    ),
    KnownLoader(
        "nvrtc",
        re.compile(r"^libnvrtc(\.alt)?\.so\.(\d+)$"),
        _nvrtc,
        "runtime compilation (nvrtcCompileProgram) fails with "
        "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE ({name})",
        "nvidia-cuda-nvrtc 13.0.88 (dlopen by name; no RPATH: found through its loader's)",
    ),
    KnownLoader(
        "cuBLASLt",
        re.compile(r"^libcublasLt\.so\.(\d+)$"),
        _cublaslt,
        "cuBLASLt's runtime-compiled kernels fail ({name})",
        "nvidia-cublas 13.1.1.3",
    ),
    KnownLoader(
        "NCCL",
        re.compile(r"^libnccl\.so\.(\d+)$"),
        _nccl,
        "NCCL runs without its plugin ({name})",
        "nvidia-nccl-cu13 2.30.7",
    ),
    KnownLoader(
        "CUDA runtime",
        re.compile(r"^libcudart\.so\.(\d+)$"),
        _driver,
        "CUDA calls fail: no driver ({name})",
        "nvidia-cuda-runtime 13.0.96",
    ),
)


@dataclass(frozen=True, slots=True)
class RuntimeEdge:
    """A library's ``dlopen(NAME)``, resolved in the process its module's import builds."""

    requester: str  # path of the library that loads
    load: RuntimeLoad
    module: str  # the extension module whose import loaded the requester
    closure: Closure  # what the dlopen loads (root_error: it fails)
    expected: bool  # the environment is meant to provide it (``expected``)

    @property
    def resolution(self) -> Resolution | None:
        return self.closure.resolutions[0] if self.closure.resolutions else None


def expected(env: Environment, requester: str, load: RuntimeLoad) -> bool:
    """Whether the environment is meant to provide LOAD's library: ``always`` when the
    REQUESTER's distribution is of its loader's layout (its RECORD lists a name of the
    ``family``), ``shipped`` when that RECORD lists the library itself; never otherwise."""
    need = load.need
    owners = env.owners(os.path.normpath(requester))
    if not owners or owners[0].record is None or need not in ("always", "shipped"):
        return False
    listed = {os.path.basename(e.path) for e in owners[0].record.entries}
    names = load.family if need == "always" else (load.name,)
    return any(name in listed for name in names)


def _wanted(
    env: Environment,
    strings: Callable[[str], tuple[str, ...] | None],
    scan: Callable[[Distribution], frozenset[str] | None],
) -> Callable[[LoadedObject], list[RuntimeLoad]]:
    """The runtime loads of one loaded object: the table's, then its strings' (for objects
    inside the environment whose distribution may ship a plugin of its own)."""
    prefix = env.target.prefix

    def wanted(obj: LoadedObject) -> list[RuntimeLoad]:
        path = os.path.normpath(obj.path)
        if not is_inside(path, prefix):
            return []
        owners = env.owners(path)
        owner = owners[0] if owners else None
        name = obj.soname or os.path.basename(path)
        loads: dict[str, RuntimeLoad] = {}
        for known in KNOWN:
            match = known.soname.match(name)
            if match is not None:
                listed = known.loads(match, owner.version if owner else None)
                family = tuple(lib for lib, _ in listed)
                for lib, need in listed:
                    text = known.what.format(name=lib)
                    source = f"table: {known.label}"
                    loads.setdefault(lib, RuntimeLoad(lib, need, text, source, family))
        shipped = scan(owner) if owner is not None else None
        if owner is not None and shipped:
            for found in strings(path) or ():
                full = _complete(found, shipped)
                if full is not None and full != name and full not in loads:
                    what = f"the feature of {owner.display} that loads {full} fails at first use"
                    loads[full] = RuntimeLoad(full, "optional", what, "its read-only strings")
        return list(loads.values())

    return wanted


def _shipped_names(natives: Sequence[str], env: Environment) -> dict[str, frozenset[str]]:
    """distribution (metadata dir) -> the file names of the shared objects it ships."""
    names: dict[str, set[str]] = {}
    for path in natives:
        for claim in env.claims.get(path, ()):
            names.setdefault(claim.dist.metadata_dir, set()).add(os.path.basename(path))
    return {key: frozenset(value) for key, value in names.items()}


def _complete(name: str, shipped: frozenset[str]) -> str | None:
    """NAME as its distribution ships it: itself, or with the version the wheel's file has
    (``libcudnn_graph.so`` -> ``libcudnn_graph.so.9``); None when it ships neither."""
    if name in shipped:
        return name
    versioned = sorted(
        s
        for s in shipped
        if s.startswith(name + ".") and s[len(name) + 1 : len(name) + 2].isdigit()
    )
    return versioned[0] if len(versioned) == 1 else None


def runtime_edges(
    env: Environment,
    loader: Loader,
    process: Process,
    modules: Sequence[Closure],
    natives: Sequence[str],
    strings: Callable[[str], tuple[str, ...] | None],
) -> tuple[RuntimeEdge, ...]:
    """Every runtime load of the libraries the extension modules load, each requester
    resolved once: in the first module (by path) whose import loads it."""
    shipped = _shipped_names(natives, env)
    scanned = _scanned_distributions(env, natives, modules)
    wanted = _wanted(
        env, strings, lambda d: shipped.get(d.metadata_dir) if d.metadata_dir in scanned else None
    )
    memo: dict[str, list[RuntimeLoad]] = {}

    def loads_of(obj: LoadedObject) -> list[RuntimeLoad]:
        if obj.path not in memo:
            memo[obj.path] = wanted(obj)
        return memo[obj.path]

    done: set[str] = set()

    def ask(obj: LoadedObject) -> list[str]:
        if obj.path in done:
            return []
        done.add(obj.path)
        return [load.name for load in loads_of(obj)]

    edges: list[RuntimeEdge] = []
    for closure in modules:
        if closure.root_error or not any(
            o.path not in done and loads_of(o) for o in closure.loaded
        ):
            continue
        for result in loader.runtime_loads(process, closure.root, ask):
            first = result.resolutions[0] if result.resolutions else None
            requester = first.requester if first is not None else None
            name = first.name if first is not None else result.root
            load = next((x for x in memo.get(requester or "", ()) if x.name == name), None)
            if requester is not None and load is not None:
                meant = expected(env, requester, load)
                edges.append(RuntimeEdge(requester, load, closure.root, result, meant))
    return tuple(edges)


def _scanned_distributions(
    env: Environment, natives: Sequence[str], modules: Iterable[Closure]
) -> frozenset[str]:
    """Distributions whose libraries' strings are worth reading: those that ship a shared
    library (NATIVES: the claimed ones) that no extension module's import loads."""
    loaded = {os.path.normpath(o.path) for c in modules for o in c.loaded}
    out: set[str] = set()
    for path in natives:
        if path not in loaded and os.path.basename(path).startswith("lib"):
            out.update(c.dist.metadata_dir for c in env.claims.get(path, ()))
    return frozenset(out)
