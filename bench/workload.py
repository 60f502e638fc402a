"""The benchmark workload: four worker groups, a fixed mix of demand shapes, running hosts.

Plain data only (it is also fed, as JSON, to Ray's scheduler in its own virtualenv).
"""

from __future__ import annotations

from typing import Any

GI = 1024**3

GROUPS: list[dict[str, Any]] = [
    {"name": "cpu8", "resources": {"CPU": 8, "memory": 32 * GI}},
    {"name": "cpu32", "resources": {"CPU": 32, "memory": 128 * GI}},
    {"name": "gpu", "resources": {"CPU": 8, "GPU": 1, "memory": 32 * GI}},
    {"name": "tpu", "resources": {"CPU": 8, "TPU": 4, "memory": 32 * GI}},
]
MAX_REPLICAS = 1_000_000

# (share of requests, shape): mostly small CPU tasks with memory, some GPU and TPU work.
MIX: list[tuple[float, dict[str, float]]] = [
    (0.30, {"CPU": 1}),
    (0.15, {"CPU": 0.5, "memory": 1 * GI}),
    (0.20, {"CPU": 2, "memory": 4 * GI}),
    (0.10, {"CPU": 4, "memory": 16 * GI}),
    (0.05, {"CPU": 1, "memory": 12 * GI}),
    (0.10, {"CPU": 1, "GPU": 1}),
    (0.05, {"CPU": 1, "TPU": 1}),
    (0.05, {"CPU": 2, "TPU": 4}),
]


def demands(total: int) -> list[dict[str, Any]]:
    """``total`` requests split over MIX (largest remainders, deterministic)."""
    counts = [int(total * share) for share, _ in MIX]
    for i in range(total - sum(counts)):
        counts[i % len(counts)] += 1
    return [{"resources": shape, "count": n} for (_, shape), n in zip(MIX, counts, strict=True) if n]


def running_nodes(count: int) -> list[dict[str, Any]]:
    """``count`` running hosts spread over the groups, each partly used (varied free resources)."""
    nodes = []
    for i in range(count):
        group = GROUPS[i % len(GROUPS)]
        cap = group["resources"]
        used = (i * 7 % 10) / 10  # 0.0 .. 0.9 of every resource in use
        free = {
            k: round(v * (1 - used), 3) if k in ("CPU", "memory") else (v if used < 0.5 else 0)
            for k, v in cap.items()
        }
        nodes.append({"name": f"{group['name']}-{i:05d}", "group": group["name"], "available": free})
    return nodes


def scenario(requests: int, running: int) -> dict[str, Any]:
    return {
        "groups": [{**g, "maxReplicas": MAX_REPLICAS} for g in GROUPS],
        "nodes": running_nodes(running),
        "demands": demands(requests),
        "options": {"idleTimeoutSeconds": None},
    }
