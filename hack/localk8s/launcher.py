#!/usr/bin/env python3
"""A kind-like local Kubernetes control plane without containers.

Starts etcd -> kube-apiserver -> kube-controller-manager + kube-scheduler -> kwok as
separate processes, every listener on 127.0.0.1 on a free port, each step waiting for
readiness, then creates kwok fake nodes (CPU, GPU and TPU pools from nodes.yaml beside this file).

    python -m hack.localk8s up    --dir DIR    start in the background, print `export KUBECONFIG=...`
    python -m hack.localk8s run   --dir DIR    start in the foreground until SIGTERM/SIGINT
    python -m hack.localk8s down  --dir DIR    stop exactly the processes `up` started and remove DIR
    python -m hack.localk8s status --dir DIR   say whether it runs and where
    python -m hack.localk8s demo  --dir DIR    show the nodes and their capacity
    python -m hack.localk8s nodes              print the fake nodes as a List (for kind: | kubectl apply -f -)

(from the repository root; `python hack/localk8s/launcher.py ...` is the same from anywhere, and is
how `up` and the test fixtures start the supervisor, `run`). Only the standard library is used, so
`down` works without the project's virtualenv. The binaries come from build.sh (cached in
~/.cache/rayscale/).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import ctypes
import functools
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_NODES = HERE / "nodes.yaml"
DEFAULT_DIR = REPO / "e2e" / ".cluster"  # make cluster-up's (CLUSTER_DIR)
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"
FAKE_NODE_IP = "10.240.0.1"
STATE = "state.json"
READY = "ready"
RESTARTED = "apiserver-restarted"  # written (a timestamp) after each restart SIGUSR1 asked for
PR_SET_PDEATHSIG = 1
# The kube-scheduler's and kube-controller-manager's API clients without their client-side rate
# limit (50 requests a second by default), as kwokctl's --disable-qps-limits: the scheduler binds
# pods one request each, and a benchmark of an operator should not wait behind its throttle.
UNTHROTTLED = ("--kube-api-qps=5000", "--kube-api-burst=10000")
# kwok plays the pod stages (a bound pod made Running, a deleted one removed) on 4 workers by
# default: one queue for all the fake nodes, where real kubelets start their pods node by node in
# parallel. With 4, pods bound during a 500-pod scale-up waited seconds in that queue.
KWOK_CONFIGURATION = """\
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 16
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
"""


# kwok completes every Running pod a Job owns at once (its pod-complete stage). A pod labelled
# BRIDGED_LABEL is left Running: something else reports its end (the Ray bridge runs a RayJob's
# submitter locally and writes its exit into the pod's status).
BRIDGED_LABEL = "rayscale.io/bridged"
_BRIDGED_EXCLUDED = f"""\
    - key: '.metadata.labels["{BRIDGED_LABEL}"]'
      operator: 'DoesNotExist'
"""


class LaunchError(RuntimeError):
    pass


def log(msg: str) -> None:
    print(f"localk8s: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- helpers


PORT_FLOOR = 20000  # the lowest port a component listens on (`free_port`)
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_handed_out: set[int] = set()


def _ephemeral_low() -> int:
    """The first port of the kernel's range for outgoing connections (32768 when unknown)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1", *, preferred: int | None = None) -> int:
    """A port of `host` ("": every interface) that nothing listens on now and this process has not
    handed out, below the kernel's range for outgoing connections; `preferred` when it is free.

    The one port picker of the repository: the local control plane, the tests, e2e (Ray's nodes)
    and the benchmarks take their ports here. A port the kernel picks (bind to port 0) comes from
    that range, and between this check and the component's own bind any outgoing connection may
    take it: a kube-controller-manager then failed to start ("bind: address already in use").
    Outside the range only another listener can, as it can for any port. Port 0 (the kernel's
    pick) when the range leaves no room below."""
    low = _ephemeral_low()
    tries = [preferred] if preferred is not None else []
    tries += [random.randrange(PORT_FLOOR, low) if low - PORT_FLOOR >= 1000 else 0 for _ in range(200)]
    for port in tries:
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            port = int(s.getsockname()[1])
        _handed_out.add(port)
        return port
    raise LaunchError(
        f"no free port of {host or 'every interface'} in {PORT_FLOOR}-{low - 1} after 200 tries"
    )


