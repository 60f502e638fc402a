"""Virtual clusters in scenario files (`rayscale simulate`), documented in docs/scenario-format.md.

`parse_virtual` reads the top-level ``virtualClusters`` and ``finishedJobs`` keys and the nodes'
``virtualCluster`` and ``jobCluster`` into what `plan` takes; `outcome` is the plan's answer for
them as JSON-ready data. Errors name the field, like the rest of the scenario parser.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from rayscale.autoscaler.scenario import as_list, as_map, boolean, fail, integer, only
from rayscale.autoscaler.scheduling.model import Decision, Group, Snapshot
from rayscale.autoscaler.virtual.model import Member, VcGroup, VcPlan, VirtualCluster

__all__ = ["VirtualScenario", "outcome", "parse_virtual"]

# A Kubernetes object name (RFC 1123 subdomain): what a RayVirtualCluster may be called.
OBJECT_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


class VirtualScenario(NamedTuple):
    """A scenario's virtual clusters, each pod's place, and the submission ids of ended jobs."""

    vcs: tuple[VirtualCluster, ...]
    members: dict[str, Member]
    finished: frozenset[str]


def _text(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise fail(path, "must be a non-empty string")
    return value


def _share(item: Any, path: str, groups: Mapping[str, Group]) -> VcGroup:
    data = as_map(item, path)
    only(data, {"groupName", "nodes", "minNodes", "maxNodes", "desired"}, path)
    name = _text(data.get("groupName"), f"{path}.groupName")
    group = groups.get(name)
    if group is None:
        raise fail(f"{path}.groupName", f"no group named {name!r}")
    if group.num_of_hosts != 1:
        raise fail(
            f"{path}.groupName",
            f"group {name!r} has numOfHosts {group.num_of_hosts}; multi-host groups cannot be in"
            " virtual clusters",
        )
    if data.get("nodes") is None:
        raise fail(f"{path}.nodes", "is required (an integer >= 0)")
    nodes = integer(data, "nodes", path, 0)
    low = integer(data, "minNodes", path, nodes)
    high = integer(data, "maxNodes", path, nodes)
    if low > nodes:
        raise fail(f"{path}.minNodes", f"must be <= nodes ({nodes})")
    if high < nodes:
        raise fail(f"{path}.maxNodes", f"must be >= nodes ({nodes})")
    desired = integer(data, "desired", path, nodes)
    if not low <= desired <= high:
        raise fail(f"{path}.desired", f"must be between minNodes ({low}) and maxNodes ({high})")
    return VcGroup(name, nodes, low, high, desired)


def _virtual_cluster(item: Any, path: str, groups: Mapping[str, Group]) -> VirtualCluster:
    data = as_map(item, path)
    only(data, {"name", "divisible", "removing", "groups"}, path)
    name = _text(data.get("name"), f"{path}.name")
    if not OBJECT_NAME.fullmatch(name):
        raise fail(
            f"{path}.name",
            f"{name!r} is not a Kubernetes object name (lowercase letters, digits, '-' and '.')",
        )
    items = as_list(data.get("groups"), f"{path}.groups")
    if not items:
        raise fail(f"{path}.groups", "must list at least one group")
    shares: list[VcGroup] = []
    for i, share in enumerate(items):
        where = f"{path}.groups[{i}]"
        parsed = _share(share, where, groups)
        if any(s.name == parsed.name for s in shares):
            raise fail(f"{where}.groupName", f"group {parsed.name!r} is listed twice")
        shares.append(parsed)
    return VirtualCluster(
        name,
        tuple(shares),
        divisible=boolean(data, "divisible", path),
        removing=boolean(data, "removing", path),
    )


def _member(item: Any, path: str, vcs: Mapping[str, VirtualCluster]) -> Member | None:
    data = as_map(item, path)
    vc_name, job = data.get("virtualCluster"), data.get("jobCluster")
    if vc_name is None:
        if job is not None:
            raise fail(f"{path}.jobCluster", "needs the node's virtualCluster")
        return None
    vc = vcs.get(_text(vc_name, f"{path}.virtualCluster"))
    if vc is None:
        raise fail(
            f"{path}.virtualCluster",
            f"no virtual cluster named {vc_name!r} (list it in virtualClusters, with removing: true"
            " for one being deleted)",
        )
    if vc.group(data["group"]) is None:
        raise fail(f"{path}.virtualCluster", f"virtual cluster {vc.name!r} has no group {data['group']!r}")
    if job is None:
        return Member(vc.name)
    job = _text(job, f"{path}.jobCluster")
    if not vc.divisible:
        raise fail(f"{path}.jobCluster", f"virtual cluster {vc.name!r} is not divisible")
    return Member(vc.name, job)


def parse_virtual(data: Any, snapshot: Snapshot) -> VirtualScenario | None:
    """The virtual clusters of a scenario whose other sections made `snapshot` (`parse_scenario`),
    or None when it has no ``virtualClusters`` key."""
    top = as_map(data, "scenario")
    groups = {g.name: g for g in snapshot.groups}
    vcs: dict[str, VirtualCluster] = {}
    for i, item in enumerate(as_list(top.get("virtualClusters"), "virtualClusters")):
        vc = _virtual_cluster(item, f"virtualClusters[{i}]", groups)
        if vc.name in vcs:
            raise fail(f"virtualClusters[{i}].name", f"duplicate virtual cluster {vc.name!r}")
        vcs[vc.name] = vc
    members: dict[str, Member] = {}
    for i, item in enumerate(as_list(top.get("nodes"), "nodes")):
        member = _member(item, f"nodes[{i}]", vcs)
        if member is not None:
            members[item["name"]] = member
    finished = frozenset(
        _text(job, f"finishedJobs[{i}]")
        for i, job in enumerate(as_list(top.get("finishedJobs"), "finishedJobs"))
    )
    if top.get("virtualClusters") is None:
        return None
    return VirtualScenario(tuple(vcs.values()), members, finished)


def _unmet(result: VcPlan, name: str) -> list[dict[str, Any]]:
    """The VC's unmet demand, shown as the decision's ``unmet`` shows it."""
    unmet = Decision(groups={}, terminate=(), unmet=result.unmet.get(name, ()), placements=())
    out: list[dict[str, Any]] = unmet.to_dict()["unmet"]
    return out


def outcome(result: VcPlan, vcs: Sequence[VirtualCluster]) -> dict[str, Any]:
    """What `result` changes for the virtual clusters, as JSON-ready data: membership changes
    (``assign``, pod -> ``vc``, ``vc/job`` or null) and, per VC, its target hosts per group, its
    job clusters and the demand for it left unmet (a VC that demand asks for but that is not
    listed appears with its unmet demand only)."""
    clusters: dict[str, dict[str, Any]] = {}
    for vc in vcs:
        entry: dict[str, Any] = {
            "desired": dict(result.desired.get(vc.name, {})),
            "jobClusters": [
                {
                    "name": job.name,
                    "hosts": dict(sorted(job.hosts.items())),
                    "destroying": job.destroying,
                    "reason": job.reason,
                }
                for job in result.jobs
                if job.vc == vc.name
            ],
            "unmet": _unmet(result, vc.name),
        }
        if vc.removing:
            entry["removed"] = vc.name in result.removed
        clusters[vc.name] = entry
    for name in sorted(set(result.unmet) - set(clusters)):
        clusters[name] = {"unmet": _unmet(result, name)}
    return {
        "assign": {pod: None if m is None else m.part for pod, m in sorted(result.assign.items())},
        "clusters": clusters,
    }
