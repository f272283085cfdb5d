"""The Python API: ``check``, ``plan_uninstall`` and ``snapshot`` as values, never printed.

The CLI's ``check``, ``plan uninstall`` and ``snapshot`` are thin clients of these. Nothing
here prints or exits; a failure is a ``LibdoctorError`` with a one-line message. ``import
libdoctor`` reaches this module lazily (``libdoctor.__getattr__``), so importing the package
stays cheap and the analysis stack loads on the first call.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from libdoctor.environment.target import Target, discover
from libdoctor.errors import LibdoctorError

if TYPE_CHECKING:
    from libdoctor.analysis import run
    from libdoctor.analysis.shown import Diagnosis
    from libdoctor.analysis.snapshot import Snapshot
    from libdoctor.disk.hashing import ProgressFactory
    from libdoctor.findings import Finding
    from libdoctor.whatif.plan import Plan

TargetLike = str | os.PathLike[str] | Target | None


@dataclass(frozen=True, slots=True)
class Report:
    """One ``check``: the findings shown (as ``check`` shows them), their root causes
    (``diagnosis``, grouped once, as the report is made: every format renders these) and
    what was read."""

    target: Target
    findings: tuple[Finding, ...]
    distributions: int
    files: int
    hashing: Mapping[str, int] | None = None
    run: run.Report | None = field(default=None, compare=False, repr=False)
    diagnosis: Diagnosis = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        from libdoctor.analysis.shown import Diagnosis

        object.__setattr__(self, "diagnosis", Diagnosis.of(self.findings))

    def to_json(self) -> dict[str, Any]:
        """The document ``libdoctor check --json`` prints, as a dict."""
        from libdoctor.analysis.shown import check_document
        from libdoctor.document import target_dict

        if self.run is None:
            raise LibdoctorError("this report holds no run to render (internal error)")
        return check_document(self.run, self.diagnosis, target_dict(self.target))


def resolve_target(
    target: TargetLike = None,
    python: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Target:
    """TARGET as the CLI finds it, without argparse: a ``Target`` as it is, an environment
    (or site-packages) directory, or an interpreter (a file); with neither, PYTHON, else
    ``$VIRTUAL_ENV``, ``$CONDA_PREFIX``, the running interpreter."""
    if isinstance(target, Target):
        return target
    environ = os.environ if environ is None else environ
    if target is not None and python is None and Path(target).is_file():
        return discover(None, os.fspath(target), environ)
    return discover(None if target is None else os.fspath(target), python, environ)


def check(
    target: TargetLike = None,
    deep: bool = False,
    *,
    python: str | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
    show_all: bool = False,
    libraries: bool = True,
    cache_dir: str | None = None,
    workers: int | None = None,
    progress: ProgressFactory | None = None,
    reuse: bool = False,
) -> Report:
    """Every check on TARGET (read only), as ``libdoctor check`` runs it. DEEP: also compare
    file hashes. CACHE_DIR: where digests and parsed RECORDs and ELF files are kept between
    runs (``libdoctor check`` passes the user's cache dir), None for no cache. SELECT, IGNORE
    and SHOW_ALL pick the findings shown as ``--select``, ``--ignore`` and ``--all`` do.
    REUSE (with a CACHE_DIR): the findings of the last such run, if nothing it read has
    changed since (``analysis.reuse``); its ``run`` then holds no model (``environment``)."""
    if reuse and cache_dir is not None:
        from libdoctor.analysis.reuse import run_check
    else:
        from libdoctor.analysis.overlap import run_check
    from libdoctor.analysis.run import CheckOptions, filter_findings, loader_context

    found = resolve_target(target, python)
    options = CheckOptions(
        deep=deep,
        cache_dir=cache_dir,
        workers=workers,
        libraries=functools.partial(loader_context, dict(os.environ), os.getcwd(), found)
        if libraries
        else None,
        caches=dict(os.environ) if found.root == "/" else None,  # not an image's: the host's
    )
    report = run_check(found, options, progress=progress)
    shown = filter_findings(
        report.findings,
        None if select is None else frozenset(select),
        frozenset(ignore),
        show_all,
    )
    return Report(
        target=found,
        findings=tuple(shown),
        distributions=report.distributions,
        files=report.files,
        hashing=report.hashing,
        run=report,
    )


def plan_uninstall(
    target: TargetLike,
    names: Sequence[str],
    *,
    python: str | None = None,
    libraries: bool = True,
) -> Plan:
    """``pip uninstall NAMES`` on TARGET predicted, nothing written: ``Plan.verdict``
    (``safe`` or ``breaks``), ``Plan.breaks`` (the new errors), the repair steps."""
    from libdoctor.analysis.run import loader_context
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.whatif.plan import plan_uninstall as plan

    if isinstance(names, str):
        names = [names]
    if not names:
        raise LibdoctorError("plan_uninstall: name at least one distribution")
    found = resolve_target(target, python)
    context = loader_context(dict(os.environ), os.getcwd(), found) if libraries else None
    return plan(build_environment(found), RealDisk(), list(names), context)


def snapshot(
    target: TargetLike = None,
    deep: bool = False,
    *,
    python: str | None = None,
    cache_dir: str | None = None,
    node: str | None = None,
    progress: ProgressFactory | None = None,
    reuse: bool = False,
) -> Snapshot:
    """TARGET's distributions, files, libraries and findings as ``libdoctor snapshot``
    records them (``to_document``/``encode`` of ``libdoctor.analysis.snapshot`` give its
    JSON). NODE: the machine's name (default: ``$SLURMD_NODENAME``, else the host name).
    CACHE_DIR: as ``check``'s, where digests (with DEEP) and parsed RECORDs and ELF files
    are kept between runs; None for no cache. REUSE (with a CACHE_DIR): as
    ``encoded_snapshot``'s, read back."""
    from libdoctor.analysis.snapshot import decode, node_name, snapshot_target

    if reuse and cache_dir is not None:
        data = encoded_snapshot(
            target, deep, python=python, cache_dir=cache_dir, node=node, progress=progress
        )
        return decode(data, "the stored snapshot")
    found = resolve_target(target, python)
    return snapshot_target(
        found,
        node=node_name(os.environ) if node is None else node,
        deep=deep,
        cache_dir=cache_dir,
        environ=os.environ,
        progress=progress,
    )


def encoded_snapshot(
    target: TargetLike = None,
    deep: bool = False,
    *,
    python: str | None = None,
    cache_dir: str | None = None,
    node: str | None = None,
    progress: ProgressFactory | None = None,
) -> bytes:
    """``snapshot``'s document as ``libdoctor snapshot`` writes it, plain (``gzipped_document``
    of ``libdoctor.analysis.snapshot`` gives its ``.gz``). With a CACHE_DIR, the bytes the
    last such run gave if nothing it read has changed since (``analysis.reuse``): the same
    bytes a new run would give."""
    from libdoctor.analysis.snapshot import encoded_snapshot as encoded
    from libdoctor.analysis.snapshot import node_name

    return encoded(
        resolve_target(target, python),
        node=node_name(os.environ) if node is None else node,
        deep=deep,
        cache_dir=cache_dir,
        environ=os.environ,
        progress=progress,
    )
