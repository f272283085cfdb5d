"""``analysis.tree``: which file a user's word names, the chain of loads that ends at a
missing library, and which extension modules fail on a library (a few per library).

On a real pip-installed env of gcc-built libraries (``support.libchain``): ``chainy._C``
loads libmid, which loads libleaf, which needs a libabsent.so.9 nothing has.
"""

from __future__ import annotations

import pytest

from libdoctor.analysis.libraries import analyse_libraries
from libdoctor.analysis.run import loader_context
from libdoctor.analysis.tree import chain_to, dependency_tree, failing_imports, find_root
from libdoctor.disk.stat import RealDisk
from libdoctor.environment.model import build_environment
from libdoctor.errors import LibdoctorError
from libdoctor.external.ospackages import SystemPackages
from support.libchain import ChainEnv

# --------------------------------------------------------------------------- the root


def test_a_dotted_name_is_the_extension_module_python_would_import(chain_env: ChainEnv) -> None:
    assert find_root(chain_env.analysis, "chainy._C") == str(chain_env.module("_C"))
    assert find_root(chain_env.analysis, "chainy._other") == str(chain_env.module("_other"))


def test_a_path_is_taken_as_it_is(chain_env: ChainEnv) -> None:
    library = chain_env.libs / "libplugin.so.6"  # a library, not a module: still a file
    assert find_root(chain_env.analysis, str(library)) == str(library)


@pytest.mark.parametrize(
    ("word", "says"),
    [
        ("chainy._nothing", "no extension module chainy._nothing in "),
        ("chainy", "no extension module chainy in "),  # a package is no extension module
    ],
)
def test_a_name_no_module_answers_is_refused(chain_env: ChainEnv, word: str, says: str) -> None:
    with pytest.raises(LibdoctorError, match=f"^{says}"):
        find_root(chain_env.analysis, word)


def test_a_directory_is_no_root(chain_env: ChainEnv) -> None:
    with pytest.raises(LibdoctorError, match=r"is not a file$"):
        find_root(chain_env.analysis, str(chain_env.libs))


# --------------------------------------------------------------------------- the chain


def test_the_chain_runs_from_the_module_to_the_object_that_needs_the_library(
    chain_env: ChainEnv,
) -> None:
    (closure,) = [c for c in chain_env.analysis.modules if c.root == str(chain_env.module("_C"))]
    chain = chain_to(closure, "libabsent.so.9")
    assert chain is not None
    assert [p.rsplit("/", 1)[-1] for p in chain] == [
        chain_env.module("_C").name,
        "libmid.so.1",
        "libleaf.so.2",
    ]
    assert chain[0] == closure.root


def test_a_library_the_module_itself_asks_for_is_a_chain_of_one(chain_env: ChainEnv) -> None:
    """Without the caller's LD_LIBRARY_PATH, _C's own request for libsys.so.1 fails."""
    analysis, _ = analyse_libraries(chain_env.target, {}, "/")
    (closure,) = [c for c in analysis.modules if c.root == str(chain_env.module("_C"))]
    assert chain_to(closure, "libsys.so.1") == (closure.root,)


def test_no_chain_to_a_library_that_is_found_or_never_asked_for(chain_env: ChainEnv) -> None:
    closure = chain_env.analysis.modules[0]
    assert chain_to(closure, "libmid.so.1") is None  # found
    assert chain_to(closure, "libunheard.so.1") is None


# --------------------------------------------------------------------------- the tree


def test_the_tree_of_a_module_with_its_system_packages(chain_env: ChainEnv) -> None:
    packages = SystemPackages(root=str(chain_env.image), rpm=None)
    tree = dependency_tree(chain_env.target, "chainy._C", chain_env.environ, "/", packages=packages)
    assert tree.root == str(chain_env.module("_C"))
    assert not tree.ok  # libabsent.so.9
    owner = tree.system.owner(str(chain_env.image / "usr/lib/x/libsys.so.1"))
    assert owner is not None and owner.name == "libsys1"
    (provider,) = tree.system.providers["libabsent.so.9"]
    assert provider.package.name == "libabsent9" and not provider.present


# --------------------------------------------------------------------------- failing imports


def test_failing_imports_name_each_module_that_fails_on_a_library_up_to_a_limit(
    chain_env: ChainEnv,
) -> None:
    target = chain_env.target
    env = build_environment(target)
    disk = RealDisk(target.root)
    context = loader_context(chain_env.environ, "/", target)
    wanted = ["libabsent.so.9", "libnobody.so.8", "libabsent.so.9", "libmid.so.1"]
    found = failing_imports(env, disk, context, wanted)
    assert [(f.module, f.library, len(f.chain)) for f in found] == [
        ("chainy._C", "libabsent.so.9", 3),
        ("chainy._other", "libabsent.so.9", 3),  # once each, though asked for twice
        ("chainy._other", "libnobody.so.8", 1),  # libmid.so.1: found, no failing import
    ]
    assert all(f.tree.root == f.chain[0] and not f.tree.ok for f in found)
    limited = failing_imports(env, disk, context, wanted, limit=1)
    assert [(f.module, f.library) for f in limited] == [
        ("chainy._C", "libabsent.so.9"),
        ("chainy._other", "libnobody.so.8"),
    ]
