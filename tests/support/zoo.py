"""The zoo: one real venv that real pip installed into and that was then broken on purpose.

Each scenario has its own distributions (all named ``ldt-*``, plus ``foo.bar``), so a test
looks only at the findings that name them. ``build_zoo`` installs the wheels (two rounds: the
second overwrites paths of the first) and then breaks files the way a crash, an editor or a
careless copy would. The test modules build it once each, in a module-scoped fixture.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from support.venvs import Venv, pip_install
from support.wheels import (
    WheelFactory,
    extension_suffix,
    native_tag,
    record_hash,
    record_line,
    sample_elf,
)

EXT = extension_suffix()  # ".cpython-311-x86_64-linux-gnu.so"
NATIVE = native_tag()  # "cp311-cp311-linux_x86_64"


def lib(tag: str) -> bytes:
    """A valid ELF whose trailing bytes carry TAG: equal-length tags give equal-size files."""
    return sample_elf() + b"\0LDTEST:" + tag.encode("ascii") + b"\0"


def rewrite_record_row(dist_info: Path, rel: str, data: bytes) -> None:
    """Give REL's RECORD row the hash and size of DATA, as an installer writing DATA would."""
    record = dist_info / "RECORD"
    lines = record.read_text("utf-8").splitlines()
    lines = [record_line(rel, data) if line.split(",")[0] == rel else line for line in lines]
    record.write_text("\n".join(lines) + "\n", "utf-8")


def append_record_rows(dist_info: Path, *rows: str) -> None:
    with (dist_info / "RECORD").open("a", encoding="utf-8") as handle:
        handle.write("".join(row + "\n" for row in rows))


# Malformed RECORD rows, each appended to its own distribution's RECORD. "{p}" is its package dir.
EMPTY_SHA = record_hash(b"")
MALFORMED_ROWS: dict[str, str | None] = {
    "two-columns": "{p}/two.py,sha256=abc",
    "four-columns": "{p}/__init__.py," + EMPTY_SHA + ",0,extra",
    "hash-without-algorithm": "{p}/noalgo.py,47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0",
    "hash-not-base64": "{p}/badb64.py,sha256=!!!not*base64!!!,0",
    "hash-wrong-length": "{p}/short.py,sha256=AAAA,0",
    "size-not-integer": "{p}/sizeword.py," + EMPTY_SHA + ",zero",
    "size-negative": "{p}/sizeneg.py," + EMPTY_SHA + ",-5",
    "empty-path": "," + EMPTY_SHA + ",0",
    "no-record-file": None,  # RECORD deleted
}

ESCAPE_ROWS = (
    "../../../../etc/passwd",  # <zoo root>/etc/passwd: exists, wrong size
    "../../../../ldt-escape-sentinel/libesc.so",  # does not exist
)
BAD_NAME = b"lib\xff\xfe.so"  # not UTF-8
BAD_DIR = b"\xfejunk"


@dataclass(frozen=True)
class Zoo:
    root: Path
    venv: Venv
    abs_sentinel: Path

    @property
    def site(self) -> Path:
        return self.venv.site_packages

    def path(self, rel: str) -> str:
        return str(self.site / rel)


