"""Fake GCSes for a fleet of autoscaled RayClusters: one gRPC server (one port) per cluster, all
in the benchmark's process, each answering the autoscaler's calls as Ray 2.60's GCS does.

Each `FakeRay` plays one cluster's Ray as its GCS reports it (`AutoscalerStateService`):

- a head node (no CPU, the ``node:__internal_head__`` resource) that is always alive;
- a Ray node of ``CPU: 1`` for each Running worker pod (`instance_id` the pod's name, as Ray on
  Kubernetes reports it), from the moment the pod runs until it is deleted or its drain was
  accepted;
- tasks of ``{CPU: 1}`` that `submit` adds: each goes on a free CPU of a live node (as Ray's
  scheduler would), runs its `seconds` there and ends; the ones without a free CPU are the pending
  demand (`pending_resource_requests`, by shape and count); a task whose node went away goes back
  to pending (Ray retries it);
- `idle_duration_ms` of a node without a task: the time since its last task ended (or since it
  joined), as the raylet reports it;
- `DrainNode` accepted for a node without a task (Ray refuses an idle-termination drain of a busy
  node), the node leaving the state at once;
- `ReportAutoscalingState` accepted and dropped.

Every `GetClusterResourceState` counts as one autoscaling round of that cluster (`calls`).
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

HEAD_RESOURCES = {"CPU": 0.0, "node:__internal_head__": 1.0}
TASK_SHAPE = {"CPU": 1.0}


def node_id(name: str) -> bytes:
    return hashlib.sha224(name.encode()).digest()  # 28 bytes, as Ray's node ids


@dataclass
class Task:
    seconds: float
    node: str | None = None
    ends: float = 0.0


@dataclass
class FakeRay:
    """One cluster's Ray, as its GCS reports it. `running` names the cluster's Running worker pods
    (not being deleted)."""

    running: Callable[[], Iterable[str]]
    clock: Callable[[], float] = time.monotonic
    tasks: list[Task] = field(default_factory=list)
    joined: dict[str, float] = field(default_factory=dict)  # node (pod) -> when it joined
    idle_since: dict[str, float] = field(default_factory=dict)
    drained: set[str] = field(default_factory=set)
    calls: int = 0
    drains: int = 0

    def submit(self, count: int, seconds: float) -> None:
        self.tasks.extend(Task(seconds) for _ in range(count))

    def pending(self) -> int:
        return sum(1 for t in self.tasks if t.node is None)

    def _settle(self) -> list[str]:
        """Advance to now: end finished tasks, requeue those of vanished nodes, place the pending
        ones; the live nodes."""
        now = self.clock()
        live = [pod for pod in self.running() if pod not in self.drained]
        alive = set(live)
        for pod in live:
            if pod not in self.joined:
                self.joined[pod] = now
                self.idle_since[pod] = now
        for pod in [p for p in self.joined if p not in alive]:
            del self.joined[pod]
            self.idle_since.pop(pod, None)
        kept = []
        for task in self.tasks:
            if task.node is not None and task.ends <= now:
                self.idle_since[task.node] = task.ends
                continue
            if task.node is not None and task.node not in alive:
                task.node = None
            kept.append(task)
        self.tasks = kept
        busy = {t.node for t in kept if t.node is not None}
        free = iter(pod for pod in live if pod not in busy)
        for task in kept:
            if task.node is None:
                host = next(free, None)
                if host is None:
                    break
                task.node, task.ends = host, now + task.seconds
        return live

    def state(self, pb: Any) -> Any:
        live = self._settle()
        now = self.clock()
        busy = {t.node for t in self.tasks if t.node is not None}
        nodes = [pb.NodeState(node_id=node_id("head"), instance_id="head", total_resources=HEAD_RESOURCES,
                              available_resources=HEAD_RESOURCES, status=pb.NodeStatus.RUNNING)]  # fmt: skip
        for pod in live:
            used = pod in busy
            nodes.append(
                pb.NodeState(
                    node_id=node_id(pod),
                    instance_id=pod,
                    ray_node_type_name="cpu",
                    total_resources=TASK_SHAPE,
                    available_resources={"CPU": 0.0} if used else TASK_SHAPE,
                    status=pb.NodeStatus.RUNNING if used else pb.NodeStatus.IDLE,
                    idle_duration_ms=0 if used else int((now - self.idle_since.get(pod, now)) * 1000),
                    node_activity=["1 task running"] if used else [],
                )
            )
        pending = self.pending()
        requests = [
            pb.ResourceRequestByCount(request=pb.ResourceRequest(resources_bundle=TASK_SHAPE), count=pending)
        ]
        self.calls += 1
        return pb.GetClusterResourceStateReply(
            cluster_resource_state=pb.ClusterResourceState(
                cluster_resource_state_version=self.calls,
                node_states=nodes,
                pending_resource_requests=requests if pending else [],
                cluster_session_name="bench-fleet",
            )
        )

    def drain(self, node: bytes) -> bool:
        live = self._settle()
        busy = {t.node for t in self.tasks if t.node is not None}
        pod = next((p for p in live if node_id(p) == node), None)
        if pod is not None and pod in busy:
            return False
        if pod is not None:
            self.drained.add(pod)
        self.drains += 1
        return True


def handlers(ray: FakeRay) -> Any:
    import grpc

    from rayscale.ray.wire import SERVICE
    from rayscale.ray.wire import autoscaler_pb2 as pb

    async def state(request: Any, context: Any) -> Any:
        return ray.state(pb)

    async def report(request: Any, context: Any) -> Any:
        return pb.ReportAutoscalingStateReply()

    async def drain(request: Any, context: Any) -> Any:
        accepted = ray.drain(request.node_id)
        return pb.DrainNodeReply(is_accepted=accepted, rejection_reason_message="" if accepted else "busy")

    def unary(fn: Any, request: Any, reply: Any) -> Any:
        return grpc.unary_unary_rpc_method_handler(
            fn, request_deserializer=request.FromString, response_serializer=reply.SerializeToString
        )

    methods = {
        "GetClusterResourceState": unary(
            state, pb.GetClusterResourceStateRequest, pb.GetClusterResourceStateReply
        ),
        "ReportAutoscalingState": unary(
            report, pb.ReportAutoscalingStateRequest, pb.ReportAutoscalingStateReply
        ),
        "DrainNode": unary(drain, pb.DrainNodeRequest, pb.DrainNodeReply),
    }
    return grpc.method_handlers_generic_handler(SERVICE.full_name, methods)


@contextlib.asynccontextmanager
async def serving(rays: dict[str, FakeRay]) -> AsyncIterator[dict[str, str]]:
    """A gRPC server per fake Ray (a port each on 127.0.0.1); yields their addresses by name."""
    import grpc

    servers, addresses = [], {}
    try:
        for name, ray in rays.items():
            server = grpc.aio.server()
            server.add_generic_rpc_handlers((handlers(ray),))
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            servers.append(server)
            addresses[name] = f"127.0.0.1:{port}"
        yield addresses
    finally:
        for server in servers:
            await server.stop(grace=None)
