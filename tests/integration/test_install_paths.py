"""Every way of installing rayscale works from a clean clone: the image's steps and `pip install .`.

A clean clone is the files git tracks or would track (``git ls-files -co --exclude-standard``)
copied to a temporary directory: no generated Ray GCS bindings, no .venv, no build leftovers.

No image can be built here (no Docker engine), so the test does what the Dockerfile does, on the
host: it lays out the build and install stages' ``COPY`` lines from the clean clone into a
directory standing for the image's filesystem and runs those stages' ``RUN`` lines there (each one
a hack/image/ script; paths under ``/`` mapped into that directory). The wheel they build must hold
the generated bindings; the virtualenv they install (the image's /opt/rayscale) then runs `rayscale
run` as the image does: as UID 65532 (when the test runs as root), from ``/``, with no write access
to anything of the source, with the flags the chart gives it, against the real API server, until
``/healthz`` answers and a RayCluster's head pod is created. Apart from that, `pip install .` of the
clean clone into a fresh virtualenv (its dependencies borrowed from the image's) imports the bindings.

pip reaches PyPI for the build requirements and the dependencies; its cache makes a second run
quick. The stages' ``ENV`` (``PIP_NO_CACHE_DIR``) is not applied, for that cache.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from hack.localk8s import launcher
from hack.localk8s.testcluster import ClusterHandle
from kubernetes_asyncio import client

from tests.support.builders import BASIC, ROOT, example
from tests.support.kube import Kube
from tests.support.operators import free_port
from tests.support.polling import eventually

IMAGE_UID = 65532  # the Dockerfile's USER
BINDINGS = ("autoscaler", "common", "gcs", "gcs_service", "node_manager")  # the .proto files
PROTOS = "rayscale/ray/protos"
INSTALL_STAGES = ("build", "install")  # the final stage only copies /opt/rayscale and adds the user
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # python:3.11-slim's PATH
# The interpreter must exist and run for the image's user: ~root is often closed to it.
PYTHON_CHECK = "import ensurepip, sys, venv; sys.exit(sys.version_info < (3, 11))"


def run(*cmd: str | Path, cwd: Path = ROOT, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert out.returncode == 0, (
        f"{shlex.join(map(str, cmd))} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    )
    return out.stdout


def as_image_user(cmd: list[str]) -> tuple[list[str], Callable[[], None] | None]:
    """`cmd` to run as the image's UID and GID, with no supplementary groups, when this is root,
    and killed when the thread that starts it ends: ``(argv, preexec_fn)`` for `subprocess.Popen`.
    One setpriv does both, the user first: changing the user clears the parent-death signal."""
    if os.geteuid() != 0:
        return launcher.dying_with_parent(cmd)
    ids = [f"--reuid={IMAGE_UID}", f"--regid={IMAGE_UID}", "--clear-groups"]
    return ["setpriv", *ids, "--pdeathsig", "KILL", "--", *cmd], None


@pytest.fixture(scope="module")
def clean_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    listed = run("git", "ls-files", "-co", "--exclude-standard", "-z").split("\0")
    dest = tmp_path_factory.mktemp("clone")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():  # a tracked file deleted in the tree is gone
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    assert not list((dest / "operator" / PROTOS).glob("*_pb2.py")), "generated bindings in the clean clone"
    assert (dest / "operator" / PROTOS / "generate.py").is_file()
    return dest


@pytest.fixture(scope="module")
def python() -> str:
    """A Python 3.11+ the image's user can run, standing for the image's /usr/local/bin/python3."""
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    candidates = [base, "/usr/local/bin/python3.11", "/usr/bin/python3.11", shutil.which("python3") or ""]
    for candidate in dict.fromkeys(c for c in candidates if c and Path(c).is_file()):
        argv, preexec = as_image_user([candidate, "-c", PYTHON_CHECK])
        probe = subprocess.run(argv, capture_output=True, preexec_fn=preexec, check=False)
        if probe.returncode == 0:
            return candidate
    pytest.fail(f"none of {candidates} is a Python 3.11+ with venv that UID {IMAGE_UID} can run")


@dataclass
class Stage:
    name: str
    lines: list[tuple[str, str]]  # (instruction, arguments)


def stages(dockerfile: str) -> list[Stage]:
    """The Dockerfile's stages, each a list of its instructions (continuation lines joined)."""
    found: list[Stage] = []
    for line in re.sub(r"\\\n", " ", dockerfile).splitlines():
        word, _, rest = line.strip().partition(" ")
        if not word or word.startswith("#"):
            continue
        if word.upper() == "FROM":
            found.append(Stage(rest.split()[-1] if " AS " in rest.upper() else "", []))
        found[-1].lines.append((word.upper(), rest.strip()))
    return found


