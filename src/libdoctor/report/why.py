"""``why`` output: each request for the library with the loader's search, then who ships it.

The search is listed in the order the loader tried the directories, each with the reason it
was tried (RPATH of which object, ``LD_LIBRARY_PATH``, the cache, the defaults), because the
usual answer to "why is this not found" is "it was never looked for there".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
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
    from libdoctor.analysis.why import Explanation, Request


def why_json(why: Explanation, target: Mapping[str, Any]) -> str:
    env = why.env
    document = {
        "library": why.library,
        "target": target,
        "requests": [
            {
                **resolution_dict(env, request.resolution, why.system),
                **({"runtime": True} if request.resolution.kind == "runtime" else {}),
                "root": display(request.root),
                "optional": request.optional,
                **(
                    {
                        "runtime_loader": {
                            "name": request.runtime.search.name,
                            "found": [display(p) for p in request.runtime.present],
                            "searched": [display(d) for d in request.runtime.dirs],
                        }
                    }
                    if request.runtime is not None
                    else {}
                ),
                **(
                    {"already_loaded": request.before.evidence()}
                    if request.before is not None
                    else {}
                ),
            }
            for request in why.requests
        ],
        "shipped_by": [item.evidence() for item in why.shipped],
        "system_providers": [
            {**p.package.evidence(), "present": p.present}
            for p in why.system.providers.get(why.library, ())
        ],
        "findings": [f.to_json() for f in why.findings],
    }
    return dumps(envelope(document))


def why_text(why: Explanation) -> str:
    env = why.env
    lines = [f"{why.library} in {display(env.target.prefix)}", ""]
    if not why.requests:
        lines.append(
            f"Nothing in the environment needs {why.library} (no DT_NEEDED entry names it, "
            "and no library is known to load it at run time)."
        )
    for request in why.requests:
        lines += request_lines(why, request)
    lines += shipped_lines(why)
    for finding in why.findings:
        lines.append(f"{finding.code}: {display(finding.message)}")
        if finding.fix is not None:
            lines.append(f"  fix: {display(finding.fix.command)}")
    return text_lines(lines).rstrip() + "\n"


def request_lines(why: Explanation, request: Request) -> list[str]:
    """Who asks, what it got, and every directory the loader tried, in order."""
    env = why.env
    res = request.resolution
    context = (
        "not loaded by any extension module (loaded on demand, if ever)"
        if request.optional
        else f"reached from {short(env, request.root)}"
    )
    owner = owner_label(env, res.requester)
    asks = "loaded at run time (dlopen by name) by" if res.kind == "runtime" else "needed by"
    lines = [
        f"{asks} {short(env, res.requester)}" + (f" ({owner})" if owner else "") + f", {context}"
    ]
    if res.status == "found":
        found_owner = owner_label(env, res.path, why.system)
        lines.append(
            f"  found: {display(res.path or '')} via {via_label(env, res)}"
            + (f" ({found_owner})" if found_owner else "")
        )
    elif request.before is not None:
        before = request.before
        how = "loaded by path" if before.by_path else "imported"
        lines.append(
            f"  already loaded by import {before.package} ({before.provider_module}, {how} "
            f"at {before.statement.file}:{before.statement.line}): {display(before.path)}"
            + ("" if before.provider_ok else f"; but import {before.package} itself fails")
        )
        lines.append(f"  (the loader alone would not: {res.reason})")
    elif request.runtime is not None and request.runtime.present:
        hit = request.runtime
        lines.append(
            f"  found by {hit.search.name}, which loads it before the import: "
            f"{display(hit.present[0])}"
        )
        lines.append(f"  (the loader alone would not: {res.reason})")
    else:
        lines.append(f"  NOT FOUND: {res.reason}")
        lines += provider_lines(why.system.providers.get(res.name, ()), "  ")
    if res.searched:
        lines.append("  searched, in order:")
        cache_listed = any(s.source == "cache" for s in res.searched)
        for step in res.searched:
            if step.source == "default" and not cache_listed:
                # glibc asks ld.so.cache just before the default dirs; a miss leaves no dir
                lines.append(f"    {'cache':<40} /etc/ld.so.cache: no entry for {res.name}")
                cache_listed = True
            source = step.source + (f" of {short(env, step.owner)}" if step.owner else "")
            where = display(os.path.normpath(step.directory)) if step.directory else "(cwd)"
            lines.append(f"    {source:<40} {where}")
    for rejected in res.rejected:
        lines.append(f"  passed over {display(rejected.path)}: {rejected.reason}")
    lines.append("")
    return lines


def shipped_lines(why: Explanation) -> list[str]:
    if not why.shipped:
        return ["No installed distribution ships a file by that name."]
    lines = ["Installed distributions that ship a file by that name:"]
    for item in why.shipped:
        state = "present" if item.present else "MISSING from disk"
        lines.append(
            f"  {item.dist.name} {item.dist.version}: {short(why.env, item.path)} ({state})"
        )
    lines.append("")
    return lines
