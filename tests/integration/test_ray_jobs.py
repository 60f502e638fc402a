"""Ray job submissions against a real Ray 2.60 head with its dashboard (no Kubernetes): their
status read from the GCS (``GcsClient.get_submission``, ``list_submissions``), and submit, stop
and delete through the dashboard's job API (``DashboardClient``).

Jobs are submitted both with Ray's own ``JobSubmissionClient`` and with rayscale's client. Ray's
client runs in a subprocess (``ray`` must not be imported here: its generated protobuf modules
declare the message names rayscale's bindings declare); that also keeps it off the event loop.
A job that must stay RUNNING until the test lets it go waits for a file the test creates.
Nothing sleeps to synchronise: every wait polls with a deadline.

The dashboard needs Ray's "default" extra (``pip install 'ray[default]==2.60.0'``: aiohttp_cors,
opencensus, ...); without it these tests are skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import shlex
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from e2e.raybridge import rayproc
from hack.localk8s import launcher

from rayscale.ray.client import GcsClient
from rayscale.ray.dashboard import DashboardClient, DashboardError, DashboardUnavailable, SubmitRequest
from rayscale.ray.model import SubmissionInfo
from tests.support.polling import eventually
from tests.support.raydriver import RAY_WAIT

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None,
        reason="needs Ray: pip install 'ray==2.60.0' (the dev extra should carry it)",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("aiohttp_cors") is None,
        reason="needs Ray's dashboard: pip install 'ray[default]==2.60.0'",
    ),
    pytest.mark.timeout(900),
]

CUSTOM = "rayscale_custom"  # a resource of the head, for entrypoint_resources
TOKEN = "rayscale-test-token-0123456789abcdef0123456789"
SDK_SUBMIT = """
import json, sys
from ray.job_submission import JobSubmissionClient
options = json.loads(sys.argv[1])
print(JobSubmissionClient(options.pop("address")).submit_job(**options), flush=True)
"""


@dataclass
class DashboardHead:
    node: rayproc.RayNode
    dashboard: str  # http://host:port


def dashboard_args(port: int) -> tuple[str, ...]:
    # after rayproc's own --include-dashboard=false and --dashboard-port: the last one counts
    return ("--include-dashboard=true", f"--dashboard-host={rayproc.NODE_IP}", f"--dashboard-port={port}")


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardHead]:
    port = launcher.free_port(rayproc.EVERY_INTERFACE)
    with rayproc.running_head(
        num_cpus=2,
        resources={CUSTOM: 1},
        log_dir=tmp_path_factory.mktemp("ray-jobs-logs"),
        timeout=RAY_WAIT,
        extra_args=dashboard_args(port),
    ) as node:
        yield DashboardHead(node, f"http://{rayproc.NODE_IP}:{port}")


async def dashboard_up(head: DashboardHead, headers: dict[str, str] | None = None) -> None:
    async def answers() -> bool:
        assert head.node.running(), f"ray head exited:\n{head.node.log_tail()}"
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
                session.get(f"{head.dashboard}/api/jobs/", headers=headers) as response,
            ):
                return response.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    await eventually(answers, timeout=RAY_WAIT, message=f"the dashboard's job API at {head.dashboard}")


@pytest.fixture(scope="module")
async def gcs(ray_head: DashboardHead) -> AsyncIterator[GcsClient]:
    async with GcsClient(ray_head.node.address, timeout=10) as client:
        yield client


@pytest.fixture(scope="module")
async def dashboard(ray_head: DashboardHead) -> AsyncIterator[DashboardClient]:
    await dashboard_up(ray_head)
    async with DashboardClient(ray_head.dashboard, timeout=60) as client:
        yield client


def python(code: str) -> str:
    """An entrypoint that runs `code` with this interpreter."""
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def held_until(flag: Path, exit_code: int = 0) -> str:
    """An entrypoint that keeps running until `flag` exists (5 minutes at most), then exits."""
    return python(
        "import os, sys, time\n"
        "deadline = time.monotonic() + 300\n"
        f"while not os.path.exists({str(flag)!r}) and time.monotonic() < deadline:\n"
        "    time.sleep(0.1)\n"
        f"sys.exit({exit_code})\n"
    )


async def sdk_submit(head: DashboardHead, tmp_path: Path, **options: object) -> str:
    """Submit with Ray's own JobSubmissionClient, in a subprocess; its submission id."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SDK_SUBMIT,
        json.dumps({"address": head.dashboard, **options}),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
        env=rayproc.driver_env(),
    )
    out, err = await asyncio.wait_for(process.communicate(), RAY_WAIT)
    assert process.returncode == 0, err.decode()[-3000:]
    return out.decode().strip().splitlines()[-1]