def end(proc: subprocess.Popen[bytes], grace: float) -> bool:
    """SIGTERM, then SIGKILL if `proc` has not exited within `grace` seconds; reaped either way.
    True when SIGTERM was enough (or it had exited already)."""
    if proc.poll() is not None:
        return True
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False
    return True


def poll(
    what: str,
    check: Callable[[], bool],
    timeout: float,
    proc: subprocess.Popen[bytes] | None = None,
    logfile: Path | None = None,
) -> None:
    """Poll `check` until it returns True; fail early if `proc` exits."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            if check():
                return
        except (OSError, urllib.error.URLError, ssl.SSLError, ValueError, KeyError):
            pass
        if proc is not None and proc.poll() is not None:
            raise LaunchError(f"{what}: process exited with code {proc.returncode}{tail(logfile)}")
        if time.monotonic() > deadline:
            raise LaunchError(f"{what}: not ready after {timeout:.0f}s{tail(logfile)}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)


def tail(logfile: Path | None, lines: int = 25) -> str:
    if logfile is None or not logfile.exists():
        return ""
    text = logfile.read_text(errors="replace").splitlines()[-lines:]
    return f"\n--- last lines of {logfile} ---\n" + "\n".join(text)


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(pki: Path) -> None:
    """CA, apiserver serving cert, service-account key pair, admin client cert (EC P-256)."""
    pki.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "3650",
        "-subj",
        "/CN=rayscale-localk8s-ca",
        cwd=pki,
    )
    sans = ",".join(
        [
            "IP:127.0.0.1",
            "IP:10.96.0.1",
            "DNS:localhost",
            "DNS:kubernetes",
            "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc",
            "DNS:kubernetes.default.svc.cluster.local",
        ]
    )
    (pki / "apiserver.ext").write_text(f"subjectAltName={sans}\nextendedKeyUsage=serverAuth\n")
    (pki / "admin.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subj in (("apiserver", "/CN=kube-apiserver"), ("admin", "/O=system:masters/CN=admin")):
        openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subj, cwd=pki)
        openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.crt",
            "-days",
            "3650",
            "-extfile",
            f"{name}.ext",
            cwd=pki,
        )
    openssl(
        "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", "sa.key", cwd=pki
    )
    openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


def write_kubeconfig(path: Path, server: str, pki: Path) -> None:
    def b64(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    # JSON is valid YAML, and kubectl, client-go, kopf and kubernetes-asyncio all read it.
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "localk8s", "cluster": {"server": server, "certificate-authority-data": b64("ca.crt")}}
        ],
        "users": [
            {
                "name": "admin",
                "user": {"client-certificate-data": b64("admin.crt"), "client-key-data": b64("admin.key")},
            }
        ],
        "contexts": [{"name": "localk8s", "context": {"cluster": "localk8s", "user": "admin"}}],
        "current-context": "localk8s",
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cfg, indent=2) + "\n")
    tmp.replace(path)


class Api:
    """A minimal HTTPS client for the admin identity (standard library only)."""

    def __init__(self, server: str, pki: Path) -> None:
        self.server = server
        self.ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))

    def request(self, method: str, path: str, body: Any = None, timeout: float = 10) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.server + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        with urllib.request.urlopen(req, context=self.ctx, timeout=timeout) as resp:
            raw = resp.read()
            if resp.headers.get_content_type() != "application/json":
                return raw.decode(errors="replace")
            return json.loads(raw or b"null")

    def ok(self, path: str) -> bool:
        try:
            self.request("GET", path, timeout=3)
            return True
        except urllib.error.HTTPError:
            return False


def http_ok(url: str, insecure: bool = False) -> bool:
    ctx = None
    if url.startswith("https"):
        ctx = ssl.create_default_context()
        if insecure:  # self-signed serving certs of controller-manager and scheduler
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(url, context=ctx, timeout=3) as resp:
        return bool(resp.status == 200)


def set_parent_death_signal() -> None:
    """In the child, before exec: SIGKILL when the parent dies (Linux ``PR_SET_PDEATHSIG``).

    Strictly: when the parent *thread* that started the child ends. Prefer `dying_with_parent`,
    which needs no Python in the child."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def dying_with_parent(command: Sequence[str]) -> tuple[list[str], Callable[[], None] | None]:
    """`command` made to get SIGKILL when the thread that starts it ends, and the ``preexec_fn``
    to start it with: ``(argv, preexec_fn)`` for `subprocess.Popen` and
    `asyncio.create_subprocess_exec`.

    util-linux's ``setpriv --pdeathsig KILL`` sets the signal and execs the command, so no
    Python runs between fork and exec and the child can even be vforked. That matters in a
    process with gRPC threads (Ray's client, rayscale's GCS client): a preexec_fn makes Python
    run its fork handlers, and gRPC's crash the child now and then ("epoll_wait error: Bad file
    descriptor", exit -6). Without setpriv, the preexec_fn does it."""
    setpriv = shutil.which("setpriv")
    if setpriv:
        return [setpriv, "--pdeathsig", "KILL", "--", *command], None
    return list(command), set_parent_death_signal


