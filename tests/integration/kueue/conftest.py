"""Kueue's fixtures (tests/support/kueue.py) for the tests of this directory."""

from tests.support.kueue import kueue, queues

__all__ = ["kueue", "queues"]
