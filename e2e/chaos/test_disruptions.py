"""The disruption rows of `make chaos`: Kubernetes takes a busy Ray worker's Node away, with a real
Ray through the e2e Ray bridge and `rayscale run` autoscaling every second
(``--disruption-notice taint:rayscale.test/reclaim=30`` configured as a spot-like notice).

Each run makes a RayCluster whose one worker group (``minReplicas: 1``, ``maxReplicas: 2``, 1 CPU
a host) has one replica on kwok Nodes of the test's own, runs a Ray task on each of its hosts
(blocking until the test lets it end), and disrupts the Node of its first host:

- **cordon**: ``spec.unschedulable`` (``kubectl cordon``); the tasks end once the replacement runs;
- **Karpenter**: the taint ``karpenter.sh/disrupted:NoSchedule`` (no termination deadline); the same;
- **spot-like, 30 s**: the configured taint; the task ends as soon as the drain is asked, well
  within the deadline;
- **budget**: a real ``kubectl drain`` (cordon, then evictions retried every 5 s) of a RayCluster
  with ``rayscale.io/disruption-budget: "true"``: the evictions are refused while the task runs;
- **TPU slice host**: a 2-host replica (``numOfHosts: 2``, 4 ``google.com/tpu`` a host, a task
  needing Ray's ``TPU`` on each host), the Node of one host cordoned.

`e2e.chaos.disruption_ledger.DisruptionLedger` checks on every pod and RayCluster event that only
the disrupted pods go, none while its task runs before the deadline, a replica only whole, no pod
created twice and no failed launch counted. Each run records an `Outcome` (suite
``disruption``): the tasks that failed (lost) or ran again elsewhere, the pods deleted, and the
seconds from the notice to the drain asked, to the work's end, to the replacement made and to the
old pods deleted; ``python -m e2e.chaos.results --write-docs`` writes them into
docs/reliability.md ("Disruption runs").

    .venv/bin/python -m pytest e2e/chaos/test_disruptions.py -q -m chaos
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
from bench import provenance
from e2e.chaos.disruption_ledger import DisruptionLedger
from e2e.chaos.rayledger import feeding
from e2e.chaos.results import Outcome
from e2e.harness import NAME, Scenario, group
from hack.localk8s import testcluster
from tests.support.disruption_nodes import FOR, KubectlDrain, drain, evict, own_nodes, pin
from tests.support.operators import AUTOSCALING_EXTRA, Operator, running
from tests.support.polling import Timeout, eventually
from tests.support.ray_tasks import Tasks, cluster_events, in_ray

from rayscale.api.disruption_annotations import DISRUPTION_BUDGET_ANNOTATION
from rayscale.common import labels as L

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(600)]

SUITE = "disruption"
GROUP = "work"
RECLAIM = "rayscale.test/reclaim"  # the spot-like taint, configured with --disruption-notice
SPOT = 30.0  # its seconds
TPU = 4
START = 150.0  # worker pods Running with their Ray nodes, on a busy 2-core machine
SETTLE = 90.0  # rayscale's rounds and the controller's work after a change, kubectl drain's retries


@pytest.fixture
def autoscaling_operator(
    cluster: testcluster.ClusterHandle, namespace: str, raycluster_crd: None, request: pytest.FixtureRequest
) -> Iterator[Operator]:
    """The suite's `rayscale run --mode all`, with the spot-like taint configured."""
    extra = (*AUTOSCALING_EXTRA, "--disruption-notice", f"taint:{RECLAIM}={SPOT:g}")
    yield from running(Operator(cluster, namespace, mode="all", extra=extra), request)


@pytest.fixture
def nodes(cluster: testcluster.ClusterHandle, namespace: str) -> Iterator[list[str]]:
    """Four kwok Nodes with 4 TPU chips each, for this run's worker pods alone."""
    yield from own_nodes(cluster, namespace, 4, tpu=TPU)


@dataclasses.dataclass(frozen=True)
class Row:
    title: str
    disrupt: Callable[[Scenario, testcluster.ClusterHandle, str], AbstractAsyncContextManager[Any]]
    deadline: float | None = None  # the notice's seconds; None: it has none
    hosts: int = 1  # numOfHosts
    budget: bool = False  # rayscale.io/disruption-budget
    release_at_drain: bool = False  # the tasks end when the drain is asked (else once replaced)


