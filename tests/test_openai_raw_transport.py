"""``openai:`` with ``transport=http``: the lean HTTP/1.1 client gives the same turns, errors,
retries, streaming and deadlines as the official SDK, against real local servers. The error
tests run on both transports (``transport=auto`` makes the lean client the default for the
loopback servers most other tests use, so the SDK's side is kept here)."""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from servers import (
    Canned,
    OpenAICompatServer,
    http_error,
    openai_call,
    openai_completion,
    openai_text,
    openai_tool_call,
    stream_cut,
)

import harnessgrid as hg
from harnessgrid.errors import ConfigError, PolicyError
from harnessgrid.models import Message, ModelTurn, ToolCall, ToolSpec
from harnessgrid.plugins.tasks.examples import UPPER_TASK
from harnessgrid.policies import PolicyRequest, make_policy, raw_http
from harnessgrid.policies.openai_compat import OpenAIPolicy

pytest.importorskip("openai")  # the sdk side of the comparisons

TOOLS = (ToolSpec(name="read_file", description="Read a file.",
                  parameters={"type": "object", "properties": {"path": {"type": "string"}},
                              "required": ["path"]}),)
MESSAGES = (Message(role="system", content="You are terse."),
            Message(role="user", content="What is in a.txt?"))
LONG = "The file a.txt holds one line; I will read it now and then report what it says."
FAST = {"backoff_s": 0.01, "timeout_s": 10.0}
#: Seconds after which a child process counts as hung: only a guard against a hang (issue 28).
HANG_S = 600
#: How long a "slow" answer takes: far longer than any limit the tests set, so an answer that
#: is cut arrives never, and one that is not cut shows in what the call returns.
SLOW_S = 120.0
#: A time limit the tests set: long enough that a local request and a fast answer fit in it
#: under any load, short enough to keep the tests quick.
LIMIT_S = 2.0


class Pieces(list[str]):
    def __call__(self, piece: str) -> None:
        self.append(piece)


def request(on_text: Any = None, *, native: bool = True,
            seconds_left: float | None = None) -> PolicyRequest:
    stand_in: Any = SimpleNamespace()
    deadline = None if seconds_left is None else time.monotonic() + seconds_left
    return PolicyRequest(messages=list(MESSAGES), tools=TOOLS, native_tools=native,
                         state=stand_in, new_segment=False,
                         deadline=deadline, on_text=on_text)


def make(base_url: str, transport: str = "http", **options: Any) -> OpenAIPolicy:
    return OpenAIPolicy("test-model", base_url=base_url, api_key="x", transport=transport,
                        **{**FAST, **options})


def act(policy: OpenAIPolicy, req: PolicyRequest | None = None) -> ModelTurn:
    return asyncio.run(policy.act(req or request()))


def tool_reply() -> Canned:
    """Text, a good call, a malformed one and an argument-less one, explicit ids."""
    calls = [openai_call("read_file", {"path": "a.txt"}, "c1"),
             openai_call("read_file", '{"path": "a.t', "c2"),  # truncated JSON
             openai_call("run", "", "c3")]
    return openai_completion(LONG, calls, prompt_tokens=50, completion_tokens=20)


REPLIES: dict[str, Callable[[], Canned]] = {"text": lambda: openai_text(LONG, prompt_tokens=31, completion_tokens=17),
           "tool call": lambda: openai_tool_call("read_file", {"path": "a.txt"}, call_id="c9"),
           "malformed calls": tool_reply,
           "empty": lambda: openai_completion(None)}


# --- the same turns as the SDK ----------------------------------------------------------------