def spawn_logged(command: Sequence[str], env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`command` started in a session of its own, dying with the thread that starts it
    (`dying_with_parent`), its stdout and stderr appended to `log`, no stdin."""
    argv, preexec = dying_with_parent(command)
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=preexec,
        )


# --------------------------------------------------------------------------- node pools


def load_pools(path: Path, scale: dict[str, int]) -> list[dict[str, Any]]:
    """Read the node pools file (nodes.yaml) and apply --scale overrides."""
    try:
        import yaml  # the project's virtualenv has it
    except ImportError as exc:
        raise LaunchError("PyYAML is needed to read the node pools: run `make install` first") from exc
    doc = yaml.safe_load(path.read_text())
    pools = list(doc["pools"])
    for pool in pools:
        if pool["name"] in scale:
            pool["count"] = scale.pop(pool["name"])
    if scale:
        raise LaunchError(
            f"--scale names unknown pools: {', '.join(scale)} (pools: {[p['name'] for p in pools]})"
        )
    return pools


def node_objects(pools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    nodes = []
    for pool in pools:
        for i in range(int(pool["count"])):
            name = f"kwok-{pool['name']}-{i}"
            capacity = {k: str(v) for k, v in pool["capacity"].items()}
            capacity.setdefault("pods", "110")
            labels = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                "rayscale.io/node-pool": pool["name"],
                **{k: str(v) for k, v in (pool.get("labels") or {}).items()},
            }
            nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "labels": labels,
                        "annotations": {"kwok.x-k8s.io/node": "fake"},
                    },
                    "spec": {"providerID": f"kwok://{name}", "taints": pool.get("taints") or []},
                    "status": {"capacity": capacity, "allocatable": capacity},
                }
            )
    return nodes


# --------------------------------------------------------------------------- the cluster


# Every write but the nodes' heartbeats (their Leases and status), at Metadata level: who wrote
# (user agent), what, when (requestReceivedTimestamp), and the answer's code. Chaos runs read it
# to check that only the holder of rayscale's Lease wrote.
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  namespaces: ["kube-node-lease"]
- level: None
  resources: [{group: "", resources: ["nodes", "nodes/status"]}]
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
"""


class Cluster:
    def __init__(self, state_dir: Path, bindir: Path) -> None:
        self.dir = state_dir
        self.bin = bindir
        self.pki = state_dir / "pki"
        self.logs = state_dir / "logs"
        self.kubeconfig = state_dir / "kubeconfig"
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.args: dict[str, list[str]] = {}
        self.ports: dict[str, int] = {}
        self.audit = False  # log every write to the API server (chaos runs read who wrote what)

    def _stages(self) -> list[Path]:
        """kwok's pod stages; pod-complete rewritten to leave pods labelled BRIDGED_LABEL alone."""
        out: list[Path] = []
        for path in sorted((self.bin / "stages").glob("*.yaml")):
            if path.name == "pod-complete.yaml":
                text = path.read_text()
                marker = "    matchExpressions:\n"
                if marker not in text:
                    raise LaunchError(f"no matchExpressions in {path}")
                path = self.dir / path.name
                path.write_text(text.replace(marker, marker + _BRIDGED_EXCLUDED, 1))
            out.append(path)
        return out

    def start(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        logfile = self.logs / f"{name}.log"
        out = logfile.open("ab")
        binary = name if name != "etcd" else "etcd"
        argv, preexec = dying_with_parent([str(self.bin / binary), *args])
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=preexec,
            cwd=self.dir,
        )
        out.close()
        self.procs.append((name, proc))
        self.args[name] = args
        self.save_state()
        return proc

    def restart(self, name: str) -> None:
        """Stop one component (SIGTERM, SIGKILL after 10 s) and start it again with the same
        arguments; for the kube-apiserver, wait until it is ready again."""
        for i, (n, proc) in enumerate(self.procs):
            if n != name:
                continue
            end(proc, 10)
            del self.procs[i]
            new = self.start(name, self.args[name])
            if name == "kube-apiserver":
                api = Api(f"https://127.0.0.1:{self.ports['apiserver']}", self.pki)
                poll(name, functools.partial(api.ok, "/readyz"), 60, new, self.logs / f"{name}.log")
            log(f"{name} restarted (pid {new.pid})")
            self.save_state()
            return
        raise LaunchError(f"no component {name}")

    def save_state(self, **extra: Any) -> None:
        state = {
            "supervisor": os.getpid(),
            "bindir": str(self.bin),
            "kubeconfig": str(self.kubeconfig),
            "ports": self.ports,
            "components": [{"name": n, "pid": p.pid} for n, p in self.procs],
            **extra,
        }
        tmp = self.dir / (STATE + ".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.dir / STATE)

    def bring_up(self, pools: list[dict[str, Any]]) -> float:
        t0 = time.monotonic()
        self.logs.mkdir(parents=True, exist_ok=True)
        make_pki(self.pki)
        for name in ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok"):
            self.ports[name] = free_port()
        p = self.ports
        pki = self.pki

        etcd = self.start(
            "etcd",
            [
                "--name=localk8s",
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{p['etcd']}",
                f"--advertise-client-urls=http://127.0.0.1:{p['etcd']}",
                f"--listen-peer-urls=http://127.0.0.1:{p['etcd-peer']}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{p['etcd-peer']}",
                f"--initial-cluster=localk8s=http://127.0.0.1:{p['etcd-peer']}",
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=4294967296",
                "--log-level=warn",
            ],
        )
        poll(
            "etcd", lambda: http_ok(f"http://127.0.0.1:{p['etcd']}/health"), 30, etcd, self.logs / "etcd.log"
        )
        log(f"etcd ready on 127.0.0.1:{p['etcd']} ({time.monotonic() - t0:.1f}s)")

        server = f"https://127.0.0.1:{p['apiserver']}"
        apiserver = self.start(
            "kube-apiserver",
            [
                f"--etcd-servers=http://127.0.0.1:{p['etcd']}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={p['apiserver']}",
                "--endpoint-reconciler-type=none",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
                "--profiling=false",
                "--event-ttl=1h",
                "--v=0",
                *self._audit_args(),
            ],
        )
        api = Api(server, pki)
        poll("kube-apiserver", lambda: api.ok("/readyz"), 60, apiserver, self.logs / "kube-apiserver.log")
        poll(
            "namespaces default and kube-system",
            lambda: api.ok("/api/v1/namespaces/default") and api.ok("/api/v1/namespaces/kube-system"),
            30,
            apiserver,
            self.logs / "kube-apiserver.log",
        )
        write_kubeconfig(self.kubeconfig, server, pki)
        log(f"kube-apiserver ready on {server} ({time.monotonic() - t0:.1f}s)")

        kc = str(self.kubeconfig)
        common = [
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
            "--profiling=false",
        ]
        kcm = self.start(
            "kube-controller-manager",
            [
                *common,
                f"--secure-port={p['controller-manager']}",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--use-service-account-credentials=false",
                "--controllers=*",
                "--concurrent-gc-syncs=20",
                "--concurrent-namespace-syncs=10",
                *UNTHROTTLED,
            ],
        )
        sched = self.start("kube-scheduler", [*common, *UNTHROTTLED, f"--secure-port={p['scheduler']}"])
        kwok_config = self.dir / "kwok.yaml"
        kwok_config.write_text(KWOK_CONFIGURATION)
        kwok = self.start(
            "kwok",
            [
                f"--config={kwok_config}",
                f"--kubeconfig={kc}",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                f"--cidr={POD_CIDR}",
                f"--node-ip={FAKE_NODE_IP}",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{p['kwok']}",
                *[f"--config={f}" for f in self._stages()],
            ],
        )
        poll(
            "kube-controller-manager",
            lambda: http_ok(f"https://127.0.0.1:{p['controller-manager']}/healthz", insecure=True),
            60,
            kcm,
            self.logs / "kube-controller-manager.log",
        )
        poll(
            "kube-scheduler",
            lambda: http_ok(f"https://127.0.0.1:{p['scheduler']}/healthz", insecure=True),
            60,
            sched,
            self.logs / "kube-scheduler.log",
        )
        poll(
            "kwok", lambda: http_ok(f"http://127.0.0.1:{p['kwok']}/healthz"), 60, kwok, self.logs / "kwok.log"
        )
        poll(
            "ServiceAccount default/default (controller-manager works)",
            lambda: api.ok("/api/v1/namespaces/default/serviceaccounts/default"),
            60,
            kcm,
            self.logs / "kube-controller-manager.log",
        )
        log(f"controller-manager, scheduler and kwok ready ({time.monotonic() - t0:.1f}s)")

        nodes = node_objects(pools)
        for node in nodes:
            api.request("POST", "/api/v1/nodes", node)

        def all_ready() -> bool:
            items = api.request("GET", "/api/v1/nodes")["items"]
            ready = {
                n["metadata"]["name"]
                for n in items
                if any(
                    c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", [])
                )
            }
            return all(n["metadata"]["name"] in ready for n in nodes)

        poll(f"{len(nodes)} fake nodes Ready", all_ready, 60, kwok, self.logs / "kwok.log")
        elapsed = time.monotonic() - t0
        log(f"{len(nodes)} nodes Ready; cluster up in {elapsed:.1f}s")
        return elapsed

    def _audit_args(self) -> list[str]:
        if not self.audit:
            return []
        policy = self.dir / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY)
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.dir / 'audit.log'}",
                "--audit-log-mode=batch", "--audit-log-batch-max-wait=1s"]  # fmt: skip

    def stop(self) -> None:
        """SIGTERM in reverse start order, SIGKILL after a grace period."""
        for name, proc in reversed(self.procs):
            if not end(proc, 10):
                log(f"{name} did not stop on SIGTERM; killed it")


