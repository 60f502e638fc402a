"""rayscale.common.conditions: a condition found by its type."""

from __future__ import annotations

from rayscale.common.conditions import find_condition


def test_find_condition() -> None:
    wanted = {"type": "IdleTermination", "status": "True"}
    status = {"conditions": [{"type": "RayCompatible"}, "not a condition", wanted]}
    assert find_condition(status, "IdleTermination") == wanted
    assert find_condition(status, "SpecValid") is None
    assert find_condition({"conditions": None}, "IdleTermination") is None
    assert find_condition(None, "IdleTermination") is None
