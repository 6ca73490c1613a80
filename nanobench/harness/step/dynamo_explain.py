"""Explain one decode forward: graphs, breaks, ops, guards and where each break comes from.

What it is: `explain_forward`, which builds the engine at a given depth and dtype (same shapes,
seeded random weights: explain needs shapes, not values), prepares one step, and runs
`torch._dynamo.explain` over the planned or unplanned decode forward, or over the prefill.
`ExplainRow` is its result (and a `--target`'s, `target_bench.explain_target`).
What it is not: a compile. explain's backend never runs Inductor, and it sees one call, so it
cannot show a recompile; it shows the guards that will cause one (`value_guards`).
Invariant: dynamo's own numbers are reported as dynamo gives them (graphs, breaks = graphs - 1,
ops, guards: `dynamo_call.trace_call` traces as `torch._dynamo.explain` does); a break site is
a source line, and its hits are the times one call passed it (docs/measuring.md, "The counts").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.attention import UnplannedDecode
from engine.config import EngineConfig, ModelConfig
from engine.engine import Engine
from engine.plan import plan_decode
from nanobench.harness.step.dynamo_call import Traced, hits, trace_call


@dataclass(frozen=True)
class ExplainRow:
    """One explained forward: dynamo's counts, the counted break reasons, value guards."""

    layers: int | None  # None for a --target (its depth is its own)
    path: str  # planned | unplanned | prefill | "target step K"
    attention: str  # the kernel the engine resolved ("" for a target)
    graphs: int  # graphs dynamo built for one call
    graph_breaks: int  # dynamo's graph_break_count: graphs - 1
    break_sites: int  # source lines a break happened at; break_reasons holds each one's hits
    ops: int
    guards: int
    value_guards: int
    value_guard_text: list[str]
    break_reasons: list[dict]
    target: str = ""
    remedies: list[str] | None = None  # added by the command (engine) or explain_target
    # Floating dtypes of the explained graphs' inputs (weights included), read off dynamo's graphs.
    graph_dtypes: list[str] | None = None
    dtype: str = ""  # the dtype the forward was built in (added by the command)
    threads: int | None = None  # torch.get_num_threads() where it was explained (the command)
    side: str = ""  # before | after under --vs / --vs-path (the command); "" for one side
    # value_guard_text in the user's terms: a `___stackN` named by the line that produced it
    # (a target's, `remedies.in_user_terms`); the texts themselves stay dynamo's, to diff by
    value_guard_named: list[str] | None = None


STEP_ARGS = ("L['view']", "L['plan']", "L['input_ids']")
VALUE_GUARDS = ("CONSTANT_MATCH", "EQUALS_MATCH")


def seeded_prompts(rows: int, prompt_len: int, vocab: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (rows, prompt_len), generator=g).tolist()


def guard_text(guard) -> str:
    code = getattr(guard, "code_list", None)
    return "; ".join(code) if code else guard.name


def value_guards(out_guards) -> list[str]:
    """Guards on Python values reached through the step's inputs: they change every step."""
    found = []
    for g in out_guards or ():
        if g.create_fn_name() in VALUE_GUARDS and g.name.startswith(STEP_ARGS):
            found.append(guard_text(g))
    return sorted(set(found))


def break_table(traced: Traced) -> list[dict]:
    """One entry per break site, most hit first: reason, file:line, source line, hits per call."""
    by_site = sorted(hits(traced).items(), key=lambda item: -item[1])
    return [
        {"reason": reason, "frame": where, "source": source, "hits": n}
        for (reason, where, source), n in by_site
    ]


def explain_forward(
    model: ModelConfig,
    *,
    layers: int,
    rows: int = 4,
    prompt_len: int = 16,
    path: str = "planned",
    prefill: bool = False,
    attention: str = "reference",
    device: str = "cpu",
    dtype: str = "float32",
) -> ExplainRow:
    config = EngineConfig(
        max_batch_size=rows,
        max_model_len=prompt_len + 8,
        attention=attention,
        device=device,
        dtype=dtype,
        decode_path=path,
    )
    engine = Engine.build(model.with_layers(layers), None, config)
    batch = seeded_prompts(rows, prompt_len, model.vocab_size)
    if prefill:
        fn, args = engine.prefill, (batch,)
    else:
        tokens = engine.prefill(batch).argmax(-1).tolist()
        input_ids = torch.tensor(tokens, device=device).view(-1, 1)  # (B, 1)
        if path == "planned":
            plan = plan_decode(
                engine.cache, list(engine.active_rows), None, engine.inputs, engine.width_free
            )
            fn, args = engine.planned_forward, (input_ids, plan)
        else:
            engine._grow(engine.active_rows)
            fn, args = (
                engine.unplanned_forward,
                (input_ids, UnplannedDecode(engine.cache, engine.active_rows)),
            )
    with torch.no_grad():
        out = trace_call(fn, *args)
    breaks = break_table(out)
    vguards = value_guards(out.out_guards)
    return ExplainRow(
        layers=layers,
        path="prefill" if prefill else path,
        attention=engine.attention,
        **explained_counts(out, breaks, vguards),
    )


def explained_counts(out: Traced, breaks: list[dict], vguards: list[str]) -> dict:
    """The row fields one traced call decides, for the engine and a target."""
    return dict(
        graphs=out.graph_count,
        graph_breaks=out.graph_break_count,
        break_sites=len(breaks),
        ops=out.op_count,
        guards=len(out.out_guards or ()),
        value_guards=len(vguards),
        value_guard_text=vguards,
        break_reasons=breaks,
        graph_dtypes=graph_dtypes(out.graphs),
    )


def per_call(row: ExplainRow | None) -> dict:
    """The one-call counts a compile row carries from its probe, under compile's column names."""
    if row is None:
        return {}
    return dict(
        graphs_per_call=row.graphs,
        breaks_per_call=row.graph_breaks,
        break_sites=row.break_sites,
        break_lines=[b["frame"] for b in row.break_reasons],
        break_hits=[b["hits"] for b in row.break_reasons],
    )


def graph_dtypes(graphs) -> list[str]:
    """The floating dtypes of the graphs' placeholders: what the traced forward really ran in."""
    found = set()
    for g in graphs:
        for node in g.graph.nodes:
            value = node.meta.get("example_value") if node.op == "placeholder" else None
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                found.add(str(value.dtype).removeprefix("torch."))
    return sorted(found)


def scaling(rows: list[ExplainRow]) -> str:
    """Breaks that grow with depth are inside the block; a fixed count is in the entry."""
    by_layers = sorted((r.layers, r.graph_breaks) for r in rows)
    if len(by_layers) < 2 or by_layers[-1][1] == 0:
        return "none" if all(b == 0 for _, b in by_layers) else "unknown"
    (l0, b0), (l1, b1) = by_layers[0], by_layers[-1]
    if b1 > b0:
        return f"structural: +{(b1 - b0) / (l1 - l0):g} breaks per layer (inside the block)"
    return "fixed: the break count does not grow with depth (in the entry, not the block)"
