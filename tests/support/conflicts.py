"""Wheels that share paths, for the guarded install and the guard (issue 14).

``ldt-a`` and ``ldt-b`` claim ``shared/data.bin`` with different bytes: installing one over
the other overwrites the other's file, and only one of them can be whole. ``ldt-x`` and
``ldt-y`` share ``common/same.txt`` byte for byte: upgrading ``ldt-x`` to 2.0, which no longer
ships it, deletes ``ldt-y``'s copy (pip uninstalls 1.0 first); reinstalling ``ldt-y`` puts it
back. ``ldt-alone`` shares nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from support.wheels import WheelFactory

__all__ = ["ConflictWheels", "build_conflict_wheels"]


@dataclass(frozen=True)
class ConflictWheels:
    a: Path
    b: Path
    x1: Path
    x2: Path
    y: Path
    alone: Path
    find_links: Path  # --find-links for all of them


def build_conflict_wheels(make: WheelFactory) -> ConflictWheels:
    return ConflictWheels(
        a=make("ldt-a", "1.0", {"apkg/__init__.py": b"", "shared/data.bin": b"A" * 64}),
        b=make("ldt-b", "1.0", {"bpkg/__init__.py": b"", "shared/data.bin": b"B" * 80}),
        x1=make("ldt-x", "1.0", {"xpkg/__init__.py": b"", "common/same.txt": b"same\n"}),
        x2=make("ldt-x", "2.0", {"xpkg/__init__.py": b"V = 2\n"}),
        y=make("ldt-y", "1.0", {"ypkg/__init__.py": b"", "common/same.txt": b"same\n"}),
        alone=make("ldt-alone", "1.0", {"alone/__init__.py": b"A = 1\n"}),
        find_links=make.dest,
    )
