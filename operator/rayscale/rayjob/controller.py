"""The RayJob controller: reads a RayJob's world from the indexes (and Ray's GCS), runs the plan,
carries out its actions in order, then writes the status. I/O.

kopf's handlers keep `RayJobIndex` (RayJobs, their submitter Jobs and head Services) and mark the
RayJob's key; RayClusters, pods and the clusters' Services come from the operator's indexes. One
reconcile per RayJob at a time (the work queue); a failed action ends the reconcile there, with no
status write, and the RayJob is retried after its backoff, as KubeRay requeues on an error.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from time import monotonic
from typing import Any, Protocol

from rayscale.api.names import RAYCLUSTER, RAYJOB, RAYRESOURCEREQUEST
from rayscale.cluster import naming
from rayscale.cluster.job_end import JOB_FINISHED_ANNOTATION
from rayscale.common import labels as L
from rayscale.common.retry import Failed
from rayscale.common.types import ClusterKey, Obj
from rayscale.common.workqueue import QueueObserver, WorkQueue
from rayscale.kube import flow
from rayscale.kube import rayjob_ops as ops
from rayscale.kube.events import EventSink
from rayscale.kube.ops import KubeError, create_job, create_service
from rayscale.rayjob import actions as A
from rayscale.rayjob import consts as C
from rayscale.rayjob.actions import Step
from rayscale.rayjob.created import Created
from rayscale.rayjob.demand import request_name
from rayscale.rayjob.index import RayJobIndex, owner_key
from rayscale.rayjob.plan import Submission, World, plan

__all__ = ["JobRay", "RayJobController"]

log = logging.getLogger(__name__)
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # KubeRay's (apimachinery's rand.String)


def suffix() -> str:
    """5 random characters of KubeRay's alphabet (not a secret: names, as KubeRay's math/rand)."""
    return "".join(random.choices(_ALPHABET, k=5))


class JobRay(Protocol):
    """What the controller asks of a cluster's Ray: the submission's status from the GCS, and
    the dashboard's job API to submit (HTTPMode) and stop."""

    async def submission(self, cluster: Obj, job_id: str) -> Submission | None: ...
    async def submit(self, cluster: Obj, submission_id: str, spec: Mapping[str, Any]) -> None: ...
    async def stop(self, cluster: Obj | None, namespace: str, job_id: str) -> None: ...
    async def drain_workers(self, cluster: Obj, pods: Sequence[str]) -> set[str]: ...


class ClusterReads(Protocol):
    def cluster(self, key: ClusterKey) -> Mapping[str, Any] | None: ...
    def pods(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]: ...
    def services(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]: ...
    def requests(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]: ...


