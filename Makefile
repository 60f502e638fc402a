# rayscale — the commands the README gives.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CLUSTER_DIR ?= e2e/.cluster
# node pool sizes for cluster-up, e.g. SCALE="gpu=4 tpu=8"
SCALE ?=
# the local control plane's launcher (hack/localk8s/; standard library only)
LOCALK8S := hack.localk8s
# The cluster tests, the demo, the benchmarks and the fault suite use: the local control plane
# unless RAYSCALE_TARGET_KUBECONFIG names another (never $KUBECONFIG's); see docs/development.md.
# e.g. make integration RAYSCALE_TARGET_KUBECONFIG=$HOME/kind.kubeconfig RAYSCALE_TARGET_CONTEXT=kind-dev
export RAYSCALE_TARGET_KUBECONFIG RAYSCALE_TARGET_CONTEXT RAYSCALE_TARGET_FORCE

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z][a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

.PHONY: install
install: $(VENV)/.installed ## create .venv with rayscale and its dev tools

# the Python that ruff checks and formats (tools/: its Python files only)
PY_SOURCES := operator tests e2e bench hack tools

.PHONY: lint
lint: install ## ruff, mypy --strict (operator, tests, e2e, bench, hack), vulture (dead code) and lint-imports (the layers)
	$(VENV)/bin/ruff check $(PY_SOURCES)
	$(VENV)/bin/ruff format --check $(PY_SOURCES)
	$(VENV)/bin/mypy
	$(VENV)/bin/vulture
	$(VENV)/bin/lint-imports

.PHONY: fmt
fmt: install ## format the code
	$(VENV)/bin/ruff format $(PY_SOURCES)
	$(VENV)/bin/ruff check --fix $(PY_SOURCES)

.PHONY: check
check: lint ## the fast check before a commit: lint, then the unit tests (no Go build, no Ray head, no control plane)
	$(PY) -m pytest tests/unit -q

.PHONY: unit
unit: install ## unit tests (no cluster), then the scheduler against Ray's on a few hundred generated cases
	$(PY) -m pytest tests/unit -q
	$(PY) -m pytest tests/differential -q

.PHONY: differential
differential: install ## the scheduler against Ray 2.60's on 400 generated cases, seeded per commit (printed; part of make unit and make test)
	@echo "differential seed $$($(PY) -m tests.differential --print-seed) (replay: python -m tests.differential --seed <it> --cases 400 --features default)"
	$(PY) -m pytest tests/differential tests/unit/test_differential_judge.py -q

.PHONY: kuberay-diff
kuberay-diff: install kuberay-oracle ## what rayscale creates for KubeRay's sample RayClusters against KubeRay's own controller
	$(PY) -m pytest tests/kuberay -q

.PHONY: kuberay-oracle
kuberay-oracle: ## build (or reuse) the KubeRay oracle in ~/.cache/rayscale (about 3 minutes the first time)
	@tools/kuberay-oracle/build.sh >/dev/null

.PHONY: kuberay-operator
# after the oracle: one Go module, whose compiled packages the operator's build then reuses
kuberay-operator: kuberay-oracle ## build (or reuse) KubeRay's own operator binary in ~/.cache/rayscale, for the migration tests
	@tools/kuberay-oracle/build-operator.sh >/dev/null

.PHONY: migration
migration: install cluster-build kuberay-operator ## KubeRay's operator -> rayscale -> KubeRay on one RayCluster (also part of make integration)
	$(PY) -m pytest tests/integration/test_migration_from_kuberay.py -q -m integration

.PHONY: fuzz
fuzz: install ## the scheduler against Ray 2.60's on many generated cases, every generator feature on (FUZZ_CASES=20000 FUZZ_SEED=<this commit's> FUZZ_FEATURES=all FUZZ_JOBS=2)
	$(PY) -m tests.differential --cases $${FUZZ_CASES:-20000} $${FUZZ_SEED:+--seed $$FUZZ_SEED} --features $${FUZZ_FEATURES:-all} --jobs $${FUZZ_JOBS:-2}

.PHONY: fuzz-api
fuzz-api: install cluster-build ## generated RayClusters and RayResourceRequests on a real API server, rayscale running (FUZZ_EXAMPLES=400 FUZZ_SEED=0)
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-400} FUZZ_SEED=$${FUZZ_SEED:-0} $(PY) -m pytest tests/integration/controller/test_fuzz_specs.py -q -m integration

.PHONY: browser
browser: ## headless Chromium for the status page's browser test (apt-get install chromium when absent, as root)
	@command -v chromium >/dev/null || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
		{ DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || \
		  { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }; }; } || \
		echo "browser: no chromium (apt-get install chromium): the status page's browser test is skipped"