async def taint(scenario: Scenario, node: str, key: str) -> None:
    keep = {"key": FOR, "value": scenario.kube.ns, "effect": "NoSchedule"}
    await scenario.kube.core.patch_node(
        node, {"spec": {"taints": [keep, {"key": key, "effect": "NoSchedule"}]}}
    )


@contextlib.asynccontextmanager
async def cordon(scenario: Scenario, cluster: testcluster.ClusterHandle, node: str) -> AsyncIterator[None]:
    await scenario.kube.core.patch_node(node, {"spec": {"unschedulable": True}})
    yield


@contextlib.asynccontextmanager
async def karpenter(scenario: Scenario, cluster: testcluster.ClusterHandle, node: str) -> AsyncIterator[None]:
    await taint(scenario, node, "karpenter.sh/disrupted")
    yield


@contextlib.asynccontextmanager
async def spot(scenario: Scenario, cluster: testcluster.ClusterHandle, node: str) -> AsyncIterator[None]:
    await taint(scenario, node, RECLAIM)
    yield


def kubectl_drain(scenario: Scenario, cluster: testcluster.ClusterHandle, node: str) -> Any:
    return drain(cluster, node, scenario.tmp / "kubectl-drain.log", give_up=SETTLE * 3)


ROWS = {
    "cordon": Row("node cordoned (kubectl cordon), its worker busy", cordon),
    "karpenter": Row(
        "Karpenter's taint karpenter.sh/disrupted:NoSchedule (no deadline), its worker busy", karpenter
    ),
    "spot": Row(
        f"spot-like taint with a {SPOT:g} s deadline (--disruption-notice), its worker busy; the task ends"
        " within the deadline",
        spot,
        deadline=SPOT,
        release_at_drain=True,
    ),
    "budget": Row(
        "kubectl drain (cordon, then evictions) with rayscale.io/disruption-budget, its worker busy",
        kubectl_drain,
        budget=True,
    ),
    "tpu": Row("TPU slice host's node cordoned, a 2-host replica, both hosts busy", cordon, hosts=2),
}


def worker_group(row: Row, namespace: str) -> dict[str, Any]:
    spec = group(GROUP, replicas=1, min_replicas=1, max_replicas=2, num_cpus=1, hosts=row.hosts)
    if row.hosts > 1:
        for kind in ("requests", "limits"):
            spec["template"]["spec"]["containers"][0]["resources"][kind]["google.com/tpu"] = TPU
    return dict(pin(spec, namespace))


@dataclasses.dataclass
class Run:
    scenario: Scenario
    row: Row
    ledger: DisruptionLedger
    tasks: Tasks
    old: list[str]
    detail: dict[str, Any] = dataclasses.field(default_factory=dict)
    problems: list[str] = dataclasses.field(default_factory=list)

    def since(self) -> float:
        assert self.ledger.noticed is not None
        return round(time.monotonic() - self.ledger.noticed, 1)

    async def start_tasks(self) -> None:
        """A task on each host of the replica (Ray's TPU on a slice's hosts)."""
        state = await self.scenario.state()
        pod_of = {n.node_id: n.instance_id for n in state.nodes if n.alive and n.instance_id}
        options: dict[str, Any] = {"num_cpus": 1}
        if self.row.hosts > 1:
            options["resources"] = {"TPU": TPU}
        ran = [await self.tasks.start(f"t{i}", timeout=START, **options) for i in range(self.row.hosts)]
        self.detail["tasks_on"] = sorted(pod_of.get(node, node) for node in ran)
        if sorted(pod_of.get(node, "") for node in ran) != sorted(self.old):
            self.problems.append(f"the tasks did not run one on each host: {self.detail['tasks_on']}")

    def release(self) -> None:
        for pod in self.old:
            self.ledger.idle(pod)
        self.tasks.release()
        self.detail["work_ended_s"] = self.since()

    async def replaced(self) -> list[Any]:
        return await in_ray(self.scenario.kube, self.scenario.bridge, NAME, self.row.hosts, exclude=self.old)

    async def old_gone(self) -> bool:
        live = {p.metadata.name for p in await self.scenario.kube.workers(NAME, live=True)}
        return not live & set(self.old)


