"""``libdoctor why SONAME``: who needs a library, where the loader looks, what it finds."""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING, Any

from libdoctor.cli import common
from libdoctor.environment.paths import display

if TYPE_CHECKING:
    from libdoctor.loader.model import Closure, Resolution


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "why",
        help="explain how a shared library is (not) found",
        description="Who needs SONAME, where the loader would look for it (in order), what it "
        "finds there and which distribution owns it. Static: nothing is loaded.",
    )
    parser.add_argument("soname", metavar="SONAME", help="e.g. libcudnn.so.9")
    common.add_target_options(parser)
    common.add_output_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from libdoctor.checks.libraries import basename_index, check_libraries, shipped_by
    from libdoctor.cli.libs import owner_label, resolution_dict, run_analysis, short, via_label

    analysis, disk = run_analysis(args)
    env = analysis.env
    wanted = args.soname
    requests: list[tuple[Closure, Resolution]] = []
    seen: set[tuple[str | None, str]] = set()
    for closure in analysis.closures():
        for res in closure.resolutions:
            if res.kind != "needed":
                continue
            if wanted not in (res.name, os.path.basename(res.expanded)):
                continue
            if (res.requester, res.name) in seen:
                continue
            seen.add((res.requester, res.name))
            requests.append((closure, res))
    findings = [
        f
        for f in check_libraries(analysis, disk)
        if f.evidence.get("library") == wanted
        or (f.code == "elf-invalid" and os.path.basename(f.paths[0]) == wanted)
    ]
    shipped = [
        {**{k: v for k, v in item.items() if k != "_dist"}, "path": display(item["path"])}
        for item in shipped_by(env, disk, wanted, basename_index(env.claims))
    ]
    failed = any(res.status != "found" for _, res in requests)
    if args.json:
        from libdoctor.report.json import finding_dict

        common.write(
            json.dumps(
                {
                    "schema_version": 1,
                    "library": wanted,
                    "target": common.target_dict(env.target),
                    "requests": [
                        {
                            **resolution_dict(env, res),
                            "root": display(closure.root),
                            "optional": closure in analysis.optional,
                        }
                        for closure, res in requests
                    ],
                    "shipped_by": shipped,
                    "findings": [finding_dict(f) for f in findings],
                },
                indent=2,
            )
            + "\n"
        )
        return common.EXIT_FINDINGS if failed else common.EXIT_OK
    lines = [f"{wanted} in {display(env.target.prefix)}", ""]
    if not requests:
        lines.append(f"Nothing in the environment needs {wanted} (no DT_NEEDED entry names it).")
    for closure, res in requests:
        context = (
            "not loaded by any extension module (loaded on demand, if ever)"
            if closure in analysis.optional
            else f"reached from {short(env, closure.root)}"
        )
        owner = owner_label(env, res.requester)
        lines.append(
            f"needed by {short(env, res.requester)}"
            + (f" ({owner})" if owner else "")
            + f", {context}"
        )
        if res.status == "found":
            found_owner = owner_label(env, res.path)
            lines.append(
                f"  found: {display(res.path or '')} via {via_label(env, res)}"
                + (f" ({found_owner})" if found_owner else "")
            )
        else:
            lines.append(f"  NOT FOUND: {res.reason}")
        if res.searched:
            lines.append("  searched, in order:")
            for step in res.searched:
                source = step.source + (f" of {short(env, step.owner)}" if step.owner else "")
                lines.append(f"    {source:<40} {display(step.directory or '(cwd)')}")
        for rejected in res.rejected:
            lines.append(f"  passed over {display(rejected.path)}: {rejected.reason}")
        lines.append("")
    if shipped:
        lines.append("Installed distributions that ship a file by that name:")
        for item in shipped:
            state = "present" if item["present"] else "MISSING from disk"
            lines.append(
                f"  {item['name']} {item['version']}: {short(env, item['path'])} ({state})"
            )
        lines.append("")
    else:
        lines.append("No installed distribution ships a file by that name.")
    for finding in findings:
        lines.append(f"{finding.code}: {display(finding.message)}")
        if finding.fix is not None:
            lines.append(f"  fix: {display(finding.fix.command)}")
    common.write("\n".join(lines).rstrip() + "\n")
    return common.EXIT_FINDINGS if failed else common.EXIT_OK
