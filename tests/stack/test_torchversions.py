"""torch's preload models as data: every release's model is for its own versions only, and
every statement of the marker table holds for some release."""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from libdoctor.stack.torchversions import MARKERS, MODELS


def test_each_verified_version_has_exactly_its_own_model() -> None:
    for model in MODELS:
        for version in model.verified_on:
            owners = [m.id for m in MODELS if SpecifierSet(m.versions).contains(version)]
            assert owners == [model.id], version


def test_every_marker_holds_for_some_model() -> None:
    held = {marker for model in MODELS for marker in model.markers}
    assert [row for row in MARKERS if (row[0], row[1]) not in held] == []


def test_markers_keep_the_table_s_order() -> None:
    order = {(function, statement): i for i, (function, statement, _) in enumerate(MARKERS)}
    for model in MODELS:
        positions = [order[marker] for marker in model.markers]
        assert positions == sorted(positions), model.id
