"""Which cluster the tests, `make demo`, the benchmarks and the fault suite may use.

By default only rayscale's own local control plane: `$KUBECONFIG` and ``~/.kube/config`` are never
read here, so a production context in the shell is never touched. Another cluster is used only when
it is named:

- ``RAYSCALE_TARGET_KUBECONFIG=FILE`` names it (kind, say: e2e/kind/run-tests.sh does so);
- ``RAYSCALE_TARGET_CONTEXT=NAME`` picks a context of FILE (else FILE's current context);
- ``RAYSCALE_TARGET_FORCE=1`` accepts a cluster that holds what another owner put there.

A named cluster must answer: there is no falling back to the local control plane. It is refused when
it holds RayClusters or CRDs of the groups ray.io or rayscale.io that the tests did not put there
(they force-apply rayscale's CRDs over KubeRay's, create namespaces, run operators, delete
RayClusters). A cluster that passed (or was forced) is claimed with the ConfigMap
``default/rayscale-test-target`` and accepted on later runs. Everything before the claim only reads.

The context is pinned when the cluster is chosen: a copy of FILE with that one context (``kubectl
config view --minify --flatten``) is the kubeconfig kubectl, the operators, KubeRay's operator and
Helm get, so switching FILE's current context meanwhile changes nothing. Standard library only.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from hack.localk8s import launcher

TARGET_KUBECONFIG = "RAYSCALE_TARGET_KUBECONFIG"
TARGET_CONTEXT = "RAYSCALE_TARGET_CONTEXT"
TARGET_FORCE = "RAYSCALE_TARGET_FORCE"
MARKER_NAMESPACE = "default"
MARKER_NAME = "rayscale-test-target"
MARKER_LABEL = "app.kubernetes.io/managed-by"
MARKER_MANAGER = "rayscale-tests"
OWNED_GROUPS = ("ray.io", "rayscale.io")
RAYCLUSTER_CRD = "rayclusters.ray.io"
SHOWN = 20  # at most this many findings in a refusal


class TargetError(RuntimeError):
    """The named cluster cannot be used; the message says why and what to do."""


class Kubectl(Protocol):
    """kubectl with `kubeconfig` as its only configuration (tests fake it)."""

    def __call__(
        self, kubeconfig: Path, *args: str, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]: ...


def kubectl_at(binary: str) -> Kubectl:
    def run(kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        argv = [binary, *args]
        try:
            return subprocess.run(
                argv,
                env={**os.environ, "KUBECONFIG": str(kubeconfig)},
                input=stdin,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return subprocess.CompletedProcess(argv, 1, "", str(exc))

    return run


@dataclass(frozen=True)
class Target:
    """A named cluster that may be used."""

    source: Path  # the file RAYSCALE_TARGET_KUBECONFIG names
    context: str | None  # RAYSCALE_TARGET_CONTEXT, if given
    kubeconfig: Path  # what everything started gets: the chosen context only (or `source` itself)
    scratch: Path | None = None  # the directory of the pinned copy, removed by `discard`
    local_dir: Path | None = None  # set when `source` is a running local control plane's

    def describe(self) -> str:
        context = f" (context {self.context})" if self.context else ""
        return f"{TARGET_KUBECONFIG}={self.source}{context}"

    def discard(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


def answers(kubectl: Kubectl, kubeconfig: Path) -> str | None:
    """None when the cluster of `kubeconfig` is ready, else why not."""
    out = kubectl(kubeconfig, "--request-timeout=5s", "get", "--raw", "/readyz")
    return None if out.returncode == 0 else (out.stderr.strip() or f"kubectl exited {out.returncode}")


def resolve(environ: Mapping[str, str], kubectl: Kubectl, *, by: str) -> Target | None:
    """None when no cluster is named: the caller uses the local control plane ($KUBECONFIG is not
    looked at). Else the named cluster, answering, checked and claimed; TargetError when not."""
    source = environ.get(TARGET_KUBECONFIG, "").strip()
    context = environ.get(TARGET_CONTEXT, "").strip() or None
    if not source:
        if context:
            raise TargetError(
                f"{TARGET_CONTEXT}={context} is set but {TARGET_KUBECONFIG} is not: name the kubeconfig "
                f"file too ($KUBECONFIG is never used for tests)"
            )
        return None
    path = Path(source).expanduser().resolve()
    if not path.is_file():
        raise TargetError(f"{TARGET_KUBECONFIG}={source}: no such file")
    local = local_control_plane(path)
    if local is not None and context is None:
        named = Target(path, None, path, local_dir=local)  # rayscale's own: no owner to ask
        _answering(kubectl, named)
        return named
    scratch = Path(tempfile.mkdtemp(prefix="rayscale-target-"))
    named = Target(path, context, scratch / "kubeconfig", scratch)
    try:
        pin(kubectl, named)
        _answering(kubectl, named)
        guard(kubectl, named, by=by, force=forced(environ))
    except BaseException:
        named.discard()
        raise
    return named


def forced(environ: Mapping[str, str]) -> bool:
    return environ.get(TARGET_FORCE, "").strip().lower() in ("1", "true", "yes")


def local_control_plane(kubeconfig: Path) -> Path | None:
    """The state directory when `kubeconfig` is that of a local control plane that runs."""
    state = launcher.running(kubeconfig.parent)
    if state and Path(str(state["kubeconfig"])).resolve() == kubeconfig:
        return kubeconfig.parent
    return None


def pin(kubectl: Kubectl, named: Target) -> None:
    """Write `named.kubeconfig`: the chosen context of `named.source`, nothing else, flattened."""
    args = ["config", "view", "--minify", "--flatten", "-o", "json"]
    if named.context:
        args.append(f"--context={named.context}")
    out = kubectl(named.source, *args)
    if out.returncode != 0:
        listed = kubectl(named.source, "config", "get-contexts", "-o", "name").stdout.split()
        raise TargetError(
            f"{named.describe()}: cannot select a context ({out.stderr.strip()}); its contexts: "
            f"{', '.join(listed) or 'none'}; set {TARGET_CONTEXT} to one of them"
        )
    config = json.loads(out.stdout)
    chosen = named.context or config.get("current-context")
    if not chosen:
        raise TargetError(f"{named.describe()} has no current context: set {TARGET_CONTEXT}")
    config["current-context"] = chosen
    fd = os.open(named.kubeconfig, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(config, f)


def _answering(kubectl: Kubectl, named: Target) -> None:
    why = answers(kubectl, named.kubeconfig)
    if why is not None:
        raise TargetError(
            f"the cluster named by {named.describe()} does not answer: {why}\n"
            f"Nothing falls back to the local control plane when a cluster is named: start that "
            f"cluster, or unset {TARGET_KUBECONFIG} to use the local control plane."
        )


def guard(kubectl: Kubectl, named: Target, *, by: str, force: bool) -> None:
    """Accept a cluster claimed earlier; else refuse another owner's Ray objects (unless `force`),
    then claim it. Only reads until the claim."""
    if claimed(kubectl, named.kubeconfig):
        return
    found = foreign(kubectl, named.kubeconfig)
    if found and not force:
        raise TargetError(refusal(named, found))
    claim(kubectl, named.kubeconfig, by=by, found=found)


def claimed(kubectl: Kubectl, kubeconfig: Path) -> bool:
    out = kubectl(kubeconfig, "--request-timeout=30s", "get", "configmap", MARKER_NAME,
                  "--namespace", MARKER_NAMESPACE, "-o", "json")  # fmt: skip
    if out.returncode != 0:
        if "NotFound" in out.stderr:
            return False
        raise TargetError(f"cannot read {MARKER_NAMESPACE}/{MARKER_NAME}: {out.stderr.strip()}")
    labels = json.loads(out.stdout).get("metadata", {}).get("labels") or {}
    return bool(labels.get(MARKER_LABEL) == MARKER_MANAGER)


def foreign(kubectl: Kubectl, kubeconfig: Path) -> list[str]:
    """The CRDs of ray.io and rayscale.io, and the RayClusters of every namespace."""
    crds = sorted(
        str(item["metadata"]["name"])
        for item in _items(kubectl, kubeconfig, "customresourcedefinitions")
        if (item.get("spec") or {}).get("group") in OWNED_GROUPS
    )
    found = [f"CustomResourceDefinition {name}" for name in crds]
    if RAYCLUSTER_CRD in crds:
        found += sorted(
            f"RayCluster {item['metadata'].get('namespace')}/{item['metadata']['name']}"
            for item in _items(kubectl, kubeconfig, RAYCLUSTER_CRD, "--all-namespaces")
        )
    return found


def _items(kubectl: Kubectl, kubeconfig: Path, *what: str) -> list[dict[str, Any]]:
    out = kubectl(kubeconfig, "--request-timeout=30s", "get", *what, "-o", "json")
    if out.returncode != 0:
        raise TargetError(f"cannot list {what[0]}: {out.stderr.strip()}")
    return list(json.loads(out.stdout).get("items") or [])


def refusal(named: Target, found: list[str]) -> str:
    shown = [f"  {line}" for line in found[:SHOWN]]
    if len(found) > SHOWN:
        shown.append(f"  ... and {len(found) - SHOWN} more")
    return "\n".join([
        f"refusing the cluster named by {named.describe()}: it holds Ray objects of another owner:",
        *shown,
        "rayscale's tests, demo, benchmarks and fault suite would replace these CRDs with rayscale's "
        "(server-side apply, --force-conflicts), create namespaces, run operators (rayscale's and "
        "KubeRay's) and delete RayClusters there.",
        f"Name a cluster of your own, or unset {TARGET_KUBECONFIG} to use the local control plane. If "
        f"what is listed may be lost, set {TARGET_FORCE}=1: the cluster is then claimed (ConfigMap "
        f"{MARKER_NAMESPACE}/{MARKER_NAME}) and accepted without this check from then on.",
    ])  # fmt: skip


def claim(kubectl: Kubectl, kubeconfig: Path, *, by: str, found: list[str]) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": MARKER_NAME,
            "namespace": MARKER_NAMESPACE,
            "labels": {MARKER_LABEL: MARKER_MANAGER},
        },
        "data": {
            "claimed-at": datetime.now(UTC).isoformat(timespec="seconds"),
            "claimed-by": f"{by}, {_who()}",
            "forced": "true" if found else "false",
            "found": "\n".join(found),
        },
    }
    out = kubectl(kubeconfig, "create", "-f", "-", stdin=json.dumps(body))
    if out.returncode != 0 and not ("AlreadyExists" in out.stderr and claimed(kubectl, kubeconfig)):
        raise TargetError(
            f"cannot claim the cluster ({MARKER_NAMESPACE}/{MARKER_NAME}): {out.stderr.strip()}"
        )


def _who() -> str:
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}, pid {os.getpid()}"
