"""How long `make test` (what CI runs, `.ci/run`) and `make demo` take, stage by stage, from a fresh clone.

    python -m bench.ci_stages [--fresh-caches] [--stages install,check] [--keep] [--write-docs]
                              [--render-only] [--note TEXT] [--out FILE] [--docs-from FILE]

Clones the committed HEAD (`git clone`, as CI gets it) into a temporary directory and runs there,
one at a time, `make <stage>` for each of STAGES: the targets `make test` needs, `make builds` first
(everything the tests need built, side by side: one stage, whose builds' own times are read from
their "<name>: built in Ns" lines), then `make demo`. Each stage's wall seconds, CPU seconds of its
processes (getrusage(RUSAGE_CHILDREN) before and after), exit status, pytest's passed / failed /
skipped and the 1-minute load average at its start and end are recorded; the first stage that fails
ends the run (exit 1). At the end, the disk used by the caches (Go's module and build caches,
~/.cache/rayscale, pip's cache, the clone's .venv).

--fresh-caches: every cache empty, as on a new machine (HOME, XDG_CACHE_HOME, GOPATH, GOMODCACHE,
GOCACHE, PIP_CACHE_DIR in the temporary directory; XDG_CONFIG_HOME, the configuration, stays the
machine's); without it the machine's caches (a warm run).
The results, with their provenance (the clone's commit), go to bench/results/ci_stages_fresh.json
or ci_stages_warm.json (--out); --write-docs writes that mode's block in docs/development.md and
--render-only renders it again from the stored results. Before anything runs, STAGES is checked
against the Makefile's `test:` target (`stage_problems`): a change there stops the tool until
STAGES follows it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import provenance
from bench.ci_stages_docs import RESULTS, build_times, pytest_counts, write
from bench.docs import add_output_options, finish

ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Stage:
    name: str  # the make target
    in_test: bool = True  # its time is part of `make test`'s
    prerequisite: bool = True  # `make test`'s rules name it (else it runs inside a test stage)


STAGES = (
    # install, cluster-build, kuberay-oracle, kuberay-operator, helm and browser, side by side (its
    # recipe runs them with `$(MAKE) -j`): one stage, as they overlap
    Stage("builds"),
    Stage("check"),
    Stage("differential"),
    Stage("kuberay-diff"),
    Stage("integration"),
    Stage("demo", in_test=False, prerequisite=False),  # the quick start's other command
)
NAMES = [s.name for s in STAGES]


# ----------------------------------------------------------------- the stages against the Makefile

_RULE = re.compile(r"^(?P<targets>[^\s#=:][^=:]*?)\s*:(?!=)(?P<prereqs>[^#;]*)")


_SUBMAKE = re.compile(r"^[@+-]*\$\(MAKE\)\s+(?P<args>.*)$")


def submake_targets(recipe_line: str) -> list[str]:
    """The targets a recipe line `$(MAKE) [options] targets` runs (none for any other line)."""
    found = _SUBMAKE.match(recipe_line)
    words = found["args"].split() if found else []
    return [w for w in words if not w.startswith("-") and "=" not in w]


@dataclasses.dataclass
class Rules:
    prereqs: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    recipes: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    phony: set[str] = dataclasses.field(default_factory=set)

    def runs(self, target: str) -> list[str]:
        """The targets its recipe runs with `$(MAKE)`."""
        return [t for line in self.recipes.get(target, []) for t in submake_targets(line)]

    def needs(self, target: str) -> list[str]:
        """Its prerequisites, then the targets its recipe runs with `$(MAKE)`."""
        return [*self.prereqs.get(target, []), *self.runs(target)]

    def submade(self, target: str) -> set[str]:
        """`target` and what its recipe runs with `$(MAKE)`, with all they need: its row's time."""
        return {target, *(name for run in self.runs(target) for name in self.closure(run))}

    def closure(self, target: str) -> list[str]:
        """`target` and every target it needs (`needs`), phony ones only, in the order make runs them."""
        order: list[str] = []
        seen: set[str] = set()

        def visit(name: str) -> None:
            if name in seen:
                return
            seen.add(name)
            for prereq in self.needs(name):
                visit(prereq)
            if name in self.phony:
                order.append(name)

        visit(target)
        return order


def makefile_rules(text: str) -> Rules:
    """The rules of a Makefile as this project writes them: `target: prerequisites ## help`,
    tab-indented recipes, `.PHONY: name` lines; a target's rules add up."""
    rules = Rules()
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("\t"):
            for target in current:
                rules.recipes[target].append(line.strip())
            continue
        if not line.strip() or line.startswith("#"):
            continue
        found = _RULE.match(line)
        targets = found["targets"].split() if found else []
        current = [] if targets in ([], [".PHONY"]) else targets
        if found and targets == [".PHONY"]:
            rules.phony.update(found["prereqs"].split())
        for target in current:
            rules.prereqs.setdefault(target, []).extend(found["prereqs"].split() if found else [])
            rules.recipes.setdefault(target, [])
    return rules


