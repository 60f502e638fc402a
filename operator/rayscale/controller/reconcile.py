"""Plan one reconcile of one RayCluster, pure over a snapshot.

The only state it touches is the in-memory scale expectations, which it reads (and prunes of
expectations that are met).

Planning never raises: a spec that makes it fail in a way validation did not foresee is reported
like an invalid one (the SpecValid condition, with the error), so one odd RayCluster never turns
into a retry loop.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rayscale.api.disruption_annotations import DRAIN_ON_STOP_ANNOTATION, enabled
from rayscale.api.raycluster import (
    KUBERAY_MANAGER,
    PROVISIONED,
    SPEC_VALID,
    SUSPENDED,
    SUSPENDING,
    RayClusterSpec,
)
from rayscale.batch.model import BatchScheduler
from rayscale.cluster import ft, naming
from rayscale.cluster.limits import DEFAULT_MAX_PODS
from rayscale.cluster.removed_groups import removed_group_pods
from rayscale.cluster.validation import Invalid
from rayscale.common import labels as L
from rayscale.common.pods import awaits_scheduler, is_head, is_terminating, is_unhealthy, pod_group, pod_name
from rayscale.common.types import Obj
from rayscale.controller import (
    batching,
    ingress,
    prestop,
    redis_cleanup,
    services,
    sidecar,
    tokenauth,
    upgrade,
)
from rayscale.controller import pods as podspec
from rayscale.controller.expectations import ScaleExpectations
from rayscale.controller.plan import (
    CreatePod,
    DeletePod,
    DeleteWhy,
    EventSpec,
    EventType,
    NodeKind,
    Plan,
    Step,
)
from rayscale.controller.snapshot import ClusterSnapshot
from rayscale.controller.workers import plan_group, random_suffix

log = logging.getLogger(__name__)
ERROR_REQUEUE = 2.0
UNPLANNABLE = "spec: cannot be reconciled"  # how an unforeseen planning error is reported
MAX_MESSAGE = 1000
#: Worker pods one reconcile creates at most (Kubernetes' ReplicaSet controller's burst); the rest
#: follow in the next reconciles, once the pods created are seen, so a cluster scaling by
#: thousands never holds the operator for long.
CREATES_PER_RECONCILE = 500
#: Pods of one RayCluster created and not yet looked at by the kube-scheduler, at most: a large
#: scale-up creates its pods as fast as the scheduler places them, not all at once, so the pods of
#: a cluster created meanwhile wait behind this many of its pods in the scheduler's queue, not
#: hundreds. Pods the scheduler could not place (PodScheduled False, e.g. waiting for a node from
#: the cluster autoscaler) do not count, and groups placed by another scheduler have no window.
SCHEDULER_WINDOW = 32
DEFAULT_SCHEDULER = "default-scheduler"


@dataclasses.dataclass(frozen=True)
class PlannerOptions:
    random_delete: bool = False  # ENABLE_RANDOM_POD_DELETE
    sidecar_autoscaler: bool = False  # --mode controller: Ray's autoscaler in the head, as KubeRay
    suffix: Callable[[], str] = random_suffix
    max_pods: int = DEFAULT_MAX_PODS  # worker pods one RayCluster may ask for (--max-pods-per-cluster)
    max_creates: int = CREATES_PER_RECONCILE  # worker pods created by one reconcile at most
    scheduler_window: int = SCHEDULER_WINDOW  # pods awaiting the kube-scheduler at most (0: no window)
    batch: BatchScheduler | None = None  # --batch-scheduler: the pods' scheduler and PodGroup


def _service_names(snapshot: ClusterSnapshot) -> set[str]:
    return {str(s.get("metadata", {}).get("name")) for s in snapshot.services}


def _invalid_plan(snapshot: ClusterSnapshot, invalid: Invalid) -> Plan:
    """Nothing but the SpecValid condition, and a Warning Event when its message is new."""
    plan = Plan(invalid=invalid.message)
    old = snapshot.condition(SPEC_VALID)
    if old is None or (old.message or "") != invalid.message:
        plan.events.append(EventSpec(EventType.WARNING, invalid.reason, invalid.message, action="Validate"))
    return plan


def plan_cluster(
    snapshot: ClusterSnapshot,
    expectations: ScaleExpectations,
    options: PlannerOptions | None = None,
) -> tuple[Plan, RayClusterSpec | Invalid | None]:
    """What to do now, and the parsed spec (or why it is invalid; None when skipped).

    Never raises: an error while planning makes the spec invalid, with the error as the reason.
    """
    options = options or PlannerOptions()
    try:
        return _plan_cluster(snapshot, expectations, options)
    except Exception as exc:  # any spec must end in a condition, never in a retry loop
        meta = snapshot.meta
        log.exception("planning RayCluster %s/%s failed", meta.namespace, meta.name)
        message = f"{UNPLANNABLE} ({type(exc).__name__}: {exc})"[:MAX_MESSAGE]
        invalid = Invalid("InvalidRayClusterSpec", message)
        return _invalid_plan(snapshot, invalid), invalid


def _plan_cluster(
    snapshot: ClusterSnapshot, expectations: ScaleExpectations, options: PlannerOptions
) -> tuple[Plan, RayClusterSpec | Invalid | None]:
    meta = snapshot.meta
    plan = Plan()
    managed_by = snapshot.managed_by
    if (managed_by and managed_by != KUBERAY_MANAGER) or meta.deleting:
        plan.skip = True
        return plan, None
    parsed = snapshot.spec(max_pods=options.max_pods)
    if isinstance(parsed, Invalid):
        return _invalid_plan(snapshot, parsed), parsed
    spec = parsed
    if ft.redis_cleanup_enabled(spec, meta.annotations) and redis_cleanup.FINALIZER not in meta.finalizers:
        # As KubeRay: nothing is created before the finalizer that cleans Redis up is in place.
        plan.add_finalizer = redis_cleanup.FINALIZER
        plan.requeue(ERROR_REQUEUE)
        return plan, spec

    if tokenauth.needs_secret(spec.auth_options):
        plan.secrets.append(tokenauth.secret_manifest(meta, spec.auth_options))
    existing = _service_names(snapshot)
    head_svc = services.head_service(meta, spec)
    if head_svc["metadata"]["name"] not in existing:
        plan.services.append(head_svc)
    if options.sidecar_autoscaler and spec.autoscaling:
        plan.rbac.extend(sidecar.rbac(meta, spec))
    if ingress.wanted(spec):
        plan.ingresses.append(ingress.manifest(meta, spec))
    if services.wants_serve_service(meta):
        serve = services.serve_service(meta, spec)
        if isinstance(serve, str):
            plan.error = serve
            plan.requeue(ERROR_REQUEUE)
        elif serve["metadata"]["name"] not in existing:
            plan.services.append(serve)
    headless = naming.headless_worker_service_name(meta.name)
    if services.needs_headless_service(spec) and headless not in existing:
        plan.services.append(services.headless_worker_service(meta))

    pods = [p for p in snapshot.pods if not expectations.is_stuck(p)]
    if snapshot.condition_true(SUSPENDING):
        step = Step(group="*")
        step.deletes = [
            DeletePod(pod_name(p), pod_group(p), NodeKind.of(p), DeleteWhy.SUSPEND)
            for p in pods
            if not is_terminating(p)
        ]
        plan.steps.append(step)
        plan.requeue(ERROR_REQUEUE)
        return plan, spec
    if snapshot.condition_true(SUSPENDED) or spec.suspend:
        if spec.suspend:
            plan.requeue(ERROR_REQUEUE)
        return plan, spec

    live_head = next((p for p in pods if is_head(p) and not is_terminating(p)), None)
    if upgrade.must_recreate(spec, live_head):
        doomed = [p for p in pods if not is_terminating(p)]
        deletes = [DeletePod(pod_name(p), pod_group(p), NodeKind.of(p), DeleteWhy.UPGRADE) for p in doomed]
        plan.steps.append(Step(group="*", deletes=deletes))
        message = (
            f"Deleted all Pods for RayCluster {meta.namespace}/{meta.name} due to spec change with"
            " Recreate upgradeStrategy"
        )
        plan.events.append(EventSpec(EventType.NORMAL, "DeletedPod", message))
        plan.requeue(ERROR_REQUEUE)
        return plan, spec

    if problem := batching.pod_group_problem(meta, spec, options.batch, plan):
        plan.error = problem
        plan.requeue(ERROR_REQUEUE)
        return plan, spec
    by_name = {pod_name(p): p for p in pods}
    if not _plan_head(snapshot, spec, expectations, pods, by_name, plan, options):
        return plan, spec
    budget = options.max_creates  # worker pods this reconcile may still create
    room = _scheduler_room(pods, options.scheduler_window)  # ... of those the default scheduler places
    for group in spec.workers:
        key = (meta.namespace, meta.name, group.group_name)
        group_pods = [p for p in pods if pod_group(p) == group.group_name and not is_head(p)]
        if not expectations.satisfied(key, {pod_name(p): p for p in group_pods}):
            deadline = expectations.next_deadline(key)
            if deadline is not None:
                plan.requeue(deadline + 0.1)
            continue
        # A batch scheduler's gang waits for all its pods: they are never held back by the window.
        windowed = room is not None and options.batch is None and _default_scheduler(group.template)
        gp = plan_group(
            meta,
            spec,
            group,
            group_pods,
            random_delete=options.random_delete,
            suffix=options.suffix,
            max_creates=min(budget, room) if windowed and room is not None else budget,
        )
        budget -= len(gp.creates)
        if windowed and room is not None:
            room -= len(gp.creates)
        step = Step(group=group.group_name, deletes=gp.deletes, creates=gp.creates)
        if step:
            plan.steps.append(step)
        if (
            gp.creates
            and enabled(meta.annotations, DRAIN_ON_STOP_ANNOTATION)
            and prestop.own_prestop(group.template)
        ):
            plan.events.append(
                EventSpec(EventType.WARNING, "DrainOnStopSkipped", _own_hook(group.group_name))
            )
        if gp.requeue:
            plan.requeue(ERROR_REQUEUE)
    if not spec.autoscaling or options.sidecar_autoscaler:  # else rayscale's autoscaler drains them
        _plan_removed_groups(snapshot, spec, expectations, pods, plan)
    batching.decorate_pods(meta, spec, options.batch, plan)
    return plan, spec


def _plan_removed_groups(
    snapshot: ClusterSnapshot,
    spec: RayClusterSpec,
    expectations: ScaleExpectations,
    pods: Sequence[Obj],
    plan: Plan,
) -> None:
    """The pods of worker groups the spec no longer has, deleted at once (KubeRay leaves them
    behind), one Event per group: a cluster rayscale's autoscaler does not take is scaled down so."""
    meta = snapshot.meta
    for group, names in removed_group_pods(pods, {g.group_name for g in spec.workers}).items():
        theirs = {pod_name(p): p for p in pods if pod_group(p) == group and not is_head(p)}
        if not expectations.satisfied((meta.namespace, meta.name, group), theirs):
            continue  # its deletes are not seen yet
        why = DeleteWhy.GROUP_REMOVED
        plan.steps.append(
            Step(group=group, deletes=[DeletePod(n, group, NodeKind.WORKER, why) for n in names])
        )
        message = (
            f"Worker group {group} is no longer in the spec: deleting its pods {', '.join(names)}"
            " at once, without draining their Ray nodes (rayscale's autoscaler drains them first"
            " only for a RayCluster it autoscales: enableInTreeAutoscaling)"
        )
        plan.events.append(EventSpec(EventType.NORMAL, "WorkerGroupRemoved", message[:MAX_MESSAGE]))


