# fleetprobe: every entry point a researcher needs. Each target sets up what it needs
# (a local .venv with the locked versions installed) and is safe to run again.

PYTHON      ?= python3
VENV        := .venv
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.installed
LOCK        := requirements.lock
PLAN        ?= params/reproduce.yaml
PG_STAMP    := $(VENV)/.installed-pg
PROFILE     ?= memclaw-2026-05-30
PORT        ?= 8765
LAB_PORT    ?= 8888
# JOBS: runs side by side (default: from the core count); TEST_JOBS: pytest workers
# (default auto; TEST_JOBS=1 for one process).
JOBS        ?=
TEST_JOBS   ?= auto
# nbval is a plugin only `make nbval` uses; loading it imports nbformat's schema checker,
# about 1.5 s in each pytest process (the xdist controller and every worker).
XDIST        = -p no:nbval $(if $(filter 1,$(TEST_JOBS)),,-n $(TEST_JOBS) --dist loadscope)
EXPERIMENTS := leakage contradiction provenance propagation
# every experiment notebook executed into reports/ (make notebooks) and checked (make nbval)
NOTEBOOKS   := $(EXPERIMENTS) matrix separation faults dynamics backends
NOTEBOOK    := $(PY) -m fleetprobe.base.notebooks
# quiet installs: no pip progress, no setuptools editable-install banner
PIP         := PYTHONWARNINGS=ignore $(PY) -m pip -q
export MPLBACKEND := Agg

.PHONY: help setup bytecode test test-slow lint contracts reproduce reproduce-fast report notebooks promote server lab \
        batch benchmarks nbval lock dynamics docker-build docker-test clean server-pg test-pg scale10x \
        $(EXPERIMENTS:%=run-%)

help:
	@echo "make reproduce       every run of $(PLAN) at the paper's rate limits into"
	@echo "                     data/reproductions/<UTC>-reproduce/, then notebooks and report"
	@echo "                     from those runs (rerun: resumes, redoing only missing/failed runs)"
	@echo "make reproduce-fast  the paper's runs at paper scale, rate limits lifted (iterating)"
	@echo "make reproduce-dask  the same on Dask: a local cluster, or DASK_ADDRESS=tcp://HOST:8786"
	@echo "                     (plans may sweep seeds and params; docs/sweeps.md)"
	@echo "make report          tables, figures, REPRODUCTION.md from data/traces (no server)"
	@echo "make notebooks       the executed experiment notebooks from data/traces"
	@echo "make promote R=DIR   make a reproduction the committed canonical runs, then rebuild"
	@echo "make test            lint + import contracts + the test suite (starts the reference"
	@echo "                     server itself)"
	@echo "make test-slow       what make test leaves out for speed: profile sweeps, the full"
	@echo "                     fuzz budget, every experiment notebook on fresh smoke runs"
	@echo "make nbval           committed executed notebooks == what the committed traces give"
	@echo "make server          reference server on 127.0.0.1:$(PORT) (PROFILE=...); API docs"
	@echo "                     at http://127.0.0.1:$(PORT)/api/docs"
	@echo "make lab             JupyterLab on notebooks/ at 127.0.0.1:$(LAB_PORT)"
	@echo "make lock            refresh $(LOCK) from pyproject.toml"
	@echo "make benchmarks      server and harness benchmarks (print figures)"
	@echo "make bench-sweep     a 20-run seed sweep: serial vs a 2-worker local Dask cluster"
	@echo "make bench-bulk      a 977 KB bulk write alone and four at once, beside another tenant"
	@echo "make server-pg       reference server on an embedded PostgreSQL + pgvector (.pgdata/)"
	@echo "make test-pg         the server tests and the storage conformance suite on PostgreSQL"
	@echo "make test-hostile    hostile input on SQLite and PostgreSQL, no request over 2 s"
	@echo "make test-browser    reports/index.html in headless Chromium (installs chromium, playwright)"
	@echo "make engine          MemClaw's open-source engine on loopback (ENGINE_SRC=checkout|archive,"
	@echo "                     ENGINE_CMD=up|status|down); docs/engine.md"
	@echo "make test-engine     the engine tier: starts v2.29.0 and the paper's May commits, runs"
	@echo "                     leakage against each"
	@echo "make backends        LangGraph, mem0, CrewAI behind the wire adapter, each from its own"
	@echo "                     locked venv: params/backends.yaml into data/reproductions/ (docs/backends.md)"
	@echo "make backends-smoke  the adapters' smokes and wire tests (CI)"
	@echo "make dynamics        governance over time under every profile and a backend:"
	@echo "                     params/dynamics.yaml into data/reproductions/ (docs/dynamics.md)"

