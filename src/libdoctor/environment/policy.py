"""The system libraries a manylinux or musllinux wheel may need without shipping them.

The lists are auditwheel's (``src/auditwheel/policy/manylinux-policy.json`` and
``musllinux-policy.json``, their ``lib_whitelist`` entries; auditwheel is MIT-licensed,
Copyright (c) 2016 Robert T. McGibbon): the libraries every system of the policy provides,
which auditwheel leaves out of a repaired wheel. Only the sonames are kept, per policy.

A wheel's libraries are judged against its family's whole list (every manylinux policy's
names for a manylinux wheel): a system new enough to install a newer wheel of the family has
them too, and a library older policies leave out (``libexpat.so.1`` before manylinux2010,
``libmvec.so.1`` before manylinux_2_24) is still there on the machine that installs an old
wheel today. A ``linux_*`` wheel promises nothing: it is not judged (None). The NVIDIA
driver's libraries come with the driver, never from pip (``is_driver_library``).

Healthy wheels on PyPI take more from the system than any policy promises (PySide6's Qt
modules ``libxkbcommon.so.0``, others X11, EGL, fontconfig, Kerberos, OpenSSL, the compiler's
OpenMP): ``is_common_system_library`` names those families, which a machine with a desktop
or a distribution's usual packages has. Not auditwheel's data: ours, from the wheels seen.
"""

from __future__ import annotations

import os
import re

__all__ = [
    "DRIVER_LIBRARY",
    "POLICIES",
    "is_common_system_library",
    "is_driver_library",
    "system_libraries",
]

# Libraries the NVIDIA driver installs on the host; pip never provides them.
DRIVER_LIBRARY = re.compile(
    r"^lib(cuda|nvidia-[\w.+-]+|nvcuvid|nvoptix|cudadebugger|nvidia)\.so(\.[0-9.]+)?$"
)

_MANYLINUX_2_5 = (
    "libGL.so.1", "libICE.so.6", "libSM.so.6", "libX11.so.6", "libXext.so.6",
    "libXrender.so.1", "libanl.so.1", "libatomic.so.1", "libc.so.6", "libdl.so.2",
    "libgcc_s.so.1", "libglib-2.0.so.0", "libgobject-2.0.so.0", "libgthread-2.0.so.0",
    "libm.so.6", "libnsl.so.1", "libpthread.so.0", "libresolv.so.2", "librt.so.1",
    "libstdc++.so.6", "libutil.so.1", "libz.so.1",
)  # fmt: skip
_MANYLINUX_2_12 = (*_MANYLINUX_2_5, "libexpat.so.1")
_MANYLINUX_2_24 = (*_MANYLINUX_2_12, "libmvec.so.1")
_MUSLLINUX = ("libc.so", "libz.so.1")

POLICIES: dict[str, tuple[str, ...]] = {
    "manylinux_2_5": _MANYLINUX_2_5,  # manylinux1
    "manylinux_2_12": _MANYLINUX_2_12,  # manylinux2010
    "manylinux_2_17": _MANYLINUX_2_12,  # manylinux2014
    # 2_24 to 2_41 (the newest auditwheel knows) hold the same names
    "manylinux_2_24": _MANYLINUX_2_24,
    "musllinux_1_1": _MUSLLINUX,
    "musllinux_1_2": _MUSLLINUX,
}

# The loaders themselves: an object may name the program interpreter as DT_NEEDED (glibc's
# own libraries do), and it is always loaded first.
_LOADERS = (
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "ld-linux.so.2", "ld-linux-armhf.so.3",
    "ld64.so.2", "ld64.so.1", "ld-linux-riscv64-lp64d.so.1",
)  # fmt: skip
_MUSL_LOADERS = (
    "ld-musl-x86_64.so.1", "ld-musl-aarch64.so.1", "ld-musl-i386.so.1", "ld-musl-armhf.so.1",
    "ld-musl-ppc64le.so.1", "ld-musl-s390x.so.1", "ld-musl-riscv64.so.1",
)  # fmt: skip
# musl's libc as Alpine names it (``-soname,libc.musl-$CARCH.so.1``), the loader under
# another name: what every module built in the musllinux images (Alpine) needs, where
# auditwheel's list says ``libc.so``.
_ALPINE_LIBC = tuple(
    f"libc.musl-{arch}.so.1"
    for arch in ("x86_64", "aarch64", "x86", "armhf", "armv7", "ppc64le", "s390x", "riscv64",
                 "loongarch64")
)  # fmt: skip
_FAMILIES = {
    "manylinux": frozenset(name for key, names in POLICIES.items()
                           if key.startswith("manylinux") for name in names) | set(_LOADERS),
    "musllinux": frozenset(_MUSLLINUX) | set(_MUSL_LOADERS) | set(_ALPINE_LIBC),
}  # fmt: skip
_LEGACY = ("manylinux1", "manylinux2010", "manylinux2014")
_COMMON_SYSTEM = re.compile(
    r"^lib("
    r"X[\w-]*|xcb[\w-]*|xkbcommon[\w-]*|wayland-[\w-]+|EGL|GLX|GLESv[12][\w]*|OpenGL"
    r"|GLU|GLdispatch|OpenCL|drm|gbm|va[\w-]*|vdpau|fontconfig|freetype|harfbuzz|dbus-1"
    r"|asound|pulse[\w-]*|udev|systemd|gtk-[\w.-]+|gdk[\w.-]*|cairo[\w-]*|pango[\w.-]*"
    r"|atk[\w.-]*|gio-2\.0|gmodule-2\.0|gst[\w.-]+|cups|gssapi_krb5|krb5[\w]*|k5crypto"
    r"|com_err|ssl|crypto|crypt|gomp|numa|ibverbs|rdmacm|mlx[45]|uuid|selinux|cap|bz2|lzma"
    r"|zstd|ffi|xml2|png16|jpeg|tiff|sqlite3|readline|ncursesw?|tinfo|nsl|tirpc|vulkan"
    r"|ze_loader|usb-1\.0|jack"
    r")\.so(\.[0-9.]+)?$"
)


def system_libraries(wheel: str) -> frozenset[str] | None:
    """The sonames the wheel of this file name may take from the system (its platform tags:
    ``...-manylinux_2_17_x86_64.manylinux2014_x86_64.whl``); None when no tag is of a
    policy (``linux_x86_64``, ``any``)."""
    names: set[str] = set()
    judged = False
    for tag in wheel.removesuffix(".whl").rpartition("-")[2].split("."):
        family = "musllinux" if tag.startswith("musllinux_") else "manylinux"
        if tag.startswith(("manylinux_", "musllinux_", *_LEGACY)):
            names |= _FAMILIES[family]
            judged = True
    return frozenset(names) if judged else None


def is_driver_library(name: str) -> bool:
    return DRIVER_LIBRARY.match(os.path.basename(name)) is not None


def is_common_system_library(name: str) -> bool:
    """Whether NAME is of a family of system libraries healthy wheels take from the system
    beyond their policy (the module's docstring)."""
    return _COMMON_SYSTEM.match(name) is not None
