"""``external.index``'s release filter against its reference: the quick one (each
version field parsed once, the matches parsed whole) picks exactly the files that parsing
every file name whole picks."""

from __future__ import annotations

import pytest

from libdoctor.external.index import _is_version, _of_version

NAMES = [
    "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",
    "torch-2.14.1+cu128-cp311-cp311-manylinux_2_28_x86_64.whl",
    "torch-2.14.10-cp311-cp311-manylinux_2_28_x86_64.whl",
    "torch-2.14.1-1-cp311-cp311-manylinux_2_28_x86_64.whl",  # a build tag
    "torch-2.14.1.0-py3-none-any.whl",
    "torch-2.14.1-py3-none.whl",  # a dash short
    "torch-not.a.version-py3-none-any.whl",
    "torch-2.14.1.tar.gz",
    "torch-2.14.1.zip",
    "torch-2.14.1.tar.bz2",  # not an sdist packaging knows
    "old-style-name-2.14.1.tar.gz",
    "2.14.1.tar.gz",  # no name
    "torch-1!2.14.1-py3-none-any.whl",
    "README",
]


@pytest.mark.parametrize("version", ["2.14.1", "2.14.1.0", "2.14.1+cu128", "1!2.14.1", "x"])
def test_the_quick_filter_picks_what_parsing_every_name_picks(version: str) -> None:
    quick = _of_version(version)
    assert [n for n in NAMES if quick(n)] == [n for n in NAMES if _is_version(n, version)]
