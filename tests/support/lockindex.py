"""Wheels served by a ``FileServer`` on 127.0.0.1 as a PEP 503 index, and a pylock.toml of
them: what the ``plan lock`` tests lock and plan against."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from support.httpindex import FileServer

__all__ = ["ServedWheels"]


@dataclass
class ServedWheels:
    server: FileServer
    wheels: dict[str, Path]  # name -> wheel file
    root: Path

    @property
    def simple(self) -> str:
        return self.server.url + "/simple"

    def url(self, name: str) -> str:
        return f"{self.server.url}/files/{self.wheels[name].name}"

    def sha256(self, name: str) -> str:
        return hashlib.sha256(self.wheels[name].read_bytes()).hexdigest()

    def pylock(self, names: Sequence[str], versions: Mapping[str, str], directory: Path) -> Path:
        """DIRECTORY/pylock.toml locking NAMES at VERSIONS, each its served wheel and sha256."""
        text = 'lock-version = "1.0"\ncreated-by = "test"\n'
        for name in names:
            text += (
                f'\n[[packages]]\nname = "{name}"\nversion = "{versions[name]}"\n'
                f'index = "{self.simple}"\n'
                f'wheels = [{{ url = "{self.url(name)}", name = "{self.wheels[name].name}", '
                f'hashes = {{ sha256 = "{self.sha256(name)}" }} }}]\n'
            )
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "pylock.toml"
        path.write_text(text)
        return path
