"""status.autoscaler written off the rounds: the newest only, from what the API server holds."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rayscale.autoscaler.status_writer import SETTLE_SECONDS, StatusWriter
from rayscale.common.types import ClusterKey
from rayscale.kube import flow

KEY: ClusterKey = ("ns", "rc")


class Server:
    """A status subresource that answers when the test lets it (`gate`), applying merge patches."""

    def __init__(self) -> None:
        self.held: dict[str, Any] = {}
        self.patches: list[dict[str, Any]] = []
        self.flows: list[object] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail = False

    async def write(self, key: ClusterKey, patch: dict[str, Any]) -> None:
        self.flows.append(flow.current())
        await self.gate.wait()
        if self.fail:
            raise RuntimeError("the API server said no")
        self.patches.append(patch["status"]["autoscaler"])
        self.held = _merged(self.held, patch["status"]["autoscaler"])


def _merged(held: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = dict(held)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_a_status_is_written_under_the_report_flow_and_from_what_the_server_holds() -> None:
    server, clock = Server(), Clock()
    writer = StatusWriter(server.write, clock)
    server.held = {"counts": {"a": {"ready": 1}}, "note": "x"}
    writer.submit(KEY, server.held, {"counts": {"a": {"idle": 1}}})
    await writer.idle()
    assert server.patches == [{"counts": {"a": {"ready": None, "idle": 1}}, "note": None}]
    assert server.held == {"counts": {"a": {"idle": 1}}}
    assert server.flows == [flow.report_flow(KEY)]


async def test_statuses_handed_over_while_one_is_on_its_way_are_written_once_the_newest() -> None:
    server, clock = Server(), Clock()
    writer = StatusWriter(server.write, clock)
    server.gate.clear()
    writer.submit(KEY, None, {"v": 1})
    await asyncio.sleep(0)  # the first write is on its way
    writer.submit(KEY, None, {"v": 2})
    writer.submit(KEY, None, {"v": 3})
    assert writer.latest(KEY, None) == {"v": 3}  # a round compares with what is on its way
    assert writer.pending() == 1
    server.gate.set()
    await writer.idle()
    assert server.patches == [{"v": 1}, {"v": 3}]  # 2 was never written
    assert writer.pending() == 0


async def test_back_to_what_the_watch_shows_while_a_write_is_on_its_way_is_written_too() -> None:
    """A round that finds the status as the watch still shows it, while another is being written,
    compares with what is on its way and hands the old one over again."""
    server, clock = Server(), Clock()
    server.held = {"v": 1}
    writer = StatusWriter(server.write, clock)
    server.gate.clear()
    writer.submit(KEY, {"v": 1}, {"v": 2})
    await asyncio.sleep(0)
    assert writer.latest(KEY, {"v": 1}) == {"v": 2}  # so the round sees {"v": 1} as a change
    writer.submit(KEY, {"v": 1}, {"v": 1})
    server.gate.set()
    await writer.idle()
    assert server.held == {"v": 1}


async def test_the_watch_is_the_truth_again_once_it_shows_the_write_or_it_settled() -> None:
    server, clock = Server(), Clock()
    writer = StatusWriter(server.write, clock)
    writer.submit(KEY, None, {"v": 1})
    await writer.idle()
    assert writer.latest(KEY, None) == {"v": 1}  # the watch has not shown it yet
    assert writer.latest(KEY, {"v": 1}) == {"v": 1}  # it has: nothing kept any more
    assert writer.latest(KEY, {"v": 0}) == {"v": 0}
    writer.submit(KEY, {"v": 0}, {"v": 5})
    await writer.idle()
    clock.now += SETTLE_SECONDS
    assert writer.latest(KEY, {"v": 4}) == {"v": 4}  # somebody else wrote it: the watch wins


async def test_a_failed_write_is_forgotten_and_a_forgotten_write_is_not_sent() -> None:
    server, clock = Server(), Clock()
    writer = StatusWriter(server.write, clock)
    server.fail = True
    writer.submit(KEY, {"v": 0}, {"v": 1})
    await writer.idle()
    assert writer.latest(KEY, {"v": 0}) == {"v": 0}
    server.fail = False
    server.gate.clear()
    writer.submit(KEY, {"v": 0}, {"v": 2})
    await asyncio.sleep(0)
    writer.forget(KEY)
    server.gate.set()
    await writer.idle()
    assert server.patches == []
    assert writer.pending() == 0


@pytest.mark.parametrize("clusters", [1, 3])
async def test_clusters_are_written_side_by_side(clusters: int) -> None:
    server, clock = Server(), Clock()
    writer = StatusWriter(server.write, clock)
    server.gate.clear()
    for i in range(clusters):
        writer.submit(("ns", f"rc-{i}"), None, {"v": i})
    await asyncio.sleep(0)
    assert len(server.flows) == clusters  # none waits for another's write
    server.gate.set()
    await writer.idle()
    assert sorted(p["v"] for p in server.patches) == list(range(clusters))


async def test_a_clusters_writes_are_paced_and_what_changes_meanwhile_goes_in_one() -> None:
    server, clock = Server(), Clock()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:  # virtual: the pace passes at once
        slept.append(seconds)
        clock.now += seconds

    writer = StatusWriter(server.write, clock, pace=5.0, sleep=sleep)
    writer.submit(KEY, None, {"v": 1})
    await writer.idle()
    assert (server.patches, slept) == ([{"v": 1}], [])  # the first goes at once
    clock.now += 2
    writer.submit(KEY, None, {"v": 2})
    writer.submit(KEY, None, {"v": 3})
    await writer.idle()
    assert server.patches == [{"v": 1}, {"v": 3}]
    assert slept == [3.0]  # 5 s after the first write
    clock.now += 60
    writer.submit(KEY, None, {"v": 4})
    await writer.idle()
    assert slept == [3.0]  # after a quiet spell: at once
    writer.submit(("ns", "other"), None, {"v": 1})
    await writer.idle()
    assert slept == [3.0]  # each cluster has its own pace
