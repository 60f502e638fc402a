"""The packaging files agree with each other: what builds a wheel (pyproject.toml's build
requirements, setup.py, MANIFEST.in) and what builds the image (Dockerfile, .dockerignore,
hack/image/). tests/integration/test_install_paths.py runs them; this only reads them."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from tests.support.builders import ROOT

GENERATORS = ("grpcio-tools", "mypy-protobuf")  # what generate.py runs
PROTOS = ROOT / "operator" / "rayscale" / "ray" / "protos"


def lower_bound(requirement: Requirement) -> str:
    (bound,) = [s.version for s in requirement.specifier if s.operator == ">="]
    return bound


def test_the_wheel_build_requires_the_generators_the_dev_extra_pins() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    build = {r.name: r for r in map(Requirement, pyproject["build-system"]["requires"])}
    dev = {r.name: r for r in map(Requirement, pyproject["project"]["optional-dependencies"]["dev"])}
    for name in GENERATORS:
        assert name in build, f"[build-system] requires lacks {name}: setup.py generates with it"
        assert lower_bound(build[name]) == lower_bound(dev[name]), (
            f"{name}: {build[name]} against {dev[name]}"
        )
        major, minor = (int(part) for part in lower_bound(build[name]).split(".")[:2])
        ceiling = f"<{major}.{minor + 1}" if name == "grpcio-tools" else f"<{major + 1}"
        assert ceiling in str(build[name].specifier), f"{name}: {build[name]} lacks the upper bound {ceiling}"


def test_the_protobuf_runtime_floor_is_the_version_the_bindings_are_generated_for() -> None:
    """protoc's generated modules refuse an older protobuf runtime at import; grpcio-tools is held to one
    minor release (above), whose protoc writes one protobuf version, and the runtime floor is that one."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    runtime = {r.name: r for r in map(Requirement, pyproject["project"]["dependencies"])}["protobuf"]
    generated = sorted(PROTOS.glob("*_pb2.py"))
    assert generated, "no generated bindings: make proto"
    versions = {
        m.group(1) for f in generated if (m := re.search(r"Protobuf Python Version: (\S+)", f.read_text()))
    }
    assert versions == {lower_bound(runtime)}, f"generated for {versions}, runtime floor {runtime}"


def test_the_sdist_takes_the_protos_and_leaves_generated_bindings_out() -> None:
    manifest = (ROOT / "MANIFEST.in").read_text().splitlines()
    assert "include operator/rayscale/ray/protos/*.proto" in manifest
    assert any(line.startswith("exclude ") and "*_pb2.py" in line for line in manifest)


def copy_sources(dockerfile: str) -> list[str]:
    """What the Dockerfile's COPY lines take from the build context."""
    lines = re.findall(r"^COPY (?!--from=)(.+)$", dockerfile, re.MULTILINE)
    return [source for line in lines for source in shlex.split(line)[:-1]]


def test_the_build_context_holds_what_the_dockerfile_copies() -> None:
    allowed = {line[1:] for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")}
    sources = copy_sources((ROOT / "Dockerfile").read_text())
    assert "operator" in sources
    missing = [s for s in sources if s not in allowed]
    assert not missing, f".dockerignore leaves {missing} out of the build context"
    assert all((ROOT / s).exists() for s in sources), sources


def test_the_dockerfile_runs_the_tested_scripts() -> None:
    runs = re.findall(r"^RUN (hack/image/\S+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert runs == ["hack/image/build-wheel.sh", "hack/image/install.sh"]
    for script in runs:
        assert os.access(ROOT / script, os.X_OK), f"{script} is not executable"


def test_setup_pys_build_py_generates_the_bindings_into_the_build_directory(tmp_path: Path) -> None:
    in_tree = {p: p.stat().st_mtime_ns for p in PROTOS.glob("*_pb2.py*")}
    cmd = [sys.executable, "setup.py", "--quiet", "build_py", "--build-lib", str(tmp_path)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    built = tmp_path / "rayscale" / "ray" / "protos"
    for proto in PROTOS.glob("*.proto"):
        assert (built / f"{proto.stem}_pb2.py").is_file(), f"{proto.name}: no module in the build directory"
        assert (built / f"{proto.stem}_pb2.pyi").is_file(), f"{proto.name}: no stub in the build directory"
    assert {p: p.stat().st_mtime_ns for p in PROTOS.glob("*_pb2.py*")} == in_tree, (
        "the source tree was written"
    )
