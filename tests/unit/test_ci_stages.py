"""bench.ci_stages: the stages against the Makefile's `test:` target, pytest's summary, the stop at
the first failing stage, the fresh caches' environment, and the docs block rendered from results."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from bench import ci_stages, ci_stages_docs
from bench.ci_stages import STAGES, Stage, stage_problems

ROOT = Path(ci_stages.__file__).resolve().parents[1]
MAKEFILE = (ROOT / "Makefile").read_text()
CI_RUN = (ROOT / ".ci" / "run").read_text()
TEST_RULE = "test: builds check differential kuberay-diff integration"


def test_the_stages_add_up_to_what_make_test_runs() -> None:
    assert TEST_RULE in MAKEFILE
    assert stage_problems(MAKEFILE, CI_RUN) == []
    names = [s.name for s in STAGES]
    assert names[-1] == "demo"
    assert [s.name for s in STAGES if not s.in_test] == ["demo"]


@pytest.mark.parametrize(
    ("makefile", "ci_run", "problem"),
    [
        (MAKEFILE.replace(TEST_RULE, TEST_RULE + " chaos"), CI_RUN, "runs `make chaos`, which no stage runs"),
        (MAKEFILE.replace(TEST_RULE, "test: builds check differential integration"), CI_RUN,
         "no longer runs `make kuberay-diff`"),
        (MAKEFILE.replace(TEST_RULE, TEST_RULE + " demo"), CI_RUN, "now runs `make demo` itself"),
        (MAKEFILE.replace(TEST_RULE, TEST_RULE.replace("builds ", "")), CI_RUN,
         "no longer runs `make builds`"),
        (MAKEFILE.replace(TEST_RULE + " ## everything CI runs", TEST_RULE + "\n\t./more.sh"), CI_RUN,
         "a recipe of its own"),
        (MAKEFILE.replace("\n.PHONY: demo\ndemo:", "\nshow:"), CI_RUN, "`make demo` is no longer a target"),
        (MAKEFILE, CI_RUN.replace("make test", "make check"), ".ci/run no longer runs `make test`"),
    ],
)  # fmt: skip
def test_a_changed_make_test_is_a_problem(makefile: str, ci_run: str, problem: str) -> None:
    assert makefile != MAKEFILE or ci_run != CI_RUN
    problems = stage_problems(makefile, ci_run)
    assert any(problem in p for p in problems), problems


def test_a_stage_that_runs_a_later_one_first_is_a_problem() -> None:
    reordered = (Stage("check"), *(s for s in STAGES if s.name != "check"))
    assert "`make check` runs `make install` first: put builds (it runs install) before it" in stage_problems(
        MAKEFILE, CI_RUN, reordered
    )
    makefile = MAKEFILE.replace(TEST_RULE, "test: check builds differential kuberay-diff integration")
    apart = (Stage("check"), Stage("install"), *(s for s in STAGES if s.name != "check"))
    assert "`make check` runs `make install` first: put install before it" in stage_problems(
        makefile, CI_RUN, apart
    )


def test_the_targets_a_recipe_runs_with_make_are_what_it_needs() -> None:
    line = "@$(MAKE) --no-print-directory -j5 --output-sync=line install cluster-build X=1 helm"
    assert ci_stages.submake_targets(line) == ["install", "cluster-build", "helm"]
    assert ci_stages.submake_targets("$(PY) -m pytest tests/unit -q") == []
    rules = ci_stages.makefile_rules(MAKEFILE)
    assert {"install", "cluster-build", "kuberay-oracle", "kuberay-operator", "browser"} <= rules.submade(
        "builds"
    )
    assert rules.submade("check") == {"check"}


def test_the_tool_stops_before_running_anything_when_make_test_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "run").write_text(CI_RUN)
    (tmp_path / "Makefile").write_text(MAKEFILE.replace(TEST_RULE, TEST_RULE + " e2e"))
    monkeypatch.setattr(ci_stages, "ROOT", tmp_path)
    monkeypatch.setattr(ci_stages, "git", lambda *_: pytest.fail("cloned although make test changed"))
    with pytest.raises(SystemExit, match="runs `make e2e`, which no stage runs"):
        ci_stages.measure(["builds"], fresh=False, keep=False, note="")


def test_pytest_summaries_are_added_up() -> None:
    output = "\n".join(
        [
            "ok: 2 workers in 3.5s",  # not pytest's
            "448 passed, 3 skipped, 2 warnings in 40.12s",
            "\x1b[31m===== 1 failed, 20 passed, 1 error in 3.00s (0:00:03) =====\x1b[0m",
        ]
    )
    assert ci_stages_docs.pytest_counts(output) == {
        "passed": 468, "failed": 1, "skipped": 3, "warnings": 2, "errors": 1,
    }  # fmt: skip
    assert ci_stages_docs.pytest_counts("no tests ran in 0.01s") == {"passed": 0, "failed": 0, "skipped": 0}
    assert ci_stages_docs.pytest_counts("go build ./...\ndone in 3.5s") is None


def test_a_stage_is_timed_and_its_tests_counted(tmp_path: Path) -> None:
    (tmp_path / "Makefile").write_text("x:\n\t@echo '3 passed, 1 skipped in 0.50s'; exit 3\n")
    stage = ci_stages.run_stage("x", tmp_path, {"PATH": "/usr/bin:/bin"}, tmp_path)
    assert stage["command"] == "make x"
    assert stage["exit"] == 2  # make's status when a recipe fails
    assert stage["tests"] == {"passed": 3, "failed": 0, "skipped": 1}
    assert stage["wall_s"] >= 0
    assert stage["cpu_s"] >= 0
    assert "3 passed" in (tmp_path / "x.log").read_text()


def fake_stage(name: str, status: int = 0, tests: dict[str, int] | None = None) -> dict[str, Any]:
    return {"stage": name, "command": f"make {name}", "wall_s": 12.34, "cpu_s": 5.0, "exit": status,
            "tests": tests, "load_start": 1.0, "load_end": 2.5}  # fmt: skip


def test_the_first_failing_stage_ends_the_run_and_the_exit_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []

    def run_stage(name: str, *_: object) -> dict[str, Any]:
        ran.append(name)
        return fake_stage(name, 2 if name == "check" else 0)

    monkeypatch.setattr(ci_stages, "git", lambda *_: "abc1234")
    monkeypatch.setattr(ci_stages, "run_stage", run_stage)
    monkeypatch.setattr(ci_stages, "cache_dirs", lambda *_: {"venv": tmp_path / "absent"})
    run = tmp_path / "run"
    monkeypatch.setattr(tempfile, "mkdtemp", lambda **_: str(run))
    run.mkdir()
    out = tmp_path / "results.json"
    assert ci_stages.main(["--stages", "differential,builds,check", "--out", str(out)]) == 1
    assert ran == ["builds", "check"]
    text = out.read_text()
    assert '"commit": "abc1234"' in text
    assert '"mode": "warm"' in text
    assert not run.exists()
    run.mkdir()
    assert ci_stages.main(["--fresh-caches", "--stages", "builds", "--out", str(out)]) == 0
    assert '"mode": "fresh"' in out.read_text()
    assert not run.exists(), "the temporary directory (and the fresh caches in it) is left behind"


def test_stages_are_named_from_the_list_and_run_in_its_order() -> None:
    assert ci_stages.stage_list("check, builds") == ["builds", "check"]
    with pytest.raises(argparse.ArgumentTypeError, match="not a stage: lint"):
        ci_stages.stage_list("builds,lint")


def test_fresh_caches_point_every_cache_into_the_temporary_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for name in ("RAYSCALE_CACHE", "RAYSCALE_TARGET_KUBECONFIG", "MAKEFLAGS"):
        monkeypatch.setenv(name, "x")
    env = ci_stages.environment(tmp_path, fresh=True)
    for name in ("HOME", "XDG_CACHE_HOME", "GOPATH", "GOMODCACHE", "GOCACHE", "PIP_CACHE_DIR"):
        assert Path(env[name]).is_relative_to(tmp_path), name
        assert Path(env[name]).is_dir(), name
    assert env["XDG_CONFIG_HOME"] == str(Path.home() / ".config")  # the machine's configuration
    assert not {"RAYSCALE_CACHE", "RAYSCALE_TARGET_KUBECONFIG", "MAKEFLAGS"} & set(env)
    warm = ci_stages.environment(tmp_path, fresh=False)
    assert warm["RAYSCALE_CACHE"] == "x"
    assert warm.get("HOME") == os.environ.get("HOME")


def results(stages: list[dict[str, Any]], mode: str = "fresh") -> dict[str, Any]:
    return {
        "mode": mode,
        "stages": stages,
        "test_stages": ["install", "check"],
        "disk_bytes": {"gomodcache": 640_000_000, "gocache": 3_100_000_000, "pip_cache": 385_024,
                       "venv": None},
        "provenance": {"date": "2026-11-28 04:00 UTC", "commit": "abc1234", "cores": 2, "memory_gib": 23.5,
                       "load_start": 1.0, "load_end": 2.5, "command": "python -m bench.ci_stages"},
    }  # fmt: skip


def test_a_whole_run_renders_its_stages_and_the_total_of_make_test() -> None:
    text = ci_stages_docs.render(
        results([fake_stage("install"), fake_stage("check", tests={"passed": 448, "failed": 0, "skipped": 3}),
                 fake_stage("demo") | {"wall_s": 0.03, "cpu_s": 0.0}])
    )  # fmt: skip
    assert "| `make install` | 12 | 5.0 | 0 | — | 1.00 → 2.50 |" in text
    assert "| `make check` | 12 | 5.0 | 0 | 448 / 0 / 3 | 1.00 → 2.50 |" in text
    assert "| **`make test`**: the stages above but `make demo` | **25** | **10** | 0 | 448 / 0 / 3 |" in text
    flat = " ".join(text.split())
    assert "| `make demo` | 0.03 | 0.00 | 0 | — |" in text
    assert "Go module cache 640 MB, Go build cache 3.10 GB, ~/.cache/rayscale none, pip cache 0.4 MB," in flat
    assert "the clone's `.venv` none; 3.74 GB in all." in flat
    assert "commit abc1234" in flat
    assert "`make ci-timings CI_ARGS=--fresh-caches`" in flat


def test_the_builds_own_times_are_read_and_rendered_under_the_table() -> None:
    output = (
        "localk8s: downloaded in 40s\nlocalk8s: built in 412s\n\x1b[0mhelm.sh: built in 95s\nbuilt in 3s\n"
    )
    assert ci_stages_docs.build_times(output) == {"localk8s": 412, "helm.sh": 95}
    builds = fake_stage("builds") | {"builds": {"localk8s": 412, "helm.sh": 95}}
    flat = " ".join(ci_stages_docs.render(results([builds, fake_stage("check")])).split())
    assert (
        "Inside `make builds` (side by side, so they overlap), the builds took: localk8s 412 s, helm.sh 95 s."
        in flat
    )


def test_a_failed_or_partial_run_has_no_total() -> None:
    failed = ci_stages_docs.render(results([fake_stage("install"), fake_stage("check", 2)]))
    assert "**`make test`**" not in failed
    assert "Stopped at `make check` (exit 2): the rest did not run." in " ".join(failed.split())
    partial = ci_stages_docs.render(results([fake_stage("install")], mode="warm"))
    assert "**`make test`**" not in partial
    assert "Only install ran (`--stages`)" in " ".join(partial.split())
    assert "`make ci-timings`." in " ".join(partial.split())


def test_before_a_run_the_block_says_so_with_nothing_guessed() -> None:
    text = " ".join(ci_stages_docs.render({"mode": "warm"}).split())
    assert "Not measured yet: `make ci-timings` measures it." in text
    assert "Recorded run: not recorded; commit not recorded" in text


def test_each_mode_writes_its_own_block(tmp_path: Path) -> None:
    page = tmp_path / "development.md"
    fresh, warm = ci_stages_docs.BLOCKS["fresh"], ci_stages_docs.BLOCKS["warm"]
    page.write_text(
        f"## Measured\n\n{fresh.begin()}\nold fresh\n{fresh.end()}\n\n{warm.begin()}\nold\n{warm.end()}\n"
    )
    ci_stages_docs.write(results([fake_stage("install")], mode="warm"), page)
    text = page.read_text()
    assert "old fresh" in text
    assert "\nold\n" not in text
    assert warm.find(text) == warm.wrap(ci_stages_docs.render(results([fake_stage("install")], mode="warm")))
