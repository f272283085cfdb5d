"""torch's CUDA preload (LOADER_SPEC §4) as data, read from the installed text, replayed.

Before ``from torch._C import *``, every torch from 2.4 on runs ``_load_global_deps``:

1. ``ctypes.CDLL(torch/lib/libtorch_global_deps.so, RTLD_GLOBAL)``;
2. if that worked and a path containing the trigger (``libcudart.so``; 2.6-2.8:
   ``nvidia/cuda_runtime/lib/libcudart.so``) is now in ``/proc/self/maps``, preloads a list
   of (folder, glob): 2.6-2.9 a short fixed list (nvrtc, nvJitLink), 2.10 on the whole
   ``cuda_libs`` list and the optional libraries. For each, the first ``sys.path`` entry ``p``
   with any hit among the directory templates (2.9 on: ``p/nvidia/<folder>/lib``,
   ``p/nvidia/cu<major>/lib``, ``p/<folder>/lib``) is taken and ``ctypes.CDLL(hits[0])``
   runs. One ``try`` wraps the loop and swallows the first exception, which ends it; a
   library no directory has is such an exception up to 2.13 and skipped from 2.14 on.
   2.4 and 2.5 have no step 2;
3. if step 1 raised an OSError naming a library of ``cuda_libs``, preloads all of them with
   misses fatal (ValueError), then the optional ones, then retries step 1; any other OSError
   is re-raised.

How the versions differ (each checked against the wheels on PyPI, see ``verified_on``):

- 2.4-2.6 search only entries that have a ``nvidia/`` directory; 2.4-2.5 only
  ``p/nvidia/<folder>/lib``, 2.6 ``p/<folder>/lib`` when that has no hit. 2.7 on join the
  hits of every template (``_get_cuda_dep_paths``), 2.9 on with ``nvidia/cu<major>/lib``.
- ``cuda_libs`` is a dict inside ``_load_global_deps`` up to 2.9 (2.7-2.8 add cuFile to it
  for CUDA 12 and later), a list in ``_preload_cuda_deps`` from 2.10 on; nvToolsExt is a
  required entry up to 2.7 and an optional preload after the list from 2.9 on.
- 2.4's split-build branch (global deps from a ``libtorchsplit`` package, which PyPI does not
  have) is not followed.

``PreloadModel`` holds the flow of one torch version range as data. ``choose_model`` reads the
installed ``torch/__init__.py`` with ``ast`` (never runs it): the statements the flow hinges on,
the directory templates and the trigger must be what the version's model says, or the
model is not used (``model-unknown``) rather than guessed. The lists themselves
(``cuda_libs``, the optional and the trigger-time preloads) are then taken from that text, so
a rebuilt or patched torch is replayed with its own list; the model's lists, as its release
shipped them, are used only when the text has none that can be read.

``start_torch`` replays the flow in the loader emulation: each preloaded path is dlopen'ed
into the emulated interpreter process, so its SONAME is already loaded when ``torch._C``'s
dependencies are resolved.

Deterministic glob: ``glob.glob`` returns names in directory (readdir) order, unsorted. We
list directories through ``Disk.listdir``, which keeps that order, so ``hits[0]`` is the file
torch would pick on this file system as it is now. When a glob matches more than one file
in the chosen directories, the step records every hit (``PreloadStep.hits``) so a report can
say the choice hangs on directory order.

``sys.path`` is approximated by the target's site directories, in order: the script
directory (or the working directory for ``python -c``) and ``.pth`` additions are not known
statically and are not searched.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

from libdoctor.disk.stat import Disk
from libdoctor.environment.distributions import Distribution
from libdoctor.loader.model import Closure, Process
from libdoctor.loader.search import Loader
from libdoctor.stack.frameworks import FrameworkBuild, Reader, read_file

__all__ = [
    "MODELS",
    "TORCH_2_4",
    "TORCH_2_5_0",
    "TORCH_2_5_1",
    "TORCH_2_6",
    "TORCH_2_7",
    "TORCH_2_8",
    "TORCH_2_9",
    "TORCH_2_10",
    "TORCH_2_11",
    "TORCH_2_14",
    "TORCH_2_15",
    "ExtractedPreload",
    "ModelChoice",
    "PreloadModel",
    "PreloadStep",
    "TorchStart",
    "choose_model",
    "dlopen_into",
    "extract_preload",
    "glob_dir",
    "start_torch",
    "torch_extension",
    "verify_model",
]

Libs = tuple[tuple[str, str], ...]  # (folder, glob) in preload order
Trigger = Literal["cudart-mapped", "global-deps-error"]  # the latter: only on step 1's error


@dataclass(frozen=True, slots=True)
class PreloadModel:
    """What one range of torch versions does before importing ``torch._C``."""

    id: str
    versions: str  # PEP 440 specifier set of the torch versions this model is for
    verified_on: tuple[str, ...]  # versions whose wheel was checked against this model
    global_deps: str  # relative to the site dir torch is in
    extension: str  # the module ``from torch._C import *`` loads: path stem, site-relative
    libs: Libs  # cuda_libs, as the release shipped it: preloaded on step 1's error
    optional_libs: Libs  # preloaded after libs, a miss never fatal
    dirs: tuple[str, ...]  # per sys.path entry p: p/<dir>/<glob>; {folder}, {cuda_major}
    trigger: Trigger  # when the preload runs after global deps loaded fine
    trigger_needle: str  # the /proc/self/maps substring that triggers it
    retry_on_error: bool  # global deps failing with an error naming a lib: preload, retry
    # Statements the flow hinges on: (function, text that ast.unparse of it must contain).
    markers: tuple[tuple[str, str], ...]
    # (lowest CUDA major, folder, glob) appended to libs for a build of that major or later
    libs_from_major: tuple[tuple[int, str, str], ...] = ()
    # What the trigger preloads; None: libs, libs_from_major, then optional_libs
    mapped_libs: Libs | None = None
    # A library no directory has, on the triggered path: skipped, or the end of the loop
    mapped_miss: Literal["skip", "stop"] = "skip"
    # "all": the hits of every template, in order; "first": those of the first with any
    dir_mode: Literal["all", "first"] = "all"
    entry_needs: str | None = None  # a sys.path entry without this subdirectory is skipped

    def cuda_libs(self, major: int | None) -> Libs:
        """The cuda_libs list for a build of MAJOR (None: not a CUDA build)."""
        extra = tuple(
            (folder, glob)
            for lowest, folder, glob in self.libs_from_major
            if major is not None and major >= lowest
        )
        return self.libs + extra


def _libs(spec: str) -> Libs:
    """``"cublas:libcublas cudnn:libcudnn"`` -> ``(("cublas", "libcublas.so.*[0-9]"), ...)``:
    every glob torch has used is a library stem and ``.so.*[0-9]``."""
    pairs = (item.split(":") for item in spec.split())
    return tuple((folder, f"{stem}.so.*[0-9]") for folder, stem in pairs)


_GLOBAL_DEPS = "torch/lib/libtorch_global_deps.so"
_EXTENSION = "torch/_C"
_DIRS_NVIDIA = ("nvidia/{folder}/lib",)
_DIRS_FALLBACK = ("nvidia/{folder}/lib", "{folder}/lib")
_DIRS_CU = ("nvidia/{folder}/lib", "nvidia/cu{cuda_major}/lib", "{folder}/lib")
_NVTX = _libs("nvtx:libnvToolsExt")
_CUFILE_FROM_12 = ((12, "cufile", "libcufile.so.*[0-9]"),)

_CDLL_GLOBAL = ("_load_global_deps", "ctypes.CDLL(global_deps_lib_path, mode=ctypes.RTLD_GLOBAL)")
_SWALLOWED = ("_load_global_deps", "except Exception:")
_DICT_LOOP = (
    ("_load_global_deps", "except OSError as err:"),
    ("_load_global_deps", "in err.args[0]"),
    ("_load_global_deps", "for lib_folder, lib_name in cuda_libs.items():"),
    ("_load_global_deps", "_preload_cuda_deps(lib_folder, lib_name)"),
)


def _search_markers(function: str, required_flag: bool) -> tuple[tuple[str, str], ...]:
    """FUNCTION's sys.path loop: first entry with hits, its first hit, a miss raising."""
    miss = "if not lib_path and required:" if required_flag else "if not lib_path:"
    return (
        (function, "for path in sys.path:"),
        (function, "lib_path = candidate_lib_paths[0]"),
        (function, miss),
        (function, "ctypes.CDLL(lib_path)"),
    )


