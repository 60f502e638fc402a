"""The ``preStop`` hook that drains a worker's Ray node before its Ray container stops
(annotation ``rayscale.io/drain-on-stop``), pure.

Merged into the template as KubeRay merges what it injects: the template's own
``lifecycle.preStop`` is kept, never replaced (the controller says so in an Event,
`own_prestop`), and everything else of the container's ``lifecycle`` stays. Only workers get the
hook: Ray cannot drain its head into another node.

The hook asks Ray's GCS (``RAY_ADDRESS``, which every worker's Ray container has) to drain the
node of this pod (the live node whose ``instance_id`` is ``RAY_CLOUD_INSTANCE_ID``, the pod's
name) with reason ``PREEMPTION`` (a busy node cannot refuse it: nothing new is scheduled on it,
running work goes on) and a deadline at the end of the pod's ``terminationGracePeriodSeconds``.
This is the call ``ray drain-node`` makes; the hook does not use that command because without
``--node-id`` it drains whichever node ``ray.init`` connects to, which is not always the pod's.
Then it waits while the node is alive: Ray stops a drained node's raylet once the node is idle.
It returns when the node is gone, or `MARGIN` seconds before the grace period ends, whichever is
first; then Kubernetes sends SIGTERM. It never fails the container's stop: any error ends it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

#: Kubernetes' ``terminationGracePeriodSeconds`` when a pod sets none
DEFAULT_GRACE = 30
#: seconds of the grace period left to Ray's own shutdown after the hook returns
MARGIN = 5
#: the hook's script: ``{deadline}`` (seconds to the grace period's end) and ``{wait}`` (seconds
#: the hook waits at most) filled in by `script`
SCRIPT = """# rayscale.io/drain-on-stop: drain this pod's Ray node, wait until Ray has stopped it (idle)
python - <<'EOF' || true
import os, time
from ray._raylet import GcsClient
from ray.core.generated import autoscaler_pb2, gcs_pb2
end = time.monotonic() + {wait}
pod = os.environ.get("RAY_CLOUD_INSTANCE_ID", "")
gcs = GcsClient(address=os.environ["RAY_ADDRESS"])
alive = gcs_pb2.GcsNodeInfo.GcsNodeState.ALIVE
def node():
    infos = gcs.get_all_node_info(timeout=5, state_filter=alive).values()
    return next((n.node_id.hex() for n in infos if pod and n.instance_id == pod), None)
node_id = node()
if node_id:
    reason = autoscaler_pb2.DrainNodeReason.Value("DRAIN_NODE_REASON_PREEMPTION")
    deadline_ms = time.time_ns() // 1000000 + {deadline} * 1000
    print(gcs.drain_node(node_id, reason, f"Pod {{pod}} is stopping (preStop hook)", deadline_ms))
while node_id and time.monotonic() < end and node() == node_id:
    time.sleep(1)
EOF"""


def grace_seconds(pod_spec: Mapping[str, Any]) -> int:
    """The pod's ``terminationGracePeriodSeconds`` (`DEFAULT_GRACE` when unset)."""
    value = pod_spec.get("terminationGracePeriodSeconds")
    return DEFAULT_GRACE if value is None else max(int(value), 0)


def script(grace: int) -> str:
    """The hook's shell script for a pod with `grace` seconds to stop."""
    return SCRIPT.format(deadline=grace, wait=max(grace - MARGIN, 0))


def hook(grace: int) -> dict[str, Any]:
    """The ``preStop`` handler."""
    return {"exec": {"command": ["/bin/sh", "-c", script(grace)]}}


def own_prestop(template: Mapping[str, Any]) -> bool:
    """Whether the template's Ray container (its first) has a ``preStop`` of its own."""
    containers = (template.get("spec") or {}).get("containers") or []
    lifecycle = (containers[0].get("lifecycle") or {}) if containers else {}
    return bool(lifecycle.get("preStop"))


def inject(pod_spec: Mapping[str, Any], container: dict[str, Any]) -> None:
    """Give the Ray `container` the hook, unless it has a ``preStop`` of its own (kept as it is)."""
    lifecycle = dict(container.get("lifecycle") or {})
    if lifecycle.get("preStop"):
        return
    lifecycle["preStop"] = copy.deepcopy(hook(grace_seconds(pod_spec)))
    container["lifecycle"] = lifecycle
