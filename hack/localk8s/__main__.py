"""``python -m hack.localk8s up|run|down|status|demo|nodes`` (from the repository root)."""

import sys

from hack.localk8s.launcher import main

sys.exit(main())
