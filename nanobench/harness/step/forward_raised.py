"""What a target's forward raised, in the user's terms: their exception, where their code raised it.

What it is: `forward_raised` turns what one call of a target's forward raised into the
`TargetError` line a worker reports. A plain exception is the user's: its type, its first line
and the innermost frame of their own code (`user_frame`: not torch, not the standard library
or site-packages, not nanobench). A compiled call wraps it (dynamo's `TorchRuntimeError` says
"RuntimeError when making fake tensor call", `BackendCompilerFailed` "backend='inductor'
raised:"), so the same step is run once more with dynamo standing aside: raising there too, it
is the user's error, said as eager says it; running there, the compiler alone failed, said as
`compiling forward ...` with the error it wrapped.
What it is not: stepping a target (`target_bench.call_step`) or deciding what a worker's line
means to the command (`targets.raised_by_target` reads `forward at step N raised` as the user's
bad input, and `compiling forward` as a failed row).
Invariant: one line, never a traceback; a compiled call's failure is the user's only when
their forward raises without the compiler too.
"""

from __future__ import annotations

import os
import re
import sysconfig
import traceback
from collections.abc import Callable
from pathlib import Path

from nanobench.harness.step.targets import Target, TargetError, _one_line

# Frames that are not the user's: the standard library, installed packages (torch among them),
# nanobench itself. A target's own file lives outside all of them.
LIBRARY_ROOTS = tuple(
    str(Path(p).resolve())
    for p in (
        *{sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")},
        Path(__file__).resolve().parents[2],  # the nanobench package
    )
)
# dynamo's fake-tensor wrapper names the error it caught only in its message
GOT = re.compile(r"got (\w+)\((['\"])(.*?)\2\)")


def user_frame(frames) -> traceback.FrameSummary | None:
    """The innermost frame of the user's own code among `frames` (outermost first), or None."""
    for frame in reversed(list(frames or ())):
        if not str(Path(frame.filename).resolve()).startswith(LIBRARY_ROOTS):
            return frame
    return None


def where(frame: traceback.FrameSummary | None) -> str:
    """' (in file:line: source)', the file relative to where nanobench runs when inside it."""
    if frame is None:
        return ""
    path = os.path.relpath(frame.filename)
    path = frame.filename if path.startswith("..") else path
    line = (frame.line or "").strip()
    return f" (in {path}:{frame.lineno}{': ' + line if line else ''})"


def is_compilers(e: BaseException) -> bool:
    """Whether dynamo raised it (its wrapper of the user's error, or its own failure)."""
    from torch._dynamo.exc import TorchDynamoException

    return isinstance(e, TorchDynamoException)


def unwrapped(e: BaseException) -> str:
    """The error a compiler's exception wrapped, one line: its cause, its `inner_exception`
    (`BackendCompilerFailed`), or the `got X('...')` of a fake-tensor call; else its own."""
    inner: BaseException | None = e
    while inner is not None and is_compilers(inner):
        inner = getattr(inner, "inner_exception", None) or inner.__cause__
    if inner is not None:
        return _one_line(inner)
    got = GOT.search(str(e))
    return f"{got[1]}: {got[3]}" if got else _one_line(e)


def forward_raised(target: Target, step: int, fn: Callable, e: Exception, args, kwargs):
    """The `TargetError` for `fn(*args, **kwargs)` (the target's forward, compiled or not)
    having raised `e` at `step`."""
    spec = f"--target {target.spec!r}"
    # a target that compiles itself has no eager call of ours to tell its error from its compiler's
    if is_compilers(e) and fn is not target.forward:
        eager = eager_raises(target, args, kwargs)
        if eager is not None:
            e = eager
    if is_compilers(e):
        return TargetError(
            f"{spec}: compiling forward at step {step} raised {type(e).__name__}: {unwrapped(e)}"
            f"{where(user_frame(getattr(e, 'real_stack', None)))}"
        )
    frames = traceback.extract_tb(e.__traceback__)
    return TargetError(
        f"{spec}: forward at step {step} raised {_one_line(e)}{where(user_frame(frames))}"
    )


def eager_raises(target: Target, args, kwargs) -> Exception | None:
    """What the step raises with dynamo standing aside (None: it runs). dynamo raised while
    tracing or compiling, so the step's own work ran at most up to a graph break: run again from
    the same inputs, the user's code raises where it raised under the compiler."""
    import torch

    try:
        with torch.compiler.set_stance("force_eager"):
            target.forward(*args, **kwargs)
    except Exception as e:
        return e
    return None
