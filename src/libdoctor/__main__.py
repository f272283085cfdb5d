from __future__ import annotations

import sys

from libdoctor.cli import main

sys.exit(main())
