"""At the worker cap no replica is removed only for an identical one of its group to be launched
in the same pass: the cut replica stays in place of the new one (scheduling/reuse.py)."""

from __future__ import annotations

from typing import Any

from tests.support.scenarios import cpu, decide, launches, node, removed, unmet


def _slice(replica: str, group: str, state: str = "pending") -> list[dict[str, Any]]:
    return [node(f"{replica}-h{i}", group, state=state, replica=replica) for i in range(2)]


def _capped(**a_extra: Any) -> dict[str, Any]:
    """maxWorkers 2 over a pending ``a`` host, a pending 2-host ``g`` replica and a busy ``b``
    host: the cap cuts ``a-1``, then the whole ``g`` replica (one host too many), and the room
    left is what work needing ``a`` would launch a new ``a`` host into."""
    return {
        "groups": [
            {"name": "a", "resources": {"CPU": 4, "custom": 1}, **a_extra},
            cpu("g", numOfHosts=2),
            cpu("b"),
        ],
        "nodes": [
            node("a-1", "a", state="pending"),
            *_slice("g-r0", "g"),
            node("b-1", "b", available={"CPU": 0}),
        ],
        "demands": [{"resources": {"custom": 1}, "count": 1}],
        "options": {"maxWorkers": 2, "idleTimeoutSeconds": None},
    }


def test_the_cap_keeps_the_pending_host_the_pass_would_relaunch() -> None:
    decision = decide(_capped())
    assert launches(decision) == {}
    assert removed(decision) == {"g-r0-h0": "MAX_WORKERS", "g-r0-h1": "MAX_WORKERS"}
    assert unmet(decision) == []
    [placed] = decision["placements"]
    assert placed["targets"] == [{"group": "a", "on": "pending", "count": 1, "nodes": ["a-1"]}]
    assert decision["groups"]["a"] == {"current": 1, "replicas": 1, "launch": 0, "terminate": 0}


def test_a_cut_slice_is_kept_host_for_host_and_new_ones_only_beyond_it() -> None:
    """The cap cuts a pending slice, then a 5-host replica where one host was too many: of the two
    slices launched for work, the cut one stands in for one, its hosts taking its work."""
    scenario = {
        "groups": [
            {"name": "s", "resources": {"CPU": 4, "custom": 1}, "numOfHosts": 2},
            cpu("w", numOfHosts=5),
            cpu("b"),
        ],
        "nodes": [
            *_slice("s-r0", "s"),
            *[node(f"w-r0-h{i}", "w", state="pending", replica="w-r0") for i in range(5)],
            node("b-1", "b", available={"CPU": 0}),
        ],
        "demands": [{"resources": {"custom": 1}, "count": 4}],
        "options": {"maxWorkers": 5, "idleTimeoutSeconds": None},
    }
    decision = decide(scenario)
    assert launches(decision) == {"s": 1}
    assert set(removed(decision)) == {f"w-r0-h{i}" for i in range(5)}
    [placed] = decision["placements"]
    assert placed["targets"] == [
        {"group": "s", "on": "pending", "count": 2, "nodes": ["s-r0-h0", "s-r0-h1"]},
        {"group": "s", "on": "new", "count": 2},
    ]


def test_an_idle_running_host_cut_at_the_cap_is_kept_for_the_work_instead_of_a_new_one() -> None:
    scenario = _capped()
    scenario["nodes"] = [
        node("a-1", "a", idleSeconds=100),
        *[node(f"g-r0-h{i}", "g", replica="g-r0", idleSeconds=50) for i in range(2)],
        node("b-1", "b", available={"CPU": 0}),
    ]
    decision = decide(scenario)
    assert launches(decision) == {}
    assert removed(decision) == {"g-r0-h0": "MAX_WORKERS", "g-r0-h1": "MAX_WORKERS"}
    [placed] = decision["placements"]
    assert placed["targets"] == [{"group": "a", "on": "running", "count": 1, "nodes": ["a-1"]}]
