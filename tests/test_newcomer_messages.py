"""Messages a newcomer met that misled (issue 43, item 4): each mistake gets a message that
names what is wrong and a fix that applies where the user is (the CLI or Python)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_in_process import hg_cli

ROOT = Path(__file__).resolve().parents[1]


def test_model_check_of_a_missing_run_directory_says_it_does_not_exist(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """README's own example before its run exists: it said "Repo id must be in the form
    'repo_name' or 'namespace/repo_name'" - a hub name has one slash at most, so a longer
    path, or one under a directory that exists, is a missing local path."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    for path in ("runs/tiny-sft/final", "runs/tiny-sft", "a/b/c"):
        code, _, err = hg_cli(capsys, monkeypatch, "model", "check", path)
        assert code == 2, path
        assert f"no such file or directory {path!r}" in err
        assert "Repo id" not in err
        assert "OUTPUT_DIR/final" in err  # the hint says what a checkpoint directory is


def test_a_bad_level_index_lists_the_levels_by_number_and_name() -> None:
    from harnessgrid.errors import ConfigError
    from harnessgrid.plugins.micro import MICRO_SPACE

    with pytest.raises(ConfigError) as caught:
        MICRO_SPACE.parse("S0-T0-O0-C0-W7")
    assert "got 7" in str(caught.value)
    hint = caught.value.hint or ""
    assert hint == "levels are 0 = micro_react, 1 = micro_plan, 2 = micro_check"


@pytest.mark.parametrize("script", ["embed_chat.py", "scripted_smoke.py"])
def test_example_help_describes_the_example_in_whole_sentences(script: str) -> None:
    """``--help`` showed the docstring's first line, which stopped mid-sentence."""
    done = subprocess.run([sys.executable, str(ROOT / "examples" / script), "--help"],
                          capture_output=True, text=True, timeout=120, check=True)
    description = done.stdout.split("\n\n")[1]  # after the usage block
    assert description.rstrip().endswith((".", ")."))
    assert len(description.split()) > 8


def test_a_session_refuses_product_tools_its_harness_cannot_show_before_it_starts(
        tmp_path: Path) -> None:
    """The demo's micro harnesses have no syntax for product tools: the refusal came as a
    long asyncio traceback from inside the first run; now ``Session(...)`` itself raises it,
    and so does a tool registered later (the session stays usable without it)."""
    import harnessgrid as hg
    from harnessgrid.errors import ConfigError

    def lookup_order(order_id: str) -> str:
        """Look up an order."""
        return order_id

    with pytest.raises(ConfigError, match="cannot present product tools"):
        hg.Session(tmp_path, harness="micro:S0-T0-O0-C0-W0", policy="null",
                   tools=[lookup_order])
    session = hg.Session(tmp_path, harness="micro:S0-T0-O0-C0-W0", policy="null")
    with pytest.raises(ConfigError, match="cannot present product tools"):
        session.tool(lookup_order)
    assert session.workspace == tmp_path  # nothing started
    session.close()
    # a harness that can present them accepts the same tool, here and later
    hg.Session(tmp_path, harness="S0-T0-O0-C0-W0", policy="null", tools=[lookup_order]).close()
    later = hg.Session(tmp_path, harness="S0-T0-O0-C0-W0", policy="null")
    later.tool(lookup_order)
    later.close()


def test_a_missing_key_hint_works_from_python_and_from_the_command_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_agent`` without a key hinted only at the CLI flag ``--policy-opt``."""
    from harnessgrid.errors import ConfigError
    from harnessgrid.policies.openai_compat import OpenAIPolicy

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError) as caught:
        OpenAIPolicy("gpt-4o-mini")
    hint = caught.value.hint or ""
    assert "policy_options" in hint  # from Python
    assert "--policy-opt" in hint  # from the command line
    assert "api_key=..." in hint


def test_a_judge_no_task_uses_is_named_unused_and_one_that_grades_needs_its_key(
        tmp_path: Path) -> None:
    """Issue 43, item 5: ``--judge`` refused to start without its key, yet a task without a
    judged rubric ran and exited 0 without a word. Intended: the key is needed where a task
    is graded by the judge; where none is, the run goes on and says the judge is not used."""
    import os

    fixtures = ROOT / "tests" / "fixtures" / "pinchbench"
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}

    def run(task: str, policy: str = "scripted") -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "harnessgrid", "run", "--task", task,
                               "--policy", policy, "--harness", "S0-T0-O0-C0-W0",
                               "--judge", "openai/gpt-4o-mini"], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=300, check=False)

    unused = run("examples/upper")
    assert unused.returncode == 0, unused.stderr
    assert ("warning: --judge openai/gpt-4o-mini grades none of these 1 task(s) (graded: "
            "automated), so it is not called and needs no key") in unused.stderr
    judged = run(f"pinchbench:{fixtures}/task_02_meeting_notes", "null")  # judged: needs a key
    assert judged.returncode == 2, judged.stderr
    assert "OPENAI_API_KEY" in judged.stderr
    assert "not called" not in judged.stderr
