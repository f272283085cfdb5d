"""torch's CUDA preload (LOADER_SPEC §4) as data, checked against the installed text, replayed.

Before ``from torch._C import *``, torch 2.14's ``__init__.py``:

1. ``ctypes.CDLL(torch/lib/libtorch_global_deps.so, RTLD_GLOBAL)``;
2. if a path containing ``libcudart.so`` is now in ``/proc/self/maps``, preloads each
   (folder, glob) of a fixed list: for the first ``sys.path`` entry ``p`` with any hit among
   ``glob(p/nvidia/<folder>/lib/<glob>) + glob(p/nvidia/cu<major>/lib/<glob>) +
   glob(p/<folder>/lib/<glob>)``, ``ctypes.CDLL(hits[0])``. A miss is skipped; the first
   exception ends the loop and is swallowed (the ``try`` wraps the whole loop);
3. if step 1 raised an OSError naming one of those libraries, preloads them all with misses
   fatal (ValueError), then retries step 1; any other OSError is re-raised.

``PreloadModel`` holds that as data per torch version range. ``verify_model`` checks a model
against the installed ``torch/__init__.py`` (parsed with ``ast``, never run): the folder/glob
list, the directory templates and the statements the flow hinges on must all be there, or the
model is not used (``model-unknown``) rather than guessed.

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
    "TORCH_2_14",
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

Trigger = Literal["cudart-mapped", "global-deps-error"]


@dataclass(frozen=True, slots=True)
class PreloadModel:
    """What one range of torch versions does before importing ``torch._C``."""

    id: str
    versions: str  # PEP 440 specifier set of the torch versions this model is for
    verified_on: tuple[str, ...]  # versions whose wheel was checked against this model
    global_deps: str  # relative to the site dir torch is in
    extension: str  # the module ``from torch._C import *`` loads: path stem, site-relative
    libs: tuple[tuple[str, str], ...]  # (folder, glob) in preload order
    optional_libs: tuple[tuple[str, str], ...]  # preloaded after libs, a miss never fatal
    dirs: tuple[str, ...]  # per sys.path entry p: p/<dir>/<glob>; {folder}, {cuda_major}
    trigger: Trigger  # when the preload runs after global deps loaded fine
    trigger_needle: str  # the /proc/self/maps substring that triggers it
    retry_on_error: bool  # global deps failing with an error naming a lib: preload, retry
    # Statements the flow hinges on: (function, text that ast.unparse of it must contain).
    markers: tuple[tuple[str, str], ...]


TORCH_2_14 = PreloadModel(
    id="torch-2.14",
    versions=">=2.14,<2.15",
    verified_on=("2.14.1",),
    global_deps="torch/lib/libtorch_global_deps.so",
    extension="torch/_C",
    libs=(
        ("cublas", "libcublasLt.so.*[0-9]"),
        ("cublas", "libcublas.so.*[0-9]"),
        ("cudnn", "libcudnn.so.*[0-9]"),
        ("cuda_nvrtc", "libnvrtc.so.*[0-9]"),
        ("cuda_nvrtc", "libnvrtc-builtins.so.*[0-9]"),
        ("cuda_runtime", "libcudart.so.*[0-9]"),
        ("cuda_cupti", "libcupti.so.*[0-9]"),
        ("cufft", "libcufft.so.*[0-9]"),
        ("curand", "libcurand.so.*[0-9]"),
        ("nvjitlink", "libnvJitLink.so.*[0-9]"),
        ("cusparse", "libcusparse.so.*[0-9]"),
        ("cusparselt", "libcusparseLt.so.*[0-9]"),
        ("cusolver", "libcusolver.so.*[0-9]"),
        ("nccl", "libnccl.so.*[0-9]"),
        ("nvshmem", "libnvshmem_host.so.*[0-9]"),
        ("cufile", "libcufile.so.*[0-9]"),
    ),
    optional_libs=(("nvtx", "libnvToolsExt.so.*[0-9]"),),
    dirs=("nvidia/{folder}/lib", "nvidia/cu{cuda_major}/lib", "{folder}/lib"),
    trigger="cudart-mapped",
    trigger_needle="libcudart.so",
    retry_on_error=True,
    markers=(
        ("_load_global_deps", "ctypes.CDLL(global_deps_lib_path, mode=ctypes.RTLD_GLOBAL)"),
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

MODELS: tuple[PreloadModel, ...] = (TORCH_2_14,)
"""Known models. Adding a torch version range is one entry, verified against its wheel."""


# --------------------------------------------------------------------------- the text


@dataclass(frozen=True, slots=True)
class ExtractedPreload:
    """What the installed ``torch/__init__.py`` says about the preload, read with ``ast``."""

    libs: tuple[tuple[str, str], ...] | None  # the cuda_libs list; None: not found
    optional_libs: tuple[tuple[str, str], ...]
    dirs: tuple[str, ...]  # directory templates of _get_cuda_dep_paths, in order
    functions: dict[str, str]  # function name -> ast.unparse of it
    problem: str | None = None  # the text could not be parsed


_FUNCTIONS = ("_get_cuda_dep_paths", "_preload_cuda_lib", "_preload_cuda_deps", "_load_global_deps")


def _pairs(node: ast.expr) -> tuple[tuple[str, str], ...] | None:
    if not isinstance(node, (ast.List, ast.Tuple)):
        return None
    pairs = []
    for item in node.elts:
        if not (
            isinstance(item, ast.Tuple)
            and len(item.elts) == 2
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in item.elts)
        ):
            return None
        first, second = item.elts
        assert isinstance(first, ast.Constant) and isinstance(second, ast.Constant)
        pairs.append((str(first.value), str(second.value)))
    return tuple(pairs)


def _template(call: ast.Call) -> str | None:
    """``os.path.join(path, "nvidia", lib_folder, "lib", lib_name)`` → ``nvidia/{folder}/lib``."""
    parts: list[str] = []
    args = call.args
    if len(args) < 3 or not isinstance(args[0], ast.Name) or not isinstance(args[-1], ast.Name):
        return None
    for arg in args[1:-1]:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            parts.append(arg.value)
        elif isinstance(arg, ast.Name) and arg.id == "lib_folder":
            parts.append("{folder}")
        elif isinstance(arg, ast.JoinedStr):
            text = ""
            for value in arg.values:
                if isinstance(value, ast.Constant):
                    text += str(value.value)
                else:
                    text += "{cuda_major}"
            parts.append(text)
        else:
            return None
    return "/".join(parts)


def _is_join(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and ast.unparse(node.func) == "os.path.join"
    )


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
    deps = functions.get("_preload_cuda_deps")
    paths = functions.get("_get_cuda_dep_paths")
    return ExtractedPreload(
        libs=_cuda_libs(deps) if deps is not None else None,
        optional_libs=_optional_preloads(deps) if deps is not None else (),
        dirs=_dir_templates(paths) if paths is not None else (),
        functions={name: ast.unparse(node) for name, node in functions.items()},
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


def _cuda_libs(deps: ast.FunctionDef) -> tuple[tuple[str, str], ...] | None:
    """The (folder, glob) pairs of the first ``cuda_libs = [...]`` in _preload_cuda_deps."""
    for node in ast.walk(deps):
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


def _optional_preloads(deps: ast.FunctionDef) -> tuple[tuple[str, str], ...]:
    """The ``_preload_cuda_lib(folder, glob, required=False)`` calls after the loop."""
    optional: list[tuple[str, str]] = []
    for stmt in deps.body:  # a top-level call after the loop: never required
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "_preload_cuda_lib"
            and any(
                k.arg == "required" and isinstance(k.value, ast.Constant) and k.value.value is False
                for k in call.keywords
            )
        ):
            pair = _pairs(ast.List(elts=[ast.Tuple(elts=list(call.args[:2]))]))
            if pair:
                optional.append(pair[0])
    return tuple(optional)


def _dir_templates(paths: ast.FunctionDef) -> tuple[str, ...]:
    """The ``os.path.join`` calls of _get_cuda_dep_paths as templates, in source order."""
    joins = [n for n in ast.walk(paths) if isinstance(n, ast.Call) and _is_join(n)]
    joins.sort(key=lambda n: (n.lineno, n.col_offset))
    dirs: list[str] = []
    for join in joins:
        template = _template(join)
        if template is not None:
            dirs.append(template)
    return tuple(dirs)


def verify_model(model: PreloadModel, found: ExtractedPreload) -> list[str]:
    """How the installed text differs from MODEL; empty when the model describes it."""
    if found.problem:
        return [found.problem]
    differences = []
    missing = [name for name in _FUNCTIONS if name not in found.functions]
    if missing:
        differences.append(f"functions not found: {', '.join(missing)}")
    if found.libs != model.libs:
        differences.append(
            "the cuda_libs list differs"
            if found.libs is not None
            else "no cuda_libs list of (folder, glob) pairs"
        )
    if found.optional_libs != model.optional_libs:
        differences.append("the optional preloads differ")
    if found.dirs != model.dirs:
        differences.append(
            f"the searched directories differ ({', '.join(found.dirs) or 'none found'})"
        )
    for function, snippet in model.markers:
        body = found.functions.get(function)
        if body is not None and snippet not in body:
            differences.append(f"{function} no longer contains `{snippet}`")
    return differences


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """The model for an installed torch, or why there is none (``model-unknown``)."""

    model: PreloadModel | None
    reason: str | None  # set when model is None
    init_path: str
    matches_text: str | None = None  # a model whose text matches, for a version it is not for


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
    differences: list[str] = []
    for model in for_version:
        differences = verify_model(model, found)
        if not differences:
            return ModelChoice(model, None, init_path)
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
        hits: list[str] = []
        for template in model.dirs:
            if "{cuda_major}" in template and major is None:
                continue
            relative = template.replace("{folder}", folder).replace("{cuda_major}", str(major))
            hits += glob_dir(disk, os.path.join(entry, *relative.split("/")), pattern)
        if hits:
            return entry, tuple(hits)
    return None, ()


def _mapped(process: Process, needle: str) -> str | None:
    for obj in process.objects:
        path = obj.path
        if needle in path or needle in os.path.realpath(path):
            return path
    return None


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
        cudart = _mapped(after, model.trigger_needle)
        if model.trigger != "cudart-mapped" or cudart is None:
            why = f"{model.trigger_needle} is not mapped after libtorch_global_deps: no preload"
            return TorchStart(model, global_deps, (first,), False, why, (), after, None)
        done, steps, _ = _preload(loader, disk, model, sys_path, major, after, required=False)
        why = f"{cudart} is mapped after libtorch_global_deps"
        return TorchStart(model, global_deps, (first,), True, why, tuple(steps), done, None)

    message = failure_text(first)
    names = [g.split(".", 1)[0] for _, g in model.libs]
    if not model.retry_on_error or not any(n in message for n in names):
        why = "libtorch_global_deps failed to load with an error naming no preloaded library"
        return TorchStart(
            model, global_deps, (first,), False, why, (), process, f"OSError: {message}"
        )
    done, steps, error = _preload(loader, disk, model, sys_path, major, process, required=True)
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
    required: bool,
) -> tuple[Process, list[PreloadStep], str | None]:
    """torch's ``_preload_cuda_deps(required)`` on START: the process after it, each step, and
    the error torch raises (only when REQUIRED; otherwise the loop's try swallows it)."""
    steps: list[PreloadStep] = []
    current = start
    error: str | None = None
    pending = [(f, g, required) for f, g in model.libs]
    pending += [(f, g, False) for f, g in model.optional_libs]
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
            error = text  # swallowed when not required, fatal otherwise
            break
        current = after
        steps.append(PreloadStep(folder, pattern, entry, hits, "loaded", None, closure))
    return current, steps, error if required else None


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
