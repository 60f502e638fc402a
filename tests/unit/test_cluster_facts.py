"""The controller and the autoscaler read the same facts off a RayCluster (`rayscale.cluster`).

For every RayCluster rayscale knows of (KubeRay's samples when the Go module cache has them,
examples/, tests/kuberay/cases/, the builders of tests/support/builders.py and seeded random specs):

- the head Service the controller creates, the address its workers dial and the address the
  autoscaler dials are one: the Service's name in the cluster domain, on the port the head's GCS
  listens on;
- the ``ray start`` of every group's pods announces exactly the resources and labels the
  autoscaler's snapshot assumes for the group's hosts, but for what Ray's own autoscaler assumes
  beyond ``ray start`` (memory, GPUs and accelerators from the Ray container's requests where its
  limits have none; ``TPU-<type>-head``, which Ray adds on a TPU slice);
- the Secret the controller puts the Ray auth token in is the one the autoscaler reads it from;
- the head pod says GCS fault tolerance is on exactly when the controller adds the Redis cleanup
  finalizer;
- status and the scheduler count the same resources as GPUs and TPUs.

The other side of each check is read from what the controller built (the pods' generated ``ray
start`` command, as a shell splits it), not from `rayscale.cluster` itself.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import random
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.kuberay import documents
from tests.kuberay.oracle import module_dir
from tests.support.builders import cluster, container, container_env, group

from rayscale.api.raycluster import RayClusterSpec, WorkerGroupSpec
from rayscale.autoscaler.scenario import parse_scenario
from rayscale.autoscaler.snapshot import build_snapshot
from rayscale.autoscaler.spec_reader import SpecError, read_spec
from rayscale.cluster import accelerators, fields, naming
from rayscale.cluster.accelerators import GPU, TPU, is_gpu_key, is_tpu_slice_head_resource
from rayscale.cluster.host import host_labels, host_resources
from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.validation import Invalid, parse_and_validate
from rayscale.controller import pods, redis_cleanup, services, tokenauth
from rayscale.controller.expectations import ScaleExpectations
from rayscale.controller.reconcile import plan_cluster
from rayscale.controller.snapshot import ClusterSnapshot
from rayscale.controller.status import desired_resources
from rayscale.ray.address import AddressError, auth_token_secret, gcs_target
from rayscale.resources import parse_quantity

Body = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
CLUSTER_PACKAGE = ROOT / "operator" / "rayscale" / "cluster"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
#: The operator's switches that change what the controller builds for these checks.
SWITCHES = ("CLUSTER_DOMAIN", "ENABLE_INIT_CONTAINER_INJECTION", "ENABLE_GCS_FT_REDIS_CLEANUP",
            "ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE", "ENABLE_PROBES_INJECTION")  # fmt: skip


@pytest.fixture(autouse=True)
def _kuberay_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)


# ----------------------------------------------------------------------------- the documents


def kuberay_samples() -> Path:
    """config/samples of the pinned KubeRay module (fetched into the Go module cache if missing)."""
    return module_dir() / "config" / "samples"


def _scenario_clusters() -> list[documents.Document]:
    """The RayClusters scenario files embed (``cluster:``), as the autoscaler reads them."""
    out = []
    for path in sorted((ROOT / "examples" / "scenarios").glob("*.yaml")):
        embedded = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("cluster")
        if isinstance(embedded, dict):
            body = copy.deepcopy(embedded)
            body["metadata"].setdefault("namespace", documents.NAMESPACE)
            body["metadata"].setdefault("uid", documents.UID)
            out.append(documents.Document(f"scenario:{path.name}", body))
    return out


def _factory_clusters() -> list[documents.Document]:
    selector = {
        accelerators.GKE_TPU_TOPOLOGY_LABEL: "2x2x1",
        accelerators.GKE_TPU_ACCELERATOR_LABEL: "tpu-v4-podslice",
    }
    tpu_worker = container("ray-worker", cpu="8", memory="16Gi", **{accelerators.TPU_RESOURCE: "4"})
    tpu = {"nodeSelector": selector, "containers": [tpu_worker]}
    gpu = {"containers": [container("ray-worker", cpu="4", memory="8Gi", **{"nvidia.com/gpu": "2"})]}
    head = {
        "rayStartParams": {"port": "6380"},
        "headService": {"metadata": {"name": "hs"}},
        "template": {"spec": {"containers": [container("ray-head")]}},
    }
    group_resources = {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1", "Custom": "3"}
    made = {
        "basic": cluster(group(), group("b", hosts=2, replicas=1)),
        "autoscaling": cluster(group("cpu", replicas=0), autoscaling=True),
        "gpu": cluster(group("gpu", template={"spec": gpu}), group("mig", rayStartParams={"num-gpus": "1"})),
        "tpu-slice": cluster(group("tpu", hosts=2, template={"spec": tpu}), autoscaling=True),
        "group-resources": cluster(group("r", resources=group_resources, labels={"zone": "a", "tier": "b"})),
        "custom-params": cluster(
            group("c", rayStartParams={"num-cpus": "3", "resources": '\'{"Custom": 2, "TPU": 1}\''})
        ),
        "custom-head-service": cluster(group(), headGroupSpec=head),
        # 52 characters: KubeRay names its token Secret by the last 50 (`naming.check_name`)
        "token": cluster(group(), name="t" * 52, authOptions={"mode": "token"}, rayVersion="2.55.0"),
        "ft": cluster(group(), gcsFaultToleranceOptions={"redisAddress": "redis:6379"}),
    }
    return [documents.Document(f"factory:{name}", body) for name, body in made.items()]


def all_documents() -> list[documents.Document]:
    docs: list[documents.Document] = []
    samples = kuberay_samples()
    for path in sorted(samples.rglob("*.yaml")):
        docs += documents.rayclusters(path, "sample", samples)
    for path in sorted(documents.EXAMPLES.rglob("*.yaml")):
        docs += documents.rayclusters(path, "example", documents.EXAMPLES)
    for path in sorted(documents.CASES.glob("*.yaml")):
        docs += documents.rayclusters(path, "case", documents.CASES)
    return docs + _scenario_clusters() + FACTORY


FACTORY = _factory_clusters()
DOCUMENTS = all_documents()


# ----------------------------------------------------------------------------- seeded random specs

GPU_KEYS = ["nvidia.com/gpu", "amd.com/gpu", "nvidia.com/mig-1g.5gb", "intel.com/gpu"]
ACCELERATOR_KEYS = [accelerators.TPU_RESOURCE, accelerators.NEURON_RESOURCE]
#: As KubeRay's samples write the resources JSON: quoted for the shell (KubeRay passes it as written).
PARAM_RESOURCES = ["'{\"Custom\": 2}'", "'{\"TPU\": 4}'", '"{\\"neuron_cores\\": 1, \\"Other\\": 0.5}"', "{}"]
GROUP_RESOURCES = {"cpu": ["500m", "2"], "memory": ["1Gi", "1000"], "nvidia.com/gpu": ["1", "0.5"],
                   "Custom": ["3", "0.25"], "TPU": ["4"], "neuron_cores": ["2"]}  # fmt: skip


def _random_container(rng: random.Random, name: str) -> dict[str, Any]:
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    for key, values in (("cpu", ["500m", "1", "2500m"]), ("memory", ["1Gi", "512M", "1000"])):
        where = rng.random()
        if where < 0.4:
            limits[key] = rng.choice(values)
        if 0.3 < where < 0.8:
            requests[key] = rng.choice(values)
    for key in rng.sample(GPU_KEYS + ACCELERATOR_KEYS, k=rng.randint(0, 2)):
        amount = rng.choice(["0", "1", "2"])
        requests[key] = amount
        if rng.random() < 0.7:
            limits[key] = amount
    return {"name": name, "image": "rayproject/ray", "resources": {"limits": limits, "requests": requests}}


def _random_group_fields(rng: random.Random, name: str) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [_random_container(rng, name)]}
    if rng.random() < 0.3:
        pod["containers"].append(container("sidecar", cpu="1", **{"nvidia.com/gpu": "1"}))
    if rng.random() < 0.3:
        pod["nodeSelector"] = {
            accelerators.GKE_TPU_TOPOLOGY_LABEL: rng.choice(["4x4", "2x2x1"]),
            accelerators.GKE_TPU_ACCELERATOR_LABEL: rng.choice(["tpu-v6e-slice", "tpu-v4-podslice"]),
        }
    out: dict[str, Any] = {"template": {"spec": pod}, "rayStartParams": {}}
    if rng.random() < 0.4:
        out["resources"] = {k: rng.choice(v) for k, v in rng.sample(sorted(GROUP_RESOURCES.items()), k=2)}
    else:
        params = out["rayStartParams"]
        for param, values in (("num-cpus", ["0", "1", "3"]), ("num-gpus", ["0", "1"]),
                              ("memory", ["1000000000"]), ("resources", PARAM_RESOURCES)):  # fmt: skip
            if rng.random() < 0.25:
                params[param] = rng.choice(values)
    if rng.random() < 0.4:
        out["labels"] = rng.choice([{"zone": "a"}, {"zone": "b", "tier": "gold"}])
    return out


def random_cluster(rng: random.Random, index: int) -> Body:
    workers = [
        {**group(f"g{i}", hosts=rng.choice([1, 1, 2]), replicas=1), **_random_group_fields(rng, "ray-worker")}
        for i in range(rng.randint(1, 3))
    ]
    body = cluster(*workers, name=f"random-{index}", autoscaling=rng.random() < 0.5)
    body["spec"]["headGroupSpec"] = _random_group_fields(rng, "ray-head")
    return body


def random_documents(seed: int, count: int = 60) -> list[documents.Document]:
    rng = random.Random(seed)
    return [documents.Document(f"random:{seed}:{i}", random_cluster(rng, i)) for i in range(count)]


# ----------------------------------------------------------------------------- what the controller built


def _valid(body: Body) -> tuple[ClusterMeta, RayClusterSpec] | None:
    meta = ClusterMeta.from_body(body)
    parsed = parse_and_validate(meta, body.get("spec") or {})
    return None if isinstance(parsed, Invalid) else (meta, parsed)


def ray_start_flags(pod: Mapping[str, Any]) -> dict[str, str]:
    """The flags of the pod's generated ``ray start``, as the shell hands them to Ray."""
    words = shlex.split(container_env(pod["spec"]["containers"][0])["KUBERAY_GEN_RAY_START_CMD"])
    assert words[:2] == ["ray", "start"], words
    flags = {}
    for word in words[2:]:
        key, sep, value = word.removeprefix("--").partition("=")
        flags[key] = value if sep else "true"
    return flags


