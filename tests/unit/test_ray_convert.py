"""GCS protobuf messages -> rayscale.ray.model, and the requests rayscale sends."""

from __future__ import annotations

import pytest
from tests.support.rayids import NODE_A, NODE_B

from rayscale.ray import convert, encode
from rayscale.ray.model import (
    AutoscalingState,
    ClusterState,
    DrainReason,
    FailedInstanceRequest,
    GangRequest,
    GangSelector,
    GcsLabelConstraint,
    LabelOperator,
    LabelSelector,
    Locality,
    NodeStatus,
    PendingInstance,
    PendingInstanceRequest,
    PlacementConstraint,
    RayNodeState,
    ResourceDemand,
    ResourceRequest,
)
from rayscale.ray.wire import autoscaler_pb2 as pb
from rayscale.ray.wire import common_pb2 as common_pb

PG = "4725014c5588d5d610423eb8467901000000"


def _selector(
    *constraints: tuple[str, common_pb.LabelSelectorOperator.ValueType, list[str]],
) -> common_pb.LabelSelector:
    return common_pb.LabelSelector(
        label_constraints=[
            common_pb.LabelSelectorConstraint(label_key=k, operator=op, label_values=v)
            for k, op, v in constraints
        ]
    )


def test_node_state_fields() -> None:
    msg = pb.NodeState(
        node_id=NODE_A,
        instance_id="raycluster-gpu-worker-x7k2p",
        ray_node_type_name="gpu",
        available_resources={"CPU": 2.0, "GPU": 1.0},
        total_resources={"CPU": 4.0, "GPU": 1.0, "memory": 8.0 * 1024**3},
        dynamic_labels={f"_PG_{PG}": ""},
        status=pb.IDLE,
        idle_duration_ms=12_345,
        node_ip_address="10.0.0.7",
        instance_type_name="",
        node_activity=["Busy workers on node."],
        labels={"ray.io/node-group": "gpu", "zone": "a"},
    )
    node = convert.node_state(msg)
    assert node == RayNodeState(
        node_id=NODE_A.hex(),
        status=NodeStatus.IDLE,
        instance_id="raycluster-gpu-worker-x7k2p",
        ray_node_type_name="gpu",
        idle_duration_ms=12_345,
        available_resources={"CPU": 2.0, "GPU": 1.0},
        total_resources={"CPU": 4.0, "GPU": 1.0, "memory": 8.0 * 1024**3},
        labels={"ray.io/node-group": "gpu", "zone": "a"},
        dynamic_labels={f"_PG_{PG}": ""},
        node_ip_address="10.0.0.7",
        node_activity=("Busy workers on node.",),
    )
    assert node.alive
    assert node.idle_seconds == pytest.approx(12.345)


@pytest.mark.parametrize(
    ("status", "expected", "alive"),
    [
        (pb.UNSPECIFIED, NodeStatus.UNSPECIFIED, False),
        (pb.RUNNING, NodeStatus.RUNNING, True),
        (pb.IDLE, NodeStatus.IDLE, True),
        (pb.DRAINING, NodeStatus.DRAINING, True),
        (pb.DEAD, NodeStatus.DEAD, False),
    ],
)
def test_node_status(status: pb.NodeStatus.ValueType, expected: NodeStatus, alive: bool) -> None:
    node = convert.node_state(pb.NodeState(node_id=NODE_A, status=status, idle_duration_ms=5))
    assert node.status is expected
    assert node.alive is alive
    # only an IDLE node has an idle time worth acting on
    assert node.idle_seconds == (0.005 if expected is NodeStatus.IDLE else 0.0)


