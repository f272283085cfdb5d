"""Classifying paths by name: bytecode, native libraries, extension modules."""

from __future__ import annotations

import os
import re

NATIVE_ROWS = ".so"  # in every path is_native() accepts on Linux: RECORD rows worth parsing
_SHARED_LIB = re.compile(r"\.(so|dylib|pyd)$|\.so\.[0-9][0-9A-Za-z.]*$")


def is_bytecode(path: str) -> bool:
    """Bytecode pip may never have written (``__pycache__/*.pyc``)."""
    return path.endswith(".pyc") and f"{os.sep}__pycache__{os.sep}" in path


def is_native(path: str) -> bool:
    """A shared library or extension module, judged by its name (``libx.so.9``, ``_C.abi3.so``)."""
    return _SHARED_LIB.search(os.path.basename(path)) is not None


def display(path: str) -> str:
    """A path safe to print or put in JSON: undecodable bytes become backslash escapes."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def realpath_under(root: str, path: str) -> str:
    """PATH (as the system inside ROOT sees it) resolved inside ROOT, returned as a path on
    this machine: every symlink followed with ROOT as ``/``, so an absolute link
    (``/usr/lib/...``) or a ``..`` never leaves ROOT for the host's files. ROOT ``/`` is plain
    ``os.path.realpath``."""
    if root in ("", "/"):
        return os.path.realpath(path)
    base = os.path.normpath(root)
    todo = [p for p in path.split("/") if p][::-1]
    done: list[str] = []
    hops = 0
    while todo:
        part = todo.pop()
        if part == ".":
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        here = os.path.join(base, *done, part)
        try:
            link = os.readlink(here)
        except OSError:
            done.append(part)
            continue
        hops += 1
        if hops > 40:  # the kernel's ELOOP limit: leave the rest unresolved
            done.append(part)
            continue
        if link.startswith("/"):
            done = []
        todo.extend([p for p in link.split("/") if p][::-1])
    return os.path.join(base, *done)


def name_inside(root: str, path: str) -> str:
    """PATH, a path on this machine, as the system mounted at ROOT names it (``ROOT/usr/x``
    -> ``/usr/x``); a path outside ROOT is taken as already named so."""
    root = os.path.normpath(root)
    if root == "/" or not (path == root or path.startswith(root + "/")):
        return path
    return "/" + path[len(root) :].lstrip("/")
