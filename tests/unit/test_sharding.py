"""Sharding a fleet over several operators (docs/scaling.md): the scope's parsing and matching, the
Lease each shard elects on, `rayscale run` refusing a bad scope, and the wiring that keeps another
shard's RayClusters, pods and requests out of this operator's controller and autoscaler."""

from __future__ import annotations

import copy
import re
from typing import Any

import kopf
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kopf._cogs.structs.references import NamespaceName, match_namespace
from prometheus_client import CollectorRegistry
from tests.support.builders import gpu_group, group, rc, rrr
from tests.support.fakes import KEY, EventLog
from tests.support.fakes import FakeApi as Api
from tests.support.fakes import FakeSource as Source
from tests.support.fakes import LoopClock as Clock

from rayscale import cli, handlers
from rayscale.autoscaler.loop import Autoscaler, AutoscalerConfig
from rayscale.common.types import ClusterKey
from rayscale.controller.runner import ControllerConfig
from rayscale.kube import ops
from rayscale.kube.index_source import IndexSource
from rayscale.kube.scope import (
    DEFAULT_LEASE,
    Scope,
    check_namespace_pattern,
    check_shard_name,
    namespace_matches,
    parse_selector,
)
from rayscale.kube.watchhealth import WatchHealth
from rayscale.metrics import Metrics

# ---------------------------------------------------------------------------- label selectors

# (selector, labels, matches): the API server's meaning (k8s.io/apimachinery/pkg/labels)
MATCHES = [
    ("shard=a", {"shard": "a"}, True),
    ("shard=a", {"shard": "b"}, False),
    ("shard=a", {}, False),
    ("shard==a", {"shard": "a"}, True),
    ("shard!=a", {"shard": "b"}, True),
    ("shard!=a", {}, True),  # != and notin match a RayCluster without the label
    ("shard!=a", {"shard": "a"}, False),
    ("shard in (a,b)", {"shard": "b"}, True),
    ("shard in (a, b)", {"shard": "c"}, False),
    ("shard in (a,b)", {}, False),
    ("shard notin (a,b)", {}, True),
    ("shard notin (a,b)", {"shard": "a"}, False),
    ("shard", {"shard": ""}, True),
    ("shard", {}, False),
    ("!shard", {}, True),
    ("!shard", {"shard": "a"}, False),
    ("shard=", {"shard": ""}, True),
    ("shard=", {"shard": "a"}, False),
    ("tier>2", {"tier": "3"}, True),
    ("tier>2", {"tier": "2"}, False),
    ("tier<2", {"tier": "x"}, False),  # only integer values compare
    ("tier<2", {}, False),
    ("shard=a,tier!=batch", {"shard": "a", "tier": "batch"}, False),
    ("shard=a,tier!=batch", {"shard": "a"}, True),
    ("example.com/shard in (a),!legacy", {"example.com/shard": "a"}, True),
    ("", {"anything": "x"}, True),
]


@pytest.mark.parametrize(("text", "labels", "expected"), MATCHES)
def test_selector_matches_as_the_api_server(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_selector(text).matches(labels) is expected


def test_selector_reads_back_canonically_sorted_by_key() -> None:
    selector = parse_selector("tier != batch , shard in (b,a,a), !legacy,zone")
    assert str(selector) == "!legacy,shard in (a,b),tier!=batch,zone"
    assert parse_selector(str(selector)) == selector


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("shard=a,,b", "expected a label key, found ','"),
        ("shard in ()", "'in' and 'notin' need at least one value"),
        ("shard in a", "take a list in parentheses"),
        ("shard in (a,b", "not closed with ')'"),
        ("shard=a b", "expected ',' between requirements, found 'b'"),
        ("shard=a=b", "expected ',' between requirements, found '='"),
        ("Shard.X/y=a", "its prefix must be a DNS subdomain"),
        ("-shard=a", "label key '-shard'"),
        ("shard=" + "x" * 64, "at most 63"),
        ("shard=a_", "value 'a_' of 'shard'"),
        ("tier>two", "compare with an integer"),
        ("!", "expected a label key after '!'"),
        ("shard ~ a", "after the key 'shard': expected =, ==, !=, in, notin, <, > or ','"),
    ],
)
def test_bad_selectors_are_refused_saying_why(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"is not a label selector: .*{re.escape(message)}"):
        parse_selector(text)


# ---------------------------------------------------------------------------- namespaces