# Installs exactly the versions in the lock (with hashes), then the kit itself without deps.
$(STAMP): pyproject.toml $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install --require-hashes -r $(LOCK)
	$(PIP) install --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 > /dev/null
	touch $(STAMP)

setup: bytecode

# Some machines set PYTHONDONTWRITEBYTECODE: then no .pyc of the kit's own modules is ever
# written, and every process compiles them again from source (about 0.4 s each: the kernel,
# the report's section workers, every pytest worker). compileall writes the missing or
# stale ones (gitignored __pycache__/), and costs 0.04 s when none is.
bytecode: $(STAMP)
	@$(PY) -m compileall -q lib reference_server

# pip-compile from pyproject.toml (runtime + dev, no other extras). Cheap to rerun after a
# merge changes the dependencies; extras (e.g. docker) are installed on demand, unlocked.
lock:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install pip-tools
	$(VENV)/bin/pip-compile -q --generate-hashes --strip-extras --extra dev \
	    --no-emit-index-url --no-emit-find-links -o $(LOCK) pyproject.toml
	PYTHONPATH=lib $(PY) -m fleetprobe.base.lockfile environment

lint: $(STAMP)
	$(PY) -m ruff check lib reference_server tests benchmarks

# The import contracts in .importlinter: each layer of reference_server and of fleetprobe uses
# only those below it, and no package has an import cycle (lazy imports included).
contracts: $(STAMP)
	$(VENV)/bin/lint-imports --no-cache

test: lint contracts bytecode
	$(PY) -m pytest -q -m "not slow and not engine" $(XDIST)

# The checks `make test` leaves out for speed (profile sweeps, the fuzz's full budget, every
# experiment notebook on fresh smoke runs); CI runs them right after `make test`.
test-slow: bytecode
	$(PY) -m pytest -q -m slow $(XDIST)

reproduce: bytecode
	$(PY) -m fleetprobe reproduce $(PLAN) $(if $(JOBS),--jobs $(JOBS))

reproduce-fast: bytecode
	$(PY) -m fleetprobe reproduce $(PLAN) --fast $(if $(JOBS),--jobs $(JOBS))

# The traces' database is loaded (or found in the cache) by a process of its own while the
# notebook's kernel starts; the build in the kernel waits for it and opens it.
# Executes the report notebook, whose build remakes only the sections whose inputs changed;
# starts no kernel when the executed notebook and every report file are current.
report: bytecode
	@$(PY) -m fleetprobe.analysis.build notebooks/report.ipynb reports/report.ipynb \
	    -p traces_root data/traces -p out_dir reports

notebooks: bytecode
	$(PY) -m fleetprobe.reproduction notebooks data/traces reports

promote: $(STAMP)
	@test -n "$(R)" || { echo "usage: make promote R=data/reproductions/<id>"; exit 2; }
	$(PY) -m fleetprobe promote $(R)
	$(MAKE) --no-print-directory notebooks report

# One experiment notebook that runs its experiment (smoke scale unless PARAMS=params/reference).
PARAMS ?= params/smoke
$(EXPERIMENTS:%=run-%): run-%: bytecode
	$(NOTEBOOK) notebooks/$*.ipynb reports/$*.ipynb -p params_file $(PARAMS)/$*.yaml