_GUARDED_SEARCH = (
    *_search_markers("_preload_cuda_deps", False),
    ("_preload_cuda_deps", "if not os.path.exists(nvidia_path):"),
)
_JOINED_DIRS = (("_get_cuda_dep_paths", "return nvidia_lib_paths + lib_paths"),)

_LIBS_2_4 = _libs(
    "cublas:libcublas cudnn:libcudnn cuda_nvrtc:libnvrtc cuda_runtime:libcudart "
    "cuda_cupti:libcupti cufft:libcufft curand:libcurand cusolver:libcusolver "
    "cusparse:libcusparse nccl:libnccl nvtx:libnvToolsExt"
)
_LIBS_2_5_1 = _libs(
    "cublas:libcublas cudnn:libcudnn cuda_nvrtc:libnvrtc cuda_runtime:libcudart "
    "cuda_cupti:libcupti cufft:libcufft curand:libcurand nvjitlink:libnvJitLink "
    "cusparse:libcusparse cusolver:libcusolver nccl:libnccl nvtx:libnvToolsExt"
)
_LIBS_2_5_0 = _LIBS_2_5_1[:6] + _libs("cufile:libcufile") + _LIBS_2_5_1[6:]
_LIBS_2_6 = _LIBS_2_5_1[:9] + _libs("cusparselt:libcusparseLt") + _LIBS_2_5_1[9:]
_LIBS_2_8 = _LIBS_2_6[:-1]  # no nvToolsExt
_LIBS_2_9 = _LIBS_2_8 + _libs("nvshmem:libnvshmem_host cufile:libcufile")
_LIBS_2_10 = _LIBS_2_9[:3] + _libs("cuda_nvrtc:libnvrtc-builtins") + _LIBS_2_9[3:]
_LIBS_2_11 = _libs("cublas:libcublasLt") + _LIBS_2_10
_LIBS_2_15 = tuple(lib for lib in _LIBS_2_11 if lib[0] != "curand")
_MAPPED_2_6 = _libs("cuda_nvrtc:libnvrtc nvjitlink:libnvJitLink")
_MAPPED_2_9 = _libs("cuda_nvrtc:libnvrtc cuda_nvrtc:libnvrtc-builtins nvjitlink:libnvJitLink")