def stage_problems(makefile: str, ci_run: str, stages: Sequence[Stage] = STAGES) -> list[str]:
    """What keeps `stages`, run one after the other, from adding up to `make test` exactly."""
    rules = makefile_rules(makefile)
    problems = []
    if not re.search(r"^\s*make test\s*$", ci_run, re.M):
        problems.append(".ci/run no longer runs `make test`")
    if "test" not in rules.prereqs:
        return [*problems, "the Makefile has no `test:` target"]
    if rules.recipes["test"]:
        problems.append(f"`make test` has a recipe of its own, which no stage runs: {rules.recipes['test']}")
    in_test = set(rules.closure("test")) - {"test"}
    names = [s.name for s in stages]
    for stage in stages:
        if stage.name not in rules.phony:
            problems.append(f"`make {stage.name}` is no longer a target of the Makefile")
        elif stage.prerequisite and stage.name not in in_test:
            problems.append(f"`make test` no longer runs `make {stage.name}`")
        elif not stage.prerequisite and stage.name in in_test:
            problems.append(f"`make test` now runs `make {stage.name}` itself: mark it a prerequisite")
        later = {t: s for s in reversed(names[names.index(stage.name) + 1 :]) for t in rules.submade(s)}
        for needed in rules.closure(stage.name)[:-1]:
            if needed in later:
                owner = later[needed] if later[needed] == needed else f"{later[needed]} (it runs {needed})"
                problems.append(f"`make {stage.name}` runs `make {needed}` first: put {owner} before it")
    covered = {t for s in stages if s.prerequisite for t in rules.closure(s.name)}
    for target in sorted(in_test - covered):
        problems.append(f"`make test` runs `make {target}`, which no stage runs: add it to STAGES")
    return problems


# ----------------------------------------------------------------- running the stages


def environment(tmp: Path, fresh: bool) -> dict[str, str]:
    """The environment of every stage: this one, minus this process's virtualenv, make's variables
    and a named test cluster (CI uses the local control plane); --fresh-caches: every cache in `tmp`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAYSCALE_TARGET_")}
    for name in ("VIRTUAL_ENV", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"):
        env.pop(name, None)
    if sys.prefix != sys.base_prefix:  # run from a venv: `make install` must find the system's python3
        venv = Path(sys.prefix).resolve()
        paths = env.get("PATH", "").split(os.pathsep)
        env["PATH"] = os.pathsep.join(p for p in paths if not Path(p).resolve().is_relative_to(venv))
    if not fresh:
        return env
    # configuration (Go's env file and telemetry, pip's config) stays the machine's: found through
    # XDG_CONFIG_HOME, not the new HOME
    env.setdefault("XDG_CONFIG_HOME", str(Path.home() / ".config"))
    for name in ("RAYSCALE_CACHE", "RAYSCALE_RAY_VENV"):
        env.pop(name, None)
    home = tmp / "home"
    caches = {
        "HOME": home,
        "XDG_CACHE_HOME": home / ".cache",
        "GOPATH": tmp / "go",
        "GOMODCACHE": tmp / "go" / "pkg" / "mod",
        "GOCACHE": tmp / "go-build",
        "PIP_CACHE_DIR": tmp / "pip",
    }
    for name, path in caches.items():
        path.mkdir(parents=True, exist_ok=True)
        env[name] = str(path)
    return env


def go_env(env: Mapping[str, str], *names: str) -> dict[str, str]:
    """`go env NAME...` under `env`; empty when there is no Go."""
    try:
        done = subprocess.run(
            ["go", "env", "-json", *names], env=dict(env), capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return {}
    found: dict[str, str] = json.loads(done.stdout)
    return found


def cache_dirs(env: Mapping[str, str], clone: Path) -> dict[str, Path]:
    """Where the stages' caches are (the keys of ci_stages_docs.DISK_LABELS)."""
    go = go_env(env, "GOMODCACHE", "GOCACHE")
    home = Path(env.get("HOME", str(Path.home())))
    xdg = Path(env.get("XDG_CACHE_HOME") or home / ".cache")
    dirs = {
        "rayscale_cache": Path(env.get("RAYSCALE_CACHE") or home / ".cache" / "rayscale"),
        "pip_cache": Path(env.get("PIP_CACHE_DIR") or xdg / "pip"),
        "venv": clone / ".venv",
    }
    return {"gomodcache": Path(go.get("GOMODCACHE", "")), "gocache": Path(go.get("GOCACHE", "")), **dirs}


