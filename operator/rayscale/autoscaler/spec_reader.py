"""How the autoscaler reads a RayCluster: the typed cluster, then the scheduler's groups and options.

The typed cluster (`ScalingSpec`) carries everything a round reads of the RayCluster: its spec
(``workersToDelete`` included), its metadata (annotations, and the subject of its Events), its
generation, its resourceVersion and the ``status.autoscaler`` last written. After `read_spec` a
round never reads the manifest again.

The live loop and ``rayscale simulate`` (a scenario's ``cluster:``, ``--from-cluster``) both read
a cluster here, so a spec simulates exactly as the operator scales it.

``check=True`` applies rayscale's own validation first (the checks its controller makes before it
builds anything; metadata is checked when the manifest names the cluster). Beside KubeRay's
operator (``check=False``) only the CRD's shape is required: KubeRay decides what it accepts.
Suspended worker groups are not scaled and are left out.

A cluster marked ``rayscale.io/job-finished`` (its RayJob ended and a deletion policy will take
its workers; rayscale.cluster.job_end) keeps no worker: every group's minimum counts as 0 (as the
controller counts it) and its maximum is 0, so every worker goes at once (drained first; see
drain.py) and nothing new launches. ``ScalingSpec.finished`` says why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from rayscale.api.raycluster import RayClusterSpec, WorkerGroupSpec
from rayscale.autoscaler.scheduling.model import Group, Options, UpscalingMode
from rayscale.cluster.host import host_labels, host_resources
from rayscale.cluster.job_end import finished_reason, finished_spec
from rayscale.cluster.limits import pods_problem
from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.validation import spec_error, validate_metadata, validate_spec
from rayscale.resources import QuantityError

__all__ = ["DEFAULT_IDLE_TIMEOUT_SECONDS", "ScalingSpec", "SpecError", "read_spec", "scaling_of"]

#: Ray's autoscaler removes an idle worker after this long unless the spec says otherwise.
DEFAULT_IDLE_TIMEOUT_SECONDS = 60.0


class SpecError(ValueError):
    """A spec the autoscaler cannot act on; the message names the field (``spec.…``)."""


@dataclasses.dataclass(frozen=True)
class ScalingSpec:
    """A RayCluster as the autoscaler sees it: the typed spec and what it derives from it, and
    what a round reads of the rest of the object."""

    spec: RayClusterSpec
    groups: tuple[Group, ...]
    options: Options
    meta: ClusterMeta = dataclasses.field(default_factory=lambda: ClusterMeta("", "", ""))
    resource_version: str | None = None
    generation: int | None = None  # metadata.generation: moves with the spec alone
    written: Mapping[str, Any] | None = None  # status.autoscaler as last written (None: never)
    finished: str | None = None  # why the cluster's RayJob ended (rayscale.io/job-finished), or None

    @property
    def workers_to_delete(self) -> frozenset[str]:
        """The pods every worker group's ``scaleStrategy.workersToDelete`` lists."""
        return frozenset(name for group in self.spec.workers for name in group.to_delete)


def read_spec(manifest: Mapping[str, Any], *, check: bool = True, max_pods: int | None = None) -> ScalingSpec:
    """The ScalingSpec of a RayCluster manifest; SpecError when it cannot be read (or, with
    `check`, when rayscale's controller would refuse it).

    `max_pods`: the worker pods a cluster may have (None: no limit). A spec whose minima ask for
    more is refused; one whose maxima could go past it gets ``max_workers`` capped there.
    """
    raw = manifest.get("spec")
    try:
        spec = RayClusterSpec.model_validate(raw if isinstance(raw, Mapping) else {})
    except ValidationError as exc:
        raise SpecError(spec_error(exc)) from None
    meta = ClusterMeta.from_body(manifest)
    if check:
        if meta.name and (invalid := validate_metadata(meta)):
            raise SpecError(invalid.message)
        kwargs = {} if max_pods is None else {"max_pods": max_pods}
        if problem := validate_spec(meta, spec, **kwargs):
            raise SpecError(problem)
    elif max_pods is not None and (problem := pods_problem(spec.workers, max_pods)):
        raise SpecError(problem)
    spec = finished_spec(meta.annotations, spec)  # a finished job's cluster: no minimum
    groups, options = scaling_of(spec)
    finished = finished_reason(meta.annotations)
    if finished is not None:
        groups = tuple(dataclasses.replace(g, max_replicas=0) for g in groups)
    if max_pods is not None and sum(g.max_replicas * g.num_of_hosts for g in groups) > max_pods:
        cap = max_pods if options.max_workers is None else min(options.max_workers, max_pods)
        options = dataclasses.replace(options, max_workers=cap)
    version = (manifest.get("metadata") or {}).get("resourceVersion")
    generation = (manifest.get("metadata") or {}).get("generation")
    written = (manifest.get("status") or {}).get("autoscaler")
    return ScalingSpec(
        spec,
        groups,
        options,
        meta=meta,
        resource_version=None if version is None else str(version),
        generation=generation if isinstance(generation, int) and not isinstance(generation, bool) else None,
        written=written if isinstance(written, Mapping) else None,
        finished=finished,
    )


def scaling_of(spec: RayClusterSpec) -> tuple[tuple[Group, ...], Options]:
    """The scheduler's worker groups (suspended ones left out) and options of a typed spec."""
    groups = tuple(
        _group(f"spec.workerGroupSpecs[{i}]", g) for i, g in enumerate(spec.workers) if g.suspend is not True
    )
    auto = spec.autoscaler_options
    idle = auto.idle_timeout_seconds if auto is not None else None
    if idle is not None and idle < 0:
        raise SpecError(f"spec.autoscalerOptions.idleTimeoutSeconds: must be >= 0 ({idle})")
    mode = auto.upscaling_mode if auto is not None else None
    options = Options(
        idle_timeout_seconds=DEFAULT_IDLE_TIMEOUT_SECONDS if idle is None else float(idle),
        upscaling_mode=UpscalingMode(mode or UpscalingMode.DEFAULT),
    )
    return groups, options


def _group(path: str, group: WorkerGroupSpec) -> Group:
    try:
        resources = host_resources(group)
    except QuantityError as exc:
        raise SpecError(f"{path}.{exc}") from None
    idle = group.idle_timeout_seconds
    if idle is not None and idle < 0:
        raise SpecError(f"{path}.idleTimeoutSeconds: must be >= 0 ({idle})")
    return Group(
        name=group.group_name,
        resources=resources,
        labels=host_labels(group),
        min_replicas=max(group.min_replicas, 0),
        max_replicas=max(group.max_replicas, group.min_replicas, 0),
        num_of_hosts=max(group.num_of_hosts, 1),
        idle_timeout_seconds=None if idle is None else float(idle),
        priority=group.priority,
    )
