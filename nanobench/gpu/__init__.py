"""The GPU check: capture, memory and kernel timing on a CUDA device, as one script."""
