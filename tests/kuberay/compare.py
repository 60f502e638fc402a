"""Field-by-field comparison of what KubeRay and rayscale create for one RayCluster.

Both answers are first normalised, only where the two must differ or where Kubernetes gives
two spellings one meaning; each normalisation says why. Objects are then paired by their role
(``Pod/head``, ``Pod/worker/<group>/<replica index>[/<host index>]``, ``Service/head``,
``Service/headless``, ``Service/serve``, ``Ingress/head``, ``Secret/auth-token``,
``ServiceAccount/autoscaler``, ... else ``<Kind>/<name>``) and compared field by field. A difference is
``<object>: <path>: kuberay=X rayscale=Y``; a path spells map keys ``.key`` (``[key]`` when the
key holds a dot or a slash, as label keys do) and list items ``[name]`` for lists whose items
have names, ``[i]`` otherwise; ``(order)`` after a list is the order of the items both have.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from rayscale.common.types import Manifest


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


ABSENT: Any = _Absent()
RANDOM = "<random>"
CLUSTER = "<cluster name>"
TIME = "<time>"


@dataclasses.dataclass(frozen=True)
class Difference:
    document: str
    object: str
    path: str
    kuberay: Any
    rayscale: Any

    def __str__(self) -> str:
        return (
            f"{self.object}: {self.path or '.'}: kuberay={show(self.kuberay)} rayscale={show(self.rayscale)}"
        )


def show(value: Any, limit: int = 240) -> str:
    text = "<absent>" if value is ABSENT else json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ----------------------------------------------------------------------------- normalisation

_SUFFIX = re.compile(r"^[a-z0-9]{5}$")
_SHELLS = ("/bin/bash", "bash", "/bin/sh", "sh")
# Set by the API server on create, never by an operator.
_SERVER_METADATA = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields")
_STATUS_CLOCKS = ("lastUpdateTime",)


def _shell_text(text: str) -> str:
    """A bash script with runs of blanks made one space and blank lines dropped.

    KubeRay writes its generated ``ray start`` with doubled and trailing spaces and indents its
    init container's script with tabs; bash splits words on any run of blanks, so these spell the
    same commands. Newlines (command separators) are kept. Blanks inside quotes are collapsed too,
    where they would matter; no script compared here quotes a run of blanks.
    """
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def _ray_start(text: str) -> Any:
    """A script running ``ray start``, split so that a difference names the flag it is in:
    ``{"before": <the script up to ray start>, "ray start": {flag: value}}`` (``--head`` is
    ``head: true``). Not a normalisation of meaning: ``ray start`` reads its options in any
    order, and both operators write them sorted. Other scripts become their lines."""
    text = _shell_text(text)
    at = text.find("ray start")
    if at < 0:
        # Any other script, line by line, so that a difference names its line.
        return text.splitlines() if "\n" in text else text
    flags: Manifest = {}
    for word in text[at + len("ray start") :].split():
        name, eq, value = word.partition("=")
        flags[name.removeprefix("--")] = value if eq else True
    return {"before": text[:at].rstrip(), "ray start": flags}


def _normalise_container(container: Manifest) -> None:
    command = container.get("command") or []
    # Shell scripts: KubeRay's generated args (see _shell_text, _ray_start).
    if command and command[0] in _SHELLS and "-c" in command:
        container["args"] = [_ray_start(a) if isinstance(a, str) else a for a in container.get("args") or []]
    for env in container.get("env") or []:
        # Used as $KUBERAY_GEN_RAY_START_CMD, word-split by the shell (see _shell_text).
        if env.get("name") == "KUBERAY_GEN_RAY_START_CMD" and isinstance(env.get("value"), str):
            env["value"] = _ray_start(env["value"])
    # The API server defaults a port's protocol to TCP: absent and TCP are the same port.
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")


def _normalise_pod_spec(spec: Manifest) -> None:
    for kind in ("containers", "initContainers", "ephemeralContainers"):
        for container in spec.get(kind) or []:
            _normalise_container(container)


def _normalise_pod(pod: Manifest) -> None:
    _normalise_pod_spec(pod.get("spec") or {})
    labels = (pod.get("metadata") or {}).get("labels") or {}
    group = labels.get("ray.io/group", "")
    replica = labels.get("ray.io/worker-group-replica-name")
    # Multi-host replica names are "<group>-" and 5 random characters on both sides.
    if (
        isinstance(replica, str)
        and replica.startswith(f"{group}-")
        and _SUFFIX.match(replica[len(group) + 1 :])
    ):
        labels["ray.io/worker-group-replica-name"] = f"{group}-{RANDOM}"


def _normalise_secret(secret: Manifest) -> None:
    # The API server stores stringData base64-encoded in data.
    data = secret.setdefault("data", {})
    for key, value in (secret.pop("stringData", None) or {}).items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    # A fresh random token on each side.
    if "auth_token" in data:
        data["auth_token"] = RANDOM
    if not data:
        secret.pop("data")


def _normalise_status(status: Any) -> Any:
    """Times are wall clocks on both sides. Zero values are compared as written: KubeRay's status
    fields are ``omitempty`` (a zero count or empty string is not written, ``kubectl get`` shows a
    blank), and so are rayscale's."""
    if not isinstance(status, dict):
        return status
    out: Manifest = {}
    for key, value in status.items():
        if key in _STATUS_CLOCKS:
            value = TIME
        elif key == "stateTransitionTimes" and isinstance(value, dict):
            value = dict.fromkeys(value, TIME)
        elif key == "conditions" and isinstance(value, list):
            value = [{**c, "lastTransitionTime": TIME} if "lastTransitionTime" in c else c for c in value]
        elif isinstance(value, dict):
            value = _normalise_status(value)
        if value is None:
            continue
        out[key] = value
    return out


