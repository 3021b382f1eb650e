"""Scripted local model servers for tests: real HTTP on 127.0.0.1, canned answers, recorded requests.

Why: the API policies (litellm, anthropic) must be tested through their real clients, offline,
including the awkward cases (malformed tool calls, empty turns, 429/5xx then success). Each
server plays a *script*, a list of responses consumed in order, and records every request so a
test can assert what the client sent::

    with OpenAICompatServer([openai_tool_call("read_file", {"path": "a.txt"}), openai_text("done")]) as srv:
        ...  # point a client at srv.base_url
        assert srv.requests[0].json["tools"][0]["function"]["name"] == "read_file"

A script entry is a :class:`Canned` response, a plain dict (a 200 JSON body), or a callable that
gets the :class:`RecordedRequest` and returns one of those. Completion bodies built by the helpers
leave ``model`` and ids empty; the server fills them in (the requested model, per-server counters),
so scripts stay short and ids stay unique within a conversation. When the client asks for
``stream: true`` the same canned completion is sent as server-sent events. Standard library only.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Self

__all__ = [
    "AnthropicCompatServer",
    "Canned",
    "OpenAICompatServer",
    "RecordedRequest",
    "ScriptedServer",
    "anthropic_error",
    "anthropic_message",
    "anthropic_text",
    "anthropic_tool_use",
    "http_error",
    "openai_call",
    "openai_completion",
    "openai_raw_tool_call",
    "openai_text",
    "openai_tool_call",
    "stream_cut",
]


@dataclass
class Canned:
    """One scripted HTTP response. ``body`` is JSON-encoded unless it is ``str``/``bytes``."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # sleep before answering, to exercise client timeouts
    #: When streamed: send only this many events, then ``stream_error`` (if any) and close
    #: the connection, as a server that fails mid-reply (see :func:`stream_cut`).
    cut_after: int | None = None
    stream_error: Any = None


@dataclass
class RecordedRequest:
    """A request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes

    @property
    def json(self) -> Any:
        """The body decoded as JSON (``None`` for an empty body)."""
        return json.loads(self.body) if self.body else None


ScriptEntry = Canned | dict[str, Any] | Callable[[RecordedRequest], "Canned | dict[str, Any]"]


# --- response builders: OpenAI chat completions ------------------------------------------------


def openai_call(
    name: str, arguments: dict[str, Any] | str, call_id: str | None = None
) -> dict[str, Any]:
    """One ``tool_calls`` entry; a ``str`` ``arguments`` is sent verbatim (it may be malformed)."""
    encoded = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": encoded}}


def openai_completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    finish_reason: str | None = None,
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
) -> Canned:
    """A full chat-completion body; ``finish_reason`` defaults to ``tool_calls``/``stop``."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body = {
        "id": None,
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": None,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return Canned(body=body)


def openai_text(text: str, **kwargs: Any) -> Canned:
    """An assistant turn with text only (``""`` for an empty turn)."""
    return openai_completion(text, **kwargs)


def openai_tool_call(
    name: str, arguments: dict[str, Any], *, content: str | None = None, call_id: str | None = None
) -> Canned:
    """An assistant turn with one well-formed tool call (and optional text)."""
    return openai_completion(content, [openai_call(name, arguments, call_id)])


def openai_raw_tool_call(
    name: str, arguments: str, *, content: str | None = None, call_id: str | None = None
) -> Canned:
    """An assistant turn whose call carries ``arguments`` verbatim: invalid JSON, unknown tools."""
    return openai_completion(content, [openai_call(name, arguments, call_id)])


_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
}


def http_error(
    status: int,
    body: Any = None,
    *,
    message: str | None = None,
    retry_after_ms: int | None = 10,
    headers: dict[str, str] | None = None,
) -> Canned:
    """An error response, OpenAI-shaped unless ``body`` is given.

    ``retry-after-ms`` is set (10 ms by default) so SDK retries in tests do not sleep for seconds.
    """
    if body is None:
        body = {
            "error": {
                "message": message or f"canned HTTP {status}",
                "type": _OPENAI_ERROR_TYPES.get(status, "server_error"),
                "param": None,
                "code": None,
            }
        }
    all_headers = dict(headers or {})
    if retry_after_ms is not None:
        all_headers.setdefault("retry-after-ms", str(retry_after_ms))
    return Canned(status=status, body=body, headers=all_headers)


