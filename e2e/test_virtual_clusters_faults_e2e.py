"""Virtual clusters survive faults, with a real Ray: two VCs (team-a, team-b) hold one worker each
of a three-worker group, the third worker is held by none.

- The operator is killed (SIGKILL, as when its pod dies) and started again; while none runs,
  team-b's Ray node loses its VC resource. The new process keeps every pod where it was (no
  label changes, no pod created or deleted), gives team-b's node its resource back (which shows it
  at work), and leaves every other Ray node as it was.
- The head pod is deleted: a new Ray head (a new GCS session) comes up, the workers' raylets give
  up on the old GCS and are restarted by the bridge as new Ray nodes, without VC resources (they
  are not in the pods' ``ray start``). rayscale gives each member's new node its VC resource again,
  nobody's membership changes, and work asking for a VC runs on its node in the new session.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from e2e.harness import NAME, RAY_JOIN, SCALE_UP, Scenario, group
from e2e.raybridge.driver import RayDriver
from tests.support.operators import Operator
from tests.support.polling import eventually

from rayscale.api.virtualcluster_names import JOB_LABEL, RESOURCE_PREFIX, VC_LABEL, vc_resource
from rayscale.ray.raylet import RayletClient

pytestmark = pytest.mark.timeout(900)

IDLE = 5
VCS = {"team-a": vc_resource("team-a"), "team-b": vc_resource("team-b")}
AMOUNT = 1000.0
HOLD = 10.0  # seconds everything must stay put once recovered: 10 autoscaler rounds, 2 resyncs
RAYLET_GIVES_UP = 60.0  # Ray's gcs_rpc_server_reconnect_timeout_s

Layout = Mapping[str, str | None]  # every worker pod -> the VC holding it (None: no VC)
RayView = dict[str, tuple[str, dict[str, float]]]  # pod -> (its live Ray node, its rayscale.io/ resources)


# ---------------------------------------------------------------------------- what is checked


def wanted(vc: str | None) -> dict[str, float]:
    return {} if vc is None else {VCS[vc]: AMOUNT}


async def ray_view(scenario: Scenario) -> RayView:
    """Each worker pod's live Ray node and the rayscale resources it carries (``GetClusterResourceState``:
    the totals as resized)."""
    state = await scenario.state_or_none()
    view: RayView = {}
    for node in state.nodes if state is not None else ():
        if node.alive and node.instance_id in scenario.pods.pods:
            mine = {k: v for k, v in node.total_resources.items() if k.startswith(RESOURCE_PREFIX)}
            view[node.instance_id] = (node.node_id, mine)
    return view


def wrong_resources(layout: Layout, view: RayView, pods: Mapping[str, str | None] | None = None) -> list[str]:
    """The pods (of `pods`, default all) whose Ray node is missing or carries other VC resources."""
    found = []
    for pod, vc in sorted((layout if pods is None else pods).items()):
        if pod not in view:
            found.append(f"{pod}: no live Ray node")
        elif view[pod][1] != wanted(vc):
            found.append(f"{pod}: {view[pod][1]}, wants {wanted(vc)}")
    return found


def moved(scenario: Scenario, layout: Layout, since: float) -> list[str]:
    """What must not happen after `since`: a pod's VC or job-cluster label changing, a worker pod
    deleted or created (the pod watch's record, so a change undone since is still seen)."""
    found = []
    for pod, vc in sorted(layout.items()):
        if (values := scenario.pods.label_values(pod, VC_LABEL, since)) != [vc]:
            found.append(f"{pod}: {VC_LABEL} went {values}")
        if (values := scenario.pods.label_values(pod, JOB_LABEL, since)) != [None]:
            found.append(f"{pod}: {JOB_LABEL} went {values}")
        if scenario.pods.pods[pod].deleting is not None:
            found.append(f"{pod} deleted")
    found += [f"new worker pod {p}" for p in scenario.pods.pods if p not in layout]
    return found


async def vcs_ready(scenario: Scenario, layout: Layout, view: RayView) -> bool:
    """Each VC's status: Ready, its pods as in `layout`, with the Ray node ids of `view`."""
    for vc in VCS:
        status = await scenario.vc_status(vc)
        nodes = [n for g in status.get("groups") or [] for n in g.get("nodes") or []]
        listed = {n["pod"]: n.get("nodeId") for n in nodes}
        mine = {p: view[p][0] if p in view else None for p, v in layout.items() if v == vc}
        if status.get("phase") != "Ready" or listed != mine:
            return False
    return True


def check_nothing_moved(scenario: Scenario, layout: Layout, since: float, when: str) -> None:
    """Fails at once (`eventually` retries only AssertionError) if anything `moved`."""
    if problems := moved(scenario, layout, since):
        raise RuntimeError(f"{when}: {problems}")


# ---------------------------------------------------------------------------- the set-up


async def two_vcs(scenario: Scenario) -> Layout:
    """Three workers (minReplicas 3); team-a and team-b take one idle worker each. Returns who
    holds which pod once both VCs are Ready and every Ray node carries exactly its VC's resource."""
    await scenario.create([group("cpu", replicas=3, min_replicas=3, max_replicas=4)], idle_timeout=IDLE)
    for vc in VCS:
        await scenario.virtual_cluster(vc, [{"groupName": "cpu", "nodes": 1}])

    async def settled() -> Layout | None:
        layout = {p: scenario.pods.pods[p].labels[-1][1].get(VC_LABEL) for p in scenario.pods.live()}
        view = await ray_view(scenario)
        if sorted(v for v in layout.values() if v) != sorted(VCS) or wrong_resources(layout, view):
            return None
        return layout if await vcs_ready(scenario, layout, view) else None

    layout: Layout = await eventually(
        settled, timeout=SCALE_UP, interval=0.5, message="team-a and team-b Ready with one node each"
    )
    return layout


def pod_of_vc(layout: Layout, vc: str) -> str:
    [pod] = [p for p, v in layout.items() if v == vc]
    return pod


async def resize(scenario: Scenario, pod: str, resources: Mapping[str, float]) -> None:
    """Resize the resources of `pod`'s Ray node through its raylet, as rayscale does."""
    [info] = [i for i in await scenario.gcs.get_all_node_info(alive_only=True) if i.instance_id == pod]
    async with RayletClient(info.raylet_address) as raylet:
        await raylet.resize_local_resources(resources)


# ---------------------------------------------------------------------------- the operator restarts


async def test_operator_restart_keeps_virtual_clusters(
    scenario: Scenario, autoscaling_operator: Operator
) -> None:
    layout = await two_vcs(scenario)
    before = await ray_view(scenario)
    b1 = pod_of_vc(layout, "team-b")
    others = {p: v for p, v in layout.items() if p != b1}

    since = time.monotonic()
    autoscaling_operator.kill()
    # With no rayscale running, team-b's node loses its VC resource: only the new process can put
    # it back, so its return shows that process at work.
    await resize(scenario, b1, {VCS["team-b"]: 0.0})

    async def lost() -> bool:
        return (await ray_view(scenario))[b1][1] == {}

    await eventually(lost, timeout=30, interval=0.25, message=f"{b1} lost {VCS['team-b']}")
    await scenario.holds(lost, 3, f"{b1} got {VCS['team-b']} back with no rayscale running")

    restarted = time.monotonic()
    autoscaling_operator.start()

    async def recovered() -> bool:
        check_nothing_moved(scenario, layout, since, "after the operator restarted")
        view = await ray_view(scenario)
        if untouched := wrong_resources(layout, view, others):
            raise RuntimeError(f"Ray nodes changed by the restart: {untouched}")
        return not wrong_resources(layout, view) and await vcs_ready(scenario, layout, view)

    await eventually(recovered, timeout=60, interval=0.5, message=f"{b1} has {VCS['team-b']} again")
    scenario.record("operator restarted -> VC resource re-applied", time.monotonic() - restarted, 1)

    await scenario.holds(recovered, HOLD, "the virtual clusters changed after the operator restarted")
    assert autoscaling_operator.proc is not None
    assert autoscaling_operator.proc.poll() is None, autoscaling_operator.output()
    after = await ray_view(scenario)
    assert {p: n for p, (n, _) in after.items()} == {p: n for p, (n, _) in before.items()}, (
        "every worker kept its Ray node"
    )


# ---------------------------------------------------------------------------- the Ray head restarts


async def test_head_restart_gives_vc_resources_back(scenario: Scenario, tmp_path: Path) -> None:
    layout = await two_vcs(scenario)
    before = await scenario.state()
    [head] = [p.metadata.name for p in await scenario.kube.pods(NAME, group="headgroup", live=True)]

    since = time.monotonic()
    await scenario.kube.delete_pod(head)

    async def rejoined() -> bool:
        check_nothing_moved(scenario, layout, since, "while the head restarts")
        state = await scenario.state_or_none()
        if state is None or state.session_name == before.session_name:
            return False
        return all((n := state.node_by_instance(p)) is not None and n.alive for p in layout)

    await eventually(
        rejoined,
        timeout=RAYLET_GIVES_UP + 2 * RAY_JOIN,
        interval=1.0,
        message="every worker alive in the new Ray session",
    )
    back = time.monotonic()
    scenario.record("head pod deleted -> workers alive in the new session", back - since, len(layout))

    async def recovered() -> bool:
        check_nothing_moved(scenario, layout, since, "after the head restart")
        view = await ray_view(scenario)
        return not wrong_resources(layout, view) and await vcs_ready(scenario, layout, view)

    await eventually(recovered, timeout=60, interval=0.5, message="each VC's new Ray node has its resource")
    scenario.record("workers rejoined -> VC resources re-applied", time.monotonic() - back, 2)
    await scenario.holds(recovered, HOLD, "the virtual clusters changed after the head restart")

    old_ids = {n.node_id for n in before.nodes}
    assert not old_ids & {n for n, _ in (await ray_view(scenario)).values()}, "new Ray nodes"
    # They registered without VC resources (GetAllNodeInfo keeps the registered totals on Ray
    # 2.60): what they carry now, rayscale gave them.
    registered = {
        i.instance_id: i.total_resources for i in await scenario.gcs.get_all_node_info(alive_only=True)
    }
    assert not [(p, k) for p in layout for k in registered[p] if k.startswith(RESOURCE_PREFIX)], registered
    restarted = {e.pod for e in scenario.bridge.history("restart")}
    assert restarted == set(layout), f"each worker's raylet lost the GCS and was restarted: {restarted}"

    # Work inside each VC runs on its node in the new session (the old driver belongs to the old session).
    async with RayDriver.start(scenario.bridge.gcs_address, tmp_path / "driver-after.log") as driver:
        for vc, resource in VCS.items():
            marker = tmp_path / f"in-{vc}"
            await driver.call(
                "task", name=f"in-{vc}", marker=str(marker), num_cpus=0, resources={resource: 0.001}
            )
            assert await scenario.pod_of(await scenario.started_on(marker)) == pod_of_vc(layout, vc)
            marker.touch()
    check_nothing_moved(scenario, layout, since, "after work ran in the VCs")
