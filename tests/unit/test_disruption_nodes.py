"""What the operator keeps of Nodes and pods for the disruption notices: each node's notice only
(changes said, the first deadline of an announcement kept), the pods' node, grace period and
``DisruptionTarget`` condition in the pod index; and the ``--disruption-notice`` flag."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from typing import Any

import kopf
import pytest
from kubernetes_asyncio import client
from tests.support.builders import pod

from rayscale import nodewatch, run_flags
from rayscale.disruption.nodes import NodeNotices
from rayscale.disruption.notice import NoticeConfig
from rayscale.disruption.podslim import slim_pod
from rayscale.kube import ops

NOW = datetime(2026, 11, 29, 7, 0, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def node(name: str, *taints: dict[str, Any], unschedulable: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": list(taints)}
    if unschedulable:
        spec["unschedulable"] = True
    return {"metadata": {"name": name, "labels": {"big": "x" * 1000}}, "spec": spec, "status": {}}


SPOT = {"key": "aws-node-termination-handler/spot-itn", "effect": "NoSchedule"}


def test_only_nodes_with_a_notice_are_kept_and_changes_are_said() -> None:
    notices = NodeNotices(NoticeConfig(), Clock())
    assert notices.upsert(node("n1")) is False
    assert dict(notices) == {}
    assert notices.upsert(node("n1", unschedulable=True)) is True
    assert notices["n1"].source == "cordon"
    assert notices.upsert(node("n1", unschedulable=True)) is False  # the same notice again
    assert notices.upsert(node("n1", SPOT, unschedulable=True)) is True  # a stronger one
    assert notices["n1"].source == "spot"
    assert notices.upsert(node("n1")) is True  # uncordoned, untainted
    assert "n1" not in notices
    assert notices.upsert(node("n2", unschedulable=True)) is True
    assert notices.delete("n2") is True
    assert notices.delete("n2") is False
    assert len(notices) == 0


def test_a_deadline_counted_from_now_does_not_move_at_each_event() -> None:
    clock = Clock()
    notices = NodeNotices(NoticeConfig(), clock)
    notices.upsert(node("n1", SPOT))  # no timeAdded: now + 120 s
    first = notices["n1"].deadline
    assert first == NOW + timedelta(seconds=120)
    clock.now = NOW + timedelta(seconds=40)
    assert notices.upsert(node("n1", SPOT)) is False
    assert notices["n1"].deadline == first


def test_a_configured_taint_is_read_as_the_flag_says() -> None:
    config = NoticeConfig(taints={"example.com/reclaim": 30.0})
    notices = NodeNotices(config, Clock())
    added = "2026-11-29T06:59:50Z"
    assert notices.upsert(
        node("n1", {"key": "example.com/reclaim", "effect": "NoExecute", "timeAdded": added})
    )
    notice = notices["n1"]
    assert (notice.source, notice.hard, notice.deadline) == (
        "taint:example.com/reclaim",
        True,
        NOW + timedelta(seconds=20),
    )


def test_the_pod_index_keeps_the_node_the_grace_period_and_the_disruption_target() -> None:
    body = pod("w1")
    body["spec"].update(nodeName="n1", terminationGracePeriodSeconds=45, affinity={"big": "x"})
    target = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
              "message": "long text", "lastTransitionTime": "2026-11-29T07:00:00Z"}  # fmt: skip
    body["status"]["conditions"].append(target)
    slim = slim_pod(body)
    assert slim["spec"]["nodeName"] == "n1"
    assert slim["spec"]["terminationGracePeriodSeconds"] == 45
    assert "affinity" not in slim["spec"]
    assert {k: v for k, v in target.items() if k != "message"} in slim["status"]["conditions"]
    assert slim["status"]["conditions"][0]["type"] == "Ready"  # what the base slim keeps, first
    plain = slim_pod(pod("w2"))
    assert "nodeName" not in plain["spec"]
    assert [c["type"] for c in plain["status"]["conditions"]] == ["Ready"]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rayscale run")
    p.add_argument("--mode", default="all")
    p.add_argument("--autoscaler-concurrency", type=int, default=1)
    p.add_argument("--max-pods-per-cluster", type=int, default=10)
    run_flags.add_autoscaler_flags(p)
    return p


def test_the_disruption_notice_flag_is_repeatable_and_refuses_a_bad_or_repeated_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = parser().parse_args(
        ["--disruption-notice", "taint:example.com/reclaim=90", "--disruption-notice", "condition:Spot"]
    )
    config = run_flags.notice_config(args)
    assert (dict(config.taints), dict(config.conditions)) == ({"example.com/reclaim": 90.0}, {"Spot": None})
    assert run_flags.notice_config(parser().parse_args([])) == NoticeConfig()
    for bad, said in (
        (["--disruption-notice", "taint:x=soon"], "'soon' is not a number of seconds"),
        (
            ["--disruption-notice", "taint:x", "--disruption-notice", "taint:x=3"],
            "the taint x is given twice",
        ),
    ):
        with pytest.raises(SystemExit) as exited:
            parser().parse_args(bad)
        assert exited.value.code == 2
        assert said in capsys.readouterr().err


async def test_without_node_read_access_the_watch_is_not_registered_and_a_warning_says_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    asked: list[str] = []

    async def send(call: Any, what: str, *, body: bool = False) -> dict[str, Any]:
        call.close()  # the review's coroutine, never sent
        asked.append(what)
        return {"status": {"allowed": "watch" not in what}}

    monkeypatch.setattr(ops, "send", send)
    registry = kopf.OperatorRegistry()
    api = client.ApiClient()
    try:
        notices = NodeNotices(NoticeConfig(), Clock())
        assert await nodewatch.start(registry, api, notices, lambda _: None) is False
    finally:
        await api.close()
    assert asked == [
        "may this operator get nodes?",
        "may this operator list nodes?",
        "may this operator watch nodes?",
    ]
    assert list(registry._watching.get_all_handlers()) == []
    assert "Nodes are not watched: it may not watch Nodes" in caplog.text
    assert "DisruptionTarget condition still is" in caplog.text


async def test_a_node_event_keeps_its_notice_and_says_which_node_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def send(call: Any, what: str, *, body: bool = False) -> dict[str, Any]:
        call.close()
        return {"status": {"allowed": True}}

    monkeypatch.setattr(ops, "send", send)
    registry = kopf.OperatorRegistry()
    changed: list[str] = []
    notices = NodeNotices(NoticeConfig(), Clock())
    api = client.ApiClient()
    try:
        assert await nodewatch.start(registry, api, notices, changed.append) is True
    finally:
        await api.close()
    (handler,) = registry._watching.get_all_handlers()
    for kind, body in (("ADDED", node("n1")), ("MODIFIED", node("n1", unschedulable=True)),
                       ("MODIFIED", node("n1", unschedulable=True)), ("DELETED", node("n1"))):  # fmt: skip
        call: Any = handler.fn  # kopf's handler, called as kopf calls it (only `event` is read)
        await call(event={"type": kind, "object": body})
    assert changed == ["n1", "n1"]
    assert len(notices) == 0
