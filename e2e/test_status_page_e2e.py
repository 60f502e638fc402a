"""The status page as a person uses it: headless Chromium on a live `rayscale run --status-page`
while a RayCluster scales for a real Ray program (the bridge).

A Ray driver asks for three 1-CPU actors; the group holds at most two 1-CPU workers, each slow to
join Ray (an init container sleeps). The browser sees the cluster on the fleet page, a worker
replica booting on the cluster page, then the same replica ready, the third actor unmet
(MAX_REPLICAS) and the decisions that launched the workers. The screenshots it takes are the ones
docs/status-page.md shows (docs/images/status-page-*.png, written there when
RAYSCALE_WRITE_SCREENSHOTS=1; else to e2e/.results/screenshots).

Chromium is Debian's (`apt-get install chromium`; `make test` installs it when it can), driven by
its own command line (``--dump-dom``, ``--screenshot``): no browser is downloaded.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from e2e.harness import NAME, Scenario, group, run_process
from hack.localk8s import testcluster
from kubernetes_asyncio import client
from tests.support.kube import fresh_namespace
from tests.support.operators import AUTOSCALING_EXTRA, Operator, free_port, running
from tests.support.polling import eventually

from rayscale.autoscaler.replica_host import STARTING

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parents[1]
# The screenshots go to e2e/.results/ (git-ignored); with RAYSCALE_WRITE_SCREENSHOTS=1 they replace
# the ones docs/status-page.md shows, so that an ordinary test run leaves the tree as it was.
IMAGES = (
    ROOT / "docs" / "images"
    if os.environ.get("RAYSCALE_WRITE_SCREENSHOTS") == "1"
    else ROOT / "e2e" / ".results" / "screenshots"
)
BROWSER_TIMEOUT = 60.0  # one Chromium run (a page load and its dump or screenshot)
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--hide-scrollbars",
)  # fmt: skip


@pytest.fixture
async def namespace(api: client.ApiClient) -> AsyncIterator[str]:
    """A fresh namespace with a short name (the screenshots show it)."""
    async with fresh_namespace(api, "demo") as name:
        yield name


@pytest.fixture
def status_ports() -> tuple[int, int]:
    """The status API's port and the status page's."""
    return free_port(), free_port()


@pytest.fixture
def autoscaling_operator(
    cluster: testcluster.ClusterHandle,
    namespace: str,
    raycluster_crd: None,
    status_ports: tuple[int, int],
    request: pytest.FixtureRequest,
) -> Iterator[Operator]:
    """The scenarios' operator (autoscaling every second, following the bridge's GCS address) with
    the status API and the status page on this machine's loopback."""
    api_port, page_port = status_ports
    extra = (*AUTOSCALING_EXTRA, "--status-address", "127.0.0.1", "--status-port", str(api_port),
             "--status-page", "--status-page-port", str(page_port))  # fmt: skip
    yield from running(Operator(cluster, namespace, mode="all", extra=extra), request)