@pytest.mark.parametrize(
    "text", ["team-a", "team-*", "ray-??", "team-*,!team-test", "!kube-*", "!kube-*,kube-public", "*"]
)
def test_namespace_names_and_patterns_are_accepted(text: str) -> None:
    assert check_namespace_pattern(text) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("team-a,team-b", "repeat -n"),  # kopf would read it as team-a alone
        ("team-*,ml-*", "'ml-*' follows no '!glob'"),
        ("Team-A", "not a namespace name or glob"),
        ("team_a", "not a namespace name or glob"),
        ("team-*,", "an empty glob"),
        ("!", "an empty glob"),
        ("", "empty namespace"),
        ("-team", "not a namespace name"),
        ("x" * 64, "at most 63"),
    ],
)
def test_bad_namespace_patterns_are_refused_saying_why(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        check_namespace_pattern(text)


GLOBS = st.builds(
    lambda bang, body: bang + body,
    st.sampled_from(["", "!"]),
    st.text(alphabet="ab-*?", min_size=1, max_size=4),
)


@given(
    name=st.text(alphabet="ab-", min_size=1, max_size=6),
    globs=st.lists(GLOBS, min_size=1, max_size=3),
)
def test_namespace_patterns_mean_what_kopf_makes_of_them(name: str, globs: list[str]) -> None:
    """kopf decides which namespaces it watches; the watch-health check must list the same ones."""
    pattern = ",".join(globs)
    assert namespace_matches(name, pattern) == match_namespace(NamespaceName(name), pattern)


def test_a_pattern_matches_as_its_globs_say() -> None:
    matching = [ns for ns in ("team-a", "team-test", "ml") if namespace_matches(ns, "team-*,!team-test")]
    assert matching == ["team-a"]
    assert [
        ns for ns in ("kube-system", "kube-public", "ml") if namespace_matches(ns, "!kube-*,kube-public")
    ] == [
        "kube-public",
        "ml",
    ]


# ---------------------------------------------------------------------------- Leases


def test_each_shard_elects_on_its_own_lease() -> None:
    assert Scope().lease_name() == DEFAULT_LEASE  # one operator for everything: as before
    assert Scope(("team-a", "team-b")).lease_name() == DEFAULT_LEASE  # namespaces by name: as before
    assert Scope(shard="a", selector=parse_selector("shard=a")).lease_name() == "rayscale-a"
    # Shards without a name get a Lease each, the same for every replica of one shard.
    derived = {
        Scope(selector=parse_selector("shard=a")).lease_name(),
        Scope(selector=parse_selector("shard=b")).lease_name(),
        Scope(("team-*",)).lease_name(),
        Scope(("!team-*",)).lease_name(),
        Scope(("team-*",), parse_selector("shard=a")).lease_name(),
    }
    assert len(derived) == 5
    assert DEFAULT_LEASE not in derived
    assert all(name.startswith("rayscale-") and len(name) <= 63 for name in derived)
    # The same scope written another way is the same shard.
    assert (
        Scope(("b-*", "a-*"), parse_selector("zone=x, shard in (b,a)")).lease_name()
        == Scope(("a-*", "b-*"), parse_selector("shard in (a,b),zone=x")).lease_name()
    )


def test_shard_names_are_dns_labels() -> None:
    assert check_shard_name("gpu-2") == "gpu-2"
    for bad in ("GPU", "a_b", "-a", "x" * 51, ""):
        with pytest.raises(ValueError, match="a shard name is"):
            check_shard_name(bad)


# ---------------------------------------------------------------------------- rayscale run


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cluster-selector", "shard in (a"], "argument --cluster-selector: 'shard in (a' is not a label"),
        (["-n", "team-a,team-b"], "argument -n/--namespace: 'team-a,team-b': the first glob"),
        (["-n", "Team"], "argument -n/--namespace: 'Team'"),
        (["--shard", "A"], "argument --shard: 'A': a shard name is"),
    ],
)
def test_run_refuses_a_bad_scope_before_it_starts(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["run", *args])
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_run_derives_the_lease_from_the_shard() -> None:
    from rayscale.run import lease_of

    parser = cli.build_parser()
    assert lease_of(parser.parse_args(["run"])) == "rayscale"
    assert (
        lease_of(parser.parse_args(["run", "--shard", "a", "--cluster-selector", "shard=a"])) == "rayscale-a"
    )
    assert lease_of(parser.parse_args(["run", "--shard", "a", "--leader-election-id", "mine"])) == "mine"
    one = lease_of(parser.parse_args(["run", "-n", "team-*"]))
    other = lease_of(parser.parse_args(["run", "-n", "!team-*"]))
    assert len({one, other, "rayscale"}) == 3


