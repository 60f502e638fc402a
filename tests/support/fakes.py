"""The fakes the unit and integration tests share, one of each: clocks (`ManualClock`, `LoopClock`), an
Event sink that keeps what is posted (`EventLog`), what the controller reads and writes
(`FakeClusterSource`, `FakeKubeOps`: rayscale.kube.ops monkeypatched), what the autoscaler reads and
writes (`FakeSource`, `FakeApi`), Ray's GCS as the autoscaler's client (`FakeGcs`) and, with a raylet,
as a gRPC server (`FakeGcsServer`: the GCS and raylet clients' unit tests, the integration tests), and
the autoscaler as the status API and page ask it (`FakeAutoscaler`).

The fake API server of `rayscale status` (a thread serving HTTP) is tests/support/fake_kube_api.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, NamedTuple

import grpc
import pytest
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from rayscale.autoscaler import gcs_link
from rayscale.autoscaler.loop import Autoscaler, AutoscalerConfig
from rayscale.cluster.limits import DEFAULT_MAX_PODS
from rayscale.common.retry import Failed
from rayscale.common.types import ClusterKey
from rayscale.kube import ops
from rayscale.ray import model as ray
from rayscale.ray import wire
from rayscale.ray.client import GcsCallError, GcsUnavailable
from rayscale.ray.wire import autoscaler_pb2 as pb
from tests.support.builders import group, rc

KEY = ("ns", "rc")  # the RayCluster of tests/support/builders.py's `cluster` and `rc`
HEAD_GCS = "rc-head-svc.ns.svc.cluster.local:6379"  # its head Service's GCS address
HEAD_RESOURCE = "node:__internal_head__"


# ---- time


class ManualClock:
    """A monotonic clock (a callable returning seconds) that moves only when a test sets `now`, or
    when the code under test sleeps on it (`sleep`): virtual time, in which a sleep also runs what the
    test scheduled up to then (`call_at`)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self._scheduled: list[tuple[float, Callable[[], None]]] = []

    def __call__(self) -> float:
        return self.now

    def call_at(self, when: float, action: Callable[[], None]) -> None:
        """Run `action` once a sleep takes the clock to `when` or past it."""
        self._scheduled.append((when, action))

    async def sleep(self, seconds: float) -> None:
        """Move the clock on by `seconds` at once, then run the actions due by then, in order."""
        self.now += seconds
        due = [item for item in self._scheduled if item[0] <= self.now]
        self._scheduled = [item for item in self._scheduled if item[0] > self.now]
        for _, action in due:
            action()


class LoopClock:
    """Virtual time: the monotonic clock (backoff, grace) and the wall clock (pod ages) move together."""

    # where the wall clock starts: the builders' pods are an hour old then
    START = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)

    def __init__(self) -> None:
        self.t = 1000.0
        self.wall = self.START

    def mono(self) -> float:
        return self.t

    def now(self) -> datetime:
        return self.wall

    def wall_at(self, seconds: float) -> datetime:
        """The wall time `seconds` after the start (before it, if negative)."""
        return self.START + timedelta(seconds=seconds)

    def advance(self, seconds: float) -> None:
        self.t += seconds
        self.wall += timedelta(seconds=seconds)


# ---- Events


class Posted(NamedTuple):
    kind: str  # the involved object's
    name: str
    type: str
    reason: str
    message: str
    action: str


class EventLog:
    """An EventSink (rayscale.kube.events) that keeps every Event posted, in order."""

    def __init__(self) -> None:
        self.events: list[Posted] = []

    def post(self, obj: Mapping[str, Any], type_: str, reason: str, message: str, action: str = "") -> None:
        kind, name = str(obj.get("kind", "")), str((obj.get("metadata") or {}).get("name", ""))
        self.events.append(Posted(kind, name, type_, reason, message, action))

    @property
    def posted(self) -> list[tuple[str, str, str]]:
        """(type, reason, message) of each Event."""
        return [(e.type, e.reason, e.message) for e in self.events]

    def reasons(self, type_: str | None = None) -> list[str]:
        return [e.reason for e in self.events if type_ is None or e.type == type_]

    def clear(self) -> None:
        self.events.clear()


# ---- what the autoscaler reads and writes


