"""The API policies through their real clients against the scripted local servers (no mocks).

Each test starts a server with a script, points a policy at it, and checks both what the policy
returned and what the server received on the wire.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from servers import (
    AnthropicCompatServer,
    Canned,
    OpenAICompatServer,
    anthropic_error,
    anthropic_message,
    anthropic_text,
    anthropic_tool_use,
    http_error,
    openai_call,
    openai_completion,
    openai_text,
    openai_tool_call,
)

from harnessgrid.errors import ConfigError, PolicyError
from harnessgrid.models import Message, ModelTurn, ToolCall, ToolSpec
from harnessgrid.policies import Policy, PolicyRequest, make_policy
from harnessgrid.policies.api import AnthropicPolicy, LiteLLMPolicy, to_anthropic
from harnessgrid.policies.openai_compat import OpenAIPolicy

# Skip without importing: the policies must be the first to import litellm (see api.py).
if not all(importlib.util.find_spec(name) for name in ("litellm", "anthropic", "openai")):
    pytest.skip("needs the api extra: pip install 'harnessgrid[api]'", allow_module_level=True)

# litellm's pydantic models warn at import time about their own TypedDicts; not our concern.
pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly. qualifier:UserWarning")

TOOLS = (
    ToolSpec(name="read_file", description="Read a file.",
             parameters={"type": "object", "properties": {"path": {"type": "string"}},
                         "required": ["path"]}),
    ToolSpec(name="run", description="Run a shell command.",
             parameters={"type": "object", "properties": {"command": {"type": "string"}},
                         "required": ["command"]}),
)
SYSTEM = Message(role="system", content="You are a coding agent.")
TASK = Message(role="user", content="Read a.txt", kind="task")
FAST = {"backoff_s": 0.01, "timeout_s": 10.0}

#: A native-tools conversation: a turn with two calls, both answered, then a reminder.
HISTORY = [
    SYSTEM,
    TASK,
    Message(role="assistant", content="Reading both.", tool_calls=(
        ToolCall(id="call_1", name="read_file", arguments={"path": "a.txt"}),
        ToolCall(id="call_2", name="run", arguments={"command": "ls"}))),
    Message(role="tool", content="hello", tool_call_id="call_1", name="read_file"),
    Message(role="tool", content="a.txt", tool_call_id="call_2", name="run"),
    Message(role="user", content="Keep going.", kind="reminder"),
]


def request(messages: Sequence[Message] = (SYSTEM, TASK), *, native: bool = True,
            max_tokens: int | None = None, seconds_left: float | None = None) -> PolicyRequest:
    """These policies ignore harness, task and state: stand-ins do. ``seconds_left`` sets the
    deadline the runtime derives from the episode's wall limit."""
    stand_in: Any = SimpleNamespace()
    deadline = None if seconds_left is None else time.monotonic() + seconds_left
    return PolicyRequest(messages=list(messages), tools=TOOLS, native_tools=native,
                         state=stand_in, new_segment=False,
                         max_tokens=max_tokens, deadline=deadline)


def act(policy: Policy, req: PolicyRequest | None = None) -> ModelTurn:
    return asyncio.run(policy.act(req or request()))


def litellm_policy(srv: OpenAICompatServer, **options: Any) -> LiteLLMPolicy:
    return LiteLLMPolicy("openai/test-model", api_base=srv.base_url + "/v1", api_key="x",
                         **{**FAST, **options})


def openai_policy(srv: OpenAICompatServer, **options: Any) -> OpenAIPolicy:
    return OpenAIPolicy("test-model", base_url=srv.base_url + "/v1", api_key="x",
                        **{**FAST, **options})


def anthropic_policy(srv: AnthropicCompatServer, **options: Any) -> AnthropicPolicy:
    return AnthropicPolicy("claude-test", base_url=srv.base_url, api_key="x",
                           **{**FAST, **options})


# --- litellm ------------------------------------------------------------------------------------