@pytest.mark.parametrize("reply", list(REPLIES))
def test_http_turns_and_requests_equal_the_sdk_ones(reply: str) -> None:
    with OpenAICompatServer([REPLIES[reply](), REPLIES[reply]()]) as srv:
        url = srv.base_url + "/v1"
        options = {"temperature": 0.3, "extra": {"top_k": 20}}
        sdk = act(make(url, "sdk", **options))
        http = act(make(url, "http", **options))
    assert http == sdk
    sdk_sent, http_sent = srv.requests
    assert http_sent.path == sdk_sent.path == "/v1/chat/completions"
    assert http_sent.json == sdk_sent.json  # extra merged at the top level, as the SDK does
    assert http_sent.json["top_k"] == 20
    assert http_sent.json["tools"]
    assert http_sent.headers["authorization"] == "Bearer x"
    if reply == "malformed calls":
        good, bad, blank = http.tool_calls
        assert good == ToolCall(id="c1", name="read_file", arguments={"path": "a.txt"})
        assert bad.parse_error
        assert bad.raw_arguments == '{"path": "a.t'
        assert blank == ToolCall(id="c3", name="run")
    if reply == "text":
        assert (http.tokens_in, http.tokens_out) == (31, 17)


@pytest.mark.parametrize("reply", ["text", "malformed calls"])
def test_streamed_turn_equals_the_unstreamed_one(reply: str) -> None:
    with OpenAICompatServer([REPLIES[reply]() for _ in range(3)]) as srv:
        policy, pieces = make(srv.base_url + "/v1"), Pieces()
        plain = act(policy)
        streamed = act(policy, request(pieces))
        sdk_pieces = Pieces()
        sdk_streamed = act(make(srv.base_url + "/v1", "sdk"), request(sdk_pieces))
    assert streamed == plain == sdk_streamed
    assert "".join(pieces) == streamed.content == LONG
    assert len(pieces) > 1
    assert pieces == sdk_pieces
    body = srv.requests[1].json
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert srv.requests[1].headers["accept"] == "text/event-stream"


def test_a_stream_that_breaks_off_after_text_is_not_retried() -> None:
    for broken in (stream_cut(openai_text(LONG), 4, {"error": {"message": "busy"}}),
                   stream_cut(openai_text(LONG), 4)):
        with OpenAICompatServer([broken, openai_text("unused")]) as srv:
            pieces = Pieces()
            with pytest.raises(PolicyError, match="broke off after part of it was streamed"):
                act(make(srv.base_url + "/v1"), request(pieces))
        assert len(srv.requests) == 1
        assert pieces
        assert LONG.startswith("".join(pieces))


def test_a_stream_that_breaks_off_before_any_text_is_retried() -> None:
    broken = stream_cut(openai_text("lost"), 1)  # only the opening event, then the close
    with OpenAICompatServer([broken, http_error(503), openai_text(LONG)]) as srv:
        pieces = Pieces()
        turn = act(make(srv.base_url + "/v1"), request(pieces))
    assert turn.content == LONG == "".join(pieces)
    assert len(srv.requests) == 3


def test_an_exception_in_on_text_propagates_as_itself() -> None:
    raised = KeyError("the UI is gone")

    def on_text(piece: str) -> None:
        raise raised

    with OpenAICompatServer([openai_text(LONG), openai_text(LONG)]) as srv, \
            pytest.raises(KeyError) as excinfo:
        act(make(srv.base_url + "/v1"), request(on_text))
    assert excinfo.value is raised
    assert len(srv.requests) == 1


# --- errors, retries, deadlines ---------------------------------------------------------------


BOTH = pytest.mark.parametrize("transport", ["sdk", "http"])


@BOTH
def test_429_with_retry_after_and_500_are_retried(transport: str) -> None:
    rate_limited = http_error(429, retry_after_ms=None, headers={"retry-after": "0.3"})
    with OpenAICompatServer([rate_limited, http_error(500), openai_text("ok")]) as srv:
        started = time.monotonic()
        turn = act(make(srv.base_url + "/v1", transport))
    assert turn.content == "ok"
    assert len(srv.requests) == 3
    assert time.monotonic() - started >= 0.3  # the server's retry-after was honoured


@BOTH
def test_retry_after_beyond_the_deadline_fails_at_once(transport: str) -> None:
    error = http_error(429, retry_after_ms=None, headers={"retry-after": "30"})
    with OpenAICompatServer([error, openai_text("unused")]) as srv, \
            pytest.raises(PolicyError, match="asked to wait 30 s"):
        act(make(srv.base_url + "/v1", transport), request(seconds_left=5.0))
    assert len(srv.requests) == 1


