"""Kueue's manager (build.sh: the sigs.k8s.io/kueue module's cmd/kueue, unchanged) as a process on
this machine, serving a cluster as Kueue's own install does: its CRDs, its webhooks, its internal
certificate management.

What differs from Kueue's manifests, and why:

- The API server reaches the webhooks through an ExternalName Service: ``kueue-webhook-service``
  in ``kueue-system`` names 127.0.0.1, and the webhook configurations and the CRDs' conversion
  webhooks refer to it with the port Kueue listens on. The API server resolves an ExternalName
  Service to that host (k8s.io/apiserver's ResolveCluster) and checks the certificate for
  ``kueue-webhook-service.kueue-system.svc``, the name Kueue's internal certificate management
  issues it for; Kueue writes the CA into the webhook configurations and CRDs itself, and the
  certificate into its Secret, whose keys `LocalKueue` writes into the webhook server's certDir as a
  kubelet mounts them into Kueue's pod. (With internal certificate management off, Kueue v0.17.0's
  cmd/kueue reads the metrics server's certificate from /etc/kueue/metrics/certs, a path it does
  not let one change.)
- Only the webhooks of Kueue's own objects (kueue.x-k8s.io) and of the two integrations enabled,
  ``ray.io/raycluster`` and ``ray.io/rayjob``, are installed; the Ray ones only for namespaces
  labelled ``rayscale.io/kueue=enabled`` (`MANAGED_LABEL`), which is also Kueue's
  ``managedJobsNamespaceSelector``: a Kueue that is down never fails another test's RayClusters.
- Leader election off; the webhook server, health probes and metrics on free ports of 127.0.0.1;
  the visibility server (feature gate VisibilityOnDemand) off, it would need an APIService.
- Feature gate ElasticJobsViaWorkloadSlices on (alpha, off by default in v0.17.0): Kueue refuses a
  RayCluster or RayJob with ``enableInTreeAutoscaling`` unless it is on and the object carries the
  annotation ``kueue.x-k8s.io/elastic-job: "true"``.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from hack.localk8s import launcher, testcluster

HERE = Path(__file__).resolve().parent
NAMESPACE = "kueue-system"
SERVICE = "kueue-webhook-service"  # what Kueue's certificate is issued for: SERVICE.NAMESPACE.svc
SECRET = "kueue-webhook-server-cert"
MANAGED_LABEL = "rayscale.io/kueue"
MANAGED_VALUE = "enabled"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
INTEGRATIONS = ("ray.io/rayjob", "ray.io/raycluster")
RAY_RESOURCES = frozenset({"rayclusters", "rayjobs"})
FEATURE_GATES = {"ElasticJobsViaWorkloadSlices": True, "VisibilityOnDemand": False}
NAME_PREFIX = "kueue-"  # Kueue's kustomization (config/default) prefixes every name with it
READY_TIMEOUT = 180.0


def build() -> Path:
    """Run build.sh (a no-op when the cache is warm) and return the directory it built into."""
    out = subprocess.run(
        [str(HERE / "build.sh")], check=True, stdout=subprocess.PIPE, text=True, timeout=3600
    )
    return Path(out.stdout.strip().splitlines()[-1])


def _documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _service_ref(port: int, path: str) -> dict[str, Any]:
    return {"namespace": NAMESPACE, "name": SERVICE, "path": path, "port": port}


def crds(bindir: Path, port: int) -> list[dict[str, Any]]:
    """Kueue's CRDs, with the conversion webhooks its kustomization patches in (config/components/crd)."""
    crd_dir = bindir / "crd"
    kustomization = yaml.safe_load((crd_dir / "kustomization.yaml").read_text())
    by_name = {}
    for resource in kustomization["resources"]:
        (crd,) = _documents(crd_dir / resource)
        by_name[crd["metadata"]["name"]] = crd
    for patch in kustomization.get("patches") or []:
        (doc,) = _documents(crd_dir / patch["path"])
        conversion = doc["spec"]["conversion"]
        service = conversion["webhook"]["clientConfig"]["service"]
        conversion["webhook"]["clientConfig"]["service"] = _service_ref(port, service["path"])
        by_name[doc["metadata"]["name"]]["spec"]["conversion"] = conversion
    return list(by_name.values())


def _kept(webhook: dict[str, Any]) -> bool:
    """Kueue's own objects and the enabled Ray integrations; not Jobs, pods, JobSets, ..."""
    groups = {g for rule in webhook["rules"] for g in rule["apiGroups"]}
    resources = {r for rule in webhook["rules"] for r in rule["resources"]}
    return groups == {"kueue.x-k8s.io"} or (groups == {"ray.io"} and resources <= RAY_RESOURCES)


def webhook_configurations(bindir: Path, port: int) -> list[dict[str, Any]]:
    """Kueue's generated webhook configurations (config/components/webhook/manifests.yaml), named
    as its kustomization names them, for the webhooks `_kept`, calling `SERVICE` on `port`."""
    configs = []
    for doc in _documents(bindir / "webhook-manifests.yaml"):
        webhooks = [w for w in doc["webhooks"] if _kept(w)]
        for hook in webhooks:
            hook["clientConfig"] = {"service": _service_ref(port, hook["clientConfig"]["service"]["path"])}
            if "ray.io" in hook["rules"][0]["apiGroups"]:
                hook["namespaceSelector"] = {"matchLabels": {MANAGED_LABEL: MANAGED_VALUE}}
        doc["metadata"]["name"] = NAME_PREFIX + doc["metadata"]["name"]
        configs.append({**doc, "webhooks": webhooks})
    return configs