async def watch_drain(run: Run, kubectl: KubectlDrain | None) -> None:
    """After the notice: the drain asked, the work let end (at the drain or once replaced), the
    old pods deleted, the replacement in Ray."""
    kube = run.scenario.kube
    await eventually(lambda: cluster_events(kube, NAME, "DisruptionDrain"), timeout=SETTLE, interval=0.25)
    run.detail["drain_asked_s"] = run.since()
    if not run.row.release_at_drain:
        await eventually(run.replaced, timeout=START, interval=0.5, message="the replacement in Ray")
    if kubectl is not None:  # the Eviction API's answer while the task runs, as kubectl drain gets it
        status, body = await evict(kube.core, kube.ns, run.old[0])
        run.detail["eviction_while_busy"] = f"{status} {body}"
        if status != 429:
            run.problems.append(f"an eviction of the busy worker was not refused: {status} {body}")
    run.release()
    outcomes = await eventually(run.tasks.ended, timeout=SETTLE, message="the tasks ended")
    tally = run.tasks.tally(outcomes)
    run.detail.update(tally)
    if tally["failed"]:
        run.problems.append(f"task lost: {outcomes}")
    if tally["run_again"]:
        run.problems.append(f"task run again elsewhere though it ended before any deadline: {outcomes}")
    await eventually(run.old_gone, timeout=SETTLE, interval=0.25, message="the old pods deleted")
    await eventually(run.replaced, timeout=START, interval=0.5, message="the replacement in Ray")
    run.detail["converged_s"] = run.since()
    if kubectl is not None:
        await eventually(
            lambda: kubectl.exit_code() is not None, timeout=SETTLE, message="kubectl drain done"
        )
        if kubectl.exit_code() != 0:
            run.problems.append(f"kubectl drain failed ({kubectl.exit_code()}): {kubectl.output()[-2000:]}")


async def disruption_run(scenario: Scenario, cluster: testcluster.ClusterHandle, key: str) -> Outcome:
    row = ROWS[key]
    annotations = {DISRUPTION_BUDGET_ANNOTATION: "true"} if row.budget else None
    await scenario.create([worker_group(row, scenario.kube.ns)], idle_timeout=600, annotations=annotations)
    if row.budget:

        async def budgets() -> bool:
            found = await scenario.kube.condition(NAME, "DisruptionBudgets")
            return found is not None and found["reason"] == "BudgetsInPlace"

        await eventually(budgets, timeout=SETTLE, message="the budgets in place")
    hosts = await eventually(lambda: in_ray(scenario.kube, scenario.bridge, NAME, row.hosts), timeout=START)
    hosts.sort(key=lambda p: int(p.metadata.labels.get(L.HOST_INDEX, 0)))
    ledger = DisruptionLedger(NAME)
    run = Run(scenario, row, ledger, Tasks(scenario.ray, scenario.tmp), [p.metadata.name for p in hosts])
    converged: float | None = None
    async with feeding(ledger, scenario.kube.core.api_client, scenario.kube.ns):
        await run.start_tasks()
        ledger.notice(run.old, run.old, row.deadline)
        async with row.disrupt(scenario, cluster, hosts[0].spec.node_name) as kubectl:
            try:
                await watch_drain(run, kubectl)
                converged = run.detail["converged_s"]
            except Timeout as exc:
                run.problems.append(f"not converged: {exc}")
                run.tasks.release()
        figures = ledger.figures()
    if not figures["replaced_before_removed"]:
        run.problems.append("the replacement was not made before the leaving pods went")
    detail = {**run.detail, **figures, "deadline_s": row.deadline, "hosts": row.hosts}
    detail["drain_events"] = [e.message for e in await cluster_events(scenario.kube, NAME, "DisruptionDrain")]
    detail["delete_events"] = [
        e.message for e in await cluster_events(scenario.kube, NAME, "DisruptionDelete")
    ]
    recorded = provenance.end(provenance.begin(provenance.command("pytest")))  # not the venv's path
    outcome = Outcome(SUITE, row.title, tuple(ledger.violations + run.problems), converged, detail, recorded)
    outcome.record()
    print(f"outcome: {json.dumps(dataclasses.asdict(outcome))}")
    return outcome


@pytest.mark.parametrize("key", list(ROWS))
async def test_disruption(
    scenario: Scenario, cluster: testcluster.ClusterHandle, nodes: list[str], key: str
) -> None:
    outcome = await disruption_run(scenario, cluster, key)
    assert not outcome.violations, f"{outcome.fault}: {list(outcome.violations)}\n{outcome.detail}"
    assert outcome.converged_seconds is not None
