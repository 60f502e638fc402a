"""RayCluster specs the API server admits (KubeRay's schema) but no cluster can be built from, each
with the SpecValid message rayscale must give. Shared by the unit tests of the validation and the
integration test on a real API server (tests/integration/controller/test_invalid_specs.py).

Each case mutates a RayCluster body that has a head group and at least one worker group whose
first container has resources, such as examples/raycluster-basic.yaml or the unit tests' factory.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from rayscale.common.types import Manifest

H = "spec.headGroupSpec"
W = "spec.workerGroupSpecs[0]"
C = "template.spec.containers[0]"
LIMIT = "the limit of 10000 worker pods per RayCluster (--max-pods-per-cluster)"
OUT_OF_RANGE = "is out of range: quantities are limited to ±9223372036854775807 (2^63-1)"
PORT = "must be a port number from 0 to 65535"
MAX_INT32 = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class BadSpec:
    id: str
    mutate: Callable[[Manifest], None]
    message: str

    def apply(self, body: Manifest) -> Manifest:
        out = copy.deepcopy(body)
        self.mutate(out)
        return out


def head(body: Manifest) -> dict[str, Any]:
    group: dict[str, Any] = body["spec"]["headGroupSpec"]
    return group


def worker(body: Manifest, index: int = 0) -> dict[str, Any]:
    group: dict[str, Any] = body["spec"]["workerGroupSpecs"][index]
    return group


def container(group: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = group["template"]["spec"]["containers"][0]
    return first


Group = Callable[[Manifest], dict[str, Any]]


def _set(path: str, value: Any, *, of: Group = worker) -> Callable[[Manifest], None]:
    """Set the dotted `path` (below the group `of` returns) to `value`, making the maps on the way."""

    def mutate(body: Manifest) -> None:
        node = of(body)
        *parents, last = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return mutate


def _in_container(path: str, value: Any, of: Group = worker) -> Callable[[Manifest], None]:
    """Set the dotted `path` below the first container of the group `of` returns."""
    return _set(path, value, of=lambda body: container(of(body)))


def _counts(**fields: int) -> Callable[[Manifest], None]:
    def mutate(body: Manifest) -> None:
        worker(body).update({"maxReplicas": MAX_INT32, **fields})

    return mutate


def _second_group(name: str, **fields: int) -> Callable[[Manifest], None]:
    def mutate(body: Manifest) -> None:
        first = worker(body)
        first.update(fields)
        body["spec"]["workerGroupSpecs"].append({**copy.deepcopy(first), "groupName": name})

    return mutate


def _duplicate(body: Manifest) -> None:
    worker(body)["groupName"] = "workers"
    _second_group("workers")(body)


CASES = [
    # Quantities: bounded before any arithmetic.
    BadSpec("worker-cpu-limit-1e999999", _in_container("resources.limits.cpu", "1e999999"),
            f"{W}.{C}.resources.limits.cpu: '1e999999' {OUT_OF_RANGE}"),
    BadSpec("head-memory-request-1e999999", _in_container("resources.requests.memory", "1e999999", head),
            f"{H}.{C}.resources.requests.memory: '1e999999' {OUT_OF_RANGE}"),
    BadSpec("worker-memory-request-negative", _in_container("resources.requests.memory", "-1Gi"),
            f"{W}.{C}.resources.requests.memory: must not be negative ('-1Gi')"),
    BadSpec("group-resources-cpu-abc", _set("resources", {"CPU": "abc"}),
            f"{W}.resources.CPU: not a quantity: 'abc'"),
    BadSpec("group-resources-memory-1e999999", _set("resources", {"memory": "1e999999"}),
            f"{W}.resources.memory: '1e999999' {OUT_OF_RANGE}"),
    # Counts: bounded per group and per cluster before any per-pod work.
    BadSpec("replicas-100000", _counts(replicas=100_000),
            f"{W}.replicas: 100000 replicas x 1 hosts = 100000 pods is over {LIMIT}"),
    BadSpec("minReplicas-20000", _counts(replicas=1, minReplicas=20_000),
            f"{W}.minReplicas: 20000 replicas x 1 hosts = 20000 pods is over {LIMIT}"),
    BadSpec("numOfHosts-100000", _counts(replicas=1, numOfHosts=100_000),
            f"{W}.numOfHosts: 100000 hosts per replica is over {LIMIT}"),
    BadSpec("replicas-200-x-hosts-100", _counts(replicas=200, numOfHosts=100),
            f"{W}.replicas: 200 replicas x 100 hosts = 20000 pods is over {LIMIT}"),
    BadSpec("two-groups-of-6000", _second_group("more", replicas=6000, maxReplicas=MAX_INT32),
            f"spec.workerGroupSpecs: 12000 worker pods in all is over {LIMIT}"),
    BadSpec("replicas-negative", _set("replicas", -5), f"{W}.replicas: must be >= 0 (-5)"),
    BadSpec("numOfHosts-0", _set("numOfHosts", 0), f"{W}.numOfHosts: must be >= 1 (0)"),
    # Group names: the ray.io/group label of the pods and Ray's node type.
    BadSpec("duplicate-group-names", _duplicate,
            "spec.workerGroupSpecs[1].groupName: 'workers' is also the name of spec.workerGroupSpecs[0]"),
    BadSpec("group-named-headgroup", _set("groupName", "headgroup"),
            f"{W}.groupName: 'headgroup' is the head group's name (the ray.io/group label of the head pod)"),
    BadSpec("group-name-empty", _set("groupName", ""), f"{W}.groupName: must not be empty"),
    BadSpec("group-name-not-a-label", _set("groupName", "two words"),
            f"{W}.groupName: 'two words' is not a valid label value (it labels the group's pods)"),
    # rayStartParams.
    BadSpec("rayStartParams-resources-not-json", _set("rayStartParams", {"resources": '{"CPU": 1'}),
            f"{W}.rayStartParams.resources: not a JSON object: '{{\"CPU\": 1'"),
    BadSpec("rayStartParams-resources-1e999999",
            _set("rayStartParams", {"resources": '{"memory": 1e999999}'}),
            f"{W}.rayStartParams.resources.memory: inf {OUT_OF_RANGE}"),
    BadSpec("rayStartParams-num-cpus-abc", _set("rayStartParams", {"num-cpus": "abc"}),
            f"{W}.rayStartParams.num-cpus: not a quantity: 'abc'"),
    BadSpec("rayStartParams-memory-negative", _set("rayStartParams", {"memory": "-1"}),
            f"{W}.rayStartParams.memory: must not be negative ('-1')"),
    BadSpec("rayStartParams-dashboard-agent-listen-port-abc",
            _set("rayStartParams", {"dashboard-agent-listen-port": "abc"}),
            f"{W}.rayStartParams.dashboard-agent-listen-port: {PORT} ('abc')"),
    BadSpec("head-rayStartParams-port-70000", _set("rayStartParams.port", "70000", of=head),
            f"{H}.rayStartParams.port: {PORT} ('70000')"),
    # Pod templates: the structures the pod and Service builders read.
    BadSpec("containers-not-a-list", _set("template.spec.containers", {"name": "ray-worker", "image": "ray"}),
            f"{W}.template.spec.containers: must be a list of containers"),
    BadSpec("container-not-an-object", _set("template.spec.containers", ["ray-worker"]),
            f"{W}.template.spec.containers[0]: must be an object"),
    BadSpec("template-spec-not-an-object", _set("template.spec", "pod"),
            f"{W}.template.spec: must be an object"),
    BadSpec("container-env-not-a-list", _in_container("env", {"A": "b"}),
            f"{W}.{C}.env: must be a list of variables"),
    BadSpec("head-containerPort-abc", _in_container("ports", [{"name": "gcs", "containerPort": "abc"}], head),
            f"{H}.{C}.ports[0].containerPort: must be a port number from 1 to 65535 ('abc')"),
    # The head Service.
    BadSpec("head-serviceType-Bogus", _set("serviceType", "Bogus", of=head),
            f"{H}.serviceType: must be one of ClusterIP, NodePort, LoadBalancer, ExternalName ('Bogus')"),
]  # fmt: skip
