#!/usr/bin/env python3
"""`make demo`: rayscale scaling a RayCluster from a RayResourceRequest, on a real API server.

1. Use $KUBECONFIG's cluster if it answers, else bring up the local control plane.
2. Install the CRDs and the Helm chart's RBAC (no operator replica: there is no image here).
3. Run rayscale out of cluster with a token of the chart's ServiceAccount.
4. Apply examples/demo/: an autoscaling RayCluster (CPU, GPU and a 2-host TPU group, all at 0)
   and a RayResourceRequest, and show the groups growing until the request is Satisfied.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "localk8s"))
import localk8s  # noqa: E402

NS = "rayscale-demo"
RELEASE = "rayscale"
SYSTEM_NS = "rayscale-system"


def say(text: str) -> None:
    print(f"\n==> {text}", flush=True)


class Kubectl:
    def __init__(self, binary: str, kubeconfig: str) -> None:
        self.binary = binary
        self.env = {**os.environ, "KUBECONFIG": kubeconfig}

    def __call__(self, *args: str, check: bool = True, stdin: str | None = None, quiet: bool = False) -> str:
        out = subprocess.run([self.binary, *args], env=self.env, input=stdin, capture_output=True, text=True,
                             check=False, timeout=180)  # fmt: skip
        if check and out.returncode != 0:
            raise SystemExit(f"kubectl {' '.join(args)} failed: {out.stderr.strip()}")
        if not quiet and out.stdout.strip():
            print(out.stdout.rstrip(), flush=True)
        return out.stdout


def cluster_kubeconfig(bindir: Path, state_dir: Path) -> str:
    kubeconfig = os.environ.get("KUBECONFIG", "")
    if kubeconfig and subprocess.run(
        [str(bindir / "kubectl"), "--request-timeout=5s", "get", "--raw", "/readyz"],
        env={**os.environ, "KUBECONFIG": kubeconfig}, capture_output=True, check=False,
    ).returncode == 0:  # fmt: skip
        say(f"Using the cluster of KUBECONFIG={kubeconfig}")
        return kubeconfig
    say("Bringing up the local control plane (etcd, kube-apiserver, scheduler, controller-manager, kwok)")
    with contextlib.redirect_stdout(sys.stderr):
        code = localk8s.main(["up", "--dir", str(state_dir), "--bindir", str(bindir)])
    if code != 0:
        raise SystemExit("the local control plane did not start")
    return str(state_dir / "kubeconfig")


def token_kubeconfig(kubectl: Kubectl, admin_kubeconfig: str, path: Path) -> str:
    token = kubectl("create", "token", f"{RELEASE}", "-n", SYSTEM_NS, "--duration=2h", quiet=True).strip()
    admin = json.loads(kubectl("config", "view", "--raw", "-o", "json", quiet=True))
    cluster = admin["clusters"][0]
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "clusters": [cluster],
        "users": [{"name": "rayscale", "user": {"token": token}}],
        "contexts": [{"name": "rayscale", "context": {"cluster": cluster["name"], "user": "rayscale"}}],
        "current-context": "rayscale",
    }))  # fmt: skip
    return str(path)


def progress(kubectl: Kubectl) -> tuple[str, bool]:
    rc = json.loads(kubectl("get", "raycluster", "demo", "-n", NS, "-o", "json", quiet=True))
    pods = json.loads(kubectl("get", "pods", "-n", NS, "-l", "ray.io/cluster=demo", "-o", "json", quiet=True))
    rrr = json.loads(kubectl("get", "rayresourcerequest", "reserve", "-n", NS, "-o", "json", quiet=True))
    running: dict[str, int] = {}
    for pod in pods["items"]:
        if pod["status"].get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp"):
            group = pod["metadata"]["labels"].get("ray.io/group", "?")
            running[group] = running.get(group, 0) + 1
    parts, done = [], True
    for g in rc["spec"]["workerGroupSpecs"]:
        hosts = int(g.get("replicas", 0)) * int(g.get("numOfHosts", 1))
        have = running.get(g["groupName"], 0)
        done = done and have == hosts
        parts.append(f"{g['groupName']}: replicas {g.get('replicas', 0)}, pods Running {have}/{hosts}")
    status = rrr.get("status") or {}
    phase = status.get("phase", "-")
    done = done and phase == "Satisfied" and running.get("headgroup", 0) == 1
    line = f"  {' | '.join(parts)} | request {phase}"
    if status.get("message"):
        line += f" ({status['message']})"
    return line, done


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dir", default=str(ROOT / "e2e" / ".cluster"), help="local control plane state dir")
    parser.add_argument("--timeout", type=float, default=180, help="seconds to wait for the cluster to grow")
    args = parser.parse_args()

    say("Building (first run only) or reusing the control-plane binaries and Helm")
    bindir = Path(localk8s.build())
    helm = subprocess.run([str(ROOT / "e2e/tools/helm.sh")], check=True, stdout=subprocess.PIPE,
                          text=True).stdout.strip().splitlines()[-1]  # fmt: skip
    admin = cluster_kubeconfig(bindir, Path(args.dir))
    kubectl = Kubectl(str(bindir / "kubectl"), admin)

    say("Installing the CRDs (server-side apply) and the chart's ServiceAccount and RBAC")
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/rayclusters.ray.io",
            "crd/rayresourcerequests.rayscale.io")  # fmt: skip
    for ns in (SYSTEM_NS, NS):
        kubectl("create", "namespace", ns, check=False, quiet=True)
    rendered = subprocess.run(
        [helm, "template", RELEASE, str(ROOT / "charts/rayscale"), "--namespace", SYSTEM_NS,
         "--set", "replicas=0", "--set", f"watchNamespace={{{NS}}}", "--set", f"fullnameOverride={RELEASE}"],
        check=True, stdout=subprocess.PIPE, text=True,
    ).stdout  # fmt: skip
    kubectl("apply", "-f", "-", stdin=rendered)

    with tempfile.TemporaryDirectory(prefix="rayscale-demo-") as tmp:
        sa_kubeconfig = token_kubeconfig(kubectl, admin, Path(tmp) / "kubeconfig")
        log = Path(tmp) / "rayscale.log"
        say(f"Running `rayscale run --namespace {NS}` with the chart's ServiceAccount token")
        with log.open("wb") as out:
            operator = subprocess.Popen(
                [sys.executable, "-m", "rayscale", "run", "--namespace", NS, "--liveness", "",
                 "--metrics-port", "0", "--autoscaler-interval", "2"],
                env={**os.environ, "KUBECONFIG": sa_kubeconfig}, stdout=out, stderr=subprocess.STDOUT,
                preexec_fn=localk8s.set_parent_death_signal,
            )  # fmt: skip
        try:
            kubectl("delete", "rayresourcerequest,raycluster", "--all", "-n", NS, "--wait=true", quiet=True)
            say("Applying examples/demo/: an autoscaling RayCluster (groups at 0) and a RayResourceRequest")
            kubectl("apply", "-n", NS, "-f", str(ROOT / "examples/demo"))
            say("Watching the cluster grow (the scheduler packs the reserved bundles into the fewest hosts)")
            deadline = time.monotonic() + args.timeout
            last = ""
            while True:
                line, done = progress(kubectl)
                if line != last:
                    print(line, flush=True)
                    last = line
                if done:
                    break
                if operator.poll() is not None or time.monotonic() > deadline:
                    print(log.read_text(errors="replace")[-3000:])
                    raise SystemExit("the demo cluster did not reach its size; rayscale's log is above")
                time.sleep(1)
            say("Done. What the API server now holds:")
            kubectl("get", "rayclusters,rayresourcerequests", "-n", NS)
            kubectl("get", "pods", "-n", NS, "-L", "ray.io/group", "-o", "wide")
            say("rayscale's own view of its decision (status.autoscaler of the RayCluster):")
            rc = json.loads(kubectl("get", "raycluster", "demo", "-n", NS, "-o", "json", quiet=True))
            print(yaml.safe_dump((rc.get("status") or {}).get("autoscaler") or {}, sort_keys=False).rstrip())
            print(
                "  (gcs.reachable is false: no Ray runs in this demo, so the demand is the request's "
                "and nothing running is removed)"
            )
            say("rayscale's Events on the RayCluster:")
            columns = "custom-columns=REASON:.reason,MESSAGE:.message"
            kubectl("get", "events", "-n", NS, "--field-selector", "involvedObject.kind=RayCluster",
                    "--sort-by=.lastTimestamp", "-o", columns)  # fmt: skip
        finally:
            operator.terminate()
            operator.wait(timeout=30)

    patch = '{"spec":{"bundles":[{"resources":{"GPU":1},"count":9}]}}'
    print(f"""
Try next (the cluster keeps running):
  export KUBECONFIG={Path(admin).resolve()} PATH={bindir}:$PATH
  .venv/bin/rayscale run --namespace {NS} &        # the operator again, with the admin credentials
  kubectl -n {NS} patch rayresourcerequest reserve --type=merge -p '{patch}'
  kubectl -n {NS} get rayresourcerequest reserve   # 9 GPUs > maxReplicas 4: Unsatisfiable, MAX_REPLICAS
  kubectl -n {NS} get raycluster demo -o jsonpath='{{.status.autoscaler.unmetDemand}}'   # ...and why
  curl -s localhost:8080/metrics | grep rayscale_autoscaler_unmet   # the same, as Prometheus sees it
  .venv/bin/rayscale simulate examples/scenarios/mixed-cpu-gpu.yaml   # ask the scheduler offline
Stop the local cluster with `make cluster-down`.""")
    return 0


if __name__ == "__main__":
    sys.exit(main())