# ---------------------------------------------------------------------------- the wiring


class Marks:
    """Stands in for the controller and the autoscaler: which keys were handed to it."""

    def __init__(self) -> None:
        self.marked: list[ClusterKey] = []

    def mark(self, key: ClusterKey, reason: str = "") -> None:
        self.marked.append(key)

    def pod_create_refused(self, key: ClusterKey, group: str, status: int, message: str) -> None:
        raise AssertionError("no pod is created here")


class Operator:
    """The watch wiring of one shard: its indexes, fed as the informers feed them."""

    def __init__(self, selector: str) -> None:
        self.runtime = handlers.Runtime(
            ControllerConfig(),
            None,
            scope=Scope(selector=parse_selector(selector)),
            metrics=Metrics(CollectorRegistry()),
        )
        self.controller, self.autoscaler = Marks(), Marks()
        self.indexes = handlers.indexes(self.runtime)
        assert self.runtime.marks is not None
        self.runtime.marks.controller = self.controller
        self.runtime.marks.autoscaler = self.autoscaler
        self.memo = kopf.Memo(runtime=self.runtime)

    async def cluster(
        self,
        name: str,
        labels: dict[str, str],
        *,
        event: str | None = "MODIFIED",
        generation: int = 1,
        status: dict[str, Any] | None = None,
    ) -> None:
        """The watch delivers RayCluster ns/`name` with `labels` (event None: deleted)."""
        meta = {
            "namespace": "ns",
            "name": name,
            "labels": labels,
            "resourceVersion": "7",
            "generation": generation,
        }
        raw = copy.deepcopy({"metadata": meta, "status": status or {}})
        await self.kopf("raycluster_event", event or "DELETED", raw)

    async def request(self, cluster: str) -> None:
        raw = {"metadata": {"namespace": "ns", "name": f"for-{cluster}"}, "spec": {"clusterName": cluster}}
        await self.kopf("rayresourcerequest_event", "ADDED", raw)

    async def kopf(self, handler: str, event: str, raw: Any) -> None:
        """Call the kopf event handler `handler` of `rayscale.handlers` as kopf calls it."""
        kwargs = {"event": {"type": event, "object": raw}, "body": kopf.Body(raw), "memo": self.memo}
        await getattr(handlers, handler)(**kwargs)

    def pod(self, cluster: str) -> None:
        """The pod informer delivers a pod of RayCluster ns/`cluster`."""
        self.indexes.pods.upsert(
            {"metadata": {"namespace": "ns", "name": f"{cluster}-w", "labels": {"ray.io/cluster": cluster}}}
        )

    def source(self) -> IndexSource:
        return IndexSource(self.indexes)

    def drained(self) -> tuple[list[ClusterKey], list[ClusterKey]]:
        marked = self.controller.marked, self.autoscaler.marked
        self.controller.marked, self.autoscaler.marked = [], []
        return marked


async def test_another_shards_cluster_its_pods_and_requests_are_left_alone() -> None:
    a = Operator("shard=a")
    await a.cluster("mine", {"shard": "a"})
    await a.cluster("theirs", {"shard": "b"})
    a.pod("theirs")
    await a.request("theirs")
    assert a.drained() == ([("ns", "mine")], [("ns", "mine")])
    source = a.source()
    assert source.cluster_keys() == [("ns", "mine")]
    assert source.cluster(("ns", "theirs")) is None
    assert source.requests(("ns", "theirs")) == []  # not told "does not exist": it does, elsewhere
    assert set(a.runtime.metrics.rayclusters()) == {("ns", "mine")}  # type: ignore[union-attr]
    # The watch-health check still compares every RayCluster the watch delivered.
    assert source.resource_versions() == {("ns", "mine"): "7", ("ns", "theirs"): "7"}


async def test_a_cluster_that_leaves_the_shard_is_let_go_once() -> None:
    a = Operator("shard=a")
    await a.cluster("moving", {"shard": "a"})
    await a.request("moving")
    a.drained()
    await a.cluster("moving", {"shard": "b"})  # relabelled: another shard's now
    # Marked once more, so that the controller and the autoscaler let go, and it has nothing to tell.
    assert a.drained() == ([("ns", "moving")], [("ns", "moving")])
    assert a.source().cluster(("ns", "moving")) is None
    assert a.source().requests(("ns", "moving")) == []
    assert a.runtime.metrics.rayclusters() == {}  # type: ignore[union-attr]
    await a.cluster("moving", {"shard": "b"})
    a.pod("moving")
    assert a.drained() == ([], [])  # from then on, nothing of it
    await a.cluster("moving", {"shard": "a"})  # and back
    assert a.drained() == ([("ns", "moving")], [("ns", "moving")])
    assert a.source().cluster(("ns", "moving")) is not None