TORCH_2_4 = PreloadModel(
    id="torch-2.4",
    versions=">=2.4,<2.5",
    verified_on=("2.4.0", "2.4.1"),
    global_deps=_GLOBAL_DEPS,
    extension=_EXTENSION,
    libs=_LIBS_2_4,
    optional_libs=(),
    dirs=_DIRS_NVIDIA,
    trigger="global-deps-error",
    trigger_needle="",
    retry_on_error=True,
    markers=(_CDLL_GLOBAL, *_DICT_LOOP, *_GUARDED_SEARCH),
    entry_needs="nvidia",
)
TORCH_2_5_0 = dataclasses.replace(
    TORCH_2_4, id="torch-2.5.0", versions="==2.5.0", verified_on=("2.5.0",), libs=_LIBS_2_5_0
)
TORCH_2_5_1 = dataclasses.replace(
    TORCH_2_4, id="torch-2.5.1", versions=">=2.5.1,<2.6", verified_on=("2.5.1",), libs=_LIBS_2_5_1
)
TORCH_2_6 = PreloadModel(
    id="torch-2.6",
    versions=">=2.6,<2.7",
    verified_on=("2.6.0",),
    global_deps=_GLOBAL_DEPS,
    extension=_EXTENSION,
    libs=_LIBS_2_6,
    optional_libs=(),
    dirs=_DIRS_FALLBACK,
    trigger="cudart-mapped",
    trigger_needle="nvidia/cuda_runtime/lib/libcudart.so",
    retry_on_error=True,
    markers=(
        _CDLL_GLOBAL,
        _SWALLOWED,
        ("_load_global_deps", "'nvidia/cuda_runtime/lib/libcudart.so' not in _maps"),
        *_DICT_LOOP,
        *_GUARDED_SEARCH,
        ("_preload_cuda_deps", "if not candidate_lib_paths:"),
    ),
    mapped_libs=_MAPPED_2_6,
    mapped_miss="stop",
    dir_mode="first",
    entry_needs="nvidia",
)
TORCH_2_7 = PreloadModel(
    id="torch-2.7",
    versions=">=2.7,<2.8",
    verified_on=("2.7.0", "2.7.1"),
    global_deps=_GLOBAL_DEPS,
    extension=_EXTENSION,
    libs=_LIBS_2_6,
    optional_libs=(),
    dirs=_DIRS_FALLBACK,
    trigger="cudart-mapped",
    trigger_needle="nvidia/cuda_runtime/lib/libcudart.so",
    retry_on_error=True,
    markers=(
        _CDLL_GLOBAL,
        _SWALLOWED,
        ("_load_global_deps", "'nvidia/cuda_runtime/lib/libcudart.so' not in _maps"),
        *_DICT_LOOP,
        ("_load_global_deps", "t_major = int(t_version[0])"),
        *_search_markers("_preload_cuda_deps", False),
        ("_preload_cuda_deps", "_get_cuda_dep_paths(path, lib_folder, lib_name)"),
        *_JOINED_DIRS,
    ),
    libs_from_major=_CUFILE_FROM_12,
    mapped_libs=_MAPPED_2_6,
    mapped_miss="stop",
)
TORCH_2_8 = dataclasses.replace(
    TORCH_2_7, id="torch-2.8", versions=">=2.8,<2.9", verified_on=("2.8.0",), libs=_LIBS_2_8
)
TORCH_2_9 = PreloadModel(
    id="torch-2.9",
    versions=">=2.9,<2.10",
    verified_on=("2.9.0", "2.9.1"),
    global_deps=_GLOBAL_DEPS,
    extension=_EXTENSION,
    libs=_LIBS_2_9,
    optional_libs=_NVTX,
    dirs=_DIRS_CU,
    trigger="cudart-mapped",
    trigger_needle="libcudart.so",
    retry_on_error=True,
    markers=(
        _CDLL_GLOBAL,
        _SWALLOWED,
        ("_load_global_deps", "'libcudart.so' not in _maps"),
        *_DICT_LOOP,
        *_search_markers("_preload_cuda_deps", True),
        ("_preload_cuda_deps", "_get_cuda_dep_paths(path, lib_folder, lib_name)"),
        *_JOINED_DIRS,
    ),
    mapped_libs=_MAPPED_2_9,
    mapped_miss="stop",
)
TORCH_2_10 = PreloadModel(
    id="torch-2.10",
    versions=">=2.10,<2.11",
    verified_on=("2.10.0",),
    global_deps=_GLOBAL_DEPS,
    extension=_EXTENSION,
    libs=_LIBS_2_10,
    optional_libs=_NVTX,
    dirs=_DIRS_CU,
    trigger="cudart-mapped",
    trigger_needle="libcudart.so",
    retry_on_error=True,
    markers=(
        _CDLL_GLOBAL,
        _SWALLOWED,
        ("_load_global_deps", "'libcudart.so' not in _maps"),
        ("_load_global_deps", "_preload_cuda_deps()"),
        ("_load_global_deps", "_preload_cuda_deps(err)"),
        ("_preload_cuda_deps", "in err.args[0]"),
        ("_preload_cuda_deps", "_preload_cuda_lib(lib_folder, lib_name)"),
        *_search_markers("_preload_cuda_lib", True),
        ("_preload_cuda_lib", "_get_cuda_dep_paths(path, lib_folder, lib_name)"),
        *_JOINED_DIRS,
    ),
    mapped_miss="stop",
)
TORCH_2_11 = dataclasses.replace(
    TORCH_2_10,
    id="torch-2.11",
    versions=">=2.11,<2.14",
    verified_on=("2.11.0", "2.12.0", "2.12.1", "2.13.0"),
    libs=_LIBS_2_11,
)
TORCH_2_14 = PreloadModel(
    id="torch-2.14",
    versions=">=2.14,<2.15",
    verified_on=("2.14.0", "2.14.1"),
    global_deps=_GLOBAL_DEPS,
    extension=_EXTENSION,
    libs=_LIBS_2_11,
    optional_libs=_NVTX,
    dirs=_DIRS_CU,
    trigger="cudart-mapped",
    trigger_needle="libcudart.so",
    retry_on_error=True,
    markers=(
        _CDLL_GLOBAL,
        ("_load_global_deps", "'libcudart.so' not in _maps"),
        ("_load_global_deps", "_preload_cuda_deps(required=False)"),
        ("_load_global_deps", "_preload_cuda_deps(err)"),
        ("_preload_cuda_lib", "for path in sys.path:"),
        ("_preload_cuda_lib", "lib_path = candidate_lib_paths[0]"),
        ("_preload_cuda_lib", "ctypes.CDLL(lib_path)"),
        ("_preload_cuda_deps", "_preload_cuda_lib(lib_folder, lib_name, required=required)"),
        ("_get_cuda_dep_paths", "return nvidia_lib_paths + lib_paths"),
    ),
)
TORCH_2_15 = dataclasses.replace(
    TORCH_2_14, id="torch-2.15", versions=">=2.15,<2.16", verified_on=("2.15.0",), libs=_LIBS_2_15
)

