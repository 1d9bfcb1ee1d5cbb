# fleetprobe: every entry point a researcher needs. Each target sets up what it needs
# (a local .venv with the package installed) and is safe to run again.

PYTHON      ?= python3
VENV        := .venv
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.installed
PARAMS      ?= params/reference
PROFILE     ?= memclaw-2026-05-30
PORT        ?= 8765
EXPERIMENTS := leakage contradiction provenance propagation
PAPERMILL   := $(PY) -m papermill --log-level WARNING --no-progress-bar
export MPLBACKEND := Agg

.PHONY: help setup test lint reproduce report server lab batch benchmarks docker-build clean \
        $(EXPERIMENTS:%=run-%)

help:
	@echo "make reproduce   run the four experiments against the bundled server, then the report"
	@echo "make test        lint + the test suite (starts the reference server itself)"
	@echo "make report      tables, figures and REPRODUCTION.md from data/traces only (no server)"
	@echo "make server      reference server in the foreground on 127.0.0.1:$(PORT) (PROFILE=...)"
	@echo "make lab         JupyterLab on notebooks/"
	@echo "make batch       only the other profiles and ablations of params/reproduce.yaml"
	@echo "make benchmarks  server and harness benchmarks (print figures)"

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

benchmarks: $(STAMP)
	$(PY) benchmarks/bench_server.py
	$(PY) benchmarks/bench_client.py

docker-build:
	@docker info > /dev/null 2>&1 || { echo "No Docker engine answers here; skipping the image build."; exit 0; }; \
	docker build -f reference_server/Dockerfile -t fleetprobe-reference .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache reference.db

# Governance matrix (beyond the paper; issue 9): its notebook on $(PARAMS)/matrix.yaml for one
# profile (PROFILE=hardened make run-matrix); the plan for every profile is params/extended.yaml.
run-matrix: $(STAMP)
	@mkdir -p reports
	$(PAPERMILL) notebooks/matrix.ipynb reports/matrix.ipynb -p params_file $(PARAMS)/matrix.yaml \
		-y "overrides: [target.profile=$(PROFILE)]"

bench-matrix: $(STAMP)
	$(PY) benchmarks/bench_matrix.py
