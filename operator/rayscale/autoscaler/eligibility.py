"""Which RayClusters rayscale's autoscaler takes, by how rayscale runs.

- ``--mode all`` (rayscale is also the controller): clusters with ``enableInTreeAutoscaling: true``,
  whose head runs no autoscaler of its own. A head pod that still runs Ray's autoscaler (made by
  KubeRay's operator before the switch to rayscale) is refused until it is recreated.
- ``--mode autoscaler`` (beside KubeRay's operator): KubeRay's operator runs Ray's own autoscaler in
  the head of every ``enableInTreeAutoscaling: true`` cluster, and two autoscalers writing one
  ``replicas`` and ``workersToDelete`` would fight. So rayscale takes only clusters that keep
  in-tree autoscaling off and opt in with the annotation ``rayscale.io/autoscaler: "true"``;
  KubeRay's controller honours the ``replicas`` and ``workersToDelete`` rayscale writes there. A
  cluster that opts in with in-tree autoscaling on is refused, with a reason; so is one asking
  for Ray's in-place pod resize (``ray.io/ippr``), which rayscale does not do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayscale.cluster.validation import ippr_problem

__all__ = ["OPT_IN_ANNOTATION", "Eligibility", "eligibility"]

OPT_IN_ANNOTATION = "rayscale.io/autoscaler"


class Eligibility:
    """``take``: autoscale it; ``refusal``: why not, when the user asked for it (else None)."""

    __slots__ = ("refusal", "take")

    def __init__(self, take: bool, refusal: str | None = None) -> None:
        self.take = take
        self.refusal = refusal


SIDECAR = "autoscaler"  # the container KubeRay (and rayscale --mode controller) runs Ray's autoscaler in


def _runs_rays_autoscaler(head: Mapping[str, Any] | None) -> bool:
    containers = ((head or {}).get("spec") or {}).get("containers") or []
    return any(c.get("name") == SIDECAR for c in containers)


def eligibility(
    cluster: Mapping[str, Any], *, beside_kuberay: bool, head: Mapping[str, Any] | None = None
) -> Eligibility:
    """``head``: the cluster's head pod, if any. A head that runs Ray's own autoscaler (one KubeRay
    made, before a switch to rayscale) keeps rayscale away until it is recreated without it."""
    spec = cluster.get("spec") or {}
    in_tree = bool(spec.get("enableInTreeAutoscaling"))
    if not beside_kuberay:
        if in_tree and _runs_rays_autoscaler(head):
            return Eligibility(
                False,
                "the head pod runs Ray's own autoscaler (container autoscaler, from KubeRay's"
                " operator); rayscale does not autoscale the cluster beside it. Delete the head pod"
                " when convenient: its replacement has none, and rayscale takes over.",
            )
        return Eligibility(in_tree)
    annotations = (cluster.get("metadata") or {}).get("annotations") or {}
    opted = str(annotations.get(OPT_IN_ANNOTATION, "")).lower() == "true"
    if not opted:
        return Eligibility(False)
    if in_tree:
        return Eligibility(
            False,
            "enableInTreeAutoscaling is true, so KubeRay's operator runs Ray's autoscaler in the head;"
            " rayscale --mode autoscaler leaves the cluster to it. To have rayscale autoscale it, set"
            f' enableInTreeAutoscaling: false and keep the annotation {OPT_IN_ANNOTATION}: "true".',
        )
    if problem := ippr_problem(annotations):
        return Eligibility(False, problem)
    return Eligibility(True)