MODELS: tuple[PreloadModel, ...] = (
    TORCH_2_4,
    TORCH_2_5_0,
    TORCH_2_5_1,
    TORCH_2_6,
    TORCH_2_7,
    TORCH_2_8,
    TORCH_2_9,
    TORCH_2_10,
    TORCH_2_11,
    TORCH_2_14,
    TORCH_2_15,
)
"""Known models, oldest first, disjoint ranges. Adding a torch version range is one entry,
verified against its wheel's ``torch/__init__.py``."""


# --------------------------------------------------------------------------- the text


@dataclass(frozen=True, slots=True)
class ExtractedPreload:
    """What the installed ``torch/__init__.py`` says about the preload, read with ``ast``."""

    libs: Libs | None  # the cuda_libs list or dict; None: not found
    optional_libs: Libs  # preloads with required=False
    dirs: tuple[str, ...]  # directory templates of the glob calls, in order
    functions: dict[str, str]  # function name -> ast.unparse of it
    problem: str | None = None  # the text could not be parsed
    libs_from_major: tuple[tuple[int, str, str], ...] = ()  # cuda_libs[k] = v under `>= N`
    mapped_libs: Libs | None = None  # preloads with literal names in _load_global_deps
    trigger_needle: str | None = None  # the 'text' of `'text' not in _maps`


_FUNCTIONS = ("_get_cuda_dep_paths", "_preload_cuda_lib", "_preload_cuda_deps", "_load_global_deps")
_PRELOADERS = ("_preload_cuda_lib", "_preload_cuda_deps")