def support_objects() -> list[dict[str, Any]]:
    """Kueue's namespace (labelled: the readiness probe's RayCluster is checked there), the Secret
    its certificate management fills (config/components/internalcert) and the Service the API
    server calls its webhooks through."""
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": NAMESPACE, "labels": {MANAGED_LABEL: MANAGED_VALUE}}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET, "namespace": NAMESPACE}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE, "namespace": NAMESPACE},
         "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}},
    ]  # fmt: skip


def configuration(
    *, webhook_port: int, health_port: int, metrics_port: int, cert_dir: Path
) -> dict[str, Any]:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2) for a local process."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": SERVICE,
            "webhookSecretName": SECRET,
        },
        "managedJobsNamespaceSelector": {"matchLabels": {MANAGED_LABEL: MANAGED_VALUE}},
        "integrations": {"frameworks": list(INTEGRATIONS)},
        "featureGates": dict(FEATURE_GATES),
    }


def probe_cluster() -> dict[str, Any]:
    """The RayCluster created with ``--dry-run=server`` to learn that the API server reaches
    Kueue's webhooks: Kueue's mutating webhook suspends it (it names a queue)."""
    head = {"name": "ray-head", "image": "rayproject/ray:2.60.0"}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "kueue-probe", "namespace": NAMESPACE, "labels": {QUEUE_LABEL: "probe"}},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [head]}}}},
    }


class LocalKueue:
    """Kueue's manager against `cluster`, its files in `workdir`; `install`, `start`, `wait_ready`,
    `stop` (which removes the webhook configurations before the process goes)."""

    def __init__(self, cluster: testcluster.ClusterHandle, bindir: Path, workdir: Path) -> None:
        self.cluster = cluster
        self.bindir = bindir
        self.workdir = workdir
        self.webhook_port = launcher.free_port()
        self.health_port = launcher.free_port()
        self.metrics_port = launcher.free_port()
        self.log = workdir / "kueue.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def apply(self, objects: Iterable[dict[str, Any]]) -> None:
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
        self.cluster.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", "-", input=body)

    def install(self) -> None:
        """Kueue's CRDs (established), namespace, Secret, Service and webhook configurations."""
        found = crds(self.bindir, self.webhook_port)
        self.apply(found)
        names = [f"crd/{crd['metadata']['name']}" for crd in found]
        self.cluster.kubectl_run("wait", "--for=condition=Established", "--timeout=60s", *names)
        self.apply(support_objects())
        # Before the manager starts: its certificate management waits until it has written the CA
        # into every webhook configuration and CRD it knows.
        self.apply(webhook_configurations(self.bindir, self.webhook_port))

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "config.yaml"
        settings = configuration(
            webhook_port=self.webhook_port,
            health_port=self.health_port,
            metrics_port=self.metrics_port,
            cert_dir=self.cert_dir,
        )
        config.write_text(yaml.safe_dump(settings))
        command = [str(self.bindir / "kueue"), f"--config={config}"]
        self.proc = launcher.spawn_logged(command, self.cluster.env, self.log)  # KUBECONFIG in env

    @property
    def cert_dir(self) -> Path:
        return self.workdir / "certs"

    def _mount_secret(self) -> bool:
        """The kubelet's part: the keys of Kueue's certificate Secret as files in the webhook
        server's certDir (Kueue waits for them before it serves). True once they are there and
        the same as the Secret's."""
        secret = json.loads(
            self.cluster.kubectl_run("get", "-n", NAMESPACE, f"secret/{SECRET}", "-o", "json")
        )
        data = {key: base64.b64decode(value) for key, value in (secret.get("data") or {}).items()}
        if not {"ca.crt", "tls.crt", "tls.key"} <= data.keys():
            return False  # not issued yet
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        same = True
        for key, value in data.items():
            path = self.cert_dir / key
            if not path.exists() or path.read_bytes() != value:
                tmp = path.with_suffix(".tmp")
                tmp.write_bytes(value)
                tmp.replace(path)
                same = False
        return same

    def _ready(self) -> bool:
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        return self._mount_secret() and launcher.http_ok(url)

    def _webhooks_answer(self) -> bool:
        """The API server called Kueue's webhooks for a RayCluster and Kueue suspended it."""
        out = subprocess.run(
            [self.cluster.kubectl, "create", "--dry-run=server", "-o", "json", "-f", "-"],
            env=self.cluster.env,
            input=json.dumps(probe_cluster()),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return out.returncode == 0 and json.loads(out.stdout)["spec"].get("suspend") is True

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Kueue's certificate issued and in its certDir, Kueue ready (/readyz: its certificates,
        its webhook server) and the API server reaching its webhooks; LaunchError, with the log's
        end, if it exits or times out."""
        launcher.poll("Kueue's certificate and /readyz", self._ready, timeout, self.proc, self.log)
        launcher.poll(
            "Kueue's webhooks through the API server", self._webhooks_answer, timeout, self.proc, self.log
        )

    def stop(self) -> None:
        """The webhook configurations deleted, then the process (SIGTERM, SIGKILL after 15 s)."""
        for config in webhook_configurations(self.bindir, self.webhook_port):
            kind = config["kind"].lower()
            self.cluster.kubectl_run("delete", "--ignore-not-found", f"{kind}/{config['metadata']['name']}")
        if self.proc is not None:
            launcher.end(self.proc, 15)
            self.proc = None

    def output(self, lines: int = 60) -> str:
        return launcher.tail(self.log, lines)
