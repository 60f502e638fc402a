"""Scheduler scenarios (the `rayscale simulate` format) written briefly, and the decision read back:
what the scheduler's table tests and the cases from Ray's and KubeRay's tests are written with."""

from __future__ import annotations

from typing import Any

from rayscale.autoscaler.scenario import parse_scenario
from rayscale.autoscaler.scheduler import schedule


def decide(scenario: dict[str, Any]) -> dict[str, Any]:
    """The decision for a scenario, as the JSON `rayscale simulate` prints (without timing)."""
    return schedule(parse_scenario(scenario)).to_dict()


def launches(decision: dict[str, Any]) -> dict[str, int]:
    return {name: g["launch"] for name, g in decision["groups"].items() if g["launch"]}


def removed(decision: dict[str, Any]) -> dict[str, str]:
    return {t["name"]: t["reason"] for t in decision["terminate"]}


def unmet(decision: dict[str, Any]) -> list[tuple[str, int, str]]:
    return [(u["kind"], u["count"], u["reason"]) for u in decision["unmet"]]


def cpu(name: str, cpus: float = 4, **extra: Any) -> dict[str, Any]:
    return {"name": name, "resources": {"CPU": cpus}, **extra}


def node(name: str, group: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "group": group, **extra}


def demand(count: int, **resources: float) -> dict[str, Any]:
    return {"resources": resources, "count": count}