def build_zoo(root: Path, venv: Venv, make_wheel: WheelFactory) -> Zoo:
    site = venv.site_packages
    first: list[Path] = []
    second: list[Path] = []

    # Two wheels, one path set, different bytes (different sizes); b installed last.
    first.append(
        make_wheel(
            "ldt-ovr-a",
            "1.0",
            {
                "ovr/__init__.py": b"",
                "ovr/lib/libovr.so.1": lib("a"),
                "ovr/lib/libovr_ops.so.1": lib("a-ops"),
                "ovr/version.py": b"V = 'a'\n",
                "ovr/only_a.py": b"A = 1\n",
            },
        )
    )
    second.append(
        make_wheel(
            "ldt-ovr-b",
            "2.0",
            {
                "ovr/__init__.py": b"",
                "ovr/lib/libovr.so.1": lib("bb"),
                "ovr/lib/libovr_ops.so.1": lib("bb-ops"),
                "ovr/version.py": b"V = 'bb'\n",
                "ovr/only_b.py": b"B = 1\n",
            },
        )
    )
    # Same path, same size, different bytes: only --deep can say whose they are.
    first.append(make_wheel("ldt-same-a", "1.0", {"same/lib/libsame.so": lib("x1")}))
    second.append(make_wheel("ldt-same-b", "1.0", {"same/lib/libsame.so": lib("x2")}))
    # Namespace-style identical __init__.py shared by two wheels: harmless.
    first.append(make_wheel("ldt-ns-a", "1.0", {"ldtns/__init__.py": b"", "ldtns/a.py": b"A=1\n"}))
    second.append(make_wheel("ldt-ns-b", "1.0", {"ldtns/__init__.py": b"", "ldtns/b.py": b"B=1\n"}))
    # Files altered after install.
    first.append(
        make_wheel(
            "ldt-alt-native",
            "1.0",
            {"altn/__init__.py": b"", f"altn/_core{EXT}": lib("n")},
            tag=NATIVE,
        )
    )
    first.append(
        make_wheel("ldt-alt-pure", "1.0", {"altp/__init__.py": b"", "altp/util.py": b"X = 1\n"})
    )
    first.append(make_wheel("ldt-alt-flip", "1.0", {"altf/libflip.so.3": lib("f")}))
    # A script and a data file (.data/scripts, .data/data), left intact: must stay silent.
    first.append(
        make_wheel(
            "ldt-tool",
            "1.0",
            {"ldttool/__init__.py": b"def main() -> None:\n    pass\n"},
            data={
                "scripts/ldt-tool": b"#!python\nimport ldttool\nldttool.main()\n",
                "data/share/ldt-tool/readme.txt": b"hello\n",
            },
        )
    )
    # A deleted file (and deleted bytecode, which does not count).
    first.append(
        make_wheel(
            "ldt-del",
            "1.0",
            {
                "del/__init__.py": b"",
                "del/gone.py": b"GONE = 1\n",
                "del/keep.py": b"KEEP = 1\n",
                "del/lib/libdel.so": lib("d"),
            },
        )
    )
    # Installed by uv (INSTALLER says so): its fix must use uv.
    first.append(
        make_wheel("ldt-uvdist", "1.0", {"uvd/__init__.py": b"", "uvd/lib/libuvd.so": lib("u")})
    )
    # Malformed RECORDs.
    for case in MALFORMED_ROWS:
        pkg = "rec_" + case.replace("-", "_")
        first.append(make_wheel(f"ldt-rec-{case}", "1.0", {f"{pkg}/__init__.py": b""}))
    # RECORD paths escaping the prefix.
    first.append(make_wheel("ldt-esc", "1.0", {"esc/__init__.py": b""}))
    # Two dist-info dirs for one normalized name; 1.0's metadata is left behind by hand below.
    dup_old = make_wheel("Foo_Bar", "1.0", {"foobar/__init__.py": b""}, dist_info_name="Foo_Bar")
    first.append(
        make_wheel(
            "foo.bar",
            "2.0",
            {"foobar/__init__.py": b"", "foobar/new.py": b"NEW = 2\n"},
            dist_info_name="foo.bar",
        )
    )
    # Non-UTF-8 names; symlink loops.
    first.append(
        make_wheel(
            "ldt-bytes", "1.0", {"bytespkg/__init__.py": b"", "bytespkg/lib/libreal.so": lib("r")}
        )
    )
    first.append(
        make_wheel(
            "ldt-loop",
            "1.0",
            {"loop/__init__.py": b"", "loop/mod.py": b"M = 1\n", "loop/lib/libl.so": lib("l")},
        )
    )

    pip_install(venv, *first)
    pip_install(venv, *second)

    # --- break things, the way a crash, an editor or a careless copy would
    with open(site / f"altn/_core{EXT}", "ab") as handle:
        handle.write(b"\0" * 8)
    (site / "altp/util.py").write_bytes(b"X = 12345\n")
    flip = site / "altf/libflip.so.3"
    data = bytearray(flip.read_bytes())
    data[-2] ^= 0x01  # the tag's last character: same size, other bytes
    flip.write_bytes(bytes(data))

    (site / "del/gone.py").unlink()
    shutil.rmtree(site / "del/__pycache__", ignore_errors=True)

    uv_info = site / "ldt_uvdist-1.0.dist-info"
    (uv_info / "INSTALLER").write_bytes(b"uv\n")
    rewrite_record_row(uv_info, "ldt_uvdist-1.0.dist-info/INSTALLER", b"uv\n")
    (site / "uvd/lib/libuvd.so").unlink()

    for case, row in MALFORMED_ROWS.items():
        info = site / f"ldt_rec_{case.replace('-', '_')}-1.0.dist-info"
        if row is None:
            (info / "RECORD").unlink()
        else:
            append_record_rows(info, row.format(p="rec_" + case.replace("-", "_")))

    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/passwd").write_bytes(b"root:x:0:0:sentinel, not the real one:/root:/bin/sh\n")
    abs_sentinel = root / "ldt-abs-sentinel" / "libabs.so"
    append_record_rows(
        site / "ldt_esc-1.0.dist-info",
        *(f"{row},{record_hash(b'x')},1" for row in ESCAPE_ROWS),
        f"{abs_sentinel},{record_hash(b'x')},1",
    )

    with zipfile.ZipFile(dup_old) as archive:
        for member in archive.namelist():
            if member.startswith("Foo_Bar-1.0.dist-info/"):
                archive.extract(member, site)
    (site / "Foo_Bar-1.0.dist-info/INSTALLER").write_bytes(b"pip\n")

    lib_dir = os.fsencode(site / "bytespkg/lib")
    with open(os.path.join(lib_dir, BAD_NAME), "wb") as handle:
        handle.write(lib("bad-name"))
    os.mkdir(os.path.join(os.fsencode(site), BAD_DIR))
    with open(os.path.join(os.fsencode(site), BAD_DIR, b"mod\xff.py"), "wb") as handle:
        handle.write(b"")

    (site / "loop/mod.py").unlink()
    os.symlink("mod.py", site / "loop/mod.py")  # ELOOP at a RECORD path
    os.symlink("libcycle.so", site / "loop/lib/libcycle.so")  # ELOOP, untracked, in a package dir
    os.symlink("..", site / "loop/lib/up")  # a directory cycle for any walker that follows links
    return Zoo(root, venv, abs_sentinel)