def _text(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _pairs(node: ast.expr) -> Libs | None:
    """A list/tuple of (str, str) tuples, or a dict of str to str, as pairs in order."""
    if isinstance(node, ast.Dict):
        keys = [_text(k) if k is not None else None for k in node.keys]
        values = [_text(v) for v in node.values]
        pairs = list(zip(keys, values, strict=True))
    elif isinstance(node, (ast.List, ast.Tuple)):
        pairs = []
        for item in node.elts:
            if not isinstance(item, ast.Tuple) or len(item.elts) != 2:
                return None
            pairs.append((_text(item.elts[0]), _text(item.elts[1])))
    else:
        return None
    found = [(k, v) for k, v in pairs if k is not None and v is not None]
    return tuple(found) if len(found) == len(pairs) else None


def _join_parts(call: ast.Call, bound: dict[str, list[str]]) -> list[str] | None:
    """``os.path.join(root, "nvidia", lib_folder, "lib")`` -> ``["nvidia", "{folder}", "lib"]``;
    ROOT may be a name BOUND earlier to such a join (``nvidia_path``)."""
    if not call.args or not isinstance(call.args[0], ast.Name):
        return None
    parts = list(bound.get(call.args[0].id, []))
    for arg in call.args[1:]:
        if _text(arg) is not None:
            parts.append(str(_text(arg)))
        elif isinstance(arg, ast.Name) and arg.id == "lib_folder":
            parts.append("{folder}")
        elif isinstance(arg, ast.Name) and arg.id == "lib_name":
            parts.append("{glob}")
        elif isinstance(arg, ast.JoinedStr):
            parts.append(
                "".join(
                    str(v.value) if isinstance(v, ast.Constant) else "{cuda_major}"
                    for v in arg.values
                )
            )
        else:
            return None
    return parts


def _is_call(node: ast.AST, dotted: str) -> bool:
    return isinstance(node, ast.Call) and ast.unparse(node.func) == dotted


_TOP_LEVEL_DEF = re.compile(r"^def (\w+)\(", re.MULTILINE)
_TOP_LEVEL_CODE = re.compile(r"^[^\s#)\]}]", re.MULTILINE)


def _function_sources(text: str) -> str | None:
    """Just the wanted top-level functions' source: parsing all of torch/__init__.py (100 kB)
    would be most of the stack check's time. None when they cannot be cut out cleanly."""
    pieces = []
    for match in _TOP_LEVEL_DEF.finditer(text):
        if match[1] not in _FUNCTIONS:
            continue
        body_start = text.find("\n", match.end())
        end = _TOP_LEVEL_CODE.search(text, body_start + 1) if body_start >= 0 else None
        pieces.append(text[match.start() : end.start() if end else len(text)])
    return "\n".join(pieces) if pieces else None


def extract_preload(text: str) -> ExtractedPreload:
    try:
        tree = _parse_functions(text)
    except (SyntaxError, ValueError) as exc:
        problem = f"torch/__init__.py does not parse: {exc}"
        return ExtractedPreload(None, (), (), {}, problem=problem)
    functions = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name in _FUNCTIONS
    }
    # cuda_libs lives in _preload_cuda_deps from 2.10 on, in _load_global_deps before.
    holders = [functions[n] for n in ("_preload_cuda_deps", "_load_global_deps") if n in functions]
    searcher = functions.get("_get_cuda_dep_paths") or functions.get("_preload_cuda_deps")
    global_deps = functions.get("_load_global_deps")
    return ExtractedPreload(
        libs=next((libs for f in holders if (libs := _cuda_libs(f)) is not None), None),
        optional_libs=_literal_preloads(holders, optional=True) or (),
        dirs=_dir_templates(searcher) if searcher is not None else (),
        functions={name: ast.unparse(node) for name, node in functions.items()},
        libs_from_major=tuple(a for f in holders for a in _major_additions(f)),
        mapped_libs=_literal_preloads([global_deps], optional=False) if global_deps else None,
        trigger_needle=_needle(global_deps) if global_deps is not None else None,
    )


def _parse_functions(text: str) -> ast.Module:
    """The wanted functions, parsed from their excerpt when it cuts cleanly, else from all of
    TEXT (raises SyntaxError or ValueError)."""
    excerpt = _function_sources(text)
    if excerpt is not None:
        try:
            return ast.parse(excerpt)
        except (SyntaxError, ValueError):
            pass  # cut badly (a column-0 line inside a string): parse the whole text
    return ast.parse(text)


def _cuda_libs(function: ast.FunctionDef) -> Libs | None:
    """The (folder, glob) pairs of the first ``cuda_libs = [...]`` or ``{...}`` in FUNCTION."""
    for node in ast.walk(function):
        value: ast.expr | None = None
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            value = node.value if node.target.id == "cuda_libs" else None
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "cuda_libs" for t in node.targets
        ):
            value = node.value
        if value is not None:
            libs = _pairs(value)
            if libs is not None:
                return libs
    return None


def _major_additions(function: ast.FunctionDef) -> list[tuple[int, str, str]]:
    """``if t_major >= 12: cuda_libs["cufile"] = "libcufile.so.*[0-9]"`` -> (12, folder, glob).
    That the compared name is the CUDA major is the model's marker to check."""
    found = []
    for node in ast.walk(function):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)):
            continue
        test = node.test
        bound = test.comparators[0] if len(test.comparators) == 1 else None
        if not (isinstance(bound, ast.Constant) and type(bound.value) is int):
            continue
        if isinstance(test.ops[0], ast.GtE):
            lowest = bound.value
        elif isinstance(test.ops[0], ast.Gt):
            lowest = bound.value + 1
        else:
            continue
        for stmt in node.body:
            if not (isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Subscript)):
                continue
            target = stmt.targets[0]
            folder, glob = _text(target.slice), _text(stmt.value)
            if ast.unparse(target.value) == "cuda_libs" and folder and glob:
                found.append((lowest, folder, glob))
    return found


