"""torch's CUDA preload replayed in the loader emulation (LOADER_SPEC §4).

``start_torch`` replays the flow of a preload model (``stack.torchversions``, chosen from the
installed text by ``stack.torchsource``): each preloaded path is dlopen'ed into the emulated
interpreter process, so its SONAME is already loaded when ``torch._C``'s dependencies are
resolved.

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

import os
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

from libdoctor.disk.stat import Disk
from libdoctor.environment.distributions import Distribution
from libdoctor.loader.model import Closure, Process
from libdoctor.loader.search import Loader
from libdoctor.stack.frameworks import FrameworkBuild, Reader
from libdoctor.stack.torchsource import ModelChoice, choose_model
from libdoctor.stack.torchversions import PreloadModel

__all__ = [
    "PreloadStep",
    "TorchStart",
    "dlopen_into",
    "failure_text",
    "glob_dir",
    "replay_preloads",
    "start_torch",
    "torch_extension",
]


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

    @property
    def loaded_steps(self) -> dict[str, PreloadStep]:
        """Each library the preload loaded -> the step that loaded it (the first one)."""
        loaded: dict[str, PreloadStep] = {}
        for step in self.steps:
            if step.outcome == "loaded" and step.chosen is not None:
                loaded.setdefault(step.chosen, step)
        return loaded


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


def replay_preloads(
    builds: Sequence[FrameworkBuild],
    reader: Reader,
    sys_path: Sequence[str],
    disk: Disk,
    start: tuple[Loader, Process] | None,
) -> tuple[dict[str, ModelChoice], dict[str, TorchStart]]:
    """The preload model of each CUDA torch of BUILDS, read through READER, and (given the
    loader and the interpreter process to START from) its replay; both by metadata dir."""
    choices: dict[str, ModelChoice] = {}
    starts: dict[str, TorchStart] = {}
    for build in builds:
        if build.framework != "torch" or build.cuda is None:
            continue
        choice = choose_model(build, reader)
        choices[build.dist.metadata_dir] = choice
        if choice.model is not None and start is not None:
            loader, process = start
            starts[build.dist.metadata_dir] = start_torch(
                loader, process, choice.model, build, sys_path, disk
            )
    return choices, starts


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
