"""The Ray bridge for RayJobs: real Ray for every RayCluster of a namespace, and the RayJobs'
submitters run on this machine.

A RayJob's RayCluster gets a generated name (``<rayjob>-<5 letters>``), and a retried RayJob
makes a new one, so this bridge follows the namespace's RayClusters rather than one name: each
RayCluster that appears gets a `RayBridge` of its own (a real Ray head WITH its dashboard, job
submission needs it, and a Ray worker per Running worker pod), and is annotated with
``rayscale.io/gcs-address`` and ``rayscale.io/dashboard-address`` (rayscale follows them with
``--allow-gcs-address-override``). A RayCluster that is deleted loses its Ray.

kwok runs no containers; the submitters are run here, as a kubelet would run them:

- K8sJobMode: the pods of the submitter Job that carry the label ``rayscale.io/bridged`` (the test's
  ``submitterPodTemplate`` sets it; the local control plane's kwok then leaves them Running instead
  of completing them at once). Once such a pod Runs, its container's command runs here with the
  container's environment; the dashboard address it was given (the RayJob's
  ``status.dashboardURL``, a cluster Service name) is replaced by the real dashboard's. Its exit is
  written into the pod's status (phase Succeeded or Failed, the container terminated with its exit
  code), so the kube-controller-manager's Job controller completes or retries the Job.
- SidecarMode: the head pod's ``ray-job-submitter`` container runs here beside the Ray head
  (``127.0.0.1:<dashboard port>`` replaced by the real dashboard's); its exit is written into the
  head pod's container statuses (the pod stays Running).

A cluster's Ray head starts once its head pod Runs, as a kubelet would start it. Ray nodes and
submitters get their containers' auth settings, the token read from its Secret (podenv.py).

The submitter starts once the cluster's dashboard answers, as the head pod's readiness probe
would have it. A pod deleted while its submitter runs has it killed. Every process dies with the
test process. HTTPMode and InteractiveMode need nothing more: rayscale talks to the dashboard.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from e2e.raybridge import rayproc, submitters
from e2e.raybridge.bridge import GCS_ANNOTATION, BridgeEvent, RayBridge, head_params
from e2e.raybridge.submitters import SubmitterRun
from hack.localk8s import launcher
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from rayscale.api.names import RAYCLUSTER, RAYJOB

__all__ = ["BRIDGED_LABEL", "DASHBOARD_ANNOTATION", "SUBMITTER", "JobBridge", "SubmitterRun"]

log = logging.getLogger(__name__)

BRIDGED_LABEL = launcher.BRIDGED_LABEL
DASHBOARD_ANNOTATION = "rayscale.io/dashboard-address"
SUBMITTER = "ray-job-submitter"  # KubeRay's submitter container name
DASHBOARD_WAIT = 300.0
WATCH_SECONDS = 60
MERGE_PATCH: dict[str, Any] = {"_content_type": "application/merge-patch+json"}


def dashboard_args(port: int) -> tuple[str, ...]:
    """After rayproc's own ``--include-dashboard=false`` and ``--dashboard-port``: the last counts."""
    return ("--include-dashboard=true", f"--dashboard-host={rayproc.NODE_IP}", f"--dashboard-port={port}")


