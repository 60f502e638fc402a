"""What the API server was asked during a run: `apiserver_request_total` read before and after.

The counter counts every client (the operator, the benchmark, kube-controller-manager, kwok), so
a run's figures are compared with another operator's run on the same schedule, not read alone.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Callable

from hack.localk8s import testcluster

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE", "APPLY", "CREATE", "UPDATE", "DELETECOLLECTION"})
_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def parse(text: str) -> Counter[str]:
    """``"VERB resource[/subresource]"`` -> requests, from the API server's /metrics text; a refused
    request (4xx, 5xx) as ``"VERB resource CODE"``."""
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        resource = labels.get("resource", "")
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        code = labels.get("code", "")
        failed = "" if code.startswith(("2", "3")) else f" {code}"  # a refused request kept apart
        counts[f"{labels.get('verb', '?')} {resource or '-'}{failed}"] += int(float(match["value"]))
    return counts


async def snapshot(cluster: testcluster.ClusterHandle) -> Counter[str]:
    text = await asyncio.to_thread(cluster.kubectl_run, "get", "--raw", "/metrics")
    return parse(text)


def writes(before: Counter[str], after: Counter[str]) -> dict[str, int]:
    """The run's write requests by verb and resource, most first; ``"total"`` their sum."""
    return _delta(before, after, lambda verb: verb in WRITES)


def reads(before: Counter[str], after: Counter[str]) -> dict[str, int]:
    """The run's other requests (GET, LIST, WATCH) by verb and resource, most first, and their sum."""
    return _delta(before, after, lambda verb: verb not in WRITES)


def _delta(before: Counter[str], after: Counter[str], kept_verb: Callable[[str], bool]) -> dict[str, int]:
    delta = {key: after[key] - before.get(key, 0) for key in after}
    kept = {k: v for k, v in delta.items() if v > 0 and kept_verb(k.split(" ", 1)[0])}
    ordered = dict(sorted(kept.items(), key=lambda kv: (-kv[1], kv[0])))
    return {"total": sum(kept.values())} | ordered
