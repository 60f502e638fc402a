"""KubeRay's side: the oracle binary (tools/kuberay-oracle), built on first use and cached.

``build()`` runs tools/kuberay-oracle/build.sh, which builds the binary from the KubeRay Go
module pinned in tools/kuberay-oracle/versions.env (minutes the first time, then a cache hit in
~/.cache/rayscale) and records where the module lies in the Go module cache, whose
config/samples/ holds KubeRay's sample RayClusters. ``render`` runs one oracle process for a
whole batch of documents.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "tools" / "kuberay-oracle" / "build.sh"
VERSIONS = ROOT / "tools" / "kuberay-oracle" / "versions.env"
MODULE = "github.com/ray-project/kuberay/ray-operator"


class OracleError(RuntimeError):
    """The oracle could not be built, or failed."""


def kuberay_version() -> str:
    for line in VERSIONS.read_text(encoding="utf-8").splitlines():
        if line.startswith("KUBERAY_VERSION="):
            return line.split("=", 1)[1].strip()
    raise OracleError(f"{VERSIONS} sets no KUBERAY_VERSION")


@dataclasses.dataclass(frozen=True)
class Oracle:
    bindir: Path

    @property
    def binary(self) -> Path:
        return self.bindir / "kuberay-oracle"

    @property
    def module_dir(self) -> Path:
        return Path((self.bindir / "module-dir").read_text(encoding="utf-8").strip())

    @property
    def samples_dir(self) -> Path:
        return self.module_dir / "config" / "samples"

    def run(self, args: list[str], stdin: str) -> Any:
        """The oracle's JSON answer to `stdin` (KubeRay with its defaults: none of the caller's
        environment reaches the controller; the oracle also clears every switch KubeRay reads)."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        proc = subprocess.run(
            [str(self.binary), *args], input=stdin, capture_output=True, text=True, env=env, timeout=600
        )
        if proc.returncode != 0:
            raise OracleError(
                f"kuberay-oracle {args} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}"
            )
        return json.loads(proc.stdout)

    def render(self, docs: list[dict[str, Any]], *, batch: str = "") -> list[dict[str, Any]]:
        """What KubeRay creates for each RayCluster document, in order (see main.go); ``batch``: as
        KubeRay's operator started with ``--batch-scheduler=BATCH`` (batch.go)."""
        args = ["-batch-scheduler", batch] if batch else []
        results: list[dict[str, Any]] = self.run(args, "\n---\n".join(json.dumps(d) for d in docs) + "\n")
        if len(results) != len(docs):
            raise OracleError(f"sent {len(docs)} RayClusters, got {len(results)} answers")
        return results


def build() -> Oracle:
    """Build (or find in the cache) the oracle for the pinned KubeRay version."""
    proc = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise OracleError(f"{BUILD_SCRIPT} failed ({proc.returncode}):\n{proc.stderr.strip()[-4000:]}")
    lines = proc.stdout.strip().splitlines()
    if not lines:
        raise OracleError(f"{BUILD_SCRIPT} printed no directory")
    return Oracle(Path(lines[-1]))


@functools.cache
def module_dir() -> Path:
    """The pinned KubeRay module's directory in the Go module cache (its CRDs, its samples):
    ``go mod download`` fetches it when it is not there yet (the module's zip, seconds; no build)."""
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    download = ["go", "mod", "download", "-json", f"{MODULE}@{kuberay_version()}"]
    try:
        proc = subprocess.run(download, cwd=BUILD_SCRIPT.parent, capture_output=True, text=True, env=env)
    except OSError as exc:
        raise OracleError(f"Go fetches KubeRay's module ({exc}): install Go (tools/kuberay-oracle)") from exc
    if proc.returncode != 0:
        raise OracleError(f"go mod download {MODULE} failed: {(proc.stdout + proc.stderr).strip()[-2000:]}")
    return Path(json.loads(proc.stdout)["Dir"])
