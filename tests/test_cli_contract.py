"""The CLI's contract, for every command: help with an example, JSON only on stdout,
one line and exit 2 for bad input (including anything hypothesis can think of), no network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from nanobench.cli import app

runner = CliRunner()
COMMANDS = [c.name for c in app.registered_commands if not c.hidden]


def test_every_command_is_registered_with_its_alias():
    names = {c.name for c in app.registered_commands}
    assert {
        "explain",
        "compile",
        "compilebench",
        "buckets",
        "bucketbench",
        "capture",
        "capturebench",
        "pool-budget",
        "decode",
    } <= names


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_an_example(command):
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert f"Example: nanobench {command}" in result.stdout


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("nanobench ")


def assert_bad_input(result, needle: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0], lines[0]
    assert "Traceback" not in result.output


BAD = [
    (["explain", "--rows", "0"], "--rows"),
    (["explain", "--layers", "2,x"], "--layers"),
    (["explain", "--path", "sideways"], "--path"),
    (["explain", "--device", "cuda"], "--device"),
    (["explain", "--model", "no-such-model"], "--model"),
    (["compile", "--steps", "0"], "--steps"),
    (["compile", "--width-multiple", "-4", "--bucketed"], "--width-multiple"),
    (["compile", "--block-size", "0"], "--block-size"),
    (["compile", "--cache", "lukewarm"], "--cache"),
    (["compile", "--path", "unplanned", "--bucketed"], "--path unplanned"),
    (["buckets", "--rows", "9", "--max-batch", "8"], "--rows"),
    (["buckets", "--kernel", "cuda-magic"], "--kernel"),
    (["buckets", "--width-multiple", "0"], "--width-multiple"),
    (["buckets", "--run-lengths", "0"], "--run-lengths"),
    (["buckets", "--block-size", "-1"], "--block-size"),
    (["decode", "--systems", "engine-eager,vllm"], "--systems"),
    (["decode", "--rows", "0"], "--rows"),
    (["decode", "--steps", "0"], "--steps"),
    (["capture", "--kernel", "flash"], "--kernel"),
    (["pool-budget", "--device-memory", "lots"], "--device-memory"),
]


@pytest.mark.parametrize("args,needle", BAD)
def test_bad_input_is_one_line_exit_2(args, needle, tmp_path):
    before = set(tmp_path.iterdir())
    result = runner.invoke(app, [*args, "--out", str(tmp_path)])
    assert_bad_input(result, needle)
    assert set(tmp_path.iterdir()) == before, "nothing may be written for bad input"


PARSE_ERRORS = [
    (["decode", "--rows", "x"], "--rows"),
    (["compile", "--steps", "1.5"], "--steps"),
    (["buckets", "--rowz", "3"], "--rowz"),
    (["capture", "--steps"], "--steps"),
    (["pool-budget", "--max-batch", ""], "--max-batch"),
    (["explain", "--rows", "four"], "--rows"),
    (["warp-speed"], "warp-speed"),
]


@pytest.mark.parametrize("args,needle", PARSE_ERRORS)
def test_what_the_parser_rejects_is_one_line_exit_2(args, needle, tmp_path):
    """Typer's usage box is replaced by one line naming the option (cli.OneLineErrors)."""
    result = runner.invoke(app, args)
    assert_bad_input(result, needle)
    assert "Usage:" not in result.output


def click_rejects_as_int(value: str) -> bool:
    """True when click's own INT type refuses the text: the parser, not a guess at it."""
    try:
        click.INT.convert(value, None, None)
    except click.BadParameter:
        return True
    return False


def test_the_non_integer_strategy_leaves_out_what_click_parses():
    # int() takes underscores, padding, a sign and non-ASCII digits: each of these is a real
    # --steps value that would start a sweep inside a unit test.
    for text in ("1_0", " 7 ", "+3", "-0", "\u0663", "0_0_1"):
        assert not click_rejects_as_int(text), text
    assert click_rejects_as_int("1.5") and click_rejects_as_int("_1")


@settings(max_examples=40, deadline=None)
@given(
    option=st.sampled_from(["--rows", "--steps", "--prompt-len"]),
    value=st.text(min_size=1, max_size=6).filter(click_rejects_as_int),
    command=st.sampled_from(["buckets", "compile", "decode", "capture"]),
)
def test_any_non_integer_is_one_line_exit_2(option, value, command):
    result = runner.invoke(app, [command, f"{option}={value}"])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", ["explain", "compile", "buckets"])