@BOTH
def test_a_rejected_key_fails_at_once_naming_it(transport: str) -> None:
    with (OpenAICompatServer([openai_text("unused")], api_key="right") as srv,
          pytest.raises(PolicyError, match=r"API key was rejected \(HTTP 401\)") as excinfo):
        act(make(srv.base_url + "/v1", transport, max_retries=3))
    assert len(srv.requests) == 1
    assert "api_key" in (excinfo.value.hint or "")
    assert "invalid api key" in excinfo.value.message  # the server's own words


@BOTH
@pytest.mark.parametrize("status", [400, 404])
def test_rejections_fail_at_once_with_the_model_hint(status: int, transport: str) -> None:
    with (OpenAICompatServer([http_error(status, message="nope"), openai_text("unused")]) as srv,
          pytest.raises(PolicyError, match=r"request rejected.*nope") as excinfo):
        act(make(srv.base_url + "/v1", transport, max_retries=3),
            request(Pieces() if status == 400 else None))
    assert len(srv.requests) == 1
    assert "GET <base_url>/models" in (excinfo.value.hint or "")


def test_no_choices_is_a_policy_error() -> None:
    broken = Canned(body={**openai_text("x").body, "choices": []})
    with OpenAICompatServer([broken, broken]) as srv:
        for on_text in (None, Pieces()):
            with pytest.raises(PolicyError, match="no choices"):
                act(make(srv.base_url + "/v1", max_retries=0), request(on_text))


@BOTH
def test_the_deadline_cuts_a_slow_answer(transport: str) -> None:
    """The request was sent (one request) and its answer would come after SLOW_S, but the
    deadline ends the call: an error naming the wall limit, not the answer. The attempt
    timeout is longer than SLOW_S, so only the deadline can have cut it."""
    slow = Canned(body=openai_text("too late").body, delay_s=SLOW_S)
    with (OpenAICompatServer([slow, openai_text("unused")]) as srv,
          pytest.raises(PolicyError, match="wall limit")):
        act(make(srv.base_url + "/v1", transport, timeout_s=2 * SLOW_S),
            request(seconds_left=LIMIT_S))
    assert len(srv.requests) == 1


@BOTH
def test_timeout_s_cuts_an_attempt_and_the_retry_succeeds(transport: str) -> None:
    """Each call's first attempt gets an answer that would take SLOW_S; timeout_s cuts it and
    the retry gets the fast "ok" (were it not cut, the call would return "too late")."""
    slow = Canned(body=openai_text("too late").body, delay_s=SLOW_S)
    with OpenAICompatServer([slow, openai_text("ok"), slow, openai_text("ok")]) as srv:
        assert act(make(srv.base_url + "/v1", transport, timeout_s=LIMIT_S)).content == "ok"
        pieces = Pieces()
        assert act(make(srv.base_url + "/v1", transport, timeout_s=LIMIT_S),
                   request(pieces)).content == "ok"
        assert pieces == ["ok"]
        assert len(srv.requests) == 4


@BOTH
def test_an_unreachable_server_is_retried_then_reported(transport: str) -> None:
    with OpenAICompatServer() as srv:
        url = srv.base_url + "/v1"
    said = "cannot connect" if transport == "http" else "Connection error"
    with pytest.raises(PolicyError, match=rf"gave up after 3 attempts.*{said}"):
        act(make(url, transport, max_retries=2))


@BOTH
@pytest.mark.parametrize(("body", "said"), [
    ({"object": "error", "message": "The model `m` does not exist.", "code": 404},
     "The model `m` does not exist."),  # SGLang's and older vLLM's shape
    ({"error": {"message": "maximum context length is 4096 tokens"}},
     "maximum context length is 4096 tokens"),  # OpenAI's and newer vLLM's
])
def test_the_servers_error_message_is_quoted(transport: str, body: dict[str, Any],
                                             said: str) -> None:
    with (OpenAICompatServer([Canned(status=400, body=body)]) as srv,
          pytest.raises(PolicyError, match="request rejected") as excinfo):
        act(make(srv.base_url + "/v1", transport, max_retries=0))
    assert said in excinfo.value.message
    if transport == "http":  # the words alone, not the JSON around them
        assert f"HTTP 400: {said}" in excinfo.value.message


