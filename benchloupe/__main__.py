"""``python -m benchloupe`` is the ``benchloupe`` command."""

import sys

from benchloupe.tui.cli import main

sys.exit(main())