def stream_cut(canned: Canned, after: int, error: Any = None) -> Canned:
    """``canned`` answered as a stream that breaks off after ``after`` events: the connection
    closes there, after an error event carrying ``error`` when given (OpenAI servers send it
    as ``data: {"error": ...}``, Anthropic as ``event: error``). Unstreamed it is unchanged."""
    return dataclasses.replace(canned, cut_after=after, stream_error=error)


# --- response builders: Anthropic messages -----------------------------------------------------


def anthropic_message(
    content: list[dict[str, Any]],
    *,
    stop_reason: str | None = None,
    input_tokens: int = 11,
    output_tokens: int = 7,
) -> Canned:
    """A full Messages API body; ``stop_reason`` defaults to ``tool_use``/``end_turn``."""
    has_tool_use = any(block.get("type") == "tool_use" for block in content)
    body = {
        "id": None,
        "type": "message",
        "role": "assistant",
        "model": None,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if has_tool_use else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }
    return Canned(body=body)


def anthropic_text(text: str, **kwargs: Any) -> Canned:
    """An assistant message with one text block."""
    return anthropic_message([{"type": "text", "text": text}], **kwargs)


def anthropic_tool_use(
    name: str, input: dict[str, Any], *, text: str | None = None, tool_id: str | None = None
) -> Canned:
    """An assistant message with an optional text block then one ``tool_use`` block."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks.append({"type": "tool_use", "id": tool_id, "name": name, "input": input})
    return anthropic_message(blocks)


_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def anthropic_error(
    status: int, message: str | None = None, *, retry_after_ms: int | None = 10
) -> Canned:
    """An error in the Anthropic shape, e.g. ``anthropic_error(529)`` for *overloaded*."""
    error_type = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
    body = {"type": "error", "error": {"type": error_type, "message": message or error_type}}
    return http_error(status, body, retry_after_ms=retry_after_ms)


# --- the server ---------------------------------------------------------------------------------


class ScriptedServer:
    """Plays a script of responses on a background ``ThreadingHTTPServer`` bound to 127.0.0.1."""

    #: POST paths that consume the script; subclasses set them.
    api_paths: ClassVar[tuple[str, ...]] = ()

    def __init__(self, script: Iterable[ScriptEntry] = (), *, api_key: str | None = None) -> None:
        self.script: list[ScriptEntry] = list(script)
        self.requests: list[RecordedRequest] = []
        self.api_key = api_key  # when set, requests without it get a 401
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> Self:
        handler = type("Handler", (_Handler,), {"server_logic": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        # A short poll interval makes shutdown() (hence leaving the `with` block) take ~10 ms.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash, no ``/v1``)."""
        if self._httpd is None:
            raise RuntimeError("server is not running; use it as a context manager or call start()")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def remaining(self) -> int:
        """Script entries not yet consumed."""
        with self._lock:
            return len(self.script)

    def push(self, *entries: ScriptEntry) -> None:
        """Append responses to the script while the server runs."""
        with self._lock:
            self.script.extend(entries)

    # request handling (called from handler threads)

    def handle(self, request: RecordedRequest) -> tuple[Canned, bool]:
        """Return the response for ``request`` and whether to stream it as SSE."""
        with self._lock:
            self.requests.append(request)
        if self.api_key is not None and self.api_key not in _credentials(request.headers):
            return http_error(401, message="invalid api key", retry_after_ms=None), False
        if request.method == "GET":
            return self.handle_get(request), False
        if request.path.split("?")[0] not in self.api_paths:
            return http_error(404, message=f"no route {request.path}", retry_after_ms=None), False
        try:
            payload = request.json
        except ValueError:
            return http_error(400, message="request body is not JSON", retry_after_ms=None), False
        with self._lock:
            if not self.script:
                entry: ScriptEntry = http_error(
                    500,
                    message="script exhausted: the test scripted fewer responses",
                    retry_after_ms=None,
                    headers={"x-should-retry": "false"},  # SDKs must not retry a test bug
                )
            else:
                entry = self.script.pop(0)
            seq = next(self._ids)
        try:
            canned = entry(request) if callable(entry) else entry
        except Exception as exc:  # noqa: BLE001 - a broken test callable: answer, do not drop
            message = f"script callable raised {exc!r}"
            no_retry = {"x-should-retry": "false"}
            return http_error(500, message=message, retry_after_ms=None, headers=no_retry), False
        if isinstance(canned, dict):
            canned = Canned(body=canned)
        if canned.status != 200 or not isinstance(canned.body, dict):
            return canned, False
        stream = isinstance(payload, dict) and bool(payload.get("stream"))
        return dataclasses.replace(canned, body=self.complete(canned.body, payload, seq)), stream

    def handle_get(self, request: RecordedRequest) -> Canned:
        return http_error(404, message=f"no route GET {request.path}", retry_after_ms=None)

    def complete(self, body: dict[str, Any], payload: Any, seq: int) -> dict[str, Any]:
        """Fill in what the helpers left empty (model, ids)."""
        return body

    def sse_events(self, body: dict[str, Any], payload: Any) -> Iterator[bytes]:
        raise NotImplementedError

    def sse_error(self, error: Any) -> bytes:
        """An error event sent in the middle of a stream (:func:`stream_cut`)."""
        return _sse(error)