class JobBridge:
    """A `RayBridge` with a dashboard for every RayCluster of `namespace`, and its submitters."""

    def __init__(
        self,
        kubeconfig: str | Path,
        namespace: str,
        *,
        log_dir: Path,
        head_env: Mapping[str, str] | None = None,
    ) -> None:
        self.kubeconfig = str(kubeconfig)
        self.namespace = namespace
        self.log_dir = log_dir
        self.head_env = dict(head_env or {})
        self._lock = threading.Lock()
        self._bridges: dict[str, RayBridge] = {}
        self._dashboards: dict[str, str] = {}
        self._starting: set[str] = set()
        self._gone: set[str] = set()  # deleted while starting
        self._ready_once: set[str] = set()  # clusters whose head has been ready
        self._runs: dict[str, SubmitterRun] = {}  # pod uid/container -> run
        self._processes: dict[str, asyncio.subprocess.Process] = {}
        self._events: list[BridgeEvent] = []
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="jobbridge")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._synced = threading.Event()

    # ---- lifecycle

    def __enter__(self) -> JobBridge:
        self._thread = threading.Thread(target=self._run, name=f"jobbridge-{self.namespace}", daemon=True)
        self._thread.start()
        if not self._synced.wait(60):
            self.close()
            raise rayproc.RayProcessError(f"the RayClusters and pods of {self.namespace} were not listed")
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self._loop is not None and self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None
        with self._lock:
            bridges = list(self._bridges.values())
            self._bridges.clear()
        for bridge in bridges:
            bridge.close()
        self._pool.shutdown(wait=True, cancel_futures=True)

    # ---- what tests read

    def bridges(self) -> dict[str, RayBridge]:
        with self._lock:
            return dict(self._bridges)

    def dashboard(self, cluster: str) -> str | None:
        with self._lock:
            return self._dashboards.get(cluster)

    def runs(self, pod_prefix: str = "") -> list[SubmitterRun]:
        with self._lock:
            found = [r for r in self._runs.values() if r.pod.startswith(pod_prefix)]
        return sorted(found, key=lambda r: r.started)

    def history(self) -> list[BridgeEvent]:
        with self._lock:
            own = list(self._events)
        for bridge in self.bridges().values():
            own += bridge.history()
        return sorted(own, key=lambda e: e.at)

    def errors(self) -> list[BridgeEvent]:
        return [e for e in self.history() if e.kind == "error"]

    def _record(self, kind: str, pod: str, detail: str = "") -> None:
        with self._lock:
            self._events.append(BridgeEvent(kind, pod, time.monotonic(), time.time(), detail))
        log.info("jobbridge %s: %s %s %s", self.namespace, kind, pod, detail)

    # ---- the watch thread

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._task = loop.create_task(self._main())
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(self._task)
        finally:
            for process in list(self._processes.values()):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, 9)
            loop.close()

    async def _main(self) -> None:
        cfg = client.Configuration()
        await config.load_kube_config(config_file=self.kubeconfig, client_configuration=cfg)
        async with client.ApiClient(configuration=cfg) as api:
            objects, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
            listed = [asyncio.Event(), asyncio.Event()]
            tasks = [
                asyncio.create_task(
                    self._follow(objects.list_namespaced_custom_object, RAYCLUSTER.at(self.namespace),
                                 lambda kind, obj: self._cluster_event(api, kind, obj), listed[0])
                ),
                asyncio.create_task(
                    self._follow(core.list_namespaced_pod, (self.namespace,),
                                 lambda kind, obj: self._pod_event(api, kind, obj), listed[1])
                ),
            ]  # fmt: skip
            try:
                for event in listed:
                    await event.wait()
                self._synced.set()
                await asyncio.gather(*tasks)
            finally:
                for task in tasks:
                    task.cancel()

    async def _follow(
        self,
        lister: Callable[..., Awaitable[Any]],
        args: tuple[str, ...],
        handle: Callable[[str, dict[str, Any]], None],
        listed: asyncio.Event,
    ) -> None:
        """List, then watch from the list's resourceVersion; any error lists again."""
        while True:
            try:
                body = await lister(*args, _preload_content=False)
                found = await body.json()
                for item in found.get("items") or []:
                    handle("ADDED", item)
                listed.set()
                events = watch.Watch()
                try:
                    async for event in events.stream(
                        lister, *args,
                        resource_version=found["metadata"]["resourceVersion"],
                        timeout_seconds=WATCH_SECONDS,
                    ):  # fmt: skip
                        if event["type"] == "ERROR":
                            raise RuntimeError(f"watch error: {event['raw_object']}")
                        handle(event["type"], event["raw_object"])
                finally:
                    await events.close()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("jobbridge watch restarts: %s", exc)
            await asyncio.sleep(0.5)

    # ---- RayClusters

    def _cluster_event(self, api: client.ApiClient, kind: str, cluster: dict[str, Any]) -> None:
        meta = cluster.get("metadata") or {}
        name = str(meta.get("name") or "")
        with self._lock:
            known = name in self._bridges or name in self._starting
            if kind != "DELETED" and not meta.get("deletionTimestamp") and not known:
                self._starting.add(name)
                asyncio.get_running_loop().create_task(self._bridge(api, cluster))
                return
        if (kind == "DELETED" or meta.get("deletionTimestamp")) and known:
            with self._lock:
                if name in self._starting:
                    self._gone.add(name)  # `_bridge` closes it once started
                bridge = self._bridges.pop(name, None)
                self._dashboards.pop(name, None)
            if bridge is not None:
                self._record("cluster-gone", name)
                self._pool.submit(bridge.close)

    async def _bridge(self, api: client.ApiClient, cluster: dict[str, Any]) -> None:
        """Annotate the RayCluster with the addresses its Ray will have, then start that Ray: the
        RayJob controller never dials the (Ray-less) head Service in between."""
        name = str(cluster["metadata"]["name"])
        gcs_port, port = (launcher.free_port(rayproc.EVERY_INTERFACE) for _ in range(2))
        head: dict[str, Any] = {**head_params(cluster), "port": gcs_port, "extra_args": dashboard_args(port)}
        if self.head_env:
            head["env"] = dict(self.head_env)
        gcs, dashboard = f"{rayproc.NODE_IP}:{gcs_port}", f"http://{rayproc.NODE_IP}:{port}"
        patch = {"metadata": {"annotations": {GCS_ANNOTATION: gcs, DASHBOARD_ANNOTATION: dashboard}}}
        try:
            await client.CustomObjectsApi(api).patch_namespaced_custom_object(
                *RAYCLUSTER.at(self.namespace), name, patch, **MERGE_PATCH
            )
        except ApiException as exc:
            if exc.status != 404:
                self._record("error", name, f"annotating RayCluster {name}: {exc.status} {exc.reason}")
            with self._lock:
                self._starting.discard(name)
            return
        bridge = RayBridge(
            self.kubeconfig,
            self.namespace,
            name,
            head=head,
            log_dir=self.log_dir / name,
            head_waits_for_pod=True,
        )
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, bridge.start)
        except Exception as exc:
            self._record("error", name, f"the Ray bridge of {name} did not start: {exc}")
            with self._lock:
                self._starting.discard(name)
            return
        with self._lock:
            self._starting.discard(name)
            gone = name in self._gone
            self._gone.discard(name)
            if not gone:
                self._bridges[name] = bridge
                self._dashboards[name] = dashboard
        if gone:
            self._record("cluster-gone", name, "deleted while its Ray started")
            self._pool.submit(bridge.close)
            return
        self._record("cluster-bridged", name, f"gcs {bridge.gcs_address}, dashboard {dashboard}")

    # ---- submitters

    def _pod_event(self, api: client.ApiClient, kind: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        containers = (pod.get("spec") or {}).get("containers") or []
        uid = str(meta.get("uid") or "")
        gone = kind == "DELETED" or bool(meta.get("deletionTimestamp"))
        targets: list[tuple[int, bool]] = []
        if BRIDGED_LABEL in labels and containers:
            targets.append((0, False))
        if labels.get("ray.io/node-type") == "head":
            targets += [(i, True) for i, c in enumerate(containers) if c.get("name") == SUBMITTER]
        for index, sidecar in targets:
            key = f"{uid}/{index}"
            with self._lock:
                process = self._processes.get(key)
                seen = key in self._runs
            if gone:
                if process is not None and process.returncode is None:
                    self._record("submitter-killed", str(meta.get("name")), "its pod is deleted")
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, 9)
                continue
            if seen or (pod.get("status") or {}).get("phase") != "Running":
                continue
            log_path = self.log_dir / f"submitter-{meta.get('name')}-{index}.log"
            run = SubmitterRun(str(meta.get("name")), str(containers[index].get("name")), sidecar, None,
                               log_path, time.monotonic(), None)  # fmt: skip
            with self._lock:
                self._runs[key] = run
            asyncio.get_running_loop().create_task(self._submit(api, pod, index, key, run))

    async def _cluster_of(self, api: client.ApiClient, pod: Mapping[str, Any], sidecar: bool) -> str | None:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if sidecar:
            return str(labels.get("ray.io/cluster") or "") or None
        job = labels.get("batch.kubernetes.io/job-name") or labels.get("job-name")
        if not job:
            return None
        try:
            found = await client.CustomObjectsApi(api).get_namespaced_custom_object(
                *RAYJOB.at(self.namespace), str(job)
            )
        except ApiException:
            return None
        return str((found.get("status") or {}).get("rayClusterName") or "") or None

    async def _dashboard_of(self, cluster: str | None) -> str | None:
        """The cluster's dashboard once its head has been ready (`submitters.head_ready`): a real
        RayCluster is Ready, and a RayJob makes its submitter, only once the head pod's readiness
        probe passed; kwok's head pods are Ready at once. A later submitter pod (a retry, after the
        head restarted) runs at once, as a kubelet would run it, ready head or not."""
        if cluster is None:
            return None
        with self._lock:
            if cluster in self._ready_once:
                return self._dashboards.get(cluster)
        deadline = time.monotonic() + DASHBOARD_WAIT
        loop = asyncio.get_running_loop()
        while time.monotonic() < deadline:
            url, bridge = self.dashboard(cluster), self.bridges().get(cluster)
            head = bridge.head if bridge is not None else None
            if url is not None and await loop.run_in_executor(self._pool, submitters.head_ready, url, head):
                with self._lock:
                    self._ready_once.add(cluster)
                return url
            await asyncio.sleep(0.5)
        return None

    async def _submit(
        self, api: client.ApiClient, pod: dict[str, Any], index: int, key: str, run: SubmitterRun
    ) -> None:
        started = submitters.now()
        container = pod["spec"]["containers"][index]
        cluster = await self._cluster_of(api, pod, run.sidecar)
        dashboard = await self._dashboard_of(cluster)
        if dashboard is None:
            why = f"no dashboard answers for cluster {cluster!r}; the command runs as written"
            self._record("error" if cluster else "submitter-no-cluster", run.pod, why)
        env, problem = await submitters.container_env(api, self.namespace, container, wait=DASHBOARD_WAIT)
        if problem is not None:
            self._record("error", run.pod, problem)
        words, env = submitters.command_and_env(container, dashboard, sidecar=run.sidecar, env=env)
        self._record("submitter-started", run.pod, " ".join(words)[:300])
        process = await submitters.spawn(words, env, run.log_path)
        with self._lock:
            self._processes[key] = process
        code = await process.wait()
        with self._lock:
            self._processes.pop(key, None)
            self._runs[key] = dataclasses.replace(run, code=code, ended=time.monotonic())
        self._record("submitter-exited", run.pod, f"code {code}; log {run.log_path}")
        error = await submitters.write_exit(
            api, self.namespace, run.pod, container, index, code, started, sidecar=run.sidecar
        )
        if error is not None:
            self._record("error", run.pod, error)