class FakeSource:
    """What the autoscaler's watch-fed indexes hold for one RayCluster (whatever key is asked)."""

    def __init__(
        self,
        body: dict[str, Any] | None,
        pods: Sequence[Mapping[str, Any]] = (),
        requests: Sequence[Any] = (),
    ) -> None:
        self.body, self._pods, self._requests = body, list(pods), list(requests)

    def cluster(self, key: ClusterKey) -> Mapping[str, Any] | None:
        return self.body

    def pods(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        return self._pods

    def requests(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        return self._requests

    def virtual_clusters(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        return []


class FakeGcs:
    """Stands in for rayscale.ray.client.GcsClient (the class: `gcs_link.GcsClient` is set to it). Its
    state is the class's, shared by every client the loop makes; `FakeApi` resets it."""

    state: ray.ClusterState | None = None  # None: unreachable
    accept: bool = True
    refuse: frozenset[str] = frozenset()  # node ids that refuse even when `accept`
    unimplemented: frozenset[str] = frozenset()  # RPC names this Ray does not have (UNIMPLEMENTED)
    calls: list[str] = []  # the RPC names called, in order
    drained: list[str] = []
    reports: list[ray.AutoscalingState] = []  # the reports the GCS accepted
    dialed: list[tuple[str, str | None]] = []  # (address, token) of every client made

    def __init__(self, address: str, *, token: str | None = None, **_: Any) -> None:
        self.address = address
        FakeGcs.dialed.append((address, token))

    @classmethod
    def reset(cls) -> None:
        cls.state, cls.accept, cls.refuse, cls.drained = None, True, frozenset(), []
        cls.unimplemented, cls.calls, cls.reports = frozenset(), [], []
        cls.dialed = []

    def _call(self, method: str) -> None:
        FakeGcs.calls.append(method)
        if method in FakeGcs.unimplemented:
            raise GcsCallError(self.address, method, "UNIMPLEMENTED", f"unknown method {method}")

    async def get_cluster_resource_state(self) -> ray.ClusterState:
        self._call("GetClusterResourceState")
        if FakeGcs.state is None:
            raise GcsUnavailable(self.address, "GetClusterResourceState", "UNAVAILABLE", "down")
        return FakeGcs.state

    async def report_autoscaling_state(self, state: ray.AutoscalingState) -> None:
        self._call("ReportAutoscalingState")
        FakeGcs.reports.append(state)

    async def drain_node(self, node_id: str, **_: Any) -> ray.DrainResult:
        self._call("DrainNode")
        FakeGcs.drained.append(node_id)
        ok = FakeGcs.accept and node_id not in FakeGcs.refuse
        return ray.DrainResult(accepted=ok, rejection_reason="" if ok else "busy")

    async def close(self) -> None:
        pass


class FakeApi:
    """What the autoscaler loop sends through rayscale.kube.ops, kept; the GCS is `FakeGcs`, reset
    (unreachable until a test sets its state)."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, conflicts: int = 0, fresh: dict[str, Any] | None = None
    ):
        self.patches: list[list[dict[str, Any]]] = []
        self.statuses: list[tuple[str, dict[str, Any]]] = []  # RayResourceRequests' (name, status)
        self.cluster_statuses: list[dict[str, Any]] = []  # status.autoscaler patches
        self.conflicts = conflicts
        self.fresh = fresh

        async def json_patch(api: Any, ns: str, name: str, patch: list[dict[str, Any]]) -> None:
            self.patches.append(patch)
            if self.conflicts:
                self.conflicts -= 1
                raise ops.KubeError("test failed", 422)

        async def get(api: Any, ns: str, name: str) -> dict[str, Any] | None:
            return self.fresh

        async def status(api: Any, ns: str, name: str, patch: dict[str, Any]) -> bool:
            self.statuses.append((name, patch["status"]))
            return True

        async def cluster_status(api: Any, ns: str, name: str, patch: dict[str, Any]) -> bool:
            self.cluster_statuses.append(patch["status"])
            return True

        monkeypatch.setattr(ops, "json_patch_raycluster", json_patch)
        monkeypatch.setattr(ops, "get_raycluster", get)
        monkeypatch.setattr(ops, "patch_rayresourcerequest_status", status)
        monkeypatch.setattr(ops, "patch_raycluster_status", cluster_status)
        monkeypatch.setattr(gcs_link, "connect", FakeGcs)
        FakeGcs.reset()

    def request_statuses(self) -> dict[str, dict[str, Any]]:
        """The latest status written for each RayResourceRequest, by name."""
        return dict(self.statuses)

    def replicas(self) -> list[int]:
        """The `replicas` values of every RayCluster patch, in order."""
        return [op["value"] for patch in self.patches for op in patch if op["path"].endswith("/replicas")]


class SettledAutoscaler(Autoscaler):
    """The autoscaler whose `step` returns once the status it handed over is written (the writer
    writes it in a task of its own, status_writer.py)."""

    async def step(self, key: ClusterKey) -> float | Failed | None:
        out = await super().step(key)
        await self.reporter.writer.idle()
        return out


def autoscaler(
    source: FakeSource,
    events: EventLog | None = None,
    clock: LoopClock | None = None,
    *,
    allow_override: bool = False,
    max_pods: int = DEFAULT_MAX_PODS,
    poll: float = 0,
) -> Autoscaler:
    """The autoscaler on `source`, in virtual time, rounds every 5 s (no API client: `FakeApi`);
    with `poll`, Ray's state read that often between them (poll.py). Each round's status is
    written before `step` returns (unpaced: status_writer.py's own tests pace it)."""
    clock = clock or LoopClock()
    config = AutoscalerConfig(
        interval=5,
        gcs_poll_interval=poll,
        allow_gcs_address_override=allow_override,
        max_pods=max_pods,
        status_pace_seconds=0,
    )
    events = events or EventLog()
    return SettledAutoscaler(None, source, events, config, clock=clock.mono, wall_clock=clock.now)  # type: ignore[arg-type]


def token_cluster(monkeypatch: pytest.MonkeyPatch, annotation: str | None) -> tuple[FakeApi, FakeSource]:
    """A cluster with token auth (its Secret holds "s3cret") and, if given, the annotation
    ``rayscale.io/gcs-address``; the GCS answers with the head alone."""
    api = FakeApi(monkeypatch)
    FakeGcs.state = gcs_state()
    body = rc(group("a", replicas=0))
    body["spec"].update(authOptions={"mode": "token"}, rayVersion="2.55.0")  # token auth needs >= 2.52.0
    if annotation is not None:
        body["metadata"]["annotations"] = {"rayscale.io/gcs-address": annotation}

    async def read_secret_key(api: Any, namespace: str, name: str, key: str) -> str | None:
        return "s3cret" if (namespace, name, key) == ("ns", "rc", "auth_token") else None

    monkeypatch.setattr(ops, "read_secret_key", read_secret_key)
    return api, FakeSource(body)


HEAD = ray.RayNodeState(
    "id-head", ray.NodeStatus.RUNNING, instance_id="rc-head",
    total_resources={"CPU": 0.0, HEAD_RESOURCE: 1.0},
)  # fmt: skip


def gcs_state(*nodes: ray.RayNodeState, session: str = "s", head: bool = True) -> ray.ClusterState:
    """Ray's state with the head's raylet running (unless `head` is False) and `nodes`."""
    return ray.ClusterState(version=1, session_name=session, nodes=((HEAD,) if head else ()) + nodes)


# ---- what the controller reads and writes


class FakeClusterSource:
    """What the controller's indexes hold (rayscale.controller.runner.ClusterSource): RayClusters by
    key, their pods and Services; tests change `bodies` between reconciles as a watch would."""

    def __init__(
        self,
        *bodies: dict[str, Any],
        pods: Sequence[Mapping[str, Any]] = (),
        services: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.bodies = {(b["metadata"]["namespace"], b["metadata"]["name"]): b for b in bodies}
        self._pods, self._services = list(pods), list(services)

    def cluster(self, key: ClusterKey) -> Mapping[str, Any] | None:
        return self.bodies.get(key)

    def pods(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        return self._pods

    def services(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        return self._services

    def cluster_keys(self) -> Sequence[ClusterKey]:
        return list(self.bodies)


class FakeKubeOps:
    """The controller's calls through rayscale.kube.ops (pods, Services, Secrets, Ingresses, RBAC,
    the RayCluster's status), kept in order as (call, name); monkeypatched in for one test.

    ``refuse[(call, name)]`` is the KubeError one call gets (name: a pod's generateName for
    ``create_pod``), every time it is made; objects in `existing` answer a create with "already
    there" (False). Pod calls yield to the loop while in flight, so that calls made in parallel are
    seen together: `most_in_flight` is how many were at once.
    """

    CREATES = ("create_service", "create_secret", "create_ingress", "create_rbac")

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str]] = []
        self.manifests: dict[tuple[str, str], dict[str, Any]] = {}  # the last one created, by (call, name)
        self.statuses: list[dict[str, Any]] = []  # the status patches of RayClusters
        self.refuse: dict[tuple[str, str], ops.KubeError] = {}
        self.existing: set[str] = set()
        self.in_flight = 0
        self.most_in_flight = 0
        self._made = 0
        monkeypatch.setattr(ops, "create_pod", self.create_pod)
        monkeypatch.setattr(ops, "delete_pod", self.delete_pod)
        monkeypatch.setattr(ops, "patch_raycluster_status", self.patch_raycluster_status)
        for call in self.CREATES:
            monkeypatch.setattr(ops, call, self._creator(call))

    def names(self, call: str, *, made: bool = False) -> list[str]:
        """The names `call` was made for, in order, refused calls too; with `made`, the names of what
        it created (pods: the names the API server generated)."""
        if made:
            return [name for (created, name) in self.manifests if created == call]
        return [name for called, name in self.calls if called == call]

    def _check(self, call: str, name: str) -> None:
        self.calls.append((call, name))
        if (call, name) in self.refuse:
            raise self.refuse[(call, name)]

    async def _in_flight(self) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        for _ in range(3):
            await asyncio.sleep(0)
        self.in_flight -= 1

    async def create_pod(self, api: Any, namespace: str, manifest: dict[str, Any]) -> str:
        meta = manifest["metadata"]
        self._check("create_pod", meta.get("generateName") or meta["name"])
        await self._in_flight()
        self._made += 1
        name = meta.get("name") or f"{meta['generateName']}{self._made:05d}"
        self.manifests["create_pod", name] = manifest
        return str(name)

    async def delete_pod(self, api: Any, namespace: str, name: str) -> bool:
        self._check("delete_pod", name)
        await self._in_flight()
        return True

    def _creator(self, call: str) -> Any:
        async def create(api: Any, namespace: str, manifest: dict[str, Any]) -> bool:
            name = manifest["metadata"]["name"]
            self._check(call, name)
            self.manifests[call, name] = manifest
            return name not in self.existing

        return create

    async def patch_raycluster_status(
        self, api: Any, namespace: str, name: str, patch: dict[str, Any]
    ) -> bool:
        self._check("patch_raycluster_status", name)
        self.statuses.append(patch["status"])
        return True


# ---- Ray's GCS (and a raylet) served over gRPC


class Rpc(NamedTuple):
    """One method `FakeGcsServer` serves: its service, its request and its reply."""

    service: ServiceDescriptor
    request: type[Message]
    reply: type[Message]


class FakeGcsServer:
    """Ray's GCS, and a raylet, served over gRPC from the test process, decoding what it gets with the
    same generated messages: every method of rayscale's protos (`METHODS`), i.e. the
    AutoscalerStateService (the autoscaler's reads, drains and reports), the info services (nodes,
    jobs, actors, placement groups) and the raylet's NodeManagerService (resize). Serve
    `services()` (every method; or only some) with tests/support/grpcserve.py's `serving`, at `address`.

    Every call is kept as (method, request, metadata) in `calls`, in order. A method answers
    `replies[method]`, else its empty reply; DrainNode accepts by default; and a fake made for the
    RayCluster `cluster` answers GetClusterResourceState as that cluster's GCS: its head alive, a fixed
    session, and for the workers only what the test says (no node by default, a DEAD node for each pod
    in `dead`). `failures[method]` lists the status codes a method answers with first; with `hang`,
    every call answers DEADLINE_EXCEEDED (as when the client's own deadline passes).
    """

    # every method of the services rayscale's protos declare (rayscale.ray.wire), by name
    METHODS: ClassVar[Mapping[str, Rpc]] = {
        method.name: Rpc(service, GetMessageClass(method.input_type), GetMessageClass(method.output_type))
        for service in wire.SERVICES
        for method in service.methods
    }

    def __init__(self, cluster: str = "") -> None:
        self.cluster = cluster
        self.address = ""
        self.calls: list[tuple[str, Any, dict[str, str]]] = []
        self._called_at: list[float] = []  # the monotonic time of each call in `calls`
        self.replies: dict[str, Message] = {"DrainNode": pb.DrainNodeReply(is_accepted=True)}
        self.failures: dict[str, list[grpc.StatusCode]] = {}
        self.hang = False
        self.dead: set[str] = set()  # pods whose Ray node is DEAD; others have no node at all

    def count(self, method: str) -> int:
        """How many calls of `method` were made."""
        return sum(1 for name, _, _ in self.calls if name == method)

    def calls_since(self, moment: float) -> int:
        """How many times the state was read (GetClusterResourceState) since monotonic `moment`."""
        called = zip(self.calls, self._called_at, strict=True)
        return sum(1 for (name, _, _), t in called if name == "GetClusterResourceState" and t >= moment)

    def _cluster_state(self) -> pb.GetClusterResourceStateReply:
        head = pb.NodeState(
            node_id=hashlib.sha224(b"head").digest(),
            instance_id=f"{self.cluster}-head",
            total_resources={"CPU": 0.0, HEAD_RESOURCE: 1.0},
            status=pb.NodeStatus.RUNNING,
        )
        dead = [
            pb.NodeState(
                node_id=hashlib.sha224(p.encode()).digest(), instance_id=p, status=pb.NodeStatus.DEAD
            )
            for p in sorted(self.dead)
        ]
        state = pb.ClusterResourceState(node_states=[head, *dead], cluster_session_name="session_test")
        return pb.GetClusterResourceStateReply(cluster_resource_state=state)

    def _reply(self, method: str) -> Message:
        if method in self.replies:
            return self.replies[method]
        if method == "GetClusterResourceState" and self.cluster:
            return self._cluster_state()
        return self.METHODS[method].reply()

    def handler(self, method: str) -> grpc.RpcMethodHandler[Any, Any]:
        """The handler of one method (a key of `METHODS`)."""

        async def serve(request: Message, context: grpc.aio.ServicerContext[Any, Any]) -> Message:
            metadata = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
            self.calls.append((method, request, metadata))
            self._called_at.append(time.monotonic())
            pending = self.failures.get(method)
            if pending:
                await context.abort(pending.pop(0), f"injected by the test ({method})")
            if self.hang:
                await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "hung")
            return self._reply(method)

        return grpc.unary_unary_rpc_method_handler(
            serve,
            request_deserializer=self.METHODS[method].request.FromString,
            response_serializer=lambda reply: reply.SerializeToString(),
        )

    def state_handler(self) -> grpc.RpcMethodHandler[Any, Any]:
        """``GetClusterResourceState``'s handler, for a server that finds its handlers itself."""
        return self.handler("GetClusterResourceState")

    def services(self, *methods: str) -> tuple[grpc.GenericRpcHandler, ...]:
        """The services of `methods` (default: every method in `METHODS`), to serve."""
        by_service: dict[str, dict[str, grpc.RpcMethodHandler[Any, Any]]] = {}
        for method in methods or self.METHODS:
            by_service.setdefault(self.METHODS[method].service.full_name, {})[method] = self.handler(method)
        return tuple(grpc.method_handlers_generic_handler(name, found) for name, found in by_service.items())

    def service(self) -> grpc.GenericRpcHandler:
        """The AutoscalerStateService with ``GetClusterResourceState`` alone, to serve: what the
        autoscaler's rounds read (the integration tests; any other call answers UNIMPLEMENTED)."""
        (state_only,) = self.services("GetClusterResourceState")
        return state_only


# ---- the autoscaler as the status API and page ask it


class FakeAutoscaler:
    """What `rayscale.autoscaler.loop.Autoscaler` answers the status server (view, fleet,
    history_scenario): fixed documents, and what was asked, in order."""

    def __init__(
        self,
        views: Mapping[ClusterKey, dict[str, Any]] | None = None,
        fleet: Sequence[dict[str, Any]] = (),
        scenarios: Mapping[tuple[ClusterKey, int], dict[str, Any]] | None = None,
    ) -> None:
        self.views = dict(views or {})
        self.entries = list(fleet)
        self.scenarios = dict(scenarios or {})
        self.asked: list[tuple[Any, ...]] = []

    def view(self, key: ClusterKey) -> dict[str, Any] | None:
        self.asked.append(("view", key))
        return self.views.get(key)

    def fleet(self) -> list[dict[str, Any]]:
        self.asked.append(("fleet",))
        return self.entries

    def history_scenario(self, key: ClusterKey, index: int = 0) -> dict[str, Any] | None:
        self.asked.append(("scenario", key, index))
        return self.scenarios.get((key, index))
