"""Talks to the Ray oracle subprocess: one long-lived process, one line per batch of cases.

Importing Ray takes about a second, so the process is started once and reused for every batch
(generated cases, then the shrinker's candidates). The Python that runs it must have
``ray==2.60.0``: ``$RAYSCALE_RAY_PYTHON``, else this interpreter (the project's .venv has it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

SCRIPT = Path(__file__).resolve().parent / "ray_oracle.py"
RAY_VERSION = "2.60.0"


class OracleError(RuntimeError):
    """The oracle process died or answered something unreadable."""


def ray_python() -> str:
    return os.environ.get("RAYSCALE_RAY_PYTHON", sys.executable)


def ray_available(python: str | None = None) -> bool:
    """Whether ``python`` has Ray at the version the oracle was written for."""
    check = [python or ray_python(), "-c", f"import ray, sys; sys.exit(ray.__version__ != '{RAY_VERSION}')"]
    return subprocess.run(check, capture_output=True, check=False).returncode == 0


class Oracle:
    def __init__(self, python: str | None = None) -> None:
        env = dict(os.environ)
        # Ray's defaults, whatever the caller's environment says.
        for name in ("AUTOSCALER_CONSERVE_GPU_NODES", "RAY_AUTOSCALER_PENDING_NODE_IDLE_TIMEOUT_S"):
            env.pop(name, None)
        self._proc = subprocess.Popen(
            [python or ray_python(), str(SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def ask(self, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Ray's answers to ``cases`` (``ray_case.to_ray`` documents), in order."""
        if not cases:
            return []
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None
        assert stdout is not None
        try:
            stdin.write(json.dumps(cases) + "\n")
            stdin.flush()
        except BrokenPipeError as exc:
            raise OracleError(f"the Ray oracle exited (code {self._proc.poll()})") from exc
        line = stdout.readline()
        if not line:
            raise OracleError(f"the Ray oracle exited (code {self._proc.wait()})")
        answers: list[dict[str, Any]] = json.loads(line)
        if len(answers) != len(cases):
            raise OracleError(f"asked {len(cases)} cases, got {len(answers)} answers")
        return answers

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    def __enter__(self) -> Oracle:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
