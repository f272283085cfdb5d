"""A digest spelled as RECORD spells it: ``sha256=<urlsafe base64, no padding>``.

On the ground floor: the RECORD model (``environment.record``) reads and writes this
spelling, and the hashing (``disk.hashing``, ``disk.hashpool``) gives every digest it reads
in it, so that the two compare as strings.
"""

from __future__ import annotations

__all__ = ["spell_hash"]


def spell_hash(algorithm: str, digest: bytes) -> str:
    """DIGEST as RECORD writes it: ``sha256=<urlsafe base64, no padding>``."""
    from base64 import urlsafe_b64encode

    return f"{algorithm}={urlsafe_b64encode(digest).rstrip(b'=').decode('ascii')}"