# Issue 38: a plan's runs as Dask tasks (docs/sweeps.md): a LocalCluster of one worker process
# per core (WORKERS=N), or the scheduler at DASK_ADDRESS. Same reproduction folder, record and
# resume as `make reproduce`, which never imports Dask.
DASK_ADDRESS ?=
WORKERS      ?=
.PHONY: reproduce-dask bench-sweep
reproduce-dask: bytecode
	$(PY) -m fleetprobe reproduce $(PLAN) --executor dask $(if $(DASK_ADDRESS),--address \
	    $(DASK_ADDRESS)) $(if $(WORKERS),--workers $(WORKERS)) $(if $(JOBS),--jobs $(JOBS))

# a 20-run seed sweep serially and on a 2-worker local cluster: ratio and coordination cost
bench-sweep: $(STAMP)
	$(PY) benchmarks/bench_sweep.py $(BENCH_ARGS)

batch: bytecode
	$(PY) -m fleetprobe batch $(PLAN) $(if $(JOBS),--jobs $(JOBS))

# Re-executes the committed executed notebooks on the committed traces and compares outputs
# (volatile output masked by .ci/nbval-sanitize.cfg).
nbval: bytecode
	$(PY) -m pytest -q -p no:cacheprovider --nbval --nbval-sanitize-with .ci/nbval-sanitize.cfg \
	    $(NOTEBOOKS:%=reports/%.ipynb) reports/report.ipynb

server: bytecode
	@echo "API docs: http://127.0.0.1:$(PORT)/api/docs"
	$(PY) -m reference_server --profile $(PROFILE) --host 127.0.0.1 --port $(PORT) --db reference.db

lab: $(STAMP)
	@echo "JupyterLab: http://127.0.0.1:$(LAB_PORT)/lab (the token is in the URL printed below)"
	$(VENV)/bin/jupyter lab notebooks/ --ip 127.0.0.1 --port $(LAB_PORT) --no-browser \
	    $(if $(filter 0,$(shell id -u)),--allow-root)

benchmarks: $(PG_STAMP)
	$(PY) benchmarks/bench_server.py $(BENCH_ARGS)
	$(PY) benchmarks/bench_recall.py
	$(PY) benchmarks/bench_client.py

docker-build:
	@docker info > /dev/null 2>&1 || { echo "No Docker engine answers here; skipping the image build."; exit 0; }; \
	docker build -f reference_server/Dockerfile -t fleetprobe-reference .

# Builds the image and runs the container tests, when an engine answers; says so otherwise.
docker-test: $(STAMP)
	@docker info > /dev/null 2>&1 || { echo "docker-test: no Docker engine answers here; skipped."; exit 0; }; \
	$(PIP) install 'docker>=7.0' && $(PY) -m pytest -q -m docker tests/server/test_docker.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache reference.db

# --- #15: live targets, embedder ablation ---------------------------------------------------
# The semantic embedder (optional `embed` extra: all-MiniLM-L6-v2 shipped in a package, CPU
# torch pinned, loaded offline) and its small test; `embed-ablation` runs the plan whose
# runs the report's embedder section compares with the hashing-embedder runs.
.PHONY: test-embed embed-ablation
test-embed: $(STAMP)
	$(PY) -m pip install --quiet -e '.[embed]'
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q tests/embed

embed-ablation: $(STAMP)
	$(PY) -m pip install --quiet -e '.[embed]'
	HF_HUB_OFFLINE=1 $(PY) -m fleetprobe batch params/embed-ablation.yaml

# Reviewer view (issue 8): reports/index.html in a real headless Chromium. Installs Debian's
# chromium when /usr/bin/chromium is missing and Playwright's Python package (which drives
# that binary; no `playwright install`), then runs the tests marked `browser`.
.PHONY: test-browser
test-browser: $(STAMP)
	@test -x /usr/bin/chromium || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }
	$(PY) -m pip install --quiet playwright
	FLEETPROBE_REQUIRE_BROWSER=1 $(PY) -m pytest -q -m browser tests/browser

