"""An async client for the ``NodeManagerService`` of one Ray node (its raylet).

    async with RayletClient(node.raylet_address, token=token) as raylet:
        totals = await raylet.resize_local_resources({"rayscale.io/vc/team-a": 4})

`node` is a ``model.NodeInfo`` from ``GcsClient.get_all_node_info``: the raylet listens on the
node's ``node_manager_address`` and ``node_manager_port``. Channel, token auth, per-attempt
timeout, retries and errors are ``GcsClient``'s (``rayscale.ray.client.RpcClient``): a raylet that
cannot be reached raises ``GcsUnavailable``, any other failure ``GcsCallError``, with ``peer``
"raylet".
"""

from __future__ import annotations

from collections.abc import Mapping

from rayscale.ray import encode
from rayscale.ray.client import RpcClient
from rayscale.ray.wire import NODE_MANAGER
from rayscale.ray.wire import node_manager_pb2 as raylet_pb

__all__ = ["RayletClient"]


class RayletClient(RpcClient):
    """Calls to one raylet, at ``ip:port``."""

    peer = "raylet"

    async def resize_local_resources(self, resources: Mapping[str, float]) -> dict[str, float]:
        """Set the node's totals of `resources` while it runs; return all of the node's totals.

        A name the node does not have is added (custom names such as ``rayscale.io/vc/team-a``
        work), the others are resized, resources not named stay as they are; a total of 0 removes
        the resource from the node. A total cannot drop below what tasks and actors hold now:
        resized to 0 while a task holds some, the total stays at the amount in use. Ray 2.60
        refuses to resize GPUs (``GcsCallError`` ABORTED). Safe to repeat: the amounts are
        totals, not differences. ValueError for an empty name or an amount that is negative or
        not finite.

        The GCS's live view (``GcsClient.get_cluster_resource_state``) shows the new totals a
        moment later; ``GcsClient.get_all_node_info`` keeps the totals the node registered with.
        """
        request = encode.resize_request(resources)
        reply = await self._call(
            NODE_MANAGER,
            "ResizeLocalResourceInstances",
            request,
            raylet_pb.ResizeLocalResourceInstancesReply,
        )
        return dict(reply.total_resources)
