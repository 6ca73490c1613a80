"""Where Inductor keeps generated code, so no CPU setting ever runs code built for another.

What it is: `codegen_key(device)`, the facts that change what Inductor generates (torch version,
the CPU vector ISA ATen dispatches to, `ATEN_CPU_CAPABILITY`, the CPU model; the GPU name and
compute capability on CUDA); `warm_dir(device)`, the shared cache directory under that key; and
`fresh_dir(label)`, a new empty directory for a cold run.
What it is not: a cache. Inductor owns the files; this module only names their directory.
Invariant: two settings that generate different code never share a directory. Inductor's own
key leaves `ATEN_CPU_CAPABILITY` out: a directory filled by an AVX-512 run hands a
`ATEN_CPU_CAPABILITY=default` run C++ that fails to build (`'at::vec' has not been declared`),
and a home directory shared across a cluster would hand one CPU another's build.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import tempfile
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def codegen_key(device: str) -> str:
    """One path component naming everything that changes Inductor's generated code."""
    import torch

    facts = [
        f"torch-{torch.__version__}",
        f"isa-{torch.backends.cpu.get_cpu_capability()}",
        f"aten-{os.environ.get('ATEN_CPU_CAPABILITY') or 'unset'}",
        f"cpu-{cpu_model()}",
    ]
    if torch.device(device).type == "cuda":
        index = torch.device(device).index or 0
        major, minor = torch.cuda.get_device_capability(index)
        facts.append(
            f"cuda-{torch.version.cuda}-sm{major}{minor}-{torch.cuda.get_device_name(index)}"
        )
    readable = re.sub(r"[^A-Za-z0-9.+-]+", "_", "_".join(facts[:3]))
    digest = hashlib.sha256("\n".join(facts).encode()).hexdigest()[:12]
    return f"{readable}_{digest}"


def warm_dir(device: str) -> Path:
    """The shared (warm) Inductor cache for this machine's setting, in the nanobench cache."""
    from engine.weights import cache_root

    return cache_root() / "inductor" / codegen_key(device)


def fresh_dir(label: str) -> str:
    """A new, empty Inductor cache directory (a cold run); the caller removes it."""
    return tempfile.mkdtemp(prefix=f"nanobench-inductor-{label}-")
