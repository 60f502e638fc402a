"""What the RayJob end-to-end suites share: KubeRay's e2e RayJob objects as its test support builds
them (``NewRayClusterSpec``, ``JobSubmitterPodTemplateApplyConfiguration``, the job scripts as
``python -c`` entrypoints that need no files), and `Jobs`, a test's handle on the namespace: the
RayJobs, their RayClusters and submitter Jobs, waits with deadlines, and the timings it records.

The submitter pod template carries ``rayscale.io/bridged``: the `JobBridge` runs those pods.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.raybridge.jobbridge import BRIDGED_LABEL, MERGE_PATCH, JobBridge
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from tests.support.polling import eventually, holds

from rayscale.api.names import RAYCLUSTER, RAYJOB

__all__ = [
    "COUNTER",
    "COUNTER_CODE",
    "FAIL",
    "LONG_RUNNING",
    "MEDIUM",
    "SHORT",
    "Jobs",
    "held_until",
    "python",
    "rayjob",
    "rayjob_cluster_spec",
    "sidecar_app_failed",
    "submitter_template",
]

# KubeRay's TestTimeoutShort and TestTimeoutMedium are 1 and 2 minutes; a cluster here is a real
# Ray head with its dashboard and a worker started on 2 busy cores.
SHORT = 90.0
MEDIUM = 360.0
RESULTS = Path(__file__).resolve().parent.parent / ".results"


def python(code: str) -> str:
    """An entrypoint that runs `code` with this interpreter (the Ray head's job runs it)."""
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


# KubeRay's test/e2erayjob job scripts, as entrypoints.
COUNTER_CODE = (
    "import os, ray\n"
    "ray.init()\n"
    "@ray.remote\n"
    "class Counter:\n"
    "    def __init__(self):\n"
    "        self.name = os.getenv('counter_name')\n"
    "        assert self.name == 'test_counter'\n"
    "        self.counter = 0\n"
    "    def inc(self):\n"
    "        self.counter += 1\n"
    "    def get_counter(self):\n"
    "        return '{} got {}'.format(self.name, self.counter)\n"
    "counter = Counter.remote()\n"
    "for _ in range(5):\n"
    "    ray.get(counter.inc.remote())\n"
    "    print(ray.get(counter.get_counter.remote()))\n"
)
COUNTER = python(COUNTER_CODE)
FAIL = python("import sys\nprint('Something is seriously wrong.', file=sys.stderr)\nsys.exit(1)\n")
LONG_RUNNING = python("import time\nfor i in range(10000):\n    print(i, flush=True)\n    time.sleep(1)\n")
COUNTER_ENV = "env_vars:\n  counter_name: test_counter\n"


def held_until(flag: Path, code: str = "") -> str:
    """An entrypoint that waits (10 minutes at most) for `flag` to exist, then runs `code`."""
    return python(
        f"import os, time\nend = time.time() + 600\n"
        f"while not os.path.exists({str(flag)!r}) and time.time() < end:\n    time.sleep(0.2)\n{code}"
    )


def stop_all_jobs(flag: Path) -> str:
    """KubeRay's stop.py: once `flag` exists, stop every job of the cluster through its dashboard."""
    return held_until(
        flag,
        "import ray\nfrom ray.job_submission import JobSubmissionClient\n"
        "url = ray.init().dashboard_url\n"
        "client = JobSubmissionClient('http://' + url)\n"
        "for job in client.list_jobs():\n"
        "    print('Stop Job: ' + str(job.submission_id), flush=True)\n"
        "    client.stop_job(job.submission_id)\n",
    )


def sidecar_app_failed(status: Mapping[str, Any]) -> bool:
    """A SidecarMode RayJob whose Ray job failed ended as KubeRay says: reason AppFailed with
    jobStatus FAILED; or, when its ``ray job submit`` (exit code 1: the job failed) ended between
    two reads of Ray after the job failed, SubmissionFailed with that exit code. KubeRay checks the
    submitter before it reads Ray, with the job status of its previous read, and rayscale plans as
    it does: which of the two a run gets depends on that timing, in KubeRay too."""
    if status.get("reason") == "AppFailed":
        return bool(status.get("jobStatus") == "FAILED")
    message = str(status.get("message") or "")
    return (
        status.get("reason") == "SubmissionFailed"
        and "ray-job-submitter terminated with exit code 1" in message
    )


def rayjob_cluster_spec(*, workers: int = 1) -> dict[str, Any]:
    """KubeRay's NewRayClusterSpec: a head (dashboard on 0.0.0.0) and a group of `workers` (1)."""
    head = {
        "name": "ray-head",
        "image": "rayproject/ray:2.60.0",
        "ports": [
            {"containerPort": 6379, "name": "gcs"},
            {"containerPort": 8265, "name": "dashboard"},
            {"containerPort": 10001, "name": "client"},
        ],
        "resources": {"requests": {"cpu": "300m", "memory": "1G"}, "limits": {"cpu": "2", "memory": "3G"}},
    }
    worker = {
        "name": "ray-worker",
        "image": "rayproject/ray:2.60.0",
        "resources": {"requests": {"cpu": "300m", "memory": "1G"}, "limits": {"cpu": "1", "memory": "2G"}},
    }
    return {
        "rayVersion": "2.60.0",
        "headGroupSpec": {
            "rayStartParams": {"dashboard-host": "0.0.0.0"},
            "template": {"spec": {"containers": [head]}},
        },
        "workerGroupSpecs": [
            {
                "groupName": "small-group",
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "rayStartParams": {"num-cpus": "1"},
                "template": {"spec": {"containers": [worker]}},
            }
        ],
    }


def submitter_template(command: list[str] | None = None) -> dict[str, Any]:
    """KubeRay's JobSubmitterPodTemplateApplyConfiguration, labelled for the bridge to run."""
    container: dict[str, Any] = {
        "name": "ray-job-submitter",
        "image": "rayproject/ray:2.60.0",
        "resources": {
            "requests": {"cpu": "200m", "memory": "200Mi"},
            "limits": {"cpu": "500m", "memory": "500Mi"},
        },
    }
    if command:
        container["command"] = command
    return {
        "metadata": {"labels": {BRIDGED_LABEL: "true"}},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }


def rayjob(name: str, *, cluster: bool = True, submitter: bool = True, **spec: Any) -> dict[str, Any]:
    """A RayJob: `spec` in KubeRay's camelCase, with NewRayClusterSpec and the submitter template
    unless told otherwise."""
    body: dict[str, Any] = dict(spec)
    if cluster and "rayClusterSpec" not in body and "clusterSelector" not in body:
        body["rayClusterSpec"] = rayjob_cluster_spec()
    if submitter and "submitterPodTemplate" not in body:
        body["submitterPodTemplate"] = submitter_template()
    return {**RAYJOB.type_meta(), "metadata": {"name": name}, "spec": body}


@dataclass
class Jobs:
    """A test's RayJobs, their clusters and submitters in one namespace."""

    test: str
    api: client.ApiClient
    ns: str
    bridge: JobBridge
    steps: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    @property
    def objects(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    @property
    def batch(self) -> client.BatchV1Api:
        return client.BatchV1Api(self.api)

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    async def eventually(
        self,
        check: Callable[[], Any],
        what: str,
        *,
        timeout: float = SHORT,  # noqa: ASYNC109
    ) -> Any:
        return await eventually(check, timeout=timeout, interval=0.5, message=what)

    async def deployment_is(self, name: str, state: str) -> bool:
        return (await self.status(name)).get("jobDeploymentStatus") == state

    async def no_submitters(self) -> bool:
        return not await self.submitters()

    async def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = await self.objects.create_namespaced_custom_object(
            *RAYJOB.at(self.ns), dict(body)
        )
        return created

    async def get(self, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = await self.objects.get_namespaced_custom_object(*RAYJOB.at(self.ns), name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    async def status(self, name: str) -> dict[str, Any]:
        return dict(((await self.get(name)) or {}).get("status") or {})

    async def patch(self, name: str, spec: Mapping[str, Any]) -> None:
        await self.objects.patch_namespaced_custom_object(
            *RAYJOB.at(self.ns), name, {"spec": dict(spec)}, **MERGE_PATCH
        )

    async def delete(self, name: str) -> None:
        await self.objects.delete_namespaced_custom_object(*RAYJOB.at(self.ns), name)

    async def wait(
        self,
        name: str,
        check: Callable[[dict[str, Any]], bool],
        *,
        timeout: float,  # noqa: ASYNC109
        what: str,
    ) -> dict[str, Any]:
        """The RayJob's status once `check` holds on it; records how long it took."""
        t0 = time.monotonic()
        seen: list[dict[str, Any]] = []

        async def ready() -> bool:
            status = await self.status(name)
            seen[:] = [status]
            return check(status)

        try:
            await eventually(ready, timeout=timeout, interval=0.5, message=f"RayJob {name}: {what}")
        except BaseException:
            print(f"RayJob {name} status: {json.dumps(seen[-1] if seen else None, indent=1)}")
            print("--- bridge ---\n" + "\n".join(map(str, self.bridge.history()[-40:])))
            raise
        self.step(f"{name}: {what}", time.monotonic() - t0)
        return seen[-1]

    async def deployment(self, name: str, state: str, *, timeout: float = MEDIUM) -> dict[str, Any]:  # noqa: ASYNC109
        return await self.wait(
            name, lambda s: s.get("jobDeploymentStatus") == state, timeout=timeout, what=f"deployment {state}"
        )

    async def job_status(self, name: str, state: str, *, timeout: float = MEDIUM) -> dict[str, Any]:  # noqa: ASYNC109
        return await self.wait(
            name, lambda s: s.get("jobStatus") == state, timeout=timeout, what=f"job {state}"
        )

    async def cluster(self, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = await self.objects.get_namespaced_custom_object(
                *RAYCLUSTER.at(self.ns), name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    async def cluster_gone(self, name: str, *, timeout: float = SHORT) -> None:  # noqa: ASYNC109
        async def gone() -> bool:
            return await self.cluster(name) is None

        await eventually(gone, timeout=timeout, message=f"RayCluster {name} deleted")

    async def clusters(self) -> list[str]:
        found = await self.objects.list_namespaced_custom_object(*RAYCLUSTER.at(self.ns))
        return sorted(str(c["metadata"]["name"]) for c in found.get("items") or [])

    async def submitters(self) -> list[str]:
        found = await self.batch.list_namespaced_job(self.ns)
        return sorted(str(j.metadata.name) for j in found.items)

    async def holds(self, check: Callable[[], Any], seconds: float, message: str) -> None:
        await holds(check, seconds=seconds, interval=0.5, message=message)

    def step(self, what: str, seconds: float) -> None:
        self.steps.append({"step": what, "seconds": round(seconds, 3)})

    def write_results(self, outcome: str) -> None:
        RESULTS.mkdir(exist_ok=True)
        body = {
            "test": self.test,
            "outcome": outcome,
            "seconds": round(time.monotonic() - self.started, 3),
            "steps": self.steps,
        }
        slug = "".join(c if c.isalnum() or c in "-_" else "_" for c in self.test)
        (RESULTS / f"rayjob-{slug}.json").write_text(json.dumps(body, indent=1) + "\n")