def test_litellm_text_reply_tokens_and_request() -> None:
    with OpenAICompatServer([openai_text("hello", prompt_tokens=31, completion_tokens=5)]) as srv:
        policy = litellm_policy(srv, temperature=0.3, max_tokens=100)
        turn = act(policy, request(native=False, max_tokens=50))
    assert policy.spec == "litellm:openai/test-model"
    assert isinstance(policy, Policy)
    assert turn == ModelTurn(content="hello", tokens_in=31, tokens_out=5, finish_reason="stop")
    (sent,) = srv.requests
    body = sent.json
    assert body["model"] == "test-model"
    assert body["temperature"] == 0.3
    assert body["max_tokens"] == 50  # the request may lower the limit
    assert body["messages"] == [SYSTEM.openai(), TASK.openai()]
    assert "tools" not in body  # tools described in the prompt: none on the wire


def test_litellm_tool_call_and_wire_format() -> None:
    with OpenAICompatServer([openai_tool_call("read_file", {"path": "b.txt"}, content="Next.",
                                              call_id="call_9")]) as srv:
        turn = act(litellm_policy(srv), request(HISTORY))
    assert turn.content == "Next."
    assert turn.finish_reason == "tool_calls"
    assert turn.tool_calls == (ToolCall(id="call_9", name="read_file", arguments={"path": "b.txt"}),)
    body = srv.requests[0].json
    assert body["tools"] == [t.openai() for t in TOOLS]
    assistant, *results, reminder = body["messages"][2:]
    assert assistant["role"] == "assistant"
    assert [(c["id"], c["type"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in assistant["tool_calls"]] == [
        ("call_1", "function", "read_file", {"path": "a.txt"}),
        ("call_2", "function", "run", {"command": "ls"})]
    assert [(r["role"], r["tool_call_id"], r["content"]) for r in results] == [
        ("tool", "call_1", "hello"), ("tool", "call_2", "a.txt")]
    assert reminder == {"role": "user", "content": "Keep going."}


def test_litellm_malformed_and_unknown_calls_are_kept() -> None:
    calls = [openai_call("read_file", '{"path": "a.txt"', "c1"),  # truncated JSON
             openai_call("read_file", "[1, 2]", "c2"),  # JSON, not an object
             openai_call("no_such_tool", {"x": 1}, "c3"),  # the harness decides about names
             openai_call("run", "", "c4")]  # blank: a call without arguments
    with OpenAICompatServer([openai_completion(None, calls)]) as srv:
        turn = act(litellm_policy(srv))
    bad_json, not_object, unknown, blank = turn.tool_calls
    assert bad_json.arguments == {}
    assert bad_json.raw_arguments == '{"path": "a.txt"'
    assert bad_json.parse_error
    assert "not valid JSON" in bad_json.parse_error
    assert not_object.parse_error
    assert "JSON object" in not_object.parse_error
    assert not_object.raw_arguments == "[1, 2]"
    assert unknown == ToolCall(id="c3", name="no_such_tool", arguments={"x": 1})
    assert blank == ToolCall(id="c4", name="run")
    assert turn.content == ""


def test_litellm_empty_turns() -> None:
    with OpenAICompatServer([openai_text(""), openai_completion(None)]) as srv:
        policy = litellm_policy(srv)
        turns = [act(policy), act(policy)]
    assert [(t.content, t.tool_calls) for t in turns] == [("", ()), ("", ())]


@pytest.mark.parametrize("status", [429, 500, 503])
def test_litellm_retries_transient_errors(status: int) -> None:
    with OpenAICompatServer([http_error(status), http_error(status), openai_text("ok")]) as srv:
        turn = act(litellm_policy(srv))
    assert turn.content == "ok"
    assert len(srv.requests) == 3
    # litellm's and the OpenAI SDK's own retries are off: every attempt is one of ours.
    assert {r.headers.get("x-stainless-retry-count") for r in srv.requests} <= {"0", None}


def test_litellm_retries_a_timeout() -> None:
    slow = Canned(body=openai_text("too late").body, delay_s=1.0)
    with OpenAICompatServer([slow, openai_text("ok")]) as srv:
        turn = act(litellm_policy(srv, timeout_s=0.2))
    assert turn.content == "ok"
    assert len(srv.requests) == 2


def test_litellm_gives_up_after_max_retries() -> None:
    with (OpenAICompatServer([http_error(503)] * 3) as srv,
          pytest.raises(PolicyError, match="gave up after 3 attempts")):
        act(litellm_policy(srv, max_retries=2))
    assert len(srv.requests) == 3


@pytest.mark.parametrize(("status", "hint"), [(400, "model name"), (401, "OPENAI_API_KEY")])
def test_litellm_rejections_fail_at_once(status: int, hint: str) -> None:
    script = [http_error(status, message="nope"), openai_text("unused")]
    with OpenAICompatServer(script) as srv, pytest.raises(PolicyError) as excinfo:
        act(litellm_policy(srv))
    assert len(srv.requests) == 1
    assert excinfo.value.message.startswith("litellm:openai/test-model: request rejected")
    assert "nope" in excinfo.value.message
    assert hint in (excinfo.value.hint or "")


def test_litellm_through_the_registry_and_bad_specs() -> None:
    with OpenAICompatServer([openai_text("via registry")]) as srv:
        policy = make_policy("litellm:openai/test-model",
                             {"api_base": srv.base_url + "/v1", "api_key": "x"})
        assert act(policy).content == "via registry"
    with pytest.raises(ConfigError, match="model name") as excinfo:
        make_policy("litellm:")
    assert "litellm:openai/gpt-4o-mini" in (excinfo.value.hint or "")
    with pytest.raises(ConfigError, match="max_retries"):
        LiteLLMPolicy("openai/m", max_retries=-1)


def test_litellm_reply_without_choices_is_a_policy_error() -> None:
    """``{"choices": []}`` is a broken answer, not an empty turn the grader would score 0."""
    body = {**openai_text("unused").body, "choices": []}
    with OpenAICompatServer([Canned(body=body)]) as srv, \
            pytest.raises(PolicyError, match="no choices"):
        act(litellm_policy(srv, max_retries=0))


# --- the episode's deadline bounds every wait (issue 11 item 7) ---------------------------------

OPENAI_BACKENDS = ["litellm", "openai"]


def openai_backend(name: str, srv: OpenAICompatServer, **options: Any) -> Policy:
    if name == "litellm":
        return litellm_policy(srv, **options)
    return openai_policy(srv, **options)


@pytest.mark.parametrize("backend", [*OPENAI_BACKENDS, "anthropic"])
@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_beyond_the_deadline_fails_at_once(backend: str, status: int) -> None:
    """The server asks for 30 s, the episode has 5 left: a policy error now, not a sleep that
    the wall limit would cut (and no second request)."""
    error = http_error(status, retry_after_ms=None, headers={"retry-after": "30"})
    server = AnthropicCompatServer if backend == "anthropic" else OpenAICompatServer
    with server([error, openai_text("unused")]) as srv:
        policy = (anthropic_policy(srv) if isinstance(srv, AnthropicCompatServer)
                  else openai_backend(backend, srv))
        with pytest.raises(PolicyError, match="asked to wait 30 s") as excinfo:
            act(policy, request(seconds_left=5.0))
    assert len(srv.requests) == 1
    assert "wall limit" in excinfo.value.message
    assert excinfo.value.hint


@pytest.mark.parametrize("backend", OPENAI_BACKENDS)
def test_backoff_beyond_the_deadline_fails_at_once(backend: str) -> None:
    with OpenAICompatServer([http_error(500), openai_text("unused")]) as srv, \
            pytest.raises(PolicyError, match="wall limit"):
        act(openai_backend(backend, srv, backoff_s=60.0), request(seconds_left=3.0))
    assert len(srv.requests) == 1


@pytest.mark.parametrize("backend", OPENAI_BACKENDS)
def test_the_deadline_caps_the_http_timeout(backend: str) -> None:
    """The answer would come after 3 s, the per-call timeout is 60 s, but the episode has
    0.5 s left: the call is cut at the deadline (without the cap it would succeed)."""
    slow = Canned(body=openai_text("too late").body, delay_s=3.0)
    with OpenAICompatServer([slow, openai_text("unused")]) as srv, \
            pytest.raises(PolicyError, match="wall limit"):
        act(openai_backend(backend, srv, timeout_s=60.0), request(seconds_left=0.5))
    assert len(srv.requests) == 1


def test_a_spent_deadline_sends_nothing() -> None:
    with OpenAICompatServer([openai_text("unused")]) as srv, \
            pytest.raises(PolicyError, match="wall limit"):
        act(litellm_policy(srv), request(seconds_left=-1.0))
    assert srv.requests == []


def test_importing_the_modules_imports_no_client_library() -> None:
    code = ("import sys, harnessgrid.policies.api, harnessgrid.policies.openai_compat; "
            "sys.exit(bool({'litellm', 'anthropic', 'openai'} & set(sys.modules)))")
    assert subprocess.run([sys.executable, "-c", code], check=False, timeout=60).returncode == 0


# --- openai: the official SDK against an OpenAI-compatible server -------------------------------


def test_openai_text_reply_tokens_and_request() -> None:
    with OpenAICompatServer([openai_text("hello", prompt_tokens=31, completion_tokens=5)]) as srv:
        policy = openai_policy(srv, temperature=0.3, max_tokens=100, extra={"top_k": 20})
        turn = act(policy, request(native=False, max_tokens=50))
    assert policy.spec == "openai:test-model"
    assert isinstance(policy, Policy)
    assert turn == ModelTurn(content="hello", tokens_in=31, tokens_out=5, finish_reason="stop")
    (sent,) = srv.requests
    body = sent.json
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer x"
    assert body["model"] == "test-model"
    assert body["temperature"] == 0.3
    assert body["max_tokens"] == 50
    assert body["top_k"] == 20  # extra travels in the body
    assert body["messages"] == [SYSTEM.openai(), TASK.openai()]
    assert "tools" not in body


@pytest.mark.parametrize("transport", ["sdk", "http"])
def test_openai_own_api_gets_max_completion_tokens(transport: str) -> None:
    """OpenAI's reasoning models refuse ``max_tokens``: requests to OpenAI's own API (no
    base_url, or its host) carry ``max_completion_tokens``; other servers keep ``max_tokens``.
    The field name is checked per address; its use on the wire with the local server (which
    cannot be api.openai.com here)."""
    assert OpenAIPolicy("o4-mini", api_key="k").limit_field == "max_completion_tokens"
    assert OpenAIPolicy("o4-mini", api_key="k", base_url="https://API.openai.com/v1/",
                        transport=transport).limit_field == "max_completion_tokens"
    for other in ("http://127.0.0.1:8000/v1", "https://api.openai.com.example.org/v1"):
        assert OpenAIPolicy("m", api_key="k", base_url=other).limit_field == "max_tokens"
    with OpenAICompatServer([openai_text("hi")]) as srv:
        policy = openai_policy(srv, max_tokens=100, transport=transport)
        policy.limit_field = "max_completion_tokens"  # as for OpenAI's own host
        act(policy, request(native=False, max_tokens=50))
    body = srv.requests[0].json
    assert body["max_completion_tokens"] == 50
    assert "max_tokens" not in body


def test_openai_tool_calls_wire_format_and_malformed_calls() -> None:
    calls = [openai_call("read_file", {"path": "b.txt"}, "call_9"),
             openai_call("read_file", '{"path": "a.txt"', "c1")]  # truncated JSON: kept
    with OpenAICompatServer([openai_completion("Next.", calls)]) as srv:
        turn = act(openai_policy(srv, temperature=None), request(HISTORY))
    good, bad = turn.tool_calls
    assert good == ToolCall(id="call_9", name="read_file", arguments={"path": "b.txt"})
    assert bad.parse_error
    assert "not valid JSON" in bad.parse_error
    assert turn.content == "Next."
    assert turn.finish_reason == "tool_calls"
    body = srv.requests[0].json
    assert "temperature" not in body  # None: not sent
    assert body["tools"] == [t.openai() for t in TOOLS]
    assert body["messages"] == [m.openai() for m in HISTORY]  # the litellm policy's format


@pytest.mark.parametrize("status", [429, 500, 503])
def test_openai_retries_transient_errors(status: int) -> None:
    with OpenAICompatServer([http_error(status), http_error(status), openai_text("ok")]) as srv:
        turn = act(openai_policy(srv))
    assert turn.content == "ok"
    assert len(srv.requests) == 3
    assert {r.headers.get("x-stainless-retry-count") for r in srv.requests} <= {"0", None}


def test_openai_retries_a_timeout_and_gives_up() -> None:
    slow = Canned(body=openai_text("too late").body, delay_s=1.0)
    with OpenAICompatServer([slow, openai_text("ok")]) as srv:
        assert act(openai_policy(srv, timeout_s=0.2)).content == "ok"
    with (OpenAICompatServer([http_error(503)] * 2) as srv,
          pytest.raises(PolicyError, match="gave up after 2 attempts")):
        act(openai_policy(srv, max_retries=1))


@pytest.mark.parametrize(("status", "hint"), [(400, "model name"), (404, "model name"),
                                              (401, "api_key")])
def test_openai_rejections_fail_at_once(status: int, hint: str) -> None:
    script = [http_error(status, message="nope"), openai_text("unused")]
    with OpenAICompatServer(script) as srv, pytest.raises(PolicyError) as excinfo:
        act(openai_policy(srv))
    assert len(srv.requests) == 1
    assert excinfo.value.message.startswith("openai:test-model: request rejected")
    assert "nope" in excinfo.value.message
    assert hint in (excinfo.value.hint or "")


def test_openai_reply_without_choices_is_a_policy_error() -> None:
    body = {**openai_text("unused").body, "choices": []}
    with OpenAICompatServer([Canned(body=body)]) as srv, \
            pytest.raises(PolicyError, match="no choices"):
        act(openai_policy(srv, max_retries=0))


def test_openai_reuses_one_client_across_turns() -> None:
    """One pooled client per policy (per event loop): its connections serve every turn."""
    with OpenAICompatServer([openai_text("a"), openai_text("b")]) as srv:
        policy = openai_policy(srv)

        async def two_turns() -> tuple[object, object]:
            await policy.act(request())
            first = policy._client.get()
            await policy.act(request())
            return first, policy._client.get()

        first, second = asyncio.run(two_turns())
    assert first is second
    assert len(srv.requests) == 2


def test_openai_keys_and_server_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="no API key") as excinfo:
        make_policy("openai:gpt-4o-mini")
    assert "OPENAI_API_KEY" in (excinfo.value.hint or "")
    # A local server needs no key, whether named by option or by OPENAI_BASE_URL; the SDK
    # still gets a placeholder, and a server that wants a key says where to put one.
    with OpenAICompatServer([openai_text("local")], api_key="secret") as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url + "/v1")
        with pytest.raises(PolicyError, match="HTTP 401") as excinfo:
            act(make_policy("openai:test-model", {"max_retries": 0}))
        assert "wants a key" in (excinfo.value.hint or "")
        monkeypatch.setenv("OPENAI_API_KEY", "secret")
        assert act(make_policy("openai:test-model")).content == "local"
    assert srv.requests[-1].headers["authorization"] == "Bearer secret"


