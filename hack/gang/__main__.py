"""``python -m hack.gang`` (from the repository root): the gang scheduler beside `make cluster-up`'s
control plane (started when it does not run; it keeps running) until Ctrl-C, or beside the cluster
RAYSCALE_TARGET_KUBECONFIG names. Pods with ``schedulerName: scheduler-plugins-scheduler`` are its; those
labelled ``scheduling.x-k8s.io/pod-group: NAME`` are a gang with the PodGroup NAME."""

from __future__ import annotations

import signal
import sys
import tempfile
import threading
from pathlib import Path

from hack.gang import local
from hack.localk8s import launcher, testcluster


def main() -> int:
    bindir = Path(launcher.build())
    cluster = testcluster.for_demo(bindir, launcher.DEFAULT_DIR, by="python -m hack.gang")
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    with local.serving(cluster, Path(tempfile.mkdtemp(prefix="rayscale-gang-"))) as scheduler:
        print(f"the gang scheduler runs (log: {scheduler.log}); Ctrl-C stops it", file=sys.stderr)
        while not stopping.wait(1):
            if not scheduler.running():
                print(f"the gang scheduler exited:\n{scheduler.output()}", file=sys.stderr)
                return 1
    return 0


sys.exit(main())
