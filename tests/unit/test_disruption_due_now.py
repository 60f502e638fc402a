"""Notices that leave Ray no time, and the head's notice: a deadline of now (the out-of-service
taint, ``--disruption-notice taint:KEY=0``) deletes a busy worker in the first round, without
waiting for Ray, and its ``DisruptionDelete`` Event says that nothing could be drained; a deadline
that passes after a drain was accepted keeps the plain wording. A notice on the head's node gives
the ``DisruptionHead`` Warning and the ``HeadNotice`` condition, and never a drain or a delete."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tests.support.builders import group, pod, rc
from tests.support.fakes import KEY, FakeGcs, LoopClock, gcs_state
from tests.support.fakes import EventLog as Events
from tests.support.fakes import FakeApi as Api
from tests.support.fakes import FakeSource as Source
from tests.unit.test_disruption_round import Gcs, scaler
from tests.unit.test_disruption_round import node as round_node
from tests.unit.test_disruption_round import on as round_on

from rayscale.autoscaler import gcs_link
from rayscale.autoscaler.disruptions import CONDITION, disruption_condition, events_to_post, plan_round
from rayscale.autoscaler.scheduling.model import Group
from rayscale.disruption.notice import OUT_OF_SERVICE_TAINT, Notice, node_notice, parse_notice_flag
from rayscale.disruption.plan import EVENT_DELETE, EVENT_HEAD, AskedDrain, DeleteWhy, DisruptionPlan
from rayscale.ray import model as ray

NOW = datetime(2026, 11, 29, 7, 0, 0, tzinfo=UTC)
GROUPS = (Group("cpu", {"CPU": 1.0}),)
KILL = "example.com/kill"
NO_TIME = "the notice's deadline passed before its Ray nodes could be drained"


def tainted(name: str, key: str) -> dict[str, Any]:
    """A Node with the NoSchedule taint `key` and no timeAdded (the taint's time is first read)."""
    return {"metadata": {"name": name}, "spec": {"taints": [{"key": key, "effect": "NoSchedule"}]}}


def on(node: str, body: dict[str, Any]) -> dict[str, Any]:
    body["spec"]["nodeName"] = node
    return body


def busy(name: str) -> ray.RayNodeState:
    return ray.RayNodeState(
        f"id-{name}",
        ray.NodeStatus.RUNNING,
        instance_id=name,
        total_resources={"CPU": 1.0},
        available_resources={"CPU": 0.0},
    )


def round_of(
    notice: Notice, *, asked: dict[str, AskedDrain] | None = None, now: datetime = NOW
) -> DisruptionPlan:
    pods = [on("n1", pod("w1", "cpu")), on("n2", pod("w2", "cpu"))]
    state = gcs_state(busy("w1"), busy("w2"))
    return plan_round(GROUPS, pods, state, {"n1": notice}, asked or {}, now)


def zero_deadline_notice() -> Notice:
    config = parse_notice_flag([f"taint:{KILL}=0"])
    notice = node_notice(tainted("n1", KILL), NOW, config)
    assert notice is not None
    return notice


@pytest.mark.parametrize(
    "notice",
    [
        pytest.param(zero_deadline_notice(), id="taint-KEY=0"),
        pytest.param(
            node_notice(tainted("n1", OUT_OF_SERVICE_TAINT), NOW, parse_notice_flag([])), id="out-of-service"
        ),
    ],
)
def test_a_notice_due_now_deletes_the_busy_worker_in_its_first_round_and_says_nothing_was_drained(
    notice: Notice | None,
) -> None:
    assert notice is not None
    assert (notice.deadline, notice.hard) == (NOW, True)
    result = round_of(notice)
    assert [(d.pod, d.why) for d in result.deletes] == [("w1", DeleteWhy.DEADLINE)]  # busy, not waited for
    assert result.waiting == ()
    assert [d.pod for d in result.drains] == ["w1"]  # asked in the same round: it tells Ray why its node goes
    (event,) = [e for e in result.events if e.reason == EVENT_DELETE]
    assert event.type == "Normal"
    assert event.pods == ("w1",)
    assert event.message.startswith(
        f"Deleting pod w1 of worker group cpu: {NO_TIME} (deadline 2026-11-29T07:00:00Z;"
    )
    assert "a deadline of 0 s, leaves no time): nothing was drained" in event.message
    assert "the Ray work running there is not waited for" in event.message
    assert event.message.endswith(notice.message)
    assert events_to_post(result, (), {"w1"}, head_posted=True) == [event]
    assert disruption_condition(result, NOW, None) is None  # nothing left draining


def test_a_deadline_passing_after_an_accepted_drain_keeps_the_plain_wording() -> None:
    spot = Notice(
        "spot", "Node n1 has an EC2 Spot interruption notice.", NOW + timedelta(seconds=30), hard=True
    )
    asked = {"w1": AskedDrain(NOW, spot.deadline)}
    result = round_of(spot, asked=asked, now=NOW + timedelta(seconds=30))
    (event,) = [e for e in result.events if e.reason == EVENT_DELETE]
    assert "the notice's deadline passed." in event.message
    assert NO_TIME not in event.message
    assert "nothing was drained" not in event.message


def test_a_notice_on_the_heads_node_is_a_warning_and_a_condition_never_a_drain() -> None:
    pods = [on("h", pod("rc-head", "headgroup")), on("n1", pod("w1", "cpu"))]
    notice = node_notice(tainted("h", OUT_OF_SERVICE_TAINT), NOW, parse_notice_flag([]))
    assert notice is not None
    result = plan_round(GROUPS, pods, gcs_state(busy("w1")), {"h": notice}, {}, NOW)
    assert (result.drains, result.deletes, result.waiting) == ((), (), ())
    assert result.head is not None
    assert (result.head.pod, result.head.source) == ("rc-head", "out-of-service")
    (warning,) = events_to_post(result, (), (), head_posted=False)
    assert (warning.type, warning.reason, warning.pods) == ("Warning", EVENT_HEAD, ("rc-head",))
    assert warning.message.startswith("The head pod rc-head cannot be drained onto another node")
    assert notice.message in warning.message
    assert events_to_post(result, (), (), head_posted=True) == []  # posted once per notice

    condition = disruption_condition(result, NOW, None)
    assert condition is not None
    assert (condition["type"], condition["status"], condition["reason"]) == (CONDITION, "True", "HeadNotice")
    assert "The head pod rc-head has a notice rayscale cannot drain it for" in condition["message"]
    assert notice.message in condition["message"]


# ---------------------------------------------------------------------------- a whole round


@pytest.fixture
def fake_api(monkeypatch: pytest.MonkeyPatch) -> Api:
    """The API faked, and the GCS faked with test_disruption_round's drain-keeping fake."""
    fake = Api(monkeypatch)
    Gcs.asked = []
    monkeypatch.setattr(gcs_link, "connect", Gcs)
    return fake


async def test_a_notice_due_now_deletes_the_busy_worker_in_the_first_round_after_telling_ray(
    fake_api: Api,
) -> None:
    events, clock = Events(), LoopClock()
    source = Source(rc(group("small", replicas=1)), [round_on("n1", pod("w1"))])
    FakeGcs.state = gcs_state(round_node("w1", ray.NodeStatus.RUNNING, used=1.0))
    due = Notice("out-of-service", "Node n1 is out of service.", LoopClock.START, hard=True)
    auto = scaler(source, events, clock, {"n1": due})
    await auto.step(KEY)
    assert Gcs.asked == [("id-w1", "PREEMPTION", due.message, int(LoopClock.START.timestamp() * 1000))]
    (patch,) = fake_api.patches  # the first round: not waiting for Ray's node to be idle
    assert {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy",
            "value": {"workersToDelete": ["w1"]}} in patch  # fmt: skip
    (deleted,) = [e for e in events.events if e.reason == EVENT_DELETE]
    assert NO_TIME in deleted.message
    assert "nothing was drained" in deleted.message
