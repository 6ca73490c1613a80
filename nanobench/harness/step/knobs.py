"""The knobs `--try` measures: a named vocabulary of torch.compile's folklore, and KEY=VALUE.

What it is: `Knob` (what one knob sets: Inductor or dynamo config entries, or a guard filter
passed as `torch.compile(options={"guard_filter_fn": ...})`; what it changes; why torch calls
it unsafe, if it does), `VOCABULARY`, `parse_side(text)` (a `--try` side: a knob, or several
joined by "+", as the settings it makes: no torch), `checked_side(text)` (the same, held against
the installed torch: a key it does not know or a value of the wrong type is `BadInput`),
`applied(text)` (a worker sets its side's config for its whole process) and
`compile_options(text)` (what torch.compile is handed for it).
What it is not: the run that measures a knob (`--try` makes each one a side of the fleet,
`compile.spec.CompileSpec.sides`), or its verdict (`harness.runs.change`).
Invariant: a knob is checked against the installed torch before any worker starts, and a
worker applies exactly the settings its side's text names, nothing else; importing this loads
no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from nanobench.harness.errors import BadInput

PLAIN = "plain"  # the side every knob is measured against: torch.compile as the mode has it
CONFIGS = ("inductor", "dynamo")  # torch._inductor.config, torch._dynamo.config


@dataclass(frozen=True)
class Setting:
    """One config entry a knob sets: `torch._{config}.config.{key} = value`."""

    config: str  # inductor | dynamo
    key: str
    value: object


@dataclass(frozen=True)
class Knob:
    name: str
    what: str  # what it changes, in one line
    settings: tuple[Setting, ...] = ()
    guard_filter: str = ""  # a torch.compiler function's name, handed as guard_filter_fn
    unsafe: str = ""  # why torch calls it unsafe ("" where it does not)
    assumes: str = ""  # what it takes for granted that torch does not check


VOCABULARY = {
    k.name: k
    for k in (
        Knob(
            "cpp-wrapper",
            "Inductor's wrapper code in C++, not Python: less host time a call, "
            "a longer cold compile",
            (Setting("inductor", "cpp_wrapper", True),),
        ),
        Knob(
            "guard-filter",
            "dynamo skips its guards on nn.Module attributes: fewer guards checked a call",
            guard_filter="skip_guard_on_all_nn_modules_unsafe",
            unsafe="a module attribute changed after compiling is not noticed",
        ),
        Knob(
            "free-tensors",
            "tensors read from globals and module attributes become graph "
            "inputs, not guarded constants",
            (Setting("dynamo", "install_free_tensors", True),),
        ),
        Knob(
            "freezing",
            "Inductor folds the parameters into the graph as constants "
            "(inference only): constant folding, prepacked weights",
            (Setting("inductor", "freezing", True),),
            assumes="the parameters never change after compiling",
        ),
        Knob(
            "max-autotune",
            "Inductor benchmarks kernel choices (GEMM templates) while "
            "compiling, no CUDA graphs: a much longer cold compile",
            (Setting("inductor", "max_autotune", True),),
        ),
        Knob(
            "coordinate-descent",
            "Inductor tunes each generated kernel's block sizes by coordinate descent",
            (Setting("inductor", "coordinate_descent_tuning", True),),
        ),
        Knob(
            "no-automatic-dynamic",
            "dynamo recompiles a changed size as static again, never generalises it",
            (Setting("dynamo", "automatic_dynamic_shapes", False),),
        ),
        Knob(
            "specialize-float",
            "dynamo traces Python floats as constants: a changed float recompiles",
            (Setting("dynamo", "specialize_float", True),),
        ),
    )  # fmt: skip
}
GENERIC = "inductor.KEY=VALUE or dynamo.KEY=VALUE"


def known() -> str:
    return ", ".join(VOCABULARY) + f", {GENERIC}"


def parse_knob(text: str) -> Knob:
    """A named knob, or a generic `inductor.KEY=VALUE` (its value a string until checked)."""
    if text in VOCABULARY:
        return VOCABULARY[text]
    config, dot, rest = text.partition(".")
    key, eq, value = rest.partition("=")
    if config not in CONFIGS or not dot or not eq or not key or not value:
        raise BadInput(f"--try {text}: not a knob; expected one of {known()}")
    return Knob(text, f"{config}.{key} set to {value}", (Setting(config, key, value),))


def parse_side(text: str) -> tuple[Knob, ...]:
    """A `--try` side: one knob, or several joined by "+" measured together."""
    if text == PLAIN:
        raise BadInput(f"--try {PLAIN}: the side every knob is measured against; name a knob: "
                       f"{known()}")  # fmt: skip
    knobs = tuple(parse_knob(part) for part in text.split("+"))
    if len({k.name for k in knobs}) < len(knobs):
        raise BadInput(f"--try {text}: a knob named twice in one side")
    return knobs


def check_sides(sides: tuple[str, ...]) -> None:
    """--try's sides, their names alone (no torch): known, none twice."""
    for text in sides:
        parse_side(text)
    twice = sorted({s for s in sides if sides.count(s) > 1})
    if twice:
        raise BadInput(f"--try {twice[0]}: named twice; each knob is one side of the run")