def announced(flags: Mapping[str, str]) -> dict[str, float]:
    """The logical resources Ray takes from these flags (zero amounts dropped)."""
    out: dict[str, float] = {}
    if "resources" in flags:
        out.update((name, float(amount)) for name, amount in json.loads(flags["resources"]).items())
    for flag, name in (("num-cpus", "CPU"), ("num-gpus", GPU), ("memory", "memory")):
        if flag in flags:
            out[name] = float(flags[flag])
    return {name: amount for name, amount in out.items() if amount != 0}


def announced_labels(flags: Mapping[str, str]) -> dict[str, str]:
    pairs = (item.partition("=") for item in flags.get("labels", "").split(",") if item)
    return {key: value for key, _, value in pairs}


def _positive(amounts: Mapping[str, Any], wanted: Any) -> bool:
    return any(wanted(key) and parse_quantity(value) > 0 for key, value in amounts.items())


def assumed_beyond_ray_start(group_spec: Mapping[str, Any]) -> set[str]:
    """What Ray's autoscaler assumes from the Ray container's requests where its limits have none
    (``ray start`` gets nothing for it; Ray detects the amount itself)."""
    res = group_spec["template"]["spec"]["containers"][0].get("resources") or {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    out = set()
    for name, wanted in (
        ("memory", lambda key: key == "memory"),
        (GPU, is_gpu_key),
        (TPU, lambda key: key == accelerators.TPU_RESOURCE),
        (accelerators.NEURON_CORES, lambda key: key == accelerators.NEURON_RESOURCE),
    ):
        if _positive(requests, wanted) and not _positive(limits, wanted):
            out.add(name)
    return out


Groups = Iterator[tuple[str, Mapping[str, Any], WorkerGroupSpec | None]]


def _groups(body: Body, spec: RayClusterSpec) -> Groups:
    yield "head", body["spec"]["headGroupSpec"], None
    raw = {g["groupName"]: g for g in body["spec"].get("workerGroupSpecs") or []}
    for g in spec.workers:
        if not g.suspend:
            yield g.group_name, raw[g.group_name], g


# ----------------------------------------------------------------------------- the checks


def check_head_address(doc: documents.Document, meta: ClusterMeta, spec: RayClusterSpec) -> None:
    service = services.head_service(meta, spec)
    dialled = gcs_target(meta, spec, allow_override=False).address
    host, _, port = dialled.rpartition(":")
    domain = os.environ.get("CLUSTER_DOMAIN", "cluster.local")
    assert host == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.{domain}", doc.id
    head_flags = ray_start_flags(pods.head_pod(meta, spec))
    assert int(port) == int(head_flags.get("port", "6379")), doc.id  # where the GCS listens
    for g in spec.workers:
        worker = pods.worker_pod(meta, spec, g, replica_index=0)
        assert ray_start_flags(worker)["address"] == dialled, doc.id
        ray = worker["spec"]["containers"][0]
        assert (container_env(ray)["RAY_ADDRESS"], container_env(ray)["FQ_RAY_IP"]) == (dialled, host), doc.id
        for init in worker["spec"].get("initContainers") or []:
            if init["name"] == "wait-gcs-ready":
                assert f"--address {dialled} " in init["args"][0], doc.id
    own_port = "port" in (spec.head_group_spec.ray_start_params or {})
    if service["spec"].get("clusterIP") != "None" and not own_port:
        # With a cluster IP the Service forwards only its ports: the GCS's is among them.
        gcs = [p for p in service["spec"]["ports"] if p["name"] == "gcs-server"]
        assert not gcs or gcs[0]["port"] == int(port), doc.id


def check_host_resources(doc: documents.Document, meta: ClusterMeta, spec: RayClusterSpec) -> None:
    snapshot = {g.name: g for g in build_snapshot(doc.body, [], None, [], (), NOW).groups}
    for name, raw, parsed in _groups(doc.body, spec):
        if parsed is None:
            pod = pods.head_pod(meta, spec)
            assumed, labels = host_resources(spec.head_group_spec), host_labels(spec.head_group_spec)
        else:
            pod = pods.worker_pod(meta, spec, parsed, replica_index=0)
            assumed, labels = dict(snapshot[name].resources), dict(snapshot[name].labels)
        flags = ray_start_flags(pod)
        said = announced(flags)
        where = f"{doc.id} group {name}: ray start says {said}, the autoscaler assumes {assumed}"
        assert {key: assumed.get(key) for key in said} == said, where
        beyond = assumed_beyond_ray_start(raw)
        for key in assumed.keys() - said.keys():
            assert key in beyond or (is_tpu_slice_head_resource(key) and assumed.get(TPU, 0) > 0), where
        assert announced_labels(flags) == labels, f"{doc.id} group {name}: labels"


def check_token_secret(doc: documents.Document, meta: ClusterMeta, spec: RayClusterSpec) -> None:
    auth = spec.auth_options
    if not tokenauth.enabled(auth) or (auth is not None and auth.enable_k8s_token_auth):
        return
    ref = auth_token_secret(meta, spec)
    assert ref is not None, doc.id
    workers = [pods.worker_pod(meta, spec, g, replica_index=0) for g in spec.workers]
    for pod in [pods.head_pod(meta, spec), *workers]:
        selector = container_env(pod["spec"]["containers"][0])["RAY_AUTH_TOKEN"]["secretKeyRef"]
        assert (meta.namespace, selector["name"], selector["key"]) == (ref.namespace, ref.name, ref.key)
    if tokenauth.needs_secret(auth):
        assert tokenauth.secret_manifest(meta, auth)["metadata"]["name"] == ref.name, doc.id


def check_fault_tolerance(doc: documents.Document, meta: ClusterMeta, spec: RayClusterSpec) -> None:
    plan, _ = plan_cluster(ClusterSnapshot(doc.body, [], []), ScaleExpectations())
    head = pods.head_pod(meta, spec)
    on = head["metadata"]["annotations"]["ray.io/ft-enabled"] == "true"
    assert (plan.add_finalizer == redis_cleanup.FINALIZER) == on, doc.id


def check_simulate_reads_as_the_loop(
    doc: documents.Document, meta: ClusterMeta, spec: RayClusterSpec
) -> None:
    """``rayscale simulate`` on the manifest sees the groups and options the live loop plans with."""
    live = read_spec(doc.body, check=True)
    assert live.spec == spec, doc.id
    simulated = parse_scenario({"cluster": doc.body})
    assert simulated.groups == live.groups, doc.id
    assert simulated.options == live.options, doc.id
    assert build_snapshot(doc.body, [], None, [], (), NOW).groups == live.groups, doc.id


CHECKS = (
    check_head_address,
    check_host_resources,
    check_token_secret,
    check_fault_tolerance,
    check_simulate_reads_as_the_loop,
)


def check_all(doc: documents.Document) -> bool:
    """Every check on `doc`; False when rayscale refuses the spec (nothing is built from it)."""
    valid = _valid(doc.body)
    if valid is None:
        return False
    for check in CHECKS:
        check(doc, *valid)
    return True


@pytest.mark.parametrize("doc", DOCUMENTS, ids=[d.id for d in DOCUMENTS])
def test_controller_and_autoscaler_agree(doc: documents.Document) -> None:
    if not check_all(doc):
        pytest.skip("rayscale refuses this RayCluster: nothing is built from it")


@pytest.mark.parametrize("doc", DOCUMENTS, ids=[d.id for d in DOCUMENTS])
def test_the_autoscaler_refuses_what_the_controller_refuses(doc: documents.Document) -> None:
    """The autoscaler's reader and the controller's validation give one verdict, in the same words."""
    parsed = parse_and_validate(ClusterMeta.from_body(doc.body), doc.body.get("spec") or {})
    if isinstance(parsed, Invalid):
        with pytest.raises(SpecError) as refused:
            read_spec(doc.body, check=True)
        assert str(refused.value) == parsed.message
    else:
        assert read_spec(doc.body, check=True).spec == parsed


def test_most_documents_are_checked() -> None:
    checked = [d.id for d in DOCUMENTS if _valid(d.body) is not None]
    assert len(checked) >= 25, checked
    assert any(i.startswith("case:") for i in checked)
    assert any(i.startswith("example:") for i in checked)
    assert all(_valid(d.body) is not None for d in FACTORY)


def test_kuberay_samples_are_checked() -> None:
    assert sum(d.id.startswith("sample:") and _valid(d.body) is not None for d in DOCUMENTS) >= 25


@pytest.mark.parametrize("seed", range(4))
def test_random_specs_agree(seed: int) -> None:
    checked = sum(check_all(doc) for doc in random_documents(seed))
    assert checked >= 30


@pytest.mark.parametrize("domain", ["corp.example", "cluster.local"])
@pytest.mark.parametrize("cluster_ip", ["true", "false"])
def test_the_cluster_domain_and_service_type_are_read_alike(
    monkeypatch: pytest.MonkeyPatch, domain: str, cluster_ip: str
) -> None:
    monkeypatch.setenv("CLUSTER_DOMAIN", domain)
    monkeypatch.setenv("ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE", cluster_ip)
    for doc in FACTORY:
        check_all(doc)


# ----------------------------------------------------------------------------- single facts


@pytest.mark.parametrize(
    "port", ["6379", "6380", " 7000 ", "1", "65535", "0", "65536", "abc", "+6380", "-1", "6_380", "", "1e3"]
)
def test_the_gcs_port_is_read_alike(port: str) -> None:
    """Wherever the validation admits a port the pods' port is the one dialled, but for 0, which
    the pods get (as under KubeRay) and rayscale refuses to dial."""
    params = {"port": port}
    admitted = fields.ray_start_params_problem("rayStartParams", params) is None
    try:
        dialled: int | None = naming.dialled_gcs_port(params)
    except AddressError:
        dialled = None
    if admitted and port.strip() != "0":
        assert dialled == naming.gcs_port(params)
    elif port.strip() == "0":
        assert (naming.gcs_port(params), dialled) == (0, None)
    assert naming.gcs_port({}) == naming.dialled_gcs_port({}) == naming.DEFAULT_GCS_PORT


def _resource_keys() -> set[str]:
    others = {
        "GPU",
        "gpu",
        "nvidia.com/gpu.shared",
        "nvidia.com/mig-3g.20gb",
        "ephemeral-storage",
        "example.com/x",
    }
    keys = set(GPU_KEYS + ACCELERATOR_KEYS) | others
    for doc in DOCUMENTS:
        spec = doc.body.get("spec") or {}
        for raw in [spec.get("headGroupSpec") or {}, *(spec.get("workerGroupSpecs") or [])]:
            for c in ((raw.get("template") or {}).get("spec") or {}).get("containers") or []:
                for kind in ("limits", "requests"):
                    keys |= set(((c.get("resources") or {}).get(kind) or {}).keys())
    return keys - {"cpu", "memory"}


@pytest.mark.parametrize("key", sorted(_resource_keys()))
def test_status_and_the_scheduler_count_the_same_gpus_and_tpus(key: str) -> None:
    """A resource is in the status's desiredGPU exactly when the scheduler's hosts get GPUs for it
    (and the hosts the scheduler keeps free for GPU work are those), likewise TPUs."""
    body = cluster(group("g", template={"spec": {"containers": [container("ray-worker", **{key: "2"})]}}))
    status = desired_resources(RayClusterSpec.model_validate(body["spec"]))
    (host,) = build_snapshot(body, [], None, [], (), NOW).groups
    assert (status["desiredGPU"] != "0") == (host.resources.get(GPU, 0) > 0) == is_gpu_key(key)
    is_tpu = key == accelerators.TPU_RESOURCE
    assert (status["desiredTPU"] != "0") == (host.resources.get(TPU, 0) > 0) == is_tpu
    if is_gpu_key(key):
        assert (status["desiredGPU"], host.resources[GPU]) == ("2", 2.0)


def test_rounding_is_the_same_for_ray_start_and_the_autoscaler() -> None:
    """A fraction too small for a float still rounds a whole CPU up, on both sides."""
    body = cluster(group("g", resources={"cpu": "1.0000000000000000001", "Custom": "0.5"}))
    meta, spec = _valid(body) or pytest.fail("refused")
    flags = ray_start_flags(pods.worker_pod(meta, spec, spec.workers[0], replica_index=0))
    (host,) = build_snapshot(body, [], None, [], (), NOW).groups
    assert flags["num-cpus"] == "2"
    assert host.resources["CPU"] == 2.0
    assert announced(flags)["Custom"] == host.resources["Custom"] == float(Decimal("0.5"))


# ----------------------------------------------------------------------------- the module's place


ALLOWED = ("rayscale.api", "rayscale.resources", "rayscale.cluster", "rayscale.common", "__future__")
THIRD_PARTY = ("pydantic",)  # the API models' validation errors (validation.py)


def _imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


@pytest.mark.parametrize("path", sorted(CLUSTER_PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_the_facts_sit_below_both_halves(path: Path) -> None:
    """rayscale.cluster imports the standard library, the API models, quantity parsing and the shared
    modules below it (rayscale.common) only (`make lint`'s lint-imports checks the same and more)."""
    for module in _imports(path):
        top = module.split(".")[0]
        if top == "rayscale":
            assert module.startswith(ALLOWED), f"{path.name} imports {module}"
        else:
            assert top in (sys.stdlib_module_names - {"asyncio"}) | set(THIRD_PARTY), (
                f"{path.name} imports {module}"
            )


def test_importing_the_facts_loads_neither_half_nor_any_client() -> None:
    modules = ", ".join(f"rayscale.cluster.{p.stem}" for p in sorted(CLUSTER_PACKAGE.glob("*.py")))
    probe = (
        f"import sys, {modules}\n"
        "bad = ('kopf', 'kubernetes_asyncio', 'grpc', 'asyncio', 'aiohttp', 'rayscale.controller',"
        " 'rayscale.autoscaler', 'rayscale.ray')\n"
        "print(sorted(m for m in sys.modules if m.startswith(bad)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "operator")}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"
