"""The Ray half of `make chaos`: Ray itself fails while a cluster scales under real Ray demand.

Each test runs a real Ray through the e2e Ray bridge (a real head, one real ``ray start`` worker
per Running worker pod), `rayscale run` autoscaling every second, and a Ray driver whose demand
is detached actors of 1 CPU on 1-CPU workers (``max_restarts=-1``: an actor whose node dies is
started again elsewhere, so the demand outlives a lost node). The group ``cpu`` has 0..4 workers
and an idle timeout of 15 s. The fault comes while the cluster scales:

- **up**: 3 actors asked of an empty group; the fault comes once the first one runs (one worker
  busy, the others being created or joining);
- **down**: 3 actors run on 3 workers; 2 are killed and the fault comes once their nodes have
  been idle for half the idle timeout (they are about to be removed).

Faults: the head pod deleted, so the bridge restarts the Ray head, without GCS fault tolerance (a
new Ray session: the driver and its actors are lost, the workers' raylets give up on the old GCS
after 60 s and are restarted; a new driver asks for the same actors again) and with it (an
external Redis: the actors and nodes survive); one busy worker's raylet killed (SIGKILL: its Ray
node dies while its pod runs); the head's ``gcs_server`` frozen 15 s (SIGSTOP: Ray's state is
unknown). `e2e.chaos.rayledger.RayLedger` checks the invariants on every pod and RayCluster event
as it arrives (see its docstring for their exact terms): no busy node drained or removed, no
healthy worker removed, nothing removed while Ray's state is unknown, no pod created twice for a
replica slot, no failed launch counted. After the fault each test waits for convergence, exactly
the workers the demand needs, all Running, each with a live Ray node running one actor, within
`CONVERGE` s of the fault's end (timed), checks that it holds for `HOLD` s, then kills the
remaining actors and waits for the group to be scaled down to 0 (every removal there checked
too). Each records an `e2e.chaos.results.Outcome` (suite "ray") and fails on any violation.

    .venv/bin/python -m pytest e2e/chaos/test_ray_faults.py -q -m chaos -k raylet

These tests are marked ``chaos`` only (not ``e2e``): `make chaos` runs them, `make e2e` does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from e2e.chaos.rayledger import BusyTracker, RayLedger, feeding
from e2e.chaos.results import Outcome
from e2e.harness import NAME, RAY_JOIN, SCALE_UP, Scenario, group
from e2e.raybridge import rayproc
from e2e.raybridge.bridge import RayBridge
from e2e.raybridge.driver import RayDriver
from hack.localk8s import launcher, testcluster
from tests.support.polling import Timeout, eventually

from rayscale.ray.model import ClusterState, NodeStatus

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(900)]

SUITE = "ray"
GROUP = "cpu"
WORKERS = 3  # actors (and so workers) the demand asks for
MAX_WORKERS = 4  # one more than needed: a surplus pod is possible, and would be seen
IDLE = 15  # the group's idle timeout, seconds
FROZEN = 15.0  # how long the GCS is frozen
HEAD_BACK = 120.0  # a new Ray head runs this long after the head pod is deleted, at most
# Convergence after the fault's end, at most: a head restart without GCS FT needs the workers'
# raylets to give up on the old GCS (60 s), the bridge to restart them (5 s) and Ray to register
# them one at a time on 2 cores.
CONVERGE = 180.0
HOLD = 5.0  # the converged state must last this long
# Scale-down to 0 after the demand ends, at most: the idle timeout, and after a head restart
# rayscale's --head-restart-grace-seconds (120 s) during which it removes nothing.
SCALE_DOWN = IDLE + 150.0


# ---------------------------------------------------------------------------- Redis (GCS FT)


class Redis:
    """A private ``redis-server`` (no persistence) for Ray's GCS fault tolerance."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = launcher.free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> Redis:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("GCS fault tolerance needs an external Redis: apt-get install redis-server")
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        with (self.directory / "redis.log").open("ab") as log:
            argv, preexec = launcher.dying_with_parent([*args, "--dir", str(self.directory)])
            self.process = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=preexec,  # dies with the test process
            )
        rayproc.wait_for_port("127.0.0.1", self.port, timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            launcher.end(self.process, 10)


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[Redis]:
    with Redis(tmp_path / "redis") as running:
        yield running


@pytest.fixture
def bridge(
    cluster: testcluster.ClusterHandle, namespace: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[RayBridge]:
    """e2e/conftest.py's bridge; a test that asks for `redis` gets a head with GCS fault tolerance
    (``RAY_REDIS_ADDRESS``), and every head the bridge restarts finds the same Redis."""
    head: dict[str, Any] = {"num_cpus": 0}
    if "redis" in request.fixturenames:
        store: Redis = request.getfixturevalue("redis")
        head["env"] = {"RAY_REDIS_ADDRESS": store.address, "RAY_external_storage_namespace": namespace}
    with RayBridge(cluster.kubeconfig, namespace, NAME, head=head, log_dir=tmp_path / "ray") as running:
        yield running
        problems = running.errors()
    assert not problems, f"the Ray bridge failed: {problems}"


# ---------------------------------------------------------------------------- processes


def descendant(root: int, comm: str) -> int:
    """The pid of the process named `comm` (e.g. ``raylet``) among the descendants of `root`."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            text = Path(f"/proc/{entry}/stat").read_text()
            names[int(entry)] = text[text.index("(") + 1 : text.rindex(")")]
            parents[int(entry)] = int(text[text.rindex(")") + 2 :].split()[1])
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        children = [p for p, parent in parents.items() if parent == pid]
        found += [p for p in children if names.get(p) == comm]
        todo += children
    if len(found) != 1:
        raise LookupError(f"{len(found)} processes named {comm} under pid {root}")
    return found[0]


# ---------------------------------------------------------------------------- one run


@dataclass
class Chaos:
    scenario: Scenario
    ledger: RayLedger
    tracker: BusyTracker
    driver: RayDriver
    drivers: contextlib.AsyncExitStack
    fault_started: float = 0.0
    fault_ended: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)

    async def demand(self, count: int, prefix: str) -> None:
        """`count` more detached actors of 1 CPU, restarted elsewhere when their node dies."""
        self.ledger.need(len(self.tracker.wanted()) + count)
        for i in range(count):
            name = f"{prefix}-{i}"
            self.tracker.add(name)
            await self.driver.call("actor", name=name, num_cpus=1, lifetime="detached", max_restarts=-1)

    async def release(self, names: list[str]) -> None:
        """The demand goes down: these actors are killed."""
        self.ledger.release()
        for name in names:
            self.tracker.release(name)
            await self.driver.call("kill", name=name)

    def lose(self, names: list[str]) -> None:
        """These actors went with their Ray session: nobody wants them any more (not a release)."""
        for name in names:
            self.tracker.release(name)

    async def new_driver(self, label: str) -> None:
        log = self.scenario.tmp / f"driver-{label}.log"
        self.driver = await self.drivers.enter_async_context(
            RayDriver.start(self.scenario.bridge.gcs_address, log)
        )

    def busy_pods(self) -> dict[str, str]:
        return {pod: name for name, pod in self.tracker.running().items()}

    async def converged(self) -> bool:
        """Exactly the workers the demand needs, all Running, each with a live Ray node that runs
        one of the actors, and the group's replicas saying as much."""
        wanted = self.tracker.wanted()
        live = self.ledger.live()
        if len(live) != len(wanted) or any(r.phase != "Running" for r in live.values()):
            return False
        if sum(self.ledger.replicas.values()) != len(wanted):
            return False
        state = await self.scenario.state_or_none()
        if state is None:
            return False
        alive = {n.instance_id for n in state.nodes if n.alive}
        running = self.tracker.running()
        return (
            set(live) <= alive
            and sorted(running) == wanted
            and sorted(running.values()) == sorted(live)  # one actor a pod, every pod busy
        )

    def inject(self) -> None:
        self.fault_started = time.monotonic()

    def ended(self) -> None:
        self.fault_ended = time.monotonic()


@contextlib.asynccontextmanager
async def chaos(scenario: Scenario) -> AsyncIterator[Chaos]:
    """An empty group ``cpu`` (0..4 workers, 15 s idle timeout), the ledger fed by both watches,
    the busy tracker polling the GCS."""
    await scenario.create([group(GROUP, max_replicas=MAX_WORKERS, idle_timeout=IDLE)], idle_timeout=IDLE)
    ledger = RayLedger(NAME, IDLE)
    bridge = scenario.bridge
    tracker = BusyTracker(
        ledger, bridge.gcs_address, lambda pod: [e.at for e in bridge.history("exited", pod)]
    )
    async with (
        feeding(ledger, scenario.kube.core.api_client, scenario.kube.ns),
        tracker.tracking(),
        contextlib.AsyncExitStack() as drivers,
    ):
        yield Chaos(scenario, ledger, tracker, scenario.ray, drivers)


async def scaling_up(run: Chaos) -> None:
    """3 actors asked; returns once the first runs (one worker busy, the rest on the way)."""
    await run.demand(WORKERS, "up")
    await eventually(
        run.busy_pods, timeout=SCALE_UP + RAY_JOIN, interval=0.25, message="the first actor running"
    )
    run.detail["at the fault"] = f"{len(run.busy_pods())} busy of {len(run.ledger.live())} worker pods"


async def scaling_down(run: Chaos) -> None:
    """3 actors on 3 workers; 2 killed; returns once their nodes are idle for half the idle timeout."""
    await run.demand(WORKERS, "down")
    await eventually(run.converged, timeout=SCALE_UP + 3 * RAY_JOIN, interval=0.5, message="3 busy workers")
    keep, *go = run.tracker.wanted()
    idle_pods = [pod for name, pod in run.tracker.running().items() if name in go]
    await run.release(go)

    async def half_idle() -> bool:
        state = await run.scenario.state()
        nodes = [state.node_by_instance(p) for p in idle_pods]
        return all(
            n is not None and n.status is NodeStatus.IDLE and n.idle_seconds >= IDLE / 2 for n in nodes
        )

    await eventually(half_idle, timeout=IDLE + 30, interval=0.25, message=f"{idle_pods} idle for {IDLE / 2}s")
    run.detail["at the fault"] = f"{keep} busy, {idle_pods} idle for {IDLE / 2:g}s"


PHASES: dict[str, Callable[[Chaos], Awaitable[None]]] = {"up": scaling_up, "down": scaling_down}
WHAT = {"up": "scaling up 0 -> 3 workers", "down": "scaling down 3 -> 1 worker"}


async def settle(
    run: Chaos, title: str, at_converged: Callable[[], Awaitable[None]] | None = None
) -> Outcome:
    """After the fault: converge (timed from its end), hold, scale down to 0; the run's Outcome.
    `at_converged` runs once converged, before the demand ends."""
    violations: list[str] = []
    converged: float | None = None
    try:
        await eventually(run.converged, timeout=CONVERGE, interval=0.5, message="converged")
        converged = round(time.monotonic() - run.fault_ended, 1)
        await run.scenario.holds(run.converged, HOLD, "the converged state did not last")
    except (Timeout, AssertionError) as exc:
        wanted = len(run.tracker.wanted())
        violations.append(
            f"not converged to {wanted} busy workers within {CONVERGE:.0f}s of the fault's end: {exc}; "
            f"live pods {sorted(run.ledger.live())}, actors running {run.tracker.running()}"
        )
    if converged is not None:
        if at_converged is not None:
            await at_converged()
        await run.release(run.tracker.wanted())

        async def scaled_down() -> bool:
            return not run.ledger.live() and sum(run.ledger.replicas.values()) == 0

        try:
            await eventually(scaled_down, timeout=SCALE_DOWN, interval=0.5, message="scaled down to 0")
        except Timeout:
            violations.append(f"not scaled down to 0 within {SCALE_DOWN:.0f}s: {sorted(run.ledger.live())}")
    failed = [f"failed launch counted: BackingOff: {m}" for m in await run.scenario.events("BackingOff")]
    failed += [
        f"failed launch counted: ScaledDown: {m}"
        for m in await run.scenario.events("ScaledDown")
        if "LAUNCH_FAILED" in m
    ]
    detail = {
        **run.detail,
        **run.ledger.summary(),
        "fault_seconds": round(run.fault_ended - run.fault_started, 1),
        "gcs_views": run.tracker.views,
        "ray_nodes_exited": sorted({e.pod for e in run.scenario.bridge.history("exited")}),
        "ray_workers_restarted": sorted({e.pod for e in run.scenario.bridge.history("restart")}),
        "ray_node_died_events": await run.scenario.events("RayNodeDied"),
        "scaled_up_events": await run.scenario.events("ScaledUp"),
        "unmet_demand_events": await run.scenario.events("UnmetDemand"),
    }
    outcome = Outcome(SUITE, title, tuple(run.ledger.violations + failed + violations), converged, detail)
    outcome.record()
    print(f"outcome: {json.dumps(dataclasses.asdict(outcome))}")  # also in the test's captured output
    return outcome


def ray_view(state: ClusterState | None) -> list[str]:
    """Ray's nodes (pod, status, CPUs free/total) and pending demand, for an outcome's detail."""
    if state is None:
        return ["the GCS did not answer"]
    found = [
        f"{n.instance_id or 'head'}: {n.status.value} CPU {n.available_resources.get('CPU', 0):g}"
        f"/{n.total_resources.get('CPU', 0):g}"
        for n in state.nodes
        if n.alive
    ]
    return found + [f"pending {d.count} x {dict(d.request.resources)}" for d in state.pending_requests]


def check(outcome: Outcome) -> None:
    assert not outcome.violations, f"{outcome.fault}: {list(outcome.violations)}\n{outcome.detail}"
    assert outcome.converged_seconds is not None


# ---------------------------------------------------------------------------- the faults


async def delete_head(run: Chaos) -> None:
    """Delete the head pod; returns once the bridge runs a new Ray head for the new head pod."""
    scenario = run.scenario
    [head] = [p.metadata.name for p in await scenario.kube.pods(NAME, group="headgroup", live=True)]
    run.inject()
    await scenario.kube.delete_pod(head)

    def head_back() -> bool:
        started = [e for e in scenario.bridge.history("head-started") if e.at > run.fault_started]
        return bool(started) and scenario.bridge.head_running()

    await eventually(head_back, timeout=HEAD_BACK, interval=0.25, message="a new Ray head")
    run.ended()


async def test_head_restart_without_gcs_ft(scenario: Scenario) -> None:
    """No GCS fault tolerance: a new Ray session. The driver (attached to the head's raylet) and
    its actors are gone; a new driver asks for the same 3 actors. Every worker pod must be kept
    (their raylets come back within about 65 s) and none added: the same 3 pods serve the new
    demand."""
    async with chaos(scenario) as run:
        await scaling_up(run)
        before = (await scenario.state()).session_name
        lost = run.tracker.wanted()
        await delete_head(run)
        run.lose(lost)
        await run.new_driver("after-restart")
        await run.demand(WORKERS, "again")
        run.detail["new session"] = (await scenario.state()).session_name != before
        outcome = await settle(run, f"Ray head restarted without GCS fault tolerance, {WHAT['up']}")
    check(outcome)
    assert outcome.detail["new session"], "the head restart made a new Ray session"


async def test_head_restart_with_gcs_ft(scenario: Scenario, redis: Redis) -> None:
    """GCS fault tolerance (the head's GCS keeps its state in a private Redis): the new head
    recovers the session, the workers' raylets reconnect, the detached actors keep running on
    their nodes. Nothing may be removed or added."""
    async with chaos(scenario) as run:
        await scaling_up(run)
        before = await scenario.state()
        old_nodes = {n.instance_id: n.node_id for n in before.nodes if n.alive and n.instance_id}
        await delete_head(run)
        await run.new_driver("after-restart")  # the first was attached to the old head's raylet
        seen: list[ClusterState] = []

        async def look() -> None:
            seen.append(await scenario.state())

        title = f"Ray head restarted with GCS fault tolerance (Redis), {WHAT['up']}"
        outcome = await settle(run, title, look)
    check(outcome)
    # That GCS fault tolerance was really at work: the same session, the workers' nodes alive.
    [after] = seen
    assert after.session_name == before.session_name, "GCS fault tolerance kept the Ray session"
    alive = {n.node_id for n in after.nodes if n.alive}
    assert set(old_nodes.values()) <= alive, f"the workers' Ray nodes survived: {old_nodes}, {after.nodes}"
    assert not scenario.bridge.history("exited"), "no worker's raylet gave up on the GCS"


@pytest.mark.parametrize("phase", ["up", "down"])
async def test_raylet_killed(scenario: Scenario, phase: str) -> None:
    """SIGKILL of a busy worker's raylet: its Ray node dies while its pod runs, its actor starts
    again elsewhere. rayscale may replace the pod (NODE_DEAD) or see the node come back in the same
    pod (the bridge restarts the container), but may not take it for a failed launch nor remove
    anything else."""
    async with chaos(scenario) as run:
        await PHASES[phase](run)
        [pod, *_] = sorted(run.busy_pods())
        raylet = descendant(scenario.bridge.workers()[pod].pid, "raylet")
        run.ledger.kill(pod)
        run.inject()
        os.kill(raylet, signal.SIGKILL)
        run.ended()
        run.detail["raylet killed"] = pod
        outcome = await settle(run, f"raylet SIGKILL on a busy worker, {WHAT[phase]}")
    check(outcome)


@pytest.mark.parametrize("phase", ["up", "down"])
async def test_gcs_unreachable(scenario: Scenario, phase: str) -> None:
    """The head's gcs_server frozen 15 s (SIGSTOP), then resumed: while Ray's state is unknown no
    worker may be removed (when scaling down, the idle workers' timeout runs out inside the
    freeze); afterwards the cluster converges."""
    async with chaos(scenario) as run:
        await PHASES[phase](run)
        head = scenario.bridge.head
        assert head is not None
        gcs = descendant(head.pid, "gcs_server")
        run.inject()
        run.ledger.blind_from()
        os.kill(gcs, signal.SIGSTOP)
        try:
            await asyncio.sleep(FROZEN)  # the fault itself
        finally:
            os.kill(gcs, signal.SIGCONT)
            run.ledger.blind_until()
            run.ended()
        run.detail["ray right after the fault"] = ray_view(await scenario.state_or_none())
        outcome = await settle(run, f"GCS unreachable {FROZEN:g} s (gcs_server SIGSTOP), {WHAT[phase]}")
    check(outcome)
