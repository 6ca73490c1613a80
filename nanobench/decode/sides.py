"""Each side of a `decode` run resolved: every check that needs the model, then its RunSpec.

What it is: `run_spec(spec, status)` (the model's length, that it fits with every worker
holding its copy, that transformers can load it: a GGUF converted once for transformers; then
what each worker is handed, with the step's bytes and flops) and `run_specs(spec, status)`
(each side's, by `Sides.resolved`).
What it is not: the options' own checks (`spec.DecodeSpec.validate`) or the measuring.
Invariant: the before side's bad input names the options the user typed for it (--vs-model,
--vs-dtype).
"""

from __future__ import annotations

from functools import partial

from engine.gguf import find_gguf
from engine.sources import materialize_gguf
from nanobench.decode.bench import DTYPE_BYTES, HF_SYSTEMS, transformers_can_load
from nanobench.decode.roofline import kv_read_bytes, step_flops, weight_bytes
from nanobench.decode.rows import RunSpec
from nanobench.decode.spec import DecodeSpec
from nanobench.harness.cli.validate import device_option, dtype_option, fits_option, model_option
from nanobench.harness.errors import BadInput
from nanobench.harness.runs.sides import Sides
from nanobench.harness.step.knobs import checked_side


def run_spec(spec: DecodeSpec, status, copies: int) -> tuple[RunSpec, str]:
    """Every check that needs the model, then what each worker is handed; (run, its directory).
    `copies`: the weights the whole run holds (every side's workers, `copies`)."""
    if spec.knob:
        checked_side(spec.knob)
    dtype = dtype_option(spec.dtype, spec.model, spec.device)
    device_option(spec.device)
    directory, config = model_option(spec.model)
    # Every worker of every system holds its own copy of the weights for the whole run, and
    # every probe worker a weight-sized tensor to read.
    # (A run of sides holds every side's: `copies`.)
    fits_option(config, dtype, spec.device, copies=copies)
    if spec.prompt_len + spec.steps > config.max_position_embeddings:
        raise BadInput(
            f"--prompt-len {spec.prompt_len} + --steps {spec.steps} exceed the model's "
            f"max_position_embeddings {config.max_position_embeddings}"
        )
    if any(s in HF_SYSTEMS for s in spec.systems):
        if find_gguf(directory) is not None:
            # transformers reads a HF directory, not a GGUF: both sides get the converted one.
            status("converting the GGUF for transformers (once)")
            directory = materialize_gguf(directory)
        status("checking that transformers can load the checkpoint")
        transformers_can_load(directory)
    elem = DTYPE_BYTES[dtype]
    run = RunSpec(
        model=str(directory),
        rows=spec.rows,
        prompt_len=spec.prompt_len,
        steps=spec.steps,
        max_model_len=spec.max_model_len or spec.prompt_len + spec.steps,
        width_multiple=spec.width_multiple,
        device=spec.device,
        dtype=dtype,
        threads=spec.threads,
        backend=spec.backend,
        hf_attn=spec.hf_attn,
        weight_bytes=weight_bytes(config, elem),
        kv_bytes=kv_read_bytes(config, elem, spec.rows, spec.prompt_len, spec.steps),
        step_flops=step_flops(config, spec.rows, spec.prompt_len, spec.steps),
        knob=spec.knob,
    )
    return run, directory


def copies(sides: Sides, processes: int) -> int:
    """The weights' copies the run holds: each side's systems and probe (a knob side borrows
    its lender's probe) in every process."""
    return len(sides.planned()) * processes


def run_specs(sides: Sides, status, processes: int) -> tuple[dict[str, RunSpec], str]:
    """Each side's RunSpec, and the main side's directory."""
    found = sides.resolved(partial(run_spec, status=status, copies=copies(sides, processes)))
    return {side: run for side, (run, _) in found.items()}, found[sides.main][1]
