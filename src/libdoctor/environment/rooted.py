"""The files of a system mounted at a directory (``--root``: an image, a chroot), read as
that system would read them, never the host's.

Every reader of a target's files (its layout and ``pyvenv.cfg``, dist-info dirs and RECORD,
conda-meta, the disk's stats and listings, the hashes, the files the stack checks read)
goes through one ``Rooted``. For ``/``, the running system, each method is the plain ``os``
call on the path as given. For an image at DIR, a path (one on this machine, under DIR) is
first resolved with DIR as ``/``: every symlink on the way, absolute ones and ``..``
included, is followed inside DIR, so ``x.dist-info -> /home/me/x.dist-info`` in the image
reads ``DIR/home/me/x.dist-info`` (or nothing), never the host's file of that name. What
is left is a path without links, so the kernel follows none. The loader's ``RootedFS``
resolves its paths the same way.

(A link swapped while libdoctor reads is not guarded against: the image is taken to hold
still. ``openat2(RESOLVE_IN_ROOT)`` would, and Python does not offer it.)
"""

from __future__ import annotations

import os
import stat
from typing import IO, Any

from libdoctor.environment.paths import name_inside, realpath_under

__all__ = ["HOST", "Rooted"]


class Rooted:
    """Paths under ROOT, resolved and read as the system inside ROOT sees them."""

    def __init__(self, root: str = "/") -> None:
        self.root = os.path.normpath(root) if root not in ("", "/") else "/"
        self._dirs: dict[str, str] = {}  # a directory as named -> where it really is

    @property
    def is_host(self) -> bool:
        return self.root == "/"

    def host(self, path: str | os.PathLike[str]) -> str:
        """PATH with every symlink resolved inside the root: what the kernel may be given.
        The running system's path as it is (the kernel resolves it); a path outside the
        root is taken as the root's (``/usr/x`` -> ``ROOT/usr/x``)."""
        path = os.fspath(path)
        if self.root == "/":
            return path
        if not path.startswith(self.root + "/") or not _plain(path):
            return realpath_under(self.root, name_inside(self.root, path))
        head, _, leaf = path.rpartition("/")
        here = self._dir(head) + "/" + leaf
        if os.path.islink(here):  # its parent holds no link: this lstat is the root's
            return realpath_under(self.root, name_inside(self.root, here))
        return here

    def _dir(self, directory: str) -> str:
        found = self._dirs.get(directory)
        if found is None:
            found = self.root if len(directory) <= len(self.root) else self.host(directory)
            self._dirs[directory] = found
        return found

    def _entry(self, path: str | os.PathLike[str]) -> str:
        """PATH with its directory resolved and its last part as it is (for lstat)."""
        path = os.fspath(path)
        if self.root == "/":
            return path
        head, _, leaf = os.path.normpath(path).rpartition("/")
        return os.path.join(self.host(head or "/"), leaf)

    def open(self, path: str | os.PathLike[str], mode: str = "rb", **kwargs: Any) -> IO[Any]:
        return open(self.host(path), mode, **kwargs)

    def read(self, path: str | os.PathLike[str]) -> bytes:
        with self.open(path) as handle:
            data: bytes = handle.read()
        return data

    def stat(self, path: str | os.PathLike[str]) -> os.stat_result:
        return os.stat(self.host(path))

    def listdir(self, path: str | os.PathLike[str]) -> list[str]:
        return os.listdir(self.host(path))

    def isdir(self, path: str | os.PathLike[str]) -> bool:
        return self._mode(path, stat.S_ISDIR)

    def isfile(self, path: str | os.PathLike[str]) -> bool:
        return self._mode(path, stat.S_ISREG)

    def exists(self, path: str | os.PathLike[str]) -> bool:
        return self._mode(path, lambda _mode: True)

    def islink(self, path: str | os.PathLike[str]) -> bool:
        return os.path.islink(self._entry(path))

    def lexists(self, path: str | os.PathLike[str]) -> bool:
        return os.path.lexists(self._entry(path))

    def readlink(self, path: str | os.PathLike[str]) -> str:
        return os.readlink(self._entry(path))

    def realpath(self, path: str | os.PathLike[str]) -> str:
        """Where PATH really is, as a path on this machine (under the root)."""
        return os.path.realpath(path) if self.root == "/" else self.host(path)

    def _mode(self, path: str | os.PathLike[str], test: Any) -> bool:
        try:
            return bool(test(self.stat(path).st_mode))
        except (OSError, ValueError):
            return False


def _plain(path: str) -> bool:
    """No ``.``, ``..`` or empty part: each directory can be resolved once, and kept."""
    return (
        "//" not in path
        and not path.endswith("/")
        and not any(part in (".", "..") for part in path.split("/") if part.startswith("."))
    )


HOST = Rooted()
