"""Real-text prompts and decoded samples for a checkpoint that ships a tokenizer."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from nanobench.decode.rows import DecodeRow
from nanobench.decode.samples import PASSAGE, add_samples, sample_text, text_prompts, tokenizer_for


@pytest.fixture
def word_tokenizer(tmp_path):
    """A word-level tokenizer over the passage's words, saved as a checkpoint would ship it."""
    words = sorted(set(PASSAGE.replace(",", " ,").replace(".", " .").replace(";", " ;").split()))
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(tmp_path)
    return tmp_path


def test_prompts_are_equal_length_windows_of_real_text(word_tokenizer):
    tok = tokenizer_for(word_tokenizer)
    assert tok is not None
    batch = text_prompts(tok, 3, 5)
    assert [len(p) for p in batch] == [5, 5, 5]
    assert tok.decode(batch[0]) == "It was the best of"
    assert batch[1][:5] == text_prompts(tok, 1, 12)[0][7:12]  # row 1 starts 7 tokens in
    assert len(text_prompts(tok, 2, 400)[1]) == 400  # longer than the passage: it repeats


def test_sample_is_one_line_of_decoded_text(word_tokenizer, tmp_path):
    tok = tokenizer_for(word_tokenizer)
    ids = tok("it was the age of wisdom")["input_ids"]
    assert sample_text(tok, ids) == "it was the age of wisdom"
    rows = [DecodeRow("engine-eager", "ok", tokens=[ids, ids[:2]]), DecodeRow("hf-eager", "ok")]
    sampled = add_samples(rows, word_tokenizer)
    assert sampled[0].sample == "it was the age of wisdom" and sampled[1].sample is None
    assert tokenizer_for(tmp_path / "nowhere") is None
