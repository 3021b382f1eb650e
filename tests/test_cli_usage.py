"""Usage mistakes on every command: a short click-style message naming the problem, exit code 2,
never a traceback (found: typer bundles its own click, so the entry point's handler for
``click.ClickException`` never matched and every usage error printed 30-57 lines of
traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CASES = [
    ([], "Usage"),  # bare command: the help, not an error
    (["--bogus"], "No such option: --bogus"),
    (["nosuchcommand"], "No such command 'nosuchcommand'"),
    (["train"], "Missing argument 'CONFIG'"),
    (["train", "cfg.yaml", "--set"], "--set"),
    (["demo", "--seeds", "0"], "--seeds"),
    (["demo", "--bogus"], "No such option: --bogus"),
    (["eval", "--runs", "0"], "--runs"),
    (["eval", "--concurrency", "zero"], "--concurrency"),
    (["design", "show", "--bogus"], "No such option: --bogus"),
    (["schedule", "preview", "--steps", "x"], "--steps"),
    (["plugins", "list", "--bogus"], "No such option: --bogus"),
    (["tasks", "list", "--bogus"], "No such option: --bogus"),
    (["model", "tiny"], "Missing argument 'OUT_DIR'"),
    (["harness", "show"], "Missing argument"),
    (["run", "--bogus"], "No such option: --bogus"),
]


@pytest.mark.parametrize(("args", "message"), CASES, ids=[" ".join(a) or "bare" for a, _ in CASES])
def test_usage_mistakes_are_a_message_not_a_traceback(args: list[str], message: str) -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-m", "harnessgrid", *args], capture_output=True,
                          text=True, timeout=120, env=env, check=False)
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    assert message.lower() in output.lower(), output
    assert done.returncode == 2, (done.returncode, output)
    assert len(output.splitlines()) < 60


def test_an_output_directory_that_is_a_file_is_named(tmp_path: Path) -> None:
    """Found: ``model tiny FILE``, ``eval --out FILE`` and ``demo --out FILE`` died with a
    FileExistsError traceback; now every command that writes a directory says which path is
    in the way, before doing any work."""
    blocker = tmp_path / "results"
    blocker.write_text("not a directory\n")
    config = tmp_path / "train.yaml"
    config.write_text(f"model: tiny:tiny\noutput_dir: {blocker / 'run'}\n")
    commands = {
        "model tiny": ["model", "tiny", str(blocker)],
        "eval": ["eval", "--policy", "scripted", "--suites", "examples", "--settings",
                 "in-space", "--out", str(blocker)],
        "demo": ["demo", "--quick", "--out", str(blocker / "demo")],
        "train": ["train", str(config)],
    }
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    for name, args in commands.items():
        done = subprocess.run([sys.executable, "-m", "harnessgrid", *args], capture_output=True,
                              text=True, timeout=300, env=env, check=False)
        output = done.stdout + done.stderr
        assert "Traceback" not in output, (name, output)
        assert str(blocker) in output and "not a directory" in output, (name, output)
        assert "hint:" in output and done.returncode == 2, (name, output)
    assert blocker.read_text() == "not a directory\n"


@pytest.mark.parametrize(("spec", "valid"), [("litellm:openai/gpt-4o-mini", "api_base"),
                                             ("anthropic:claude-x", "base_url"),
                                             ("hf:./no-model", "max_new_tokens")])
def test_an_unknown_policy_option_is_named_with_the_valid_ones(spec: str, valid: str) -> None:
    """Found: ``--policy-opt bogus=1`` on litellm or anthropic died with a TypeError
    traceback (``__init__() got an unexpected keyword argument``), also through
    ``run_agent(policy_options=...)``."""
    from harnessgrid.errors import ConfigError
    from harnessgrid.policies import make_policy

    with pytest.raises(ConfigError) as caught:
        make_policy(spec, {"bogus": 1, "temperature": 0})
    assert "bogus" in caught.value.message and "temperature" not in caught.value.message
    assert caught.value.hint is not None and valid in caught.value.hint
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-m", "harnessgrid", "run", "--task", "examples/upper",
                           "--harness", "S0-T0-O0-C0-W0", "--policy", spec, "--policy-opt",
                           "bogus=1"], capture_output=True, text=True, timeout=120, env=env,
                          check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "bogus" in done.stderr


@pytest.mark.parametrize("command", [
    ["run", "--task", "examples/upper", "--harness", "S0-T0-O0-C0-W0", "--policy", "scripted"],
    ["eval", "--policy", "scripted", "--suites", "examples", "--settings", "in-space",
     "--limit", "1", "--runs", "1"],
], ids=["run", "eval"])
def test_unsafe_mode_warns_exactly_once(command: list[str], tmp_path: Path) -> None:
    """Found: ``--unsafe-no-sandbox`` printed its warning three times (the command's own line,
    the library's log record and its warning)."""
    extra = ["--out", str(tmp_path / "eval")] if command[0] == "eval" else []
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-m", "harnessgrid", *command, *extra,
                           "--unsafe-no-sandbox"], capture_output=True, text=True, timeout=300,
                          env=env, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    warning_lines = [ln for ln in done.stderr.splitlines() if "sandbox" in ln.lower()]
    assert len(warning_lines) == 1, done.stderr
    assert warning_lines[0].startswith("warning: ") and "WITHOUT a sandbox" in warning_lines[0]
