"""KubeRay's TestRayCronJobSuspend (test/e2eraycronjob/raycronjob_suspend_test.go) with a real Ray:
the RayJobs the RayCronJob makes once resumed run on real Ray heads (the `job_bridge`).

KubeRay subtest -> pytest id:

- TestRayCronJobSuspend/RayCronJob respects suspend flag across schedule and resumes job creation.
  -> test_raycronjob_suspend_then_resume

Difference: the job template's submitter pod template carries ``rayscale.io/bridged`` so that its
``ray job submit`` really runs (KubeRay's template has none; its test only counts the RayJobs).
"""

from __future__ import annotations

from typing import Any

from e2e.raybridge.jobbridge import MERGE_PATCH
from e2e.raybridge.jobscenario import MEDIUM, SHORT, Jobs, python, rayjob

from rayscale.api.names import RAYCRONJOB, RAYJOB

SUSPENDED_FOR = 130.0  # KubeRay's: more than two ticks of "*/1 * * * *"


def raycronjob(name: str, schedule: str, *, suspend: bool) -> dict[str, Any]:
    template = rayjob("unused", entrypoint=python("import time; time.sleep(1)"))["spec"]
    return {
        **RAYCRONJOB.type_meta(),
        "metadata": {"name": name},
        "spec": {"schedule": schedule, "suspend": suspend, "jobTemplate": template},
    }


async def owned_rayjobs(jobs: Jobs, uid: str) -> list[str]:
    found = await jobs.objects.list_namespaced_custom_object(*RAYJOB.at(jobs.ns))
    return [
        str(j["metadata"]["name"])
        for j in found.get("items") or []
        if any(o.get("uid") == uid for o in j["metadata"].get("ownerReferences") or [])
    ]


async def test_raycronjob_suspend_then_resume(jobs: Jobs) -> None:
    name = "suspended-raycronjob"
    created = await jobs.objects.create_namespaced_custom_object(
        *RAYCRONJOB.at(jobs.ns), raycronjob(name, "*/1 * * * *", suspend=True)
    )
    uid = str(created["metadata"]["uid"])

    async def none_made() -> bool:
        return not await owned_rayjobs(jobs, uid)

    await jobs.holds(none_made, SUSPENDED_FOR, "no RayJob while the RayCronJob is suspended")

    await jobs.objects.patch_namespaced_custom_object(
        *RAYCRONJOB.at(jobs.ns), name, {"spec": {"suspend": False}}, **MERGE_PATCH
    )

    async def resumed() -> bool:
        got = await jobs.objects.get_namespaced_custom_object(*RAYCRONJOB.at(jobs.ns), name)
        return not got["spec"].get("suspend")

    await jobs.eventually(resumed, "spec.suspend false", timeout=SHORT)
    made = await jobs.eventually(
        lambda: owned_rayjobs(jobs, uid), "a RayJob made after resuming", timeout=MEDIUM
    )
    jobs.step(f"RayJobs made: {made}", 0)
    await jobs.objects.delete_namespaced_custom_object(*RAYCRONJOB.at(jobs.ns), name)
