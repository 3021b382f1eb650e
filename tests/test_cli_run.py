"""``harnessgrid run`` and the embedding API, end to end in fresh processes, with the test
levels and a one-task suite installed as a real entry-point plugin."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from episode_stubs import Bound, EpisodeStub
from plugin_dist import write_dist_info

import harnessgrid as hg
from harnessgrid.errors import ConfigError
from harnessgrid.models import ModelTurn
from harnessgrid.policies import PolicyRequest

TESTS = Path(__file__).parent
PROBE = ("system_prompt=probe,tool_interface=probe_text,observation=probe,context=probe,"
         "workflow=probe")


@pytest.fixture
def plugin_env(tmp_path: Path) -> dict[str, str]:
    write_dist_info(tmp_path, "hg-probe", {"probe_levels": "levels_for_tests",
                                          "probe_suite": "probe_suite"})
    return {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{TESTS}"}


def hg_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harnessgrid", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_run_task_json(plugin_env: dict[str, str]) -> None:
    out = hg_cli(plugin_env, "run", "--task", "probe/upper", "--harness", PROBE,
                 "--policy", "scripted", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["score"] == 1.0
    assert data["termination"] == "finished"
    assert data["subscores"] == {"exists": 1.0, "content": 1.0}
    assert data["turns"] == 4
    assert data["tokens_in"] == 0  # the oracle spends no tokens
    assert set(data) >= {"score", "subscores", "termination", "turns", "tokens_in",
                         "tokens_out", "wall_s"}


def test_run_show_and_save(plugin_env: dict[str, str], tmp_path: Path) -> None:
    save = tmp_path / "traj.jsonl"
    out = hg_cli(plugin_env, "run", "--task", "probe/upper", "--harness", PROBE,
                 "--policy", "null", "--show", "--save", str(save))
    assert out.returncode == 0, out.stderr
    assert "Write the upper-cased content" in out.stdout  # the task as the model saw it
    assert "CALL" in out.stdout  # what the model wrote
    assert "termination" in out.stdout
    (traj,) = hg.TrajectoryStore(save).load()
    assert traj.score == 0.0
    assert traj.policy == "null"


def test_run_shows_durations_only_when_asked(tmp_path: Path) -> None:
    """``harnessgrid run --show-durations`` lets the annotated header carry each command's
    time; without it the header has none (``EpisodeLimits.durations``: a run repeats)."""
    headers = {}
    for flag in ((), ("--show-durations",)):
        save = tmp_path / f"traj{len(flag)}.jsonl"
        out = hg_cli(dict(os.environ), "run", "--task", "examples/upper", "--harness",
                     "S0-T0-O2-C0-W0", "--policy", "scripted", "--save", str(save), *flag)
        assert out.returncode == 0, out.stderr
        (traj,) = hg.TrajectoryStore(save).load()
        headers[bool(flag)] = [m.content.split("\n", 1)[0] for m in traj.history
                               if m.content.startswith("[ok] ")]
    timed = re.compile(r" \| \d+\.\d\ds \| ")
    assert headers[False]
    assert not any(timed.search(h) for h in headers[False])
    assert headers[True]
    assert all(timed.search(h) for h in headers[True])


def test_user_mistakes_get_a_message_not_a_traceback(plugin_env: dict[str, str]) -> None:
    cases = [
        (["--task", "probe/nope", "--harness", PROBE, "--policy", "scripted"],
         "suite 'probe' has no task 'nope'"),
        (["--task", "probe/upper", "--harness", "S9-T0-O0-C0-W0", "--policy", "scripted"],
         "bad harness code"),
        (["--task", "probe/upper", "--harness", PROBE, "--policy", "gpt5"],
         "unknown policy backend 'gpt5'"),
        (["--task", "nosuite/x", "--harness", PROBE, "--policy", "scripted"],
         "unknown task suite 'nosuite'"),
        (["--harness", PROBE, "--policy", "scripted"], "give either --task"),
    ]
    for args, message in cases:
        out = hg_cli(plugin_env, "run", *args)
        assert out.returncode == 2, (args, out.stderr)
        assert message in out.stderr, out.stderr
        assert "Traceback" not in out.stderr, out.stderr


def test_run_ad_hoc_instruction_on_a_copy(plugin_env: dict[str, str], tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("keep me\n")
    out = hg_cli(plugin_env, "run", "--instruction", "Look around.", "--workspace", str(project),
                 "--harness", PROBE, "--policy", "null", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    # null sends nothing (the harness gives up on its empty replies); no grader: no score
    assert data["termination"] == "format_errors"
    assert data["score"] is None
    assert data["grading"] == "ungraded"
    assert data["passed"] is None
    assert (project / "notes.txt").read_text() == "keep me\n"


class WriteThenFinish(EpisodeStub):
    """A policy writing one file through whatever tool interface the harness has."""

    spec = "write-then-finish"

    async def play(self, request: PolicyRequest, episode: Bound) -> ModelTurn:
        action = (hg.Action.of("write", path="result.txt", content="done\n")
                  if request.state.turn == 0 else hg.Action.of("finish"))
        return episode.harness.render_action(action, f"c{request.state.turn}")


def test_embedding_api_copy_and_in_place(plugin_env: dict[str, str], on_sys_path: Callable[[Path], None]) -> None:
    """`hg.run_agent` works on a copy by default and in place only when asked."""
    plugin_dir = Path(plugin_env["PYTHONPATH"].split(os.pathsep)[0])
    on_sys_path(plugin_dir)
    project = plugin_dir / "project"
    project.mkdir()
    traj = hg.run_agent("Write result.txt", project, harness=PROBE, policy=WriteThenFinish())
    assert traj.termination == "finished"
    assert traj.task_id == "adhoc"
    assert [c.action.kind for t in traj.turns for c in t.calls] == ["write", "finish"]
    assert not (project / "result.txt").exists()
    kept = hg.run_agent("Write result.txt", project, harness=PROBE, policy=WriteThenFinish(),
                        keep_copy=True)
    assert (Path(kept.meta["workspace"]) / "result.txt").read_text() == "done\n"
    # found: the kept copy was the episode's scratch tmpfs mount, which rmtree cannot remove
    # and the next process would have swept away as stale
    assert not os.path.ismount(kept.meta["workspace"])
    assert "hg-ws-" not in kept.meta["workspace"]
    shutil.rmtree(kept.meta["workspace"])
    hg.run_agent("Write result.txt", project, harness=PROBE, policy=WriteThenFinish(),
                 in_place=True)
    assert (project / "result.txt").read_text() == "done\n"
    with pytest.raises(ConfigError, match="instruction is empty"):
        hg.run_agent("  ", project, harness=PROBE, policy="null")
    # found: the oracle "ran" an ad-hoc instruction by finishing at once, exit 0
    with pytest.raises(ConfigError, match="scripted policy plays a task's oracle plan") as caught:
        hg.run_agent("Write result.txt", project, harness=PROBE, policy="scripted")
    assert caught.value.hint is not None
    assert "--task" in caught.value.hint


def test_hf_policy_episode_through_the_cli(tmp_path: Path) -> None:
    """`harnessgrid model tiny` builds a model offline; `run --policy hf:DIR` plays real turns
    with it and records exact token ids, each prompt extending the previous prompt+completion
    within a segment."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    built = subprocess.run([sys.executable, "-m", "harnessgrid", "model", "tiny",
                            str(tmp_path / "m")], env=env, capture_output=True, text=True,
                           timeout=120)
    assert built.returncode == 0, built.stderr
    save = tmp_path / "t.jsonl"
    out = subprocess.run([sys.executable, "-m", "harnessgrid", "run", "--task", "examples/upper",
                          "--harness", "S0-T1-O0-C0-W0", "--policy", f"hf:{tmp_path / 'm'}",
                          "--policy-opt", "max_new_tokens=12", "--policy-opt", "seed=1",
                          "--max-turns", "3", "--json", "--save", str(save)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["tokens_in"] > 0
    assert data["tokens_out"] > 0
    assert data["termination"] in {"max_turns", "format_errors", "finished"}
    (traj,) = hg.TrajectoryStore(save).load()
    records = [t.tokens for t in traj.turns]
    assert all(r is not None and len(r.logprobs) == len(r.completion_ids) for r in records)
    for prev, cur in itertools.pairwise(records):
        assert prev is not None
        assert cur is not None
        if cur.segment == prev.segment:
            assert cur.prompt_ids[: len(prev.prompt_ids) + len(prev.completion_ids)] == (
                prev.prompt_ids + prev.completion_ids)


def test_embed_chat_takes_policy_options_as_run_does(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Found: ``examples/embed_chat.py --policy hf:DIR --policy-opt max_new_tokens=32`` passed
    "32" as a string and died with ``TypeError: '<' not supported between instances of 'str'
    and 'int'``; it now reads options with ``run``'s parser. Its docstring says how to try it
    without an API key."""
    example = TESTS.parent / "examples" / "embed_chat.py"
    doc = example.read_text()
    assert "harnessgrid model tiny" in doc
    assert "--policy hf:" in doc
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("hello\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, str(example), str(project), "--policy",
                           f"hf:{tiny_model_dir}", "--policy-opt", "max_new_tokens=32",
                           "--policy-opt", "seed=1", "--harness", "S0-T1-O0-C0-W0"],
                          input="hello\n\n", capture_output=True, text=True, timeout=300,
                          env=env, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stdout
    assert "turns," in done.stdout, done.stdout
    bad = subprocess.run([sys.executable, str(example), str(project), "--policy", "null",
                          "--policy-opt", "novalue"], capture_output=True, text=True,
                         timeout=120, env=env, check=False)
    assert bad.returncode == 2, bad.stderr
    assert "bad option 'novalue'" in bad.stderr, bad.stderr


def test_a_missing_workspace_hints_at_the_command_line(plugin_env: dict[str, str],
                                                       tmp_path: Path) -> None:
    """Found: ``run --workspace /nope`` hinted at the Python call ``Workspace.create()``."""
    out = hg_cli(plugin_env, "run", "--instruction", "x", "--workspace", str(tmp_path / "nope"),
                 "--harness", PROBE, "--policy", "null")
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert f"--workspace {tmp_path / 'nope'} does not exist" in out.stderr
    assert "Workspace.create" not in out.stderr
    assert "mkdir" in out.stderr


def test_policy_help_names_every_built_in_backend(plugin_env: dict[str, str]) -> None:
    """Found: ``--policy``'s help omitted ``openai:``."""
    for command in ("run", "eval"):
        out = hg_cli({**plugin_env, "COLUMNS": "200"}, command, "--help")
        assert out.returncode == 0, out.stderr
        for scheme in ("scripted", "null", "openai:", "anthropic:", "litellm:", "hf:", "vllm:"):
            assert scheme in out.stdout, (command, scheme)
