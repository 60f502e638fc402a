"""The pure parts of bench/vs_kuberay.py (rayscale beside KubeRay's operator): statistics, arguments,
the plan of a run, KubeRay's command line, the watch's tallies, /proc parsing and the docs section."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from bench import operator_scale, procstat, vs_kuberay
from bench.docs import replace_section
from bench.vs_kuberay import CaseWatch

# --------------------------------------------------------------------------- statistics


def test_percentile_interpolates_between_order_statistics() -> None:
    values = [float(v) for v in range(1, 101)]  # 1 .. 100
    assert vs_kuberay.percentile(values, 50) == pytest.approx(50.5)
    assert vs_kuberay.percentile(values, 99) == pytest.approx(99.01)
    assert vs_kuberay.percentile(values, 100) == 100
    assert vs_kuberay.percentile([3.0], 99) == 3.0
    assert vs_kuberay.percentile([4.0, 1.0], 50) == pytest.approx(2.5)  # unsorted input
    with pytest.raises(ValueError, match="no values"):
        vs_kuberay.percentile([], 50)


def test_spread_and_per_cluster() -> None:
    assert vs_kuberay.spread([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    found = vs_kuberay.per_cluster([float(v) for v in range(1, 51)])
    assert found["median"] == 25.5
    assert found["max"] == 50
    assert 49 < found["p99"] < 50


def test_numbers_and_cells() -> None:
    assert [vs_kuberay.number(v) for v in (0.1234, 3.456, 12.34, 123.4, 12345.6)] == [
        "0.12",
        "3.46",
        "12.3",
        "123",
        "12,346",
    ]
    assert vs_kuberay.cell(None) == "—"
    assert vs_kuberay.cell(vs_kuberay.spread([2.0])) == "2.00"
    assert vs_kuberay.cell(vs_kuberay.spread([2.0, 2.001, 2.002])) == "2.00"  # no spread shown
    assert vs_kuberay.cell(vs_kuberay.spread([1.0, 2.0, 4.0])) == "2.00 (1.00-4.00)"
    assert vs_kuberay.cell(vs_kuberay.spread([1.5, 2.5]), "x") == "2.00x (1.50-2.50)"
    assert vs_kuberay.cell(vs_kuberay.spread([139.3, 140.6]), fmt=vs_kuberay.whole) == "140 (139-141)"


def test_ratio_is_rayscales_median_over_kuberays() -> None:
    ours, theirs = vs_kuberay.spread([60.0, 80.0, 70.0]), vs_kuberay.spread([35.0])
    assert vs_kuberay.ratio(ours, theirs) == "2.0x"
    assert vs_kuberay.ratio(theirs, ours) == "0.5x"
    assert vs_kuberay.ratio(None, theirs) == "—"
    assert vs_kuberay.ratio(ours, None) == "—"


# --------------------------------------------------------------------------- arguments and plan


def test_defaults() -> None:
    args = vs_kuberay.parse_args([])
    assert args.cases == list(vs_kuberay.CASES)
    assert args.operators == ["rayscale", "kuberay", "kuberay-matched"]
    assert (args.reps, args.reps_large) == (3, 1)
    assert args.out == vs_kuberay.OUT
    assert args.docs == operator_scale.DOCS
    assert not args.write_docs
    assert args.docs_from is None


def test_subsets_keep_the_canonical_order() -> None:
    args = vs_kuberay.parse_args(
        ["--cases", "c, a100,b50", "--operators", "kuberay,rayscale", "--reps", "1", "--out", "/tmp/x.json"]
    )
    assert args.cases == ["a100", "b50", "c"]
    assert args.operators == ["rayscale", "kuberay"]
    assert args.reps == 1
    assert args.out == Path("/tmp/x.json")
    assert vs_kuberay.parse_args(["--cases", "all"]).cases == list(vs_kuberay.CASES)


@pytest.mark.parametrize(
    "argv",
    [["--cases", "a100,e"], ["--cases", ""], ["--operators", "kuberay-fast"], ["--reps", "0"]],
)
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        vs_kuberay.parse_args(argv)


def test_repetitions_of_the_large_case() -> None:
    args = vs_kuberay.parse_args(["--reps", "5", "--reps-large", "2"])
    assert vs_kuberay.repetitions("a100", args) == 5
    assert vs_kuberay.repetitions("b1000", args) == 2


def test_turns_rotate_every_repetition() -> None:
    ops = ["rayscale", "kuberay", "kuberay-matched"]
    assert vs_kuberay.turns(ops, 0) == ops
    assert vs_kuberay.turns(ops, 1) == ["kuberay", "kuberay-matched", "rayscale"]
    assert vs_kuberay.turns(ops, 3) == ops
    assert vs_kuberay.turns(["kuberay"], 2) == ["kuberay"]


def test_turns_rotate_from_one_case_group_to_the_next() -> None:
    ops = ["rayscale", "kuberay", "kuberay-matched"]
    firsts = {vs_kuberay.turns(ops, 0, group)[0] for group in range(3)}
    assert firsts == set(ops)  # b1000 runs once: each group starts with another operator
    assert vs_kuberay.turns(ops, 1, 2) == ops


def test_case_groups_put_the_scale_down_after_its_scale_up() -> None:
    assert vs_kuberay.case_groups(list(vs_kuberay.CASES)) == [
        ["a100"],
        ["b50"],
        ["c"],
        ["a1000", "d"],
        ["b1000"],
    ]
    assert vs_kuberay.case_groups(["d", "a100"]) == [["a100"], ["d"]]
    assert vs_kuberay.case_groups(["a1000"]) == [["a1000"]]


def test_extra_nodes_one_per_hundred_pods() -> None:
    assert vs_kuberay.extra_node_count(["a100"]) == 2  # 100 workers, a head, the warm-up head
    assert vs_kuberay.extra_node_count(["a1000", "d"]) == 11
    assert vs_kuberay.extra_node_count(["b1000"]) == 101  # 10,000 pods and the warm-up head
    assert vs_kuberay.extra_node_count(["c"]) == 7  # 501 + 150 + 1


def test_kuberay_commands() -> None:
    binary = Path("/cache/kuberay-operator")
    default = vs_kuberay.kuberay_command("kuberay", binary, "ns-1", (8080, 8081))
    assert default == [
        "/cache/kuberay-operator",
        "--watch-namespace=ns-1",
        "--metrics-addr=127.0.0.1:8080",
        "--health-probe-bind-address=127.0.0.1:8081",
        "--enable-leader-election=false",
    ]
    matched = vs_kuberay.kuberay_command("kuberay-matched", binary, "ns-1", (8080, 8081))
    assert matched == [*default, "--reconcile-concurrency=16", "--qps=100", "--burst=200"]


def test_kuberay_version(tmp_path: Path) -> None:
    (tmp_path / "versions.env").write_text("# a comment\nKUBERAY_VERSION=v9.8.7\n")
    assert vs_kuberay.kuberay_version(tmp_path / "versions.env") == "v9.8.7"
    assert vs_kuberay.kuberay_version().startswith("v")


# --------------------------------------------------------------------------- the watch's tallies


def _pod(
    name: str, cluster: str, node_type: str, phase: str = "Pending", deleting: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "labels": {"ray.io/cluster": cluster, "ray.io/node-type": node_type},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


def test_case_watch_counts_live_running_and_present_pods() -> None:
    watch = CaseWatch(None, "ns", {"rc": 3})
    watch._set(_pod("w1", "rc", "worker"))
    assert "rc" in watch.first_worker
    watch._set(_pod("h", "rc", "head", "Running"))
    watch._set(_pod("w1", "rc", "worker", "Running"))
    watch._set(_pod("w2", "rc", "worker", "Running"))
    assert watch.pods_of("rc", "worker") == 2
    assert watch.pods_of("rc", "worker", vs_kuberay.RUNNING) == 2
    assert watch.pods_of("rc", "head", vs_kuberay.RUNNING) == 1
    assert watch.first_worker["rc"] < watch.head_running["rc"]
    assert "rc" in watch.all_running  # FleetWatch's: all 3 pods of "rc" ran

    watch._set(_pod("w1", "rc", "worker", "Running", deleting=True))
    assert watch.pods_of("rc", "worker") == 1
    assert watch.pods_of("rc", "worker", vs_kuberay.RUNNING) == 1
    assert watch.pods_of("rc", "worker", vs_kuberay.PRESENT) == 2
    watch._remove("w1")
    watch._remove("w1")  # a second DELETED changes nothing
    assert watch.pods_of("rc", "worker", vs_kuberay.PRESENT) == 1
    assert watch.pods_of("other", "worker") == 0

    watch._reset()  # a relist follows
    assert watch.pods_of("rc", "worker", vs_kuberay.PRESENT) == 0
    assert watch.pods == {}


def test_milestones_over_the_tallies() -> None:
    watch = CaseWatch(None, "ns", {})
    watch.milestone("two", lambda w: vs_kuberay.workers(w, "rc", vs_kuberay.RUNNING) >= 2)
    watch._set(_pod("w1", "rc", "worker", "Running"))
    watch._update()
    assert "two" not in watch.reached
    watch._set(_pod("w2", "rc", "worker", "Running"))
    watch._update()
    assert "two" in watch.reached


# --------------------------------------------------------------------------- /proc


def _fake_proc(root: Path, pid: int, ppid: int, utime: int, stime: int, comm: str = "op (x) y") -> None:
    d = root / str(pid)
    d.mkdir()
    fields = ["S", str(ppid), *["0"] * 9, str(utime), str(stime), "3", "4", *["0"] * 5]
    (d / "stat").write_text(f"{pid} ({comm}) " + " ".join(fields) + "\n")
    (d / "status").write_text(f"Name:\top\nVmHWM:\t  {1000 * pid} kB\nVmRSS:\t  {100 * pid} kB\n")


def test_process_tree_from_proc(tmp_path: Path) -> None:
    _fake_proc(tmp_path, 10, 1, 100, 50)
    _fake_proc(tmp_path, 11, 10, 20, 10)
    _fake_proc(tmp_path, 12, 11, 1, 1)
    _fake_proc(tmp_path, 13, 1, 999, 999)  # not ours
    (tmp_path / "self").mkdir()  # not a process directory
    (tmp_path / "loadavg").write_text("2.50 1.25 0.75 3/200 4000\n")
    tick = os.sysconf("SC_CLK_TCK")
    assert sorted(procstat.descendants(10, tmp_path)) == [11, 12]
    assert procstat.cpu_seconds(10, tmp_path) == pytest.approx(150 / tick)
    # own 150 + reaped children 3 + 4 + living descendants 30 + 2
    assert procstat.tree_cpu_seconds(10, tmp_path) == pytest.approx(189 / tick)
    assert procstat.tree_memory_kib(10, tmp_path) == {"VmHWM": 33000, "VmRSS": 3300, "processes": 3}
    assert procstat.load_average(tmp_path) == (2.5, 1.25, 0.75)


def test_this_process_from_proc() -> None:
    pid = os.getpid()
    alone = procstat.cpu_seconds(pid)
    assert procstat.tree_cpu_seconds(pid) >= alone > 0
    assert procstat.memory_kib(pid)["VmHWM"] >= procstat.memory_kib(pid)["VmRSS"] > 0


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 1 << 20])
def test_count_in_a_file_across_blocks(tmp_path: Path, chunk: int) -> None:
    log = tmp_path / "op.log"
    line = b'{"msg":"Unable to record event: too many queued events, dropped event"}\n'
    log.write_bytes(b"start\n" + line * 3 + b"other\n" + line + b"dropped even")
    assert vs_kuberay.count_in(log, vs_kuberay.DROPPED, chunk) == 4
    assert vs_kuberay.count_in(log, b"e", chunk) == log.read_bytes().count(b"e")


# --------------------------------------------------------------------------- the docs


def _run(case: str, op: str, rep: int, figures: dict[str, float], **extra: Any) -> dict[str, Any]:
    return {
        "case": case,
        "operator": op,
        "rep": rep,
        "pods": extra.pop("pods", 100),
        "figures": figures,
        "cpu_seconds": extra.pop("cpu", 1.0),
        "cpu_settled_seconds": 1.5,
        "rss_peak_mib": extra.pop("rss", 100.0),
        "processes": 1,
        "load_start": [extra.pop("load", 1.0), 1.0, 1.0],
        "load_end": [1.5, 1.0, 1.0],
        "events": {"objects": 10, "count": 12, "reasons": {}},
        "log_bytes": 2048 if op == "kuberay" else 100,
        "dropped_events": 7 if (op, case) == ("kuberay-matched", "c") else 0,
    }


def _results() -> dict[str, Any]:
    runs = []
    for rep in range(2):
        for op, rate in (("rayscale", 60.0), ("kuberay", 20.0), ("kuberay-matched", 40.0)):
            created = 100 / (rate + rep)
            runs.append(
                _run(
                    "a100",
                    op,
                    rep,
                    {
                        "created_s": created,
                        "running_s": created + 1,
                        "created_per_s": 100 / created,
                        "running_per_s": 100 / (created + 1),
                    },
                    load=3.5 if (op, rep) == ("kuberay", 1) else 1.0,
                )
            )
            small = {"small_running_median_s": 1.0, "small_running_p99_s": 2.0, "running_s": 3.0}
            beside = {"small_running_median_s": 2.0, "small_running_p99_s": 2.0 * (1 + rate / 20)}
            runs.append(_run("c", op, rep, beside | {"big_running_s": 9.0, "running_s": 9.0}, pods=650))
            runs.append(_run("c-alone", op, rep, small, pods=150))
    return {
        "runs": runs,
        "operators": ["rayscale", "kuberay", "kuberay-matched"],
        "cores": 2,
        "machine": "x86_64, 2 cores (shared), Python 3.11.7",
        "date": "2026-11-26",
        "kubernetes": "v1.36.3",
        "kuberay_version": "v1.6.2",
        "run_seconds": 1500.0,
        "note": "A test.",
    }


def test_hol_ratios_pair_the_repetitions() -> None:
    results = _results()
    assert vs_kuberay.hol_ratios(results["runs"], "kuberay") == [pytest.approx(2.0), pytest.approx(2.0)]
    assert vs_kuberay.hol_ratios(results["runs"], "rayscale") == [pytest.approx(4.0), pytest.approx(4.0)]
    assert vs_kuberay.hol_ratios(results["runs"][:1], "rayscale") == []


def test_render() -> None:
    text = vs_kuberay.render(_results())
    prose = " ".join(text.split())  # the paragraphs' words, unwrapped
    assert text.startswith("## Side by side with KubeRay's operator\n\n")
    assert "KubeRay's own operator (v1.6.2" in prose
    assert "Kubernetes v1.36.3" in prose
    assert (
        "| case | figure | rayscale | KubeRay default | KubeRay matched | rayscale / KubeRay default" in text
    )
    # rayscale 60-61 pods/s, KubeRay default 20-21, matched 40-41: medians 60.5, 20.5, 40.5
    assert "| 1 cluster, workers 0 -> 100 | pods/s created | 60.5 (60.0-61.0) | 20.5 (20.0-21.0) |" in text
    assert "| 3.0x | 1.5x |" in text
    assert "| head of line | p99 beside the scale-up / p99 alone | 4.00x | 2.00x | 3.00x |  |  |" in text
    assert "| 1 cluster, workers 0 -> 100 | rayscale | 1.00 | 10.0 | 1.50 | 100 | 10 |" in text
    assert "busy (above its 2 cores) in 1 of 18 case runs: a100 (KubeRay default, run 2: 3.5 -> 1.5)" in prose
    assert "A test." in prose
    assert "The run took 25 minutes." in prose
    assert "median of 2 repetitions" in prose
    assert "b1000" not in text  # not run: no rows
    # per rep: 3 x 2,048 bytes of KubeRay default's log over 100 + 650 + 150 pods
    assert "at each one's default level: rayscale 0 bytes, KubeRay default 7 bytes" in prose
    assert "Events it dropped as its queue was full: 14 with KubeRay matched." in prose
    assert all(len(line) <= 100 for line in text.splitlines() if not line.startswith("|"))
    assert "control plane CPU s" not in text  # no run measured it


def test_the_control_planes_cpu_is_a_column_once_measured() -> None:
    results = _results()
    for r in results["runs"]:
        r["control_plane_cpu_seconds"] = 12.0 if r["operator"] == "rayscale" else 9.0
    text = vs_kuberay.render(results)
    assert "| peak RSS MiB | Events | control plane CPU s |" in text
    assert "| 1 cluster, workers 0 -> 100 | rayscale | 1.00 | 10.0 | 1.50 | 100 | 10 | 12.0 |" in text


def test_render_one_operator_one_run() -> None:
    results = _results()
    results["runs"] = [r for r in results["runs"] if r["operator"] == "kuberay" and r["rep"] == 0]
    results["operators"] = ["kuberay"]
    results["runs"][0]["load_start"][0] = 0.5
    text = vs_kuberay.render(results)
    prose = " ".join(text.split())
    assert "| case | figure | KubeRay default |\n|---|---|---:|" in text
    assert "rayscale / " not in text
    assert "median of one run" in prose
    assert "never above the 2 cores" in prose
    for r in results["runs"]:
        r["load_end"][0] = 2.5
    busy = " ".join(vs_kuberay.render(results).split())
    assert "busy (above its 2 cores) throughout, all 3 case runs." in busy


def test_docs_from_rewrites_only_its_section(tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n\n## Scheduler\n\nkept\n\n## Operator at fleet scale\n\nkept too\n")
    saved = tmp_path / "vs.json"

    saved.write_text(json.dumps(_results()))
    assert vs_kuberay.main(["--docs-from", str(saved), "--docs", str(docs)]) == 0
    first = docs.read_text()
    assert first.count("## Side by side with KubeRay's operator") == 1
    assert "## Scheduler\n\nkept\n" in first
    assert "## Operator at fleet scale\n\nkept too\n" in first
    # again, with a note: replaced in place, nothing else changes
    assert vs_kuberay.main(["--docs-from", str(saved), "--docs", str(docs), "--note", "Rerun"]) == 0
    second = docs.read_text()
    assert second.count("## Side by side with KubeRay's operator") == 1
    assert "Rerun." in second
    assert second.replace("Rerun.", "A test.") == first
    replace_section(docs, "## Scheduler", "## Scheduler\n\nchanged\n")
    assert "## Side by side with KubeRay's operator" in docs.read_text()
