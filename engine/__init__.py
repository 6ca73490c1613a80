"""The inference engine: a paged-KV-cache Llama. Knows nothing about benchmarks."""
