"""Ray ids for the tests that speak Ray's wire protocol (a node id is 28 bytes)."""

from __future__ import annotations

__all__ = ["NODE_A", "NODE_B"]

NODE_A = bytes(range(28))
NODE_B = bytes(range(100, 128))
