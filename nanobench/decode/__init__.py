"""`nanobench decode`: the engine against transformers on the same checkpoint, interleaved."""
