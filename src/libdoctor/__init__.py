"""libdoctor: the truth about a Python environment's files and native libraries."""

from __future__ import annotations

__version__ = "0.1.0"
