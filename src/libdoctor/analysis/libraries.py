"""The loader's view of a target as the user's next ``python`` would get it.

``why`` and ``tree`` both start here: model the environment, then emulate every extension
module's load with the loader inputs (``LD_LIBRARY_PATH``, working directory) of the caller.
"""

from __future__ import annotations

from collections.abc import Mapping

from libdoctor.analysis.run import loader_context
from libdoctor.disk.stat import RealDisk
from libdoctor.environment.model import build_environment
from libdoctor.environment.target import Target
from libdoctor.loader.extensions import LibraryAnalysis, analyse


def analyse_libraries(
    target: Target, environ: Mapping[str, str], cwd: str
) -> tuple[LibraryAnalysis, RealDisk]:
    """The library analysis of TARGET, and the disk view it read (the checks read it again)."""
    env = build_environment(target)
    disk = RealDisk()
    return analyse(env, disk, loader_context(environ, cwd)), disk
