"""Hypothesis strategies of RayClusters and RayResourceRequests within and just outside the CRD schema,
for the fuzz test on a real API server (tests/integration/controller/test_fuzz_specs.py).

Every object starts from a valid one (examples/, normalised to a few pods at most) and gets one or
two edits: values of the wrong type anywhere, counts at the int32 and int64 edges, negative counts,
quantities like "1e999999", empty, duplicate and reserved group names, bad rayStartParams, pod
templates of the wrong shape, the bad specs of tests/support/invalid_specs.py, keys removed. Some objects stay
inside the schema and valid, some the API server refuses, most it admits and rayscale must explain.
A quarter of the RayClusters are updates: the valid one runs first, then gets the edited spec.

Counts are drawn from edge values only (never a few thousand): a fuzzed RayCluster that rayscale
accepts asks for a handful of pods, so the fuzz never turns into a load test of the scheduler.

`FuzzObject.expected` is what rayscale's own code says about an object as the API server stored it
(`plan_cluster` for a RayCluster, `bundle_problem` for a RayResourceRequest): the outcome the test
waits for.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from rayscale.api.names import RAYRESOURCEREQUEST
from rayscale.autoscaler.requests import bundle_problem
from rayscale.cluster.validation import Invalid
from rayscale.common.types import Manifest
from rayscale.controller.expectations import ScaleExpectations
from rayscale.controller.reconcile import UNPLANNABLE, plan_cluster
from rayscale.controller.snapshot import ClusterSnapshot
from tests.support.builders import example
from tests.support.invalid_specs import CASES, MAX_INT32

RAYCLUSTER, REQUEST = "RayCluster", "RayResourceRequest"
TARGET = "fuzz-target"  # the autoscaling RayCluster the requests name (the test creates it)

# ---- values ----

#: Integers at the edges: of int32 and int64, of the pod cap (10000), of zero. No value between 4
#: and 10000, so that no valid cluster asks for many pods.
EDGE_INTS = [-(2**63), -(2**31) - 1, -(2**31), -5, -1, 0, 1, 2, 3, 10_001, 100_000, MAX_INT32, 2**31,
             2**53 + 1, 2**63 - 1, 2**63, 2**70]  # fmt: skip
#: Quantities: out of range, negative, malformed, too long, tiny, at the edges of 2^63-1.
QUANTITIES: list[Any] = [
    "1e999999", "-1e999999", "1e19", "9223372036854775807", "9223372036854775808", "8Ei", "7Ei", "1Ei",
    "-1", "-1Gi", "-0.5", "abc", "", " ", "1 ", "1.5", "100m", "0.0000000001", "1e-20", "1n", "0",
    "1Ki", "1ki", "0x10", "1e", "+1", "NaN", "inf", "1" * 65, "9" * 64, "1e-999999", "\u0661",
    5, 0, -5, 2**63, 2**70, 1.5, -0.5, 1e300, True, None, [], {},
]  # fmt: skip
SHAPES: list[Any] = [
    None, "", "abc", True, False, [], {}, ["x"], {"a": 1}, [{}], [1], [None], {"x": None}, {"cpu": "abc"},
    {"CPU": 2**70}, [{"name": 1}], [{"name": "a", "value": 5}], [{"containerPort": 2**40}], "pod",
    [{"name": "c"}], {"limits": "x"}, {"requests": {"cpu": None}}, 1.5, -0.5, 1e300,
]  # fmt: skip
VALUES = st.one_of(st.sampled_from(EDGE_INTS), st.sampled_from(QUANTITIES), st.sampled_from(SHAPES))
#: Keys added to an object somewhere (most are fields the builders read somewhere else).
KEYS = [
    "resources", "serviceType", "headService", "numOfHosts", "replicas", "minReplicas", "maxReplicas",
    "labels", "rayStartParams", "nodeSelector", "initContainers", "volumes", "env", "ports",
    "volumeMounts", "command", "args", "metadata", "annotations", "scaleStrategy", "suspend", "port",
    "dashboard-agent-listen-port", "num-cpus", "limits", "requests", "cpu", "memory", "nvidia.com/gpu",
    "google.com/tpu", "containers", "spec", "template", "groupName", "idleTimeoutSeconds", "priority",
]  # fmt: skip
GROUP_NAMES = ["", "headgroup", "two words", "x" * 63, "x" * 64, "-bad", "bad-", "UPPER", "a.b", "a_b",
               "\u00e9", "cpu", "workers"]  # fmt: skip
PARAM_KEYS = ["port", "dashboard-agent-listen-port", "metrics-export-port", "dashboard-port", "num-cpus",
              "num-gpus", "memory", "object-store-memory", "resources", "labels", "redis-password",
              "redis-username", "block", "node-ip-address"]  # fmt: skip
PARAM_VALUES: list[Any] = [
    "abc", "-1", "70000", "65535", "65536", "0", "", " 8080", "\uff18\uff10", "1" * 6, "1e999999",
    "-1Gi", "1.5", '{"CPU": 1', '{"CPU": 1}', '{\\"CPU\\": 1}', '"{\\"CPU\\": 1}"', '{"memory": 1e999999}',
    '{"GPU": -1}', '{"CPU": "abc"}', '{"a": {"b": 1}}', "[1]", "null", "{}", '{"CPU": 1e19}', 8080, None,
    True,
]  # fmt: skip
PORTS: list[Any] = [[{"containerPort": v}] for v in ("abc", 0, 70000, 2**40, -1, "8080", None)]
TEMPLATE_EDITS: list[tuple[str, Any]] = [
    ("spec.containers", {"name": "c"}), ("spec.containers", []), ("spec.containers", ["ray"]),
    ("spec.containers", [None]), ("spec.containers", None), ("spec", "pod"), ("spec", []), ("spec", None),
    ("metadata", "x"), ("metadata.labels", {"a": 1}), ("metadata.annotations", ["x"]),
    ("spec.containers.0.env", {"A": "b"}), ("spec.containers.0.env", [1]),
    ("spec.containers.0.env", [{"name": "RAY_enable_autoscaler_v2", "value": "1"}]),
    ("spec.containers.0.env", [{"name": "RAY_REDIS_ADDRESS", "value": "redis:6379"}]),
    ("spec.containers.0.ports", "8080"), ("spec.containers.0.ports", [{"containerPort": 8080, "name": 5}]),
    ("spec.containers.0.command", "ray start"), ("spec.containers.0.command", [1]),
    ("spec.containers.0.args", [None]), ("spec.containers.0.volumeMounts", {"a": "b"}),
    ("spec.volumes", {}),
    ("spec.initContainers", [{"name": "i", "resources": {"limits": {"cpu": "1e999999"}}}]),
    ("spec.initContainers", "x"), ("spec.nodeSelector", {"a": 1}), ("spec.nodeSelector", "x"),
    ("spec.restartPolicy", "Always"), ("spec.containers.0.resources", "1"),
    ("spec.containers.0.resources", {"limits": "x"}), ("spec.containers.0.resources.limits.cpu", None),
    *[("spec.containers.0.ports", p) for p in PORTS],
]  # fmt: skip
SPEC_EDITS: list[tuple[str, Any]] = [
    ("headGroupSpec.serviceType", "Bogus"), ("headGroupSpec.serviceType", ""),
    ("headGroupSpec.serviceType", "NodePort"), ("headGroupSpec.serviceType", 5),
    ("headGroupSpec.headService", "x"), ("headGroupSpec.headService", {"spec": {"ports": "x"}}),
    ("headGroupSpec.headService", {"metadata": {"labels": {"a": 1}}}),
    ("autoscalerOptions", {"version": "v3"}), ("autoscalerOptions", {"idleTimeoutSeconds": -1}),
    ("autoscalerOptions", {"version": "v2"}), ("autoscalerOptions", {"upscalingMode": "Fast"}),
    ("autoscalerOptions", {"env": [{"name": "KUBERAY_GEN_AUTOSCALER_START_CMD", "value": "x"}]}),
    ("gcsFaultToleranceOptions", {"backend": "rocksdb"}), ("gcsFaultToleranceOptions", {}),
    ("rayVersion", "abc"), ("rayVersion", 2), ("suspend", True), ("suspend", "yes"),
    ("managedBy", "kueue.x-k8s.io/multikueue"), ("managedBy", "someone-else"),
    ("networkPolicy", {}), ("authOptions", {"mode": "token"}), ("enableInTreeAutoscaling", "true"),
    ("headGroupSpec", None), ("workerGroupSpecs", None), ("workerGroupSpecs", {}), ("workerGroupSpecs", [1]),
    ("headGroupSpec.rayStartParams", {"port": "70000"}),
    ("headGroupSpec.rayStartParams", {"redis-username": "u"}),
]  # fmt: skip
COUNT_FIELDS = ["replicas", "minReplicas", "maxReplicas", "numOfHosts", "idleTimeoutSeconds", "priority"]
COUNT_VALUES: list[Any] = [*EDGE_INTS, "3", 1.5, None, True]
#: rayscale's name rules (DNS-1035, 53 characters) are narrower than the API server's.
NAME_SUFFIXES = ["", "", "", "", "", "", "-" + "x" * 50, ".dotted", "-"]


def _normalised(body: Manifest) -> Manifest:
    """A base with a few pods at most: replicas <= 1, maxReplicas <= 2, small requests."""
    for group in body["spec"].get("workerGroupSpecs") or []:
        group["replicas"] = min(group.get("replicas", 0), 1)
        group["maxReplicas"] = min(group.get("maxReplicas", 2), 2)
    body["metadata"] = {}
    return body


def _load(name: str) -> Manifest:
    return _normalised(example(name))


BASES: dict[str, Manifest] = {
    name: _load(name)
    for name in ("raycluster-basic.yaml", "raycluster-multihost-tpu.yaml", "demo/raycluster-autoscaling.yaml")
}


# ---- edits ----


def paths(node: Any) -> list[tuple[Any, ...]]:
    """Every path below `node` (keys and list indexes), the deepest first (hypothesis starts with
    the first: inside pod templates, which the schema leaves open, rather than top-level fields)."""
    return sorted(_paths(node), key=lambda p: (-len(p), str(p)))


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def put(node: Any, path: str | tuple[Any, ...], value: Any) -> bool:
    """Set `path` (dotted, or a tuple) below `node`, making maps on the way; False when a step is
    not a map or list it can go through (the edit is then skipped)."""
    keys: tuple[Any, ...] = (
        tuple(int(k) if k.isdigit() else k for k in path.split(".")) if isinstance(path, str) else path
    )
    for key in keys[:-1]:
        if isinstance(node, dict):
            node = node.setdefault(key, {})
        elif isinstance(node, list) and isinstance(key, int) and key < len(node):
            node = node[key]
        else:
            return False
    if isinstance(node, dict) or (
        isinstance(node, list) and isinstance(keys[-1], int) and keys[-1] < len(node)
    ):
        node[keys[-1]] = copy.deepcopy(value)
        return True
    return False


def _shown(value: Any, cut: int = 40) -> str:
    text = json.dumps(value)
    return text if len(text) <= cut else text[: cut - 3] + "..."


Draw = Callable[[st.SearchStrategy[Any]], Any]


def _groups(spec: Manifest) -> list[Any]:
    groups = spec.get("workerGroupSpecs")
    return groups if isinstance(groups, list) else []


def _group_index(draw: Draw, spec: Manifest) -> int | None:
    groups = _groups(spec)
    return draw(st.integers(0, len(groups) - 1)) if groups else None


def edit_anywhere(draw: Draw, spec: Manifest) -> str:
    """A value of any kind at any path, or a key added to any object."""
    if not spec:
        return "no edit (empty spec)"
    where = draw(st.sampled_from(paths(spec)))
    value = copy.deepcopy(draw(VALUES))  # the lists above stay as they are
    node: Any = spec
    for key in where[:-1]:
        node = node[key]
    target = node[where[-1]]
    if isinstance(target, dict) and draw(st.booleans()):
        key = draw(st.sampled_from(KEYS))
        target[key] = value
        return f"spec.{'.'.join(map(str, where))}.{key} = {_shown(value)}"
    node[where[-1]] = value
    return f"spec.{'.'.join(map(str, where))} = {_shown(value)}"


def edit_count(draw: Draw, spec: Manifest) -> str:
    i = _group_index(draw, spec)
    field, value = draw(st.sampled_from(COUNT_FIELDS)), draw(st.sampled_from(COUNT_VALUES))
    if i is None or not put(spec, ("workerGroupSpecs", i, field), value):
        return "no count edit (no worker group)"
    return f"spec.workerGroupSpecs[{i}].{field} = {_shown(value)}"


def edit_quantity(draw: Draw, spec: Manifest) -> str:
    """A quantity where rayscale reads one: container resources, group resources, rayStartParams."""
    head = draw(st.booleans())
    i = None if head else _group_index(draw, spec)
    prefix: tuple[Any, ...] = ("headGroupSpec",) if i is None else ("workerGroupSpecs", i)
    kind = draw(st.sampled_from(["container", "init", "group", "param"]))
    value = draw(st.sampled_from(QUANTITIES))
    if kind in ("container", "init"):
        which = draw(st.sampled_from(["limits", "requests"]))
        res = draw(
            st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "google.com/tpu", "ephemeral-storage"])
        )
        if kind == "container":
            path: tuple[Any, ...] = (*prefix, "template", "spec", "containers", 0, "resources", which, res)
        else:
            init = {"name": "init", "image": "busybox", "resources": {which: {res: value}}}
            put(spec, (*prefix, "template", "spec", "initContainers"), [init])
            where = ".".join(map(str, prefix))
            return f"spec.{where}.template.spec.initContainers[0].resources.{which}.{res} = {_shown(value)}"
    elif kind == "group":
        path = (*prefix, "resources", draw(st.sampled_from(["CPU", "GPU", "memory", "TPU", "custom"])))
    else:
        path = (
            *prefix,
            "rayStartParams",
            draw(st.sampled_from(["num-cpus", "num-gpus", "memory", "object-store-memory"])),
        )
    if not put(spec, path, value):
        return "no quantity edit"
    return f"spec.{'.'.join(map(str, path))} = {_shown(value)}"


def edit_group_name(draw: Draw, spec: Manifest) -> str:
    i = _group_index(draw, spec)
    if i is None or not isinstance(_groups(spec)[i], dict):
        return "no group-name edit"
    groups = _groups(spec)
    if draw(st.booleans()):
        copied = copy.deepcopy(groups[i])
        groups.append(copied)
        return f"spec.workerGroupSpecs[{i}] duplicated as [{len(groups) - 1}] (same groupName)"
    name = draw(st.sampled_from(GROUP_NAMES))
    groups[i]["groupName"] = name
    return f"spec.workerGroupSpecs[{i}].groupName = {_shown(name)}"


def edit_ray_start_params(draw: Draw, spec: Manifest) -> str:
    i = None if draw(st.booleans()) else _group_index(draw, spec)
    prefix: tuple[Any, ...] = ("headGroupSpec",) if i is None else ("workerGroupSpecs", i)
    key, value = draw(st.sampled_from(PARAM_KEYS)), draw(st.sampled_from(PARAM_VALUES))
    if not put(spec, (*prefix, "rayStartParams", key), value):
        return "no rayStartParams edit"
    return f"spec.{'.'.join(map(str, prefix))}.rayStartParams.{key} = {_shown(value)}"


def edit_template(draw: Draw, spec: Manifest) -> str:
    i = None if draw(st.booleans()) else _group_index(draw, spec)
    prefix = "headGroupSpec" if i is None else f"workerGroupSpecs.{i}"
    path, value = draw(st.sampled_from(TEMPLATE_EDITS))
    if not put(spec, f"{prefix}.template.{path}", value):
        return "no template edit"
    return f"spec.{prefix}.template.{path} = {_shown(value)}"


def edit_spec(draw: Draw, spec: Manifest) -> str:
    path, value = draw(st.sampled_from(SPEC_EDITS))
    if not put(spec, path, value):
        return "no spec edit"
    return f"spec.{path} = {_shown(value)}"


def edit_known_bad(draw: Draw, spec: Manifest) -> str:
    """One of tests/support/invalid_specs.py's bad specs (they need the base's shape: applied first)."""
    case = draw(st.sampled_from(CASES))
    try:
        body = case.apply({"spec": spec})
    except (KeyError, IndexError, TypeError, AttributeError):
        return f"no invalid_specs:{case.id} (the spec has not the shape it needs)"
    spec.clear()
    spec.update(body["spec"])
    return f"invalid_specs:{case.id}"


def edit_remove(draw: Draw, spec: Manifest) -> str:
    if not spec:
        return "no removal (empty spec)"
    where = draw(st.sampled_from(paths(spec)))
    node: Any = spec
    for key in where[:-1]:
        node = node[key]
    del node[where[-1]]
    return f"del spec.{'.'.join(map(str, where))}"


EDITS = [edit_anywhere, edit_anywhere, edit_count, edit_quantity, edit_group_name, edit_ray_start_params,
         edit_template, edit_spec, edit_known_bad, edit_remove]  # fmt: skip


# ---- objects ----


@dataclasses.dataclass(frozen=True)
class Expected:
    """What rayscale's own code says: `invalid` (reason, message) or None for a valid object;
    `skipped`: a RayCluster rayscale leaves alone (managedBy another controller)."""

    invalid: tuple[str, str] | None
    skipped: bool = False


@dataclasses.dataclass(frozen=True)
class FuzzObject:
    kind: str  # RAYCLUSTER | REQUEST
    base: str
    body: Manifest  # without metadata.name: `named` sets it
    edits: tuple[str, ...]
    name_suffix: str = ""
    #: An update: the valid RayCluster it is an edit of is created first, runs, and then gets
    #: `body`'s spec (None: `body` is created as it is).
    original: Manifest | None = None

    def named(self, name: str) -> Manifest:
        body = copy.deepcopy(self.body)
        body["metadata"] = {"name": name + self.name_suffix}
        return body

    def describe(self) -> str:
        how = "an update of" if self.original is not None else "from"
        return f"{self.kind} {how} {self.base}: {'; '.join(self.edits) or 'unchanged'}"

    def key(self) -> str:
        """Objects with edits at the same places are one (hypothesis repeats simple examples)."""
        update = self.original is not None
        return f"{self.kind} {self.base} {update} {sorted(e.split(' = ')[0] for e in self.edits)}"


@st.composite
def rayclusters(draw: Draw) -> FuzzObject:
    base = draw(st.sampled_from(sorted(BASES)))
    body = copy.deepcopy(BASES[base])
    body["spec"]["enableInTreeAutoscaling"] = draw(st.booleans())
    original = copy.deepcopy(body) if draw(st.integers(0, 3)) == 0 else None
    edits = [draw(st.sampled_from(EDITS))(draw, body["spec"]) for _ in range(draw(st.integers(1, 2)))]
    suffix = "" if original is not None else draw(st.sampled_from(NAME_SUFFIXES))
    if suffix:
        edits.append(f"metadata.name + {suffix!r}")
    return FuzzObject(RAYCLUSTER, base, body, tuple(edits), suffix, original)


REQUEST_RESOURCES = ["CPU", "GPU", "memory", "TPU", "custom", "", "a/b", "x" * 300]
#: Valid amounts (first: hypothesis starts there), amounts the CRD's quantity pattern admits but
#: rayscale must refuse, and a few the schema refuses.
REQUEST_AMOUNTS: list[Any] = [
    1, "500m", "1Gi", 2, "1", "0", 0, "1e999999", "-1e999999", "1e19", "9223372036854775808", "8Ei", "-1",
    "-1Gi", "1e-999999", "9" * 64, "1" * 65, 2**63, -5, "abc", 1.5, True, None,
]  # fmt: skip
REQUEST_COUNTS: list[Any] = [1, 1, 2, 0, -1, MAX_INT32, 2**31, 100_000, 100_001, 1.5, "3", None]
REQUEST_CLUSTERS = [TARGET, TARGET, TARGET, "no-such-cluster", "", "Not A Name"]


@st.composite
def bundles(draw: Draw) -> Manifest:
    keys = draw(st.lists(st.sampled_from(REQUEST_RESOURCES), min_size=1, max_size=2, unique=True))
    bundle: Manifest = {"resources": {k: draw(st.sampled_from(REQUEST_AMOUNTS)) for k in keys}}
    count = draw(st.sampled_from([*REQUEST_COUNTS, "absent"]))
    if count != "absent":
        bundle["count"] = count
    return bundle


@st.composite
def resource_requests(draw: Draw) -> FuzzObject:
    items = draw(st.lists(bundles(), min_size=1, max_size=3))
    body: Manifest = {
        **RAYRESOURCEREQUEST.type_meta(),
        "metadata": {},
        "spec": {"clusterName": draw(st.sampled_from(REQUEST_CLUSTERS)), "bundles": items},
    }
    edits = [f"{len(items)} bundle(s): {_shown(items, 200)}"]
    if draw(st.integers(0, 4)) == 0:
        edits.append(edit_anywhere(draw, body["spec"]))
    return FuzzObject(REQUEST, "generated", body, tuple(edits))


def draw_objects(count: int, fuzz_seed: int = 0) -> list[FuzzObject]:
    """`count` distinct objects, three RayClusters for every RayResourceRequest, the same ones for
    the same seed (hypothesis as a generator: the examples are applied to the API server in
    batches, which hypothesis' own loop cannot do)."""
    requests = _distinct(resource_requests(), count // 4, fuzz_seed)
    clusters = _distinct(rayclusters(), count - len(requests), fuzz_seed)
    mixed = []
    for i, cluster in enumerate(clusters):
        mixed.append(cluster)
        if i % 3 == 2 and requests:
            mixed.append(requests.pop(0))
    return mixed + requests


def _distinct(strategy: st.SearchStrategy[FuzzObject], count: int, fuzz_seed: int) -> list[FuzzObject]:
    found: dict[str, FuzzObject] = {}

    @seed(fuzz_seed)
    @settings(max_examples=count * 10, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(strategy)
    def collect(obj: FuzzObject) -> None:
        if len(found) < count:
            found.setdefault(obj.key(), obj)

    collect()
    return list(found.values())


# ---- what rayscale says ----


def expected(kind: str, stored: Manifest) -> Expected:
    """The outcome rayscale's code gives `stored` (the object as the API server returned it)."""
    if kind == REQUEST:
        problem = bundle_problem(stored)
        return Expected(("InvalidBundles", problem) if problem else None)
    plan, spec = plan_cluster(ClusterSnapshot(stored, [], []), ScaleExpectations())
    if isinstance(spec, Invalid):
        return Expected((spec.reason, spec.message))
    return Expected(None, skipped=spec is None or plan.skip)


def unforeseen(exp: Expected) -> bool:
    """Planning failed in a way the validation did not foresee (a defect, per troubleshooting.md)."""
    return exp.invalid is not None and exp.invalid[1].startswith(UNPLANNABLE)


_TOKEN = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


def named_field(body: Manifest, message: str) -> bool:
    """Whether `message` starts with a field path (`spec.workerGroupSpecs[0].replicas: ...`) that
    leads into `body`: through objects and lists (indexes in range) to the field, or to an object
    that lacks the next step (a missing field), or into a string (the JSON of
    rayStartParams.resources). Keys with dots (`nvidia.com/gpu`) are matched whole."""
    path = message.removeprefix("a bundle cannot be read: ").split(": ", 1)[0]
    if not path.startswith(("spec", "metadata")):
        return False
    tokens = [(key, int(index) if index else None) for index, key in _TOKEN.findall(path)]
    return _resolves(body, tokens)


def _resolves(node: Any, tokens: list[tuple[str, int | None]]) -> bool:
    if not tokens or node is None or isinstance(node, str):
        return True  # the field, a null (read as absent), or inside a string
    key, index = tokens[0]
    if index is None and key.isdigit():
        index = int(key)  # pydantic's spec.workerGroupSpecs.0.replicas
    if index is not None:
        return isinstance(node, list) and index < len(node) and _resolves(node[index], tokens[1:])
    if isinstance(node, dict):
        for n in range(len(tokens), 0, -1):
            if any(i is not None for _, i in tokens[:n]):
                continue
            joined = ".".join(k for k, _ in tokens[:n])
            if joined in node:
                if _resolves(node[joined], tokens[n:]):
                    return True
                break
        else:
            return True  # a field that is missing (e.g. template.spec.containers without template.spec)
    return False


__all__ = ["BASES", "RAYCLUSTER", "REQUEST", "TARGET", "Expected", "FuzzObject", "draw_objects", "expected",
           "named_field", "unforeseen"]  # fmt: skip
