"""What the RayJob auth-token tests check (KubeRay's ``Successful RayJob in ... mode with auth
token`` subtests): KubeRay's ``VerifyContainerAuthTokenEnvVars`` on the Ray containers and the
submitter, and, beyond KubeRay's checks, that the Ray the bridge runs for the cluster really uses
the token: its dashboard refuses a call without it (401) or with another one (403).

    await jobs.create(token_rayjob(flag, submissionMode=...))
    cluster, head = await token_cluster(jobs, "counter-auth")  # Ready; head and workers checked
    assert token_env_problems(<the submitter container>, cluster) == []
    await refuses_without_token(jobs, cluster, head)
    flag.touch()
    await succeeded(jobs, "counter-auth")
"""

from __future__ import annotations

import asyncio
import base64
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from e2e.raybridge.jobscenario import (
    COUNTER_CODE,
    COUNTER_ENV,
    MEDIUM,
    SHORT,
    Jobs,
    held_until,
    rayjob,
    rayjob_cluster_spec,
)

__all__ = [
    "dashboard_answer",
    "pods",
    "refuses_without_token",
    "succeeded",
    "token_cluster",
    "token_env_problems",
    "token_rayjob",
]

TERMINAL_JOB = ("SUCCEEDED", "FAILED", "STOPPED")
TOKEN_KEY = "auth_token"  # KubeRay's RAY_AUTH_TOKEN_SECRET_KEY


def _env(container: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    return next((e for e in container.get("env") or [] if e.get("name") == name), None)


def token_env_problems(container: Mapping[str, Any], cluster: str) -> list[str]:
    """KubeRay's VerifyContainerAuthTokenEnvVars: ``RAY_AUTH_MODE=token``, and ``RAY_AUTH_TOKEN``
    from a Secret whose name contains the cluster's, key ``auth_token``. What is wrong, if anything."""
    name = container.get("name")
    problems = []
    mode = _env(container, "RAY_AUTH_MODE")
    if mode is None or mode.get("value") != "token":
        problems.append(f"{name}: RAY_AUTH_MODE is {mode!r}, not token")
    token = _env(container, "RAY_AUTH_TOKEN")
    ref = ((token or {}).get("valueFrom") or {}).get("secretKeyRef") or {}
    if cluster not in str(ref.get("name") or "") or ref.get("key") != TOKEN_KEY:
        problems.append(f"{name}: RAY_AUTH_TOKEN is {token!r}, not from the cluster's Secret key {TOKEN_KEY}")
    return problems


def token_rayjob(flag: Path, **spec: Any) -> dict[str, Any]:
    """KubeRay's RayJob ``counter-auth``: the counter with its runtime env on NewRayClusterSpec with
    ``authOptions.mode: token``, shut down when it ends. The counter waits for `flag` first (the
    test checks the running cluster meanwhile)."""
    return rayjob(
        "counter-auth",
        entrypoint=held_until(flag, COUNTER_CODE),
        runtimeEnvYAML=COUNTER_ENV,
        shutdownAfterJobFinishes=True,
        rayClusterSpec={**rayjob_cluster_spec(), "authOptions": {"mode": "token"}},
        **spec,
    )


async def token_cluster(jobs: Jobs, rayjob: str) -> tuple[str, dict[str, Any]]:
    """The RayJob's RayCluster once it is Ready, and its head pod, after checking that the head's and
    every worker's Ray container have the token settings (KubeRay's order)."""
    cluster = await _ready_cluster(jobs, rayjob)
    selector = f"ray.io/cluster={cluster},ray.io/node-type"
    (head,) = await pods(jobs, f"{selector}=head")
    assert token_env_problems(head["spec"]["containers"][0], cluster) == []
    workers = await jobs.eventually(lambda: pods(jobs, f"{selector}=worker"), "the worker pods")
    for worker in workers:
        assert token_env_problems(worker["spec"]["containers"][0], cluster) == []
    return cluster, head


async def succeeded(jobs: Jobs, rayjob: str) -> None:
    """KubeRay's end of the subtests: the job terminal, SUCCEEDED, and the RayJob Complete."""
    status = await jobs.wait(
        rayjob, lambda s: s.get("jobStatus") in TERMINAL_JOB, timeout=MEDIUM, what="terminal"
    )
    assert status["jobStatus"] == "SUCCEEDED", status
    await jobs.deployment(rayjob, "Complete", timeout=SHORT)


async def _ready_cluster(jobs: Jobs, rayjob: str) -> str:
    """The RayJob's RayCluster, once it is Ready."""
    status = await jobs.wait(
        rayjob, lambda s: bool(s.get("rayClusterName")), timeout=MEDIUM, what="a cluster"
    )
    name = str(status["rayClusterName"])

    async def ready() -> bool:
        return bool(((await jobs.cluster(name) or {}).get("status") or {}).get("state") == "ready")

    await jobs.eventually(ready, f"RayCluster {name} ready", timeout=MEDIUM)
    return name


async def pods(jobs: Jobs, selector: str) -> list[dict[str, Any]]:
    """The live pods `selector` selects, as plain JSON."""
    found = await jobs.core.list_namespaced_pod(jobs.ns, label_selector=selector)
    return [
        jobs.api.sanitize_for_serialization(p) for p in found.items if p.metadata.deletion_timestamp is None
    ]


def dashboard_answer(url: str, token: str | None) -> int:
    """The HTTP status of the dashboard's job list (0: no answer); blocking."""
    headers = {"authorization": f"Bearer {token}"} if token is not None else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(f"{url}/api/jobs/", headers=headers), timeout=5
        ) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


async def refuses_without_token(jobs: Jobs, cluster: str, head: Mapping[str, Any]) -> None:
    """The cluster's real dashboard answers with the token of the head pod's Secret, and refuses a
    call without it (401) or with another token (403)."""
    ref = ((_env(head["spec"]["containers"][0], "RAY_AUTH_TOKEN") or {}).get("valueFrom") or {})[
        "secretKeyRef"
    ]
    secret = await jobs.core.read_namespaced_secret(ref["name"], jobs.ns)
    token = base64.b64decode(secret.data[ref["key"]]).decode()
    url = await jobs.eventually(lambda: jobs.bridge.dashboard(cluster), f"the dashboard of {cluster}")

    async def answers() -> bool:
        return await asyncio.to_thread(dashboard_answer, url, token) == 200

    await jobs.eventually(answers, "the dashboard answers a call with the token", timeout=MEDIUM)
    assert await asyncio.to_thread(dashboard_answer, url, None) == 401, "Ray took a call without the token"
    assert await asyncio.to_thread(dashboard_answer, url, "not-the-token") == 403, "Ray took another token"
