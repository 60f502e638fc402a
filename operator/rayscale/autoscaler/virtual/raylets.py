"""The Ray side of virtual clusters for `VirtualClusters` (apply.py): which Ray jobs ended, the VC
resources of each member's raylet, and what still runs on a VC being removed. I/O (the GCS and the
raylets); every failure is logged and answered conservatively (no job ended, nobody leaves).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rayscale.autoscaler.virtual.model import Member
from rayscale.autoscaler.virtual.raysync import VC_AMOUNT, resizes, wanted
from rayscale.autoscaler.virtual.read import Reading
from rayscale.autoscaler.virtual.report import Busy
from rayscale.ray import model as ray
from rayscale.ray.errors import GcsError

if TYPE_CHECKING:  # gRPC is loaded when a cluster first needs a GCS connection
    from rayscale.ray.client import GcsClient
    from rayscale.ray.raylet import RayletClient

__all__ = ["busy_of", "finished_jobs", "leave", "resize_members"]

log = logging.getLogger(__name__)
FINISHED = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})


def _raylet(address: str, token: str | None) -> RayletClient:
    """A client of the raylet at `address`; gRPC loads here, on first use (`rayscale.ray.errors`)."""
    from rayscale.ray.raylet import RayletClient

    return RayletClient(address, token=token)


async def finished_jobs(reading: Reading, gcs: GcsClient | None) -> frozenset[str]:
    """Submission ids of Ray jobs that ended; asked only when a divisible VC exists."""
    if gcs is None or not any(v.divisible for v in reading.vcs):
        return frozenset()
    try:
        jobs = await gcs.get_all_job_info()
    except GcsError as exc:
        log.info("Ray jobs not read (%s); job clusters wait", exc)
        return frozenset()
    return frozenset(
        j.submission_id
        for j in jobs
        if j.submission_id and (j.status in FINISHED or (j.status is None and j.is_dead))
    )


async def leave(
    members: Mapping[str, Member],
    assign: Mapping[str, Member | None],
    state: ray.ClusterState | None,
    gcs: GcsClient | None,
    token: str | None,
) -> set[str]:
    """Take the VC resource away from each Ray node leaving its VC (or job cluster) before
    its label changes. The raylet keeps what running work holds (the GCS's idle view can lag
    a second behind), so a node whose resource does not drop to 0 is busy: it gets its
    resource back and stays. Returns those pods. Without the GCS nothing leaves."""
    leaving = {
        pod: [k for k in wanted(members[pod]) if k not in wanted(new)]
        for pod, new in assign.items()
        if pod in members and members[pod] != new
    }
    leaving = {p: keys for p, keys in leaving.items() if keys}
    if not leaving:
        return set()
    if state is None or gcs is None:
        return set(leaving)
    live = {n.instance_id for n in state.nodes if n.alive}
    infos = await _addresses(gcs) if live & set(leaving) else {}
    refused: set[str] = set()
    for pod, keys in sorted(leaving.items()):
        if pod not in live:
            continue  # no Ray node: nothing can run there
        info = infos.get(pod)
        if info is None:
            refused.add(pod)
            continue
        try:
            async with _raylet(info.raylet_address, token) as raylet:
                totals = await raylet.resize_local_resources(dict.fromkeys(keys, 0.0))
                if any(totals.get(k, 0.0) > 0 for k in keys):
                    await raylet.resize_local_resources(dict.fromkeys(keys, VC_AMOUNT))
                    refused.add(pod)
                    log.info("pod %s stays in its virtual cluster: its Ray node still runs work there", pod)
        except GcsError as exc:
            log.warning("VC resources of pod %s not released: %s", pod, exc)
            refused.add(pod)
    return refused


async def _addresses(gcs: GcsClient) -> dict[str, ray.NodeInfo]:
    try:
        return {i.instance_id: i for i in await gcs.get_all_node_info(alive_only=True) if i.instance_id}
    except GcsError as exc:
        log.info("Ray nodes not read (%s); VC resources wait", exc)
        return {}


async def resize_members(
    members: Mapping[str, Member], state: ray.ClusterState, gcs: GcsClient, token: str | None
) -> None:
    wanted = resizes(members, state.nodes)
    if not wanted:
        return
    infos = await _addresses(gcs)

    async def resize(pod: str, change: Mapping[str, float]) -> None:
        info = infos.get(pod)
        if info is None:
            return
        try:
            async with _raylet(info.raylet_address, token) as raylet:
                await raylet.resize_local_resources(change)
        except GcsError as exc:
            log.warning("VC resources of Ray node %s (pod %s) not set: %s", info.node_id, pod, exc)

    await asyncio.gather(*(resize(p, c) for p, c in sorted(wanted.items())))


async def busy_of(
    reading: Reading,
    members: Mapping[str, Member],
    state: ray.ClusterState | None,
    gcs: GcsClient | None,
) -> dict[str, Busy]:
    """For VCs being removed: what still runs on their hosts."""
    removing = {v.name for v in reading.vcs if v.removing}
    if not removing or state is None or gcs is None:
        return {}
    node_vc = {
        n.node_id: members[n.instance_id].vc
        for n in state.nodes
        if n.instance_id in members and members[n.instance_id].vc in removing
    }
    try:
        actors = await gcs.get_all_actor_info(state="ALIVE")
        groups = await gcs.get_all_placement_groups()
        jobs = await gcs.get_all_job_info()
    except GcsError as exc:
        log.info("Ray actors/placement groups/jobs not read (%s)", exc)
        return {}
    out: dict[str, Busy] = {}
    for vc in removing:
        on = {n for n, v in node_vc.items() if v == vc}
        out[vc] = Busy(
            jobs=sum(1 for j in jobs if not j.is_dead and j.driver_node_id in on),
            actors=sum(1 for a in actors if a.node_id in on),
            placement_groups=sum(1 for g in groups if g.state != "REMOVED" and on & set(g.node_ids)),
            tasks=sum(1 for n in state.nodes if n.node_id in on and n.status is ray.NodeStatus.RUNNING),
        )
    return out
