"""The operating system's own packages: which dpkg (or rpm) package owns a file outside the env.

A library the loader finds in ``/usr/lib/x86_64-linux-gnu`` belongs to no RECORD; its owner is
in the distribution's package database. dpkg keeps one ``info/<package>.list`` per package
(every path it installed, symlinks and directories included) and ``info/<package>.md5sums``
(the md5 of each regular file, relative to ``/``). Reading all ``.list`` files of a Debian
system (~700 files, 120,000 paths) and indexing its shared libraries by basename costs
~0.06 s, so it is done lazily, once, when the first library is asked about; ``check`` never
asks.

Paths are matched as the database writes them. On a merged-``/usr`` system ``/lib`` is a
symlink to ``usr/lib`` and a package may list either spelling (``libc6`` lists
``/lib/x86_64-linux-gnu/libc.so.6``, ``libstdc++6`` lists ``/usr/lib/...``), so each path is
also tried under the other spelling when the root's top directory really is that symlink.

Everything is read under ROOT (``/`` or a mounted image): paths given are paths as the system
inside ROOT sees them. rpm is asked only when an ``rpm`` binary exists and ROOT holds an rpm
database; it is never required.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Literal

from libdoctor.environment.paths import name_inside, realpath_under

Manager = Literal["dpkg", "rpm"]
MERGED_TOPS = ("lib", "lib32", "lib64", "libx32", "bin", "sbin")


@dataclass(frozen=True, slots=True)
class SystemPackage:
    """PATH as the package NAME of MANAGER lists it; INTACT is the md5 verdict (None: not
    checked or not recorded)."""

    manager: Manager
    name: str
    path: str
    intact: bool | None = None

    @property
    def label(self) -> str:
        state = {True: ", md5 matches", False: ", BYTES DIFFER from the package", None: ""}
        return f"{self.manager}: {self.name}{state[self.intact]}"

    def evidence(self) -> dict[str, object]:
        return {
            "manager": self.manager,
            "name": self.name,
            "path": self.path,
            "intact": self.intact,
        }


@dataclass(slots=True)
class SystemPackages:
    """The package databases under ROOT, read lazily and only for the paths asked; DEEP
    checks each owned file's bytes against the md5 its package recorded."""

    root: str = "/"
    deep: bool = False
    rpm: str | None = field(default_factory=lambda: shutil.which("rpm"))
    _index: dict[str, list[tuple[str, str]]] | None = None
    _md5: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def info_dir(self) -> str:
        return os.path.join(self.root, "var", "lib", "dpkg", "info")

    def inside(self, path: str) -> str:
        """PATH (as the system inside ROOT sees it) on this machine."""
        return os.path.join(self.root, path.lstrip("/"))

    def seen_from_inside(self, path: str) -> str:
        """A path on this machine as the system inside ROOT names it."""
        return name_inside(self.root, path)

    def spellings(self, path: str) -> list[str]:
        """PATH and its merged-/usr twin (``/lib/x`` and ``/usr/lib/x``), the twin only when
        ROOT's top directory really is the link to ``usr/``."""
        path = os.path.normpath(path)
        parts = path.lstrip("/").split("/")
        if len(parts) > 2 and parts[0] == "usr" and parts[1] in MERGED_TOPS:
            top, twin = parts[1], "/" + "/".join(parts[1:])
        elif len(parts) > 1 and parts[0] in MERGED_TOPS:
            top, twin = parts[0], "/usr" + path
        else:
            return [path]
        try:
            link = os.readlink(self.inside(top))
        except OSError:
            return [path]
        return [path, twin] if link.strip("/") == "usr/" + top else [path]

    def owner(self, path: str) -> SystemPackage | None:
        """The package that lists PATH, with its md5 verdict when DEEP; None when no
        database knows it."""
        spellings = self.spellings(path)
        for package, listed in self.index().get(os.path.basename(spellings[0]), ()):
            if listed in spellings:
                hit = SystemPackage("dpkg", package, listed)
                return self.verified(hit) if self.deep else hit
        return self.rpm_owner(path)

    def providers(self, basename: str) -> list[SystemPackage]:
        """Every package whose list names a file called BASENAME (a library's would-be
        provider when the loader cannot find it)."""
        return [SystemPackage("dpkg", p, path) for p, path in self.index().get(basename, ())]

    def index(self) -> dict[str, list[tuple[str, str]]]:
        """Every shared library path (a name holding ``.so``) of every ``.list`` of the dpkg
        database by basename, read once: the other 90% of the paths are never asked for."""
        if self._index is None:
            self._index = {}
            try:
                names = sorted(os.listdir(self.info_dir))
            except OSError:
                names = []
            for name in names:
                if name.endswith(".list"):
                    self.add_list(name[: -len(".list")])
        return self._index

    def add_list(self, package: str) -> None:
        assert self._index is not None
        try:
            with open(os.path.join(self.info_dir, package + ".list"), "rb") as handle:
                data = handle.read().decode(errors="surrogateescape")
        except OSError:
            return
        index = self._index
        for line in data.splitlines():
            if ".so" in line and line.startswith("/"):
                index.setdefault(line.rpartition("/")[2], []).append((package, line))

    def verified(self, hit: SystemPackage) -> SystemPackage:
        """HIT with its bytes compared to the md5 dpkg recorded (a symlink: its target's)."""
        real = realpath_under(self.root, hit.path)
        relative = self.seen_from_inside(real)
        sums = self.md5sums(hit.name)
        for spelling in self.spellings(relative):
            expected = sums.get(spelling.lstrip("/"))
            if expected is not None:
                return SystemPackage(hit.manager, hit.name, hit.path, md5_of(real) == expected)
        return hit

    def md5sums(self, package: str) -> dict[str, str]:
        if package not in self._md5:
            sums: dict[str, str] = {}
            try:
                with open(os.path.join(self.info_dir, package + ".md5sums"), "rb") as handle:
                    for line in handle.read().decode(errors="surrogateescape").splitlines():
                        digest, _, path = line.partition("  ")
                        sums[path] = digest
            except OSError:
                pass
            self._md5[package] = sums
        return self._md5[package]

    def rpm_owner(self, path: str) -> SystemPackage | None:
        """``rpm -qf`` of PATH under ROOT, when an rpm binary and an rpm database exist."""
        if self.rpm is None or not any(
            os.path.isdir(self.inside(d)) for d in ("var/lib/rpm", "usr/lib/sysimage/rpm")
        ):
            return None
        argv = [self.rpm, "--root", self.root, "-qf", "--qf", "%{NAME}-%{VERSION}-%{RELEASE}\n"]
        try:
            done = subprocess.run(
                [*argv, path], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return None
        name = done.stdout.strip().splitlines()[0] if done.stdout.strip() else ""
        if done.returncode != 0 or not name or " " in name:
            return None
        return SystemPackage("rpm", name, path)


def md5_of(path: str) -> str | None:
    digest = hashlib.md5(usedforsecurity=False)
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()
