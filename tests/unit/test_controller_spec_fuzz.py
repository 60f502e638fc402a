"""Any spec ends in a plan or in a named problem: random edits of valid RayClusters (values of every
kind put anywhere, keys added) never make planning fail in a way the validation did not foresee,
and a spec that validates gets a status. Seeded, so a failure reproduces."""

from __future__ import annotations

import contextlib
import copy
import random
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.builders import cluster, group

from rayscale.autoscaler.snapshot import build_snapshot
from rayscale.cluster.validation import Invalid
from rayscale.controller.expectations import ScaleExpectations
from rayscale.controller.reconcile import UNPLANNABLE, plan_cluster
from rayscale.controller.snapshot import ClusterSnapshot
from rayscale.controller.status import compute_status

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
VALUES: list[Any] = [
    None, "", "abc", -1, 0, 1, 2**40, 2**70, 1.5, -0.5, True, [], {}, ["x"], {"a": 1}, "1e999999", "-5",
    "65536", [{}], [1], {"x": None}, "1e19", {"cpu": "abc"}, {"CPU": 2**70}, [{"name": 1}],
    [{"name": "a", "value": 5}], [{"containerPort": 2**40}],
]  # fmt: skip
KEYS = [
    "resources", "serviceType", "headService", "numOfHosts", "replicas", "labels", "rayStartParams",
    "nodeSelector", "initContainers", "volumes", "env", "ports", "volumeMounts", "command", "args",
    "metadata", "annotations", "scaleStrategy", "suspend", "port", "dashboard-agent-listen-port",
    "num-cpus", "limits", "requests", "cpu", "memory", "nvidia.com/gpu", "google.com/tpu",
]  # fmt: skip


def bases() -> list[dict[str, Any]]:
    basic = yaml.safe_load((EXAMPLES / "raycluster-basic.yaml").read_text())
    basic["metadata"].update(namespace="ns", uid="u")
    return [cluster(group(), group("b", hosts=2, replicas=1)), basic]


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if prefix:
        yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from paths(value, (*prefix, i))


def edit(spec: dict[str, Any], rng: random.Random) -> None:
    """Put a value somewhere, or add a key to an object somewhere."""
    where = rng.choice(list(paths(spec)))
    node: Any = spec
    for key in where[:-1]:
        node = node[key]
    value = copy.deepcopy(rng.choice(VALUES))
    target = node[where[-1]]
    if isinstance(target, dict) and rng.random() < 0.4:
        target[rng.choice(KEYS)] = value
    else:
        node[where[-1]] = value


@pytest.mark.parametrize("seed", range(4))
def test_random_specs_are_planned_or_explained(seed: int) -> None:
    rng = random.Random(seed)
    unforeseen: list[str] = []
    for _ in range(300):
        body = copy.deepcopy(rng.choice(bases()))
        body["spec"]["enableInTreeAutoscaling"] = rng.random() < 0.5
        for _ in range(rng.randint(1, 2)):
            edit(body["spec"], rng)
        snapshot = ClusterSnapshot(body, [], [])
        _, spec = plan_cluster(snapshot, ScaleExpectations())
        if isinstance(spec, Invalid):
            if spec.message.startswith(UNPLANNABLE):
                unforeseen.append(f"{spec.message}: {body['spec']}"[:600])
            continue
        assert spec is not None
        compute_status(snapshot.meta, spec, {}, [], [], now=NOW)
        if body["spec"]["enableInTreeAutoscaling"]:
            # a ValueError is what the autoscaler reports as "cannot be autoscaled"; nothing else
            with contextlib.suppress(ValueError):
                build_snapshot(body, [], None, [], (), NOW, max_pods=10_000)
    assert unforeseen == []


def test_null_lists_in_a_template_are_read_as_absent() -> None:
    """`env:` with no items is null in YAML (Kubernetes reads it as absent): the pods still build."""
    body = cluster(group())
    pod_spec = body["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    pod_spec.update(initContainers=None, volumes=None)
    pod_spec["containers"][0].update(env=None, ports=None, volumeMounts=None, command=None, args=None)
    plan, spec = plan_cluster(ClusterSnapshot(body, [], []), ScaleExpectations())
    assert not isinstance(spec, Invalid)
    (worker,) = [c.manifest for s in plan.steps for c in s.creates if c.kind == "worker"]
    ray = worker["spec"]["containers"][0]
    assert {"name": "metrics", "containerPort": 8080, "protocol": "TCP"} in ray["ports"]
    assert any(e["name"] == "RAY_ADDRESS" for e in ray["env"])