def _credentials(headers: dict[str, str]) -> str:
    return headers.get("authorization", "") + " " + headers.get("x-api-key", "")


class _Handler(BaseHTTPRequestHandler):
    """Turns HTTP into :meth:`ScriptedServer.handle` calls; one instance per connection."""

    server_logic: ClassVar[ScriptedServer]
    protocol_version = "HTTP/1.1"  # keep-alive, as real APIs; SSE answers close the connection
    timeout = 10  # idle keep-alive connections do not keep handler threads alive forever

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        canned, stream = self.server_logic.handle(request)
        if canned.delay_s:
            time.sleep(canned.delay_s)
        if stream:
            events = self.server_logic.sse_events(canned.body, request.json)
            if canned.cut_after is not None:
                events = itertools.islice(events, canned.cut_after)
                if canned.stream_error is not None:
                    events = itertools.chain(
                        events, [self.server_logic.sse_error(canned.stream_error)])
            self._send_sse(events, canned.headers)
        else:
            self._send(canned)

    def _send(self, canned: Canned) -> None:
        if isinstance(canned.body, bytes):
            data, content_type = canned.body, "application/octet-stream"
        elif isinstance(canned.body, str):
            data, content_type = canned.body.encode(), "text/plain; charset=utf-8"
        else:
            data, content_type = json.dumps(canned.body).encode(), "application/json"
        self.send_response(canned.status)
        headers = {
            "content-type": content_type,
            **{k.lower(): v for k, v in canned.headers.items()},
        }
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_sse(self, events: Iterator[bytes], headers: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        for event in events:
            self.wfile.write(event)
            self.wfile.flush()
        self.close_connection = True


def _sse(data: Any, event: str | None = None) -> bytes:
    prefix = f"event: {event}\n" if event else ""
    text = data if isinstance(data, str) else json.dumps(data)
    return f"{prefix}data: {text}\n\n".encode()


def _pieces(text: str, size: int = 8) -> list[str]:
    """Split a string into chunks, so streaming clients must reassemble it."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class OpenAICompatServer(ScriptedServer):
    """``POST /v1/chat/completions`` (also ``/chat/completions``) and ``GET /v1/models``."""

    api_paths = ("/v1/chat/completions", "/chat/completions")

    def handle_get(self, request: RecordedRequest) -> Canned:
        if request.path.split("?")[0] in ("/v1/models", "/models"):
            model = {
                "id": "test-model",
                "object": "model",
                "created": 0,
                "owned_by": "harnessgrid-tests",
            }
            return Canned(body={"object": "list", "data": [model]})
        return super().handle_get(request)

    def complete(self, body: dict[str, Any], payload: Any, seq: int) -> dict[str, Any]:
        body = json.loads(json.dumps(body))  # never mutate the script's objects
        if body.get("object") != "chat.completion":
            return body
        body["id"] = body.get("id") or f"chatcmpl-{seq}"
        body["model"] = body.get("model") or (payload or {}).get("model") or "test-model"
        for choice in body.get("choices", []):
            for k, call in enumerate(choice.get("message", {}).get("tool_calls") or []):
                call["id"] = call.get("id") or f"call_{seq}_{k}"
        return body

    def sse_events(self, body: dict[str, Any], payload: Any) -> Iterator[bytes]:
        """The completion as ``chat.completion.chunk`` events, tool arguments split in pieces."""
        if body.get("object") != "chat.completion":
            yield _sse(body)
            return
        base = {
            "id": body["id"],
            "object": "chat.completion.chunk",
            "created": body["created"],
            "model": body["model"],
        }
        if not body.get("choices"):  # a broken answer: no choices, only the usage
            yield _sse({**base, "choices": [], "usage": body.get("usage")})
            yield _sse("[DONE]")
            return
        choice = body["choices"][0]
        message = choice["message"]

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
            return _sse(
                {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
            )

        yield chunk({"role": "assistant", "content": ""})
        if message.get("content"):
            for piece in _pieces(message["content"]):
                yield chunk({"content": piece})
        for k, call in enumerate(message.get("tool_calls") or []):
            function = call["function"]
            head = {
                "index": k,
                "id": call["id"],
                "type": "function",
                "function": {"name": function["name"], "arguments": ""},
            }
            yield chunk({"tool_calls": [head]})
            for piece in _pieces(function["arguments"]):
                yield chunk({"tool_calls": [{"index": k, "function": {"arguments": piece}}]})
        yield chunk({}, choice["finish_reason"])
        if ((payload or {}).get("stream_options") or {}).get("include_usage"):
            yield _sse({**base, "choices": [], "usage": body.get("usage")})
        yield _sse("[DONE]")


class AnthropicCompatServer(ScriptedServer):
    """``POST /v1/messages`` in the Anthropic Messages API shape."""

    api_paths = ("/v1/messages",)

    def sse_error(self, error: Any) -> bytes:
        return _sse(error, "error")

    def complete(self, body: dict[str, Any], payload: Any, seq: int) -> dict[str, Any]:
        body = json.loads(json.dumps(body))  # never mutate the script's objects
        if body.get("type") != "message":
            return body
        body["id"] = body.get("id") or f"msg_{seq:024d}"
        body["model"] = body.get("model") or (payload or {}).get("model") or "test-model"
        for k, block in enumerate(body.get("content", [])):
            if block.get("type") == "tool_use":
                block["id"] = block.get("id") or f"toolu_{seq:020d}{k:04d}"
        return body

    def sse_events(self, body: dict[str, Any], payload: Any) -> Iterator[bytes]:
        """The message as ``message_start`` ... ``message_stop`` events."""
        if body.get("type") != "message":
            yield _sse(body, "error")
            return
        start = {
            **body,
            "content": [],
            "stop_reason": None,
            "usage": {**body["usage"], "output_tokens": 0},
        }
        yield _sse({"type": "message_start", "message": start}, "message_start")
        for k, block in enumerate(body["content"]):
            if block["type"] == "tool_use":
                empty = {**block, "input": {}}
                deltas = [
                    {"type": "input_json_delta", "partial_json": p}
                    for p in _pieces(json.dumps(block["input"]))
                ]
            else:
                empty = {**block, "text": ""}
                deltas = [{"type": "text_delta", "text": p} for p in _pieces(block.get("text", ""))]
            yield _sse(
                {"type": "content_block_start", "index": k, "content_block": empty},
                "content_block_start",
            )
            for delta in deltas:
                yield _sse(
                    {"type": "content_block_delta", "index": k, "delta": delta},
                    "content_block_delta",
                )
            yield _sse({"type": "content_block_stop", "index": k}, "content_block_stop")
        yield _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": body["usage"]["output_tokens"]},
            },
            "message_delta",
        )
        yield _sse({"type": "message_stop"}, "message_stop")
