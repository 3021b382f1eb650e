"""The built-in system_prompt levels: each carries the other factors' text verbatim, and the
three differ in ways a policy could overfit to (length, structure, example)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harnessgrid.episode import PromptContext
from harnessgrid.levels import SystemPromptLevel
from harnessgrid.plugin_system.registry import PluginManager
from harnessgrid.plugins.factors.system_prompt.guidelines import GuidelinesPrompt
from harnessgrid.plugins.factors.system_prompt.minimal import MinimalPrompt
from harnessgrid.plugins.factors.system_prompt.stepwise import StepwisePrompt

MODULES = [f"harnessgrid.plugins.factors.system_prompt.{m}"
           for m in ("minimal", "guidelines", "stepwise")]
LEVELS: list[SystemPromptLevel] = [MinimalPrompt(), GuidelinesPrompt(), StepwisePrompt()]
CTX = PromptContext(
    mount_path="/workspace",
    tool_section="TOOLS: call read_file(path) or run(command).\n<weird> {json} ```",
    workflow_section="WORKFLOW: plan first, then act.",
    example_call='<read_file path="notes.txt"/>')

sections = st.text(alphabet=st.characters(codec="utf-8"), max_size=200)


@pytest.mark.parametrize("level", LEVELS, ids=lambda lv: lv.name)
@given(tool=sections, workflow=sections, mount=st.sampled_from(["/workspace", "/tmp/w", "/x y"]),
       example=sections)
def test_sections_included_verbatim(level: SystemPromptLevel, tool: str, workflow: str,
                                    mount: str, example: str) -> None:
    text = level.render(PromptContext(mount, tool, workflow, example))
    assert tool in text
    assert workflow in text
    assert level.render(PromptContext(mount, tool, workflow, example)) == text  # deterministic


def test_the_three_prompts_differ() -> None:
    texts = [lv.render(CTX) for lv in LEVELS]
    assert len(set(texts)) == 3
    own = [t.replace(CTX.tool_section, "").replace(CTX.workflow_section, "") for t in texts]
    assert len(own[0]) < len(own[1])
    assert len(own[0]) < len(own[2])


def test_minimal_is_two_sentences_of_its_own() -> None:
    own = MinimalPrompt().render(CTX).split(CTX.tool_section)[0].strip()
    assert len(re.findall(r"[.!?](\s|$)", own)) <= 3
    assert len(own) < 300
    assert "finish" in own
    assert "/workspace" in own


def test_guidelines_has_the_required_sections() -> None:
    text = GuidelinesPrompt().render(CTX)
    headers = [ln.lstrip("# ").strip().lower() for ln in text.splitlines() if ln.startswith("#")]
    for name in ("workspace", "tool use", "verification", "finishing"):
        assert name in headers
    assert "/workspace" in text.split("## Tool use")[0]


def test_stepwise_has_procedure_and_example() -> None:
    text = StepwisePrompt().render(CTX)
    assert CTX.example_call in text
    steps = re.findall(r"^(\d+)\. ", text, re.MULTILINE)
    assert steps[:5] == ["1", "2", "3", "4", "5"]
    assert "You are " in text.split("\n")[0]  # persona first
    no_example = StepwisePrompt().render(PromptContext("/w", "T", "W", ""))
    assert "Worked example" in no_example
    assert "T" in no_example


def test_empty_sections_leave_no_blank_headers() -> None:
    text = GuidelinesPrompt().render(PromptContext("/w", "", "", ""))
    assert "## Tools" not in text
    assert "## Workflow" not in text
    assert not MinimalPrompt().render(PromptContext("/w", "", "", "")).endswith("\n")


def test_registered_as_separate_plugins() -> None:
    reg = PluginManager(builtins=MODULES, load_external=False).registry()
    assert reg.levels("system_prompt") == ["guidelines", "minimal", "stepwise"]
    for level in LEVELS:
        assert reg.level("system_prompt", level.name) is type(level)
