# The CPU build of torch is pinned here; a GPU user overrides it: make setup TORCH_SPEC="torch==2.13.0"
TORCH_SPEC ?= torch==2.13.0
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup test test-numerics lint bench gpu-check clean

$(BIN)/nanobench: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet $(TORCH_SPEC)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

setup: $(BIN)/nanobench

test: setup
	$(BIN)/python -m pytest

# The tests that compare floats computed two ways; CI runs them again under torch's plain
# kernels and one thread (ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1), the summation orders
# another CPU model would take.
NUMERIC_TESTS := tests/test_engine_parity.py tests/test_padding.py tests/test_captured.py \
	tests/test_packed.py tests/test_triton_decode.py tests/test_triton_engine.py \
	tests/test_invariants.py tests/test_compiled_decode.py

test-numerics: setup
	$(BIN)/python -m pytest $(NUMERIC_TESTS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: setup
	$(BIN)/nanobench compile

gpu-check: setup
	$(BIN)/python -m nanobench.gpu_check

clean:
	rm -rf $(VENV) nanobench-out