def test_errors_in_other_shapes_keep_the_servers_words() -> None:
    """vLLM's key check answers ``{"error": "Unauthorized"}``, FastAPI's router ``{"detail":
    "Not Found"}``: the lean client quotes both (the SDK shows neither)."""
    script = [Canned(status=401, body={"error": "Unauthorized"}),
              Canned(status=404, body={"detail": "Not Found"})]
    with OpenAICompatServer(script) as srv:
        for said in ("HTTP 401: Unauthorized", "HTTP 404: Not Found"):
            with pytest.raises(PolicyError) as excinfo:
                act(make(srv.base_url + "/v1", max_retries=0))
            assert said in excinfo.value.message


def test_a_redirect_is_an_error_naming_where_it_points() -> None:
    """The lean client follows no redirects: a 3xx fails at once, saying where to point
    base_url (the SDK would follow it)."""
    moved = Canned(status=308, body="", headers={"location": "https://localhost:8443/v1/chat/completions"})
    with (OpenAICompatServer([moved, openai_text("unused")]) as srv,
          pytest.raises(PolicyError, match="HTTP 308: a redirect to https://localhost:8443/v1/"
                                           "chat/completions") as excinfo):
        act(make(srv.base_url + "/v1", max_retries=3))
    assert "follows no redirects" in excinfo.value.message
    assert "transport=sdk" in excinfo.value.message
    assert len(srv.requests) == 1


def test_no_compression_is_asked_for_and_a_compressed_answer_is_refused() -> None:
    """The lean client decompresses nothing, so it asks for ``identity``; a server that
    compresses anyway gets an error naming the encoding, not a JSON error."""
    import gzip

    packed = gzip.compress(json.dumps(openai_text("zipped").body).encode())
    zipped = Canned(body=packed, headers={"content-encoding": "gzip",
                                          "content-type": "application/json"})
    with (OpenAICompatServer([zipped]) as srv,
          pytest.raises(PolicyError, match=r"compressed \(content-encoding: gzip\)") as excinfo):
        act(make(srv.base_url + "/v1", max_retries=3))
    assert srv.requests[0].headers["accept-encoding"] == "identity"
    assert "transport=sdk" in excinfo.value.message
    assert len(srv.requests) == 1


def test_an_answer_that_is_not_json_says_so() -> None:
    with (OpenAICompatServer([Canned(body="<html>a web page</html>")]) as srv,
          pytest.raises(PolicyError, match="answer is not JSON") as excinfo):
        act(make(srv.base_url + "/v1", max_retries=0))
    assert "a web page" in excinfo.value.message


# --- connections ------------------------------------------------------------------------------


