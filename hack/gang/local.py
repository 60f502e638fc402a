"""scheduler-plugins' kube-scheduler (build.sh: the sigs.k8s.io/scheduler-plugins module's
cmd/scheduler, unchanged) as a process on this machine: a second scheduler beside the cluster's
default one, gang-scheduling the pods that name it, as scheduler-plugins installs it "as a second
scheduler".

- Its profile is ``scheduler-plugins-scheduler`` (`SCHEDULER_NAME`, the name KubeRay's and rayscale's
  ``--batch-scheduler scheduler-plugins`` give the pods); it runs the default plugins plus
  Coscheduling at every extension point, and Coscheduling's queue sort (scheduler-plugins'
  manifests/coscheduling/scheduler-config.yaml). Pods of the default scheduler are not its.
- A gang is a PodGroup (scheduling.x-k8s.io/v1alpha1) and the pods labelled
  ``scheduling.x-k8s.io/pod-group: <its name>`` (`POD_GROUP_LABEL`): none is bound until
  ``minMember`` of them fit at once (Coscheduling's Permit holds those that fit; a member that does
  not fit rejects those held). Only the PodGroup CRD is installed: the plugin reads a PodGroup's
  spec alone; scheduler-plugins' controller (PodGroup status) is not run.
- Leader election off; its secure port (health, metrics) on a free port of 127.0.0.1, checked as
  the local control plane checks its own kube-scheduler (self-signed, the admin kubeconfig for
  delegated authentication and authorization); no client-side rate limit (launcher.UNTHROTTLED).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from hack.localk8s import launcher, testcluster

HERE = Path(__file__).resolve().parent
SCHEDULER_NAME = "scheduler-plugins-scheduler"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
API_GROUP, VERSION, PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"
CRD_FILE = "scheduling.x-k8s.io_podgroups.yaml"
CRD_NAME = f"{PLURAL}.{API_GROUP}"
# How long Coscheduling's Permit holds the members that fit while the rest are scheduled
# (scheduler-plugins' own manifests say 10 s); then those held go back to the queue.
PERMIT_WAITING_SECONDS = 10
# How long a pod the scheduler found unschedulable waits, at most, before it is tried again without
# an event that could make it fit (kube-scheduler's default is 5 minutes; it looks every 30 s). A
# gang's members that Coscheduling rejected wait for a Pod or PodGroup event alone: a new Node does
# not wake them, so without this a gang that fits once a Node came would wait out the 5 minutes.
UNSCHEDULABLE_RETRY_SECONDS = 30
READY_TIMEOUT = 120.0


def build() -> Path:
    """Run build.sh (a no-op when the cache is warm) and return the directory it built into."""
    out = subprocess.run(
        [str(HERE / "build.sh")], check=True, stdout=subprocess.PIPE, text=True, timeout=3600
    )
    return Path(out.stdout.strip().splitlines()[-1])


def _unthrottled() -> dict[str, int]:
    """launcher.UNTHROTTLED (the local kube-scheduler's flags) as clientConnection's qps and burst."""
    return {
        key.removeprefix("--kube-api-"): int(value)
        for key, value in (flag.split("=") for flag in launcher.UNTHROTTLED)
    }


def configuration(kubeconfig: Path) -> dict[str, Any]:
    """The KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) of a local process."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig), **_unthrottled()},
        "profiles": [
            {
                "schedulerName": SCHEDULER_NAME,
                "plugins": {
                    "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                    "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
                },
                "pluginConfig": [
                    {
                        "name": "Coscheduling",
                        "args": {"permitWaitingTimeSeconds": PERMIT_WAITING_SECONDS},
                    }
                ],
            }
        ],
    }


def pod_group(name: str, namespace: str, min_member: int) -> dict[str, Any]:
    """A PodGroup of `min_member` pods (no minResources: the members' own requests are checked)."""
    return {
        "apiVersion": f"{API_GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member},
    }


class LocalGangScheduler:
    """The gang scheduler against `cluster`, its files in `workdir`; `install`, `start`,
    `wait_ready`, `stop`."""

    def __init__(self, cluster: testcluster.ClusterHandle, bindir: Path, workdir: Path) -> None:
        self.cluster = cluster
        self.bindir = bindir
        self.workdir = workdir
        self.port = launcher.free_port()
        self.log = workdir / "gang-scheduler.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def install(self) -> None:
        """The PodGroup CRD of the version built, established."""
        crd = self.bindir / CRD_FILE
        self.cluster.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", str(crd))
        self.cluster.kubectl_run("wait", "--for=condition=Established", "--timeout=60s", f"crd/{CRD_NAME}")

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "config.yaml"
        config.write_text(yaml.safe_dump(configuration(self.cluster.kubeconfig)))
        kubeconfig = str(self.cluster.kubeconfig)
        command = [
            str(self.bindir / "gang-scheduler"), f"--config={config}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={self.port}", "--profiling=false",
            f"--pod-max-in-unschedulable-pods-duration={UNSCHEDULABLE_RETRY_SECONDS}s",
        ]  # fmt: skip
        self.proc = launcher.spawn_logged(command, self.cluster.env, self.log)

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """/readyz answers 200 (its informers synced); LaunchError, with the log's end, if it exits
        or times out."""
        url = f"https://127.0.0.1:{self.port}/readyz"
        launcher.poll(
            "the gang scheduler's /readyz",
            lambda: launcher.http_ok(url, insecure=True),
            timeout,
            self.proc,
            self.log,
        )

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM, SIGKILL after 15 s."""
        if self.proc is not None:
            launcher.end(self.proc, 15)
            self.proc = None

    def output(self, lines: int = 60) -> str:
        return launcher.tail(self.log, lines)


@contextlib.contextmanager
def serving(cluster: testcluster.ClusterHandle, workdir: Path) -> Iterator[LocalGangScheduler]:
    """The gang scheduler built (or found in the cache), its CRD installed, started against
    `cluster` and ready while the block runs; stopped on the way out."""
    scheduler = LocalGangScheduler(cluster, build(), workdir)
    scheduler.install()
    scheduler.start()
    try:
        scheduler.wait_ready()
        yield scheduler
    finally:
        scheduler.stop()
