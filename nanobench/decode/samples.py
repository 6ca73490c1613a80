"""Real text for a real-tokenizer model: text prompts in, one decoded sample per system out.

What it is: `tokenizer_for(directory)` (the checkpoint's own tokenizer, local files only, or
None), `text_prompts` (rows of exactly prompt_len tokens cut from one fixed passage at
different offsets, so rows differ but are still the same length) and `sample_text` (a row's
generated tokens decoded to one printable line), `add_samples` (each row with its first
sequence as that line).
What it is not: a tokenizer or a benchmark. A model without tokenizer files keeps seeded random
prompts and shows no sample; nothing here is timed.
Invariant: a prompt is the tokenizer's own ids for real text, never reaches the network, and
is the same for every system of a sweep (each worker calls it with the same arguments).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from nanobench.decode.rows import DecodeRow

# Public-domain prose (the opening of "A Tale of Two Cities"), long enough for any prompt here.
PASSAGE = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the "
    "season of Light, it was the season of Darkness, it was the spring of hope, it was the "
    "winter of despair, we had everything before us, we had nothing before us, we were all "
    "going direct to Heaven, we were all going direct the other way. There were a king with a "
    "large jaw and a queen with a plain face, on the throne of England; there were a king with a "
    "large jaw and a queen with a fair face, on the throne of France. In both countries it was "
    "clearer than crystal to the lords of the State preserves of loaves and fishes, that things "
    "in general were settled for ever."
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")
SAMPLE_CHARS = 72


def tokenizer_for(directory: str | Path):
    """The checkpoint directory's tokenizer, or None when it ships none."""
    directory = Path(directory)
    if not directory.is_dir() or not any((directory / f).is_file() for f in TOKENIZER_FILES):
        return None
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    except (OSError, ValueError):
        return None


def text_prompts(tokenizer, rows: int, prompt_len: int) -> list[list[int]]:
    """`rows` prompts of exactly prompt_len ids: windows of the passage, row r at offset 7r."""
    ids = tokenizer(PASSAGE, add_special_tokens=False)["input_ids"]
    need = prompt_len + 7 * (rows - 1)
    ids = (ids * (need // len(ids) + 1))[:need]  # repeat the passage for very long prompts
    return [ids[7 * r : 7 * r + prompt_len] for r in range(rows)]


def sample_text(tokenizer, tokens: list[int]) -> str:
    """Generated ids -> one line of text, cut to SAMPLE_CHARS."""
    text = tokenizer.decode(tokens, skip_special_tokens=True)
    line = " ".join(text.split())
    return line if len(line) <= SAMPLE_CHARS else line[: SAMPLE_CHARS - 3] + "..."


def add_samples(rows: list[DecodeRow], directory) -> list[DecodeRow]:
    """Each row with its first generated sequence as text, when the checkpoint ships a tokenizer."""
    tokenizer = tokenizer_for(directory)
    if tokenizer is None:
        return rows
    return [replace(r, sample=sample_text(tokenizer, r.tokens[0])) if r.tokens else r for r in rows]