def check_backend(sides: tuple[str, ...], backend: str) -> None:
    """An Inductor knob under another backend would measure nothing: one line naming it."""
    for side in sides:
        for knob in parse_side(side):
            if backend != "inductor" and any(s.config == "inductor" for s in knob.settings):
                raise BadInput(f"--try {side}: {knob.name} sets Inductor, which --backend "
                               f"{backend} never runs; use --backend inductor")  # fmt: skip


def _config(name: str):
    # torch loads here, once the names are checked: the vocabulary itself needs none.
    if name == "inductor":
        import torch._inductor.config as config
    else:
        import torch._dynamo.config as config
    return config


def typed(text: str, setting: Setting) -> Setting:
    """A setting held against the installed torch: its key known, its value of the entry's type
    (a generic knob's string parsed as that type; a named knob's value checked as it is)."""
    import torch

    entries = _config(setting.config)._config
    entry = entries.get(setting.key)
    if entry is None:
        raise BadInput(f"--try {text}: torch {torch.__version__} has no "
                       f"{setting.config}.{setting.key}")  # fmt: skip
    value = setting.value
    if isinstance(value, str) and not isinstance(entry.default, str):
        value = _parse_value(text, value, entry.default, entry.value_type)
    return Setting(setting.config, setting.key, value)


def _parse_value(text: str, raw: str, default, value_type):
    """A KEY=VALUE's value as the entry's default's type: true/false, a number, none."""
    lowered = raw.lower()
    if lowered == "none" and (default is None or "None" in str(value_type)):
        return None
    if isinstance(default, bool) or value_type is bool:
        if lowered in ("true", "1", "false", "0"):
            return lowered in ("true", "1")
    elif isinstance(default, int | float):
        try:
            return type(default)(raw)
        except ValueError:
            pass
    elif default is None and "str" in str(value_type):
        return raw
    kind = getattr(value_type, "__name__", str(value_type))
    article = "an" if kind[:1] in "aeiou" else "a"
    raise BadInput(f"--try {text}: {raw!r} is not {article} {kind} (its default is {default!r})")


def checked_side(text: str) -> tuple[Setting, ...]:
    """A side's settings, each held against the installed torch; its guard filter too."""
    import torch.compiler

    found = []
    for knob in parse_side(text):
        found += [typed(text, s) for s in knob.settings]
        if knob.guard_filter and not hasattr(torch.compiler, knob.guard_filter):
            raise BadInput(f"--try {text}: torch {torch.__version__} has no "
                           f"torch.compiler.{knob.guard_filter}")  # fmt: skip
    return tuple(found)


def applied(text: str) -> None:
    """A worker's side set for its process (one side a worker: nothing to undo); "" is plain."""
    if not text:
        return
    for s in checked_side(text):
        _config(s.config).patch({s.key: s.value}).__enter__()


def compile_options(text: str) -> dict:
    """What torch.compile is handed for a side beyond its mode: a guard filter, or nothing."""
    filters = [k.guard_filter for k in parse_side(text)] if text else []
    filters = [f for f in filters if f]
    if not filters:
        return {}
    import torch.compiler

    return {"options": {"guard_filter_fn": getattr(torch.compiler, filters[0])}}


def unsafe_of(text: str) -> list[str]:
    """Why torch calls a side's knobs unsafe, or what they assume, one line each ("" side:
    none)."""
    knobs = parse_side(text) if text else ()
    unsafe = [f"{k.name}: unsafe ({k.guard_filter}): {k.unsafe}" for k in knobs if k.unsafe]
    return unsafe + [f"{k.name}: assumes {k.assumes}" for k in knobs if k.assumes]
