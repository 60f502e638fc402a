"""The batch schedulers rayscale integrates, by KubeRay's names (``--batch-scheduler``), and what a
RayCluster's labels ask of a scheduler that is not the one configured."""

from __future__ import annotations

from collections.abc import Sequence

from rayscale.batch.kai import Kai
from rayscale.batch.model import BatchScheduler
from rayscale.batch.scheduler_plugins import SchedulerPlugins
from rayscale.batch.volcano import Volcano
from rayscale.batch.yunikorn import YuniKorn
from rayscale.cluster.meta import ClusterMeta

__all__ = ["NAMES", "SCHEDULER_NAME_LABEL", "check_name", "label_notes", "lookup"]

_ALL: tuple[BatchScheduler, ...] = (Volcano(), YuniKorn(), SchedulerPlugins(), Kai())
SCHEDULERS: dict[str, BatchScheduler] = {s.name: s for s in _ALL}
NAMES: tuple[str, ...] = tuple(SCHEDULERS)
FLAG = "--batch-scheduler"
#: The label KubeRay up to v1.1 read to send one RayCluster's pods to the batch scheduler;
#: KubeRay v1.6.2 reads it nowhere (every cluster goes to the configured scheduler).
SCHEDULER_NAME_LABEL = "ray.io/scheduler-name"


def check_name(name: str) -> str:
    """`name` if rayscale integrates it ("" is none); else ValueError naming the ones it does."""
    if name and name not in SCHEDULERS:
        raise ValueError(
            f"the batch scheduler {name!r} is not supported: use one of {', '.join(NAMES)} (KubeRay's"
            " names), or none"
        )
    return name


def lookup(name: str) -> BatchScheduler | None:
    """The integration named `name` (checked by `check_name`), None for none."""
    return SCHEDULERS[check_name(name)] if name else None


def _others(scheduler: BatchScheduler | None) -> Sequence[BatchScheduler]:
    return [s for s in SCHEDULERS.values() if scheduler is None or s.name != scheduler.name]


def label_notes(scheduler: BatchScheduler | None, meta: ClusterMeta) -> list[str]:
    """Why a RayCluster's labels ask for something this operator's scheduler will not do.

    KubeRay v1.6.2 ignores all of these silently: a cluster goes to the scheduler the operator
    was started with, whatever its labels say (``ray.io/scheduler-name`` is read nowhere, another
    scheduler's queue label is not read). rayscale does the same, and says so in a Warning Event.
    """
    configured = f"the batch scheduler {scheduler.name}" if scheduler else "no batch scheduler"
    where = f"its pods go to {scheduler.scheduler_name if scheduler else 'the default scheduler'}"
    notes = []
    asked = meta.labels.get(SCHEDULER_NAME_LABEL)
    if asked is not None and (scheduler is None or asked not in (scheduler.name, scheduler.scheduler_name)):
        notes.append(
            f"its label {SCHEDULER_NAME_LABEL}={asked} is ignored: this operator runs with {configured}"
            f" ({FLAG}), and {where}"
        )
    ours = scheduler.reads if scheduler else frozenset()
    readers: dict[str, list[str]] = {}
    for other in _others(scheduler):
        for key in sorted(other.reads - ours):
            if key in meta.labels:
                readers.setdefault(key, []).append(other.name)
    if readers:
        named = ", ".join(f"{key} (read by {' and '.join(names)})" for key, names in sorted(readers.items()))
        notes.append(f"its labels {named} are ignored: this operator runs with {configured} ({FLAG})")
    return notes