async def reaches(gcs: GcsClient, submission_id: str, status: str) -> SubmissionInfo:
    """Poll the GCS until the submission has `status`; fail at once on another terminal one."""

    async def check() -> SubmissionInfo | None:
        info = await gcs.get_submission(submission_id)
        if info is not None and info.terminal and info.status != status:
            pytest.fail(f"{submission_id} ended {info.status}, not {status}: {info.message[-2000:]}")
        return info if info is not None and info.status == status else None

    return await eventually(check, timeout=RAY_WAIT, message=f"{submission_id} {status} in the GCS")


# ---- status from the GCS ----


async def test_an_unknown_submission_is_none(gcs: GcsClient, dashboard: DashboardClient) -> None:
    assert await gcs.get_submission("rayscale-no-such-job") is None


async def test_a_submitted_job_runs_then_succeeds(
    gcs: GcsClient, ray_head: DashboardHead, dashboard: DashboardClient, tmp_path: Path
) -> None:
    flag = tmp_path / "go"
    entrypoint = held_until(flag)
    submission_id = await sdk_submit(
        ray_head, tmp_path, entrypoint=entrypoint, submission_id="sdk-ok", metadata={"owner": "rayscale"}
    )
    assert submission_id == "sdk-ok"
    running = await reaches(gcs, "sdk-ok", "RUNNING")
    assert running.entrypoint == entrypoint
    assert running.metadata == {"owner": "rayscale"}
    assert running.message == "Job is currently running."
    assert running.start_time_ms > 0
    assert (running.end_time_ms, running.driver_exit_code, running.error_type) == (0, None, "")
    assert not running.terminal

    flag.touch()
    done = await reaches(gcs, "sdk-ok", "SUCCEEDED")
    assert (done.message, done.driver_exit_code) == ("Job finished successfully.", 0)
    assert done.end_time_ms >= done.start_time_ms == running.start_time_ms


async def test_a_failing_entrypoint_fails_with_its_message(
    gcs: GcsClient, ray_head: DashboardHead, dashboard: DashboardClient, tmp_path: Path
) -> None:
    code = "import sys; print('rayscale-boom', file=sys.stderr); sys.exit(3)"
    await sdk_submit(ray_head, tmp_path, entrypoint=python(code), submission_id="sdk-fails")
    failed = await reaches(gcs, "sdk-fails", "FAILED")
    assert failed.error_type == "JOB_ENTRYPOINT_COMMAND_ERROR"
    assert failed.driver_exit_code == 3
    assert failed.message.startswith("Job entrypoint command failed with exit code 3")
    assert "rayscale-boom" in failed.message  # the driver's last log lines
    assert failed.end_time_ms > 0


async def test_list_submissions(gcs: GcsClient, dashboard: DashboardClient) -> None:
    listed = await gcs.list_submissions()
    assert {"sdk-ok", "sdk-fails"} <= set(listed)
    for submission_id, info in listed.items():
        assert info == await gcs.get_submission(submission_id)
    assert (listed["sdk-ok"].status, listed["sdk-fails"].status) == ("SUCCEEDED", "FAILED")


# ---- the dashboard's job API ----