class RayJobController:
    def __init__(
        self,
        api: Any,
        index: RayJobIndex,
        clusters: ClusterReads,
        ray: JobRay,
        recorder: EventSink,
        *,
        concurrency: int = 16,
        observer: QueueObserver | None = None,
    ) -> None:
        self.api = api
        self.index = index
        self.clusters = clusters
        self.ray = ray
        self.recorder = recorder
        self.queue: WorkQueue[ClusterKey] = WorkQueue(
            self.reconcile, concurrency=concurrency, observer=observer, name="reconcile of rayjob"
        )
        index.changed = self.queue.mark
        self.created = Created()  # what a reconcile must not create again while the watch catches up
        self.delete_after_finish = os.environ.get("DELETE_RAYJOB_CR_AFTER_JOB_FINISHES", "").lower() == "true"
        self.grace_seconds = _grace_seconds(
            os.environ.get("RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS")
        )

    def mark_cluster(self, cluster: Obj) -> None:
        """A RayCluster a RayJob made changed: look at that RayJob again."""
        labels = (cluster.get("metadata") or {}).get("labels") or {}
        if labels.get(L.ORIGINATED_FROM_CRD) == C.CRD_LABEL_VALUE:
            self.queue.mark(owner_key(cluster))

    async def run(self) -> None:
        for key in list(self.index.rayjobs):
            self.queue.mark(key)
        await self.queue.run()

    # ---- one reconcile

    async def world(self, job: Obj) -> World:
        meta, status = job["metadata"], job.get("status") or {}
        ns = str(meta.get("namespace") or "")
        key = (ns, str(meta.get("name") or ""))
        cluster_key = (ns, str(status.get("rayClusterName") or ""))
        cluster = self.clusters.cluster(cluster_key) if cluster_key[1] else None
        head_pods = tuple(p for p in self.clusters.pods(cluster_key) if _is_head(p)) if cluster else ()
        cluster_service = None
        if cluster is not None:
            head = ((cluster.get("spec") or {}).get("headGroupSpec") or {}).get("headService")
            wanted = naming.head_service_name(cluster_key[1], head)
            for service in self.clusters.services(cluster_key):
                if (service.get("metadata") or {}).get("name") == wanted:
                    cluster_service = service
        wanted_request = request_name(cluster_key[1])
        request = next(
            (r for r in self.clusters.requests(cluster_key) if r["metadata"]["name"] == wanted_request), None
        )
        submission, ray_error = None, None
        if cluster is not None and status.get("jobDeploymentStatus") == C.RUNNING and status.get("jobId"):
            try:
                submission = await self.ray.submission(cluster, str(status["jobId"]))
            except Exception as exc:  # Ray cannot be asked: KubeRay's requeue on an error
                ray_error = f"reading the Ray job {status['jobId']}: {exc}"
        return World(
            job=job,
            now=datetime.now(UTC),
            cluster=cluster,
            submitter=self.index.submitters.get(key),
            head_pods=head_pods,
            job_service=self.index.services.get(key),
            cluster_service=cluster_service,
            submission=submission,
            ray_error=ray_error,
            suffixes=(suffix(), suffix()),
            delete_job_after_finish=self.delete_after_finish,
            grace_seconds=self.grace_seconds,
            resource_request=dict(request) if request is not None else None,
        )

    async def reconcile(self, key: ClusterKey) -> float | Failed | None:
        """One reconcile of `key`, its API requests as the RayJob's own flow of the rate limit."""
        with flow.working_for(flow.job_flow("rayjob", key)):
            return await self._reconcile(key)

    async def _reconcile(self, key: ClusterKey) -> float | Failed | None:
        job = self.index.rayjobs.get(key)
        if job is None:
            return None
        job = {
            "apiVersion": RAYJOB.api_version,
            "kind": RAYJOB.kind,
            **job,
            "metadata": dict(job["metadata"]),
        }
        read_at = monotonic()  # a running job's next read is due RUNNING_POLL_SECONDS after this one
        step = plan(await self.world(job))
        if self._stale(key, step):
            return C.STALE_WORLD_SECONDS  # the watch marks the RayJob again when it shows the object
        for event in step.events:
            self.recorder.post(job, event.type, event.reason, event.message)
        for action in step.actions:
            try:
                await self._do(job, action)
            except KubeError as exc:
                log.info("rayjob %s/%s: %s", *key, exc)
                return Failed(str(exc), exc.retry_after)
        if step.error is not None:
            # KubeRay returns these as errors, retried by its rate limiter from 5 ms doubling. They
            # are states that pass (Ray has no record of the submission yet, the dashboard's URL is
            # not known yet): look again after the step's requeue (3 s), not after a backoff that
            # grows to a minute and leaves a finished job unseen that long.
            log.info("rayjob %s/%s: %s", *key, step.error)
            return step.requeue if step.requeue is not None else Failed(step.error)
        if step.status is not None:
            body = {**job, "status": step.status}
            before = job.get("status") or {}
            told = any(step.status.get(f) != before.get(f) for f in ("jobStatus", "jobDeploymentStatus"))
            try:
                with flow.working_for(flow.transition_flow("rayjob", key) if told else flow.current()):
                    self.index.newer(key, await ops.replace_status(self.api, RAYJOB, body))
            except KubeError as exc:
                return Failed(str(exc), exc.retry_after)
        after = _poll_after(step.status if step.status is not None else job.get("status") or {}, step.requeue)
        if after == C.RUNNING_POLL_SECONDS:  # a period from the read, not from this reconcile's end
            after = max(0.0, after - (monotonic() - read_at))
        return after

    def _stale(self, key: ClusterKey, step: Step) -> bool:
        """Whether `step` would create again a RayCluster or head Service this controller created
        and the watches do not show yet (created.py): it was planned on a world older than that."""
        ns = key[0]
        for action in step.actions:
            if isinstance(action, A.CreateCluster):
                name = action.manifest["metadata"]["name"]
                seen = self.clusters.cluster((ns, name)) is not None
                if self.created.unseen("RayCluster", ns, name, seen=seen):
                    return True
            elif isinstance(action, A.CreateService):
                name = action.manifest["metadata"]["name"]
                found = self.index.services.get(key)
                seen = found is not None and (found.get("metadata") or {}).get("name") == name
                if self.created.unseen("Service", ns, name, seen=seen):
                    return True
        return False

    async def _do(self, job: Obj, action: A.Action) -> None:
        meta = job["metadata"]
        ns, name = str(meta.get("namespace") or ""), str(meta["name"])
        post = self.recorder.post
        if isinstance(action, A.AddFinalizer | A.RemoveFinalizer):
            finalizers = [f for f in meta.get("finalizers") or [] if f != C.FINALIZER]
            if isinstance(action, A.AddFinalizer):
                finalizers.append(C.FINALIZER)
            patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}}
            patched = await ops.patch_custom(self.api, RAYJOB, ns, name, patch)
            meta["finalizers"] = finalizers
            meta["resourceVersion"] = (patched.get("metadata") or {}).get("resourceVersion")
            self.index.newer((ns, name), patched)  # else the next status write meets a 409
        elif isinstance(action, A.CreateCluster):
            target = f"{ns}/{action.manifest['metadata']['name']}"
            try:
                await ops.create_custom(self.api, RAYCLUSTER, action.manifest)
            except KubeError as exc:
                post(
                    job, "Warning", C.EV_FAILED_CREATE_CLUSTER, f"Failed to create RayCluster {target}: {exc}"
                )
                raise
            self.created.add("RayCluster", ns, action.manifest["metadata"]["name"])
            post(job, "Normal", C.EV_CREATED_CLUSTER, f"Created RayCluster {target}")
        elif isinstance(action, A.DeleteCluster):
            try:
                await ops.delete_custom(self.api, RAYCLUSTER, ns, action.name)
            except KubeError as exc:
                post(
                    job,
                    "Warning",
                    C.EV_FAILED_DELETE_CLUSTER,
                    f"Failed to delete cluster {ns}/{action.name}: {exc}",
                )
                raise
            post(job, "Normal", C.EV_DELETED_CLUSTER, f"Deleted cluster {ns}/{action.name}")
        elif isinstance(action, A.SuspendWorkers):
            cluster = self.clusters.cluster((ns, action.name)) or {}
            await self._drain_workers(job, cluster)  # rayscale's: Ray hears before the pods go
            groups = len((cluster.get("spec") or {}).get("workerGroupSpecs") or [])
            try:
                await ops.suspend_worker_groups(self.api, ns, action.name, groups)
            except KubeError as exc:
                message = f"Failed to suspend worker groups in cluster {ns}/{action.name}: {exc}"
                post(job, "Warning", C.EV_FAILED_UPDATE_CLUSTER, message)
                raise
            message = f"Set the `suspend` field to true for all worker groups in cluster {ns}/{action.name}"
            post(job, "Normal", C.EV_UPDATED_CLUSTER, message)
        elif isinstance(action, A.MarkFinished):  # rayscale's: the autoscaler drains the workers
            patch = {"metadata": {"annotations": {JOB_FINISHED_ANNOTATION: action.why}}}
            await ops.patch_custom(self.api, RAYCLUSTER, ns, action.name, patch)
        elif isinstance(action, A.CreateRequest):  # rayscale's: the entrypoint's resources
            await ops.create_custom(self.api, RAYRESOURCEREQUEST, action.manifest)
        elif isinstance(action, A.DeleteRequest):
            await ops.delete_custom(self.api, RAYRESOURCEREQUEST, ns, action.name)
        elif isinstance(action, A.CreateSubmitter):
            target = f"{ns}/{action.manifest['metadata']['name']}"
            try:
                await create_job(self.api, ns, action.manifest)
            except KubeError as exc:
                post(
                    job,
                    "Warning",
                    C.EV_FAILED_CREATE_SUBMITTER,
                    f"Failed to create new Kubernetes Job {target}: {exc}",
                )
                raise
            post(job, "Normal", C.EV_CREATED_SUBMITTER, f"Created Kubernetes Job {target}")
        elif isinstance(action, A.DeleteSubmitter):
            try:
                await ops.delete_job_background(self.api, ns, action.name)
            except KubeError as exc:
                message = f"Failed to delete submitter K8s Job {ns}/{action.name}: {exc}"
                post(job, "Warning", C.EV_FAILED_DELETE_SUBMITTER, message)
                raise
            post(job, "Normal", C.EV_DELETED_SUBMITTER, f"Deleted submitter K8s Job {ns}/{action.name}")
        elif isinstance(action, A.CreateService | A.UpdateService):
            await self._service(job, action)
        elif isinstance(action, A.SubmitJob):
            found = self.clusters.cluster((ns, action.cluster))
            if found is None:
                raise KubeError(f"RayCluster {ns}/{action.cluster} is not found")
            try:
                await self.ray.submit(found, action.submission_id, action.spec)
            except Exception as exc:
                raise KubeError(f"submitting the Ray job {action.submission_id}: {exc}") from exc
        elif isinstance(action, A.StopJob):
            try:
                await self.ray.stop(self.clusters.cluster((ns, action.cluster)), ns, action.job_id)
            except Exception as exc:  # KubeRay lets the RayJob go whether StopJob worked or not
                log.info("rayjob %s/%s: stopping the Ray job %s: %s", ns, name, action.job_id, exc)
        elif isinstance(action, A.DeleteSelf):
            await ops.delete_custom(self.api, RAYJOB, ns, name)

    async def _drain_workers(self, job: Obj, cluster: Obj) -> None:
        """Before DeleteWorkers suspends the groups (and the controller deletes their pods), ask
        Ray to drain each worker's node. Best effort: the pods go either way, as in KubeRay."""
        meta = cluster.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        pods = [str(p["metadata"]["name"]) for p in self.clusters.pods(key) if not _is_head(p)]
        if not pods:
            return
        name = job["metadata"]["name"]
        why = f"RayJob {key[0]}/{name} finished (DeleteWorkers): its {len(pods)} worker pod(s) go"
        try:
            accepted = await self.ray.drain_workers(cluster, pods)
        except Exception as exc:
            log.info("rayjob %s: draining the workers of %s/%s: %s", job["metadata"]["name"], *key, exc)
            self.recorder.post(
                cluster,
                "Warning",
                C.EV_WORKERS_NOT_DRAINED,
                f"{why}; Ray could not be asked to drain them: {exc}",
            )
            return
        left = len(pods) - len(accepted)
        tail = f"; {left} had no live Ray node or refused (work still running)" if left else ""
        self.recorder.post(
            cluster, "Normal", C.EV_WORKERS_DRAINED, f"{why}; Ray drained {len(accepted)} first{tail}"
        )

    async def _service(self, job: Obj, action: A.CreateService | A.UpdateService) -> None:
        ns, name = job["metadata"]["namespace"], action.manifest["metadata"]["name"]
        post = self.recorder.post
        try:
            if isinstance(action, A.CreateService):
                await create_service(self.api, ns, action.manifest)
                self.created.add("Service", ns, name)
            else:
                old = await ops.get_service(self.api, ns, name)
                if old is None:
                    raise KubeError(f"service {ns}/{name} is gone")
                await ops.replace_service(self.api, {**old, "spec": action.manifest["spec"]})
        except KubeError as exc:
            if isinstance(action, A.CreateService):
                post(
                    job,
                    "Warning",
                    C.EV_FAILED_CREATE_SERVICE,
                    f"Failed to create the service {ns}/{name}, {exc}",
                )
            else:
                post(
                    job,
                    "Warning",
                    C.EV_FAILED_UPDATE_SERVICE,
                    f"Failed to update the service {ns}/{name}, {exc}",
                )
            raise
        if isinstance(action, A.CreateService):
            post(job, "Normal", C.EV_CREATED_SERVICE, f"Created the service {ns}/{name}")
        else:
            post(job, "Normal", C.EV_UPDATED_SERVICE, f"Updated the service {ns}/{name}")


def _poll_after(status: Mapping[str, Any], requeue: float | None) -> float | None:
    """The plan's requeue, but a RayJob whose Ray job runs is read again after
    `C.RUNNING_POLL_SECONDS` rather than KubeRay's 3 s: the read is one GCS key-value get."""
    running = status.get("jobDeploymentStatus") == C.RUNNING and status.get("jobStatus") not in C.JOB_TERMINAL
    if running and requeue == C.REQUEUE_SECONDS:
        return C.RUNNING_POLL_SECONDS
    return requeue


def _is_head(pod: Obj) -> bool:
    return ((pod.get("metadata") or {}).get("labels") or {}).get(L.NODE_TYPE) == L.HEAD


def _grace_seconds(value: str | None) -> float:
    """KubeRay's RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS: an integer, else 300."""
    try:
        return float(int(value or ""))
    except ValueError:
        return C.TRANSITION_GRACE_SECONDS