class Browser:
    """Headless Chromium, one run per page: its DOM after load, or a screenshot."""

    def __init__(self, executable: str, profile: Path) -> None:
        self.executable = executable
        self.profile = profile

    async def _run(self, *args: str) -> str:
        command = (self.executable, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", *args)
        code, out, err = await run_process(*command, timeout=BROWSER_TIMEOUT)
        assert code == 0, f"chromium {args} failed ({code}): {err[-2000:]}"
        return out

    async def dom(self, url: str) -> str:
        return await self._run("--dump-dom", url)

    async def screenshot(self, url: str, out: Path, width: int = 1280, height: int = 900) -> None:
        await asyncio.to_thread(out.unlink, missing_ok=True)
        await self._run(f"--screenshot={out}", f"--window-size={width},{height}", url)
        size = (await asyncio.to_thread(out.stat)).st_size
        assert size > 10_000, f"{out} looks empty ({size} bytes)"


@pytest.fixture
def browser(tmp_path: Path) -> Browser:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("needs headless Chromium: apt-get install chromium (make test installs it when it can)")
    return Browser(found, tmp_path / "chromium")


class Marked(HTMLParser):
    """The attributes of every element that has `key` (the page marks rows with data-* keys), and
    the page's text."""

    def __init__(self, page: str, key: str) -> None:
        super().__init__()
        self.key = key
        self.found: list[dict[str, str]] = []
        self.words: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if self.key in values:
            self.found.append(values)

    def handle_data(self, data: str) -> None:
        self.words.extend(data.split())

    @property
    def text(self) -> str:
        return " ".join(self.words)


async def api_json(url: str) -> Any:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        assert response.status == 200, await response.text()
        return await response.json()


@pytest.mark.e2e_smoke
async def test_the_status_page_shows_a_replica_boot_and_the_unmet_demand(
    browser: Browser, status_ports: tuple[int, int], scenario: Scenario
) -> None:
    api_port, page_port = status_ports
    page = f"http://127.0.0.1:{page_port}"
    key = f"{scenario.kube.ns}/{NAME}"
    await scenario.create([group("cpu-group", max_replicas=2, init_sleep=15)], idle_timeout=60)

    async def listed() -> bool:
        return key in [
            row["data-cluster"] for row in Marked(await browser.dom(page + "/"), "data-cluster").found
        ]

    await eventually(listed, timeout=60, interval=1, message=f"{key} on the fleet page")

    cluster_page = f"{page}/clusters/{key}"

    async def replicas() -> dict[str, str]:
        rows = Marked(await browser.dom(cluster_page), "data-replica").found
        return {row["data-replica"]: row["data-state"] for row in rows if row["data-gone"] == "false"}

    async def starting(*known: str) -> str | None:
        """A new worker replica with a pod, not in Ray yet (scheduling, booting)."""
        found = await replicas()
        return next(
            (r for r, s in found.items() if s in STARTING and not r.startswith("unborn:") and r not in known),
            None,
        )

    async def is_ready(replica: str) -> bool:
        return (await replicas()).get(replica) == "ready"

    # One actor: a replica appears starting (its Ray node waits for the init container), then ready.
    await scenario.ray_call("actor", name="a1", num_cpus=1)
    first = await eventually(starting, timeout=120, interval=0.5, message="a replica starting")
    await eventually(lambda: is_ready(first), timeout=180, interval=0.5, message=f"{first} ready on the page")

    # Two more: one more replica (the group's maximum), the third actor unmet.
    for actor in ("a2", "a3"):
        await scenario.ray_call("actor", name=actor, num_cpus=1)
    second = await eventually(lambda: starting(first), timeout=120, interval=0.5, message="a second replica")

    async def unmet_shown() -> bool:
        return "MAX_REPLICAS" in Marked(await browser.dom(cluster_page), "data-replica").text

    await eventually(unmet_shown, timeout=60, interval=0.5, message="the third actor unmet on the page")
    IMAGES.mkdir(parents=True, exist_ok=True)
    await browser.screenshot(cluster_page, IMAGES / "status-page-cluster.png", height=1120)
    await eventually(
        lambda: is_ready(second), timeout=180, interval=0.5, message=f"{second} ready on the page"
    )
    both = await replicas()
    assert both == {first: "ready", second: "ready"}
    assert sorted(both) == scenario.pods.live("cpu-group")  # the page's replicas are the pods

    shown = Marked(await browser.dom(cluster_page), "data-decision")
    order = [row["data-decision"] for row in shown.found]
    assert order, "no decision on the page"
    assert order == [str(i) for i in range(len(order))], order  # newest first
    for text in ("MAX_REPLICAS", "the groups that could hold it are at maxReplicas", "launched cpu-group",
                 *both):  # fmt: skip
        assert text in shown.text, text
    fleet = Marked(await browser.dom(page + "/"), "data-cluster")
    assert "2 ready" in fleet.text
    assert "1 MAX_REPLICAS" in fleet.text
    await browser.screenshot(page + "/", IMAGES / "status-page-fleet.png", height=260)

    # The same documents on the status API's own port, and on the page's.
    for port in (api_port, page_port):
        view = await api_json(f"http://127.0.0.1:{port}/api/v1/clusters/{key}")
        assert {r["replica"]: r["state"] for r in view["replicas"] if not r["gone"]} == both
        assert [u["reason"] for u in view["demand"]["unmet"]] == ["MAX_REPLICAS"]
