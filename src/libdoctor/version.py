"""The version of libdoctor: one value on the ground floor, so a module that names it in its
output (a JSON document's ``tool``, a journal, a request's User-Agent) does not import the
package face for it."""

from __future__ import annotations

__version__ = "0.1.0"