def test_connections_are_reused_across_turns() -> None:
    with OpenAICompatServer([openai_text(str(i)) for i in range(4)]) as srv:
        policy = make(srv.base_url + "/v1")

        async def turns() -> int:
            for i in range(4):
                assert (await policy.act(request())).content == str(i)
            return int(policy._client.get().opened)

        assert asyncio.run(turns()) == 1


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """One request's JSON body, or None when the client closed the connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    body: dict[str, Any] = json.loads(await reader.readexactly(length))
    return body


def chunked(data: bytes, size: int = 7) -> bytes:
    pieces = [data[i:i + size] for i in range(0, len(data), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def completion(text: str) -> dict[str, Any]:
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2}}


async def with_server(handle: Handler, body: Callable[[str], Awaitable[Any]],
                      ssl_context: ssl.SSLContext | None = None) -> Any:
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ssl_context)
    port = server.sockets[0].getsockname()[1]
    async with server:
        scheme = "https" if ssl_context else "http"
        return await body(f"{scheme}://localhost:{port}/v1")


def test_a_server_closing_an_idle_connection_is_survived() -> None:
    """The server answers with keep-alive, then closes the idle connection (its idle
    timeout): the next request goes out on a fresh connection, once, and succeeds."""
    served: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await read_request(reader) is not None:
            served.append(1)
            data = json.dumps(completion(f"answer {len(served)}")).encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(data), data))
            await writer.drain()
        writer.close()  # no "connection: close": the client learns it on the next request

    async def body(url: str) -> tuple[list[str], int]:
        policy = make(url, max_retries=0)  # a success must not come from our retries
        texts = []
        for _ in range(3):
            texts.append((await policy.act(request())).content)
            await asyncio.sleep(0.05)  # the close reaches the client's idle connection
        return texts, policy._client.get().opened

    texts, opened = asyncio.run(with_server(handle, body))
    assert texts == ["answer 1", "answer 2", "answer 3"]
    assert opened == 3
    assert len(served) == 3


def test_a_request_lost_on_a_reused_connection_is_sent_once_more() -> None:
    """The server closes a kept-alive connection as the next request arrives on it (the race
    with its idle timeout), answering nothing: that request goes out again on a fresh
    connection, by the client itself (no policy retries allowed). On a fresh connection the
    same loss is not resent by the client: a policy error with max_retries=0."""
    served: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen = 0
        while (payload := await read_request(reader)) is not None:
            seen += 1
            text = payload["messages"][-1]["content"]
            if seen > 1 or text == "drop":
                break  # close without answering
            served.append(text)
            data = json.dumps(completion(f"answer {len(served)}")).encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(data), data))
            await writer.drain()
        writer.close()

    async def body(url: str) -> tuple[list[str], int]:
        policy = make(url, max_retries=0)
        texts = [(await policy.act(request())).content for _ in range(3)]
        dropped = PolicyRequest(**{**vars(request()), "messages": [
            Message(role="user", content="drop")]})
        with pytest.raises(PolicyError, match="closed the connection without answering"):
            await policy.act(dropped)
        return texts, policy._client.get().opened

    texts, opened = asyncio.run(with_server(handle, body))
    assert texts == ["answer 1", "answer 2", "answer 3"]
    assert len(served) == 3
    assert opened == 4  # one per answer (each reuse failed) and one for the dropped request


def test_chunked_answers_plain_and_streamed() -> None:
    """Both bodies arrive chunked (in 7-byte chunks that split lines and events); the
    connection is kept and reused after each."""
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        while (payload := await read_request(reader)) is not None:
            if payload.get("stream"):
                chunks: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {"content": piece},
                                        "finish_reason": None}]} for piece in ("Hel", "lo")]
                chunks += [{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                           {"choices": [], "usage": {"prompt_tokens": 3,
                                                     "completion_tokens": 2}}]
                data = b"".join(b"data: %s\n\n" % json.dumps(c).encode() for c in chunks)
                data += b"data: [DONE]\n\n"
                kind = b"text/event-stream"
            else:
                data, kind = json.dumps(completion("Hello")).encode(), b"application/json"
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\n"
                         b"transfer-encoding: chunked\r\n\r\n%s" % (kind, chunked(data)))
            await writer.drain()
        writer.close()

    async def body(url: str) -> list[tuple[ModelTurn, list[str]]]:
        policy, out = make(url, max_retries=0), []
        for stream in (False, True, False, True):
            pieces = Pieces()
            out.append((await policy.act(request(pieces if stream else None)), list(pieces)))
        return out

    results = asyncio.run(with_server(handle, body))
    expected = ModelTurn(content="Hello", finish_reason="stop", tokens_in=3, tokens_out=2)
    assert [turn for turn, _ in results] == [expected] * 4
    assert [pieces for _, pieces in results] == [[], ["Hel", "lo"], [], ["Hel", "lo"]]
    assert len(connections) == 1


def test_https_with_the_server_name_checked(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """TLS to a server whose certificate names ``localhost``: trusted when its CA is, and a
    certificate for another name is refused (server_hostname is checked)."""
    contexts = {}
    for name in ("localhost", "elsewhere.test"):
        key, cert = tmp_path / f"{name}.key", tmp_path / f"{name}.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", f"/CN={name}", "-addext", f"subjectAltName=DNS:{name}",
                        "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True, timeout=HANG_S)
        server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server.load_cert_chain(cert, key)
        client = ssl.create_default_context(cafile=str(cert))
        contexts[name] = (server, client)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if await read_request(reader) is not None:
                data = json.dumps(completion("secure")).encode()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s"
                             % (len(data), data))
                await writer.drain()
        finally:
            writer.close()

    async def body(url: str) -> str:
        return str((await make(url, max_retries=0).act(request())).content)

    for name, (server, client) in contexts.items():
        monkeypatch.setattr(raw_http, "_SSL", client)
        if name == "localhost":
            assert asyncio.run(with_server(handle, body, server)) == "secure"
        else:
            with pytest.raises(PolicyError, match=r"CERTIFICATE_VERIFY_FAILED|hostname"):
                asyncio.run(with_server(handle, body, server))


# --- options, import cost, an episode ---------------------------------------------------------


def test_transport_option_is_validated() -> None:
    with pytest.raises(ConfigError, match="unknown transport 'h2'") as excinfo:
        make("http://127.0.0.1:1/v1", "h2")
    for name in ("transport=auto", "transport=sdk", "transport=http"):
        assert name in (excinfo.value.hint or "")
    with pytest.raises(ConfigError, match="http:// or https://"):
        make("ftp://127.0.0.1/v1")
    with OpenAICompatServer([openai_text("via registry")]) as srv:
        policy = make_policy("openai:test-model", {"base_url": srv.base_url + "/v1",
                                                   "transport": "http"})
        assert act(policy).content == "via registry"
    assert "authorization" not in srv.requests[0].headers  # no key, none sent


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "https_proxy", "ALL_PROXY"])
def test_a_proxy_for_a_remote_host_is_refused(variable: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY",
                 "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, "http://proxy.internal:3128")
    with pytest.raises(ConfigError, match="does not go through proxies") as excinfo:
        make("https://api.example.com/v1")
    assert "transport=sdk" in (excinfo.value.hint or "")
    make("https://api.example.com/v1", "sdk")  # the SDK honours it
    make("http://127.0.0.1:8000/v1")  # a local server is never proxied
    monkeypatch.setenv("NO_PROXY", "api.example.com")
    make("https://api.example.com/v1")


def test_the_http_transport_imports_neither_the_sdk_nor_httpx() -> None:
    with OpenAICompatServer([openai_text("light")]) as srv:
        code = ("import asyncio, sys, types; from harnessgrid.policies import PolicyRequest; "
                "from harnessgrid.policies.openai_compat import OpenAIPolicy as P; "
                f"p = P('m', base_url='{srv.base_url}/v1', transport='http'); "
                "s = types.SimpleNamespace(); "
                "r = PolicyRequest(messages=[], tools=[], native_tools=False, "
                "state=s, new_segment=False); "
                "assert asyncio.run(p.act(r)).content == 'light'; "
                "sys.exit(bool({'openai', 'httpx', 'litellm'} & set(sys.modules)))")
        done = subprocess.run([sys.executable, "-c", code], check=False, timeout=HANG_S,
                              env={**os.environ, "OPENAI_API_KEY": ""})
    assert done.returncode == 0


def test_an_episode_through_run_episode() -> None:
    script = [openai_tool_call("run_command", {"command": "tr a-z A-Z < in.txt > out.txt"}),
              openai_tool_call("finish", {"summary": "upper-cased"})]
    with OpenAICompatServer(script) as srv:
        policy = hg.make_policy("openai:test-model", {"base_url": srv.base_url + "/v1",
                                                      "max_retries": 0, "transport": "http"})
        traj = asyncio.run(hg.run_episode(hg.resolve_harness("S0-T0-O0-C0-W0"), UPPER_TASK,
                                          policy))
        sent: Sequence[Any] = [r.json for r in srv.requests]
    assert traj.termination == "finished", traj.error
    assert traj.score == 1.0, traj.error
    assert (traj.tokens_in, traj.tokens_out) == (22, 14)
    assert len(sent) == 2
    assert {t["function"]["name"] for t in sent[0]["tools"]} >= {"run_command", "finish"}
