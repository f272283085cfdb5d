"""glibc's open_verify: may the loader map this file, skip it, or must it stop?

A pure function of what the file system told us (an ``Inspection``) and the loader's facts.
"""

from __future__ import annotations

from typing import Literal

from libdoctor.elf.dynamic import ELFCLASS32, ELFCLASS64
from libdoctor.loader.fs import EHDR64_SIZE, Inspection
from libdoctor.loader.system import LoaderSystem

ET_EXEC = 2
ET_DYN = 3

# accept: use it; skip: try the next directory; absent: not there; fatal: the load fails.
Verdict = Literal["accept", "skip", "absent", "fatal"]


def open_verify(
    ins: Inspection, system: LoaderSystem, byteorder: str
) -> tuple[Verdict, str | None]:
    """Skip other classes and machines, stop hard at anything unloadable (BYTEORDER: the
    loader's own)."""
    if ins.kind == "missing":
        return "absent", None
    if ins.kind == "denied":
        return "skip", "permission denied"
    if ins.kind == "directory":
        return "fatal", "cannot read file data: Is a directory"
    if ins.kind == "unreadable":
        return "skip", f"cannot read file: {ins.error}"
    elf = ins.elf
    if elf is None:
        return _verify_head(ins.head, ins.error, system, byteorder)
    if system.elf_class and elf.elf_class != system.elf_class:
        return "skip", f"wrong ELF class: {_class_name(elf.elf_class)}"
    if elf.byteorder != byteorder:
        return "fatal", f"ELF file data encoding not {byteorder}-endian"
    if system.machine and elf.machine != system.machine:
        return "skip", f"wrong machine: e_machine {elf.machine}"
    if elf.elf_type not in (ET_EXEC, ET_DYN):
        return "fatal", "only ET_DYN and ET_EXEC can be loaded"
    return "accept", None


def _verify_head(
    head: bytes, error: str | None, system: LoaderSystem, byteorder: str
) -> tuple[Verdict, str | None]:
    """The header checks on raw bytes, for files read_elf could not parse."""
    if len(head) < EHDR64_SIZE:
        return "fatal", "file too short"
    if head[:4] != b"\x7fELF":
        return "fatal", "invalid ELF header"
    if system.elf_class and head[4] != system.elf_class:
        return "skip", f"wrong ELF class: {_class_name(head[4])}"
    order: Literal["little", "big"] = "little" if head[5] == 1 else "big"
    if head[5] not in (1, 2) or order != byteorder:
        return "fatal", f"ELF file data encoding not {byteorder}-endian"
    machine = int.from_bytes(head[18:20], order)
    if system.machine and machine != system.machine:
        return "skip", f"wrong machine: e_machine {machine}"
    return "fatal", error or "malformed ELF file"


def _class_name(elf_class: int) -> str:
    return {ELFCLASS32: "ELFCLASS32", ELFCLASS64: "ELFCLASS64"}.get(elf_class, f"class {elf_class}")