# Faults (issue 12): the workloads under injected faults and kill -9, judged by the history
# checkers. `faults-smoke`: one tiny run. `faults`: params/reference/faults.yaml under every
# governed profile the server defines, one after the other (each kills its own server).
GOVERNED = $(shell $(PY) -c "from reference_server.governance.profiles import PROFILES; \
	print(' '.join(n for n, p in PROFILES.items() if p.governed))" 2>/dev/null)
.PHONY: faults faults-smoke
faults-smoke: $(STAMP)
	$(PY) -m fleetprobe run faults --params params/smoke/faults.yaml
faults: $(STAMP)
	@for profile in $(GOVERNED); do \
		$(PY) -m fleetprobe run faults --params params/reference/faults.yaml \
			--set target.profile=$$profile || exit 1; \
	done

# --- Other memory backends (issues 11, 23): LangGraph store, mem0, CrewAI Memory behind the
# wire adapter (lib/fleetprobe/backends, docs/backends.md). Each backend (and each version set
# of a sweep) runs from its own venv built from its own lock (lib/fleetprobe/backends/locks/,
# uv), cached in ~/.cache/fleetprobe/backends/: nothing is installed into .venv.
# `backends` runs params/backends.yaml into a reproduction directory (promote it like
# `make reproduce`: make promote R=data/reproductions/<id>); its report goes to $(BACKENDS_OUT),
# not reports/. `backends-smoke` is each adapter's smoke test (CI). `backend-locks` recompiles
# the locks from their specs (check the diff).
BACKENDS_OUT ?= data/reproductions/backends-report

.PHONY: backends backends-smoke backend-envs backend-locks
backend-envs: $(STAMP)
	$(PY) -m fleetprobe.backends.envs build

backend-locks: $(STAMP)
	$(PY) -m fleetprobe.backends.envs lock

backends: backend-envs
	$(PY) -m fleetprobe reproduce params/backends.yaml --jobs $(or $(JOBS),3) --out $(BACKENDS_OUT)

# the environments the smoke starts adapters from (the CrewAI sweep's are left to `backends`)
SMOKE_ENVS := langgraph langgraph-ckpt-3.1.0 langgraph-ckpt-3.1.1 mem0 mem0-1.0.11 crewai
SMOKE_ENVS += graphiti
SMOKE_ENVS += cognee
backends-smoke: $(STAMP)
	$(PY) -m fleetprobe.backends.envs build $(SMOKE_ENVS)
	FLEETPROBE_BACKENDS=1 $(PY) -m pytest -q -p no:cacheprovider tests/backends -s

# --- #9: governance matrix ------------------------------------------------------------------
# Beyond the paper: its notebook on $(PARAMS)/matrix.yaml for one
# profile (PROFILE=hardened make run-matrix); the plan for every profile is params/extended.yaml.
.PHONY: run-matrix bench-matrix bench-report bench-dynamics
run-matrix: $(STAMP)
	@mkdir -p reports
	$(NOTEBOOK) notebooks/matrix.ipynb reports/matrix.ipynb -p params_file $(PARAMS)/matrix.yaml \
		-p overrides '["target.profile=$(PROFILE)"]'

bench-matrix: $(STAMP)
	$(PY) benchmarks/bench_matrix.py

# the dynamics reference plan's speed (issue 24: <= 180 s on 2 cores)
bench-dynamics: $(STAMP)
	$(PY) benchmarks/bench_dynamics.py

# `make report` timed several times (median, with the machine's load average beside it)
bench-report: $(STAMP)
	$(PY) benchmarks/bench_report.py

# Issue 25: one 977 KB bulk write (median of 5), four at once, and another tenant's p50/p99
# for GET, search and write meanwhile (BENCH_ARGS: e.g. --backend postgres, --json FILE).
.PHONY: bench-bulk
bench-bulk: $(STAMP)
	$(PY) benchmarks/bench_bulk.py $(BENCH_ARGS)

