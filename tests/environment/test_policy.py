"""``environment.policy``: what a wheel's platform tag promises from the system."""

from __future__ import annotations

import pytest

from libdoctor.environment.policy import (
    is_common_system_library,
    is_driver_library,
    system_libraries,
)


@pytest.mark.parametrize(
    ("wheel", "soname", "given"),
    [
        ("x-1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "libm.so.6", True),
        ("x-1-cp311-cp311-manylinux1_x86_64.whl", "libmvec.so.1", True),  # a newer policy's
        ("x-1-cp311-cp311-manylinux_2_28_x86_64.whl", "ld-linux-x86-64.so.2", True),
        ("x-1-cp311-cp311-manylinux_2_28_x86_64.whl", "libfoo.so.1", False),
        ("x-1-cp311-cp311-musllinux_1_2_x86_64.whl", "libc.so", True),
        # musl's libc as Alpine (the musllinux images) names it: every such module needs it
        ("x-1-cp311-cp311-musllinux_1_2_x86_64.whl", "libc.musl-x86_64.so.1", True),
        ("x-1-cp311-cp311-musllinux_1_1_aarch64.whl", "libc.musl-aarch64.so.1", True),
        ("x-1-cp311-cp311-manylinux_2_28_x86_64.whl", "libc.musl-x86_64.so.1", False),
        ("x-1-cp311-cp311-musllinux_1_2_x86_64.whl", "libstdc++.so.6", False),
    ],
)
def test_the_policy_of_the_tag(wheel: str, soname: str, given: bool) -> None:
    libraries = system_libraries(wheel)
    assert libraries is not None and (soname in libraries) == given


@pytest.mark.parametrize("wheel", ["x-1-cp311-cp311-linux_x86_64.whl", "x-1-py3-none-any.whl"])
def test_a_tag_of_no_policy_is_not_judged(wheel: str) -> None:
    assert system_libraries(wheel) is None


def test_driver_and_common_system_libraries() -> None:
    assert is_driver_library("libcuda.so.1") and is_driver_library("libnvidia-ml.so.1")
    assert not is_driver_library("libcudart.so.12")
    assert is_common_system_library("libxkbcommon.so.0")
    assert is_common_system_library("libX11-xcb.so.1") and is_common_system_library("libssl.so.3")
    assert not is_common_system_library("libfoo.so.1")
    assert not is_common_system_library("libtorch_cuda.so")
