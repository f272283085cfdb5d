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
