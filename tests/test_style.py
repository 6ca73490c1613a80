"""The shared report style: one binary byte formatter, one colour per name, titled figures."""

from __future__ import annotations

from reports.style import COLOURS, binary_bytes, colour, note_lines, title


def test_binary_bytes_uses_powers_of_1024_named_right():
    assert binary_bytes(0) == "0 B"
    assert binary_bytes(1023) == "1,023 B"
    assert binary_bytes(1536) == "1.5 KiB"
    assert binary_bytes(268_435_456) == "256.0 MiB"  # the [256, 32, 1, 8192] fp32 rectangle
    assert binary_bytes(24 * 2**30) == "24.0 GiB"  # --device-memory 24GiB, not 25,769.8 MB
    assert binary_bytes(None) == "-"


def test_names_that_share_a_figure_have_distinct_colours():
    modes = [colour(m) for m in ("off", "dynamic", "static", "reduce-overhead")]
    systems = [colour(s) for s in COLOURS if s.startswith(("engine-", "hf-"))]
    assert len(set(modes)) == len(modes) and len(set(systems)) == len(systems) == 5


def test_a_title_names_the_run():
    got = title("compiled decode", model="tiny", device="cpu", dtype="float32", rows=4, steps=16)
    assert got == "compiled decode: tiny, cpu float32, rows 4, steps 16"


def test_interval_sources_name_each_source_once_with_its_df_range():
    from reports.style import interval_sources

    pairs = [("pooled: 3 systems x 3 processes", 27.0), (None, None), ("own: 2 processes", 1.3)]
    pairs.append(("pooled: 3 systems x 3 processes", 15.0))
    assert interval_sources(pairs) == [
        "own: 2 processes, 1.3 df",
        "pooled: 3 systems x 3 processes, 15 to 27 df",
    ]


def test_a_count_takes_its_noun_in_the_right_number_and_a_word_its_article():
    from reports.style import article, counted

    assert [counted(n, "process") for n in (1, 3)] == ["1 process", "3 processes"]
    assert [counted(n, "run") for n in (0, 1, 2)] == ["0 runs", "1 run", "2 runs"]
    assert counted(2, "key", "keys") == "2 keys"
    assert [article(w) for w in ("explain", "compile", "Ollama")] == [
        "an explain",
        "a compile",
        "an Ollama",
    ]


def test_a_note_fits_80_columns_with_an_installed_packages_path_cut_to_the_package():
    said = (
        "evaluate-guards: remedy specialised: dynamo-trace-once drops every guard; its 2 "
        "shape guards, kept and evaluated each call here: 2 <= input_ids.size()[0] failed at "
        "steps 0-15 [.venv-vllm/lib/python3.11/site-packages/vllm/model_executor/layers/"
        "vocab_parallel_embedding.py:525: return self.quant_method.embedding(self, x)]"
    )
    lines = note_lines(said).splitlines()
    assert len(lines) > 1 and all(len(line) <= 80 for line in lines), lines
    assert all(line.startswith("    ") for line in lines[1:])
    joined = " ".join(" ".join(lines).split())
    assert "[vllm/model_executor/layers/vocab_parallel_embedding.py:525:" in joined
    assert "site-packages" not in joined
    assert joined == " ".join(said.replace(".venv-vllm/lib/python3.11/site-packages/", "").split())
    assert note_lines("short") == "short"
