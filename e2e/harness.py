"""What every end-to-end scenario uses: the RayCluster it builds, a clock on its pods, waits with
deadlines on the API and on Ray's GCS, and the timings it records for docs/benchmarks.md.

A scenario runs `rayscale run --mode all --allow-gcs-address-override` for its namespace (the
cluster's annotation ``rayscale.io/gcs-address`` points it at the bridge's head), a `RayBridge` (a
real Ray head, and a real Ray worker for every Running worker pod), a `GcsClient` on that head
(Ray's own view) and a `RayDriver` (the Ray program that creates the demand).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from e2e.raybridge import rayproc
from e2e.raybridge.bridge import GCS_ANNOTATION, RayBridge
from e2e.raybridge.driver import RayDriver
from hack.localk8s import launcher
from kubernetes_asyncio import watch
from kubernetes_asyncio.client.exceptions import ApiException
from tests.support.builders import resource_request
from tests.support.kube import Kube
from tests.support.polling import eventually, holds
from tests.support.watching import end_watch

from rayscale.api.names import RAYCLUSTER, RAYRESOURCEREQUEST, RAYVIRTUALCLUSTER
from rayscale.ray.client import GcsClient, GcsError
from rayscale.ray.model import ClusterState, RayNodeState

__all__ = [
    "NAME",
    "RAY_JOIN",
    "RESULTS",
    "SCALE_UP",
    "PodClock",
    "Scenario",
    "Timing",
    "group",
    "raycluster",
    "run_process",
    "status_section",
]

NAME = "ray-cluster"
RESULTS = Path(__file__).resolve().parent / ".results"
# Deadlines. KubeRay's e2e suite uses 1, 2 and 5 minutes (Short, Medium, Long); ours are sized
# for `ray start` on a busy 2-core machine.
SCALE_UP = 120.0
RAY_JOIN = 120.0


# ---------------------------------------------------------------------------- manifests


def group(
    name: str,
    *,
    replicas: int = 0,
    min_replicas: int = 0,
    max_replicas: int = 3,
    num_cpus: int | None = 1,
    gpus: int = 0,
    resources: Mapping[str, int] | None = None,
    idle_timeout: int | None = None,
    hosts: int = 1,
    labels: Mapping[str, str] | None = None,
    init_sleep: int | None = None,
    node_selector: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A worker group as KubeRay's e2e suite writes them: `num-cpus` in rayStartParams, 1 CPU/1Gi pods.

    GPUs are container limits (``nvidia.com/gpu``): the kube-scheduler puts such pods on the kwok
    GPU nodes, and rayscale's generated command says ``--num-gpus``. `init_sleep` adds KubeRay's
    ``init-sleep`` init container (``sleep N``): the bridge starts the Ray node that much later.
    A `node_selector` that no kwok node matches keeps the group's pods Pending (unschedulable).
    """
    params: dict[str, str] = {}
    if num_cpus is not None:
        params["num-cpus"] = str(num_cpus)
    if resources:  # quoted for the shell, as KubeRay's docs and e2e tests write it
        params["resources"] = '"' + json.dumps(dict(resources)).replace('"', '\\"') + '"'
    limits: dict[str, Any] = {"cpu": "1", "memory": "1Gi"}
    if gpus:
        limits["nvidia.com/gpu"] = gpus
    spec: dict[str, Any] = {
        "groupName": name,
        "replicas": replicas,
        "minReplicas": min_replicas,
        "maxReplicas": max_replicas,
        "rayStartParams": params,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "ray-worker",
                        "image": "rayproject/ray:2.60.0",
                        "resources": {"requests": dict(limits), "limits": dict(limits)},
                    }
                ]
            }
        },
    }
    if idle_timeout is not None:
        spec["idleTimeoutSeconds"] = idle_timeout
    if hosts != 1:
        spec["numOfHosts"] = hosts
    if labels:
        spec["labels"] = dict(labels)
    if init_sleep is not None:
        init = {"name": "init-sleep", "image": "rayproject/ray:2.60.0", "command": ["sleep", str(init_sleep)]}
        spec["template"]["spec"]["initContainers"] = [init]
    if node_selector:
        spec["template"]["spec"]["nodeSelector"] = dict(node_selector)
    return spec


