"""The differential suite's seed: one per commit, so that every commit runs other cases.

``commit_seed`` derives it from ``git rev-parse HEAD`` (the first 8 hex digits, as a number);
outside a git checkout it is ``FALLBACK``. ``RAYSCALE_DIFF_SEED`` overrides it. Every run prints
its seed, and ``python -m tests.differential --seed N --cases M`` (or ``FUZZ_SEED=N make fuzz``)
runs the very same cases again.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

FALLBACK = 20261123
ROOT = Path(__file__).resolve().parents[2]


def commit_seed() -> int:
    override = os.environ.get("RAYSCALE_DIFF_SEED")
    if override:
        return int(override)
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return FALLBACK
    head = done.stdout.strip()
    if done.returncode != 0 or len(head) < 8:
        return FALLBACK
    return int(head[:8], 16)
