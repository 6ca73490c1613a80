"""vLLM's evaluate_guards, made to diagnose: held to what dynamo itself keeps and raises.

No vLLM here: a module compiled the way vLLM's wrapper compiles its model (dim 0 marked dynamic,
`dynamic=False`, a guard filter that keeps only SHAPE_ENV guards, called under the stance
`fail_on_recompile` after its first call) gives dynamo's own guards and its own failure; the
watch must read the first, survive the second with the eager forward's output, and say both.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

from nanobench.harness.step.remedies import value_guard
from nanobench.harness.step.vllm_guards import GuardWatch, spans


class Wrapped(torch.nn.Module):
    """What vLLM's `TorchCompileWithNoGuardsWrapper` does around its model, in small."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(8, 8))
        self.first = True
        self._compiled_callable = torch.compile(
            self.forward,
            dynamic=False,
            fullgraph=True,
            backend="eager",
            options={"guard_filter_fn": lambda entries: [e.guard_type == "SHAPE_ENV" for e in entries]},
        )  # fmt: skip

    def forward(self, x):  # x: (T, 8), T tokens
        return torch.nn.functional.embedding(x[:, 0].long(), self.weight) + x

    def __call__(self, x):
        stance = "default" if self.first else "fail_on_recompile"
        self.first = False
        with torch.compiler.set_stance(stance):
            return self._compiled_callable(x)


@pytest.fixture
def wrapped():
    torch._dynamo.reset()
    module = Wrapped()
    x = torch.randint(0, 8, (4, 8)).float()  # (T=4, 8)
    torch._dynamo.mark_dynamic(x, 0)
    module(x)  # vLLM's warm-up: the one trace
    yield module
    torch._dynamo.reset()


def test_the_kept_guards_are_dynamos_shape_guards(wrapped):
    watch = GuardWatch(wrapped)
    assert watch.kept, "dynamo kept no guard"
    assert all("size()" in g for g in watch.kept), watch.kept
    assert any(value_guard(g).guard == "2 <= L['x'].size()[0]" for g in watch.kept), watch.kept


def test_a_call_that_fails_a_kept_guard_is_said_and_runs_eager(wrapped):
    one = torch.randint(0, 8, (1, 8)).float()  # (T=1, 8): below the trace's 0/1 specialisation
    with pytest.raises(RuntimeError, match="fail_on_recompile"):  # dynamo's own, unwatched
        wrapped(one)
    watch = GuardWatch(wrapped)
    for step in range(3):
        watch.at = f"step {step}"
        out = wrapped(one)  # (1, 8)
        assert torch.equal(out, wrapped.weight[one[:, 0].long()] + one)
    watch.at = "step 3"
    wrapped(torch.randint(0, 8, (5, 8)).float())  # (T=5, 8): the trace holds
    assert [at for at, _ in watch.failed] == ["step 0", "step 1", "step 2"]
    (found,) = watch.findings(steps=4)
    assert found.kind == "specialised"
    assert "2 <= x.size()[0] failed at steps 0..2" in found.fix
    assert found.where.endswith(
        "return torch.nn.functional.embedding(x[:, 0].long(), self.weight) + x"
    )


def test_guards_that_held_are_listed(wrapped):
    watch = GuardWatch(wrapped)
    watch.at = "step 0"
    wrapped(torch.randint(0, 8, (3, 8)).float())
    (found,) = watch.findings(steps=1)
    assert found.kind == "guards-held" and "held over the 1 steps" in found.fix
    assert "2 <= L['x'].size()[0]" in found.fix


def test_where_a_guard_failed_is_said_once_its_steps_as_the_remedies_say_them():
    assert spans(["the prefill", "step 0", "step 1", "step 2", "step 0", "step 7"]) == (
        "the prefill, steps 0, 1, 2, 7"
    )