# The integration stage's pytest workers (pytest-xdist), each with a local control plane of its own:
# a test file's tests on one worker, the tests that start Ray nodes all on one (--dist loadgroup,
# the groups: tests/support/xdist_groups.py); 0: no workers, one process (as with a cluster
# RAYSCALE_TARGET_KUBECONFIG names, which the workers would share). See docs/development.md.
INTEGRATION_JOBS ?= $(if $(RAYSCALE_TARGET_KUBECONFIG),0,3)

.PHONY: integration
integration: install cluster-build browser ## integration tests and the e2e smoke scenarios on the local control plane, INTEGRATION_JOBS=3 workers (never $KUBECONFIG's cluster; RAYSCALE_TARGET_KUBECONFIG=FILE names another); Kueue's and the gang scheduler's have their own targets (kueue-test, gang-test)
	$(PY) -m pytest tests/integration e2e -q -m "integration or e2e_smoke" -n $(INTEGRATION_JOBS) --dist loadgroup --durations=25 \
		--ignore=tests/integration/kueue --ignore=tests/integration/gang

.PHONY: e2e
e2e: install cluster-build browser ## every end-to-end scenario with a real Ray (about 11 min), then their timings into docs/benchmarks.md
	rm -rf e2e/.results
	$(PY) -m pytest e2e -q -m e2e
	$(PY) -m e2e.report --write-docs

.PHONY: chaos
chaos: install cluster-build ## the fault suite: control-plane and Ray faults while clusters scale, invariants checked throughout (CHAOS_RUNS=3; about 35 min), then its table into docs/reliability.md
	rm -rf e2e/.results/chaos
	@command -v redis-server >/dev/null || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
		apt-get install -y -q redis-server >/dev/null; } || \
		echo "chaos: no redis-server (apt-get install redis-server): the GCS fault tolerance test is skipped"
	status=0; \
	$(PY) -m e2e.chaos.controlplane || status=1; \
	$(PY) -m pytest e2e/chaos -q -m chaos || status=1; \
	$(PY) -m e2e.chaos.results --write-docs || status=1; \
	exit $$status

# the soak's length and size, e.g. make soak SOAK_MINUTES=4 SOAK_CLUSTERS=8
SOAK_MINUTES ?= 30
SOAK_CLUSTERS ?= 20

.PHONY: soak
soak: install cluster-build ## a bounded long run off CI (SOAK_MINUTES=30, SOAK_CLUSTERS=20): edits, suspends, deletes and control-plane faults at random, invariants, RSS and fds checked; figures into docs/reliability.md
	$(PY) -m e2e.chaos.soak --minutes $(SOAK_MINUTES) --clusters $(SOAK_CLUSTERS) --write-docs

.PHONY: e2e-smoke
e2e-smoke: install cluster-build browser ## the end-to-end scenarios `make test` runs
	$(PY) -m pytest e2e -q -m e2e_smoke

# What `make test` builds, side by side (make -j): the virtualenv, the control plane's binaries with Helm
# (one `go build`), KubeRay's oracle then its operator, Chromium. Their downloads, links and installs overlap the others'
# compiles; on 2 cores the compiles share the CPU. Each script builds once per version into
# ~/.cache/rayscale (a lock per cache), so a later `make` of one of them only finds it.
.PHONY: builds
builds: ## build (or reuse) everything `make test` needs, side by side
	@$(MAKE) --no-print-directory -j4 --output-sync=line install cluster-build kuberay-operator browser

.PHONY: test
test: builds check differential kuberay-diff integration ## everything CI runs

.PHONY: kueue
kueue: ## build (or reuse) Kueue's manager (sigs.k8s.io/kueue v0.17.0, cmd/kueue) with its CRDs and webhook manifests in ~/.cache/rayscale, for tests/integration/kueue (about 7 minutes the first time on 2 cores)
	@hack/kueue/build.sh >/dev/null

.PHONY: kueue-test
kueue-test: install cluster-build kueue ## Kueue's own Ray cases with Kueue's real manager beside rayscale on the local control plane (about 2 minutes)
	$(PY) -m pytest tests/integration/kueue -q -m integration

.PHONY: gang-test
gang-test: install cluster-build gang-build ## the gang scheduler's tests: a gang held until all of it fits, a RayCluster's PodGroup under it (about 4 minutes)
	$(PY) -m pytest tests/integration/gang -q -m integration

.PHONY: gang-build
gang-build: ## build (or reuse) the gang scheduler (scheduler-plugins' Coscheduling, hack/gang) in ~/.cache/rayscale
	@hack/gang/build.sh >/dev/null

.PHONY: gang-up
gang-up: install cluster-build gang-build ## the gang scheduler beside make cluster-up's control plane (started if need be) until Ctrl-C
	$(PY) -m hack.gang

.PHONY: cluster-build
cluster-build: ## build (or reuse) the control-plane binaries and Helm in ~/.cache/rayscale
	@hack/localk8s/build.sh >/dev/null