def test_pending_requests_with_label_selectors() -> None:
    msg = pb.ResourceRequestByCount(
        request=pb.ResourceRequest(
            resources_bundle={"CPU": 1.0, "GPU": 1.0},
            label_selectors=[
                _selector(("zone", common_pb.LABEL_OPERATOR_IN, ["a", "b"])),
                _selector(("spot", common_pb.LABEL_OPERATOR_NOT_IN, ["true"])),
            ],
        ),
        count=7,
    )
    assert convert.resource_demand(msg) == ResourceDemand(
        ResourceRequest(
            resources={"CPU": 1.0, "GPU": 1.0},
            label_selectors=(
                LabelSelector((GcsLabelConstraint("zone", LabelOperator.IN, ("a", "b")),)),
                LabelSelector((GcsLabelConstraint("spot", LabelOperator.NOT_IN, ("true",)),)),
            ),
        ),
        count=7,
    )


def test_a_lone_empty_label_selector_means_any_node() -> None:
    # What the 2.60 GCS sends for a plain task.
    msg = pb.ResourceRequest(resources_bundle={"GPU": 1.0}, label_selectors=[common_pb.LabelSelector()])
    assert convert.resource_request(msg).label_selectors == ()


def test_an_empty_fallback_selector_is_kept() -> None:
    msg = pb.ResourceRequest(
        resources_bundle={"CPU": 1.0},
        label_selectors=[_selector(("zone", common_pb.LABEL_OPERATOR_IN, ["a"])), common_pb.LabelSelector()],
    )
    selectors = convert.resource_request(msg).label_selectors
    assert selectors == (
        LabelSelector((GcsLabelConstraint("zone", LabelOperator.IN, ("a",)),)),
        LabelSelector(),
    )


def _spread_bundle(resources: dict[str, float]) -> pb.ResourceRequest:
    return pb.ResourceRequest(
        resources_bundle=resources,
        placement_constraints=[
            pb.PlacementConstraint(anti_affinity=pb.AntiAffinityConstraint(label_name=f"_PG_{PG}"))
        ],
    )


def test_gang_from_bundle_selectors_and_details() -> None:
    bundle = _spread_bundle({"GPU": 1.0})
    msg = pb.GangResourceRequest(
        requests=[bundle, bundle],
        details=f"{PG}:STRICT_SPREAD|PENDING",
        bundle_selectors=[pb.BundleSelector(resource_requests=[bundle, bundle])],
    )
    gang = convert.gang_request(msg)
    expected_bundle = ResourceRequest(
        resources={"GPU": 1.0},
        placement_constraints=(PlacementConstraint("anti_affinity", f"_PG_{PG}"),),
    )
    assert gang.bundles == (expected_bundle, expected_bundle)
    assert len(gang.selectors) == 1
    assert gang.selectors[0].bundles == gang.bundles
    assert gang.selectors[0].locality is None
    assert (gang.placement_group_id, gang.strategy, gang.state) == (PG, "STRICT_SPREAD", "PENDING")
    assert gang.details == f"{PG}:STRICT_SPREAD|PENDING"


def test_gang_prefers_the_first_bundle_selector_over_the_legacy_list() -> None:
    msg = pb.GangResourceRequest(
        requests=[pb.ResourceRequest(resources_bundle={"CPU": 1.0})],
        bundle_selectors=[
            pb.BundleSelector(resource_requests=[pb.ResourceRequest(resources_bundle={"TPU": 4.0})]),
            pb.BundleSelector(resource_requests=[pb.ResourceRequest(resources_bundle={"GPU": 8.0})]),
        ],
    )
    gang = convert.gang_request(msg)
    assert [b.resources for b in gang.bundles] == [{"TPU": 4.0}]
    assert [[b.resources for b in s.bundles] for s in gang.selectors] == [[{"TPU": 4.0}], [{"GPU": 8.0}]]


def test_gang_without_selectors_uses_the_legacy_list_and_infers_the_strategy() -> None:
    pack = pb.ResourceRequest(
        resources_bundle={"CPU": 2.0},
        placement_constraints=[
            pb.PlacementConstraint(affinity=pb.AffinityConstraint(label_name=f"_PG_{PG}"))
        ],
    )
    gang = convert.gang_request(pb.GangResourceRequest(requests=[pack, pack], details="something else"))
    assert len(gang.bundles) == 2
    assert gang.selectors == ()
    assert gang.strategy == "STRICT_PACK"
    assert gang.placement_group_id == ""
    spread = convert.gang_request(pb.GangResourceRequest(requests=[_spread_bundle({"CPU": 1.0})]))
    assert spread.strategy == "STRICT_SPREAD"
    plain = convert.gang_request(
        pb.GangResourceRequest(requests=[pb.ResourceRequest(resources_bundle={"A": 1})])
    )
    assert plain.strategy == ""


