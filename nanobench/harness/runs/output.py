"""The output contract every command keeps: the table or one JSON document, then the exit code.

What it is: `finish(...)`, which prints the table (or the JSON document of rows, gates, outputs,
the env record and a command's own `extra` keys) and picks the exit code (0 all pass, 1 a fail or a failed measurement, 3
nothing failed but something could not be decided), and `clean_json` (NaN and infinity as null).
What it is not: the table itself (`reports/`), the gates (`gates`) or what ends a command
before it measures (`errors.BadInput`, `console.run_command`).
Invariant: `--json` prints one document and nothing else on stdout; under `--check` an
inconclusive gate is exit 3 only when nothing failed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict

from nanobench.harness.errors import EXIT_FAILED, EXIT_INCONCLUSIVE, EXIT_OK
from nanobench.harness.runs.gates import Gate
from nanobench.harness.statistics.verdicts import FAIL, INCONCLUSIVE


def finish(
    command: str,
    rows: list[dict],
    gates: list[Gate],
    outputs: dict[str, str],
    *,
    json_mode: bool,
    check: bool,
    render: Callable[[], None],
    failed: bool = False,
    env: dict | None = None,
    extra: dict | None = None,
) -> int:
    """Print the table (or the JSON document) and return the exit code.

    `extra` (a comparison's changes, say) joins the JSON document beside the rows.
    Exit 1 when a measurement failed, or when --check is set and a gate failed; exit 3 when
    --check is set, nothing failed and a gate is inconclusive.
    """
    if json_mode:
        doc = {
            "command": command,
            "rows": rows,
            "gates": [asdict(g) for g in gates],
            "outputs": outputs,
        }
        if env is not None:
            doc["env"] = env
        clash = sorted(set(extra or {}) & set(doc))
        if clash:
            raise ValueError(f"finish: extra key {clash[0]!r} is a standard key of the document")
        doc.update(extra or {})
        sys.stdout.write(json.dumps(clean_json(doc), default=str) + "\n")
    else:
        render()
    if failed:
        return EXIT_FAILED
    if check and any(g.verdict == FAIL for g in gates):
        return EXIT_FAILED
    if check and any(g.verdict == INCONCLUSIVE for g in gates):
        return EXIT_INCONCLUSIVE
    return EXIT_OK


def clean_json(value):
    """NaN and infinity are not JSON: they become null."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    return value