def _literal_preloads(functions: Sequence[ast.FunctionDef], optional: bool) -> Libs | None:
    """The preload calls with literal (folder, glob) in FUNCTIONS, in source order: those
    with ``required=False`` (OPTIONAL) or the others. None when there is none."""
    calls: list[ast.Call] = []
    for function in functions:
        for node in ast.walk(function):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in _PRELOADERS
                and len(node.args) == 2
                and all(_text(a) is not None for a in node.args)
            ):
                continue
            is_optional = any(
                k.arg == "required" and isinstance(k.value, ast.Constant) and k.value.value is False
                for k in node.keywords
            )
            if is_optional == optional:
                calls.append(node)
    calls.sort(key=lambda n: (n.lineno, n.col_offset))
    return tuple((str(_text(c.args[0])), str(_text(c.args[1]))) for c in calls) or None


def _needle(function: ast.FunctionDef) -> str | None:
    """The text of the first ``'text' not in _maps`` test."""
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.NotIn)
            and _text(node.left) is not None
            and isinstance(node.comparators[0], ast.Name)
        ):
            return _text(node.left)
    return None


def _dir_templates(function: ast.FunctionDef) -> tuple[str, ...]:
    """The ``glob.glob(os.path.join(...))`` calls of FUNCTION as templates, in source order."""
    bound: dict[str, list[str]] = {}
    globs: list[ast.Call] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and _is_call(node.value, "os.path.join"):
                assert isinstance(node.value, ast.Call)
                parts = _join_parts(node.value, {})
                if parts is not None:
                    bound[target.id] = parts
        elif _is_call(node, "glob.glob"):
            assert isinstance(node, ast.Call)
            globs.append(node)
    globs.sort(key=lambda n: (n.lineno, n.col_offset))
    dirs: list[str] = []
    for call in globs:
        joined = call.args[0] if call.args else None
        parts = (
            _join_parts(joined, bound)
            if isinstance(joined, ast.Call) and _is_call(joined, "os.path.join")
            else None
        )
        if parts and parts[-1] == "{glob}":
            dirs.append("/".join(parts[:-1]))
    return tuple(dirs)


def _flow_differences(model: PreloadModel, found: ExtractedPreload) -> list[str]:
    """How the statements, directories and trigger of the text differ from MODEL's."""
    differences = []
    needed = {function for function, _ in model.markers}
    missing = [name for name in _FUNCTIONS if name in needed and name not in found.functions]
    if missing:
        differences.append(f"functions not found: {', '.join(missing)}")
    if found.dirs != model.dirs:
        differences.append(
            f"the searched directories differ ({', '.join(found.dirs) or 'none found'})"
        )
    needle = model.trigger_needle if model.trigger == "cudart-mapped" else None
    if found.trigger_needle != needle:
        differences.append(
            f"the preload trigger differs ({found.trigger_needle or 'none'} in the maps)"
        )
    if (found.mapped_libs is None) != (model.mapped_libs is None):
        differences.append("what the trigger preloads differs")
    for function, snippet in model.markers:
        body = found.functions.get(function)
        if body is not None and snippet not in body:
            differences.append(f"{function} no longer contains `{snippet}`")
    return differences


def _list_differences(model: PreloadModel, found: ExtractedPreload) -> list[str]:
    """How the lists of the text differ from those MODEL's release shipped."""
    differences = []
    if found.libs != model.libs:
        differences.append(
            "the cuda_libs list differs"
            if found.libs is not None
            else "no cuda_libs list of (folder, glob) pairs"
        )
    if found.libs_from_major != model.libs_from_major:
        differences.append("the libraries added for a CUDA major differ")
    if found.optional_libs != model.optional_libs:
        differences.append("the optional preloads differ")
    if found.mapped_libs != model.mapped_libs:
        differences.append("the libraries preloaded on the trigger differ")
    return differences


def verify_model(model: PreloadModel, found: ExtractedPreload) -> list[str]:
    """How the installed text differs from MODEL; empty when the model describes it."""
    if found.problem:
        return [found.problem]
    return _flow_differences(model, found) + _list_differences(model, found)


