"""The hosts of multi-host replicas in a snapshot (snapshot.py), pure: hosts without a replica
name grouped into replicas as the controller counts them, and each replica's hosts in the places
they hold, host 0 first."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from rayscale.autoscaler.scheduling.model import Group, Node, NodeState
from rayscale.cluster.accelerators import slice_host_rank
from rayscale.common import labels as L
from rayscale.common.pods import pod_labels, pod_name
from rayscale.common.types import Obj
from rayscale.ray import model as ray

__all__ = ["UNLABELLED_PREFIX", "group_unlabelled", "host_order", "host_rank"]


UNLABELLED_PREFIX = "unlabelled:"


def group_unlabelled(nodes: list[Node], groups: Mapping[str, Group]) -> list[Node]:
    """Hosts of a multi-host group whose pods carry no replica name (KubeRay before v1.6 makes
    them so) form replicas of ``numOfHosts`` in name order, as the controller counts them; they
    are never a replica per host."""
    counts: dict[str, int] = {}
    out: list[Node] = []
    for node in nodes:
        group = groups.get(node.group)
        if (
            group is None
            or group.num_of_hosts <= 1
            or node.replica is not None
            or node.state is NodeState.TERMINATING
        ):
            out.append(node)
            continue
        index = counts.get(node.group, 0)
        counts[node.group] = index + 1
        replica = f"{UNLABELLED_PREFIX}{node.group}:{index // group.num_of_hosts}"
        out.append(dataclasses.replace(node, replica=replica))
    return out


def host_rank(pod: Obj, state: ray.ClusterState | None) -> int:
    found = None if state is None else state.node_by_instance(pod_name(pod))
    reported = found.total_resources if found is not None and found.alive else None
    return slice_host_rank(pod_labels(pod).get(L.HOST_INDEX), reported)


def host_order(nodes: list[Node], ranks: Mapping[str, int]) -> list[Node]:
    """Each multi-host replica's hosts in the places they hold, host 0 first (`ranks`)."""
    places: dict[tuple[str, str], list[int]] = {}
    for i, node in enumerate(nodes):
        if node.replica is not None:
            places.setdefault((node.group, node.replica), []).append(i)
    out = list(nodes)
    for held in places.values():
        hosts = sorted((nodes[i] for i in held), key=lambda n: (ranks.get(n.name, 0), n.name))
        for i, node in zip(held, hosts, strict=True):
            out[i] = node
    return out
