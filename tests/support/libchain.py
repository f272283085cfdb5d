"""One small env whose extension modules load a chain of gcc-built libraries, installed by
real pip, and a system image beside it with a dpkg database: the inputs of ``why``, ``tree``
and the join of a library to the system package that owns or would provide it.

``chainy`` 1.0 ships, in ``chainy.libs/`` (each object finds the next by ``$ORIGIN``)::

    chainy/_C        -> libmid.so.1 -> libleaf.so.2 -> libabsent.so.9 (nowhere; dpkg lists it)
                     -> libsys.so.1 (only in the image's /usr/lib/x, via LD_LIBRARY_PATH)
    chainy/_other    -> libmid.so.1 (the same chain again, from a second module)
                     -> $ORIGIN/../chainy.libs/libbypath.so.3 (requested by path)
                     -> libondisk.so.4 (in the image, in a directory no search tries)
                     -> libnobody.so.8 (nowhere, listed by no package)
                     -> $ORIGIN/../nowhere/libpath.so.5 (by path, not found; dpkg lists the name)
    chainy.libs/libplugin.so.6 -> libabsent.so.9 (no module loads it: dlopen'ed, if ever)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from libdoctor.analysis.libraries import analyse_libraries
from libdoctor.environment.target import Target, discover
from libdoctor.loader.extensions import LibraryAnalysis
from support.cc import lib_bytes, require_gcc
from support.venvs import Venv, pip_install
from support.wheels import WheelFactory, extension_suffix

__all__ = ["ChainEnv", "build_chain_env"]

EXT = extension_suffix()
SYSDIR = "usr/lib/x"  # the image's library directory, relative to its root
# package -> the paths its dpkg .list names, as the system inside the image sees them
PACKAGES = {
    "libsys1": f"/{SYSDIR}/libsys.so.1",
    "libabsent9": "/usr/lib/gone/libabsent.so.9",
    "libondisk4": "/opt/elsewhere/libondisk.so.4",
    "libpath5": "/usr/lib/gone/libpath.so.5",
}


@dataclass(frozen=True)
class ChainEnv:
    venv: Venv
    image: Path  # the system image's root (its dpkg database and its /usr/lib/x)

    @property
    def libs(self) -> Path:
        return self.venv.site_packages / "chainy.libs"

    def module(self, name: str) -> Path:
        return self.venv.site_packages / "chainy" / f"{name}{EXT}"

    @property
    def environ(self) -> dict[str, str]:
        """The caller's environment: the image's library directory on LD_LIBRARY_PATH."""
        return {"LD_LIBRARY_PATH": str(self.image / SYSDIR)}

    @cached_property
    def target(self) -> Target:
        return discover(str(self.venv.path), None, {})

    @cached_property
    def analysis(self) -> LibraryAnalysis:
        """The loader's view of the env with ``environ``, from ``/`` (read, never changed)."""
        return analyse_libraries(self.target, self.environ, "/")[0]


def build_chain_env(venv: Venv, make_wheel: WheelFactory, scratch: Path) -> ChainEnv:
    """``chainy`` installed by pip into VENV; the image made under SCRATCH."""
    require_gcc()
    build, image = scratch / "build", scratch / "image"
    libs = "$ORIGIN/../chainy.libs"
    files = {
        "chainy/__init__.py": b"",
        f"chainy/_C{EXT}": lib_bytes(
            build, f"_C{EXT}", needed=["libmid.so.1", "libsys.so.1"], rpath=libs
        ),
        f"chainy/_other{EXT}": lib_bytes(
            build,
            f"_other{EXT}",
            needed=[
                "libmid.so.1",
                f"{libs}/libbypath.so.3",
                "libondisk.so.4",
                "libnobody.so.8",
                "$ORIGIN/../nowhere/libpath.so.5",
            ],
            rpath=libs,
        ),
        "chainy.libs/libmid.so.1": lib_bytes(
            build, "libmid.so.1", soname="libmid.so.1", needed=["libleaf.so.2"], runpath="$ORIGIN"
        ),
        "chainy.libs/libleaf.so.2": lib_bytes(
            build, "libleaf.so.2", soname="libleaf.so.2", needed=["libabsent.so.9"]
        ),
        "chainy.libs/libbypath.so.3": lib_bytes(build, "libbypath.so.3", soname="libbypath.so.3"),
        "chainy.libs/libplugin.so.6": lib_bytes(
            build, "libplugin.so.6", soname="libplugin.so.6", needed=["libabsent.so.9"]
        ),
    }
    pip_install(venv, make_wheel("chainy", "1.0", files))
    system = image / SYSDIR
    system.mkdir(parents=True)
    (system / "libsys.so.1").write_bytes(lib_bytes(build, "libsys.so.1", soname="libsys.so.1"))
    elsewhere = image / "opt/elsewhere"
    elsewhere.mkdir(parents=True)
    (elsewhere / "libondisk.so.4").write_bytes(b"")  # there, but where no search looks
    info = image / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    for package, path in PACKAGES.items():
        (info / f"{package}.list").write_text(f"/.\n{path}\n")
    return ChainEnv(venv, image)
