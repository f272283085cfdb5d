"""``tree`` output: the resolved load drawn as a tree, or its requests as JSON.

An object is expanded under the request that really loaded it, once; later requests for it
say "(see above)", so a shared dependency is neither hidden nor repeated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from libdoctor.document import dumps, envelope
from libdoctor.environment.paths import display
from libdoctor.report.libraries import (
    owner_label,
    provider_lines,
    resolution_dict,
    short,
    via_label,
)
from libdoctor.report.text import text_lines

if TYPE_CHECKING:
    from libdoctor.analysis.libraries import SystemOwners
    from libdoctor.analysis.tree import DependencyTree
    from libdoctor.environment.model import Environment
    from libdoctor.loader.imported import LoadedBefore
    from libdoctor.loader.model import Closure, Resolution


def tree_json(tree: DependencyTree, target: Mapping[str, Any]) -> str:
    env, system = tree.env, tree.system
    needed = [
        resolution_dict(env, r, system) for r in tree.closure.resolutions if r.kind == "needed"
    ]
    runtime = [
        {**resolution_dict(env, r, system), "runtime": True}
        for closure in tree.runtime
        for r in closure.resolutions[:1]
    ]
    before = {n: b.evidence() for n, b in tree.before.items()}
    document = {
        "root": display(tree.root),
        "root_error": tree.closure.root_error,
        "target": target,
        "libraries": needed + runtime,
        **({"already_loaded": before} if before else {}),
    }
    return dumps(envelope(document))


def tree_text(tree: DependencyTree) -> str:
    return text_lines(render_tree(tree.env, tree.closure, tree.system, tree.runtime, tree.before))


def render_tree(
    env: Environment,
    closure: Closure,
    system: SystemOwners | None = None,
    runtime: Sequence[Closure] = (),
    before: Mapping[str, LoadedBefore] | None = None,
) -> list[str]:
    """CLOSURE drawn as a tree; the RUNTIME loads (dlopen by name) under the library that
    makes them, marked as such, after its DT_NEEDED entries."""
    owner = owner_label(env, closure.root)
    lines = [short(env, closure.root) + (f"  [{owner}]" if owner else "")]
    if closure.root_error:
        lines.append(f"  cannot be loaded: {closure.root_error}")
        return lines
    children: dict[str | None, list[Resolution]] = {}
    for res in (r for c in (closure, *runtime) for r in c.resolutions):
        if res.kind in ("needed", "runtime"):
            children.setdefault(res.requester, []).append(res)
    loaded_by = {obj.path: obj.loader for c in (closure, *runtime) for obj in c.loaded}
    shown: set[str] = set()

    def walk(requester: str, indent: str) -> None:
        items = children.get(requester, [])
        for i, res in enumerate(items):
            last = i == len(items) - 1
            branch = "└── " if last else "├── "
            at_run_time = "  (dlopen at run time)" if res.kind == "runtime" else ""
            loaded = (before or {}).get(res.name) if res.status == "not_found" else None
            if loaded is not None:
                lines.append(
                    f"{indent}{branch}{res.name} => {short(env, loaded.path)}  [already loaded by "
                    f"import {loaded.package}, {'by path at ' if loaded.by_path else ''}"
                    f"{loaded.statement.file}:{loaded.statement.line}]"
                )
                continue
            if res.status != "found":
                lines.append(f"{indent}{branch}{res.name}  NOT FOUND ({res.reason}){at_run_time}")
                providers = system.providers.get(res.name, ()) if system is not None else ()
                lines.extend(provider_lines(providers, indent + ("    " if last else "│   ")))
                continue
            path = res.path or ""
            label = owner_label(env, path, system)
            how = via_label(env, res)
            expand = loaded_by.get(path) == requester and path not in shown
            note = "" if expand or res.via == "loaded" else "  (see above)"
            lines.append(
                f"{indent}{branch}{res.name} => {short(env, path)}"
                + (f"  [{how}]" if how else "")
                + (f"  ({label})" if label else "")
                + at_run_time
                + note
            )
            if expand:
                shown.add(path)
                walk(path, indent + ("    " if last else "│   "))

    walk(closure.root, "")
    return lines
