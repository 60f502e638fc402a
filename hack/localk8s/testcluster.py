"""Find or start a Kubernetes cluster for a test session.

Used by the pytest fixtures of tests/support/fixtures.py, the fault suite, the benchmarks and (with
`for_demo`) `make demo`. `$KUBECONFIG` and ``~/.kube/config`` are never used. In order:

1. the cluster `RAYSCALE_TARGET_KUBECONFIG` names (kind, another cluster; `RAYSCALE_TARGET_CONTEXT`
   picks its context), when it is set: it must answer and hold no other owner's Ray objects, else
   the session fails (hack/localk8s/target.py; `RAYSCALE_TARGET_FORCE=1` overrides the check);
2. the local control plane that `make cluster-up` started in e2e/.cluster, if it runs;
3. otherwise a fresh local control plane in a temporary directory, owned by this
   process: it stops when `stop()` is called, and also when the test process dies,
   however it dies (the supervisor gets SIGTERM through PR_SET_PDEATHSIG, and its
   components get SIGKILL when the supervisor goes).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hack.localk8s import launcher, target

TMP_PREFIX = "rayscale-localk8s-"


@dataclass
class ClusterHandle:
    kubeconfig: Path
    kubectl: str
    bindir: Path | None
    origin: str  # "target" (a named cluster) | "cluster-up" | "fixture"
    state_dir: Path | None = None
    supervisor: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)
    named: target.Target | None = None  # when RAYSCALE_TARGET_KUBECONFIG chose it

    def __post_init__(self) -> None:
        self.env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    @property
    def local(self) -> bool:
        """True when this is rayscale's local control plane (not kind or another cluster)."""
        return self.origin != "target"

    def state(self) -> dict[str, object]:
        assert self.state_dir is not None
        return dict(json.loads((self.state_dir / launcher.STATE).read_text()))

    def kubectl_run(self, *args: str, check: bool = True, input: str | None = None) -> str:
        out = subprocess.run(
            [self.kubectl, *args],
            env=self.env,
            check=False,
            capture_output=True,
            text=True,
            input=input,
            timeout=120,
        )
        if check and out.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
        return out.stdout

    def stop(self) -> None:
        if self.named is not None:
            self.named.discard()
        if self.supervisor is None:
            return
        launcher.end(self.supervisor, 60)
        if self.state_dir is not None:
            shutil.rmtree(self.state_dir.parent, ignore_errors=True)
        self.supervisor = None


def remove_stale_dirs() -> None:
    """Remove what earlier killed test runs left in the temp directory (their processes are gone)."""
    for parent in Path(tempfile.gettempdir()).glob(TMP_PREFIX + "*"):
        state = launcher.read_state(parent / "cluster")
        starting = state is None and time.time() - parent.stat().st_mtime < 600
        if not starting and (state is None or not launcher.pid_alive(int(state["supervisor"]))):
            shutil.rmtree(parent, ignore_errors=True)


def named_cluster(bindir: Path, *, by: str) -> ClusterHandle | None:
    """The cluster RAYSCALE_TARGET_KUBECONFIG names, checked (target.resolve), or None when it is
    not set. Raises target.TargetError when the named cluster cannot be used."""
    kubectl = str(bindir / "kubectl")
    named = target.resolve(os.environ, target.kubectl_at(kubectl), by=by)
    if named is None:
        return None
    origin = "target" if named.local_dir is None else "cluster-up"
    return ClusterHandle(named.kubeconfig, kubectl, bindir, origin, named.local_dir, named=named)


def acquire(timeout: float = 300) -> ClusterHandle:
    bindir = Path(launcher.build())
    kubectl = str(bindir / "kubectl")
    named = named_cluster(bindir, by=f"hack/localk8s/testcluster.py ({Path(sys.argv[0]).name})")
    if named is not None:
        return named
    default_dir = launcher.DEFAULT_DIR
    state = launcher.running(default_dir)
    if state and target.answers(target.kubectl_at(kubectl), Path(str(state["kubeconfig"]))) is None:
        return ClusterHandle(Path(str(state["kubeconfig"])), kubectl, bindir, "cluster-up", default_dir)
    return start_private(bindir, timeout)


def for_demo(bindir: Path, state_dir: Path, *, by: str) -> ClusterHandle:
    """The cluster a demo shows things on: the named one (as `acquire`), else the local control
    plane in `state_dir`, started unless it runs; it keeps running after the demo."""
    named = named_cluster(bindir, by=by)
    if named is not None:
        return named
    with contextlib.redirect_stdout(sys.stderr):
        code = launcher.main(["up", "--dir", str(state_dir), "--bindir", str(bindir)])
    if code != 0:
        raise launcher.LaunchError(f"the local control plane did not start in {state_dir}")
    return ClusterHandle(
        state_dir.resolve() / "kubeconfig", str(bindir / "kubectl"), bindir, "cluster-up", state_dir
    )


def start_private(bindir: Path | None = None, timeout: float = 300, *, audit: bool = False) -> ClusterHandle:
    """A fresh local control plane of this process's own (never a shared one): for tests that
    stall, restart or kill its components. `audit`: the API server logs every write to
    ``state_dir / "audit.log"``; SIGUSR1 to ``supervisor`` restarts the kube-apiserver."""
    bindir = bindir or Path(launcher.build())
    kubectl = str(bindir / "kubectl")
    remove_stale_dirs()
    state_dir = Path(tempfile.mkdtemp(prefix=TMP_PREFIX)) / "cluster"
    log = state_dir.with_name("supervisor.log")
    with log.open("wb") as out:
        sup = subprocess.Popen(
            [
                sys.executable,
                str(Path(launcher.__file__).resolve()),
                "run",
                "--dir",
                str(state_dir),
                "--bindir",
                str(bindir),
                "--parent-death-signal",
                *(["--audit"] if audit else []),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    cluster = ClusterHandle(state_dir / "kubeconfig", kubectl, bindir, "fixture", state_dir, sup)
    deadline = time.monotonic() + timeout
    while not (state_dir / launcher.READY).exists():
        if sup.poll() is not None or time.monotonic() > deadline:
            text = log.read_text(errors="replace")
            cluster.stop()
            raise RuntimeError(f"the local control plane did not start:\n{text[-4000:]}")
        time.sleep(0.1)
    return cluster
