"""The static side of ``libdoctor probe``: what the loader emulation says an import maps.

``probe`` compares this prediction with what the child process really mapped; a difference is
``static-runtime-mismatch``, a bug in the emulation to report.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from libdoctor.disk.stat import Disk
from libdoctor.environment.model import Environment
from libdoctor.environment.paths import display
from libdoctor.probe.analyse import Owners, Prediction

if TYPE_CHECKING:
    from libdoctor.checks.stack import StackAnalysis
    from libdoctor.loader.extensions import LoaderContext
    from libdoctor.loader.model import Closure
    from libdoctor.stack.preload import TorchStart


class StaticPredictor:
    """What the loader emulation says a module's import maps: the ``Predictor`` of a probe.

    The interpreter's own closure, then (for torch, when its preload model applies) the
    replayed ``_load_global_deps``, then each extension module the process really mapped,
    dlopen'ed by its site-packages path into that process.
    """

    def __init__(
        self,
        env: Environment,
        disk: Disk,
        context: LoaderContext,
        python: str,
        stack: StackAnalysis | None = None,
    ) -> None:
        from libdoctor.loader.model import SearchConfig
        from libdoctor.loader.search import Loader

        self._env = env
        self._disk = disk
        self._stack = stack
        self._owners = Owners(env)
        self.loader = Loader(SearchConfig(context.system, context.ld_library_path, context.cwd))
        self.base = self.loader.start_interpreter(python)

    def __call__(self, module: str, extensions: Sequence[str]) -> Prediction:
        prediction: Prediction = defaultdict(dict)

        def add(name: str | None, path: str, how: str) -> None:
            if name:
                prediction[name].setdefault(os.path.realpath(path), how)

        for obj in self.base.objects:
            add(obj.soname or os.path.basename(obj.path), obj.path, "the interpreter's closure")
        process = self.base
        start = self._torch_start() if module.split(".")[0] == "torch" else None
        closures: list[tuple[Closure, str]] = []
        if start is not None:
            process = start.process
            closures += [(c, "torch's libtorch_global_deps") for c in start.attempts if c.ok]
            for step in start.steps:
                if step.outcome == "loaded" and step.closure is not None:
                    closures.append((step.closure, f"torch's preload of {step.pattern}"))
        for path in extensions:
            claims = self._owners.claims(path)
            textual = claims[0].path if claims else path
            closures.append((self.loader.import_extension(process, textual), "import"))
        for closure, context in closures:
            objects = {o.path: o for o in (*closure.loaded, *closure.search_list)}
            for res in closure.resolutions:
                if res.status != "found" or res.path is None:
                    continue
                found = objects.get(res.path)
                how = f"{context}: {res.via}" + (
                    f" of {display(res.via_owner)}" if res.via_owner else ""
                )
                add(os.path.basename(res.expanded), res.path, how)
                if found is not None and found.soname:
                    add(found.soname, res.path, how)
        return dict(prediction)

    def _torch_start(self) -> TorchStart | None:
        from libdoctor.stack.preload import start_torch

        if self._stack is None:
            return None
        for build in self._stack.builds:
            choice = self._stack.choices.get(build.dist.metadata_dir)
            if build.framework == "torch" and choice is not None and choice.model is not None:
                sys_path = [site.path for site in self._env.target.site_dirs]
                return start_torch(
                    self.loader, self.base, choice.model, build, sys_path, self._disk
                )
        return None


def pinned_by(stack: StackAnalysis) -> dict[str, str]:
    """metadata dir of each installed, pinned distribution -> the framework pinning it."""
    pinned: dict[str, str] = {}
    for build in stack.builds:
        for pin in stack.requirements.pins(build.dist):
            for dist in pin.installed:
                if pin.satisfied:
                    pinned.setdefault(dist.metadata_dir, f"{build.dist.name} {build.version}")
    return pinned
