"""An async client for the GCS ``AutoscalerStateService`` of one Ray cluster.

    async with GcsClient("head-svc.ns.svc.cluster.local:6379", token=token) as gcs:
        state = await gcs.get_cluster_resource_state()
        await gcs.report_autoscaling_state(autoscaling_state)
        result = await gcs.drain_node(node.node_id)

Every call has a per-attempt timeout and is retried, with exponential backoff and jitter, when
the GCS is unreachable or slow (``UNAVAILABLE``, ``DEADLINE_EXCEEDED``); every method is
safe to repeat (Ray documents DrainNode as idempotent; the GCS drops a report it already holds
a newer version of). When the retries are used up the call raises ``GcsUnavailable``: the
caller must treat the cluster's state as unknown (report it, and never scale down on it). Any
other failure (a bad token, a method this Ray does not have: ``UNIMPLEMENTED``) raises
``GcsCallError`` at once. Both derive from ``GcsError``.

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
from typing import Any, Final, Self, TypeVar

import grpc
from google.protobuf.message import Message

from rayscale.ray import convert, model
from rayscale.ray.wire import autoscaler_pb2 as pb
from rayscale.ray.wire import method_path

__all__ = ["GcsCallError", "GcsClient", "GcsError", "GcsUnavailable"]

log = logging.getLogger(__name__)

Reply = TypeVar("Reply", bound=Message)

TRANSIENT: Final = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
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


class GcsError(Exception):
    """A call to a Ray GCS failed."""

    def __init__(self, address: str, method: str, code: str, details: str) -> None:
        super().__init__(f"GCS {address}: {method} failed: {code}: {details}")
        self.address = address
        self.method = method
        self.code = code  # gRPC status code name, e.g. "UNAVAILABLE"
        self.details = details


class GcsUnavailable(GcsError):
    """The GCS could not be reached or did not answer in time, after all retries."""


class GcsCallError(GcsError):
    """The GCS answered with an error that retrying will not fix (e.g. UNAUTHENTICATED)."""


class GcsClient:
    """Calls to one GCS. Create and use it inside the event loop; ``close()`` (or ``async with``)."""

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

    # ---- the service ----

    async def get_cluster_resource_state(self) -> model.ClusterState:
        """Nodes (with idle times and free resources), pending tasks, placement groups and
        ``request_resources`` constraints."""
        reply = await self._call(
            "GetClusterResourceState", pb.GetClusterResourceStateRequest(), pb.GetClusterResourceStateReply
        )
        return convert.cluster_state(reply.cluster_resource_state)

    async def report_autoscaling_state(self, state: model.AutoscalingState) -> None:
        """Tell the GCS what the autoscaler is doing: pending and failed launches, pods without a
        Ray node, and the demand no scaling can place (``ray status`` and the dashboard show it).

        The GCS keeps the report with the highest ``autoscaler_state_version`` and silently drops
        older ones.
        """
        await self._call(
            "ReportAutoscalingState",
            convert.autoscaling_state_request(state),
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
        request = convert.drain_request(node_id, reason, message, deadline_ms)
        reply = await self._call("DrainNode", request, pb.DrainNodeReply)
        return model.DrainResult(accepted=reply.is_accepted, rejection_reason=reply.rejection_reason_message)

    async def request_cluster_resource_constraint(self, demands: Iterable[model.ResourceDemand]) -> None:
        """What ``ray.autoscaler.sdk.request_resources`` does: replace the cluster's resource
        constraint with `demands` (an empty list clears it). For tests and tools."""
        await self._call(
            "RequestClusterResourceConstraint",
            convert.constraint_request(demands),
            pb.RequestClusterResourceConstraintReply,
        )

    # ---- plumbing ----

    def _callable(self, method: str, reply_type: type[Reply]) -> grpc.aio.UnaryUnaryMultiCallable[Any, Any]:
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(self.address, options=_CHANNEL_OPTIONS)
        call = self._calls.get(method)
        if call is None:
            call = self._channel.unary_unary(
                method_path(method),
                request_serializer=_serialize,
                response_deserializer=reply_type.FromString,
            )
            self._calls[method] = call
        return call

    async def _call(self, method: str, request: Message, reply_type: type[Reply]) -> Reply:
        call = self._callable(method, reply_type)
        attempt = 0
        while True:
            try:
                reply: Reply = await call(request, timeout=self.timeout, metadata=self._metadata)
                return reply
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
                details = exc.details() or ""
                if code not in TRANSIENT:
                    raise GcsCallError(self.address, method, code.name, details) from exc
                if attempt >= self.retries:
                    raise GcsUnavailable(self.address, method, code.name, details) from exc
            delay = min(self.max_backoff, self.backoff * 2**attempt) * random.uniform(0.5, 1.0)
            attempt += 1
            log.debug("GCS %s: %s: %s; retry %d in %.2fs", self.address, method, code.name, attempt, delay)
            await asyncio.sleep(delay)