async def test_a_retried_submit_makes_one_job(
    gcs: GcsClient, ray_head: DashboardHead, dashboard: DashboardClient
) -> None:
    # a driver that joins the cluster: the GCS's job table then has an entry per driver
    request = SubmitRequest(
        python("import ray; ray.init(); print(ray.get_runtime_context().get_job_id())"), submission_id="twice"
    )
    # an answer lost to a timeout: the job may or may not have been taken
    async with DashboardClient(ray_head.dashboard, timeout=0.01) as hasty:
        with contextlib.suppress(DashboardUnavailable):
            assert await hasty.submit(request) == "twice"
    assert await dashboard.submit(request) == "twice"  # the retry
    assert await dashboard.submit(request) == "twice"  # and once more: Ray's "already exists"
    await reaches(gcs, "twice", "SUCCEEDED")
    drivers = [j for j in await gcs.get_all_job_info() if j.submission_id == "twice"]
    assert len(drivers) == 1, drivers


async def test_a_rayjob_spec_runs_as_kuberay_submits_it(gcs: GcsClient, dashboard: DashboardClient) -> None:
    check = "import os, sys; sys.exit(0 if os.environ.get('RAYSCALE_ENV') == 'yes' else 7)"
    spec = {
        "entrypoint": python(check),
        "runtimeEnvYAML": "env_vars:\n  RAYSCALE_ENV: 'yes'\n",
        "metadata": {"rayjob": "sample"},
        "entrypointNumCpus": 0.5,
        "entrypointResources": json.dumps({CUSTOM: 0.5}),
    }
    request = SubmitRequest.from_rayjob_spec(spec, "from-spec")
    assert await dashboard.submit(request) == "from-spec"
    done = await reaches(gcs, "from-spec", "SUCCEEDED")  # exit 7 without the runtime env's variable
    assert done.metadata == {"rayjob": "sample"}


async def test_stop_then_delete(gcs: GcsClient, dashboard: DashboardClient, tmp_path: Path) -> None:
    assert await dashboard.submit(SubmitRequest(held_until(tmp_path / "never"), submission_id="to-stop"))
    await reaches(gcs, "to-stop", "RUNNING")
    assert await dashboard.stop("to-stop") is True
    stopped = await reaches(gcs, "to-stop", "STOPPED")
    assert stopped.message == "Job was intentionally stopped."

    # Ray answers True while the job's supervisor actor lives; it writes STOPPED before it exits.
    async def no_longer_running() -> bool:
        return await dashboard.stop("to-stop") is False

    await eventually(no_longer_running, timeout=RAY_WAIT, message="stop answering False once the job ended")
    assert await dashboard.stop("rayscale-no-such-job") is False

    assert await dashboard.delete("to-stop") is True
    assert await gcs.get_submission("to-stop") is None
    assert await dashboard.delete("to-stop") is False


async def test_a_live_job_is_not_deleted(gcs: GcsClient, dashboard: DashboardClient, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    await dashboard.submit(SubmitRequest(held_until(flag), submission_id="live"))
    await reaches(gcs, "live", "RUNNING")
    with pytest.raises(DashboardError, match="non-terminal state") as refused:
        await dashboard.delete("live")
    assert refused.value.status == 500
    flag.touch()
    await reaches(gcs, "live", "SUCCEEDED")


async def test_bad_runtime_envs(gcs: GcsClient, dashboard: DashboardClient) -> None:
    not_a_mapping = SubmitRequest("echo hi", submission_id="env-refused", runtime_env="pip: [x]")  # type: ignore[arg-type]
    with pytest.raises(DashboardError) as refused:
        await dashboard.submit(not_a_mapping)
    assert refused.value.status == 400
    assert refused.value.message == "TypeError: runtime_env must be a dict, got <class 'str'>"
    assert await gcs.get_submission("env-refused") is None  # never recorded

    # one Ray takes, then cannot start the job with: it fails in the GCS, not at the submit
    invalid = SubmitRequest("echo hi", submission_id="env-invalid", runtime_env={"env_vars": {"A": 1}})
    assert await dashboard.submit(invalid) == "env-invalid"
    failed = await reaches(gcs, "env-invalid", "FAILED")
    assert failed.error_type == "JOB_SUPERVISOR_ACTOR_START_FAILURE"
    assert "runtime_env['env_vars'] must be of type Dict[str, str]" in failed.message


# ---- the GCS answers while the dashboard is down (last: it stops the dashboard) ----


def _dashboard_processes(head: rayproc.RayNode) -> list[int]:
    """The head's dashboard process and every process under it (its module subprocesses)."""
    parents: dict[int, int] = {}
    roots: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            pid = int(entry.name)
            if os.getpgid(pid) != head.pid:
                continue
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ProcessLookupError):
            continue
        parents[pid] = int(stat.rpartition(")")[2].split()[1])
        if "ray/dashboard/dashboard.py" in cmdline:
            roots.append(pid)
    found = list(roots)
    for pid in found:  # grows while walking: children of children
        found.extend(child for child, parent in parents.items() if parent == pid and child not in found)
    return found