# --------------------------------------------------------------------------- commands


def read_state(state_dir: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads((state_dir / STATE).read_text()))
    except (OSError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive for our purposes.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def pid_is(pid: int, needle: str) -> bool:
    """True if `pid` runs a command line containing `needle` (guards against PID reuse)."""
    try:
        return needle in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace"
        )
    except OSError:
        return False


def running(state_dir: Path) -> dict[str, Any] | None:
    state = read_state(state_dir)
    if state and pid_alive(int(state["supervisor"])) and (state_dir / READY).exists():
        return state
    return None


def cmd_run(args: argparse.Namespace) -> int:
    """Foreground supervisor: bring the cluster up, wait for a signal, tear it down."""
    state_dir = Path(args.dir).resolve()
    if args.parent_death_signal:
        ctypes.CDLL("libc.so.6").prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if running(state_dir):
        log(f"a cluster already runs in {state_dir}; use `down` first")
        return 1
    if state_dir.exists():
        shutil.rmtree(state_dir)
    state_dir.mkdir(parents=True)
    cluster = Cluster(state_dir, Path(args.bindir).resolve())

    cluster.audit = bool(args.audit)
    stopping = False
    restarts = 0  # SIGUSR1 asks for a restart of the kube-apiserver (fault injection)

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        raise KeyboardInterrupt

    def on_restart(signum: int, frame: Any) -> None:
        nonlocal restarts
        restarts += 1

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGUSR1, on_restart)
    code = 0
    try:
        pools = load_pools(Path(args.nodes), dict(args.scale or []))
        elapsed = cluster.bring_up(pools)
        cluster.save_state(startup_seconds=round(elapsed, 2))
        (state_dir / READY).write_text(str(cluster.kubeconfig))
        # Supervise: if a component dies, the cluster is broken; say so and stop.
        while True:
            if restarts:
                restarts -= 1
                cluster.restart("kube-apiserver")
                (state_dir / RESTARTED).write_text(str(time.time()))
            for name, proc in cluster.procs:
                if proc.poll() is not None:
                    raise LaunchError(
                        f"{name} exited with code {proc.returncode}{tail(cluster.logs / (name + '.log'))}"
                    )
            time.sleep(0.5)
    except KeyboardInterrupt:
        log("stopping")
    except (LaunchError, subprocess.CalledProcessError, OSError) as exc:
        log(f"error: {exc}")
        code = 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        cluster.stop()
        (state_dir / READY).unlink(missing_ok=True)
        if (stopping and not args.keep) or (code != 0 and not args.keep):
            if code != 0:
                # keep the logs for debugging next to the state dir
                with contextlib.suppress(OSError):
                    shutil.copytree(
                        cluster.logs, state_dir.with_name(state_dir.name + "-failed-logs"), dirs_exist_ok=True
                    )
            shutil.rmtree(state_dir, ignore_errors=True)
    return code


