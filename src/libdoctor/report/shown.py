"""Which findings a report about a change shows: now ``analysis.shown.shown_by_default``,
decided before the renderers. This name stays only for the write path's reports until they
import it from there."""

from __future__ import annotations

from libdoctor.analysis.shown import shown_by_default as shown

__all__ = ["shown"]