def test_unwritable_or_missing_model_dirs(command, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_bad_input(runner.invoke(app, [command, "--out", str(blocker / "sub")]), "--out")
    if command != "buckets":
        not_dir = tmp_path / "weights.txt"
        not_dir.write_text("x")
        assert_bad_input(runner.invoke(app, [command, "--model", str(not_dir)]), "is a file")


def test_json_output_is_one_document_and_nothing_else(tmp_path):
    result = runner.invoke(app, ["buckets", "--run-lengths", "8", "--out", str(tmp_path), "--json"])
    assert result.exit_code in (0, 1)
    doc = json.loads(result.stdout)
    assert doc["command"] == "buckets" and doc["rows"] and "gates" in doc


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    option=st.sampled_from(
        ["--rows", "--steps", "--max-batch", "--prompt-len", "--width-multiple"]
    ),
    value=st.integers(max_value=0),
    command=st.sampled_from(["buckets", "compile"]),
)
def test_any_non_positive_number_is_exit_2(option, value, command, tmp_path):
    result = runner.invoke(app, [command, option, str(value), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
FIELDS = [
    "architectures",
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "rope_scaling",
]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(field=st.sampled_from(FIELDS), value=json_values, garbage=st.booleans())
def test_config_json_contents_never_traceback(field, value, garbage, tmp_path_factory):
    from engine.config import PRESETS

    d = tmp_path_factory.mktemp("cfg")
    hf = PRESETS["tiny"].config.to_hf()
    hf[field] = value
    (d / "config.json").write_text("{" if garbage else json.dumps(hf))
    # No weights at all: whatever the config says, the directory is not a loadable checkpoint.
    result = runner.invoke(app, ["explain", "--model", str(d)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_default_flow_never_touches_the_network(tmp_path):
    """Every socket connect is refused and logged, in the CLI process and every worker it spawns.

    The log is the evidence: a reach for the network that something catches and swallows (or
    that ends up as a row's error status, not on stderr) still leaves a line in it.
    """
    site = tmp_path / "site"
    site.mkdir()
    attempts = tmp_path / "connects.log"
    (site / "sitecustomize.py").write_text(
        textwrap.dedent(f"""
        import os
        import socket
        import traceback

        def refuse(*args, **kwargs):
            with open({str(attempts)!r}, "a") as log:
                log.write(f"pid {{os.getpid()}} connect{{args[1:] or args}}\\n")
                log.write("".join(traceback.format_stack(limit=6)))
            raise OSError("network disabled by the test")

        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
    """)
    )
    env = {
        **os.environ,
        "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "HF_HUB_OFFLINE": "0",
        "TRANSFORMERS_OFFLINE": "0",
    }
    # The trap is armed: a fresh interpreter with this environment logs its connect.
    probe = "import socket\ntry: socket.create_connection(('127.0.0.1', 9))\nexcept OSError: pass"
    subprocess.run([sys.executable, "-c", probe], env=env, check=True, timeout=60)
    assert "connect(('127.0.0.1', 9),)" in attempts.read_text()
    attempts.unlink()
    cmd = [sys.executable, "-m", "nanobench.cli"]
    for args in (
        ["explain", "--layers", "2"],
        # one worker a mode and one round: the network is reached at set-up or never
        [
            "compile",
            "--modes",
            "off,dynamic",
            "--steps",
            "3",
            "--backend",
            "eager",
            "--processes",
            "1",
            "--rounds",
            "1",
            "--max-rounds",
            "1",
        ],
        ["buckets", "--run-lengths", "8"],
    ):
        args = [*args, "--json", "--out", str(tmp_path / "o")]
        done = subprocess.run(cmd + args, env=env, capture_output=True, text=True, timeout=600)
        # No --check: only a failed measurement (a worker's error row) exits 1.
        assert done.returncode == 0, (args[0], done.stdout[-2000:], done.stderr[-2000:])
        assert not attempts.exists(), f"{args[0]} reached for the network:\n{attempts.read_text()}"
        statuses = [r.get("status", "ok") for r in json.loads(done.stdout)["rows"]]
        assert statuses and all(s == "ok" for s in statuses), (args[0], statuses)
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["explain", "compile", "capture", "decode"])
def test_a_model_that_cannot_fit_is_refused_before_loading(command, tmp_path, monkeypatch):
    import engine.weights

    monkeypatch.setattr(engine.weights, "available_memory_bytes", lambda device: 1_000_000)
    args = [command, "--out", str(tmp_path)]
    result = runner.invoke(app, args)
    assert_bad_input(result, "the weights need")
    assert list(tmp_path.iterdir()) == []
