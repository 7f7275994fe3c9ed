# dnnplan: set-up, demo and tests. Everything installs itself into .venv on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL := 3
export PYTHONHASHSEED := 0

.PHONY: install demo test bench clean help

help:
	@echo "make demo   - run the whole mission on embedded defaults into results/demo/"
	@echo "make test   - install if needed, then run the test suite"
	@echo "make bench  - run the benchmarks (figures recorded in BENCHMARKS.md)"

install: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	@test -n "$(PYTHON)" && $(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' || { echo "error: Python 3.11+ not found; install it or run 'make PYTHON=/path/to/python3.11'" >&2; exit 2; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

DNNPLAN := $(VENV)/bin/dnnplan
DEMO    := results/demo
MODEL   := mobilenet_v2

demo: install
	@mkdir -p $(DEMO)
	@echo "== 1. profile the default network ($(MODEL)) =="
	$(DNNPLAN) profile $(MODEL) --granularity block --out $(DEMO)/profile_block.json
	$(DNNPLAN) profile $(MODEL) --quiet --out $(DEMO)/profile_op.json
	@echo "demo outputs in $(DEMO)/"

test: install
	$(PY) -m pytest -q

bench: install
	$(PY) benchmarks/run_all.py

clean:
	rm -rf results/demo .pytest_cache
