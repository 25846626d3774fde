# tracekit: the two commands of README.md, and the benchmarks.
#   make demo   set up .venv (and Nsight Systems on Debian), profile the tiny model on the CPU, write a report
#   make test   set up .venv, check lint and types, build the docs, run the test suite
#   make docs   build the docs site into site/ (mkdocs build --strict; the tutorial runs on ../shared)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch (a local file on the project's machines). On a CUDA machine, install the
# torch you want into .venv first; pip keeps a torch that satisfies the requirement.
TORCH ?= torch==2.13.0

.PHONY: setup demo lint docs test bench clean

setup: $(BIN)/.installed

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check "$(TORCH)"
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[workloads,test,mcp]'
	touch $@

# ruff, pyright (with its own Node.js, from PyPI) and import-linter: only the test command needs them.
$(BIN)/.lint-installed: $(BIN)/.installed
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[lint]'
	touch $@

# HolisticTraceAnalysis (with Jupyter, ~1 min): the torch.profiler parity tests compare against it;
# Dask: the many-input tests run on a LocalCluster too.
$(BIN)/.parity-installed: $(BIN)/.installed
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[parity,dask]'
	touch $@

# MkDocs with Material and mkdocstrings: only the docs (and so the test command) need them.
$(BIN)/.docs-installed: $(BIN)/.installed
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[docs]'
	touch $@

demo: setup
	scripts/install-nsys.sh
	$(BIN)/tracekit capture tiny --ctx 64 --batch 4 --warmup 2 --steps 5 --name demo
	$(BIN)/tracekit report traces/demo -o reports/demo --html
	@echo "tracekit is in $(VENV): run 'source $(VENV)/bin/activate' (or call $(BIN)/tracekit); README.md has a tour"

# after the parity extra: pyright reads the same packages here and on a fresh CI machine
lint: $(BIN)/.lint-installed $(BIN)/.parity-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pyright
	# the layers and no cycles: the contracts in pyproject.toml's [tool.importlinter]
	$(BIN)/lint-imports --no-cache

docs: $(BIN)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

test: lint docs $(BIN)/.parity-installed
	scripts/install-chromium.sh
	# one hash seed for every worker: each collects the same tests (a set of names iterates alike)
	# the docs site the docs target has just built: the browser tests open it rather than build it again
	PYTHONHASHSEED=0 TRACEKIT_BUILT_SITE=$(CURDIR)/site $(BIN)/python -m pytest -q -n auto --maxprocesses 4

bench: setup
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache site