async def test_the_gcs_answers_without_the_dashboard(
    gcs: GcsClient, ray_head: DashboardHead, dashboard: DashboardClient, tmp_path: Path
) -> None:
    flag = tmp_path / "go"
    await dashboard.submit(SubmitRequest(held_until(flag), submission_id="outlives"))
    await reaches(gcs, "outlives", "RUNNING")
    before = await gcs.list_submissions()

    # SIGTERM, as `ray stop` stops it: `ray start --block` takes the whole head down when one of
    # its processes exits with anything else (Ray 2.60; a head pod runs it so too)
    stopped = await asyncio.to_thread(_dashboard_processes, ray_head.node)
    assert stopped, "no dashboard process found"
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)

    async def gone() -> bool:
        try:  # a job Ray does not know: a dashboard still answering leaves "outlives" alone (404)
            await dashboard.stop("no-such-job")
        except DashboardUnavailable:
            return True
        except DashboardError:  # a dashboard shutting down can answer 500 before its port closes
            return False
        return False

    await eventually(gone, timeout=RAY_WAIT, message="the dashboard no longer answering")
    assert ray_head.node.running(), ray_head.node.log_tail()
    info = await gcs.get_submission("outlives")
    assert info is not None
    assert info.status == "RUNNING"
    assert set(await gcs.list_submissions()) == set(before)
    # the job's supervisor (a Ray actor, not the dashboard) records the end in the GCS itself
    flag.touch()
    await reaches(gcs, "outlives", "SUCCEEDED")
    assert ray_head.node.running(), ray_head.node.log_tail()
    assert not await asyncio.to_thread(_dashboard_processes, ray_head.node)


# ---- token authentication ----


@pytest.mark.ray
async def test_token_auth(tmp_path: Path) -> None:
    port = launcher.free_port(rayproc.EVERY_INTERFACE)
    with rayproc.running_head(
        num_cpus=1,
        env={"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN},
        log_dir=tmp_path,
        timeout=RAY_WAIT,
        extra_args=dashboard_args(port),
    ) as node:
        head = DashboardHead(node, f"http://{rayproc.NODE_IP}:{port}")
        await dashboard_up(head, headers={"authorization": f"Bearer {TOKEN}"})
        async with DashboardClient(head.dashboard) as anonymous:
            with pytest.raises(DashboardError) as missing:
                await anonymous.submit(SubmitRequest("echo hi", submission_id="token"))
            assert (missing.value.status, missing.value.message) == (
                401,
                "Unauthorized: Missing authentication token",
            )
        async with DashboardClient(head.dashboard, token="wrong") as wrong:
            with pytest.raises(DashboardError) as forbidden:
                await wrong.stop("token")
            assert forbidden.value.status == 403
        async with (
            DashboardClient(head.dashboard, token=TOKEN, timeout=60) as client,
            GcsClient(node.address, token=TOKEN, timeout=10) as gcs,
        ):
            assert await client.submit(SubmitRequest(python("print(1)"), submission_id="token")) == "token"
            await reaches(gcs, "token", "SUCCEEDED")
