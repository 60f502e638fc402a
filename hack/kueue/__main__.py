"""``python -m hack.kueue`` (from the repository root): Kueue beside `make cluster-up`'s control plane
until Ctrl-C. rayscale's CRDs must be installed (``kubectl apply --server-side -f crds/``); label a
namespace ``rayscale.io/kueue=enabled`` for Kueue to manage its RayClusters and RayJobs."""

from __future__ import annotations

import signal
import sys
import tempfile
import threading
from pathlib import Path

from hack.kueue import local
from hack.localk8s import launcher, testcluster


def main() -> int:
    bindir = Path(launcher.build())
    state = launcher.running(launcher.DEFAULT_DIR)
    if state is None:
        print("no local control plane runs: start one with `make cluster-up`", file=sys.stderr)
        return 1
    kubeconfig = Path(str(state["kubeconfig"]))
    cluster = testcluster.ClusterHandle(kubeconfig, str(bindir / "kubectl"), bindir, "cluster-up")
    kueue = local.LocalKueue(cluster, local.build(), Path(tempfile.mkdtemp(prefix="rayscale-kueue-")))
    kueue.install()
    kueue.start()
    stopping = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    try:
        kueue.wait_ready()
        print(f"Kueue runs (log: {kueue.log}); Ctrl-C stops it", file=sys.stderr)
        while not stopping.wait(1):
            if kueue.proc is None or kueue.proc.poll() is not None:
                print(f"Kueue exited:\n{kueue.output()}", file=sys.stderr)
                return 1
    finally:
        kueue.stop()
    return 0


sys.exit(main())
