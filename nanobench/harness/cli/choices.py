"""The names an option may take, for the commands and the code that runs them.

What it is: the fixed choices of the command line (compile modes and backends, decode systems,
devices, caches, launchers): plain tuples of strings, so the CLI can declare its options from
them without importing torch or any command. The engine's own vocabularies (dtypes, kernels,
paths) stay in `engine.config`, which is just as light.
What it is not: the options themselves (`options`) or what a mode does (each command's package).
Invariant: imports nothing; each name is defined here once.
"""

MODES = ("off", "dynamic", "static")
REDUCE_OVERHEAD = "reduce-overhead"
BACKENDS = ("inductor", "aot_eager", "eager")
# decode's default systems; vLLM's two (its eager and its default compile) run where it is
# installed (`make vllm`), so they are named, never the default
DEFAULT_SYSTEMS = (
    "engine-eager", "engine-compiled", "engine-captured", "hf-eager", "hf-static-compiled",
)  # fmt: skip
VLLM_SYSTEMS = ("vllm-eager", "vllm-compiled")
SYSTEMS = (*DEFAULT_SYSTEMS, *VLLM_SYSTEMS)
DEVICES = ("cpu", "cuda")
CACHES = ("cold", "warm")
HF_ATTENTION = ("sdpa", "eager")
LAUNCHERS = ("local", "ray")
# Columns a before/after comparison gates on (`--no-more`, `--no-slower`): counts, where fewer is
# better and a change is exact, and timings, where a change carries an interval.
COUNT_COLUMNS = (
    "graphs",
    "breaks",
    "break_sites",
    "ops",
    "guards",
    "value_guards",
    "builds",
    "recompiles",
    "fell_back",
    "shapes",
    "fx_misses",  # startup's: a start's cache answers and the shared libraries it built
    "aot_misses",
    "kernels_built",
)
TIMING_COLUMNS = ("step_ms", "speedup", "ready_s", "compile_s")