def _as_read(model: PreloadModel, found: ExtractedPreload) -> PreloadModel:
    """MODEL with the lists of the text, where it has a cuda_libs list."""
    if found.libs is None:
        return model
    return dataclasses.replace(
        model,
        libs=found.libs,
        libs_from_major=found.libs_from_major,
        optional_libs=found.optional_libs,
        mapped_libs=found.mapped_libs,
    )


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """The model for an installed torch, or why there is none (``model-unknown``)."""

    model: PreloadModel | None  # with the lists read from the text (lists_from)
    reason: str | None  # set when model is None
    init_path: str
    matches_text: str | None = None  # a model whose text matches, for a version it is not for
    lists_from: Literal["torch/__init__.py", "model"] | None = None
    # How the text's lists differ from those the model's release shipped (it is used)
    list_differences: tuple[str, ...] = ()


def choose_model(
    build: FrameworkBuild,
    reader: Reader = read_file,
    models: Sequence[PreloadModel] = MODELS,
) -> ModelChoice:
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    init_path = os.path.join(build.dist.base_dir, "torch", "__init__.py")
    data = reader(init_path)
    if data is None:
        return ModelChoice(None, "torch/__init__.py cannot be read", init_path)
    found = extract_preload(data.decode("utf-8", "replace"))
    try:
        version = Version(build.version)
    except InvalidVersion:
        return ModelChoice(
            None, f"torch version {build.version!r} is not a valid version", init_path
        )
    for_version = [
        m for m in models if SpecifierSet(m.versions).contains(version, prereleases=True)
    ]
    if not for_version:
        fitting = next((m.id for m in models if not verify_model(m, found)), None)
        reason = f"no preload model for torch {build.version}"
        if fitting:
            reason += f" (its __init__.py matches model {fitting}, known for other versions)"
        return ModelChoice(None, reason, init_path, matches_text=fitting)
    differences: list[str] = [found.problem] if found.problem else []
    for model in for_version if not found.problem else ():
        differences = _flow_differences(model, found)
        if not differences:
            return ModelChoice(
                _as_read(model, found),
                None,
                init_path,
                lists_from="torch/__init__.py" if found.libs is not None else "model",
                list_differences=tuple(_list_differences(model, found)),
            )
    return ModelChoice(
        None,
        f"torch {build.version}'s __init__.py does not match model {for_version[-1].id}: "
        + "; ".join(differences),
        init_path,
    )


# --------------------------------------------------------------------------- the replay


def glob_dir(disk: Disk, directory: str, pattern: str) -> tuple[str, ...]:
    """``glob.glob(directory/pattern)`` with a magic-free DIRECTORY, in readdir order."""
    names = disk.listdir(directory)
    hidden_ok = pattern.startswith(".")
    return tuple(
        os.path.join(directory, name)
        for name in names
        if (hidden_ok or not name.startswith(".")) and fnmatchcase(name, pattern)
    )


def dlopen_into(loader: Loader, process: Process, path: str) -> tuple[Process, Closure]:
    """``dlopen(PATH)`` in PROCESS (``ctypes.CDLL`` of a path): see ``Loader.dlopen``."""
    return loader.dlopen(process, path)


def failure_text(closure: Closure) -> str:
    """The message ctypes' OSError would carry for a failed dlopen (dlerror's text)."""
    if closure.root_error:
        return f"{closure.root}: {closure.root_error}"
    for res in closure.resolutions:
        if res.status != "found":
            return f"{res.expanded}: {res.reason or 'cannot open shared object file'}"
    return f"{closure.root}: cannot be loaded"


StepOutcome = Literal["loaded", "no-match", "failed", "not-run"]


@dataclass(frozen=True, slots=True)
class PreloadStep:
    folder: str
    pattern: str
    entry: str | None  # the sys.path entry with hits
    hits: tuple[str, ...]  # every hit there, in glob order; hits[0] is loaded
    outcome: StepOutcome
    error: str | None = None
    closure: Closure | None = None

    @property
    def chosen(self) -> str | None:
        return self.hits[0] if self.hits else None


@dataclass(frozen=True, slots=True)
class TorchStart:
    """The emulated process at ``from torch._C import *``, and how it got there."""

    model: PreloadModel
    global_deps: str
    attempts: tuple[Closure, ...]  # dlopen of libtorch_global_deps (two when retried)
    ran: bool  # the preload ran
    why: str  # when/why it ran or not
    steps: tuple[PreloadStep, ...]
    process: Process
    error: str | None  # the import fails before torch._C (the exception torch would raise)

    @property
    def preloaded(self) -> tuple[str, ...]:
        return tuple(s.hits[0] for s in self.steps if s.outcome == "loaded" and s.hits)

    def step_for(self, path: str) -> PreloadStep | None:
        return next((s for s in self.steps if s.outcome == "loaded" and s.chosen == path), None)


def _hits(
    disk: Disk,
    model: PreloadModel,
    folder: str,
    pattern: str,
    sys_path: Sequence[str],
    major: int | None,
) -> tuple[str | None, tuple[str, ...]]:
    for entry in sys_path:
        if model.entry_needs and not disk.stat(os.path.join(entry, model.entry_needs)).exists:
            continue
        hits: list[str] = []
        for template in model.dirs:
            if "{cuda_major}" in template and major is None:
                continue
            relative = template.replace("{folder}", folder).replace("{cuda_major}", str(major))
            hits += glob_dir(disk, os.path.join(entry, *relative.split("/")), pattern)
            if hits and model.dir_mode == "first":
                break
        if hits:
            return entry, tuple(hits)
    return None, ()