def test_gang_locality_requirement() -> None:
    msg = pb.GangResourceRequest(
        bundle_selectors=[
            pb.BundleSelector(
                resource_requests=[pb.ResourceRequest(resources_bundle={"TPU": 4.0})],
                locality_requirement=pb.LocalityRequirement(
                    locality_constraint=pb.LocalityConstraint(
                        label_name="slice", placement_strategy=common_pb.STRICT_PACK
                    ),
                    label_selector=_selector(("tpu", common_pb.LABEL_OPERATOR_IN, ["v6e"])),
                ),
            )
        ]
    )
    gang = convert.gang_request(msg)
    assert gang.selectors[0].locality == Locality(
        label_name="slice",
        strategy="STRICT_PACK",
        label_selector=LabelSelector((GcsLabelConstraint("tpu", LabelOperator.IN, ("v6e",)),)),
    )
    assert gang.strategy == "STRICT_PACK"


@pytest.mark.parametrize(
    ("details", "expected"),
    [
        (f"{PG}:STRICT_SPREAD|PENDING", (PG, "STRICT_SPREAD", "PENDING")),
        (f"{PG.upper()}:PACK|RESCHEDULING", (PG, "PACK", "RESCHEDULING")),
        (f"{PG}:SPREAD", (PG, "SPREAD", "")),
        ("", ("", "", "")),
        ("not details", ("", "", "")),
    ],
)
def test_parse_gang_details(details: str, expected: tuple[str, str, str]) -> None:
    assert convert.parse_gang_details(details) == expected


def test_cluster_state() -> None:
    msg = pb.ClusterResourceState(
        cluster_resource_state_version=42,
        last_seen_autoscaler_state_version=7,
        cluster_session_name="session_x",
        node_states=[
            pb.NodeState(node_id=NODE_A, instance_id="pod-a", status=pb.DEAD),
            pb.NodeState(node_id=NODE_B, instance_id="pod-a", status=pb.RUNNING),
        ],
        pending_resource_requests=[
            pb.ResourceRequestByCount(request=pb.ResourceRequest(resources_bundle={"GPU": 1.0}), count=3)
        ],
        pending_gang_resource_requests=[pb.GangResourceRequest(requests=[_spread_bundle({"GPU": 1.0})])],
        cluster_resource_constraints=[
            pb.ClusterResourceConstraint(),  # what clearing request_resources leaves behind
            pb.ClusterResourceConstraint(
                resource_requests=[
                    pb.ResourceRequestByCount(
                        request=pb.ResourceRequest(resources_bundle={"CPU": 8.0}), count=2
                    )
                ]
            ),
        ],
    )
    state = convert.cluster_state(msg)
    assert state.version == 42
    assert state.last_seen_autoscaler_state_version == 7
    assert state.session_name == "session_x"
    assert [n.node_id for n in state.nodes] == [NODE_A.hex(), NODE_B.hex()]
    assert state.pending_requests == (ResourceDemand(ResourceRequest({"GPU": 1.0}), 3),)
    assert len(state.pending_gangs) == 1
    assert state.constraints == ((ResourceDemand(ResourceRequest({"CPU": 8.0}), 2),),)
    # a pod name maps to its live node, even when an earlier node with that name died
    live = state.node_by_instance("pod-a")
    assert live is not None
    assert live.node_id == NODE_B.hex()
    assert state.node_by_instance("pod-z") is None
    assert state.node(NODE_A.hex()) == state.nodes[0]