def cmd_up(args: argparse.Namespace) -> int:
    state_dir = Path(args.dir).resolve()
    state = running(state_dir)
    if state:
        log(f"reusing the cluster already running in {state_dir}")
        print(f"export KUBECONFIG={state['kubeconfig']}")
        return 0
    old = read_state(state_dir)
    if old and pid_alive(int(old["supervisor"])):
        log(
            f"a cluster is starting or stuck in {state_dir} (supervisor PID {old['supervisor']}); "
            f"run `make cluster-down` first"
        )
        return 1
    if old:
        stop_leftovers(old)
    bindir = args.bindir or build()
    state_dir.parent.mkdir(parents=True, exist_ok=True)
    logpath = state_dir.with_name(state_dir.name + ".supervisor.log")
    with logpath.open("wb") as out:
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "run",
            "--dir",
            str(state_dir),
            "--bindir",
            bindir,
            "--nodes",
            str(args.nodes),
        ]
        for k, v in args.scale or []:
            cmd += ["--scale", f"{k}={v}"]
        sup = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    t0 = time.monotonic()
    try:
        poll("local control plane", lambda: (state_dir / READY).exists(), args.timeout, sup, logpath)
    except LaunchError as exc:
        log(str(exc))
        if sup.poll() is None:
            sup.terminate()
            sup.wait(30)
        return 1
    state = read_state(state_dir) or {}
    log(
        f"ready in {time.monotonic() - t0:.1f}s (control plane {state.get('startup_seconds')}s); "
        f"logs in {state_dir / 'logs'}"
    )
    print(f"export KUBECONFIG={state_dir / 'kubeconfig'}")
    return 0


