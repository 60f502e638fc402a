"""Lifecycle scripts: one RayCluster through several steps, reconciled by KubeRay (the oracle's
``-lifecycle`` mode, tools/kuberay-oracle/lifecycle.go) and by rayscale (``lifecycle_side``), with
what exists and the Events compared after every step.

A step is a new version of the RayCluster (as ``kubectl apply`` would send it) or its deletion.
Between steps the same stand-in kubelet on both sides makes every pod Running and Ready and every
Job complete, so a step starts from a cluster that is up, as in a real one.

Events are compared by their type and reason, each present or absent in the step: rayscale posts
one Event for the pods one step created or deleted together ("Created 3 worker Pods: ..."), KubeRay
one per pod, so counts and messages differ by design. A difference is reported on the object
``Events`` with the path ``<type> <reason>`` (values: the count on each side, ``<absent>`` for none).
Documents are named ``lifecycle:<script>@<step>``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections import Counter
from typing import Any

from rayscale.common.types import Manifest
from tests.kuberay import documents, lifecycle_side
from tests.kuberay.compare import ABSENT, Difference, compare
from tests.kuberay.oracle import Oracle, OracleError


@dataclasses.dataclass(frozen=True)
class Script:
    name: str
    steps: list[Manifest]  # {"name", "cluster"} or {"name", "delete": True}


def _case(name: str) -> Manifest:
    (doc,) = documents.rayclusters(documents.CASES / name, "case", documents.CASES)
    return copy.deepcopy(doc.body)


def _example(name: str) -> Manifest:
    (doc,) = documents.rayclusters(documents.EXAMPLES / name, "example", documents.EXAMPLES)
    body = copy.deepcopy(doc.body)
    body["spec"]["enableInTreeAutoscaling"] = False  # the controller's own scaling decisions
    return body


def _then(body: Manifest, edit: Any) -> Manifest:
    out = copy.deepcopy(body)
    edit(out["spec"])
    return out


def _groups(spec: Manifest) -> dict[str, Manifest]:
    return {g["groupName"]: g for g in spec["workerGroupSpecs"]}


def _set(**changes: Any) -> Any:
    """An edit of worker groups: ``_set(cpu={"replicas": 3})``."""

    def edit(spec: Manifest) -> None:
        for group, fields in changes.items():
            _groups(spec)[group].update(copy.deepcopy(fields))

    return edit


def scripts() -> list[Script]:
    """The lifecycle scripts judged (bounded: 5 scripts, 16 steps)."""
    multi = _case("multi-host.yaml")
    up = _then(multi, _set(slice={"replicas": 3}, cpu={"replicas": 3}))
    named = _then(up, _set(slice={"replicas": 2, "scaleStrategy": {"workersToDelete": ["pod:slice/1/0"]}}))
    down = _then(named, _set(cpu={"replicas": 1}, slice={"scaleStrategy": {}}))  # the list cleared
    basic = _example("raycluster-basic.yaml")
    suspended = _then(basic, lambda s: s.update(suspend=True))
    resumed = _then(basic, lambda s: s.update(suspend=False))
    group_off = _then(basic, lambda s: s["workerGroupSpecs"][0].update(suspend=True))
    group_on = _then(basic, lambda s: s["workerGroupSpecs"][0].update(suspend=False))
    recreate = _then(basic, lambda s: s.update(upgradeStrategy={"type": "Recreate"}))
    image = _then(
        recreate,
        lambda s: s["headGroupSpec"]["template"]["spec"]["containers"][0].update(
            image="rayproject/ray:2.56.0"
        ),
    )
    ft = _case("gcs-ft-options.yaml")
    ft_up = _then(ft, lambda s: s["workerGroupSpecs"][0].update(replicas=2))
    plan: list[tuple[str, list[tuple[str, Manifest | None]]]] = [
        ("scale", [("create", multi), ("scale-up", up), ("workers-to-delete-multi-host", named),
                   ("scale-down", down)]),
        ("suspend", [("create", basic), ("suspend", suspended), ("resume", resumed)]),
        ("suspend-group", [("create", basic), ("suspend-group", group_off), ("resume-group", group_on)]),
        ("recreate", [("create", recreate), ("head-image", image), ("same-again", image)]),
        ("gcs-ft-delete", [("create", ft), ("scale-up", ft_up), ("delete", None)]),
    ]  # fmt: skip
    return [
        Script(
            name,
            [
                {"name": step, "cluster": body} if body else {"name": step, "delete": True}
                for step, body in steps
            ],
        )
        for name, steps in plan
    ]


def oracle_run(oracle: Oracle, scripts: list[Script]) -> list[list[Manifest]]:
    """KubeRay's answers, step by step, for each script."""
    payload = json.dumps([{"name": s.name, "steps": s.steps} for s in scripts])
    results = oracle.run(["-lifecycle"], payload)
    out = []
    for script, result in zip(scripts, results, strict=True):
        cluster = script.steps[0]["cluster"]["metadata"]["name"]
        steps = [
            {**step, "name": cluster, "step": step["name"], "namespace": result["namespace"], "invalid": None}
            for step in result["steps"]
        ]
        if len(steps) != len(script.steps):
            raise OracleError(f"{script.name}: {len(script.steps)} steps sent, {len(steps)} answered")
        out.append(steps)
    return out


def compare_events(document: str, kuberay: list[str], rayscale: list[str]) -> list[Difference]:
    """The Events' types and reasons (see the module's doc)."""

    def reasons(events: list[str]) -> Counter[str]:
        return Counter(" ".join(e.split(" ", 2)[:2]) for e in events)

    a, b = reasons(kuberay), reasons(rayscale)
    return [
        Difference(document, "Events", key, a.get(key, ABSENT), b.get(key, ABSENT))
        for key in sorted(a.keys() | b.keys())
        if (key in a) != (key in b)
    ]


Judged = list[tuple[str, Manifest, Manifest]]  # (document id, KubeRay's answer, rayscale's) per step


def run_all(oracle: Oracle, judged: list[Script] | None = None) -> Judged:
    todo = scripts() if judged is None else judged
    kuberay = oracle_run(oracle, todo)
    out = []
    for script, theirs in zip(todo, kuberay, strict=True):
        ours = lifecycle_side.run_script(script.steps)
        for step, a, b in zip(script.steps, theirs, ours, strict=True):
            out.append((f"lifecycle:{script.name}@{step['name']}", a, b))
    return out


def compare_all(judged: Judged) -> list[tuple[str, bool, list[Difference]]]:
    out = []
    for doc, kuberay, rayscale in judged:
        diffs = compare(doc, kuberay, rayscale) + compare_events(doc, kuberay["events"], rayscale["events"])
        out.append((doc, False, diffs))
    return out