async def test_a_deleted_clusters_requests_are_still_told_it_does_not_exist() -> None:
    a = Operator("shard=a")
    await a.cluster("gone", {"shard": "a"})
    await a.request("gone")
    await a.cluster("gone", {"shard": "a"}, event=None)
    await a.request("never-existed")
    assert a.drained()[1] == [("ns", "gone"), ("ns", "gone"), ("ns", "gone"), ("ns", "never-existed")]
    assert [r["metadata"]["name"] for r in a.source().requests(("ns", "gone"))] == ["for-gone"]


async def test_a_patch_refused_because_the_cluster_moved_is_not_planned_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    moved = rc(group("cpu", replicas=0), gpu_group(), rv="43")
    moved["metadata"]["labels"] = {"shard": "b"}
    api = Api(monkeypatch, conflicts=1, fresh=moved)
    body = rc(group("cpu", replicas=0), gpu_group())
    body["metadata"]["labels"] = {"shard": "a"}
    clock = Clock()
    config = AutoscalerConfig(interval=5, owns=Scope(selector=parse_selector("shard=a")).owns)
    source = Source(body, requests=[rrr(3)])
    loop = Autoscaler(None, source, EventLog(), config, clock=clock.mono, wall_clock=clock.now)  # type: ignore[arg-type]
    assert await loop.step(KEY) is None
    assert [p[0]["value"] for p in api.patches] == [1]  # the one refused; none on the moved cluster
    assert api.statuses == []


async def test_watch_health_lists_the_namespaces_the_patterns_match(monkeypatch: pytest.MonkeyPatch) -> None:
    listed: list[str | None] = []

    async def namespaces(api: Any) -> list[str]:
        return ["team-a", "team-test", "ml", "kube-system"]

    async def clusters(api: Any, namespace: str | None) -> list[dict[str, Any]]:
        listed.append(namespace)
        return [{"metadata": {"namespace": namespace, "name": "c", "resourceVersion": "1"}}]

    monkeypatch.setattr(ops, "list_namespaces", namespaces)
    monkeypatch.setattr(ops, "list_rayclusters", clusters)
    seen = {("team-a", "c"): "1", ("ml", "c"): "1"}
    health = WatchHealth(None, ["team-*,!team-test", "ml"], lambda: seen)  # type: ignore[arg-type]
    await health.check_once()
    await health.check_once()
    assert listed == ["team-a", "ml", "team-a", "ml"]
    assert health.verdict() is None


async def test_a_status_write_that_moves_only_the_worker_counts_is_not_reconciled() -> None:
    """As KubeRay's operator: the controller reconciles a RayCluster's spec, metadata and deletion,
    and its status's state and conditions (a step acts on what the step before wrote), not the
    worker counts its own writes move; the autoscaler hears of the spec and the metadata only (of
    the status it reads only what it wrote itself)."""
    a = Operator("shard=a")
    ready = {
        "state": "ready",
        "conditions": [{"type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady"}],
    }
    await a.cluster("c", {"shard": "a"}, status=ready | {"readyWorkerReplicas": 1})
    assert a.drained() == ([("ns", "c")], [("ns", "c")])
    await a.cluster(
        "c", {"shard": "a"}, status=ready | {"readyWorkerReplicas": 2, "availableWorkerReplicas": 2}
    )
    assert a.drained() == ([], [])
    suspending = {"conditions": [{"type": "RayClusterSuspending", "status": "True", "reason": "Suspending"}]}
    await a.cluster("c", {"shard": "a"}, status=ready | suspending)
    assert a.drained() == ([("ns", "c")], [])
    await a.cluster("c", {"shard": "a"}, status=ready | suspending | {"autoscaler": {"groups": []}})
    assert a.drained() == ([], [])  # its own status.autoscaler
    await a.cluster("c", {"shard": "a"}, status=ready | suspending, generation=2)  # a spec edit
    assert a.drained() == ([("ns", "c")], [("ns", "c")])
    await a.cluster("c", {"shard": "a", "x": "y"}, status=ready | suspending, generation=2)  # labels
    assert a.drained() == ([("ns", "c")], [("ns", "c")])
