"""README.md's Python blocks run as written, against a local OpenAI-compatible server.

Each block runs as a script in a fresh interpreter, in a directory holding ``./my-project``.
The only change is the environment: ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` (which both the
``openai:`` and ``litellm:openai/`` policies honour) point at a real HTTP server this test
starts (``tests/servers.py``), which plays a careful agent: it calls the product tools it is
offered once, then finishes through whatever finish tool the harness gives it.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from servers import Canned, OpenAICompatServer, RecordedRequest, openai_text, openai_tool_call

import harnessgrid as hg
from harnessgrid.sandboxing.sandbox import sandbox_available

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
KEY = "sk-readme-test"

pytestmark = pytest.mark.skipif(not sandbox_available(), reason="the examples run episodes")


def careful_agent(request: RecordedRequest) -> Canned:
    """Each product tool offered called once, then the harness's finish tool, or a plain
    answer where there is none; arguments are the required ones of each tool's schema."""
    body = request.json
    tools = {t["function"]["name"]: t["function"] for t in body.get("tools") or []}
    called = {c["function"]["name"] for m in body["messages"] if m["role"] == "assistant"
              for c in m.get("tool_calls") or []}
    for name in ("lookup_order",):
        if name in tools and name not in called:
            return openai_tool_call(name, required_arguments(tools[name], "A17"))
    if "finish" in tools:
        return openai_tool_call("finish", required_arguments(tools["finish"], "Order shipped."))
    return openai_text("Order A17 has shipped.")


def required_arguments(tool: dict[str, Any], text: str) -> dict[str, str]:
    return {name: text for name in tool["parameters"].get("required", [])}


@pytest.fixture
def server() -> Any:
    with OpenAICompatServer([careful_agent] * 50, api_key=KEY) as srv:
        yield srv


def run_block(block: str, where: Path, server: OpenAICompatServer) -> subprocess.CompletedProcess[str]:
    project = where / "my-project"
    project.mkdir()
    (project / "app.log").write_text("ERROR disk full\nINFO ok\nERROR timeout\n")
    env = {**os.environ, "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.base_url + "/v1",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-c", block], cwd=where, env=env, text=True,
                          capture_output=True, timeout=600, check=False)


def test_the_readme_has_the_blocks_this_test_knows() -> None:
    assert len(BLOCKS) == 2, "a README block was added or removed: teach this test about it"
    assert "hg.run_agent(" in BLOCKS[0]
    assert "hg.Session(" in BLOCKS[1]


def test_the_quickstart_block_designs_a_schedule_and_runs_an_agent_on_a_copy(
        tmp_path: Path, server: OpenAICompatServer) -> None:
    out = run_block(BLOCKS[0], tmp_path, server)
    assert out.returncode == 0, out.stderr
    codes, summary = out.stdout.splitlines()[-2:]
    oa = {c.code for c in hg.orthogonal_design(hg.FactorSpace.default()).configs}
    step = json.loads(codes.replace("'", '"'))
    assert len(step) == 2
    assert set(step) <= oa  # tasks_per_step rollouts, through OA harnesses
    assert summary.split()[0] == "finished", out.stdout
    assert server.requests
    assert all(r.headers["authorization"] == f"Bearer {KEY}"
                                   for r in server.requests)
    assert sorted(p.name for p in (tmp_path / "my-project").iterdir()) == ["app.log"]


def test_the_product_block_calls_the_product_tool_and_streams_a_follow_up(
        tmp_path: Path, server: OpenAICompatServer) -> None:
    out = run_block(BLOCKS[1], tmp_path, server)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("finished"), out.stdout
    sent = [r.json for r in server.requests]
    assert any(t["function"]["name"] == "lookup_order" for t in sent[0]["tools"])
    results = [m["content"] for body in sent for m in body["messages"] if m["role"] == "tool"]
    assert any("shipped" in json.dumps(content) for content in results)
    assert any(body.get("stream") for body in sent)  # the follow-up was streamed
    # Each event printed as a dict (after the streamed text, on the same line for deltas).
    events = [ast.literal_eval(line[line.index("{'"):]) for line in out.stdout.splitlines()
              if "{'" in line]
    assert events, out.stdout
    assert events[-1]["type"] == "finished", out.stdout
    assert all(json.loads(json.dumps(event)) == event for event in events)


def test_the_readme_is_read_in_ten_minutes_and_opens_with_the_two_commands() -> None:
    """Issue 43: README had grown to 849 lines of reference before the two commands and the
    first API call. It stays under 250 lines, its first screen holds both commands, and every
    page it links to exists."""
    text = README.read_text()
    assert len(text.splitlines()) < 250
    first_screen = "\n".join(text.splitlines()[:30])
    assert "bash scripts/demo.sh" in first_screen
    assert "bash scripts/test.sh" in first_screen
    links = re.findall(r"\]\(((?:docs/)?[\w./-]+\.(?:md|png))\)", text)
    assert any(link.startswith("docs/") for link in links)
    assert [link for link in links if not (README.parent / link).is_file()] == []
