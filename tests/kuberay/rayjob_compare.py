"""Field-by-field comparison of one scripted RayJob case under KubeRay and under rayscale.

Both sides' answers (tests/kuberay/rayjob_oracle.py's format; rayscale's from
tests.support.rayjob_sim) are first normalised, only where the two must differ by design, then
each step becomes a set of named parts compared field by field with ``compare.diff``:

- ``RayJob``: the whole status (times as ``{"ago": s}`` on the virtual clock), the finalizers,
  the requeue and whether the step failed;
- ``RayCluster/<name>``, ``Job/<name>``, ``Service/<name>``: every RayCluster, submitter Job and
  RayJob head Service there is, whole (metadata with labels, annotations and owner references,
  spec); not their status, which is the script's;
- ``Event/<reason>``: each Event's type and message;
- ``Ray/<n>``: the calls to Ray in order (the oracle's status reads, rayscale's GCS reads, left
  out), a submit with its dashboard address and request body.

Normalised, and why:

- generated names (``<rayjob>-`` and 5 random characters: the job id and the RayCluster's name)
  become ``<rayjob>-<n>``, n counting the case's names in order of first appearance (each step's
  job id, then its cluster name, then the rest): mapped, not dropped, so a name used in the wrong
  place is still a difference;
- the RayJob's uid (the oracle's fixed one, the simulation's ``rayjob-uid``) becomes
  ``<rayjob uid>``, the oracle's other generated uids ``<uid n>``;
- the API server's part: metadata it sets (resourceVersion, uid, creationTimestamp, generation,
  managedFields), empty maps and lists and an env var's empty value (omitempty fields), on
  rayscale's side the RayCluster CRD's defaults, on both a Service's defaults on every write (the
  oracle's stand-in sets them on create only), and a container port's protocol TCP (KubeRay's CRD
  defaults it; rayscale's keeps pod templates as written, where the API server reads absent as TCP);
- the garbage collector's part: a step after the RayJob is gone shows nothing it owned (the oracle
  stands in for the collector, the simulation does not);
- ``rayClusterStatus``: the zero quantities and empty ``head`` KubeRay's typed read-back of the
  script's RayCluster status shows (``desiredCPU: "0"``, ...), which the script never set; and the
  RayJob status's empty structs (``rayJobInfo: {}``), absent in rayscale's;
- times printed in rayscale's texts (Go's layouts, as KubeRay prints them) become ``<n s ago>`` on
  the simulation's clock, as the oracle shows KubeRay's: a time in another layout stays a difference;
- a submit's address without its ``http://`` (KubeRay's client adds it, rayscale's address has it).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from rayscale.api.crd import object_schema
from rayscale.api.registry import RAYCLUSTER
from tests.kuberay.compare import ABSENT, Difference, diff

__all__ = ["ABSENT", "both", "compare_case", "fields", "normalise_case", "sim_nows", "step_parts"]
from tests.kuberay.rayscale_side import stored_service, structural_default

Obj = dict[str, Any]
KUBERAY_RAYJOB_UID = "00000000-0000-4000-8000-000000000001"  # tools/kuberay-oracle/main.go fakeUID
RAYSCALE_RAYJOB_UID = "rayjob-uid"  # tests/support/rayjob_sim.py
_ORACLE_UID = re.compile(r"00000000-0000-4000-8000-\d{12}")
_SERVER_METADATA = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields")
# The times KubeRay prints in a text (Go's time.Time.String(), time.DateTime), as the oracle finds them.
_TIME_IN_TEXT = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?( [+-]\d{4} [A-Za-z0-9+-]+)?")
SIM_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)  # tests/support/rayjob_sim.py's first "now"
_GO_ZERO_CLUSTER_STATUS = {"desiredCPU": "0", "desiredGPU": "0", "desiredMemory": "0", "desiredTPU": "0"}


class _Names:
    """One side's generated names, each mapped to ``<rayjob>-<n>`` on first sight."""

    def __init__(self, rayjob: str, uid: str) -> None:
        self.rayjob = rayjob
        self.pattern = re.compile(rf"(?<![A-Za-z0-9-]){re.escape(rayjob)}-[a-z0-9]{{5}}(?![a-z0-9])")
        self.seen: dict[str, str] = {uid: "<rayjob uid>"}
        self.names = self.uids = 0

    def see(self, text: str) -> None:
        for found in self.pattern.findall(text):
            if found not in self.seen:
                self.names += 1
                self.seen[found] = f"{self.rayjob}-<{self.names}>"
        for found in _ORACLE_UID.findall(text):
            if found not in self.seen:
                self.uids += 1
                self.seen[found] = f"<uid {self.uids}>"

    def sub(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {self.sub(k): self.sub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.sub(v) for v in value]
        if isinstance(value, str):
            value = self.pattern.sub(lambda m: self.seen[m.group(0)], value)
            value = _ORACLE_UID.sub(lambda m: self.seen.get(m.group(0), m.group(0)), value)
            return self.seen.get(value, value)
        return value


def _drop_empty(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: _drop_empty(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in ({}, [])}
    if isinstance(value, list):
        return [_drop_empty(v) for v in value]
    return value


def _made_for_the_job(obj: Obj) -> bool:
    """RayClusters, Jobs and the RayJob's Service (the oracle also stands in the cluster's own)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    kind = obj.get("kind")
    if kind == "Service":
        return bool(labels.get("ray.io/originated-from-crd") == "RayJob")
    return kind in ("RayCluster", "Job", "RayResourceRequest")


def _containers(value: Any) -> Iterator[Obj]:
    """Every container of every pod template in ``value``."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("containers", "initContainers") and isinstance(item, list):
                yield from (c for c in item if isinstance(c, dict))
            else:
                yield from _containers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _containers(item)


def _object(obj: Obj, *, rayscale: bool) -> Obj:
    obj = copy.deepcopy(obj)
    if rayscale and obj["kind"] == "RayCluster":
        structural_default(obj, object_schema(RAYCLUSTER))
    if obj["kind"] == "Service":  # on every write (the oracle's stand-in only on create)
        obj = stored_service(obj)
    for container in _containers(obj.get("spec")):
        for port in container.get("ports") or []:
            port.setdefault("protocol", "TCP")  # KubeRay's CRD default (rayscale's keeps templates as given)
        for env in container.get("env") or []:
            if env.get("value") == "":
                del env["value"]  # EnvVar.value is omitempty: the API server stores "" as absent
    obj.pop("status", None)
    meta = obj.setdefault("metadata", {})
    for key in _SERVER_METADATA:
        meta.pop(key, None)
    result: Obj = _drop_empty(obj)
    return result


def _status(status: Any) -> Any:
    if not isinstance(status, dict):
        return status
    status = copy.deepcopy(status)
    cluster = status.get("rayClusterStatus")
    if isinstance(cluster, dict):
        for key, zero in _GO_ZERO_CLUSTER_STATUS.items():
            if cluster.get(key) == zero:
                del cluster[key]
        if cluster.get("head") == {}:
            del cluster["head"]
    return _drop_empty(status)  # KubeRay's empty structs (rayJobInfo: {}) are absent in rayscale's


def _calls(step: Obj) -> Iterator[Obj]:
    submits = iter(step.get("submits") or [])  # rayscale's: each submit's address and body
    for call in step["dashboard_calls"]:
        if call["op"] == "GetJobInfo":
            continue
        out = {"op": call["op"], "jobId": call.get("jobId", "")}
        if call["op"] in ("SubmitJob", "SubmitJobReq"):
            sent = next(submits, {}) if "request" not in call and "error" not in call else call
            if sent.get("url"):
                out["url"] = str(sent["url"]).removeprefix("http://")
            for key in ("request", "error"):
                if key in sent:
                    out[key] = sent[key]
        yield out


def _owned_by_the_job(obj: Obj) -> bool:
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return bool(owners) and all(o.get("kind") == "RayJob" for o in owners)


def step_parts(step: Obj, *, rayscale: bool, gone: bool = False) -> dict[str, Any]:
    """One step's parts by name (see the module's docstring), not yet renamed; ``gone``: the
    RayJob was deleted in an earlier step, so the garbage collector has taken what it owned (the
    oracle stands in for it, the simulation does not)."""
    parts: dict[str, Any] = {
        "RayJob": {
            "status": _status(step["status"]),
            "finalizers": list(step["finalizers"]),
            "requeueAfter": float(step["result"]["requeueAfter"] or 0),
            "failed": bool(step["result"]["error"]),
        }
    }
    objects = step["objects"] + (step.get("requests") or [])  # rayscale's RayResourceRequests
    for obj in objects:
        if _made_for_the_job(obj) and not (gone and _owned_by_the_job(obj)):
            parts[f"{obj['kind']}/{obj['metadata']['name']}"] = _object(obj, rayscale=rayscale)
    for event in step["events"]:
        kind, reason, message = [*event.split(" ", 2), "", ""][:3]
        key = f"Event/{reason}"
        while key in parts:
            key += "#2"
        parts[key] = {"type": kind, "message": message}
    for i, call in enumerate(_calls(step)):
        parts[f"Ray/{i}"] = call
    return parts


def _clockless(value: Any, now: datetime) -> Any:
    """The times printed in rayscale's texts as the oracle prints KubeRay's: ``<n s ago>``."""
    if isinstance(value, dict):
        return {k: _clockless(v, now) for k, v in value.items()}
    if isinstance(value, list):
        return [_clockless(v, now) for v in value]
    if isinstance(value, str):

        def ago(m: re.Match[str]) -> str:
            at = datetime.strptime(m.group(0)[:19], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
            return f"<{max(0, int((now - at).total_seconds()))} s ago>"

        return _TIME_IN_TEXT.sub(ago, value)
    return value


def sim_nows(case: Obj) -> list[datetime]:
    """The simulation's "now" at each step of a case (its first, plus every step's age so far)."""
    out, now = [], SIM_EPOCH
    for step in case.get("steps") or []:
        now += timedelta(seconds=float(step.get("age") or 0))
        out.append(now)
    return out


def normalise_case(
    steps: list[Obj], rayjob: str, *, rayscale: bool, nows: list[datetime] | None = None
) -> list[dict[str, Any]]:
    """Every step's parts, generated names and uids mapped consistently across the case;
    ``nows``: rayscale's side, the simulation's clock at each step (for the times in texts)."""
    names = _Names(rayjob, RAYSCALE_RAYJOB_UID if rayscale else KUBERAY_RAYJOB_UID)
    gone = [any(s["status"] == "deleted" for s in steps[:i]) for i in range(len(steps))]
    raw = [step_parts(s, rayscale=rayscale, gone=g) for s, g in zip(steps, gone, strict=True)]
    if nows is not None:
        raw = [_clockless(parts, now) for parts, now in zip(raw, nows, strict=True)]
    for parts in raw:
        status = parts["RayJob"]["status"]
        if isinstance(status, dict):
            names.see(str(status.get("jobId") or ""))
            names.see(str(status.get("rayClusterName") or ""))
        names.see(json.dumps(parts, sort_keys=True))
    return [{names.sub(k): names.sub(v) for k, v in parts.items()} for parts in raw]


def both(case: Obj, kuberay: list[Obj], rayscale: list[Obj]) -> tuple[list[Obj], list[Obj]]:
    """Both sides' steps of ``case`` (as sent to the oracle), normalised."""
    rayjob = case["rayjob"]["metadata"]["name"]
    theirs = normalise_case(kuberay, rayjob, rayscale=False)
    return theirs, normalise_case(rayscale, rayjob, rayscale=True, nows=sim_nows(case))


def compare_case(case: Obj, kuberay: list[Obj], rayscale: list[Obj]) -> list[Difference]:
    """Every difference of every step, the document being ``<case>#<step>``."""
    name = case["name"]
    theirs, ours = both(case, kuberay, rayscale)
    out: list[Difference] = []
    for i, (a, b) in enumerate(zip(theirs, ours, strict=True)):
        for key in list(a) + [k for k in b if k not in a]:
            out += [
                Difference(f"{name}#{i}", key, path, x, y)
                for path, x, y in diff(a.get(key, ABSENT), b.get(key, ABSENT))
            ]
    return out


def fields(case: Obj, kuberay: list[Obj], rayscale: list[Obj]) -> int:
    """How many fields (leaves of either side's parts, by path) the case's steps compare."""
    theirs, ours = both(case, kuberay, rayscale)
    return sum(len(_leaves(a) | _leaves(b)) for a, b in zip(theirs, ours, strict=True))


def _leaves(value: Any, path: str = "") -> set[str]:
    if isinstance(value, dict) and value:
        return set().union(*(_leaves(v, f"{path}.{k}") for k, v in value.items()))
    if isinstance(value, list) and value:
        return set().union(*(_leaves(v, f"{path}[{i}]") for i, v in enumerate(value)))
    return {path}
