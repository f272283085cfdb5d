"""One file's dependency tree: the load Python would do when it imports that file.

The root is named by the user either as a path or as an extension module's dotted name
(``torch._C``); a dotted name is looked up in the site dirs as Python's import would find it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from libdoctor.analysis.libraries import SystemOwners, analyse_libraries, system_owners
from libdoctor.environment.model import Environment
from libdoctor.environment.ospackages import SystemPackages
from libdoctor.environment.target import Target
from libdoctor.errors import LibdoctorError
from libdoctor.loader.extensions import LibraryAnalysis, is_python_extension
from libdoctor.loader.model import Closure


@dataclass(frozen=True, slots=True)
class DependencyTree:
    """ROOT's load into the interpreter's process: every request, as the loader answers it."""

    root: str
    closure: Closure
    env: Environment = field(compare=False, repr=False)
    system: SystemOwners = field(default_factory=SystemOwners, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.closure.ok


def find_root(analysis: LibraryAnalysis, text: str) -> str:
    """The file TEXT names: a path, or the first extension module of that dotted name."""
    if os.sep in text or os.path.exists(text):
        if not os.path.isfile(text):
            raise LibdoctorError(f"{text} is not a file")
        return os.path.abspath(text)
    parts = text.split(".")
    matches: list[str] = []
    for site in analysis.env.target.site_packages:
        directory = os.path.join(site, *parts[:-1])
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in sorted(names):
            if name.split(".", 1)[0] == parts[-1] and name.endswith(".so"):
                path = os.path.join(directory, name)
                if is_python_extension(path):
                    matches.append(path)
    if not matches:
        raise LibdoctorError(
            f"no extension module {text} in {', '.join(analysis.env.target.site_packages)}"
        )
    return matches[0]


def dependency_tree(
    target: Target,
    text: str,
    environ: Mapping[str, str],
    cwd: str,
    *,
    packages: SystemPackages | None = None,
) -> DependencyTree:
    """The tree of the file TEXT names, loaded into the process after the interpreter starts;
    each library outside the environment with its system package (see ``explain_library``)."""
    analysis, _ = analyse_libraries(target, environ, cwd)
    root = find_root(analysis, text)
    closure = analysis.loader.import_extension(analysis.process, root)
    system = system_owners(
        analysis.env,
        (r for r in closure.resolutions if r.kind == "needed"),
        packages,
    )
    return DependencyTree(root, closure, analysis.env, system)