def _mapped(process: Process, needle: str) -> str | None:
    for obj in process.objects:
        path = obj.path
        if needle in path or needle in os.path.realpath(path):
            return path
    return None


Pending = list[tuple[str, str, bool]]  # (folder, glob, a miss raises)


def _on_trigger(model: PreloadModel, major: int | None) -> Pending:
    """What the triggered path preloads, in order."""
    must = model.mapped_miss == "stop"
    if model.mapped_libs is not None:
        return [(f, g, must) for f, g in model.mapped_libs]
    pending = [(f, g, must) for f, g in model.cuda_libs(major)]
    return pending + [(f, g, False) for f, g in model.optional_libs]


def start_torch(
    loader: Loader,
    process: Process,
    model: PreloadModel,
    build: FrameworkBuild,
    sys_path: Sequence[str],
    disk: Disk,
) -> TorchStart:
    """Replay torch's ``_load_global_deps`` on PROCESS (the interpreter just started)."""
    major = build.cuda_major
    global_deps = os.path.join(build.dist.base_dir, *model.global_deps.split("/"))

    after, first = dlopen_into(loader, process, global_deps)
    if first.ok:
        if model.trigger != "cudart-mapped":
            why = "this torch preloads only when libtorch_global_deps fails to load"
            return TorchStart(model, global_deps, (first,), False, why, (), after, None)
        cudart = _mapped(after, model.trigger_needle)
        if cudart is None:
            why = f"{model.trigger_needle} is not mapped after libtorch_global_deps: no preload"
            return TorchStart(model, global_deps, (first,), False, why, (), after, None)
        pending = _on_trigger(model, major)
        done, steps, _ = _preload(loader, disk, model, sys_path, major, after, pending, False)
        why = f"{cudart} is mapped after libtorch_global_deps"
        return TorchStart(model, global_deps, (first,), True, why, tuple(steps), done, None)

    message = failure_text(first)
    libs = model.cuda_libs(major)
    if not model.retry_on_error or not any(g.split(".", 1)[0] in message for _, g in libs):
        why = "libtorch_global_deps failed to load with an error naming no preloaded library"
        return TorchStart(
            model, global_deps, (first,), False, why, (), process, f"OSError: {message}"
        )
    pending = [(f, g, True) for f, g in libs] + [(f, g, False) for f, g in model.optional_libs]
    done, steps, error = _preload(loader, disk, model, sys_path, major, process, pending, True)
    why = f"libtorch_global_deps failed ({message}): preload with every library required"
    if error is not None:
        return TorchStart(model, global_deps, (first,), True, why, tuple(steps), done, error)
    retried, second = dlopen_into(loader, done, global_deps)
    error = None if second.ok else f"OSError: {failure_text(second)}"
    return TorchStart(model, global_deps, (first, second), True, why, tuple(steps), retried, error)


def _preload(
    loader: Loader,
    disk: Disk,
    model: PreloadModel,
    sys_path: Sequence[str],
    major: int | None,
    start: Process,
    pending: Pending,
    fatal: bool,
) -> tuple[Process, list[PreloadStep], str | None]:
    """torch's preload of PENDING on START: the process after it, each step, and the error
    torch raises (only when FATAL; otherwise the try around the loop swallows it)."""
    steps: list[PreloadStep] = []
    current = start
    error: str | None = None
    for i, (folder, pattern, must) in enumerate(pending):
        entry, hits = _hits(disk, model, folder, pattern, sys_path, major)
        if not hits:
            if must:
                error = f"ValueError: {pattern} not found in the system path"
                steps.append(PreloadStep(folder, pattern, None, (), "no-match", error))
                steps += [PreloadStep(f, g, None, (), "not-run") for f, g, _ in pending[i + 1 :]]
                break
            steps.append(PreloadStep(folder, pattern, None, (), "no-match"))
            continue
        after, closure = dlopen_into(loader, current, hits[0])
        if not closure.ok:
            text = f"OSError: {failure_text(closure)}"
            steps.append(PreloadStep(folder, pattern, entry, hits, "failed", text, closure))
            steps += [PreloadStep(f, g, None, (), "not-run") for f, g, _ in pending[i + 1 :]]
            error = text
            break
        current = after
        steps.append(PreloadStep(folder, pattern, entry, hits, "loaded", None, closure))
    return current, steps, error if fatal else None


def torch_extension(dist: Distribution, model: PreloadModel) -> str | None:
    """The extension module file ``from torch._C import *`` loads, from the RECORD."""
    if dist.record is None:
        return None
    directory, _, stem = model.extension.rpartition("/")
    for entry in dist.record.entries:
        head, _, name = entry.path.rpartition("/")
        if head == directory and name.startswith(stem + ".") and name.endswith(".so"):
            return os.path.join(dist.base_dir, *entry.path.split("/"))
    return None