def disk_bytes(path: Path) -> int | None:
    """Disk used under `path` (`du -s`), None when it does not exist."""
    if not str(path) or not path.exists():
        return None
    done = subprocess.run(["du", "-s", "-B1", str(path)], capture_output=True, text=True, check=False)
    return int(done.stdout.split()[0]) if done.stdout else None


def run_stage(name: str, clone: Path, env: Mapping[str, str], logs: Path) -> dict[str, Any]:
    """`make <name>` in the clone, its output in logs/<name>.log."""
    log = logs / f"{name}.log"
    load_start = provenance.load_average()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with log.open("w") as out:
        status = subprocess.run(
            ["make", name], cwd=clone, env=dict(env), stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, check=False,
        ).returncode  # fmt: skip
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    output = log.read_text(errors="replace")
    print(f"make {name}: {wall:.1f} s wall, {cpu:.1f} s CPU, exit {status}", file=sys.stderr, flush=True)
    if status:
        print("\n".join(output.splitlines()[-40:]), file=sys.stderr)
    return {
        "stage": name,
        "command": f"make {name}",
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "exit": status,
        "tests": pytest_counts(output),
        "builds": build_times(output),
        "load_start": load_start,
        "load_end": provenance.load_average(),
    }


def git(args: Sequence[str], cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def remove(tmp: Path) -> None:
    subprocess.run(["chmod", "-R", "u+w", str(tmp)], check=False)  # Go's module cache is read-only
    try:
        shutil.rmtree(tmp)
    except OSError as e:  # a process the stages left behind still writes there: keep the results
        print(f"bench.ci_stages: {tmp} not removed: {e}", file=sys.stderr)


def measure(names: Sequence[str], fresh: bool, keep: bool, note: str) -> dict[str, Any]:
    """Run the stages `names` in a fresh clone; the results with their provenance."""
    problems = stage_problems((ROOT / "Makefile").read_text(), (ROOT / ".ci" / "run").read_text())
    if problems:
        raise SystemExit(
            "bench.ci_stages: STAGES no longer add up to `make test`:\n  " + "\n  ".join(problems)
        )
    started = provenance.begin(provenance.command())
    tmp = Path(tempfile.mkdtemp(prefix="rayscale-ci-stages-"))
    clone = tmp / "rayscale"
    env = environment(tmp, fresh)
    stages: list[dict[str, Any]] = []
    try:
        git(["clone", "--quiet", str(ROOT), str(clone)], ROOT)
        head = git(["rev-parse", "--short", "HEAD"], clone)
        print(f"bench.ci_stages: {clone} at {head}, {'empty' if fresh else 'warm'} caches", file=sys.stderr)
        for name in names:
            stages.append(run_stage(name, clone, env, tmp))
            if stages[-1]["exit"]:
                break
        disk = {key: disk_bytes(path) for key, path in cache_dirs(env, clone).items()}
        go_version = go_env(env, "GOVERSION").get("GOVERSION")  # before `remove`: go writes under HOME
    finally:
        if (clone / "e2e" / ".cluster").exists():  # make demo leaves its control plane running
            subprocess.run(["make", "cluster-down"], cwd=clone, env=env, capture_output=True, check=False)
        if keep:
            print(f"bench.ci_stages: kept {tmp} (the clone, its logs, the caches)", file=sys.stderr)
        else:
            remove(tmp)
    return {
        "mode": "fresh" if fresh else "warm",
        "stages": stages,
        "test_stages": [s.name for s in STAGES if s.in_test],
        "disk_bytes": disk,
        "pip_find_links": env.get("PIP_FIND_LINKS"),
        "go_version": go_version,
        **({"note": note} if note else {}),
        "provenance": {**provenance.end(started), "commit": head},
    }


def stage_list(text: str) -> list[str]:
    """--stages: names of STAGES, comma-separated; run in STAGES' order."""
    wanted = {name.strip() for name in text.split(",") if name.strip()}
    unknown = wanted - set(NAMES)
    if unknown or not wanted:
        raise argparse.ArgumentTypeError(
            f"not a stage: {', '.join(sorted(unknown))} (stages: {', '.join(NAMES)})"
        )
    return [name for name in NAMES if name in wanted]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--fresh-caches", action="store_true", help="every cache empty, as on a new machine")
    parser.add_argument("--stages", type=stage_list, default=NAMES, help=f"a subset of {','.join(NAMES)}")
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary directory (clone, logs, caches)"
    )
    add_output_options(parser, RESULTS["warm"])
    args = parser.parse_args(argv)
    if args.fresh_caches and args.out == RESULTS["warm"]:
        args.out = RESULTS["fresh"]
    results: dict[str, Any] = {}

    def run() -> dict[str, Any]:
        results.update(measure(args.stages, args.fresh_caches, args.keep, args.note))
        return results

    status = finish(args, run, write)
    return 1 if any(s["exit"] for s in results.get("stages", [])) else status


if __name__ == "__main__":
    sys.exit(main())
