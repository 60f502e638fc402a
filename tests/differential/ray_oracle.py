"""Ray 2.60's ResourceDemandScheduler as an oracle: run ONLY as a script by a Python that has Ray.

    .venv/bin/python tests/differential/ray_oracle.py

Reads batches of cases (``ray_case.to_ray`` JSON), one batch per line on stdin, and answers each
batch with one line on stdout: per case, Ray's launches per node type, its terminations
(instance, cause), the infeasible demands (count per demand), placement groups (ids) and whether
the ``request_resources`` constraint is infeasible, plus where Ray put each request (per
scheduling node) for diagnostics. Never imported by pytest: Ray's protobuf messages collide with
rayscale's.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
import traceback
from typing import Any

from ray.autoscaler.v2.instance_manager.config import NodeTypeConfig
from ray.autoscaler.v2.scheduler import (
    ResourceDemandScheduler,
    ResourceRequestSource,
    SchedulingNodeStatus,
    SchedulingRequest,
)
from ray.autoscaler.v2.schema import AutoscalerInstance

# Ray's generated protobuf modules have no type stubs.
_autoscaler: Any = importlib.import_module("ray.core.generated.autoscaler_pb2")
_common: Any = importlib.import_module("ray.core.generated.common_pb2")
_im: Any = importlib.import_module("ray.core.generated.instance_manager_pb2")
AffinityConstraint = _autoscaler.AffinityConstraint
AntiAffinityConstraint = _autoscaler.AntiAffinityConstraint
BundleSelector = _autoscaler.BundleSelector
ClusterResourceConstraint = _autoscaler.ClusterResourceConstraint
GangResourceRequest = _autoscaler.GangResourceRequest
NodeState = _autoscaler.NodeState
NodeStatus = _autoscaler.NodeStatus
PlacementConstraint = _autoscaler.PlacementConstraint
ResourceRequest = _autoscaler.ResourceRequest
ResourceRequestByCount = _autoscaler.ResourceRequestByCount
LabelSelector = _common.LabelSelector
LabelSelectorConstraint = _common.LabelSelectorConstraint
LabelSelectorOperator = _common.LabelSelectorOperator
Instance = _im.Instance
NodeKind = _im.NodeKind
TerminationRequest = _im.TerminationRequest

_OPS = {
    "IN": LabelSelectorOperator.LABEL_OPERATOR_IN,
    "NOT_IN": LabelSelectorOperator.LABEL_OPERATOR_NOT_IN,
}

# The scheduler context of the last schedule() call, for per-node placements.
_CONTEXTS: list[Any] = []
_original_from_request = ResourceDemandScheduler.ScheduleContext.from_schedule_request.__func__  # type: ignore[attr-defined]


def _capture(cls: Any, req: Any) -> Any:
    ctx = _original_from_request(cls, req)
    _CONTEXTS.append(ctx)
    return ctx


ResourceDemandScheduler.ScheduleContext.from_schedule_request = classmethod(_capture)  # type: ignore[method-assign,assignment]


# Variant "no-cut-absorb": Ray as if a node it removes in this pass took no work and did not
# count toward max_num_nodes (what rayscale does); used to tell that quirk's differences apart.
_FIX_CUT_NODES = [False]
_original_try_schedule = ResourceDemandScheduler._try_schedule


def _try_schedule_without_cut_nodes(ctx: Any, requests: Any, resource_request_source: Any) -> Any:
    if not _FIX_CUT_NODES[0]:
        return _original_try_schedule(ctx, requests, resource_request_source)
    nodes = ctx._nodes
    cut = [n for n in nodes if n.status == SchedulingNodeStatus.TO_TERMINATE]
    ctx._nodes = [n for n in nodes if n.status != SchedulingNodeStatus.TO_TERMINATE]
    try:
        target, infeasible = _original_try_schedule(ctx, requests, resource_request_source)
    finally:
        ctx._nodes = nodes
    return target + cut, infeasible


ResourceDemandScheduler._try_schedule = staticmethod(_try_schedule_without_cut_nodes)  # type: ignore[method-assign,assignment]


def _selector(items: list[dict[str, Any]]) -> Any:
    return LabelSelector(
        label_constraints=[
            LabelSelectorConstraint(label_key=c["key"], operator=_OPS[c["op"]], label_values=c["values"])
            for c in items
        ]
    )


def _request(
    resources: dict[str, float], selectors: list[list[dict[str, Any]]], constraint: Any = None
) -> Any:
    req = ResourceRequest(resources_bundle=resources, label_selectors=[_selector(s) for s in selectors])
    if constraint is not None:
        req.placement_constraints.append(constraint)
    return req


def _instance(index: int, spec: dict[str, Any]) -> Any:
    status = getattr(Instance, spec["status"])
    ray = spec.get("ray")
    node_id = index.to_bytes(28, "big") if ray is not None else b""
    im = Instance(
        instance_id=f"im-{spec['name']}",
        instance_type=spec["type"],
        status=status,
        node_id=node_id.hex(),
        node_kind=NodeKind.HEAD if spec["head"] else NodeKind.WORKER,
        cloud_instance_id=spec["name"],
    )
    ray_node = None
    if ray is not None:
        ray_node = NodeState(
            node_id=node_id,
            instance_id=spec["name"],
            ray_node_type_name=spec["type"],
            total_resources=ray["total"],
            available_resources=ray["available"],
            labels=ray["labels"],
            status=getattr(NodeStatus, ray["status"]),
            idle_duration_ms=ray["idle_ms"],
        )
    return AutoscalerInstance(cloud_instance_id=spec["name"], im_instance=im, ray_node=ray_node)


def _gang(spec: dict[str, Any]) -> Any:
    label = f"_PG_{spec['pg']}"
    constraint = None
    if spec["strategy"] == "STRICT_PACK":
        constraint = PlacementConstraint(affinity=AffinityConstraint(label_name=label, label_value=""))
    elif spec["strategy"] == "STRICT_SPREAD":
        constraint = PlacementConstraint(
            anti_affinity=AntiAffinityConstraint(label_name=label, label_value="")
        )
    legacy = [_request(b["resources"], [], constraint) for b in spec["bundles"]]
    with_selectors = [
        _request(b["resources"], [b["selector"]] if b["selector"] else [], constraint)
        for b in spec["bundles"]
    ]
    return GangResourceRequest(
        requests=legacy,
        details=f"{spec['pg']}:{spec['strategy']}|PENDING",
        bundle_selectors=[BundleSelector(resource_requests=with_selectors)],
    )


def build(case: dict[str, Any]) -> tuple[Any, dict[bytes, int]]:
    configs = {
        t["name"]: NodeTypeConfig(
            name=t["name"],
            min_worker_nodes=t["min"],
            max_worker_nodes=t["max"],
            idle_timeout_s=t["idle_timeout_s"],
            priority=t["priority"],
            resources=t["resources"],
            labels=t["labels"],
        )
        for t in case["node_types"]
    }
    instances = [_instance(i + 1, spec) for i, spec in enumerate(case["instances"])]
    demand_keys: dict[bytes, int] = {}
    requests = []
    for i, d in enumerate(case["demands"]):
        req = _request(d["resources"], d["selectors"])
        demand_keys[req.SerializeToString(deterministic=True)] = i
        requests.append(ResourceRequestByCount(request=req, count=d["count"]))
    constraints = []
    if case["constraint"] is not None:
        constraints.append(
            ClusterResourceConstraint(
                resource_requests=[
                    ResourceRequestByCount(
                        request=_request(c["resources"], [c["selector"]] if c["selector"] else []),
                        count=c["count"],
                    )
                    for c in case["constraint"]
                ]
            )
        )
    request = SchedulingRequest(
        disable_launch_config_check=True,
        node_type_configs=configs,
        max_num_nodes=case["max_num_nodes"],
        idle_timeout_s=case["idle_timeout_s"],
        pending_idle_timeout_s=None,
        resource_requests=requests,
        gang_resource_requests=[_gang(g) for g in case["gangs"]],
        cluster_resource_constraints=constraints,
        current_instances=instances,
    )
    return request, demand_keys


def _describe(req: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"resources": dict(req.resources_bundle)}
    if req.label_selectors:
        out["selectors"] = len(req.label_selectors)
    for c in req.placement_constraints:
        if c.HasField("affinity"):
            out["affinity"] = c.affinity.label_name
        if c.HasField("anti_affinity"):
            out["anti_affinity"] = c.anti_affinity.label_name
    return out


def answer(case: dict[str, Any]) -> dict[str, Any]:
    request, demand_keys = build(case)
    names = {f"im-{spec['name']}": spec["name"] for spec in case["instances"]}
    _CONTEXTS.clear()
    _FIX_CUT_NODES[0] = "no-cut-absorb" in str(case.get("variant") or "").split("+")
    reply = ResourceDemandScheduler().schedule(request)
    launch: dict[str, int] = {}
    for item in reply.to_launch:
        launch[item.instance_type] = launch.get(item.instance_type, 0) + item.count
    terminate = [
        {
            "instance": names.get(t.instance_id, t.instance_id),
            "type": t.instance_type,
            "cause": TerminationRequest.Cause.Name(t.cause),
        }
        for t in reply.to_terminate
    ]
    infeasible = [0] * len(case["demands"])
    unknown = 0
    for r in reply.infeasible_resource_requests:
        index = demand_keys.get(r.SerializeToString(deterministic=True))
        if index is None:
            unknown += 1
        else:
            infeasible[index] += 1
    pgs = [g.details.split(":", 1)[0] for g in reply.infeasible_gang_resource_requests]
    nodes = []
    if _CONTEXTS:
        for n in _CONTEXTS[-1]._nodes:
            demand = n.sched_requests[ResourceRequestSource.PENDING_DEMAND]
            constraint = n.sched_requests[ResourceRequestSource.CLUSTER_RESOURCE_CONSTRAINT]
            if not demand and not constraint and n.status is SchedulingNodeStatus.SCHEDULABLE:
                continue
            nodes.append(
                {
                    "node": names.get(n.im_instance_id or ""),
                    "type": n.node_type,
                    "status": n.status.name,
                    "demand": [_describe(r) for r in demand],
                    "constraint": [_describe(r) for r in constraint],
                }
            )
    return {
        "id": case["id"],
        "error": None,
        "launch": launch,
        "terminate": terminate,
        "infeasible_demands": infeasible,
        "infeasible_unknown": unknown,
        "infeasible_pgs": pgs,
        "constraint_infeasible": bool(reply.infeasible_cluster_resource_constraints),
        "nodes": nodes,
    }


def main() -> None:
    logging.disable(logging.CRITICAL)
    for line in sys.stdin:
        if not line.strip():
            continue
        out = []
        for case in json.loads(line):
            try:
                out.append(answer(case))
            except Exception:
                out.append({"id": case.get("id"), "error": traceback.format_exc()})
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
