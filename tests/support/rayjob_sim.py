"""rayscale's RayJob plan run on a script of world changes, in memory: the rayscale side of the
RayJob differential (tests/kuberay: the same scripts through KubeRay's own reconciler) and of the
unit tests.

A case is ``{"name", "rayjob", "objects": [...], "steps": [...]}``; each step first changes the
world (keys: spec, delete, cluster_status, cluster_delete, job_info, dashboard_error, submitter,
head_pod, age), then runs one reconcile (`rayscale.rayjob.plan.plan`), applies its actions as an
API server would (an object with finalizers is only marked deleted), and records the result in the
oracle's format: the status with every time as ``{"ago": seconds}``, the finalizers, the objects,
the Events, the calls to Ray (and in "submits" each submit's address and body), and the requeue.
"""

from __future__ import annotations

import copy
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from rayscale.cluster import naming
from rayscale.common.timefmt import parse_time, rfc3339
from rayscale.ray.jobrequest import SubmitRequest
from rayscale.rayjob import actions as A
from rayscale.rayjob import consts as C
from rayscale.rayjob.plan import Submission, World, plan
from rayscale.rayjob.ray_link import RayJobRay

__all__ = ["run_case", "run_cases"]

Obj = dict[str, Any]
_TIME_KEYS = ("startTime", "endTime", "lastScheduleTime")


def _merge(target: Obj, patch: Obj) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def _head_service_name(cluster: Obj) -> str:
    """The RayCluster's head Service as its controller names it (headService's name when set)."""
    head = (cluster.get("spec") or {}).get("headGroupSpec") or {}
    return naming.head_service_name(cluster["metadata"]["name"], head.get("headService"))


