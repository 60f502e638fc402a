"""Accelerators: which Kubernetes resources are GPUs, TPUs and Neuron cores, and their Ray names.

One predicate (`is_gpu_key`) decides what is a GPU for the ``desiredGPU`` of the status, for
``ray start``'s ``--num-gpus`` and for the hosts the autoscaler's scheduler keeps free of work that
needs no GPU. ``google.com/tpu`` is a TPU for ``desiredTPU`` and becomes Ray's ``TPU``;
``aws.amazon.com/neuroncore`` becomes ``neuron_cores``.

A TPU host of a group scheduled with GKE's TPU node selectors also has ``TPU-<type>-head``
(`tpu_slice_head_resource`), the resource Ray puts on the first host of a slice so that one task
per slice can be placed. Ray puts it on host 0 of the slice (``TPU_WORKER_ID`` 0), which is the
pod labelled ``ray.io/replica-host-index: 0``; `slice_host_rank` says where a host of a
multi-host replica stands, host 0 first, for the autoscaler's snapshot (which lists each replica's
hosts in that order, so the scheduler gives the head resource to the right one).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Final

__all__ = [
    "CONTAINER_ACCELERATORS",
    "GKE_TPU_ACCELERATOR_LABEL",
    "GKE_TPU_TOPOLOGY_LABEL",
    "GPU",
    "NEURON_CORES",
    "NEURON_RESOURCE",
    "RAY_ACCELERATORS",
    "TPU",
    "TPU_RESOURCE",
    "is_gpu_key",
    "is_tpu_slice_head_resource",
    "slice_host_rank",
    "tpu_accelerator_type",
    "tpu_slice_head_resource",
]

#: Ray's resource names.
GPU = "GPU"
TPU = "TPU"
NEURON_CORES = "neuron_cores"

#: The Kubernetes resource of a TPU.
TPU_RESOURCE = "google.com/tpu"
NEURON_RESOURCE = "aws.amazon.com/neuroncore"
#: Container resources that become Ray resources, in the order KubeRay checks them (by name).
CONTAINER_ACCELERATORS: Mapping[str, str] = {NEURON_RESOURCE: NEURON_CORES, TPU_RESOURCE: TPU}
#: The Ray resources of `CONTAINER_ACCELERATORS`.
RAY_ACCELERATORS = frozenset(CONTAINER_ACCELERATORS.values())

GKE_TPU_TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
GKE_TPU_ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"

_MIG = re.compile(r"nvidia\.com/mig-\d+g\.\d+gb$")

# GKE accelerator node-selector value -> TPU generation (Ray's table).
_TPU_GENERATIONS = {
    "tpu-v4-podslice": "v4",
    "tpu-v5-lite-device": "v5e",
    "tpu-v5-lite-podslice": "v5e",
    "tpu-v5p-slice": "v5p",
    "tpu-v6e-slice": "v6e",
}
# Generations whose pod type counts TensorCores (two per chip) rather than chips.
_TWO_CORES_PER_CHIP = {"v4", "v5p"}

_SLICE_HEAD_PREFIX = f"{TPU}-"
_SLICE_HEAD_SUFFIX = "-head"


def is_gpu_key(name: str) -> bool:
    """Resource names KubeRay treats as GPUs: ``nvidia.com/gpu``, ``amd.com/gpu``, ``GPU`` ...
    and NVIDIA MIG slices (``nvidia.com/mig-1g.5gb``)."""
    return name.lower().endswith("gpu") or bool(_MIG.search(name.lower()))


def tpu_accelerator_type(topology: str, accelerator: str) -> str | None:
    """The Ray TPU pod type ("v6e-16", "v4-8") from the GKE TPU node selectors, or None."""
    generation = _TPU_GENERATIONS.get(accelerator)
    if generation is None or not topology:
        return None
    try:
        chips = math.prod(int(part) for part in topology.lower().split("x"))
    except ValueError:
        return None
    cores = chips * (2 if generation in _TWO_CORES_PER_CHIP else 1)
    return f"{generation}-{cores}"


def tpu_slice_head_resource(pod_type: str) -> str:
    """``TPU-<pod type>-head``: the resource of the first host of a TPU slice."""
    return f"{_SLICE_HEAD_PREFIX}{pod_type}{_SLICE_HEAD_SUFFIX}"


def is_tpu_slice_head_resource(name: str) -> bool:
    """Whether `name` is a `tpu_slice_head_resource` (only host 0 of a multi-host replica has one)."""
    return name.startswith(_SLICE_HEAD_PREFIX) and name.endswith(_SLICE_HEAD_SUFFIX)


#: The rank of a host whose place nothing tells (no Ray report, no host index label): after all others.
_UNKNOWN_HOST: Final = 1 << 30


def slice_host_rank(host_index: str | None, reported: Mapping[str, float] | None) -> int:
    """Where a host stands among the hosts of its multi-host replica: the lowest rank carries
    `tpu_slice_head_resource`.

    `reported`: the total resources its running Ray node reports (None: no Ray node, or Ray
    cannot be asked). A host whose Ray node reports a slice head resource comes first; then the
    hosts in the order of `host_index` (the pod's ``ray.io/replica-host-index`` label); a host
    without a valid index comes last.
    """
    if reported and any(is_tpu_slice_head_resource(name) for name in reported):
        return 0
    try:
        index = int(host_index) if host_index is not None else _UNKNOWN_HOST
    except ValueError:
        index = _UNKNOWN_HOST
    return 1 + (index if 0 <= index < _UNKNOWN_HOST else _UNKNOWN_HOST)
