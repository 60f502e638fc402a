"""Recorded cases for judging without Ray or the scheduler: the case, Ray's answers, a decision.

A recorded case is one JSON file: the snapshot as a scenario document, Ray 2.60's answer (and its
answers to the variants the allowlist asks for), and rayscale's decision as ``Decision.to_dict``
prints it. ``load`` gives the ``Outcome`` back (differences not yet compared), so that unit tests
can feed the comparator a mutated decision against a real Ray answer. A case recorded for an
allowlist entry that builds on others (a counterfactual whose other side they explain) names
them (``with``: ``companions``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rayscale.autoscaler.scenario import parse_scenario
from rayscale.autoscaler.scenario_write import to_scenario
from rayscale.autoscaler.scheduling.model import (
    Decision,
    DemandKind,
    GroupDecision,
    LabelConstraint,
    LabelOp,
    Placement,
    PlacementTarget,
    Removal,
    RemovalCause,
    Selector,
    Strategy,
    Target,
    Unmet,
    UnmetReason,
)
from tests.differential.compare import Outcome

RECORDED = Path(__file__).resolve().parent / "recorded"


def save(
    path: Path, outcome: Outcome, variants: Mapping[str, dict[str, Any]], companions: Sequence[str] = ()
) -> None:
    assert outcome.decision is not None
    doc: dict[str, Any] = {
        "case_id": outcome.case_id,
        "scenario": to_scenario(outcome.snapshot),
        "ray": outcome.ray,
        "variants": dict(variants),
        "decision": outcome.decision.to_dict(),
    }
    if companions:
        doc["with"] = list(companions)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def load(path: Path) -> Outcome:
    doc = json.loads(path.read_text(encoding="utf-8"))
    variants: dict[str, dict[str, Any]] = doc["variants"]
    outcome = Outcome(
        str(doc["case_id"]),
        parse_scenario(doc["scenario"]),
        decision_from_dict(doc["decision"]),
        doc["ray"],
    )
    outcome.variants = dict(variants)
    return outcome


def companions(path: Path) -> list[str]:
    """The allowlist entries the case's own entry builds on (none for most)."""
    return list(json.loads(path.read_text(encoding="utf-8")).get("with", []))


def _selector(items: list[dict[str, Any]] | None) -> Selector:
    return tuple(LabelConstraint(c["key"], LabelOp(c["op"]), tuple(c["values"])) for c in items or [])


def _floats(m: Mapping[str, float] | None) -> dict[str, float] | None:
    return None if m is None else {k: float(v) for k, v in m.items()}


def _what(d: Mapping[str, Any]) -> dict[str, Any]:
    bundles = d.get("bundles")
    return {
        "kind": DemandKind(d["kind"]),
        "resources": _floats(d.get("resources")),
        "bundles": None if bundles is None else tuple(_floats(b) or {} for b in bundles),
        "strategy": Strategy(d["strategy"]) if "strategy" in d else None,
        "label_selector": _selector(d.get("labelSelector")),
        "unit": d.get("unit"),
        "fallbacks": tuple(_selector(s) for s in d.get("fallbacks", [])),
        "bundle_selectors": tuple(_selector(s) for s in d.get("bundleSelectors", [])),
    }


def decision_from_dict(d: Mapping[str, Any]) -> Decision:
    """``Decision.to_dict``'s output read back."""
    groups = {
        name: GroupDecision(g["current"], g["replicas"], g["launch"], g["terminate"])
        for name, g in d["groups"].items()
    }
    terminate = tuple(
        Removal(r["name"], r["group"], RemovalCause(r["reason"]), r.get("replica"), r.get("idleSeconds"))
        for r in d["terminate"]
    )
    unmet = tuple(Unmet(count=u["count"], reason=UnmetReason(u["reason"]), **_what(u)) for u in d["unmet"])
    placements = tuple(
        Placement(
            count=p["count"],
            targets=tuple(
                PlacementTarget(t.get("group", ""), Target(t["on"]), t["count"], tuple(t.get("nodes", [])))
                for t in p["targets"]
            ),
            **_what(p),
        )
        for p in d["placements"]
    )
    return Decision(groups, terminate, unmet, placements)