def in_image(root: Path, workdir: str, path: str) -> Path:
    """The image's `path` (absolute, or relative to `workdir`) in the directory standing for it."""
    return root / os.path.join(workdir, path).lstrip("/")


def play(stage: Stage, context: Path, root: Path, python: str) -> None:
    """The stage's COPY lines from `context` into `root`, then its RUN lines, each one a
    hack/image/ script with its absolute paths mapped into `root`."""
    workdir = "/"
    for word, rest in stage.lines:
        if word == "WORKDIR":
            workdir = rest
        elif word == "COPY" and not rest.startswith("--from="):  # --from: the stages share `root`
            *sources, dest = shlex.split(rest)
            target = in_image(root, workdir, dest)
            for source in sources:
                if (context / source).is_dir():
                    shutil.copytree(context / source, target, dirs_exist_ok=True)
                else:
                    name = target / source.rsplit("/", 1)[-1] if dest.endswith("/") else target
                    name.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(context / source, name)
        elif word == "RUN":
            script, *args = shlex.split(rest)
            assert script.startswith("hack/image/"), (
                f"stage {stage.name}: RUN {rest}: not a hack/image/ script"
            )
            assert not {"&&", "|", ";"} & set(args), f"stage {stage.name}: RUN {rest}: more than the script"
            mapped = [str(in_image(root, workdir, a)) if a.startswith("/") else a for a in args]
            run(script, *mapped, cwd=in_image(root, workdir, "."), env={**os.environ, "PYTHON": python})


def runtime_env(stage: Stage, prefix: Path) -> dict[str, str]:
    """The final stage's ENV, /opt/rayscale mapped to `prefix`, $PATH to the base image's."""
    env: dict[str, str] = {}
    for word, rest in stage.lines:
        for pair in shlex.split(rest) if word == "ENV" else []:
            key, _, value = pair.partition("=")
            env[key] = value.replace("/opt/rayscale", str(prefix)).replace("$PATH", BASE_PATH)
    return env


@dataclass
class Image:
    root: Path  # stands for the image's /
    wheel: Path
    sdist: Path
    prefix: Path  # /opt/rayscale
    env: dict[str, str]  # the final stage's ENV


@pytest.fixture(scope="module")
def image(clean_clone: Path, python: str) -> Iterator[Image]:
    root = Path(tempfile.mkdtemp(prefix="rayscale-image-"))  # not under pytest's 0700 directory
    root.chmod(0o755)
    try:
        by_name = {s.name: s for s in stages((ROOT / "Dockerfile").read_text())}
        for name in INSTALL_STAGES:
            play(by_name[name], clean_clone, root, python)
        (wheel,) = (root / "dist").glob("rayscale-*.whl")
        (sdist,) = (root / "dist").glob("rayscale-*.tar.gz")
        prefix = root / "opt" / "rayscale"
        yield Image(root, wheel, sdist, prefix, runtime_env(by_name[""], prefix))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_image_build_puts_the_generated_bindings_in_the_wheel(image: Image) -> None:
    names = set(zipfile.ZipFile(image.wheel).namelist())
    for proto in BINDINGS:
        assert f"{PROTOS}/{proto}_pb2.py" in names, sorted(names)
        assert f"{PROTOS}/{proto}_pb2.pyi" in names, "no mypy-protobuf stubs (build requires)"
    assert "rayscale/py.typed" in names
    assert not any(n.startswith(("tests/", "bench/", "e2e/", "hack/")) for n in names), sorted(names)
    # The wheel was built from the sdist: it holds what generating needs, and nothing generated.
    with tarfile.open(image.sdist) as sdist:
        members = {m.split("/", 1)[1] for m in sdist.getnames() if "/" in m}
    for proto in BINDINGS:
        assert f"operator/{PROTOS}/{proto}.proto" in members, sorted(members)
    assert {"setup.py", f"operator/{PROTOS}/generate.py"} <= members
    assert not [m for m in members if "_pb2" in m], sorted(members)
    # pip, setuptools and wheel are gone from the image's virtualenv.
    assert not list(image.prefix.glob("lib/python*/site-packages/pip")), "pip left in /opt/rayscale"


