"""``loader.fs.RealFS`` with the parsed-file cache: a value is kept under the identity of the
file it was parsed from, never of another one the path named a moment before."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from libdoctor.environment.parsed import ParsedFiles
from libdoctor.loader.fs import ELF, RealFS
from support.cc import compile_lib

# What the audit hook does on the next open of a path (it stays installed for the session:
# a hook cannot be removed, so it does nothing unless armed).
_ARMED: dict[str, tuple[str, str]] = {}


def _on_open(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _ARMED and args and args[0] in _ARMED:
        link, target = _ARMED.pop(args[0])
        os.symlink(target, link + ".new")
        os.replace(link + ".new", link)


sys.addaudithook(_on_open)


def _load(cache: Path) -> ParsedFiles:
    settled = time.time_ns() + 10**9  # every file written so far counts as settled
    return ParsedFiles.load(str(cache), "/prefix", ELF, settled_ns=settled)


def test_a_path_swapped_between_its_stat_and_its_read_keeps_no_wrong_value(
    tmp_path: Path,
) -> None:
    """A symlink repointed after the path's stat and before its open (an env switched to
    another build, as a deployment does): what was parsed is the new file's, and must not
    be kept as the old file's, served when the link points back to it."""
    old = compile_lib(tmp_path, "libold.so", needed=["libalpha.so.1"])
    new = compile_lib(tmp_path, "libnew.so", needed=["libbeta.so.1"])
    link = str(tmp_path / "libx.so")
    os.symlink(old, link)
    cache = tmp_path / "cache"

    parsed = _load(cache)
    _ARMED[link] = (link, str(new))  # at the read's open: the link now names the new file
    seen = RealFS(parsed).inspect(link)
    parsed.save()
    assert not _ARMED
    assert seen.elf is not None and seen.elf.needed == ("libbeta.so.1",)

    os.symlink(old, link + ".back")
    os.replace(link + ".back", link)  # back to the old build, unchanged all along
    again = RealFS(_load(cache)).inspect(link)
    assert again.elf is not None and again.elf.needed == ("libalpha.so.1",)
