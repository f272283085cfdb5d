"""The loader's string rules: DST expansion, $ORIGIN, path lists, LD_PRELOAD splitting and
the file names Python imports as extension modules. Pure functions of their arguments.
"""

from __future__ import annotations

import re

from libdoctor.loader.model import SearchDir, Source
from libdoctor.loader.system import LoaderSystem

_EXTENSION_RE = re.compile(r"\.so$")


def _is_dst(text: str, pos: int, ref: str) -> int:
    """Length of DST REF at TEXT[pos:] (just after '$'), 0 if none (glibc's is_dst)."""
    curly = text.startswith("{", pos)
    start = pos + 1 if curly else pos
    if not text.startswith(ref, start):
        return 0
    after = start + len(ref)
    if curly:
        return len(ref) + 2 if text.startswith("}", after) else 0
    if after < len(text) and (
        (text[after].isascii() and text[after].isalnum()) or text[after] == "_"
    ):
        return 0
    return len(ref)


def expand_dst(text: str, *, origin: str | None, lib: str, platform: str | None) -> str | None:
    """Substitute $ORIGIN, $LIB, $PLATFORM (and ${...}) like glibc's _dl_dst_substitute.

    Unknown ``$NAME``s stay as written. None when a known DST has no value: the loader then
    drops the element (paths) or fails the name (DT_NEEDED).
    """
    if "$" not in text:
        return text
    values = {"ORIGIN": origin, "PLATFORM": platform, "LIB": lib}
    out: list[str] = []
    i = 0
    while i < len(text):
        dollar = text.find("$", i)
        if dollar < 0:
            out.append(text[i:])
            break
        out.append(text[i:dollar])
        for ref, value in values.items():
            length = _is_dst(text, dollar + 1, ref)
            if length:
                if value is None:
                    return None
                out.append(value)
                i = dollar + 1 + length
                break
        else:
            out.append("$")
            i = dollar + 1
    return "".join(out)


def origin_of(path: str, cwd: str) -> str:
    """$ORIGIN of an object opened as PATH: its textual dirname (a relative PATH gets CWD)."""
    if not path.startswith("/"):
        path = (cwd if cwd.endswith("/") else cwd + "/") + path
    cut = path.rfind("/")
    return path[:cut] if cut > 0 else "/"


def split_preload(value: str) -> tuple[str, ...]:
    """LD_PRELOAD / ``--preload`` as the loader splits it: on spaces and colons."""
    return tuple(part for part in re.split(r"[ :]", value) if part)


def is_extension_module(filename: str) -> bool:
    """Whether Python's importlib would load FILENAME as an extension module on Linux.

    All of importlib's EXTENSION_SUFFIXES end in ".so" (".cpython-311-x86_64-linux-gnu.so",
    ".abi3.so", ".so"); versioned names like "libx.so.1" are never imported.
    """
    return _EXTENSION_RE.search(filename) is not None


def path_list(
    system: LoaderSystem,
    raw: str,
    source: Source,
    owner: str | None,
    origin: str | None,
    separators: str,
    *,
    expand: bool = True,
) -> tuple[SearchDir, ...]:
    """glibc's fillin_rpath: empty element = cwd, trailing '/' trimmed, duplicates dropped."""
    result: list[SearchDir] = []
    seen: set[str] = set()
    elements = re.split(f"[{re.escape(separators)}]", raw)
    for element in elements:
        directory = ""
        if element:
            value = (
                expand_dst(element, origin=origin, lib=system.lib, platform=system.platform)
                if expand
                else element
            )
            if not value:
                continue
            directory = value.rstrip("/") or "/"
        if directory in seen:
            continue
        seen.add(directory)
        result.append(SearchDir(source, directory, owner, element))
    return tuple(result)
