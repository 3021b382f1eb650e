"""Usage mistakes on every command: a short click-style message naming the problem, exit code 2,
never a traceback (found: typer bundles its own click, so the entry point's handler for
``click.ClickException`` never matched and every usage error printed 30-57 lines of
traceback)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def all_commands() -> list[list[str]]:
    """Every command and subcommand of the CLI, walked from the app itself (so a new command
    is covered without editing this test)."""
    import typer

    from harnessgrid.cli import app

    def walk(command: Any, path: list[str]) -> list[list[str]]:
        children = getattr(command, "commands", None)
        if not children:
            return [path]
        return [p for name, child in sorted(children.items()) for p in walk(child, [*path, name])]

    return walk(typer.main.get_command(app), [])


def hg(*args: str, cwd: Path | None = None) -> tuple[int, str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-m", "harnessgrid", *args], capture_output=True,
                          text=True, timeout=120, env=env, check=False, cwd=cwd)
    return done.returncode, done.stdout + done.stderr


def test_every_command_rejects_an_unknown_option_briefly() -> None:
    commands = all_commands()
    assert len(commands) >= 15
    assert ["tasks", "list"] in commands
    assert ["train"] in commands
    for command in commands:
        code, output = hg(*command, "--no-such-flag")
        assert code == 2, (command, output)
        assert "Traceback" not in output, (command, output)
        assert "No such option: --no-such-flag" in output, (command, output)
        assert len(output.splitlines()) < 12, (command, output)


BAD_VALUES = [
    (["tasks", "list", "examples", "--suite", "grid-bench"], "two suites given", "once"),
    (["tasks", "list", "grid", "--split", "eval"], "no split 'eval'", "splits: train"),
    (["tasks", "show", "grid-bench/grid/nope-1"], "no task 'grid/nope-1'", "tasks list"),
    (["tasks", "show", "nosuite/x"], "unknown task suite 'nosuite'", "hint:"),
    (["tasks", "validate", "grid-bench", "--harness", "S9-T0-O0-C0-W0"], "S9", "hint:"),
    (["run", "--task", "examples/upper", "--harness", "S0-T0-O0-C0-W7", "--policy",
      "scripted"], "W7", "hint:"),
    (["run", "--task", "examples/upper", "--harness", "S0-T0-O0-C0-W0", "--policy",
      "nosuch:model"], "nosuch", "hint:"),
    (["eval", "--policy", "scripted", "--suites", "nosuite", "--out", "OUT"], "nosuite",
     "hint:"),
    (["eval", "--policy", "scripted", "--suites", "examples", "--settings", "sideways",
      "--out", "OUT"], "sideways", "hint:"),
    (["eval", "--policy", "scripted", "--suites", "examples", "--settings", "original",
      "--out", "OUT"], "needs the harnesses the policy trained through", "--original oa"),
    (["run", "--task", "examples/upper", "--harness", "S0-T0-O0-C0-W0", "--policy",
      "hf:./empty"], "no tokenizer files (tokenizer.json or tokenizer_config.json); no "
                     "config.json; no weights", "hint:"),
    (["design", "show", "--kind", "single"], "--config", "hint:"),
    (["harness", "show", "adapter:nope"], "nope", "hint:"),
]


@pytest.mark.parametrize(("args", "named", "hint"), BAD_VALUES,
                         ids=[" ".join(a[:3]) for a, _, _ in BAD_VALUES])
def test_a_bad_value_is_named_with_a_hint(args: list[str], named: str, hint: str,
                                          tmp_path: Path) -> None:
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    (tmp_path / "empty").mkdir()
    code, output = hg(*args, cwd=tmp_path)
    assert code != 0, output
    assert "Traceback" not in output, output
    assert named in output, output
    assert hint in output, output
    assert "error:" in output, output
    assert len(output.splitlines()) < 20, output


def test_the_renamed_train_setting_still_runs_and_says_its_new_name(tmp_path: Path) -> None:
    """`--settings train` (the training design before 0.2.3) keeps working as it did until
    0.3.0, and a command-line user, who never sees a library's DeprecationWarning, is told the
    new form."""
    code, output = hg("eval", "--policy", "scripted", "--suites", "examples", "--settings",
                      "train", "--limit", "1", "--runs", "1", "--no-report", "--quiet",
                      "--out", str(tmp_path / "eval"))
    assert code == 0, output
    assert output.count("warning: the evaluation setting `train` is deprecated") == 1, output
    assert "--settings original --original oa" in output
    manifest = json.loads((tmp_path / "eval" / "manifest.json").read_text())
    assert list(manifest["settings"]) == ["train"]
    assert len(manifest["settings"]["train"]) == 18


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
        assert str(blocker) in output, (name, output)
        assert "not a directory" in output, (name, output)
        assert "hint:" in output, (name, output)
        assert done.returncode == 2, (name, output)
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
    assert "bogus" in caught.value.message
    assert "temperature" not in caught.value.message
    assert caught.value.hint is not None
    assert valid in caught.value.hint
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-m", "harnessgrid", "run", "--task", "examples/upper",
                           "--harness", "S0-T0-O0-C0-W0", "--policy", spec, "--policy-opt",
                           "bogus=1"], capture_output=True, text=True, timeout=120, env=env,
                          check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
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
    assert warning_lines[0].startswith("warning: ")
    assert "WITHOUT a sandbox" in warning_lines[0]


def test_help_paragraphs_wrap_at_the_terminal_not_at_the_source() -> None:
    """Found: at 80 columns, help broke sentences mid-line: typer kept the docstrings' line
    breaks ("re-run the same command to resume (with or" / "without --ray)") and wrapped
    again at the terminal's width."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "80"}
    for args in (["eval", "--help"], ["--help"], ["run", "--help"]):
        done = subprocess.run([sys.executable, "-m", "harnessgrid", *args], capture_output=True,
                              text=True, timeout=120, env=env, check=False)
        assert done.returncode == 0, done.stderr
        description = done.stdout.split("╭", 1)[0].splitlines()
        for line, after in itertools.pairwise(description):
            # a line cut short although its paragraph goes on
            assert not (line.strip() and after.strip() and len(line.strip()) < 50), (
                args, line, after)


