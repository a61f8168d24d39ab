"""`python -m utils.cli`: the same as the `shoal` command."""

from __future__ import annotations

import sys

from utils.cli.main import main

sys.exit(main())
