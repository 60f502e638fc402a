"""An async client for the GCS of one Ray cluster: its ``AutoscalerStateService``, the info
services that list the cluster's nodes, jobs, actors and placement groups, and the job
submissions Ray's job manager keeps in the GCS's internal key-value store.

    async with GcsClient("head-svc.ns.svc.cluster.local:6379", token=token) as gcs:
        state = await gcs.get_cluster_resource_state()
        await gcs.report_autoscaling_state(autoscaling_state)
        result = await gcs.drain_node(node.node_id)
        nodes = await gcs.get_all_node_info()
        submission = await gcs.get_submission("rayjob-sample-x7k2p")

Every call has a per-attempt timeout and is retried, with exponential backoff and jitter, when
the GCS is unreachable or slow (``UNAVAILABLE``, ``DEADLINE_EXCEEDED``); every method is
safe to repeat (Ray documents DrainNode as idempotent; the GCS drops a report it already holds
a newer version of; the rest only read). When the retries are used up the call raises
``GcsUnavailable``: the caller must treat the cluster's state as unknown (report it, and never
scale down on it). Any other failure (a bad token, a method this Ray does not have:
``UNIMPLEMENTED``, an error the GCS reports in the reply's own status) raises ``GcsCallError`` at
once. Both derive from ``GcsError``.

``RpcClient`` is the plumbing (channel, auth, timeouts, retries, errors) that ``GcsClient`` and
``rayscale.ray.raylet.RayletClient`` share.

The calls that change Ray (``DrainNode``, ``ReportAutoscalingState``,
``RequestClusterResourceConstraint``, ``ResizeLocalResourceInstances``) check the process's write
fence (``rayscale.fence``) before each attempt: a replica that may have lost the leader Lease
changes nothing in Ray either.

Token authentication (Ray >= 2.52, ``RAY_AUTH_MODE=token``): Ray's own clients send the token as
the gRPC metadata ``authorization: Bearer <token>`` on every call; so does this one when given
``token``.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Iterable
from types import TracebackType
from typing import Any, ClassVar, Final, Self, TypeVar

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message

from rayscale.fence import WRITE_FENCE
from rayscale.ray import convert, encode, model
from rayscale.ray.errors import GcsError
from rayscale.ray.wire import (
    ACTOR_INFO,
    INTERNAL_KV,
    JOB_INFO,
    NODE_INFO,
    PLACEMENT_GROUP_INFO,
    SERVICE,
    method_path,
)
from rayscale.ray.wire import autoscaler_pb2 as pb
from rayscale.ray.wire import gcs_service_pb2 as service_pb

__all__ = ["GcsCallError", "GcsClient", "GcsError", "GcsUnavailable", "RpcClient"]

log = logging.getLogger(__name__)

Reply = TypeVar("Reply", bound=Message)

TRANSIENT: Final = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
MUTATING: Final = frozenset(
    {
        "DrainNode",
        "ReportAutoscalingState",
        "RequestClusterResourceConstraint",
        "ResizeLocalResourceInstances",
    }
)
GCS_NOT_FOUND: Final = 17  # Ray's StatusCode::NotFound: InternalKVGet of a missing key
MAX_MESSAGE_BYTES: Final = 256 * 1024 * 1024  # a 10,000-node state is a few MB; gRPC's default is 4
_CHANNEL_OPTIONS: Final = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    # Reconnect soon after a head restart instead of backing off for up to two minutes.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 5000),
)


def _serialize(message: Message) -> bytes:
    # Not `Message.SerializeToString`: that is the abstract base method (it raises), and gRPC
    # then sends an empty request instead of failing.
    return message.SerializeToString()


class GcsUnavailable(GcsError):
    """The server could not be reached or did not answer in time, after all retries."""


class GcsCallError(GcsError):
    """The server answered with an error that retrying will not fix (e.g. UNAUTHENTICATED)."""


class RpcClient:
    """Unary calls to one Ray gRPC server (a GCS, a raylet), with the token, timeouts and retries
    described in the module docstring. Create and use it inside the event loop; ``close()`` (or
    ``async with``). Subclasses add the methods; `peer` names the server in errors and logs."""

    peer: ClassVar[str] = "Ray"

    def __init__(
        self,
        address: str,
        *,
        token: str | None = None,
        timeout: float = 5.0,
        retries: int = 2,
        backoff: float = 0.2,
        max_backoff: float = 2.0,
    ) -> None:
        """`timeout` is per attempt, in seconds; `retries` is how many more attempts a transient
        failure gets; the pause before retry n is about ``backoff * 2**n``, at most `max_backoff`."""
        if timeout <= 0 or retries < 0 or backoff < 0 or max_backoff < 0:
            raise ValueError("timeout must be > 0; retries, backoff and max_backoff >= 0")
        self.address = address
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        token = token.strip() if token is not None else None
        self._metadata: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {token}"),) if token else ()
        self._channel: grpc.aio.Channel | None = None
        self._calls: dict[str, grpc.aio.UnaryUnaryMultiCallable[Any, Any]] = {}

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        channel, self._channel = self._channel, None
        self._calls.clear()
        if channel is not None:
            await channel.close()

    def _callable(
        self, service: ServiceDescriptor, method: str, reply_type: type[Reply]
    ) -> grpc.aio.UnaryUnaryMultiCallable[Any, Any]:
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(self.address, options=_CHANNEL_OPTIONS)
        path = method_path(method, service)
        call = self._calls.get(path)
        if call is None:
            call = self._channel.unary_unary(
                path,
                request_serializer=_serialize,
                response_deserializer=reply_type.FromString,
            )
            self._calls[path] = call
        return call

    async def _call(
        self, service: ServiceDescriptor, method: str, request: Message, reply_type: type[Reply]
    ) -> Reply:
        call = self._callable(service, method, reply_type)
        attempt = 0
        while True:
            if method in MUTATING:
                WRITE_FENCE.check(f"{self.peer} {self.address} {method}")
            try:
                reply: Reply = await call(request, timeout=self.timeout, metadata=self._metadata)
                return reply
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
                details = exc.details() or ""
                if code not in TRANSIENT:
                    raise GcsCallError(self.address, method, code.name, details, peer=self.peer) from exc
                if attempt >= self.retries:
                    raise GcsUnavailable(self.address, method, code.name, details, peer=self.peer) from exc
            delay = min(self.max_backoff, self.backoff * 2**attempt) * random.uniform(0.5, 1.0)
            attempt += 1
            log.debug(
                "%s %s: %s: %s; retry %d in %.2fs", self.peer, self.address, method, code.name, attempt, delay
            )
            await asyncio.sleep(delay)


class GcsClient(RpcClient):
    """Calls to one GCS."""

    peer = "GCS"

    # ---- AutoscalerStateService ----

    async def get_cluster_resource_state(self) -> model.ClusterState:
        """Nodes (with idle times and free resources), pending tasks, placement groups and
        ``request_resources`` constraints."""
        reply = await self._call(
            SERVICE,
            "GetClusterResourceState",
            pb.GetClusterResourceStateRequest(),
            pb.GetClusterResourceStateReply,
        )
        return convert.cluster_state(reply.cluster_resource_state)

    async def report_autoscaling_state(self, state: model.AutoscalingState) -> None:
        """Tell the GCS what the autoscaler is doing: pending and failed launches, pods without a
        Ray node, and the demand no scaling can place (``ray status`` and the dashboard show it).

        The GCS keeps the report with the highest ``autoscaler_state_version`` and silently drops
        older ones.
        """
        await self._call(
            SERVICE,
            "ReportAutoscalingState",
            encode.autoscaling_state_request(state),
            pb.ReportAutoscalingStateReply,
        )

    async def drain_node(
        self,
        node_id: str,
        reason: model.DrainReason = model.DrainReason.IDLE_TERMINATION,
        message: str = "",
        deadline_ms: int = 0,
    ) -> model.DrainResult:
        """Ask a node (hex id) to drain. With IDLE_TERMINATION a node that has work refuses.

        `deadline_ms`: Unix time in ms when the node will be killed anyway; 0 for none. The GCS
        accepts a drain of an unknown or dead node.
        """
        request = encode.drain_request(node_id, reason, message, deadline_ms)
        reply = await self._call(SERVICE, "DrainNode", request, pb.DrainNodeReply)
        return model.DrainResult(accepted=reply.is_accepted, rejection_reason=reply.rejection_reason_message)

    async def request_cluster_resource_constraint(self, demands: Iterable[model.ResourceDemand]) -> None:
        """What ``ray.autoscaler.sdk.request_resources`` does: replace the cluster's resource
        constraint with `demands` (an empty list clears it). For tests and tools."""
        await self._call(
            SERVICE,
            "RequestClusterResourceConstraint",
            encode.constraint_request(demands),
            pb.RequestClusterResourceConstraintReply,
        )

    # ---- the info services ----

    async def get_all_node_info(self, *, alive_only: bool = False) -> list[model.NodeInfo]:
        """Every node the GCS knows of: the live ones and the dead ones it still remembers (only
        the live ones with `alive_only`)."""
        method = "GetAllNodeInfo"
        request = encode.node_info_request(alive_only=alive_only)
        reply = await self._call(NODE_INFO, method, request, service_pb.GetAllNodeInfoReply)
        self._check(method, reply.status)
        return [convert.node_info(n) for n in reply.node_info_list]

    async def get_all_job_info(self) -> list[model.JobInfo]:
        """Every job (driver) the GCS knows of, live and finished, with the job submission API's
        status of the submitted ones."""
        method = "GetAllJobInfo"
        request = encode.job_info_request()
        reply = await self._call(JOB_INFO, method, request, service_pb.GetAllJobInfoReply)
        self._check(method, reply.status)
        return [convert.job_info(j) for j in reply.job_info_list]

    async def get_all_actor_info(self, *, state: str | None = None) -> list[model.ActorInfo]:
        """Every actor the GCS holds (the dead ones it still remembers too), or only those in
        `state`, e.g. "ALIVE" (one of ``convert.ACTOR_STATES``: Ray's filter takes one state, so
        "not dead" is a filter on the result)."""
        method = "GetAllActorInfo"
        request = encode.actor_info_request(state)
        reply = await self._call(ACTOR_INFO, method, request, service_pb.GetAllActorInfoReply)
        self._check(method, reply.status)
        return [convert.actor_info(a) for a in reply.actor_table_data]

    async def get_all_placement_groups(self) -> list[model.PlacementGroupInfo]:
        """Every placement group the GCS holds, placed or not (removed ones it still remembers too)."""
        method = "GetAllPlacementGroup"
        request = service_pb.GetAllPlacementGroupRequest()
        reply = await self._call(PLACEMENT_GROUP_INFO, method, request, service_pb.GetAllPlacementGroupReply)
        self._check(method, reply.status)
        return [convert.placement_group_info(p) for p in reply.placement_group_table_data]

    # ---- job submissions, from the internal key-value store ----

    async def get_submission(self, submission_id: str) -> model.SubmissionInfo | None:
        """What Ray's job manager records of one job submission (``ray job status``); None when
        the GCS holds no such submission. Read from the GCS, so it answers while the dashboard
        (where the job manager runs) is down. ValueError for a record that is not Ray's JSON."""
        method = "InternalKVGet"
        request = service_pb.InternalKVGetRequest(
            key=convert.submission_key(submission_id), namespace=convert.SUBMISSION_NAMESPACE
        )
        reply = await self._call(INTERNAL_KV, method, request, service_pb.InternalKVGetReply)
        if reply.status.code == GCS_NOT_FOUND:
            return None
        self._check(method, reply.status)
        return convert.submission_info(reply.value)

    async def list_submissions(self) -> dict[str, model.SubmissionInfo]:
        """Every job submission the GCS holds, by submission id: their keys, then one read of
        them all. A record that is not Ray's JSON is left out (and logged)."""
        method = "InternalKVKeys"
        keys_request = service_pb.InternalKVKeysRequest(
            prefix=convert.SUBMISSION_KEY_PREFIX, namespace=convert.SUBMISSION_NAMESPACE
        )
        keys = await self._call(INTERNAL_KV, method, keys_request, service_pb.InternalKVKeysReply)
        self._check(method, keys.status)
        if not keys.results:
            return {}
        method = "InternalKVMultiGet"
        request = service_pb.InternalKVMultiGetRequest(
            keys=keys.results, namespace=convert.SUBMISSION_NAMESPACE
        )
        reply = await self._call(INTERNAL_KV, method, request, service_pb.InternalKVMultiGetReply)
        self._check(method, reply.status)
        out: dict[str, model.SubmissionInfo] = {}
        for entry in reply.results:  # a key deleted since InternalKVKeys is simply not here
            submission_id = convert.submission_id_of(entry.key)
            if submission_id is None:
                continue
            try:
                out[submission_id] = convert.submission_info(entry.value)
            except ValueError as exc:
                log.warning("GCS %s: job submission %r: %s", self.address, submission_id, exc)
        return out

    def _check(self, method: str, status: service_pb.GcsStatus) -> None:
        """The GCS answers its info calls with gRPC OK and puts its own error in the reply."""
        if status.code != 0:
            raise GcsCallError(
                self.address, method, f"GCS_STATUS_{status.code}", status.message, peer=self.peer
            )