@pytest.mark.parametrize("transport", ["sdk", "http"])
def test_the_users_openai_key_goes_only_to_openai_or_openai_base_url(
        monkeypatch: pytest.MonkeyPatch, transport: str) -> None:
    """OPENAI_API_KEY is the user's OpenAI key: it reaches OpenAI's API or the server
    OPENAI_BASE_URL names (set together), never a base_url passed as an option - a local or
    third-party server would receive it. Such a server's key comes from api_key or
    api_key_env; a refusal says so."""
    monkeypatch.setenv("OPENAI_API_KEY", "the-users-openai-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with OpenAICompatServer([openai_text("a"), openai_text("b"), openai_text("c")]) as srv:
        url = srv.base_url + "/v1"
        act(make_policy("openai:m", {"base_url": url, "transport": transport}))
        monkeypatch.setenv("MY_SERVER_KEY", "server-key")
        act(make_policy("openai:m", {"base_url": url, "transport": transport,
                                     "api_key_env": "MY_SERVER_KEY"}))
        monkeypatch.setenv("OPENAI_BASE_URL", url + "/")  # the pair, as a user exports it
        act(make_policy("openai:m", {"base_url": url, "transport": transport}))
    sent = [r.headers.get("authorization") for r in srv.requests]
    assert sent[0] in (None, "Bearer unused"), "the OpenAI key did not leave for the option's URL"
    assert sent[1:] == ["Bearer server-key", "Bearer the-users-openai-key"]
    monkeypatch.delenv("OPENAI_BASE_URL")
    with (OpenAICompatServer([openai_text("x")], api_key="needed") as srv,
          pytest.raises(PolicyError, match="HTTP 401") as excinfo):
        act(make_policy("openai:m", {"base_url": srv.base_url + "/v1", "max_retries": 0,
                                     "transport": transport}))
    hint = excinfo.value.hint or ""
    assert "OPENAI_API_KEY is not sent" in hint
    assert "api_key_env=NAME" in hint
    with pytest.raises(ConfigError, match="api_key_env='NO_SUCH_VAR'"):
        make_policy("openai:m", {"base_url": "http://127.0.0.1:1/v1",
                                 "api_key_env": "NO_SUCH_VAR"})
    with pytest.raises(ConfigError, match="not both"):
        make_policy("openai:m", {"api_key": "k", "api_key_env": "MY_SERVER_KEY"})
    # OpenAI's own API, named or not, gets the key.
    assert OpenAIPolicy("m", base_url="https://api.openai.com/v1")._key.value == \
        "the-users-openai-key"


def test_the_users_anthropic_credentials_stay_off_other_servers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same rule for ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN (which the SDK would
    otherwise read by itself): a base_url passed as an option gets neither."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "the-users-anthropic-key")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "the-users-token")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    with AnthropicCompatServer([anthropic_text("a"), anthropic_text("b")]) as srv:
        act(make_policy("anthropic:claude-test", {"base_url": srv.base_url}))
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
        act(make_policy("anthropic:claude-test", {"base_url": srv.base_url}))
    # (the SDK sends a key as x-api-key or as a bearer token, depending on its version)
    first, paired = ({h.get("x-api-key"), h.get("authorization")}
                     for h in (srv.requests[0].headers, srv.requests[1].headers))
    users = {"the-users-anthropic-key", "Bearer the-users-anthropic-key",
             "Bearer the-users-token"}
    assert not first & users, first
    assert paired & {"the-users-anthropic-key", "Bearer the-users-anthropic-key"}, paired


def test_openai_option_validation() -> None:
    with pytest.raises(ConfigError, match="model name"):
        make_policy("openai:", {"base_url": "http://127.0.0.1:1/v1"})
    with pytest.raises(ConfigError, match="unknown option") as excinfo:
        make_policy("openai:m", {"base_url": "http://127.0.0.1:1/v1", "top_p": 0.9})
    assert "base_url" in (excinfo.value.hint or "")
    assert "extra" in (excinfo.value.hint or "")
    with pytest.raises(ConfigError, match="base_url, not api_base"):
        make_policy("openai:m", {"api_base": "http://127.0.0.1:1/v1"})
    with pytest.raises(ConfigError, match="timeout_s"):
        make_policy("openai:m", {"base_url": "http://127.0.0.1:1/v1", "timeout_s": 0})
    with pytest.raises(ConfigError, match="extra must be a JSON object"):
        make_policy("openai:m", {"base_url": "http://127.0.0.1:1/v1", "extra": "top_p=1"})


# --- Anthropic ----------------------------------------------------------------------------------


def test_anthropic_text_reply_tokens_and_request() -> None:
    canned = anthropic_message([{"type": "text", "text": "hello"}], input_tokens=40,
                               output_tokens=3)
    with AnthropicCompatServer([canned]) as srv:
        policy = anthropic_policy(srv, max_tokens=64)
        turn = act(policy, request(native=False))
    assert policy.spec == "anthropic:claude-test"
    assert isinstance(policy, Policy)
    assert turn == ModelTurn(content="hello", tokens_in=40, tokens_out=3, finish_reason="end_turn")
    body = srv.requests[0].json
    assert body["system"] == SYSTEM.content
    assert body["max_tokens"] == 64
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Read a.txt"}]}]
    assert "tools" not in body
    assert "temperature" not in body  # the API rejects sampling options
    headers = srv.requests[0].headers
    assert "x" in (headers.get("authorization", "") + headers.get("x-api-key", ""))


def test_anthropic_tool_use_and_wire_format() -> None:
    canned = anthropic_tool_use("no_such_tool", {"x": 1}, text="Trying.", tool_id="toolu_1")
    with AnthropicCompatServer([canned]) as srv:
        turn = act(anthropic_policy(srv, temperature=0.5), request(HISTORY))
    assert turn.content == "Trying."
    assert turn.finish_reason == "tool_use"
    assert turn.tool_calls == (ToolCall(id="toolu_1", name="no_such_tool", arguments={"x": 1}),)
    body = srv.requests[0].json
    assert body["tools"] == [t.anthropic() for t in TOOLS]
    assert body["temperature"] == 0.5
    assert body["system"] == SYSTEM.content
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Read a.txt"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Reading both."},
            {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "a.txt"}},
            {"type": "tool_use", "id": "call_2", "name": "run", "input": {"command": "ls"}}]},
        {"role": "user", "content": [  # both results and the reminder: one user message
            {"type": "tool_result", "tool_use_id": "call_1", "content": "hello"},
            {"type": "tool_result", "tool_use_id": "call_2", "content": "a.txt"},
            {"type": "text", "text": "Keep going."}]},
    ]


