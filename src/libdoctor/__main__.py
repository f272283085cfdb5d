from __future__ import annotations

from libdoctor.cli import console_main

console_main()
