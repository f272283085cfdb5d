"""Reinstalling into a folder made with ``pip install --target``: what pip replaces there,
and which other distributions must come along so that nothing is lost.

pip installs into a --target folder through a scratch directory and then moves each top-level
entry of it into the folder; with ``--upgrade`` an entry that exists is deleted whole first
(``shutil.rmtree``), whoever owns the files in it. Reinstalling one distribution whose package
directory is shared (``nvidia/``, a namespace) would delete the others' files. So the
reinstall covers every distribution with files under the replaced entries, in one call, and
is refused when an entry holds files no RECORD claims (they would be lost) or is a symlink
(pip leaves those alone: nothing would be repaired).

Which entries a distribution's files are under, and who comes along, is the installer's
knowledge (``external.installers``); what is on disk there now is read here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from libdoctor.environment.distributions import Distribution
from libdoctor.environment.model import Environment
from libdoctor.environment.paths import display, is_bytecode
from libdoctor.external.installers import folder_companions

__all__ = ["FolderReinstall", "plan_folder_reinstall", "replaced_files", "shared_entries"]


def _pip_made(dist: Distribution) -> bool:
    return (dist.installer or "pip").strip().lower() == "pip"


def shared_entries(dist: Distribution, reinstall: FolderReinstall, folder: str) -> str:
    """The entries of FOLDER where DIST has files beside another of REINSTALL's, for a
    reason text."""
    return _shared(dist, reinstall.dists, reinstall.entries_by, folder)


def _shared(
    dist: Distribution,
    others: Iterable[Distribution],
    entries_by: Mapping[str, frozenset[str]],
    folder: str,
) -> str:
    theirs = set().union(*(entries_by[o.metadata_dir] for o in others if o is not dist))
    return entry_names(entries_by[dist.metadata_dir] & theirs, folder)


def replaced_files(folder: str, entries: Iterable[str]) -> list[str]:
    """Every file and symlink under those entries of FOLDER, as they are now."""
    out: list[str] = []
    for name in sorted(set(entries)):
        top = os.path.join(folder, name)
        if os.path.islink(top) or os.path.isfile(top):
            out.append(top)
            continue
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            out += [os.path.join(dirpath, n) for n in filenames]
            out += [
                os.path.join(dirpath, n)
                for n in dirnames
                if os.path.islink(os.path.join(dirpath, n))
            ]
    return out


@dataclass(frozen=True, slots=True)
class FolderReinstall:
    """One pip call that reinstalls DISTS into a --target folder without losing a file."""

    damaged: tuple[Distribution, ...]
    along: tuple[Distribution, ...]  # other owners of files under the same entries
    entries: tuple[str, ...]  # the folder's top-level entries pip replaces whole
    blocker: str | None  # why the call would lose files (or repair nothing); None: safe
    entries_by: Mapping[str, frozenset[str]]  # each one's entries, by metadata dir

    @property
    def dists(self) -> tuple[Distribution, ...]:
        return (*self.damaged, *self.along)


def plan_folder_reinstall(
    damaged: Sequence[Distribution], env: Environment, folder: str
) -> FolderReinstall:
    """The distributions one ``pip install --target FOLDER --upgrade`` must reinstall to put
    DAMAGED back without deleting another's files, and what stops it, if anything."""
    found = folder_companions(damaged, env.distributions, folder)
    dists = (*damaged, *found.along)
    entries = set().union(*(found.entries[d.metadata_dir] for d in dists))
    blocker = _blocker(dists, entries, found.placed, found.entries, folder)
    return FolderReinstall(
        tuple(damaged), found.along, tuple(sorted(entries)), blocker, found.entries
    )


def _blocker(
    dists: Sequence[Distribution],
    entries: set[str],
    placed: Mapping[str, tuple[str, ...]],
    entries_by: Mapping[str, frozenset[str]],
    folder: str,
) -> str | None:
    for dist in dists:
        if not _pip_made(dist) or dist.external or dist.record is None:
            why = "has no RECORD" if dist.record is None else f"was installed by {dist.installer}"
            shared = _shared(dist, dists, entries_by, folder)
            return (
                f"pip --target --upgrade replaces {shared} whole, "
                f"and {dist.display} (which {why}) has files there: pip cannot put them back"
            )
    links = [e for e in sorted(entries) if os.path.islink(os.path.join(folder, e))]
    if links:
        link = display(os.path.join(folder, links[0]))
        return f"{link} is a symlink: pip --target does not replace it (nothing would be repaired)"
    owned = {p for d in dists for p in placed[d.metadata_dir]}
    stray = [p for p in replaced_files(folder, entries) if p not in owned and not is_bytecode(p)]
    if stray:
        entry = entry_names([os.path.relpath(stray[0], folder).split(os.sep, 1)[0]], folder)
        return (
            f"pip --target --upgrade replaces {entry} whole, and {len(stray)} file(s) in what "
            f"it replaces belong to no distribution (first: {display(stray[0])}): they would "
            "be lost"
        )
    return None


def entry_names(entries: Iterable[str], folder: str) -> str:
    """'nvidia/, bin/ and 2 more': top-level entries, a directory with its slash."""
    listed = sorted(entries)
    shown = [n + ("/" if os.path.isdir(os.path.join(folder, n)) else "") for n in listed[:3]]
    return ", ".join(shown) + (f" and {len(listed) - 3} more" if len(listed) > 3 else "")