def test_node_by_instance_falls_back_to_a_dead_node() -> None:
    dead = RayNodeState(node_id=NODE_A.hex(), status=NodeStatus.DEAD, instance_id="pod-a")
    assert ClusterState(version=1, session_name="", nodes=(dead,)).node_by_instance("pod-a") == dead


def test_empty_state() -> None:
    state = convert.cluster_state(pb.ClusterResourceState())
    assert state == ClusterState(version=0, session_name="", nodes=())


@pytest.mark.parametrize(
    ("reason", "wire"),
    [
        (DrainReason.IDLE_TERMINATION, pb.DRAIN_NODE_REASON_IDLE_TERMINATION),
        (DrainReason.PREEMPTION, pb.DRAIN_NODE_REASON_PREEMPTION),
        (DrainReason.UNSPECIFIED, pb.DRAIN_NODE_REASON_UNSPECIFIED),
    ],
)
def test_drain_request(reason: DrainReason, wire: pb.DrainNodeReason.ValueType) -> None:
    msg = encode.drain_request(NODE_A.hex(), reason, "idle for 60s", 1_700_000_000_000)
    assert msg.node_id == NODE_A
    assert msg.reason == wire
    assert msg.reason_message == "idle for 60s"
    assert msg.deadline_timestamp_ms == 1_700_000_000_000


@pytest.mark.parametrize("node_id", ["", "zz" * 28, "ab" * 27, "ab" * 29, NODE_A.hex() + "0"])
def test_drain_request_rejects_bad_node_ids(node_id: str) -> None:
    with pytest.raises(ValueError, match="not a Ray node id"):
        encode.drain_request(node_id, DrainReason.IDLE_TERMINATION, "", 0)


def test_drain_request_rejects_negative_deadlines() -> None:
    with pytest.raises(ValueError, match="deadline_ms"):
        encode.drain_request(NODE_A.hex(), DrainReason.IDLE_TERMINATION, "", -1)


def test_constraint_request_round_trips() -> None:
    demands = [
        ResourceDemand(
            ResourceRequest(
                {"GPU": 1, "CPU": 4},
                label_selectors=(LabelSelector((GcsLabelConstraint("zone", LabelOperator.NOT_IN, ("c",)),)),),
                placement_constraints=(
                    PlacementConstraint("affinity", "_PG_x"),
                    PlacementConstraint("anti_affinity", "_PG_y", "v"),
                ),
            ),
            3,
        ),
        ResourceDemand(ResourceRequest({"CPU": 1}), 1),
    ]
    msg = encode.constraint_request(demands)
    back = tuple(convert.resource_demand(r) for r in msg.cluster_resource_constraint.resource_requests)
    assert back == tuple(demands)
    # proto3 optional: exactly the one kind of constraint is present
    first = msg.cluster_resource_constraint.resource_requests[0].request.placement_constraints
    assert [(c.HasField("affinity"), c.HasField("anti_affinity")) for c in first] == [
        (True, False),
        (False, True),
    ]


def test_empty_constraint_request_clears() -> None:
    msg = encode.constraint_request([])
    assert msg.HasField("cluster_resource_constraint")
    assert len(msg.cluster_resource_constraint.resource_requests) == 0


@pytest.mark.parametrize(
    "demand",
    [ResourceDemand(ResourceRequest({"CPU": -1}), 1), ResourceDemand(ResourceRequest({"CPU": 1}), -1)],
)
def test_constraint_request_rejects_negative_values(demand: ResourceDemand) -> None:
    with pytest.raises(ValueError, match="negative"):
        encode.constraint_request([demand])


# ---- ReportAutoscalingState ----

UNSCHEDULABLE = "pod pending: unschedulable"
ZONE_A = LabelSelector((GcsLabelConstraint("zone", LabelOperator.IN, ("a",)),))


