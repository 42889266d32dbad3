"""``python -m benchloupe`` is the ``benchloupe`` command."""

import sys

from benchloupe.cli.main import main

sys.exit(main())