@pytest.fixture
def image_operator(
    image: Image,
    cluster: ClusterHandle,
    namespace: str,
    raycluster_crd: None,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`rayscale run` from the image's virtualenv, as the image's user, with the chart's flags that
    matter here; its process and /healthz port. Stopped at teardown; its log printed on failure."""
    kubeconfig = image.root / "kubeconfig"  # self-contained, readable by the image's user only
    kubeconfig.write_text(cluster.kubectl_run("config", "view", "--raw", "--flatten", "--minify"))
    kubeconfig.chmod(0o600)
    if os.geteuid() == 0:
        os.chown(kubeconfig, IMAGE_UID, IMAGE_UID)
    port = free_port()
    cmd = [str(image.prefix / "bin" / "rayscale"), "run", "--namespace", namespace,
           f"--liveness=http://127.0.0.1:{port}/healthz", "--metrics-port=0", "--status-port=0",
           "--resync-seconds=5"]  # fmt: skip
    # The image's ENV and no more: no home, no PYTHONPATH; its UID may have no passwd entry here.
    env = {**image.env, "KUBECONFIG": str(kubeconfig), "HOME": "/nonexistent"}
    log = tmp_path / "rayscale.log"
    argv, preexec = as_image_user(cmd)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, cwd="/", env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=preexec,
        )  # fmt: skip
    try:
        yield proc, port
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            print(f"--- rayscale log (the image's virtualenv) ---\n{log.read_text(errors='replace')[-6000:]}")


def uids(pid: int) -> list[str]:
    """The real, effective, saved and filesystem UIDs of process `pid`."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    return next(line for line in status if line.startswith("Uid:")).split()[1:]


async def test_the_images_virtualenv_runs_the_operator_as_the_images_user(
    image_operator: tuple[subprocess.Popen[bytes], int], api: client.ApiClient, namespace: str
) -> None:
    proc, port = image_operator

    async def healthy() -> bool:
        assert proc.poll() is None, f"rayscale run exited ({proc.returncode})"
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://127.0.0.1:{port}/healthz", timeout=aiohttp.ClientTimeout(5)) as resp,
            ):
                return resp.status == 200
        except aiohttp.ClientConnectionError:
            return False

    await eventually(healthy, timeout=60, message="/healthz of rayscale run from the image's virtualenv")
    if os.geteuid() == 0:  # setpriv has long exec'd rayscale: the process is the operator's
        assert uids(proc.pid) == [str(IMAGE_UID)] * 4, "not running as the image's user"
    kube = Kube(api, namespace)
    body = example("raycluster-basic.yaml")
    body["spec"]["workerGroupSpecs"][0]["replicas"] = 1
    await kube.create(body)

    async def head_and_worker() -> bool:
        kinds = [p.metadata.labels.get("ray.io/node-type") for p in await kube.pods(BASIC)]
        return sorted(kinds) == ["head", "worker"]

    await eventually(head_and_worker, timeout=60, message="the head pod and one worker created")
    assert proc.poll() is None, f"rayscale run exited ({proc.returncode})"


def test_pip_install_of_a_clean_clone_imports_the_bindings(
    clean_clone: Path, python: str, image: Image, tmp_path: Path
) -> None:
    """`pip install .`, not editable: its own build (setup.py's hook, in pip's isolated build
    environment). The dependencies come from the image's virtualenv (a .pth file after the
    virtualenv's own site-packages), already resolved and installed from the same pyproject.toml."""
    env_dir = tmp_path / "venv"
    run(python, "-m", "venv", env_dir)
    py = env_dir / "bin" / "python"
    site = run(py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip()
    (deps,) = image.prefix.glob("lib/python*/site-packages")
    (Path(site) / "image-dependencies.pth").write_text(f"{deps}\n")
    run(
        py,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--disable-pip-version-check",
        ".",
        cwd=clean_clone,
    )
    code = (
        "import rayscale, rayscale.ray.wire as w; print(rayscale.__file__); print(w.autoscaler_pb2.__file__)"
    )
    where = run(py, "-c", code, cwd=tmp_path).split()
    assert len(where) == 2, where
    assert all(p.startswith(site) for p in where), where
    assert "usage: rayscale run" in run(env_dir / "bin" / "rayscale", "run", "--help", cwd=tmp_path)