def test_usage_errors_read_like_the_others() -> None:
    """Click's "Error: ..." becomes "error: ..." with a hint, as every other mistake."""
    code, output = hg("design", "show", "--no-such-flag")
    assert code == 2, output
    assert "error: No such option: --no-such-flag" in output, output
    assert "hint: see " in output, output
    assert "design show --help" in output, output
    assert "Error:" not in output


def test_an_unknown_config_key_suggests_the_field_and_blames_its_source(tmp_path: Path) -> None:
    """Found: an unknown key listed all 44 top-level keys, with no "did you mean", and blamed
    the YAML file for a key that came from ``--set``."""
    example = str(Path(__file__).resolve().parents[1] / "examples" / "tiny-sft.yaml")
    code, output = hg("train", example, "--set", "learnin_rate=0.1")
    assert code == 2, output
    assert ("error: --set learnin_rate=0.1: unknown key 'learnin_rate' (did you mean "
            "'learning_rate'?)") in output
    assert "tiny-sft.yaml" not in output
    assert "rollout_backend" not in output  # no 44 keys
    config = tmp_path / "c.yaml"
    config.write_text("model: tiny:tiny\nsft: {batchsize: 3}\n")
    code, output = hg("train", str(config), "--set", "steps=x")
    assert code == 2, output
    assert f"{config}: unknown key 'sft.batchsize' (did you mean 'sft.batch_size'?)" in output
    assert "--set steps=x: steps:" in output
    code, output = hg("train", str(config).replace("c.yaml", "c.yaml"), "--set", "qqqq=1")
    assert "unknown key 'qqqq'" in output
    assert "hint: top-level keys: model," in output


def test_readme_says_to_activate_the_environment_and_lists_config() -> None:
    """Found: after ``bash scripts/demo.sh``, ``harnessgrid --help`` said "command not
    found": README never said to activate the environment; ``--config`` was missing from its
    command table."""
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    two_commands = readme.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    assert ". .venv/bin/activate" in two_commands
    table = (root / "docs" / "cli.md").read_text().split("\n\n", 2)[2]
    assert "--config CODE" in table


def test_run_and_eval_share_their_episode_options_and_the_limits_defaults() -> None:
    """Issue 42: ``run`` and ``eval`` declared the policy, loader and limit options twice, with
    EpisodeLimits' defaults (30 turns, 600 s) copied into each. They are one declaration now
    (``harnessgrid.cli.episode_options``) whose defaults are the model's."""
    import click
    import typer

    from harnessgrid.cli import app
    from harnessgrid.cli.episode_options import MAX_TURNS, WALL_S
    from harnessgrid.engine.limits import EpisodeLimits

    assert (EpisodeLimits().max_turns, EpisodeLimits().wall_s) == (MAX_TURNS, WALL_S)
    group = typer.main.get_command(app)
    ctx = click.Context(group)
    shared = ("policy", "policy_opt", "suite_option", "judge", "max_turns", "wall_s",
              "unsafe_no_sandbox", "env", "show_durations")

    def options(name: str) -> dict[str, tuple[object, ...]]:
        command = group.get_command(ctx, name)  # type: ignore[attr-defined]
        return {p.name: (tuple(p.opts), p.default, getattr(p, "help", None), p.required)
                for p in command.params if p.name in shared}

    run, evaluate = options("run"), options("eval")
    assert set(run) == set(shared)
    assert run == evaluate
    assert run["max_turns"][1] == EpisodeLimits().max_turns
    assert run["wall_s"][1] == EpisodeLimits().wall_s
    assert run["show_durations"][1] is False  # EpisodeLimits' default: durations hidden
    assert EpisodeLimits().durations == "hidden"