def raycluster(
    gcs_address: str,
    groups: Sequence[Mapping[str, Any]],
    *,
    idle_timeout: int = 60,
    upscaling_mode: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An autoscaling RayCluster (autoscaler v2) whose GCS is the bridge's Ray head."""
    options: dict[str, Any] = {"version": "v2", "idleTimeoutSeconds": idle_timeout}
    if upscaling_mode:
        options["upscalingMode"] = upscaling_mode
    head_container = {
        "name": "ray-head",
        "image": "rayproject/ray:2.60.0",
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
    }
    return {
        **RAYCLUSTER.type_meta(),
        "metadata": {"name": NAME, "annotations": {**(annotations or {}), GCS_ANNOTATION: gcs_address}},
        "spec": {
            "rayVersion": "2.60.0",
            "enableInTreeAutoscaling": True,
            "autoscalerOptions": options,
            "headGroupSpec": {
                "rayStartParams": {"num-cpus": "0"},
                "template": {"spec": {"containers": [head_container]}},
            },
            "workerGroupSpecs": [dict(g) for g in groups],
        },
    }


# ---------------------------------------------------------------------------- ray status


async def run_process(
    *command: str,
    env: Mapping[str, str] | None = None,
    timeout: float,  # noqa: ASYNC109
    merge_stderr: bool = False,
) -> tuple[int, str, str]:
    """Run `command` to its end: (exit code, stdout, stderr; "" when `merge_stderr` puts it in
    stdout). Killed, and AssertionError, when it takes longer than `timeout` seconds; it dies with
    the test process in any case."""
    argv, preexec = launcher.dying_with_parent(command)
    process = await asyncio.create_subprocess_exec(
        *argv,
        env=None if env is None else dict(env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
        start_new_session=True,
        preexec_fn=preexec,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"{shlex.join(command)} did not finish in {timeout:.0f}s") from None
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace"), (err or b"").decode(errors="replace")


def status_section(text: str, title: str) -> list[str]:
    """The indented lines under `title` (e.g. ``"Pending:"``, ``"Recent failures:"``) in the
    output of ``ray status``, stripped; ``(no pending nodes)``-style placeholders are dropped."""
    lines = text.splitlines()
    heads = [i for i, line in enumerate(lines) if line.strip() == title]
    if not heads:
        raise AssertionError(f"no {title!r} section in `ray status`:\n{text}")
    found: list[str] = []
    for line in lines[heads[0] + 1 :]:
        if not line.startswith(" "):
            break
        if line.strip() and not (line.strip().startswith("(") and line.strip().endswith(")")):
            found.append(line.strip())
    return found


# ---------------------------------------------------------------------------- pod clock


@dataclass
class PodTimes:
    group: str
    created: float
    running: float | None = None
    deleting: float | None = None
    gone: float | None = None
    labels: list[tuple[float, dict[str, str]]] = field(default_factory=list)  # each change, when seen


class PodClock:
    """When a watch first saw each worker pod of the cluster created, Running, deleting and gone,
    and every change of its labels."""

    def __init__(self) -> None:
        self.pods: dict[str, PodTimes] = {}

    def observe(self, kind: str, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get("ray.io/node-type") != "worker":
            return
        now = time.monotonic()
        times = self.pods.setdefault(str(meta["name"]), PodTimes(str(labels.get("ray.io/group")), now))
        if times.running is None and (pod.get("status") or {}).get("phase") == "Running":
            times.running = now
        if times.deleting is None and (meta.get("deletionTimestamp") or kind == "DELETED"):
            times.deleting = now
        if kind == "DELETED":
            times.gone = now
        if not times.labels or times.labels[-1][1] != labels:
            times.labels.append((now, dict(labels)))

    def live(self, group_name: str | None = None) -> list[str]:
        return sorted(
            name
            for name, t in self.pods.items()
            if t.deleting is None and (group_name is None or t.group == group_name)
        )

    def label_values(self, pod: str, key: str, since: float = 0.0) -> list[str | None]:
        """The values label `key` of `pod` took from `since` on (None: unset), in the order the
        watch saw them: its value at `since` first, each change after it."""
        values: list[str | None] = []
        for at, labels in self.pods[pod].labels:
            value = labels.get(key)
            if at <= since:
                values[:] = [value]
            elif not values or values[-1] != value:
                values.append(value)
        return values

    @classmethod
    @contextlib.asynccontextmanager
    async def watching(cls, kube: Kube, cluster: str) -> AsyncIterator[PodClock]:
        clock = cls()
        events = watch.Watch()
        started = asyncio.Event()

        async def run() -> None:
            while True:
                listed = await kube.core.list_namespaced_pod(
                    kube.ns, label_selector=f"ray.io/cluster={cluster}"
                )
                for pod in listed.items:
                    clock.observe("ADDED", kube.core.api_client.sanitize_for_serialization(pod))
                started.set()
                with contextlib.suppress(Exception):
                    async for event in events.stream(
                        kube.core.list_namespaced_pod,
                        kube.ns,
                        label_selector=f"ray.io/cluster={cluster}",
                        resource_version=listed.metadata.resource_version,
                        timeout_seconds=120,
                    ):
                        if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                            clock.observe(event["type"], event["raw_object"])

        task = asyncio.create_task(run())
        try:
            await asyncio.wait_for(started.wait(), 30)
            yield clock
        finally:
            await end_watch(events, task)


# ---------------------------------------------------------------------------- timings


@dataclass(frozen=True)
class Timing:
    test: str
    step: str  # "demand -> pods created" | "pods -> Ray nodes alive" | "idle timeout -> pod deleted" | ...
    seconds: float
    pods: int
    detail: str = ""


# ---------------------------------------------------------------------------- the scenario


@dataclass
class Scenario:
    test: str
    kube: Kube
    bridge: RayBridge
    gcs: GcsClient
    ray: RayDriver
    pods: PodClock
    tmp: Path
    timings: list[Timing] = field(default_factory=list)

    # ---- the cluster ----

    async def create(self, groups: Sequence[Mapping[str, Any]], **options: Any) -> dict[str, Any]:
        """Create the RayCluster and wait until it is ready with its initial workers in Ray."""
        body = raycluster(self.bridge.gcs_address, groups, **options)
        await self.kube.create(body)
        initial = sum(int(g.get("replicas", 0)) * int(g.get("numOfHosts", 1)) for g in groups)

        async def ready() -> bool:
            status = (await self.kube.get(NAME)).get("status") or {}
            # a zero count is not written (KubeRay's omitempty): absent is 0
            return status.get("state") == "ready" and status.get("desiredWorkerReplicas", 0) == initial

        await eventually(ready, timeout=SCALE_UP, message=f"{NAME} ready with {initial} desired workers")
        if initial:
            await self.nodes_alive(await self.wait_workers(initial))
        return body

    async def spec_groups(self) -> dict[str, dict[str, Any]]:
        specs = (await self.kube.get(NAME))["spec"]["workerGroupSpecs"]
        return {g["groupName"]: g for g in specs}

    async def replicas(self) -> dict[str, int]:
        return {name: int(g.get("replicas") or 0) for name, g in (await self.spec_groups()).items()}

    async def desired(self) -> int:
        status = (await self.kube.get(NAME)).get("status") or {}
        return int(status.get("desiredWorkerReplicas", 0 if status else -1))  # a zero count is not written

    async def wait_desired(self, count: int, *, timeout: float = 30) -> None:  # noqa: ASYNC109
        """`status.desiredWorkerReplicas` == count (the controller writes it after the pods change)."""

        async def check() -> bool:
            return await self.desired() == count

        await eventually(check, timeout=timeout, message=f"status.desiredWorkerReplicas {count}")

    async def set_group(self, name: str, field_name: str, value: Any) -> None:
        index = list(await self.spec_groups()).index(name)
        await self.kube.set_group(NAME, index, field_name, value)

    async def annotate(self, key: str, value: str) -> None:
        """Set an annotation of the RayCluster (e.g. ``rayscale.io/max-node-provision-seconds``)."""
        path = "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")
        await self.kube.patch_json(NAME, [{"op": "add", "path": path, "value": value}])

    async def add_group(self, spec: Mapping[str, Any]) -> None:
        """Add a worker group to the live cluster, as a user's edit (JSON patch, appended)."""
        await self.kube.patch_json(
            NAME, [{"op": "add", "path": "/spec/workerGroupSpecs/-", "value": dict(spec)}]
        )

    # ---- RayResourceRequests ----

    async def request(self, name: str, bundles: Sequence[tuple[Mapping[str, Any], int]]) -> None:
        """Create a RayResourceRequest for the cluster: (resources, count) per bundle shape."""
        body = resource_request(name, NAME, *bundles)
        await self.kube.objects.create_namespaced_custom_object(*RAYRESOURCEREQUEST.at(self.kube.ns), body)

    async def request_status(self, name: str) -> dict[str, Any]:
        got = await self.kube.objects.get_namespaced_custom_object(*RAYRESOURCEREQUEST.at(self.kube.ns), name)
        return dict(got.get("status") or {})

    async def delete_request(self, name: str) -> None:
        await self.kube.objects.delete_namespaced_custom_object(*RAYRESOURCEREQUEST.at(self.kube.ns), name)

    # ---- RayVirtualClusters ----

    async def virtual_cluster(
        self, name: str, groups: Sequence[Mapping[str, Any]], *, divisible: bool = False
    ) -> None:
        """Create a RayVirtualCluster of the cluster: one {groupName, nodes, minNodes, maxNodes} a group."""
        body = {
            **RAYVIRTUALCLUSTER.type_meta(),
            "metadata": {"name": name},
            "spec": {"rayClusterName": NAME, "divisible": divisible, "groups": [dict(g) for g in groups]},
        }
        await self.kube.objects.create_namespaced_custom_object(*RAYVIRTUALCLUSTER.at(self.kube.ns), body)

    async def vc(self, name: str) -> dict[str, Any] | None:
        """The RayVirtualCluster, None once it is gone."""
        try:
            got: dict[str, Any] = await self.kube.objects.get_namespaced_custom_object(
                *RAYVIRTUALCLUSTER.at(self.kube.ns), name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return got

    async def vc_status(self, name: str) -> dict[str, Any]:
        found = await self.vc(name)
        return dict((found or {}).get("status") or {})

    async def vc_nodes(self, name: str, *, states: tuple[str, ...] = ("Idle", "Busy", "Ready")) -> list[str]:
        """Pods of the VC whose state is one of `states`, per its status."""
        status = await self.vc_status(name)
        return sorted(
            n["pod"]
            for g in status.get("groups") or []
            for n in g.get("nodes") or []
            if n.get("state") in states
        )

    async def delete_vc(self, name: str) -> None:
        await self.kube.objects.delete_namespaced_custom_object(*RAYVIRTUALCLUSTER.at(self.kube.ns), name)

    # ---- waits ----

    async def wait_workers(
        self,
        count: int,
        group_name: str | None = None,
        *,
        timeout: float = SCALE_UP,  # noqa: ASYNC109
    ) -> list[str]:
        """The live worker pods (of `group_name`), once there are exactly `count` (and the API agrees)."""
        where = f" in group {group_name}" if group_name else ""

        found: list[str] = []

        async def check() -> bool:
            names = self.pods.live(group_name)
            if len(names) != count:
                return False
            listed = await self.kube.workers(NAME, group=group_name, live=True)
            found[:] = names
            return sorted(p.metadata.name for p in listed) == names

        await eventually(check, timeout=timeout, message=f"{count} worker pods{where}")
        return list(found)

    async def state(self) -> ClusterState:
        return await self.gcs.get_cluster_resource_state()

    async def state_or_none(self) -> ClusterState | None:
        """Ray's view, or None while the GCS does not answer (e.g. the head restarts)."""
        try:
            return await self.gcs.get_cluster_resource_state()
        except GcsError:
            await self.gcs.close()  # the next call dials afresh instead of waiting out gRPC's backoff
            return None

    async def ray_status(self, *, timeout: float = 60) -> str:  # noqa: ASYNC109
        """What ``ray status --address <the GCS>`` prints (Ray's own CLI, in a subprocess)."""
        command = (rayproc.ray_cli(), "status", "--address", self.bridge.gcs_address)
        code, text, _ = await run_process(
            *command, env=rayproc.driver_env(), timeout=timeout, merge_stderr=True
        )
        if code != 0:
            raise AssertionError(f"`ray status` failed ({code}):\n{text}")
        return text

    async def events(self, reason: str) -> list[str]:
        """The messages of the Events with this reason in the test's namespace."""
        return [str(e.message) for e in await self.kube.events(reason)]

    async def nodes_alive(
        self,
        names: Sequence[str],
        *,
        timeout: float = RAY_JOIN,  # noqa: ASYNC109
    ) -> dict[str, RayNodeState]:
        """Ray nodes for all these pods, alive in the GCS (the bridge started them when Running)."""

        async def check() -> dict[str, RayNodeState] | None:
            if self.bridge.errors():
                raise RuntimeError(f"the Ray bridge failed: {self.bridge.errors()}")
            state = await self.state()
            found = {n: state.node_by_instance(n) for n in names}
            if all(node is not None and node.alive for node in found.values()):
                return {n: node for n, node in found.items() if node is not None}
            return None

        found: dict[str, RayNodeState] = await eventually(
            check, timeout=timeout, interval=0.25, message=f"Ray nodes alive for {sorted(names)}"
        )
        return found

    async def scale_up(
        self,
        demand_at: float,
        count: int,
        group_name: str | None = None,
        *,
        before: Sequence[str] = (),
        detail: str = "",
    ) -> list[str]:
        """Wait for `count` live workers (of the group), their Ray nodes; record both steps."""
        names = await self.wait_workers(count, group_name)
        new = [n for n in names if n not in before]
        await self.nodes_alive(names)
        alive_at = time.monotonic()
        if new:
            created = [self.pods.pods[n].created for n in new]
            self.record("demand -> pods created", max(created) - demand_at, len(new))
            self.record("pods -> Ray nodes alive", alive_at - min(created), len(new), detail)
        return names

    async def scale_down(
        self,
        idle_from: float,
        idle_timeout: float,
        count: int,
        group_name: str | None = None,
        *,
        before: Sequence[str],
        step: str = "idle timeout -> pod deleted",
    ) -> None:
        """Wait until `count` live workers are left; record how long after the idle timeout they went."""
        left = await self.wait_workers(count, group_name, timeout=idle_timeout + SCALE_UP)
        gone = [n for n in before if n not in left]
        if gone:
            deleted = max(self.pods.pods[n].deleting or time.monotonic() for n in gone)
            detail = f"timeout {idle_timeout:g}s" if idle_timeout else ""
            self.record(step, deleted - idle_from - idle_timeout, len(gone), detail)

    async def holds(self, check: Callable[[], Awaitable[bool] | bool], seconds: float, message: str) -> None:
        """`check` stays true for `seconds` (polled twice a second): what must not happen, doesn't."""
        await holds(check, seconds=seconds, interval=0.5, message=message)

    async def ray_call(self, op: str, **kwargs: Any) -> Any:
        return await self.ray.call(op, **kwargs)

    async def actor_on(self, name: str, *, timeout: float = SCALE_UP + RAY_JOIN) -> str:  # noqa: ASYNC109
        """The pod (instance id) whose Ray node runs actor `name`, once it runs."""
        node_id: str = await eventually(
            lambda: self.ray.call("actor_node", name=name),
            timeout=timeout,
            interval=0.5,
            message=f"actor {name} running",
        )
        return await self.pod_of(node_id)

    async def pg_nodes(self, name: str, *, timeout: float = SCALE_UP + RAY_JOIN) -> dict[str, str]:  # noqa: ASYNC109
        """Bundle index -> pod of placement group `name`, once Ray says it is ready."""
        nodes: dict[str, str] = await eventually(
            lambda: self.ray.call("pg_nodes", name=name),
            timeout=timeout,
            interval=0.5,
            message=f"placement group {name} ready",
        )
        return {bundle: await self.pod_of(node) for bundle, node in sorted(nodes.items())}

    async def started_on(self, marker: Path, *, timeout: float = 240) -> str:  # noqa: ASYNC109
        """The Ray node id the driver's task holding `marker` runs on, once it runs."""
        started = marker.with_name(marker.name + ".started")
        node: str = await eventually(
            lambda: started.exists() and started.read_text(),
            timeout=timeout,
            interval=0.25,
            message=f"task {marker.name} running",
        )
        return node

    async def pod_of(self, node_id: str) -> str:
        for node in (await self.state()).nodes:
            if node.node_id == node_id:
                return node.instance_id
        raise AssertionError(f"no Ray node {node_id}")

    def record(self, step: str, seconds: float, pods: int, detail: str = "") -> None:
        self.timings.append(Timing(self.test, step, round(seconds, 3), pods, detail))

    def write_results(self, outcome: str) -> None:
        RESULTS.mkdir(exist_ok=True)
        body = {"test": self.test, "outcome": outcome, "timings": [asdict(t) for t in self.timings]}
        slug = "".join(c if c.isalnum() or c in "-_" else "_" for c in self.test)
        (RESULTS / f"{slug}.json").write_text(json.dumps(body, indent=1) + "\n")
