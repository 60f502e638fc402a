"""What a finished RayJob (Complete or Failed) deletes, and when, as KubeRay v1.6 does it, pure:
``deletionStrategy.deletionRules`` (each rule's TTL from ``status.endTime``; of the rules due, the
most destructive runs first, one per reconcile), the legacy ``onSuccess``/``onFailure`` pair with
``ttlSecondsAfterFinished``, and ``shutdownAfterJobFinishes``. A cluster chosen by
``clusterSelector`` is never touched.

rayscale's own addition: an autoscaled cluster whose workers a policy will release (DeleteCluster,
DeleteWorkers, DeleteSelf, shutdownAfterJobFinishes) is marked finished at once (`MarkFinished`),
before any TTL runs out: the autoscaler drains its workers and removes them then, instead of
letting them idle until the idle timeout or the TTL. The head stays until the policy's time.
DeleteWorkers on an autoscaled cluster (which KubeRay refuses: a suspended group is not allowed
there) is that mark, not the groups' ``suspend``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from rayscale.cluster.job_end import JOB_FINISHED_ANNOTATION
from rayscale.common.timefmt import parse_time
from rayscale.common.types import Obj
from rayscale.rayjob import consts as C
from rayscale.rayjob.actions import Action, DeleteCluster, DeleteSelf, MarkFinished, Step, SuspendWorkers

__all__ = ["cluster_release", "finished", "job_end_mark"]


def cluster_release(spec: Mapping[str, Any], cluster: Obj | None) -> list[Action]:
    """KubeRay's deleteClusterResources: delete the RayJob's cluster unless it is gone, going, or
    someone else's (clusterSelector)."""
    if spec.get("clusterSelector") or cluster is None:
        return []
    if (cluster.get("metadata") or {}).get("deletionTimestamp"):
        return []
    return [DeleteCluster(cluster["metadata"]["name"])]


def _policy_actions(policy: str, job: Obj, cluster: Obj | None) -> list[Action] | str:
    """The actions of one policy; a message when it cannot run (retried)."""
    spec, name = job.get("spec") or {}, str((job.get("status") or {}).get("rayClusterName") or "")
    if policy == C.DELETE_CLUSTER:
        return cluster_release(spec, cluster)
    if policy == C.DELETE_WORKERS:
        if cluster is None:
            return f"RayCluster {name} not found"
        if _autoscaled(cluster):  # suspended groups are refused there: the autoscaler drains them
            return job_end_mark(job, cluster)
        return [SuspendWorkers(cluster["metadata"]["name"])]
    if policy == C.DELETE_SELF:
        return [DeleteSelf()]
    return []


def _done(policy: str, cluster: Obj | None) -> bool:
    """Whether a policy's effect is already there (KubeRay's isDeletionActionCompleted)."""
    if policy == C.DELETE_NONE:
        return True
    if policy == C.DELETE_SELF:
        return False
    if cluster is None or (cluster.get("metadata") or {}).get("deletionTimestamp"):
        return True
    if policy == C.DELETE_CLUSTER:
        return False
    if _autoscaled(cluster):
        return _marked(cluster)
    groups = (cluster.get("spec") or {}).get("workerGroupSpecs") or []
    return all(bool(g.get("suspend")) for g in groups)


def _autoscaled(cluster: Obj) -> bool:
    return bool((cluster.get("spec") or {}).get("enableInTreeAutoscaling"))


def _marked(cluster: Obj) -> bool:
    return JOB_FINISHED_ANNOTATION in ((cluster.get("metadata") or {}).get("annotations") or {})