def stop_leftovers(state: dict[str, Any]) -> None:
    """Kill component processes recorded in a state file, if they still run that binary."""
    bindir = str(state.get("bindir", ""))
    for comp in state.get("components", []):
        pid = int(comp["pid"])
        if bindir and pid_alive(pid) and pid_is(pid, bindir):
            log(f"stopping leftover {comp['name']} (PID {pid})")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def cmd_down(args: argparse.Namespace) -> int:
    state_dir = Path(args.dir).resolve()
    state = read_state(state_dir)
    if state is None:
        log(f"no cluster in {state_dir}")
        shutil.rmtree(state_dir, ignore_errors=True)
        return 0
    sup = int(state["supervisor"])
    if pid_alive(sup) and pid_is(sup, "localk8s"):  # its command line runs hack/localk8s/launcher.py
        os.kill(sup, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while pid_alive(sup) and time.monotonic() < deadline:
            time.sleep(0.1)
    stop_leftovers(state)
    shutil.rmtree(state_dir, ignore_errors=True)
    state_dir.with_name(state_dir.name + ".supervisor.log").unlink(missing_ok=True)
    log(f"stopped and removed {state_dir}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    state_dir = Path(args.dir).resolve()
    state = running(state_dir)
    if not state:
        print(f"not running ({state_dir})")
        return 1
    print(json.dumps(state, indent=2))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The local control plane in --dir (started unless it runs), or the cluster that
    RAYSCALE_TARGET_KUBECONFIG names (checked as for the tests, never $KUBECONFIG's); show the nodes.
    Run it as ``python -m hack.localk8s demo`` from the repository root (it uses hack.localk8s)."""
    from hack.localk8s import target, testcluster  # not standard library only: the demo alone

    bindir = Path(build())
    kubectl = str(bindir / "kubectl")
    try:
        cluster = testcluster.for_demo(bindir, Path(args.dir), by="python -m hack.localk8s demo")
    except (target.TargetError, LaunchError) as exc:
        log(str(exc))
        return 1
    kubeconfig = str(cluster.kubeconfig)
    if cluster.named is not None:
        log(f"using the cluster named by {cluster.named.describe()}")
    cols = (
        "NAME:.metadata.name,POOL:.metadata.labels.rayscale\\.io/node-pool,CPU:.status.capacity.cpu,"
        "MEMORY:.status.capacity.memory,GPU:.status.capacity.nvidia\\.com/gpu,"
        "TPU:.status.capacity.google\\.com/tpu,READY:.status.conditions[?(@.type=='Ready')].status"
    )
    env = {**os.environ, "KUBECONFIG": kubeconfig}
    print("\n$ kubectl get nodes\n", flush=True)
    code = subprocess.call([kubectl, "get", "nodes", "-o", f"custom-columns={cols}"], env=env)
    cluster.stop()  # only removes the copy of a named cluster's kubeconfig
    if cluster.local:
        print(
            f"\nThe cluster keeps running. Use it with:\n  export KUBECONFIG={kubeconfig}\n"
            f"  {kubectl} get pods -A\nStop it with `make cluster-down`."
        )
    return code


def cmd_nodes(args: argparse.Namespace) -> int:
    """Print the fake nodes as a Kubernetes List (for `kubectl apply -f -` on kind)."""
    pools = load_pools(Path(args.nodes), dict(args.scale or []))
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": node_objects(pools)}, indent=2))
    return 0


def build() -> str:
    """Run build.sh (a no-op when the cache is warm) and return the binary directory."""
    out = subprocess.run([str(HERE / "build.sh")], check=True, stdout=subprocess.PIPE, text=True)
    return out.stdout.strip().splitlines()[-1]


def parse_scale(text: str) -> tuple[str, int]:
    name, _, count = text.partition("=")
    if not name or not count.isdigit():
        raise argparse.ArgumentTypeError(f"expected POOL=COUNT, got {text!r}")
    return name, int(count)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="localk8s", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, fn in (
        ("up", cmd_up),
        ("run", cmd_run),
        ("down", cmd_down),
        ("status", cmd_status),
        ("demo", cmd_demo),
        ("nodes", cmd_nodes),
    ):
        p = sub.add_parser(name)
        p.set_defaults(fn=fn)
        p.add_argument("--dir", default=str(DEFAULT_DIR), help="state directory")
        if name in ("up", "run", "nodes"):
            p.add_argument(
                "--nodes",
                default=str(DEFAULT_NODES),
                help="node pools YAML (default: hack/localk8s/nodes.yaml)",
            )
            p.add_argument(
                "--scale",
                action="append",
                type=parse_scale,
                metavar="POOL=COUNT",
                help="override a pool's node count, e.g. --scale gpu=4",
            )
        if name in ("up", "run"):
            p.add_argument(
                "--bindir", default=None, help="directory of built binaries (default: run build.sh)"
            )
        if name == "up":
            p.add_argument("--timeout", type=float, default=180, help="seconds to wait for readiness")
        if name == "run":
            p.add_argument("--keep", action="store_true", help="keep the state directory after stopping")
            p.add_argument("--audit", action="store_true", help="audit-log every write to <dir>/audit.log")
            p.add_argument(
                "--parent-death-signal",
                action="store_true",
                help="stop when the parent process dies (for test fixtures)",
            )
    args = parser.parse_args(argv)
    if args.command == "run" and not args.bindir:
        args.bindir = build()
    return int(args.fn(args))


if __name__ == "__main__":
    sys.exit(main())