def _drop_empty(value: Any) -> Any:
    """Without empty maps and lists: the created objects are built-in kinds whose map and list
    fields are all ``omitempty``, so the API server stores an empty one as absent."""
    if isinstance(value, dict):
        out = {k: _drop_empty(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in ({}, [])}
    if isinstance(value, list):
        return [_drop_empty(v) for v in value]
    return value


def normalise(answer: Mapping[str, Any]) -> tuple[dict[str, Manifest], Manifest]:
    """The answer's objects keyed by role, and the RayCluster's finalizers and status."""
    cluster = answer["name"]
    renamed: dict[str, str] = {}
    objects: dict[str, Manifest] = {}
    for raw in answer.get("objects") or []:
        obj = _drop_empty(raw)
        meta = obj.setdefault("metadata", {})
        for key in _SERVER_METADATA:
            meta.pop(key, None)
        # An object's status is the API server's and the kubelet's, never the operator's.
        obj.pop("status", None)
        # generateName: the API server appends 5 random characters.
        name, prefix = meta.get("name", ""), meta.get("generateName")
        if prefix and name.startswith(prefix) and _SUFFIX.match(name[len(prefix) :]):
            meta["name"] = renamed[name] = prefix + RANDOM
        kind = obj.get("kind")
        if kind == "Pod":
            _normalise_pod(obj)
            spec = obj.get("spec") or {}
            # KubeRay's autoscaler ServiceAccount is named after the cluster: shown as CLUSTER so
            # that an allowlist entry can tell it from a ServiceAccount the user named.
            if spec.get("serviceAccountName") == cluster:
                spec["serviceAccountName"] = CLUSTER
        elif kind == "Secret":
            _normalise_secret(obj)
        elif kind == "Job":  # the Redis cleanup Job's pod template: its containers as a pod's
            _normalise_pod_spec(((obj.get("spec") or {}).get("template") or {}).get("spec") or {})
        key = _role(obj, cluster)
        while key in objects:
            key += "#2"
        objects[key] = obj
    after = answer.get("cluster") or {}
    status = _normalise_status(copy.deepcopy(after.get("status") or {}))
    head = status.get("head") or {}
    if head.get("podName") in renamed:
        head["podName"] = renamed[head["podName"]]
    finalizers = (after.get("metadata") or {}).get("finalizers") or []
    return objects, {"metadata": {"finalizers": finalizers}, "status": status}


def _role(obj: Manifest, cluster: str) -> str:
    kind = obj.get("kind", "?")
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    name = str(meta.get("name", ""))
    if kind == "Pod" and labels.get("ray.io/node-type") == "head":
        return "Pod/head"
    if kind == "Pod" and labels.get("ray.io/node-type") == "worker":
        group, replica = labels.get("ray.io/group", "?"), labels.get("ray.io/worker-group-replica-index", "?")
        host = labels.get("ray.io/replica-host-index")
        return f"Pod/worker/{group}/{replica}" + (f"/{host}" if host is not None else "")
    if kind == "Service":
        if "ray.io/headless-worker-svc" in labels:
            return "Service/headless"
        if name.endswith("-serve-svc"):
            return "Service/serve"
        if labels.get("ray.io/node-type") == "head":
            return "Service/head"
    if kind == "Ingress":
        return "Ingress/head"
    if kind in ("ServiceAccount", "Role", "RoleBinding"):
        return f"{kind}/autoscaler"
    if kind == "Secret" and labels.get("ray.io/cluster") == cluster:
        return "Secret/auth-token"
    return f"{kind}/{name}"


# ----------------------------------------------------------------------------- diff


def _item_key(list_name: str) -> Callable[[Manifest], str | None] | None:
    """How items of a list are told apart, for lists whose items have an identity."""
    by_name = {"containers", "initContainers", "ephemeralContainers", "env", "volumes", "conditions"}
    if list_name in by_name:
        field = "type" if list_name == "conditions" else "name"
        return lambda item: None if item.get(field) is None else str(item[field])
    if list_name == "volumeMounts":
        return lambda item: None if item.get("mountPath") is None else str(item["mountPath"])
    if list_name == "ports":
        return lambda item: str(item.get("name") or item.get("containerPort") or item.get("port"))
    return None


# Lists whose order means something: containers[0] is the Ray container and init containers
# run in order; an env var can use $(NAME) of only those before it. The order of volumes,
# mounts, ports and conditions means nothing to Kubernetes.
_ORDERED = ("containers", "initContainers", "env")


def _step(path: str, key: str) -> str:
    return f"{path}[{key}]" if ("." in key or "/" in key) else (f"{path}.{key}" if path else key)


def _keyed(items: list[Any], key: Callable[[Manifest], str | None]) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    for item in items:
        k = key(item) if isinstance(item, dict) else None
        if k is None:
            return None
        while k in out:  # a repeated name is itself a difference: keep both
            k += "#2"
        out[k] = item
    return out


def diff(kuberay: Any, rayscale: Any, path: str = "", list_name: str = "") -> list[tuple[str, Any, Any]]:
    """(path, kuberay value, rayscale value) for every place the two differ."""
    if isinstance(kuberay, dict) and isinstance(rayscale, dict):
        out = []
        for key in sorted(set(kuberay) | set(rayscale)):
            out += diff(kuberay.get(key, ABSENT), rayscale.get(key, ABSENT), _step(path, key), key)
        return out
    if isinstance(kuberay, list) and isinstance(rayscale, list):
        key = _item_key(list_name)
        a = _keyed(kuberay, key) if key else None
        b = _keyed(rayscale, key) if key else None
        if a is None or b is None:
            if len(kuberay) != len(rayscale):
                return [(path, kuberay, rayscale)]
            a = {str(i): v for i, v in enumerate(kuberay)}
            b = {str(i): v for i, v in enumerate(rayscale)}
        out = []
        for k in list(a) + [k for k in b if k not in a]:
            out += diff(a.get(k, ABSENT), b.get(k, ABSENT), f"{path}[{k}]", "")
        if list_name in _ORDERED and key is not None:
            common = [k for k in a if k in b]
            order = [k for k in b if k in a]
            if common != order:
                out.append((f"{path}(order)", common, order))
        return out
    if kuberay == rayscale:
        return []
    return [(path, kuberay, rayscale)]


def compare(document: str, kuberay: Mapping[str, Any], rayscale: Mapping[str, Any]) -> list[Difference]:
    """Every difference between the two answers for one document."""
    out: list[Difference] = []
    k_invalid, r_invalid = kuberay.get("invalid"), rayscale.get("invalid")
    for path, a, b in diff(k_invalid or ABSENT, r_invalid or ABSENT, "invalid"):
        out.append(Difference(document, "RayCluster", path, a, b))
    k_objects, k_cluster = normalise(kuberay)
    r_objects, r_cluster = normalise(rayscale)
    for path, a, b in diff(k_cluster, r_cluster):
        out.append(Difference(document, "RayCluster", path, a, b))
    for key in list(k_objects) + [k for k in r_objects if k not in k_objects]:
        a, b = k_objects.get(key, ABSENT), r_objects.get(key, ABSENT)
        if a is ABSENT or b is ABSENT:
            out.append(Difference(document, key, "", _brief(a), _brief(b)))
            continue
        out += [Difference(document, key, path, x, y) for path, x, y in diff(a, b)]
    return out


def _brief(obj: Any) -> Any:
    """A whole object missing on one side is shown by its name only."""
    if obj is ABSENT:
        return ABSENT
    return {"kind": obj.get("kind"), "name": (obj.get("metadata") or {}).get("name")}
