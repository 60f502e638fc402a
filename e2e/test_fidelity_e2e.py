"""Ray's own view of a rayscale cluster (issue 13), proved with a real Ray.

- The head pod is deleted: a new Ray head (a new session) comes up on the same GCS port, the
  workers' raylets lose the old GCS and are restarted by the bridge (a kubelet would restart the
  container): no worker is removed as a failed launch and nothing backs off, even with a 5 s
  provisioning limit.
- ``ray status`` on the real head lists the nodes rayscale is launching under "Pending:", and a
  launch that timed out under "Recent failures:".
- With Ray's ``RAY_enable_infeasible_task_early_exit`` a GPU task on a CPU-only cluster fails
  as soon as rayscale reports it infeasible, instead of waiting forever.
- A placement group's bundle label selector and a task's fallback label selector each scale the
  group whose Ray nodes carry the label.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
from e2e.harness import NAME, RAY_JOIN, SCALE_UP, Scenario, group, status_section
from tests.support.polling import eventually

from rayscale.ray.model import ClusterState

pytestmark = pytest.mark.timeout(600)

PROVISION_ANNOTATION = "rayscale.io/max-node-provision-seconds"
HOLD = 30.0  # seconds the head-restart scenario watches that nothing is removed once the head is back
RAYLET_GIVES_UP = (
    60.0  # Ray's gcs_rpc_server_reconnect_timeout_s: a raylet exits this long after its GCS went
)
INFEASIBLE_DEADLINE = 20.0  # one autoscaler round is 1 s here; Ray reports its load about every second


# ---------------------------------------------------------------------------- head restart


async def _removals(scenario: Scenario, workers: Sequence[str]) -> list[str]:
    """What must not happen while the head restarts: workers deleted or replaced, a group backing
    off, a node removed as a failed launch."""
    found = [f"worker pod {w} deleted" for w in workers if scenario.pods.pods[w].deleting is not None]
    found += [f"new worker pod {p}" for p in scenario.pods.pods if p not in workers]
    found += [f"BackingOff: {m}" for m in await scenario.events("BackingOff")]
    found += [f"ScaledDown: {m}" for m in await scenario.events("ScaledDown") if "LAUNCH_FAILED" in m]
    return found


def _alive_in(state: ClusterState | None, session: str, workers: Sequence[str]) -> bool:
    if state is None or state.session_name == session:
        return False
    nodes = [state.node_by_instance(w) for w in workers]
    return all(node is not None and node.alive for node in nodes)


async def test_head_restart_removes_no_worker(scenario: Scenario) -> None:
    """Delete the head pod of a cluster with 2 running workers and a 5 s provisioning limit: the
    workers' pods Run without Ray nodes for over a minute (until their raylets give up on the old
    GCS and restart), and none of them may be taken for a launch that failed."""
    await scenario.create([group("cpu-group", replicas=2, min_replicas=2, max_replicas=3)], idle_timeout=600)
    workers = await scenario.wait_workers(2, "cpu-group")
    # Only now: the workers took longer than 5 s to join, which is no news here.
    await scenario.annotate(PROVISION_ANNOTATION, "5")
    before = await scenario.state()
    [head] = [
        p.metadata.name
        for p in await scenario.kube.pods(NAME)
        if p.metadata.labels.get("ray.io/node-type") == "head"
    ]

    deleted = time.monotonic()
    await scenario.kube.delete_pod(head)

    async def head_back() -> bool:
        if problems := await _removals(scenario, workers):
            raise RuntimeError(f"while the head restarts: {problems}")
        return bool(scenario.bridge.history("head-stopped")) and scenario.bridge.head_running()

    await eventually(head_back, timeout=SCALE_UP, interval=0.5, message="a new Ray head for the new head pod")
    back = time.monotonic()
    scenario.record("head pod deleted -> new Ray head", back - deleted, 0)

    async def workers_rejoined() -> bool:
        if problems := await _removals(scenario, workers):
            raise RuntimeError(f"after the head restart: {problems}")
        return _alive_in(await scenario.state_or_none(), before.session_name, workers)

    await eventually(
        workers_rejoined,
        timeout=RAYLET_GIVES_UP + 2 * RAY_JOIN,
        interval=1.0,
        message=f"{workers} alive in the new Ray session",
    )
    scenario.record(
        "new Ray head -> workers alive again", time.monotonic() - back, 2, "raylets give up after 60 s"
    )

    async def nothing_removed() -> bool:
        if problems := await _removals(scenario, workers):
            raise AssertionError(f"after the workers rejoined: {problems}")
        return _alive_in(await scenario.state_or_none(), before.session_name, workers)

    await scenario.holds(nothing_removed, HOLD, "the workers' Ray nodes went away again")
    assert await scenario.replicas() == {"cpu-group": 2}
    assert scenario.pods.live("cpu-group") == workers
    restarted = {e.pod for e in scenario.bridge.history("restart")}
    assert restarted == set(workers), f"each worker lost its raylet and was restarted: {restarted}"
    after = await scenario.state()
    old_ids = {n.node_id for n in before.nodes}
    assert not old_ids & {n.node_id for n in after.nodes if n.alive}, "the old session's nodes are gone"


# ---------------------------------------------------------------------------- ray status


async def test_ray_status_lists_pending_nodes(scenario: Scenario) -> None:
    """Scale-up from 0 with slow-joining nodes: `ray status` lists them under "Pending:" until they join."""
    await scenario.create([group("slow-group", max_replicas=2, init_sleep=20)], idle_timeout=60)
    demand = time.monotonic()
    for name in ("a1", "a2"):
        await scenario.ray_call("actor", name=name, num_cpus=1)
    pods = await scenario.wait_workers(2, "slow-group")

    seen: list[str] = []

    async def pending_listed() -> list[str] | None:
        state = await scenario.state()
        joined = [p for p in pods if (node := state.node_by_instance(p)) is not None and node.alive]
        text = await scenario.ray_status()
        seen[:] = status_section(text, "Pending:")
        if any("slow-group" in line for line in seen):
            return seen
        if len(joined) == len(pods):
            raise RuntimeError(f"every node joined and `ray status` never listed one as pending:\n{text}")
        return None

    lines: list[str] = await eventually(
        pending_listed, timeout=SCALE_UP, interval=0.5, message="slow-group pending"
    )
    scenario.record(
        "demand -> `ray status` lists pending nodes", time.monotonic() - demand, 2, "; ".join(lines)
    )

    await scenario.scale_up(demand, 2, "slow-group", detail="with a 20s init-sleep")

    async def no_longer_pending() -> bool:
        return not any(
            "slow-group" in line for line in status_section(await scenario.ray_status(), "Pending:")
        )

    await eventually(
        no_longer_pending, timeout=60, interval=0.5, message="no slow-group node pending once they joined"
    )


async def test_ray_status_shows_a_failed_launch(scenario: Scenario) -> None:
    """A group whose pods can never be scheduled, a 5 s provisioning limit: the launch fails, and
    `ray status` says so under "Recent failures:"."""
    nowhere = group(
        "nowhere-group",
        max_replicas=1,
        num_cpus=0,
        resources={"Nowhere": 1},
        node_selector={"rayscale.io/node-pool": "nowhere"},
    )
    await scenario.create([nowhere], idle_timeout=60, annotations={PROVISION_ANNOTATION: "5"})
    demand = time.monotonic()
    await scenario.ray_call("actor", name="nowhere", num_cpus=0, resources={"Nowhere": 1})
    [pod] = await scenario.wait_workers(1, "nowhere-group")

    async def removed() -> bool:
        return scenario.pods.pods[pod].deleting is not None

    await eventually(removed, timeout=SCALE_UP, interval=0.5, message=f"{pod} removed after the 5 s limit")

    async def failure_listed() -> list[str] | None:
        lines = status_section(await scenario.ray_status(), "Recent failures:")
        return [line for line in lines if line.startswith("nowhere-group: LaunchFailed")] or None

    lines: list[str] = await eventually(
        failure_listed, timeout=60, interval=0.5, message="the failed launch in `ray status`"
    )
    scenario.record("demand -> `ray status` shows the failed launch", time.monotonic() - demand, 1, lines[0])
    assert await scenario.events("BackingOff"), "the group backs off after a failed launch"


# ---------------------------------------------------------------------------- infeasible task


@pytest.mark.e2e_smoke
@pytest.mark.ray_head(env={"RAY_enable_infeasible_task_early_exit": "true"})
async def test_infeasible_task_fails_fast(scenario: Scenario) -> None:
    """A GPU task on a CPU-only cluster, with Ray's early exit on: it fails within about one
    autoscaler round, once rayscale reports it infeasible to Ray (without the report it waits
    forever)."""
    await scenario.create([group("cpu-group", max_replicas=2)], idle_timeout=60)
    submitted = time.monotonic()
    await scenario.ray_call("task", name="gpu", marker=str(scenario.tmp / "gpu"), num_cpus=1, num_gpus=1)

    async def finished() -> dict[str, str] | None:
        outcome: dict[str, str] = await scenario.ray_call("task_outcome", name="gpu")
        return None if outcome["state"] == "running" else outcome

    outcome: dict[str, str] = await eventually(
        finished, timeout=INFEASIBLE_DEADLINE, interval=0.2, message="the infeasible GPU task fails"
    )
    took = time.monotonic() - submitted
    scenario.record("infeasible task submitted -> it fails", took, 0, outcome.get("error", "")[:120])
    print(f"the infeasible GPU task failed {took:.1f}s after it was submitted: {outcome}")
    assert outcome["state"] == "failed", outcome
    assert "unschedulable" in outcome["error"].lower() or "infeasible" in outcome["error"].lower(), outcome
    assert not scenario.pods.pods, "no worker launched for a task no group can run"


# ---------------------------------------------------------------------------- label selectors


async def _only_group(scenario: Scenario, wanted: str, count: int, unwanted: str) -> list[str]:
    """`count` live pods in group `wanted`, failing at once if group `unwanted` gets any pod."""

    async def check() -> bool:
        if wrong := [p for p, t in scenario.pods.pods.items() if t.group == unwanted]:
            raise RuntimeError(f"{unwanted} scaled up: {wrong}")
        return len(scenario.pods.live(wanted)) == count

    await eventually(check, timeout=SCALE_UP, interval=0.5, message=f"{count} pods in {wanted}")
    return scenario.pods.live(wanted)


async def test_label_selectors_scale_the_labelled_group(scenario: Scenario) -> None:
    """Two CPU groups, Ray node labels zone=a and zone=b (zone-a first, so a scheduler that drops
    the selectors picks it). A placement group whose bundle asks zone=b scales zone-b and is placed
    there; then a task asking zone=c with a fallback to zone=b scales zone-b again and runs there."""
    await scenario.create(
        [
            group("zone-a-group", max_replicas=2, labels={"zone": "a"}),
            group("zone-b-group", max_replicas=2, labels={"zone": "b"}),
        ],
        idle_timeout=60,
    )

    demand = time.monotonic()
    await scenario.ray_call(
        "pg", name="pg-b", bundles=[{"CPU": 1}], strategy="PACK", bundle_label_selector=[{"zone": "b"}]
    )
    await _only_group(scenario, "zone-b-group", 1, "zone-a-group")
    [b1] = await scenario.scale_up(demand, 1, "zone-b-group", detail="bundle label selector")
    assert await scenario.pg_nodes("pg-b") == {"0": b1}

    marker = scenario.tmp / "fallback"
    demand = time.monotonic()
    await scenario.ray_call(
        "task",
        name="fallback",
        marker=str(marker),
        num_cpus=1,
        label_selector={"zone": "c"},
        fallback_strategy=[{"label_selector": {"zone": "b"}}],
    )
    await _only_group(scenario, "zone-b-group", 2, "zone-a-group")
    pods = await scenario.scale_up(demand, 2, "zone-b-group", before=[b1], detail="fallback label selector")
    started = marker.with_name(marker.name + ".started")
    node: str = await eventually(
        lambda: started.exists() and started.read_text(), timeout=RAY_JOIN, message="the fallback task runs"
    )
    ran_on = await scenario.pod_of(node)
    assert ran_on in pods, f"the task ran on {ran_on}, not on a zone-b pod {pods}"
    assert ran_on != b1, f"the task ran on {ran_on}, whose CPU the placement group holds"
    marker.touch()
    assert await eventually(lambda: scenario.ray_call("task_result", name="fallback"), timeout=60) == node
    assert await scenario.replicas() == {"zone-a-group": 0, "zone-b-group": 2}