# Runs beyond the paper's (matrix, faults): one reproduction of params/extended.yaml into
# data/reproductions/; `make promote R=...` makes it the committed evidence of that plan.
.PHONY: extended
extended: $(STAMP)
	$(PY) -m fleetprobe reproduce params/extended.yaml $(if $(JOBS),--jobs $(JOBS))

# governance over time (issue 24) under every bundled profile and a backend: a reproduction
# directory, promoted like the others (docs/dynamics.md)
dynamics: $(STAMP)
	$(PY) -m fleetprobe reproduce params/dynamics.yaml $(if $(JOBS),--jobs $(JOBS))

# --- Scale (issue 13): PostgreSQL + pgvector storage, embedded server from a wheel --------
# BENCH_ARGS=--million adds 1M stored memories to `make benchmarks` (long: index build).
$(PG_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,pg]'
	touch $(PG_STAMP)

server-pg: $(PG_STAMP)
	$(PY) -m reference_server.embedded_pg --data .pgdata -- --profile $(PROFILE) \
		--host 127.0.0.1 --port $(PORT)

# Every server test (HTTP, against real servers) with PostgreSQL storage, plus the storage
# conformance suite on both backends.
test-pg: $(PG_STAMP)
	FLEETPROBE_DB=postgres $(PY) -m pytest -q tests/server

# Issue 25: the hostile-input, list-filter and connection-limit suites with no request over
# 2 s, one test at a time, on SQLite and then on PostgreSQL (CI runs it after make test-pg).
HOSTILE_SUITES := tests/server/test_hostile_input.py tests/server/test_list_filters.py \
                  tests/server/test_connection_limits.py
.PHONY: test-hostile
test-hostile: $(PG_STAMP)
	FLEETPROBE_HOSTILE_LIMIT_S=2 $(PY) -m pytest -q -p no:nbval $(HOSTILE_SUITES)
	FLEETPROBE_HOSTILE_LIMIT_S=2 FLEETPROBE_DB=postgres $(PY) -m pytest -q -p no:nbval \
	    $(HOSTILE_SUITES)

# Leakage and propagation at 10x the paper's population on PostgreSQL (long: see params).
scale10x: $(PG_STAMP)
	$(PY) -m fleetprobe batch params/scale10x/plan.yaml

# --- #21: MemClaw's open-source engine as a target (lib/fleetprobe/engine, docs/engine.md) ----
# ENGINE_SRC: a caura-ai/caura checkout or source archive (e2d805e, 045039f or b65ecbe); default
# FLEETPROBE_ENGINE_SRC, else v2.29.0's archive in ../shared/engines when present. Built once
# into ~/.cache/fleetprobe/engine/<commit>/ (needs a Python >= 3.12 on the machine).
ENGINE_SRC ?= $(or $(FLEETPROBE_ENGINE_SRC),$(firstword $(wildcard ../shared/engines/caura-v2.29.0-*.tar.gz)))
ENGINE_CMD ?= up
.PHONY: engine test-engine
engine: $(PG_STAMP)
	$(PY) -m fleetprobe engine $(ENGINE_CMD) $(if $(ENGINE_SRC),--src $(ENGINE_SRC))

# Starts the engine from ENGINE_SRC (v2.29.0; cold build on a fresh machine), checks status
# and version, runs leakage against it through the CLI, stops it (and any instance of the
# same commit you started with `make engine`); then the two May commits of the paper's day
# from ../shared/engines, side by side (tests/engine/test_engine_may.py). Not in `make test`.
test-engine: $(PG_STAMP)
	$(if $(ENGINE_SRC),FLEETPROBE_ENGINE_SRC=$(abspath $(ENGINE_SRC))) \
	    $(PY) -m pytest -q -s -p no:nbval -p no:cacheprovider -m engine tests/engine
