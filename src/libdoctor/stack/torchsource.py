"""Which preload model an installed torch follows, read from its ``torch/__init__.py``.

``choose_model`` reads the installed text with ``ast`` (never runs it): the statements the
flow hinges on, the directory templates and the trigger must be what the version's model
(``stack.torchversions``) says, or the model is not used (``model-unknown``) rather than
guessed. The lists themselves (``cuda_libs``, the optional and the trigger-time preloads)
are then taken from that text, so a rebuilt or patched torch is replayed with its own list;
the model's lists, as its release shipped them, are used only when the text has none that
can be read.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from libdoctor.stack.frameworks import FrameworkBuild, Reader, read_file
from libdoctor.stack.torchversions import MODELS, Libs, PreloadModel

__all__ = ["ExtractedPreload", "ModelChoice", "choose_model", "extract_preload", "verify_model"]


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
