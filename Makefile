# The two set-up commands: `make demo` (the main job) and `make test`. Each creates .venv with a
# Python >= 3.12 when missing and installs what it needs; the first install compiles llama.cpp
# (about 15 minutes on 2 cores; pip's cache keeps the wheel for next time).
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc 2>/dev/null || echo 2)
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test install clean

demo: $(STAMP)
	$(BIN)/infertap demo

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

install: $(STAMP)

$(BIN)/python:
	@py=$$(scripts/find-python) && echo "creating $(VENV) with $$py" && $$py -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e '.[dev,engine]'
	touch $(STAMP)

clean:
	rm -rf $(VENV) .pytest_cache