def _own_hook(group: str) -> str:
    return (
        f"Worker group {group}: its Ray container has a preStop hook of its own, kept as it is;"
        f" rayscale added no drain hook to its pods (annotation {DRAIN_ON_STOP_ANNOTATION}). Drain"
        " the Ray node in your hook, or remove it to get rayscale's"
    )


def _scheduler_room(pods: Sequence[Obj], window: int) -> int | None:
    """How many more pods the kube-scheduler's window has room for (None: no window)."""
    if window <= 0:
        return None
    return max(0, window - sum(1 for p in pods if awaits_scheduler(p)))


def _default_scheduler(template: Mapping[str, Any]) -> bool:
    """Whether the kube-scheduler places the pods of this template."""
    name = (template.get("spec") or {}).get("schedulerName")
    return name in (None, "", DEFAULT_SCHEDULER)


def _plan_head(
    snapshot: ClusterSnapshot,
    spec: RayClusterSpec,
    expectations: ScaleExpectations,
    pods: Sequence[Obj],
    by_name: dict[str, Obj],
    plan: Plan,
    options: PlannerOptions,
) -> bool:
    """Plan the head pod; False when the workers must wait (KubeRay returns an error there)."""
    meta = snapshot.meta
    heads = [p for p in pods if is_head(p)]
    if not expectations.satisfied((meta.namespace, meta.name, ""), {pod_name(p): p for p in heads}):
        return True
    if len(heads) > 1:
        plan.error = f"{len(heads)} head pods found for RayCluster {meta.namespace}/{meta.name}"
        plan.requeue(ERROR_REQUEUE)
        return False
    if len(heads) == 1:
        if is_unhealthy(heads[0]):
            plan.steps.append(
                Step(
                    group="", deletes=[DeletePod(pod_name(heads[0]), "", NodeKind.HEAD, DeleteWhy.UNHEALTHY)]
                )
            )
            plan.requeue(ERROR_REQUEUE)
            return False
        return True
    no_restart = meta.annotations.get(L.DISABLE_HEAD_RESTART_ANNOTATION) == "true"
    if snapshot.condition_true(PROVISIONED) and no_restart:
        return False
    head = podspec.head_pod(meta, spec, sidecar_autoscaler=options.sidecar_autoscaler)
    plan.steps.append(Step(group="", creates=[CreatePod("", NodeKind.HEAD, head)]))
    return True
