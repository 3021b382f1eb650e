"""The scripted servers speak the real APIs: litellm, openai and anthropic clients accept them."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any

import pytest
from servers import (
    AnthropicCompatServer,
    OpenAICompatServer,
    RecordedRequest,
    anthropic_error,
    anthropic_text,
    anthropic_tool_use,
    http_error,
    openai_call,
    openai_completion,
    openai_raw_tool_call,
    openai_text,
    openai_tool_call,
)

# Must be set before litellm is first imported: otherwise it tries to fetch its cost map online.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# litellm's pydantic models warn at import time about their own TypedDicts; not our concern.
pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly. qualifier:UserWarning")

MESSAGES = [{"role": "user", "content": "Read a.txt"}]
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
ANTHROPIC_TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": OPENAI_TOOLS[0]["function"]["parameters"],
    }
]


@pytest.fixture(scope="module")
def litellm() -> Any:
    module = pytest.importorskip("litellm")
    module.suppress_debug_info = True
    return module


@pytest.fixture(scope="module")
def anthropic() -> Any:
    return pytest.importorskip("anthropic")


def complete(litellm: Any, srv: OpenAICompatServer, **kwargs: Any) -> Any:
    return litellm.completion(
        model="openai/test-model",
        api_base=srv.base_url + "/v1",
        api_key="x",
        messages=MESSAGES,
        **kwargs,
    )


# --- OpenAI-compatible server through litellm ------------------------------------------------


def test_litellm_receives_tool_call_and_server_records_request(litellm: Any) -> None:
    with OpenAICompatServer([openai_tool_call("read_file", {"path": "a.txt"})]) as srv:
        response = complete(litellm, srv, tools=OPENAI_TOOLS)
    message = response.choices[0].message
    (call,) = message.tool_calls
    assert call.function.name == "read_file"
    assert json.loads(call.function.arguments) == {"path": "a.txt"}
    assert call.id
    assert response.choices[0].finish_reason == "tool_calls"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (11, 7)
    (request,) = srv.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer x"
    assert request.json["model"] == "test-model"
    assert request.json["messages"] == MESSAGES
    assert request.json["tools"] == OPENAI_TOOLS
    assert srv.remaining == 0


def test_litellm_text_and_empty_turns(litellm: Any) -> None:
    with OpenAICompatServer(
        [openai_text("hello"), openai_text(""), openai_completion(None)]
    ) as srv:
        texts = [complete(litellm, srv).choices[0].message.content for _ in range(3)]
    assert texts[0] == "hello"
    assert not texts[1]
    assert not texts[2]  # "" or None: the client must cope with both


def test_malformed_tool_calls_reach_the_client_verbatim(litellm: Any) -> None:
    script = [
        openai_raw_tool_call("read_file", '{"path": "a.txt"', content="Let me read it."),
        openai_completion(
            None, [openai_call("no_such_tool", {"x": 1}), openai_call("read_file", "")]
        ),
    ]
    with OpenAICompatServer(script) as srv:
        first = complete(litellm, srv, tools=OPENAI_TOOLS).choices[0].message
        second = complete(litellm, srv, tools=OPENAI_TOOLS).choices[0].message
    assert first.content == "Let me read it."
    assert first.tool_calls[0].function.arguments == '{"path": "a.txt"'
    assert [c.function.name for c in second.tool_calls] == ["no_such_tool", "read_file"]
    assert second.tool_calls[1].function.arguments == ""
    assert len({c.id for c in second.tool_calls}) == 2


@pytest.mark.parametrize("status", [429, 500, 503])
def test_litellm_retries_an_error_then_succeeds(litellm: Any, status: int) -> None:
    with OpenAICompatServer([http_error(status), openai_text("recovered")]) as srv:
        response = complete(litellm, srv)
    assert response.choices[0].message.content == "recovered"
    assert [r.headers.get("x-stainless-retry-count") for r in srv.requests] == ["0", "1"]


def test_litellm_surfaces_the_status_without_retries(litellm: Any) -> None:
    script = [http_error(500, message="boom"), openai_text("unused")]
    with OpenAICompatServer(script) as srv, pytest.raises(litellm.InternalServerError) as excinfo:
        complete(litellm, srv, max_retries=0)
    assert excinfo.value.status_code == 500
    assert "boom" in str(excinfo.value)
    assert len(srv.requests) == 1
    assert srv.remaining == 1


def test_litellm_streaming_reassembles_text_and_tool_call(litellm: Any) -> None:
    canned = openai_tool_call(
        "read_file", {"path": "a/long/path/to/some/file.txt"}, content="Reading it now."
    )
    with OpenAICompatServer([canned]) as srv:
        chunks = list(
            complete(
                litellm,
                srv,
                tools=OPENAI_TOOLS,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    assert len(chunks) > 5
    message = litellm.stream_chunk_builder(chunks, messages=MESSAGES).choices[0].message
    assert message.content == "Reading it now."
    assert message.tool_calls[0].function.name == "read_file"
    assert json.loads(message.tool_calls[0].function.arguments) == {
        "path": "a/long/path/to/some/file.txt"
    }
    assert srv.requests[0].json["stream"] is True


def test_openai_sdk_lists_models_and_uses_short_path() -> None:
    openai = pytest.importorskip("openai")
    with OpenAICompatServer([openai_text("hi")]) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)  # no /v1
        assert [m.id for m in client.models.list()] == ["test-model"]
        response = client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    assert response.choices[0].message.content == "hi"
    assert response.model == "m"
    assert [r.path for r in srv.requests] == ["/models", "/chat/completions"]


# --- Anthropic-compatible server through the anthropic SDK -----------------------------------


def test_anthropic_receives_tool_use_block(anthropic: Any) -> None:
    with AnthropicCompatServer(
        [anthropic_tool_use("read_file", {"path": "a.txt"}, text="Reading.")]
    ) as srv:
        client = anthropic.Anthropic(base_url=srv.base_url, api_key="x")
        message = client.messages.create(
            model="claude-test", max_tokens=64, messages=MESSAGES, tools=ANTHROPIC_TOOLS
        )
    text, tool_use = message.content
    assert text.type == "text"
    assert text.text == "Reading."
    assert tool_use.type == "tool_use"
    assert tool_use.name == "read_file"
    assert tool_use.input == {"path": "a.txt"}
    assert tool_use.id.startswith("toolu_")
    assert message.stop_reason == "tool_use"
    assert message.model == "claude-test"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (11, 7)
    (request,) = srv.requests
    assert request.path == "/v1/messages"
    assert request.json["tools"] == ANTHROPIC_TOOLS
    assert request.json["max_tokens"] == 64
    assert "anthropic-version" in request.headers


@pytest.mark.parametrize("status", [429, 529])
def test_anthropic_retries_rate_limit_and_overloaded(anthropic: Any, status: int) -> None:
    with AnthropicCompatServer([anthropic_error(status), anthropic_text("done")]) as srv:
        client = anthropic.Anthropic(base_url=srv.base_url, api_key="x")
        message = client.messages.create(model="claude-test", max_tokens=8, messages=MESSAGES)
    assert message.content[0].text == "done"
    assert message.stop_reason == "end_turn"
    assert len(srv.requests) == 2


def test_anthropic_error_shape_without_retries(anthropic: Any) -> None:
    with AnthropicCompatServer([anthropic_error(529, "Overloaded")]) as srv:
        client = anthropic.Anthropic(base_url=srv.base_url, api_key="x", max_retries=0)
        with pytest.raises(anthropic.APIStatusError) as excinfo:
            client.messages.create(model="claude-test", max_tokens=8, messages=MESSAGES)
    assert excinfo.value.status_code == 529
    assert excinfo.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }


def test_anthropic_streaming(anthropic: Any) -> None:
    canned = anthropic_tool_use(
        "read_file", {"path": "docs/some/long/name.md"}, text="Let me look at it."
    )
    with AnthropicCompatServer([canned]) as srv:
        client = anthropic.Anthropic(base_url=srv.base_url, api_key="x")
        with client.messages.stream(
            model="claude-test", max_tokens=64, messages=MESSAGES
        ) as stream:
            message = stream.get_final_message()
    assert message.content[0].text == "Let me look at it."
    assert message.content[1].input == {"path": "docs/some/long/name.md"}
    assert message.stop_reason == "tool_use"


# --- server behaviour -----------------------------------------------------------------------


def post(url: str, payload: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = json.dumps(payload).encode()
    request = urllib.request.Request(
        url, data=data, headers={"content-type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_exhausted_script_unknown_route_and_api_key() -> None:
    with OpenAICompatServer([openai_text("one")], api_key="secret") as srv:
        url = srv.base_url + "/v1/chat/completions"
        assert post(url, {"model": "m"})[0] == 401
        assert post(url, {"model": "m"}, {"authorization": "Bearer secret"})[0] == 200
        status, body = post(url, {"model": "m"}, {"authorization": "Bearer secret"})
        assert status == 500
        assert "script exhausted" in body["error"]["message"]
        assert post(srv.base_url + "/v1/nope", {}, {"authorization": "Bearer secret"})[0] == 404
    assert len(srv.requests) == 4


def test_callable_entries_plain_dicts_and_script_not_mutated() -> None:
    canned = openai_tool_call("f", {"a": 1})

    def echo(request: RecordedRequest) -> Any:
        return openai_text(request.json["messages"][-1]["content"].upper())

    def broken(request: RecordedRequest) -> Any:
        raise KeyError("oops")

    with OpenAICompatServer([canned, canned, echo, {"anything": True}, broken]) as srv:
        url = srv.base_url + "/v1/chat/completions"
        first, second = post(url, {"model": "m1"})[1], post(url, {"model": "m2"})[1]
        echoed = post(url, {"model": "m", "messages": [{"role": "user", "content": "hi"}]})[1]
        raw = post(url, {})[1]
        status, error = post(url, {})
    assert status == 500
    assert "KeyError('oops')" in error["error"]["message"]
    assert (first["model"], second["model"]) == ("m1", "m2")
    first_id = first["choices"][0]["message"]["tool_calls"][0]["id"]
    assert first_id != second["choices"][0]["message"]["tool_calls"][0]["id"]
    assert canned.body["model"] is None  # the script's object was not filled in place
    assert echoed["choices"][0]["message"]["content"] == "HI"
    assert raw == {"anything": True}


def test_base_url_needs_a_running_server() -> None:
    with pytest.raises(RuntimeError, match="not running"):
        _ = OpenAICompatServer().base_url