class _Sim:
    def __init__(self, case: Obj) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)
        self.job: Obj | None = copy.deepcopy(case["rayjob"])
        meta = self.job.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        meta.setdefault("uid", "rayjob-uid")
        meta.setdefault("generation", 1)
        self.job.setdefault("spec", {}).setdefault("submissionMode", C.K8S_JOB_MODE)
        self.objects: dict[tuple[str, str], Obj] = {}
        # rayscale's own, beside KubeRay's objects (see `_apply`): the RayJob's RayResourceRequests
        self.requests: dict[str, Obj] = {}
        self.marked: list[tuple[str, str]] = []  # (cluster, why) of each MarkFinished
        for obj in case.get("objects") or []:
            self._put(copy.deepcopy(obj))
        self.info: Submission | None = None
        self.ray_error: str | None = None
        self.calls: list[Obj] = []
        self.submits: list[Obj] = []
        self.events: list[str] = []
        self.names = (f"{n:05d}" for n in itertools.count(1))

    # ---- the world

    def _put(self, obj: Obj) -> None:
        obj.setdefault("metadata", {}).setdefault("namespace", "default")
        self.objects[(obj["kind"], obj["metadata"]["name"])] = obj

    def _get(self, kind: str, name: str) -> Obj | None:
        return self.objects.get((kind, name))

    def _cluster_name(self) -> str:
        if self.job is None:
            return ""
        return str((self.job.get("status") or {}).get("rayClusterName") or "")

    def _delete(self, kind: str, name: str) -> None:
        obj = self.objects.get((kind, name))
        if obj is None:
            return
        if obj["metadata"].get("finalizers"):
            obj["metadata"].setdefault("deletionTimestamp", rfc3339(self.now))
        else:
            del self.objects[(kind, name)]

    def change(self, step: Obj) -> None:
        if "age" in step:
            self.now += timedelta(seconds=float(step["age"]))
        if self.job is not None and "spec" in step:
            _merge(self.job["spec"], step["spec"])
        if self.job is not None and step.get("delete"):
            self.job["metadata"]["deletionTimestamp"] = rfc3339(self.now)
        cluster = self._get("RayCluster", self._cluster_name())
        if cluster is not None and "cluster_status" in step:
            _merge(cluster.setdefault("status", {}), step["cluster_status"])
        if step.get("cluster_delete"):
            self._delete("RayCluster", self._cluster_name())
        if "job_info" in step:
            info = step["job_info"]
            self.info = (
                None
                if info is None
                else Submission(
                    info["jobStatus"],
                    info.get("message", ""),
                    info.get("startTime", 0),
                    info.get("endTime", 0),
                )
            )
        if "dashboard_error" in step:
            self.ray_error = step["dashboard_error"] or None
        if "submitter" in step and self.job is not None:
            job = self._get("Job", self.job["metadata"]["name"])
            if job is not None:
                conditions = [
                    {
                        "status": "True",
                        **{k: v for k, v in c.items() if k != "ago"},
                        "lastTransitionTime": rfc3339(self.now - timedelta(seconds=c.get("ago", 0))),
                    }
                    for c in step["submitter"].get("conditions") or []
                ]
                job["status"] = {"conditions": conditions}
        if "head_pod" in step:
            self._head_pod(step["head_pod"])

    def _head_pod(self, spec: Obj | None) -> None:
        name = f"{self._cluster_name()}-head"
        if spec is None:
            self.objects.pop(("Pod", name), None)
            return
        statuses = []
        if spec.get("submitter") is not None:
            sub = spec["submitter"]
            finished = rfc3339(self.now - timedelta(seconds=sub.get("ago", 0)))
            terminated = {
                "exitCode": sub["exitCode"],
                "reason": sub.get("reason", ""),
                "finishedAt": finished,
            }
            statuses.append({"name": C.SUBMITTER_CONTAINER, "state": {"terminated": terminated}})
        labels = {"ray.io/cluster": self._cluster_name(), "ray.io/node-type": "head"}
        self._put(
            {
                "kind": "Pod",
                "metadata": {"name": name, "labels": labels},
                "status": {"containerStatuses": statuses},
            }
        )

    def world(self) -> World:
        assert self.job is not None
        name = self.job["metadata"]["name"]
        cluster = self._get("RayCluster", self._cluster_name())
        head_pods = tuple(
            p
            for (kind, _), p in self.objects.items()
            if kind == "Pod" and p["metadata"]["labels"].get("ray.io/cluster") == self._cluster_name()
        )
        cluster_service = None
        if cluster is not None:
            cluster_service = {
                "metadata": {"name": _head_service_name(cluster), "namespace": "default"},
                "spec": {"ports": [{"name": "dashboard", "port": 8265}]},
            }
        return World(
            job=copy.deepcopy(self.job),
            now=self.now,
            cluster=copy.deepcopy(cluster),
            submitter=copy.deepcopy(self._get("Job", name)),
            head_pods=head_pods,
            job_service=copy.deepcopy(self._get("Service", f"{name}-head-svc")),
            cluster_service=cluster_service,
            submission=self.info,
            ray_error=self.ray_error,
            suffixes=(next(self.names), next(self.names)),
            resource_request=copy.deepcopy(self.requests.get(f"{self._cluster_name()}-demand")),
        )

    # ---- one reconcile

    def reconcile(self) -> Obj:
        if self.job is None:  # gone: no reconcile, nothing posted or called
            self.events, self.calls, self.submits = [], [], []
            return self._record(0.0, None)
        step = plan(self.world())
        self.events = [f"{e.type} {e.reason} {e.message}" for e in step.events]
        self.calls = []
        self.submits = []
        error = step.error
        for action in step.actions:
            self._apply(action)
            if self.job is None:
                break
        if error is None and step.status is not None and self.job is not None:
            self.job["status"] = step.status
        return self._record(step.requeue or 0.0, error)

    def _apply(self, action: A.Action) -> None:
        assert self.job is not None
        meta = self.job["metadata"]
        ns = meta["namespace"]
        if isinstance(action, A.AddFinalizer):
            meta.setdefault("finalizers", []).append(C.FINALIZER)
        elif isinstance(action, A.RemoveFinalizer):
            meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != C.FINALIZER]
            if meta.get("deletionTimestamp") and not meta["finalizers"]:
                self.job = None
        elif isinstance(action, A.CreateCluster | A.CreateSubmitter | A.CreateService):
            obj = copy.deepcopy(action.manifest)
            self._put(obj)
            kind = {
                "RayCluster": "CreatedRayCluster",
                "Job": "CreatedRayJobSubmitter",
                "Service": "CreatedService",
            }
            what = {"RayCluster": "RayCluster", "Job": "Kubernetes Job", "Service": "the service"}[
                obj["kind"]
            ]
            self.events.append(f"Normal {kind[obj['kind']]} Created {what} {ns}/{obj['metadata']['name']}")
        elif isinstance(action, A.UpdateService):
            self._put(copy.deepcopy(action.manifest))
            self.events.append(
                f"Normal UpdatedService Updated the service {ns}/{action.manifest['metadata']['name']}"
            )
        elif isinstance(action, A.DeleteCluster):
            self._delete("RayCluster", action.name)
            self.events.append(f"Normal DeletedRayCluster Deleted cluster {ns}/{action.name}")
        elif isinstance(action, A.DeleteSubmitter):
            self._delete("Job", action.name)
            self.events.append(f"Normal DeletedRayJobSubmitter Deleted submitter K8s Job {ns}/{action.name}")
        elif isinstance(action, A.SuspendWorkers):
            cluster = self._get("RayCluster", action.name)
            assert cluster is not None
            for group in cluster["spec"].get("workerGroupSpecs") or []:
                group["suspend"] = True
            self.events.append(
                f"Normal UpdatedRayCluster Set the `suspend` field to true for all worker groups in cluster "
                f"{ns}/{action.name}"
            )
        # Deliberate improvements on KubeRay, kept out of what the differential compares (objects by
        # kind, Events): the RayResourceRequest of the entrypoint's resources (rayjob/demand.py) and
        # the job-finished mark on an autoscaled cluster (rayjob/deletion.py). Only these two.
        elif isinstance(action, A.CreateRequest):
            self.requests[action.manifest["metadata"]["name"]] = copy.deepcopy(action.manifest)
        elif isinstance(action, A.DeleteRequest):
            self.requests.pop(action.name, None)
        elif isinstance(action, A.MarkFinished):
            self.marked.append((action.name, action.why))
            cluster = self._get("RayCluster", action.name)
            if cluster is not None:
                annotations = cluster["metadata"].setdefault("annotations", {})
                annotations["rayscale.io/job-finished"] = action.why
        elif isinstance(action, A.SubmitJob):
            self.calls.append({"op": "SubmitJob", "jobId": action.submission_id})
            # What rayscale.rayjob.ray_link sends: the address and the body (in "submits").
            sent: Obj = {"jobId": action.submission_id}
            cluster = self._get("RayCluster", action.cluster)
            if cluster is not None:
                sent["url"] = RayJobRay(None).dashboard_address(cluster)
            try:
                sent["request"] = SubmitRequest.from_rayjob_spec(action.spec, action.submission_id).to_json()
            except ValueError as exc:
                sent["error"] = str(exc)
            self.submits.append(sent)
        elif isinstance(action, A.StopJob):
            self.calls.append({"op": "StopJob", "jobId": action.job_id})
        elif isinstance(action, A.DeleteSelf):
            meta["deletionTimestamp"] = rfc3339(self.now)
            if not meta.get("finalizers"):
                self.job = None

    def _ago(self, value: Any) -> Any:
        when = parse_time(value)
        return {"ago": int((self.now - when).total_seconds())} if when is not None else value

    def _record(self, requeue: float, error: str | None) -> Obj:
        if self.job is None:
            status: Any = "deleted"
            finalizers: list[str] = []
        else:
            status = copy.deepcopy(self.job.get("status") or {})
            for key in _TIME_KEYS:
                if key in status:
                    status[key] = self._ago(status[key])
            info = status.get("rayJobInfo") or {}
            for key in ("startTime", "endTime"):
                if key in info:
                    info[key] = self._ago(info[key])
            finalizers = list(self.job["metadata"].get("finalizers") or [])
        objects = [copy.deepcopy(o) for (kind, _), o in sorted(self.objects.items()) if kind != "Pod"]
        return {
            "status": status,
            "finalizers": finalizers,
            "objects": objects,
            "events": self.events,
            "dashboard_calls": self.calls,
            "submits": self.submits,
            "result": {"requeueAfter": requeue, "error": error},
            # rayscale's own (not in the oracle's format): the requests held, the marks so far
            "requests": [copy.deepcopy(r) for _, r in sorted(self.requests.items())],
            "marked": list(self.marked),
        }


def run_case(case: Obj) -> Obj:
    sim = _Sim(case)
    steps = []
    for step in case.get("steps") or []:
        sim.change(step)
        steps.append(sim.reconcile())
    return {"name": case.get("name", ""), "steps": steps}


def run_cases(cases: list[Obj]) -> list[Obj]:
    return [run_case(c) for c in cases]