def _gcs_gang() -> pb.GangResourceRequest:
    """A pending STRICT_SPREAD placement group as the GCS sends it: legacy list and a bundle selector."""
    bundle = _spread_bundle({"GPU": 1.0})
    bundle.label_selectors.append(_selector(("zone", common_pb.LABEL_OPERATOR_IN, ["a"])))
    return pb.GangResourceRequest(
        requests=[bundle, bundle],
        details=f"{PG}:STRICT_SPREAD|PENDING",
        bundle_selectors=[
            pb.BundleSelector(
                resource_requests=[bundle, bundle],
                locality_requirement=pb.LocalityRequirement(
                    locality_constraint=pb.LocalityConstraint(
                        label_name="slice", placement_strategy=common_pb.STRICT_SPREAD
                    )
                ),
            )
        ],
    )


def test_autoscaling_state_request_carries_every_field() -> None:
    gang = convert.gang_request(_gcs_gang())
    constraint = (ResourceDemand(ResourceRequest({"CPU": 64.0}), 2),)
    state = AutoscalingState(
        last_seen_cluster_resource_state_version=41,
        autoscaler_state_version=1_700_000_000_123,
        pending_instance_requests=(PendingInstanceRequest("gpu-group", 1, 1_700_000_000),),
        pending_instances=(PendingInstance("rc-gpu-x1", "gpu-group", UNSCHEDULABLE, "10.0.0.9"),),
        failed_instance_requests=(FailedInstanceRequest("gpu-group", 1, "not scheduled in 900s", 10, 910),),
        infeasible_resource_requests=(ResourceRequest({"GPU": 1.0}, label_selectors=(ZONE_A,)),),
        infeasible_gang_resource_requests=(gang,),
        infeasible_cluster_resource_constraints=(constraint,),
    )
    msg = encode.autoscaling_state_request(state).autoscaling_state
    assert (msg.last_seen_cluster_resource_state_version, msg.autoscaler_state_version) == (
        41,
        1_700_000_000_123,
    )
    [pending] = msg.pending_instance_requests
    assert (pending.ray_node_type_name, pending.count, pending.request_ts) == ("gpu-group", 1, 1_700_000_000)
    [instance] = msg.pending_instances
    assert (instance.instance_id, instance.ray_node_type_name, instance.details, instance.ip_address) == (
        "rc-gpu-x1",
        "gpu-group",
        UNSCHEDULABLE,
        "10.0.0.9",
    )
    [failed] = msg.failed_instance_requests
    assert (failed.ray_node_type_name, failed.count, failed.reason, failed.start_ts, failed.failed_ts) == (
        "gpu-group",
        1,
        "not scheduled in 900s",
        10,
        910,
    )
    [request] = msg.infeasible_resource_requests
    assert convert.resource_request(request) == state.infeasible_resource_requests[0]
    [constraints] = msg.infeasible_cluster_resource_constraints
    assert tuple(convert.resource_demand(r) for r in constraints.resource_requests) == constraint


def test_an_infeasible_gang_goes_back_as_the_gcs_sent_it() -> None:
    sent = _gcs_gang()
    state = AutoscalingState(0, 1, infeasible_gang_resource_requests=(convert.gang_request(sent),))
    [echoed] = encode.autoscaling_state_request(state).autoscaling_state.infeasible_gang_resource_requests
    assert echoed == sent


def test_a_gang_without_locality_or_details_round_trips() -> None:
    gang = GangRequest(
        bundles=(ResourceRequest({"CPU": 1.0}),),
        selectors=(GangSelector((ResourceRequest({"CPU": 1.0}),)),),
    )
    state = AutoscalingState(0, 1, infeasible_gang_resource_requests=(gang,))
    [msg] = encode.autoscaling_state_request(state).autoscaling_state.infeasible_gang_resource_requests
    assert not msg.bundle_selectors[0].HasField("locality_requirement")
    assert convert.gang_request(msg) == GangRequest(
        bundles=gang.bundles, selectors=gang.selectors, strategy=""
    )


def test_autoscaling_state_request_rejects_counts_out_of_range() -> None:
    state = AutoscalingState(0, 1, pending_instance_requests=(PendingInstanceRequest("g", 2**31, 0),))
    with pytest.raises(ValueError, match="count"):
        encode.autoscaling_state_request(state)