def test_anthropic_empty_turn() -> None:
    with AnthropicCompatServer([anthropic_message([])]) as srv:
        turn = act(anthropic_policy(srv))
    assert (turn.content, turn.tool_calls) == ("", ())


def test_anthropic_reply_without_content_or_stop_reason_is_a_policy_error() -> None:
    """No blocks and no stop reason: the server did not finish a message; an empty turn with
    ``end_turn`` (above) is the model's own choice and stays a turn."""
    canned = anthropic_message([])
    canned.body["stop_reason"] = None
    with AnthropicCompatServer([canned]) as srv, pytest.raises(PolicyError, match="no content"):
        act(anthropic_policy(srv, max_retries=0))


@pytest.mark.parametrize("status", [429, 500, 529])
def test_anthropic_retries_transient_errors(status: int) -> None:
    with AnthropicCompatServer([anthropic_error(status), anthropic_text("done")]) as srv:
        turn = act(anthropic_policy(srv))
    assert turn.content == "done"
    assert len(srv.requests) == 2


@pytest.mark.parametrize(("status", "hint"), [(400, "model name"), (401, "key passed as api_key")])
def test_anthropic_rejections_fail_at_once(status: int, hint: str) -> None:
    script = [anthropic_error(status, "nope"), anthropic_text("unused")]
    with AnthropicCompatServer(script) as srv, pytest.raises(PolicyError) as excinfo:
        act(anthropic_policy(srv))
    assert len(srv.requests) == 1
    assert excinfo.value.message.startswith("anthropic:claude-test: request rejected")
    assert "nope" in excinfo.value.message
    assert hint in (excinfo.value.hint or "")