def _matches(rule: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    condition = rule.get("condition") or {}
    if condition.get("jobStatus") is not None:
        return bool(condition["jobStatus"] == (status.get("jobStatus") or ""))
    return bool(condition.get("jobDeploymentStatus") == (status.get("jobDeploymentStatus") or ""))


def _requeue(at: datetime, now: datetime) -> float:
    return (at - now).total_seconds() + C.DELETION_MARGIN_SECONDS


def _step(actions: list[Action] | str, requeue: float | None = None) -> Step:
    if isinstance(actions, str):
        return Step(error=actions, requeue=C.REQUEUE_SECONDS)
    return Step(actions=actions, requeue=requeue)


def _rules(
    rules: list[Mapping[str, Any]], job: Obj, cluster: Obj | None, now: datetime, end: datetime
) -> Step:
    status = job.get("status") or {}
    due: list[Mapping[str, Any]] = []
    upcoming: datetime | None = None
    for rule in rules:
        if not _matches(rule, status):
            continue
        at = end + timedelta(seconds=int((rule.get("condition") or {}).get("ttlSeconds") or 0))
        if now < at:
            upcoming = at if upcoming is None or at < upcoming else upcoming
            continue
        if not _done(str(rule.get("policy")), cluster):
            due.append(rule)
    requeue = _requeue(upcoming, now) if upcoming is not None else None
    if not due:
        return Step(requeue=requeue)
    first = due[0]
    for rule in due[1:]:
        if C.POLICY_IMPACT.get(str(rule.get("policy")), 0) > C.POLICY_IMPACT.get(str(first.get("policy")), 0):
            first = rule
    return _step(_policy_actions(str(first.get("policy")), job, cluster), requeue)


_RELEASING = frozenset({C.DELETE_WORKERS, C.DELETE_CLUSTER, C.DELETE_SELF})


def _releases_workers(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Whether a policy will take the workers of the finished job's cluster (now or after a TTL)."""
    strategy = spec.get("deletionStrategy")
    if strategy is None:
        return bool(spec.get("shutdownAfterJobFinishes"))
    if strategy.get("deletionRules") is not None:
        return any(
            _matches(r, status) and str(r.get("policy")) in _RELEASING for r in strategy["deletionRules"]
        )
    side = {C.JOB_SUCCEEDED: "onSuccess", C.JOB_FAILED: "onFailure"}.get(str(status.get("jobStatus")))
    return side is not None and str((strategy.get(side) or {}).get("policy")) in _RELEASING


def job_end_mark(job: Obj, cluster: Obj | None) -> list[Action]:
    """`MarkFinished` for an autoscaled cluster of the job's own whose workers a policy will
    release and that is not marked yet; nothing otherwise."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    if spec.get("clusterSelector") or cluster is None:
        return []
    meta = cluster.get("metadata") or {}
    if meta.get("deletionTimestamp") or _marked(cluster):
        return []
    if not _autoscaled(cluster) or not _releases_workers(spec, status):
        return []
    job_status = str(status.get("jobStatus") or "")
    outcome = job_status if job_status in C.JOB_TERMINAL else str(status.get("jobDeploymentStatus") or "")
    if status.get("reason"):
        outcome += f", {status['reason']}"
    job_meta = job.get("metadata") or {}
    why = f"RayJob {job_meta.get('namespace', '')}/{job_meta.get('name', '')} finished ({outcome})"
    return [MarkFinished(str(meta.get("name") or ""), why)]


def finished(job: Obj, cluster: Obj | None, now: datetime, *, delete_job_after_finish: bool = False) -> Step:
    """The step of a RayJob in Complete or Failed. `delete_job_after_finish`: the operator's
    DELETE_RAYJOB_CR_AFTER_JOB_FINISHES switch (shutdownAfterJobFinishes deletes the RayJob)."""
    step = _finished(job, cluster, now, delete_job_after_finish)
    if not any(isinstance(a, DeleteCluster | DeleteSelf) for a in step.actions):  # else no point
        step.actions[:0] = [a for a in job_end_mark(job, cluster) if a not in step.actions]
    return step


def _finished(job: Obj, cluster: Obj | None, now: datetime, delete_job_after_finish: bool) -> Step:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    if spec.get("clusterSelector"):
        return Step()
    end = parse_time(status.get("endTime")) or now
    strategy = spec.get("deletionStrategy")
    if strategy is not None:
        if strategy.get("deletionRules") is not None:
            return _rules(list(strategy["deletionRules"]), job, cluster, now, end)
        job_status = status.get("jobStatus")
        side = {C.JOB_SUCCEEDED: "onSuccess", C.JOB_FAILED: "onFailure"}.get(str(job_status))
        if side is None:
            return Step()
        policy = str((strategy.get(side) or {}).get("policy") or C.DELETE_NONE)
        if policy == C.DELETE_NONE:
            return Step()
        at = end + timedelta(seconds=int(spec.get("ttlSecondsAfterFinished") or 0))
        if at > now:
            return Step(requeue=_requeue(at, now))
        return _step(_policy_actions(policy, job, cluster))
    if spec.get("shutdownAfterJobFinishes"):
        at = end + timedelta(seconds=int(spec.get("ttlSecondsAfterFinished") or 0))
        if at > now:
            return Step(requeue=_requeue(at, now))
        return Step(actions=[DeleteSelf()] if delete_job_after_finish else cluster_release(spec, cluster))
    return Step()