.PHONY: cluster-up
cluster-up: install cluster-build ## start the local control plane (etcd, apiserver, scheduler, controller-manager, kwok)
	@$(PY) -m $(LOCALK8S) up --dir $(CLUSTER_DIR) $(foreach s,$(SCALE),--scale $(s))

.PHONY: cluster-down
cluster-down: ## stop the local control plane and remove its state
	@$(PYTHON) -m $(LOCALK8S) down --dir $(CLUSTER_DIR)

.PHONY: demo
demo: install cluster-build ## local control plane (RAYSCALE_TARGET_KUBECONFIG=FILE for another cluster; never $KUBECONFIG's), rayscale, a real Ray program: a RayCluster growing and shrinking (about 1 min)
	@$(PY) -m e2e.demo --dir $(CLUSTER_DIR)

.PHONY: clean
clean: ## remove build and test leftovers (not the binary cache)
	rm -rf .mypy_cache .ruff_cache .pytest_cache build dist

.PHONY: bench
bench: install ## scheduler vs Ray 2.60 (installs Ray into its own venv on first use; takes minutes)
	$(PY) -m bench.scheduler_vs_ray --write-docs

.PHONY: bench-operator
bench-operator: install cluster-build ## the controller on the local control plane: 0 -> 100 workers, 50 clusters at once
	$(PY) -m bench.operator_scale --write-docs

.PHONY: bench-fleet
bench-fleet: install cluster-build ## one operator, 1,000 RayClusters / 10,000 pods on the local control plane: times and RSS (takes minutes)
	$(PY) -m bench.operator_fleet --write-docs

.PHONY: bench-autoscaler
bench-autoscaler: install cluster-build ## the autoscaler on the local control plane: RayResourceRequest -> patched replicas -> Running pods
	$(PY) -m bench.autoscaler_reaction --write-docs

.PHONY: bench-autoscaler-fleet
bench-autoscaler-fleet: install cluster-build ## one operator autoscaling 100 and 1,000 RayClusters whose demand changes, beside Ray's autoscaler sidecar on a real Ray head: demand to patch, CPU and RSS per cluster (about 40 min)
	$(PY) -m bench.autoscaler_fleet --write-docs $(FLEET_ARGS)

.PHONY: bench-vs-kuberay
bench-vs-kuberay: install cluster-build kuberay-operator ## the controller beside KubeRay's own operator (its defaults; rayscale's settings): scale-up, 50 and 1,000 clusters, head of line, scale-down, CPU, RSS (about an hour; VS_ARGS="--reps 2 --cases ..." for less)
	$(PY) -m bench.vs_kuberay --write-docs $(VS_ARGS)

.PHONY: bench-rayjob-fleet
bench-rayjob-fleet: install cluster-build kuberay-operator ## 1,000 RayJobs on one operator, rayscale beside KubeRay's operator: job-status lag, dashboard calls, CPU, RSS (Ray faked; about 30 min; RAYJOB_ARGS="--jobs 100 --reps 1" for less)
	$(PY) -m bench.rayjob_fleet --write-docs $(RAYJOB_ARGS)

.PHONY: bench-rayjob-first-task
bench-rayjob-first-task: install cluster-build kuberay-operator ## one RayJob from apply to its first task running, rayscale beside KubeRay's operator with Ray's sidecar (real Ray; 5 reps, about 15 min; FIRST_TASK_ARGS="--reps 3" for fewer)
	$(PY) -m bench.rayjob_first_task --write-docs $(FIRST_TASK_ARGS)

# ---- Ray GCS protobuf bindings (operator/rayscale/ray/protos; generated, git-ignored) ----
RAY_PROTOS := operator/rayscale/ray/protos
RAY_PROTO_STAMP := $(RAY_PROTOS)/.generated

$(RAY_PROTO_STAMP): $(VENV)/.installed $(wildcard $(RAY_PROTOS)/*.proto) $(RAY_PROTOS)/generate.py
	$(PY) $(RAY_PROTOS)/generate.py
	@touch $@

.PHONY: proto
proto: $(RAY_PROTO_STAMP) ## generate the Python bindings of the Ray GCS protos (grpcio-tools)

install: proto

.PHONY: helm
helm: ## build (or reuse) Helm, with the control plane's binaries, in ~/.cache/rayscale and print its path
	@e2e/tools/helm.sh

.PHONY: crds
crds: install ## regenerate crds/ and the chart's copy from the API models
	$(VENV)/bin/rayscale crds --output-dir crds
	$(VENV)/bin/rayscale crds --output-dir charts/rayscale/crds

.PHONY: ci-timings
ci-timings: ## make test's stages and make demo timed one by one in a fresh clone (CI_ARGS=--fresh-caches: every cache empty), then their table into docs/development.md
	$(PYTHON) -m bench.ci_stages --write-docs $(CI_ARGS)
