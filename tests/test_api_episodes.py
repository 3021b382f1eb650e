"""Whole episodes with API policies over real HTTP: the litellm and openai policies against a
local OpenAI-compatible server through composed harnesses (via the CLI and in process), and the
anthropic policy against a local Messages-API server through the Claude Code adapter. The
servers replay canned model turns, malformed ones included, and record what the client sent."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
from servers import (
    AnthropicCompatServer,
    OpenAICompatServer,
    anthropic_text,
    anthropic_tool_use,
    openai_raw_tool_call,
    openai_text,
    openai_tool_call,
)

import harnessgrid as hg
from harnessgrid.plugins.tasks.examples import UPPER_TASK
from harnessgrid.transcripts import session_events

pytest.importorskip("litellm")  # the [api] extra; installed by scripts/test.sh


def test_litellm_episode_through_the_cli_with_a_malformed_call() -> None:
    """function_calling harness, litellm policy: a call with broken JSON arguments becomes a
    format-error observation, the model recovers, and the task is solved and graded."""
    script = [
        openai_tool_call("read_file", {"path": "in.txt"}),
        openai_raw_tool_call("run_command", '{"command": "tr a-z A-Z < in.txt'),  # cut JSON
        openai_tool_call("run_command", {"command": "tr a-z A-Z < in.txt > out.txt"}),
        openai_tool_call("finish", {"summary": "done"}),
    ]
    with OpenAICompatServer(script) as server:
        out = subprocess.run(
            [sys.executable, "-m", "harnessgrid", "run", "--task", "examples/upper",
             "--harness", "S0-T0-O0-C0-W0", "--policy", "litellm:openai/test-model",
             "--policy-opt", f"api_base={server.base_url}/v1", "--policy-opt", "api_key=x",
             "--json"],
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
            capture_output=True, text=True, timeout=180)
        requests = [r.json for r in server.requests]
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["score"] == 1.0
    assert result["termination"] == "finished"
    assert result["turns"] == 4
    assert result["tokens_in"] == 4 * 11  # from the servers' usage
    # What the model saw: native tools, and its broken call answered by a tool message.
    assert {t["function"]["name"] for t in requests[0]["tools"]} >= {"read_file", "finish"}
    third = requests[2]["messages"]
    error_reply = [m for m in third if m["role"] == "tool"][-1]
    assert "not valid JSON" in error_reply["content"]
    assert third[-2]["tool_calls"][0]["function"]["arguments"].startswith('{"command"')


def test_anthropic_episode_through_the_claude_code_adapter() -> None:
    """The anthropic policy drives adapter:claude-code: Read, Bash, an Edit refused because of
    a relative path, then a text-only reply ends the episode, as in the real shell."""
    script = [
        anthropic_tool_use("Read", {"file_path": "/workspace/in.txt"}),
        anthropic_tool_use("Bash", {"command": "tr a-z A-Z < in.txt > out.txt"}),
        anthropic_tool_use("Read", {"file_path": "out.txt"}),  # relative: refused
        anthropic_text("out.txt now holds the upper-cased text."),
    ]
    with AnthropicCompatServer(script) as server:
        policy = hg.make_policy("anthropic:claude-test", {"base_url": server.base_url,
                                                          "api_key": "x", "max_retries": 0})
        traj = asyncio.run(hg.run_episode(hg.resolve_harness("adapter:claude-code"), UPPER_TASK,
                                          policy))
        requests = [r.json for r in server.requests]
    assert traj.termination == "finished", traj.error
    assert traj.score == 1.0, traj.error
    # The order is the adapter's (the emulated shell's), not this test's concern.
    assert {t["name"] for t in requests[0]["tools"]} >= {"Read", "Write", "Edit", "Bash"}
    assert isinstance(requests[0]["system"], (str, list))  # system prompt at the top level
    refused = requests[3]["messages"][-1]["content"][0]
    assert refused["type"] == "tool_result"
    assert "<tool_use_error>" in str(refused["content"])
    names = [p["name"] for e in session_events(traj) if e.get("type") == "message"
             for p in e["message"]["content"] if p.get("type") == "toolCall"]
    assert names == ["Read", "Bash", "Read"]


@pytest.mark.slow  # a CLI process: seconds of imports
def test_openai_scheme_native_tools_through_the_cli() -> None:
    """``--policy openai:MODEL`` with base_url and no key (a local server needs none): native
    tool calls, a malformed one answered as a format error, token usage from the server."""
    script = [
        openai_tool_call("read_file", {"path": "in.txt"}),
        openai_raw_tool_call("run_command", '{"command": '),  # cut JSON
        openai_tool_call("run_command", {"command": "tr a-z A-Z < in.txt > out.txt"}),
        openai_tool_call("finish", {"summary": "done"}),
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    with OpenAICompatServer(script) as server:
        out = subprocess.run(
            [sys.executable, "-m", "harnessgrid", "run", "--task", "examples/upper",
             "--harness", "S0-T0-O0-C0-W0", "--policy", "openai:test-model",
             "--policy-opt", f"base_url={server.base_url}/v1", "--json"],
            env=env, capture_output=True, text=True, timeout=180)
        requests = [r.json for r in server.requests]
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert (result["score"], result["termination"], result["policy"]) == (
        1.0, "finished", "openai:test-model")
    assert result["turns"] == 4
    assert result["tokens_in"] == 4 * 11
    assert {t["function"]["name"] for t in requests[0]["tools"]} >= {"read_file", "finish"}
    error_reply = [m for m in requests[2]["messages"] if m["role"] == "tool"][-1]
    assert "not valid JSON" in error_reply["content"]


def test_openai_scheme_text_tool_calls_in_process() -> None:
    """The xml_tags interface: calls written in the reply's text, no tools on the wire."""
    script = [
        openai_text("<exec>\ntr a-z A-Z < in.txt > out.txt\n</exec>"),
        openai_text("<done>\nupper-cased\n</done>", prompt_tokens=40, completion_tokens=9),
    ]
    with OpenAICompatServer(script) as server:
        policy = hg.make_policy("openai:test-model", {"base_url": server.base_url + "/v1",
                                                      "max_retries": 0})
        traj = asyncio.run(hg.run_episode(hg.resolve_harness("S0-T1-O0-C0-W0"), UPPER_TASK,
                                          policy))
        requests = [r.json for r in server.requests]
    assert traj.termination == "finished", traj.error
    assert traj.score == 1.0, traj.error
    assert (traj.tokens_in, traj.tokens_out) == (11 + 40, 7 + 9)
    assert all("tools" not in body for body in requests)
    assert "<exec>" in requests[0]["messages"][0]["content"]  # the format, in the prompt
