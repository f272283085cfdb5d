"""The requirement index's fast path (``EXTRA_ONLY``: a line it may leave unparsed until its
extra is active) against packaging's parser, the reference: every line it takes is valid,
names that extra, and applies with it and only with it."""

from __future__ import annotations

from hypothesis import event, given, settings
from hypothesis import strategies as st
from packaging.requirements import InvalidRequirement, Requirement

from libdoctor.environment.distributions import canonicalize_name
from libdoctor.environment.requirements import EXTRA_ONLY, marker_environment
from libdoctor.environment.target import Target

_TARGET = Target("/env", "/env/bin/python", (), "test", (3, 11))

# Fragments of real Requires-Dist lines, the plain and the odd: pieces that must be accepted
# and pieces that make a line invalid, or make it apply without its extra.
_names = st.sampled_from(["numpy", "jax-cuda12-plugin", "Foo_Bar", "a.b", "x", "-bad", "a_", "9"])
_extras = st.sampled_from(["", "[with_cuda]", "[a,b]", "[ a , B.c ]", "[]", "[a,]", "[-x]"])
_versions = st.sampled_from(
    ["1", "1.2", "13.0.96", "1.*", "1.2.*", "1.0rc1", "1.0.post1", "1!2", "1.0+cu12", "*", ""]
)
_ops = st.sampled_from(["==", "!=", ">=", "<=", ">", "<", "~=", "===", "=>", "="])
_spaces = st.sampled_from(["", " ", "  "])
_markers = st.sampled_from(
    [
        'extra == "cuda12"',
        "extra == 'with-cuda'",
        'extra=="a_b"',
        'extra == "x" ',
        'extra == "bad name"',
        'extra == "-x"',
        'extra != "x"',
        '"x" == extra',
        'extra == "x" or python_version < "3"',
        'python_version >= "3" and extra == "x"',
        "extra == \"x'",
        "",
    ]
)


@st.composite
def lines(draw: st.DrawFn) -> str:
    specs = draw(
        st.lists(
            st.tuples(_ops, _spaces, _versions).map(lambda t: f"{t[0]}{t[1]}{t[2]}"), max_size=3
        )
    )
    sep = draw(st.sampled_from([",", ", ", " ,"]))
    spec = sep.join(specs)
    if draw(st.booleans()) and spec:
        spec = f"({spec})"
    gaps = [draw(_spaces) for _ in range(4)]
    head = f"{gaps[0]}{draw(_names)}{gaps[1]}{draw(_extras)}{gaps[2]}{spec}"
    return f"{head}{gaps[3]};{draw(_spaces)}{draw(_markers)}"


@settings(max_examples=2000, deadline=None)
@given(lines())
def test_a_line_left_unparsed_is_valid_and_applies_only_with_its_extra(text: str) -> None:
    match = EXTRA_ONLY.match(text)
    event("fast path" if match else "parsed")
    if match is None:
        return
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise AssertionError(f"EXTRA_ONLY took a line packaging rejects: {text!r}") from exc
    extra = canonicalize_name(match["extra"])
    assert req.marker is not None
    env = marker_environment(_TARGET)
    assert req.marker.evaluate({**env, "extra": extra})
    assert not req.marker.evaluate({**env, "extra": ""})
    assert not req.marker.evaluate({**env, "extra": extra + "-other"})


def test_the_fast_path_takes_the_common_lines() -> None:
    """Lines as numpy, fsspec and jax write them: the ones worth not parsing."""
    for text in (
        'pytest>=7.0; extra == "test"',
        "ipywidgets; extra == 'gui'",
        'jax-cuda12-plugin[with_cuda]<=0.4.35,>=0.4.35; extra == "cuda12"',
        'nvidia-cublas==13.1.1.3.*; extra == "cublas"',
    ):
        assert EXTRA_ONLY.match(text), text
    for text in (
        'nvidia-cublas==13.1.1.3.*; sys_platform == "linux" and extra == "cublas"',
        'numpy>=1.26; python_version >= "3.12"',
        'torch @ https://x/y.whl ; extra == "gpu"',
        'pkg>=1.0rc1; extra == "x"',
    ):
        assert not EXTRA_ONLY.match(text), text
