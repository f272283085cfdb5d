"""``analysis.why``: every request for one library, each requester once; a request by path
counted by its basename; a library only dlopen'ed marked optional; found only when every
request is.

On a real pip-installed env of gcc-built libraries (``support.libchain``): two extension
modules both load libmid, which needs libleaf, which needs a libabsent.so.9 nothing has.
"""

from __future__ import annotations

from collections.abc import Iterable

from libdoctor.analysis.why import explain_library, requests_for
from libdoctor.external.ospackages import SystemPackages
from support.libchain import ChainEnv


def names(paths: Iterable[str | None]) -> list[str]:
    return [str(p).rsplit("/", 1)[-1] for p in paths]


def test_a_requester_reached_from_two_modules_is_one_request(chain_env: ChainEnv) -> None:
    (request,) = requests_for(chain_env.analysis, "libleaf.so.2")
    assert names([request.resolution.requester]) == ["libmid.so.1"]
    assert request.root == str(chain_env.module("_C"))  # the first module that reaches it
    assert not request.optional


def test_each_requester_of_the_library_in_load_order(chain_env: ChainEnv) -> None:
    requests = requests_for(chain_env.analysis, "libmid.so.1")
    assert [r.root for r in requests] == [
        str(chain_env.module("_C")),
        str(chain_env.module("_other")),
    ]
    assert names([r.resolution.requester for r in requests]) == names([r.root for r in requests])


def test_a_request_by_path_counts_under_its_basename(chain_env: ChainEnv) -> None:
    (request,) = requests_for(chain_env.analysis, "libbypath.so.3")
    assert request.resolution.name == "$ORIGIN/../chainy.libs/libbypath.so.3"
    assert request.resolution.status == "found"


def test_a_library_no_module_loads_asks_optionally(chain_env: ChainEnv) -> None:
    requests = requests_for(chain_env.analysis, "libabsent.so.9")
    assert [(names([r.resolution.requester])[0], r.optional) for r in requests] == [
        ("libleaf.so.2", False),
        ("libplugin.so.6", True),  # dlopen'ed alone, if ever
    ]


def test_the_explanation_of_a_missing_library(chain_env: ChainEnv) -> None:
    packages = SystemPackages(root=str(chain_env.image), rpm=None)
    why = explain_library(
        chain_env.target, "libabsent.so.9", chain_env.environ, "/", packages=packages
    )
    assert not why.found
    assert len(why.requests) == 2 and why.shipped == ()
    (finding,) = why.findings  # the library checks' finding about it, and no other's
    assert (finding.code, finding.evidence["library"]) == (
        "optional-library-missing",  # no installed distribution ships it
        "libabsent.so.9",
    )
    (provider,) = why.system.providers["libabsent.so.9"]
    assert provider.package.name == "libabsent9"


def test_a_library_shipped_and_found(chain_env: ChainEnv) -> None:
    why = explain_library(chain_env.target, "libmid.so.1", chain_env.environ, "/")
    assert why.found and why.findings == ()
    assert [s.path for s in why.shipped] == [str(chain_env.libs / "libmid.so.1")]


def test_a_library_nothing_asks_for_is_found_vacuously(chain_env: ChainEnv) -> None:
    why = explain_library(chain_env.target, "libunheard.so.1", {}, "/")
    assert why.requests == () and why.found and why.findings == ()
