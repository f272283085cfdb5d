"""The model's claims: a path one distribution claims is kept as its Claim alone (issue 26's
memory), and the mapping answers as the plain ``path -> tuple of claims`` dict it replaced,
in the same order; ``shared_claims`` is its multiply-claimed part, in that order too."""

from __future__ import annotations

from libdoctor.environment.model import Claim, Environment, build_environment
from libdoctor.environment.target import SiteDir, Target
from support.dists import fake_dist


def _env() -> Environment:
    dists = [
        fake_dist("one", "1.0", ["a.py", "shared/x.py", "b.py", "shared/y.py"]),
        fake_dist("two", "1.0", ["shared/y.py", "c.py", "shared/x.py"]),
        fake_dist("three", "1.0", ["shared/x.py", "d.py"]),
    ]
    target = Target("/env", "/env/bin/python", (SiteDir("/env/site", "/env"),), "test", (3, 11))
    return build_environment(target, dists)


def _reference(env: Environment) -> dict[str, tuple[Claim, ...]]:
    """path -> claims as build_environment made it before: tuples, in scan order."""
    out: dict[str, tuple[Claim, ...]] = {}
    for dist in env.distributions:
        for claim in env.claims_of(dist):
            out[claim.path] = (*out.get(claim.path, ()), claim)
    return out


def test_claims_answer_as_the_plain_mapping() -> None:
    env = _env()
    expected = _reference(env)
    claims = env.claims
    assert list(claims) == list(expected)
    assert list(claims.items()) == list(expected.items())
    assert len(claims) == len(expected) == 6
    for path, owned in expected.items():
        assert path in claims
        assert claims[path] == claims.get(path) == claims.get(path, ()) == owned
        assert type(claims[path]) is tuple
    assert claims.get("/env/site/nothing.py") is None
    assert claims.get("/env/site/nothing.py", ()) == ()
    assert "/env/site/nothing.py" not in claims
    assert dict(claims) == expected
    assert [c.dist.name for c in claims["/env/site/shared/x.py"]] == ["one", "two", "three"]
    assert env.owners("/env/site/shared/y.py") == tuple(
        c.dist for c in expected["/env/site/shared/y.py"]
    )


def test_shared_claims_are_the_multiply_claimed_paths_in_order() -> None:
    env = _env()
    expected = {p: c for p, c in _reference(env).items() if len(c) > 1}
    assert list(env.shared_claims().items()) == list(expected.items())
    assert list(expected) == ["/env/site/shared/x.py", "/env/site/shared/y.py"]
    plain = Environment(env.target, env.distributions, dict(env.claims), (), env.by_dist)
    assert list(plain.shared_claims().items()) == list(expected.items())
