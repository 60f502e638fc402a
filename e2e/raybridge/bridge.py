"""The Ray bridge: real Ray nodes on this machine for the pods of one RayCluster on kwok nodes.

kwok runs no containers, so a RayCluster on the local control plane has pods but no Ray. The
bridge stands in for the containers: it starts a real Ray head (``--num-cpus`` as the head group's
``rayStartParams`` say, 0 by default, as KubeRay's e2e clusters have it) and, for every worker pod
of the cluster that is Running and not being deleted, a local Ray worker with the logical
resources and labels of the pod's generated ``ray start`` command, ``RAY_CLOUD_INSTANCE_ID`` = the
pod name and ``RAY_NODE_TYPE_NAME`` = its group (see podspec.py). When the pod gets a
deletionTimestamp or disappears, exactly that worker is stopped (its process group, by PID), as a
kubelet would stop the container. Workers are small: a tiny object store, no dashboard.

Like Kubernetes running Ray without GCS fault tolerance:

- The head pod decides whether the Ray head runs. When it is deleted (or stops Running) the Ray
  head is stopped; when a head pod Runs again a new Ray head starts on the same GCS port: a new
  Ray session, in which the old workers are unknown. Until the cluster has a head pod, the head
  started by `start` runs (the RayCluster needs its address first).
- A worker whose ``ray start`` exits on its own while its pod still Runs (its raylet lost the
  GCS, which Ray gives up on after 60 s, or crashed) is started again `restart_delay` seconds
  later, once the head runs, as a kubelet restarts a container. A drained node's worker exits
  too, but its pod is deleted before the delay ends.
- The head gets extra environment through ``head={"env": {...}}`` (e.g.
  ``RAY_enable_infeasible_task_early_exit``).

rayscale finds the head through the RayCluster annotation ``rayscale.io/gcs-address`` =
`RayBridge.gcs_address`: start the bridge first, then create the cluster with it. rayscale follows
the annotation only when it runs with ``--allow-gcs-address-override`` (otherwise it dials the
cluster's head Service, which has no Ray behind it here).

    with RayBridge(kubeconfig, "ns", "raycluster") as bridge:
        body["metadata"]["annotations"] = {GCS_ANNOTATION: bridge.gcs_address}
        ...  # create the RayCluster; bridge.workers() shows the Ray workers running

Pods are watched (list, then watch from its resourceVersion; any error or an expired
resourceVersion lists again) on a thread of the bridge's own, so the bridge works under sync and
async tests alike. Every Ray process dies with the test process, however that dies
(``PR_SET_PDEATHSIG``).

The parts: podwatch.py (the pod watch), headkeeper.py (the Ray head following the head pod),
workerkeeper.py (a Ray worker per live worker pod), context.py (the events, timers and closing
flag they share), podspec.py (what a pod asks for, pure); this module puts them together.

Also a command: ``python -m e2e.raybridge.bridge --namespace NS --cluster NAME [--annotate]``
runs the bridge until Ctrl-C or SIGTERM (e.g. after ``make demo``, next to ``rayscale run
--allow-gcs-address-override``). ``make demo`` (e2e/demo.py) uses the class.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from e2e.raybridge import podenv, podspec, rayproc
from e2e.raybridge.context import BridgeContext, BridgeEvent
from e2e.raybridge.headkeeper import HeadKeeper
from e2e.raybridge.podwatch import Pods, PodWatch
from e2e.raybridge.workerkeeper import WorkerKeeper

from rayscale.resources import parse_resources_param

__all__ = ["GCS_ANNOTATION", "OBJECT_STORE_BYTES", "BridgeEvent", "RayBridge", "head_params"]

GCS_ANNOTATION = "rayscale.io/gcs-address"
OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Ray's minimum is 75 MiB; the object store is mapped lazily


def head_params(raycluster: Mapping[str, Any]) -> dict[str, Any]:
    """`rayproc.start_head` keyword arguments from a RayCluster's head ``rayStartParams``.

    ``num-cpus`` defaults to 0 (no work on the head, as in KubeRay's e2e clusters).
    """
    params = ((raycluster.get("spec") or {}).get("headGroupSpec") or {}).get("rayStartParams") or {}
    out: dict[str, Any] = {"num_cpus": float(params.get("num-cpus", 0))}
    if "num-gpus" in params:
        out["num_gpus"] = float(params["num-gpus"])
    if "resources" in params:
        out["resources"] = parse_resources_param(str(params["resources"]))
    return out


class RayBridge:
    """A Ray head plus one Ray worker per live worker pod of RayCluster `cluster` in `namespace`."""

    def __init__(
        self,
        kubeconfig: str | Path,
        namespace: str,
        cluster: str,
        *,
        head: Mapping[str, Any] | None = None,
        log_dir: Path | None = None,
        object_store_bytes: int = OBJECT_STORE_BYTES,
        stop_grace: float = 10.0,
        restart_delay: float = 5.0,
        head_waits_for_pod: bool = False,
    ) -> None:
        """`head`: `rayproc.start_head` keyword arguments (``num_cpus``, ``env``, ...). With
        `head_waits_for_pod` (and ``port`` in `head`), the Ray head starts only once a head pod
        Runs, as a kubelet would start it, rather than at `start`."""
        self.kubeconfig = str(kubeconfig)
        self.namespace = namespace
        self.cluster = cluster
        self._ctx = BridgeContext(
            namespace, cluster, log_dir=log_dir, stop_grace=stop_grace, restart_delay=restart_delay
        )
        self._head = HeadKeeper(
            self._ctx,
            head if head is not None else {"num_cpus": 0},
            env_of=self._ray_auth_env,
            wait_for_pod=head_waits_for_pod,
        )
        self._workers = WorkerKeeper(
            self._ctx, self._head, object_store_bytes=object_store_bytes, env_of=self._ray_auth_env
        )
        self._watch = PodWatch(
            self.kubeconfig,
            namespace,
            f"{podspec.CLUSTER_LABEL}={cluster}",
            name=f"raybridge-{cluster}",
            on_change=self._reconcile,
            tick=self._check_exits,
        )
        self._reported: set[str] = set()  # pods whose unreadable spec was recorded
        self._pods: Pods = {}  # the latest pods the watch saw

    # ---- lifecycle ----

    @property
    def gcs_address(self) -> str:
        assert self._head.address, "the bridge is not started"
        return self._head.address

    @property
    def head(self) -> rayproc.RayNode | None:
        """The Ray head process (the latest one started)."""
        return self._head.node

    def start(self, *, timeout: float = 90.0) -> RayBridge:
        """Start the head (waits for its GCS port) and the pod watch (waits for the first list)."""
        try:
            self._head.start(timeout=timeout)
            if not self._watch.start(timeout):
                raise rayproc.RayProcessError(f"the pods of {self.namespace}/{self.cluster} were not listed")
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop the watch, every worker, then the head. Idempotent."""
        self._watch.close()
        self._ctx.close()
        self._workers.close()
        self._head.close()

    def __enter__(self) -> RayBridge:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ---- what tests read ----

    def workers(self) -> dict[str, rayproc.RayNode]:
        """Pod name -> its running Ray worker process."""
        return self._workers.running()

    def history(self, kind: str | None = None, pod: str | None = None) -> list[BridgeEvent]:
        return self._ctx.history(kind, pod)

    def errors(self) -> list[BridgeEvent]:
        return self.history("error")

    def head_running(self) -> bool:
        """The Ray head runs and its GCS port accepted connections."""
        return self._head.ready.is_set()

    def _ray_auth_env(self, pod: str) -> dict[str, str]:
        """The Ray auth settings of `pod`'s Ray container (on the head or starter thread)."""
        found = self._pods.get(pod)
        containers = ((found or {}).get("spec") or {}).get("containers") or []
        if not containers:
            return {}
        return podenv.resolve_sync(self.kubeconfig, self.namespace, containers[0], keep=podenv.is_ray_auth)

    # ---- on the watch thread ----

    def _check_exits(self) -> None:
        self._workers.check_exits()
        self._head.check_exit()

    def _reconcile(self, pods: Pods) -> None:
        self._pods = dict(pods)
        wanted, unreadable = podspec.wanted_workers(pods.values(), self.cluster)
        for name, error in unreadable.items():
            if name not in self._reported:
                self._reported.add(name)
                self._ctx.record("error", name, error)
        self._head.follow(podspec.live_head(pods.values(), self.cluster))
        self._workers.want(wanted)


# ---- command line ----


def _annotate(kubeconfig: str, namespace: str, cluster: str, address: str) -> None:
    import subprocess

    subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "-n", namespace, "annotate", "--overwrite",
         f"raycluster/{cluster}", f"{GCS_ANNOTATION}={address}"],
        check=True,
        timeout=60,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG", "e2e/.cluster/kubeconfig"))
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--cluster", required=True, help="the RayCluster's name")
    parser.add_argument("--head-num-cpus", type=float, default=0)
    parser.add_argument("--log-dir", type=Path)
    parser.add_argument("--annotate", action="store_true",
                        help="point the RayCluster at the bridge's GCS (rayscale must run with "
                        "--allow-gcs-address-override to follow it)")  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    bridge = RayBridge(
        args.kubeconfig,
        args.namespace,
        args.cluster,
        head={"num_cpus": args.head_num_cpus},
        log_dir=args.log_dir,
    )
    with bridge:
        print(f"Ray head: {bridge.gcs_address}", flush=True)
        if args.annotate:
            _annotate(args.kubeconfig, args.namespace, args.cluster, bridge.gcs_address)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
