# dnnplan: set-up, demo and tests. Everything installs itself into .venv on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
ONNX2TF_VERSION := 1.29.24
export TF_CPP_MIN_LOG_LEVEL := 3
export PYTHONHASHSEED := 0

.PHONY: install demo test lint fixtures bench clean help

help:
	@echo "make demo   - run the whole mission on embedded defaults into results/demo/"
	@echo "make test   - install if needed, then lint (ruff, mypy) and run the test suite"
	@echo "make bench  - run the benchmarks (figures recorded in BENCHMARKS.md); BENCH=a,b picks some"

install: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	@test -n "$(PYTHON)" && $(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' || { echo "error: Python 3.11+ not found; install it or run 'make PYTHON=/path/to/python3.11'" >&2; exit 2; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	# ONNX -> TensorFlow converter for 'dnnplan quantize MODEL.onnx': it pins TensorFlow 2.19, so it
	# is installed without its pins; its runtime dependencies are in setup.cfg (tf-keras, onnx-graphsurgeon, sng4onnx, sne4onnx)
	$(PY) -m pip install --quiet --no-deps 'onnx2tf==$(ONNX2TF_VERSION)'
	touch $(STAMP)

DNNPLAN := $(VENV)/bin/dnnplan
DEMO    := results/demo
MODEL   := mobilenet_v2
TRACE   ?= search_spaces/thermal/traces/odroid_xu3_rise.csv.gz

demo: install
	@mkdir -p $(DEMO)
	@echo "== 1. profile the default network ($(MODEL)) =="
	$(DNNPLAN) profile $(MODEL) --granularity block --out $(DEMO)/profile_block.json
	$(DNNPLAN) --quiet profile $(MODEL) --out $(DEMO)/profile_op.json
	@echo "== 2. quantize it to INT8 (TFLite PTQ, per-channel) =="
	$(DNNPLAN) quantize $(MODEL) --out $(DEMO)/$(MODEL)_int8.tflite --report $(DEMO)/quantize_report.json
	@echo "== 3. map it onto pixel6 as an INT8 pipeline (GA vs exact optimum and baselines) =="
	$(DNNPLAN) map $(MODEL) --device pixel6 --dtype int8 --out $(DEMO)/map_plan.json
	@echo "== 4. split it between galaxy_j6 and a server over 10 Mbps Wi-Fi (NSGA-II + TOPSIS) =="
	$(DNNPLAN) split $(MODEL) --device galaxy_j6 --network wifi_10 --out $(DEMO)/split_plan.json --front $(DEMO)/split_front.csv
	@echo "== 4b. FP32 over a real LTE uplink trace: CVaR-0.95 of latency as a 4th objective; then memory as a budget and expected latency within +5% of the least =="
	$(DNNPLAN) split $(MODEL) --device galaxy_j6 --network lte --dtype fp32 --bandwidth-trace Verizon-LTE-short --risk cvar95 --solver exact --out $(DEMO)/split_trace_plan.json
	$(DNNPLAN) split $(MODEL) --device galaxy_j6 --network lte --dtype fp32 --bandwidth-trace Verizon-LTE-short --risk cvar95 --memory-budget 512MB --max-mean-increase 5% --solver exact --out $(DEMO)/split_robust_plan.json
	@echo "== 5. deploy: export stage and split artifacts, run them on this host (split over loopback TCP) =="
	$(DNNPLAN) export $(DEMO)/map_plan.json --out $(DEMO)/map_artifacts --samples 32
	$(DNNPLAN) run $(DEMO)/map_plan.json --artifacts $(DEMO)/map_artifacts --frames 50
	$(DNNPLAN) export $(DEMO)/split_plan.json --out $(DEMO)/split_artifacts --samples 32
	$(DNNPLAN) run $(DEMO)/split_plan.json --artifacts $(DEMO)/split_artifacts --frames 30 --bandwidth 10Mbps
	@echo "== 6. thermal: fit a model to the real Odroid-XU3 trace; thermal-aware policies on pixel4 / jetson_nano =="
	$(DNNPLAN) thermal fit $(TRACE) --time t_s --temps 't_a15_core*_c,t_gpu_c' --inputs 'p_*_w' --train-from 600 --out $(DEMO)/thermal_model.json
	$(DNNPLAN) thermal eval $(DEMO)/thermal_model.json $(TRACE) --horizons 1,600 --to 600
	$(DNNPLAN) thermal fit $(TRACE) --time t_s --temps 't_a15_core*_c,t_gpu_c' --inputs 'p_*_w' --train-from 600 --model rc --out $(DEMO)/thermal_model_rc.json
	$(DNNPLAN) thermal eval $(DEMO)/thermal_model_rc.json $(TRACE) --horizons 1,600 --to 600
	$(DNNPLAN) schedule person_finder --device pixel4 --network wifi_249 --policy minheat --fps 20 --duration 600
	$(DNNPLAN) tadf alexnet --device jetson_nano --ambient 40
	$(DNNPLAN) shift slimmable_resnet50 --device pixel4 --duration 1800
	@echo "== 7. a small batch job: both searches on two devices, resumable store =="
	$(DNNPLAN) batch run search_spaces/jobs/demo.yaml --out $(DEMO)/batch
	$(DNNPLAN) batch collect $(DEMO)/batch --out $(DEMO)/batch_table.csv
	$(DNNPLAN) batch report $(DEMO)/batch
	@echo "== 8. report: figures and tables of the plans, the front and the batch run =="
	$(DNNPLAN) report $(DEMO)/split_plan.json $(DEMO)/split_front.csv $(DEMO)/split_trace_plan.json $(DEMO)/split_robust_plan.json $(DEMO)/map_plan.json $(DEMO)/batch --out $(DEMO) --title "dnnplan demo: $(MODEL)"
	@echo "demo outputs in $(DEMO)/"

# pytest-xdist workers: one test module per worker at a time (--dist loadfile), so a module's
# fixtures (a quantized model, an export) are built once; TEST_WORKERS=0 runs in one process
TEST_WORKERS ?= 2

test: install lint
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

lint: install
	$(PY) -m ruff check optimizer tests benchmarks models
	$(PY) -m mypy

fixtures: install
	$(PY) tests/third_party/fetch_models.py

bench: install
	$(PY) benchmarks/run_all.py $(if $(BENCH),--only $(BENCH))

clean:
	rm -rf results/demo .pytest_cache