def test_anthropic_key_and_spec_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="no API key") as excinfo:
        AnthropicPolicy("claude-test")
    assert "ANTHROPIC_API_KEY" in (excinfo.value.hint or "")
    AnthropicPolicy("claude-test", base_url="http://127.0.0.1:1")  # a local server needs none
    with pytest.raises(ConfigError, match="model name"):
        AnthropicPolicy(" ", api_key="x")


# --- the Messages API conversion, for any conversation -------------------------------------------

IDS = st.sampled_from(["a", "b", "c", "d"])
TEXT = st.sampled_from(["", " ", "ok", "some text"])
CALLS = st.lists(st.builds(ToolCall, id=IDS, name=st.sampled_from(["read_file", "run"]),
                           arguments=st.just({"path": "x"})), max_size=3)
MESSAGE = st.one_of(
    st.builds(Message, role=st.just("system"), content=TEXT),
    st.builds(Message, role=st.just("user"), content=TEXT),
    st.builds(Message, role=st.just("assistant"), content=TEXT,
              tool_calls=CALLS.map(tuple)),
    st.builds(Message, role=st.just("tool"), content=TEXT, tool_call_id=IDS, name=st.just("run")),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(MESSAGE, max_size=12))
def test_anthropic_conversion_is_always_valid(messages: list[Message]) -> None:
    system, out = to_anthropic(messages)
    assert system == "\n\n".join(m.content for m in messages
                                 if m.role == "system" and m.content.strip())
    assert [m["role"] for m in out] == ["user", "assistant"] * (len(out) // 2) + (
        ["user"] if len(out) % 2 else [])
    previous_uses: set[str] = set()
    for message in out:
        blocks = message["content"]
        assert blocks
        assert all(b["text"].strip() for b in blocks if b["type"] == "text")
        kinds = [b["type"] for b in blocks]
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        if message["role"] == "user":
            assert set(results) <= previous_uses  # each result answers the message before
            assert previous_uses <= set(results)  # and each call there gets one
            assert kinds == sorted(kinds, key=lambda k: k != "tool_result")  # results first
            previous_uses = set()
        else:
            assert set(kinds) <= {"text", "tool_use"}
            previous_uses = {b["id"] for b in blocks if b["type"] == "tool_use"}
    assert not previous_uses  # the last assistant's calls are answered too
    sent = json.dumps(out)
    for m in messages:  # nothing the model should see is lost
        if m.role != "system" and m.content.strip():
            assert m.content in sent
