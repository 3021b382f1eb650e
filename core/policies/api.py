"""Chat policies behind HTTP APIs: litellm (any provider) and the Anthropic Messages API (the
OpenAI-compatible one, on the same base, is in :mod:`harnessgrid.policies.openai_compat`).

The backends share one error policy, so that ``max_retries`` means the same thing everywhere:

* the libraries' own retries are switched off and ours retry *transient* failures only (HTTP
  408/429/5xx, 529 *overloaded*, timeouts, lost connections) with exponential backoff, jitter,
  and the server's ``retry-after`` when it sends one;
* anything else (bad key, unknown model, bad request) is a :class:`PolicyError` at once, naming
  the policy and the fix: retrying a request that cannot succeed only burns time and quota; an
  authentication failure (HTTP 401/403, the SDKs' ``AuthenticationError`` /
  ``PermissionDeniedError``, a client that found no key) says that the key was rejected or
  missing and names the variable it is read from;
* a missing key is found before the first request: creating a policy whose provider needs a
  key that is neither in its environment variable nor passed as ``api_key`` raises a
  :class:`ConfigError` naming the provider and the variable, so ``harnessgrid run`` / ``eval``
  and ``run_agent`` fail before any sandbox starts (a policy given ``api_base`` / ``base_url``,
  a local server, needs no key);
* ``timeout_s`` bounds each call as a whole (the SDKs' own timeouts are per read);
* no wait outlives the episode: the request's ``deadline`` (the episode's wall limit) caps
  each call's timeout, and a retry whose wait (the server's ``retry-after`` or our backoff)
  would end past it fails at once as a :class:`PolicyError`, an infrastructure failure the
  evaluator retries, instead of sleeping until the wall limit cuts the episode;
* a reply that holds no answer at all (no choices; no content blocks and no stop reason) is a
  :class:`PolicyError`, not an empty turn the grader would score 0;
* a malformed tool call is the *model's* mistake, not a failure: it is returned as a
  :class:`ToolCall` with ``parse_error`` so the harness can show it as a format error.

Streaming (``PolicyRequest.on_text`` set; :mod:`harnessgrid.policies.streaming`): the request
asks for a stream (``stream=True``; OpenAI-style requests add ``stream_options.include_usage``
so the token counts stay right), each text piece goes to ``on_text`` as it arrives, and the
reassembled reply is the same :class:`ModelTurn` the unstreamed call returns. The error policy
above holds, with two additions: a stream that ends before the reply does (a lost connection)
or, from Anthropic, an *overloaded* or server ``error`` event inside it is transient, but only
until the first text piece reached ``on_text``: a failure after that is a :class:`PolicyError`
(the consumer already showed part of this answer, and a retry could answer differently; text is
never repeated); and an exception raised by ``on_text`` propagates as itself, never retried.
Without ``on_text`` the request is exactly the unstreamed one.

Neither library is imported by importing this module (``import harnessgrid`` stays light); each
is imported when its policy is created, so a missing extra is reported before any episode runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from types import ModuleType, SimpleNamespace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from harnessgrid import safe_json
from harnessgrid.errors import ConfigError, PolicyError
from harnessgrid.models import Message, ModelTurn, ToolCall
from harnessgrid.policies import PolicyRequest
from harnessgrid.policies.keys import pass_option
from harnessgrid.policies.streaming import AnthropicEvents, ChatChunks, StreamBrokeOff, TextSink

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

T = TypeVar("T")
C = TypeVar("C")

_MAX_DELAY_S = 60.0
API_INSTALL_HINT = "pip install 'harnessgrid[api]'"


# --- shared: tool-call decoding, errors, retries ----------------------------------------------


def decode_call(call_id: object, name: object, raw: object) -> ToolCall:
    """A tool call from an API; never raises: arguments that are not one JSON object within
    the bounds of :func:`harnessgrid.safe_json.loads` (too deep, a number too long, bytes
    that are not UTF-8, not JSON at all) become ``parse_error``, which the harness shows the
    model as a format error, so the turn is scored like any malformed call.

    Text (OpenAI-style APIs) or bytes are decoded; an object an SDK already decoded
    (Anthropic's ``input``) is taken as it is, :class:`ToolCall` bounding its depth and
    values without recursion. Blank arguments mean a call without arguments (several
    servers send ``""`` for ``{}``); the harness still rejects the call if the tool needs
    arguments.
    """
    call_id = call_id if isinstance(call_id, str) and call_id else f"call_{uuid.uuid4().hex[:12]}"
    name = name if isinstance(name, str) else ""  # no name: "unknown tool", a format error
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return ToolCall(id=call_id, name=name)
    if isinstance(raw, dict):
        return ToolCall(id=call_id, name=name, arguments=raw)
    if not isinstance(raw, str | bytes | bytearray):
        return ToolCall(id=call_id, name=name, raw_arguments=_shown(raw),
                        parse_error=f"the arguments must be a JSON object, not "
                                    f"{type(raw).__name__}")
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "replace")
    try:
        value = safe_json.loads(raw)
    except safe_json.JSONError as exc:
        error = f"the arguments are not valid JSON ({exc})"
    else:
        if isinstance(value, dict):
            return ToolCall(id=call_id, name=name, arguments=value)
        error = f"the arguments must be a JSON object, not {type(value).__name__}"
    return ToolCall(id=call_id, name=name, raw_arguments=text, parse_error=error)


def _shown(value: object) -> str:
    """Arguments that are not an object, as JSON for the model to see (their type when even
    that fails: too deep, a number too long)."""
    try:
        return json.dumps(value, default=str)[:200]
    except (RecursionError, TypeError, ValueError):
        return type(value).__name__


def _status(exc: Exception) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def transient_status(exc: Exception) -> bool:
    """Request timeout, rate limit, any server-side error (5xx, Anthropic's 529 overloaded)."""
    status = _status(exc)
    return status is not None and (status in (408, 429) or status >= 500)


def _retry_after(exc: Exception) -> float:
    """Seconds the server asked us to wait (``retry-after-ms`` / ``retry-after``), 0 if none."""
    headers: Any = getattr(getattr(exc, "response", None), "headers", None) or {}
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        try:
            return float(headers.get(name)) * scale
        except (TypeError, ValueError):
            continue
    return 0.0


#: What the OpenAI and Anthropic clients say when they found no key at all (litellm turns the
#: OpenAI SDK's into an InternalServerError, status 500, which would otherwise look transient).
_MISSING_KEY = re.compile(r"missing credentials|api_key client option must be set|"
                          r"could not resolve authentication method", re.IGNORECASE)
_AUTH_ERRORS = frozenset({"AuthenticationError", "PermissionDeniedError"})


def _auth_failure(exc: Exception) -> bool:
    """The key is missing, wrong or lacks permission: HTTP 401/403, an SDK's
    ``AuthenticationError`` / ``PermissionDeniedError`` (litellm's and anthropic's), or a client
    that refused to send a request without a key."""
    if _status(exc) in (401, 403):
        return True
    if any(cls.__name__ in _AUTH_ERRORS for cls in type(exc).__mro__):
        return True
    return bool(_MISSING_KEY.search(str(exc)))


def _describe(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:400]}"


_DEADLINE_HINT = ("the backend is slow, overloaded or rate-limiting: lower the concurrency, "
                  "raise the episode's wall limit (wall_s), or try later; the episode counts as "
                  "an infrastructure failure, not a score")


class PerLoopClient(Generic[C]):
    """One SDK client per event loop: its pooled connections belong to the loop they were
    opened on, so a client must not outlive its loop (e.g. successive ``asyncio.run``). Within
    one loop, every call of the policy reuses the one client and its connections."""

    def __init__(self, make: Callable[[], C]) -> None:
        self._make = make
        self._client: tuple[asyncio.AbstractEventLoop, C] | None = None

    def get(self) -> C:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client[0] is not loop:
            self._client = (loop, self._make())
        return self._client[1]


class APIPolicy:
    """What the HTTP chat backends share (litellm, anthropic, openai): the spec, sampling
    options and the retry loop."""

    #: How to fix a rejected model or request; set by each backend.
    model_hint = ""

    def __init__(self, spec: str, *, temperature: float | None, max_tokens: int, max_retries: int,
                 backoff_s: float, timeout_s: float) -> None:
        if max_tokens < 1 or max_retries < 0 or backoff_s < 0 or timeout_s <= 0:
            raise ConfigError(f"{spec}: bad options max_tokens={max_tokens}, "
                              f"max_retries={max_retries}, backoff_s={backoff_s}, "
                              f"timeout_s={timeout_s}",
                              hint="max_tokens >= 1, max_retries >= 0, backoff_s >= 0, "
                                   "timeout_s > 0")
        self.spec = spec
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s

    def _max_tokens(self, request: PolicyRequest) -> int:
        """The runtime may lower the limit for one turn (``request.max_tokens``), never raise it."""
        return min(self.max_tokens, request.max_tokens or self.max_tokens)

    def _delay(self, attempt: int, exc: Exception) -> float:
        backoff = self.backoff_s * 2.0**attempt * random.uniform(0.5, 1.5)
        return min(_MAX_DELAY_S, max(backoff, _retry_after(exc)))

    async def _send(self, send: Callable[[float], Awaitable[T]],
                    transient: Callable[[Exception], bool], deadline: float | None,
                    sink: TextSink | None = None) -> T:
        """``send(timeout_s)`` with up to ``max_retries`` retries of transient errors, none of
        them waiting past ``deadline`` (a :func:`time.monotonic` time, None for no limit).

        ``sink``: a streamed call's text sink. Its callback's exception is re-raised as is,
        and once it has delivered text no failure is retried (module docstring)."""
        attempt = 0
        while True:
            timeout = self._attempt_timeout(deadline)
            try:
                # The SDKs' timeouts are per read; this one bounds the whole call.
                async with asyncio.timeout(timeout):
                    return await send(timeout)
            except Exception as exc:
                if sink is not None and exc is sink.error:
                    raise  # the embedder's callback failed: its exception, not ours
                if _auth_failure(exc):
                    raise self._key_rejected(exc) from exc
                if sink is not None and sink.delivered:
                    raise PolicyError(
                        f"{self.spec}: the reply broke off after part of it was streamed: "
                        f"{_describe(exc)}",
                        hint="the connection or the server failed mid-reply; a streamed reply "
                             "is not retried once text was shown, so the episode counts as an "
                             "infrastructure failure, not a score") from exc
                if not (transient(exc) or isinstance(exc, (TimeoutError, StreamBrokeOff))):
                    raise self._rejected(exc) from exc
                if _left(deadline) <= 0:
                    raise PolicyError(f"{self.spec}: no answer before the episode's wall limit: "
                                      f"{_describe(exc)}", _DEADLINE_HINT) from exc
                if attempt >= self.max_retries:
                    raise PolicyError(
                        f"{self.spec}: gave up after {attempt + 1} attempts: {_describe(exc)}",
                        hint="the provider is overloaded or unreachable: try again later, raise "
                             "max_retries/backoff_s, or check the server address") from exc
                await asyncio.sleep(self._wait(attempt, exc, deadline))
            attempt += 1

    def _attempt_timeout(self, deadline: float | None) -> float:
        left = _left(deadline)
        if left <= 0:
            raise PolicyError(f"{self.spec}: no time left of the episode's wall limit for a "
                              "request", _DEADLINE_HINT)
        return min(self.timeout_s, left)

    def _wait(self, attempt: int, exc: Exception, deadline: float | None) -> float:
        """The delay before the next attempt, or a PolicyError when the episode would be over
        by then: when the server asks for longer than is left (even if we would retry sooner,
        as ``_delay`` caps waits at a minute), or when our own backoff is."""
        delay, left = self._delay(attempt, exc), _left(deadline)
        asked = _retry_after(exc)
        if asked >= left:
            raise PolicyError(f"{self.spec}: the server asked to wait {asked:g} s before "
                              f"retrying ({_describe(exc)}), more than the {left:.1f} s left of "
                              "the episode's wall limit", _DEADLINE_HINT) from exc
        if delay >= left:
            raise PolicyError(f"{self.spec}: the next retry (in {delay:.1f} s) would come after "
                              f"the episode's wall limit ({left:.1f} s left): {_describe(exc)}",
                              _DEADLINE_HINT) from exc
        return delay

    def _rejected(self, exc: Exception) -> PolicyError:
        return PolicyError(f"{self.spec}: request rejected: {_describe(exc)}", self.model_hint)

    def _key_rejected(self, exc: Exception) -> PolicyError:
        """Authentication failed: never retried, and never called *overloaded*."""
        status = _status(exc)
        if status in (401, 403):
            what = f"the API key was rejected (HTTP {status})"
        elif _MISSING_KEY.search(str(exc)):
            what = "no API key was sent (the client found none)"
        else:
            what = "the API key was rejected"
        return PolicyError(f"{self.spec}: request rejected: {what}: {_describe(exc)}",
                           self._key_hint())

    def _key_hint(self) -> str:
        """Where the key came from and how to fix it; backends override."""
        return "check the API key, or " + pass_option("api_key=...")


def _left(deadline: float | None) -> float:
    """Seconds until ``deadline`` (infinite for none)."""
    return float("inf") if deadline is None else deadline - time.monotonic()


def _int(obj: object, name: str) -> int:
    value = getattr(obj, name, None)
    return value if isinstance(value, int) else 0


# --- litellm ------------------------------------------------------------------------------------


def _import_litellm() -> ModuleType:
    # Without this litellm downloads its model cost map at import: slow, and fails offline.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError as exc:
        raise ConfigError("the litellm policy needs the litellm package", API_INSTALL_HINT) from exc
    litellm.suppress_debug_info = True
    litellm.telemetry = False  # gone in recent versions; harmless there
    return litellm


class LiteLLMPolicy(APIPolicy):
    """A chat policy through ``litellm.acompletion``: any provider litellm knows, or any
    OpenAI-compatible server (``api_base``, model ``openai/<name>``). ``extra`` is passed to
    ``acompletion`` as is (e.g. ``{"top_p": 0.9}``)."""

    model_hint = ("check the model name and its provider prefix (e.g. litellm:openai/gpt-4o-mini), "
                  "api_base and the options; the provider's message says what it rejected")

    def __init__(self, model: str, *, api_base: str | None = None, api_key: str | None = None,
                 temperature: float = 0.0, max_tokens: int = 2048, max_retries: int = 4,
                 backoff_s: float = 1.0, timeout_s: float = 120.0,
                 extra: dict[str, Any] | None = None) -> None:
        if not model.strip():
            raise ConfigError("the litellm policy needs a model name",
                              hint="write litellm:<provider>/<model>, e.g. litellm:openai/gpt-4o-mini")
        super().__init__(f"litellm:{model}", temperature=temperature, max_tokens=max_tokens,
                         max_retries=max_retries, backoff_s=backoff_s, timeout_s=timeout_s)
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.extra = dict(extra or {})
        self._litellm = litellm = _import_litellm()
        self.provider = _provider(litellm, model)
        # A local server ignores the key, but the OpenAI client refuses to send a request
        # without one (litellm reports that as a retryable server error): send a placeholder.
        self._placeholder_key = require_litellm_key(
            model, what=self.spec, api_key=api_key, api_base=api_base,
            key_hint=pass_option("api_key=..."), base_option="api_base",
            other_credentials=_has_credentials(self.extra))
        missing = _missing_keys(litellm, model)
        #: The variable the key is read from (named in the hint when a key is rejected).
        self.key_variable = missing[0] if missing else _key_variable(self.provider)

    async def act(self, request: PolicyRequest) -> ModelTurn:
        litellm = self._litellm
        kwargs: dict[str, Any] = {
            **self.extra,
            "model": self.model,
            "messages": [m.openai() for m in request.messages],
            "temperature": self.temperature,
            "max_tokens": self._max_tokens(request),
            "api_base": self.api_base,
            "api_key": "unused" if self._placeholder_key else self.api_key,
            "num_retries": 0,  # litellm's own retry loop
            "max_retries": 0,  # the OpenAI SDK's retry loop underneath
        }
        if request.native_tools and request.tools:  # OpenAI rejects an empty tools list
            kwargs["tools"] = [t.openai() for t in request.tools]
        transient_types = (litellm.RateLimitError, litellm.ServiceUnavailableError,
                           litellm.InternalServerError, litellm.BadGatewayError,
                           litellm.APIConnectionError, litellm.Timeout)

        def transient(exc: Exception) -> bool:
            return isinstance(exc, transient_types) or transient_status(exc)

        if request.on_text is not None:
            return chunks_turn(self.spec, await self._stream(kwargs, transient, request))
        response = await self._send(lambda timeout: litellm.acompletion(**kwargs, timeout=timeout),
                                    transient, request.deadline)
        return openai_turn(self.spec, response)

    async def _stream(self, kwargs: dict[str, Any], transient: Callable[[Exception], bool],
                      request: PolicyRequest) -> ChatChunks:
        """The streamed call: litellm passes ``stream_options`` on to OpenAI-style servers and
        applies it itself for the others (without it, it drops the usage chunk)."""
        assert request.on_text is not None
        sink = TextSink(request.on_text)
        kwargs = {**kwargs, "stream": True, "stream_options": {"include_usage": True}}

        async def send(timeout: float) -> ChatChunks:
            chunks = ChatChunks(sink)
            stream = await self._litellm.acompletion(**kwargs, timeout=timeout)
            try:
                async for chunk in stream:
                    chunks.add(chunk)
            finally:  # release the connection, also when cancelled or the callback raised
                await stream.aclose()
            chunks.check_complete()
            return chunks

        return await self._send(send, transient, request.deadline, sink)

    def _key_hint(self) -> str:
        variable = self.key_variable or "the provider's key variable (e.g. OPENAI_API_KEY)"
        if self._placeholder_key:
            return (f"the server at {self.api_base} wants a key: set {variable}, or "
                    + pass_option("api_key=..."))
        if self.api_key is not None:
            return f"check the key passed as api_key ({self.provider or 'the provider'} reads " \
                   f"{variable} when none is passed)"
        return f"check the key in {variable}, or " + pass_option("api_key=...")


#: Key variables that differ from ``<PROVIDER>_API_KEY`` (used when the key is present, so
#: litellm does not name it).
_KEY_VARIABLES = {"together_ai": "TOGETHERAI_API_KEY", "gemini": "GEMINI_API_KEY",
                  "hosted_vllm": "", "ollama": "", "ollama_chat": "", "bedrock": "",
                  "sagemaker": "", "vertex_ai": "", "vertex_ai_beta": ""}

#: ``extra`` options that carry a credential of their own (Azure AD, AWS, Vertex, headers).
_CREDENTIAL_OPTION = re.compile(r"key|token|credential|secret|aws_|vertex_|headers|api_base|"
                                r"base_url", re.IGNORECASE)


def _provider(litellm: ModuleType, model: str) -> str:
    try:
        return str(litellm.get_llm_provider(model=model)[1] or "")
    except Exception:  # noqa: BLE001 - an unknown provider: litellm says so at the first call
        return ""


def _missing_keys(litellm: ModuleType, model: str) -> list[str]:
    """The key variables litellm wants for ``model`` and does not find in the environment.

    Only API keys and tokens: a provider whose missing variables are a server address
    (Ollama's default is localhost) or ambient credentials (AWS profiles, Google ADC) is left
    to fail, or not, at its first call."""
    try:
        found = litellm.validate_environment(model=model)
    except Exception:  # noqa: BLE001 - never block a policy on a failing check
        return []
    missing = found.get("missing_keys") if isinstance(found, dict) else None
    return [str(name) for name in missing or ()
            if re.search(r"_API_KEY$|_API_TOKEN$|_APIKEY$", str(name))]


def _key_variable(provider: str) -> str:
    if not provider:
        return ""
    return _KEY_VARIABLES.get(provider, f"{provider.upper()}_API_KEY")


def require_litellm_key(model: str, *, what: str, api_key: str | None, api_base: str | None,
                        key_hint: str, base_option: str,
                        other_credentials: bool = False) -> bool:
    """Check, before anything runs, that a litellm ``model`` has a key (the policy's rule, for
    any other litellm caller, e.g. an LLM judge): a ConfigError naming the variable when the
    provider's is not set and no key (``key_hint``: how to pass one), other credentials (``other_credentials``: e.g. AWS
    options) or server address was given. True when the call needs a
    placeholder key: a server given by address ignores it, but the OpenAI client refuses to
    send a request without one."""
    litellm = _import_litellm()
    missing = _missing_keys(litellm, model)
    if api_key is not None or other_credentials or not missing:
        return False
    if api_base is None:
        provider = _provider(litellm, model) or "this provider"
        raise ConfigError(
            f"{what}: no API key for {provider}: {' or '.join(missing)} is not set",
            hint=f"export {' or '.join(f'{m}=...' for m in missing)}, or {key_hint}; "
                 f"for a local OpenAI-compatible server pass {base_option}=URL (e.g. "
                 "http://127.0.0.1:8000/v1), which needs no key")
    return True


def _has_credentials(extra: dict[str, Any]) -> bool:
    return any(_CREDENTIAL_OPTION.search(name) for name in extra)


def _no_choices(spec: str) -> PolicyError:
    return PolicyError(f"{spec}: the server answered with no choices (no completion at all)",
                       hint="the server failed without an error status: check its log; "
                            "the episode counts as an infrastructure failure, not a score")


def openai_turn(spec: str, response: Any) -> ModelTurn:
    """A chat-completion response as a :class:`ModelTurn`. No choices is no answer at all (a
    server that failed without saying so): a :class:`PolicyError`, never an empty turn."""
    usage = getattr(response, "usage", None)
    tokens_in, tokens_out = _int(usage, "prompt_tokens"), _int(usage, "completion_tokens")
    if not getattr(response, "choices", None):
        raise _no_choices(spec)
    choice = response.choices[0]
    message = choice.message
    # Calls without a ``function`` (OpenAI's *custom* tools) get an empty name: a format error.
    calls = tuple(decode_call(c.id, getattr(getattr(c, "function", None), "name", None),
                              getattr(getattr(c, "function", None), "arguments", None))
                  for c in message.tool_calls or ())
    content = message.content if isinstance(message.content, str) else ""
    return ModelTurn(content=content, tool_calls=calls, finish_reason=choice.finish_reason,
                     tokens_in=tokens_in, tokens_out=tokens_out)


def chunks_turn(spec: str, chunks: ChatChunks) -> ModelTurn:
    """A reassembled chat-completion stream as the :class:`ModelTurn` that
    :func:`openai_turn` makes of the same reply unstreamed."""
    if not chunks.choices:
        raise _no_choices(spec)
    calls = tuple(decode_call(c["id"], c["name"], c["arguments"])
                  for _, c in sorted(chunks.calls.items()))
    return ModelTurn(content="".join(chunks.text), tool_calls=calls,
                     finish_reason=chunks.finish_reason,
                     tokens_in=_int(chunks.usage, "prompt_tokens"),
                     tokens_out=_int(chunks.usage, "completion_tokens"))


# --- Anthropic ----------------------------------------------------------------------------------

_NO_RESULT = "No result was recorded for this call."
_OPENING = "(The conversation continues.)"


def to_anthropic(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """Chat messages as the Messages API wants them: ``(system, messages)``.

    The API is stricter than the chat format, so the conversion repairs what it must: system
    messages go to the top-level ``system``; roles strictly alternate starting with ``user``
    (same-role neighbours are merged, tool results become ``user`` content); blank text is
    dropped; each ``tool_result`` answers a ``tool_use`` of the assistant message right before
    it (any other result is kept as text) and comes before the text of its message; a
    ``tool_use`` left unanswered gets an error result, as the API requires one for each.
    """
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content.strip())
    out: list[dict[str, Any]] = []
    open_ids: set[str] = set()  # tool_use ids of the latest assistant message, not yet answered
    for m in messages:
        if m.role == "system":
            continue
        blocks = _text_blocks(m.content)
        if m.role == "assistant":
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                       for c in m.tool_calls]
            if blocks and not (out and out[-1]["role"] == "assistant"):
                open_ids = set()
            open_ids |= {c.id for c in m.tool_calls}
        elif m.role == "tool" and m.tool_call_id in open_ids:
            open_ids.discard(m.tool_call_id)
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id}
            blocks = [result | ({"content": m.content} if m.content.strip() else {})]
        elif m.role == "tool":  # its call is not in the message before: keep it as text
            blocks = _text_blocks(f"[result of {m.name or 'a tool call'} ({m.tool_call_id})]\n"
                                  f"{m.content}")
        _append(out, "assistant" if m.role == "assistant" else "user", blocks)
    for i, message in enumerate(out):
        if message["role"] == "assistant":
            _answer_all(out, i)
    for message in out:  # the API wants tool results first in a user message
        message["content"].sort(key=lambda b: b["type"] != "tool_result")
    if not out or out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": _text_blocks(_OPENING)})
    return system, out


def _text_blocks(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}] if text.strip() else []


def _append(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if not blocks:
        return
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


def _answer_all(out: list[dict[str, Any]], i: int) -> None:
    """Give every ``tool_use`` of ``out[i]`` a result in the next message (added if missing)."""
    asked = [b["id"] for b in out[i]["content"] if b["type"] == "tool_use"]
    if not asked:
        return
    if i + 1 == len(out):
        out.append({"role": "user", "content": []})
    answered = {b["tool_use_id"] for b in out[i + 1]["content"] if b["type"] == "tool_result"}
    out[i + 1]["content"].extend(
        {"type": "tool_result", "tool_use_id": call_id, "content": _NO_RESULT, "is_error": True}
        for call_id in dict.fromkeys(asked) if call_id not in answered)


class AnthropicPolicy(APIPolicy):
    """A chat policy on the Anthropic Messages API through the official async SDK
    (``base_url`` for a compatible server).

    ``temperature`` is not sent unless given: the API version of anthropic>=2 rejects any
    sampling parameter (and the SDK no longer takes one), but a compatible server or an older
    API version may still honour it, so when given it travels in the request body as is.
    """

    model_hint = ("check the model name (e.g. anthropic:claude-sonnet-4-5), base_url and the "
                  "options; the API's message says what it rejected")

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 api_key_env: str | None = None, temperature: float | None = None,
                 max_tokens: int = 2048, max_retries: int = 4, backoff_s: float = 1.0,
                 timeout_s: float = 120.0) -> None:
        from harnessgrid.policies.keys import at_host, resolve_key

        if not model.strip():
            raise ConfigError("the anthropic policy needs a model name",
                              hint="write anthropic:<model>, e.g. anthropic:claude-sonnet-4-5")
        super().__init__(f"anthropic:{model}", temperature=temperature, max_tokens=max_tokens,
                         max_retries=max_retries, backoff_s=backoff_s, timeout_s=timeout_s)
        # The user's Anthropic credentials go to Anthropic's API or ANTHROPIC_BASE_URL's
        # server, never to a base_url given as an option (harnessgrid.policies.keys).
        self._key = resolve_key(self.spec, api_key=api_key, api_key_env=api_key_env,
                                variable="ANTHROPIC_API_KEY", base_url=base_url,
                                own_api=at_host(base_url, "api.anthropic.com"),
                                base_variable="ANTHROPIC_BASE_URL")
        self._key_source, api_key = self._key.source, self._key.value
        token = os.environ.get("ANTHROPIC_AUTH_TOKEN")  # the SDK's other credential
        if not self._key.paired:
            if token and not api_key and self._key.withheld is None:
                self._key = replace(self._key, withheld="ANTHROPIC_AUTH_TOKEN")
            token = None
        # A compatible server (base_url, or the SDK's ANTHROPIC_BASE_URL) may need no key.
        local = base_url is not None or bool(os.environ.get("ANTHROPIC_BASE_URL"))
        if not api_key and not token and not local:
            raise ConfigError(f"{self.spec}: no API key for Anthropic: ANTHROPIC_API_KEY is "
                              "not set",
                              hint="export ANTHROPIC_API_KEY=..., or "
                                   + pass_option("api_key=...")
                                   + "; a compatible server at base_url=URL needs no key")
        if not self._key_source:
            self._key_source = ("ANTHROPIC_API_KEY" if api_key else
                                "ANTHROPIC_AUTH_TOKEN" if token else "")
        try:
            import anthropic
        except ImportError as exc:
            raise ConfigError("the anthropic policy needs the anthropic package",
                              API_INSTALL_HINT) from exc
        self.model = model
        self.base_url = base_url
        # The SDK refuses to send a request without a credential; a local server ignores it.
        # (Any credential passed explicitly also stops the SDK reading its variables.)
        self._api_key = api_key or (None if token else "unused")
        self._anthropic = anthropic
        self._client: PerLoopClient[AsyncAnthropic] = PerLoopClient(
            lambda: anthropic.AsyncAnthropic(api_key=self._api_key, base_url=self.base_url,
                                             max_retries=0, timeout=self.timeout_s))

    async def act(self, request: PolicyRequest) -> ModelTurn:
        system, messages = to_anthropic(request.messages)
        params: dict[str, Any] = {"model": self.model, "max_tokens": self._max_tokens(request),
                                  "messages": messages}
        if self.temperature is not None:
            params["extra_body"] = {"temperature": self.temperature}
        if system:
            params["system"] = system
        if request.native_tools and request.tools:
            params["tools"] = [t.anthropic() for t in request.tools]
        client = self._client.get()
        connection_error = self._anthropic.APIConnectionError  # timeouts included

        def transient(exc: Exception) -> bool:
            return isinstance(exc, connection_error) or transient_status(exc)

        if request.on_text is not None:
            return _events_turn(self.spec, await self._stream(params, transient, request))
        response = await self._send(lambda timeout: client.messages.create(**params,
                                                                           timeout=timeout),
                                    transient, request.deadline)
        return _anthropic_turn(self.spec, response)

    async def _stream(self, params: dict[str, Any], transient: Callable[[Exception], bool],
                      request: PolicyRequest) -> AnthropicEvents:
        """The streamed call (``stream=True``, raw events). A lost connection mid-stream and
        an *overloaded* or server ``error`` event are transient too."""
        assert request.on_text is not None
        import httpx  # the SDK's transport; its read errors surface raw mid-stream

        sink, client = TextSink(request.on_text), self._client.get()

        def transient_stream(exc: Exception) -> bool:
            return (transient(exc) or isinstance(exc, httpx.TransportError)
                    or _error_event_type(exc) in _TRANSIENT_EVENTS)

        async def send(timeout: float) -> AnthropicEvents:
            events = AnthropicEvents(sink)
            stream = await client.messages.create(**params, stream=True, timeout=timeout)
            async with stream:
                async for event in stream:
                    events.add(event)
            events.check_complete()
            return events

        return await self._send(send, transient_stream, request.deadline, sink)

    def _key_hint(self) -> str:
        from harnessgrid.policies.keys import withheld_hint

        if self._key_source == "api_key":
            return "check the key passed as api_key"
        if self._key_source:
            return f"check the key in {self._key_source}, or " + pass_option("api_key=...")
        where = self.base_url or os.environ.get("ANTHROPIC_BASE_URL")
        return withheld_hint(self._key, where) or (
            f"the server at {where} wants a key: set ANTHROPIC_API_KEY, or "
            + pass_option("api_key_env=NAME (the variable holding it)", "api_key=..."))


#: ``error`` events inside an Anthropic stream worth a retry (the API's own type names).
_TRANSIENT_EVENTS = frozenset({"overloaded_error", "api_error", "rate_limit_error",
                               "timeout_error"})


def _error_event_type(exc: Exception) -> str | None:
    """The error type of an ``error`` event the SDK raised mid-stream, if that is what it is."""
    body = getattr(exc, "body", None)
    error = body.get("error") if isinstance(body, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    return kind if isinstance(kind, str) else None


def _anthropic_turn(spec: str, response: Any) -> ModelTurn:
    """A Messages API response as a :class:`ModelTurn`; input tokens include cached ones.

    No content and no stop reason is no message at all (an empty ``end_turn`` message is the
    model's choice and stays a turn): a :class:`PolicyError`."""
    return _message_turn(spec, empty=not response.content, stop_reason=response.stop_reason,
                         texts=[b.text for b in response.content if b.type == "text"],
                         calls=[(b.id, b.name, b.input)
                                for b in response.content if b.type == "tool_use"],
                         usage=response.usage)


def _events_turn(spec: str, events: AnthropicEvents) -> ModelTurn:
    """A reassembled Messages stream as the turn :func:`_anthropic_turn` makes unstreamed."""
    return _message_turn(spec, empty=not events.block_count, stop_reason=events.stop_reason,
                         texts=events.texts(), calls=events.calls(),
                         usage=SimpleNamespace(**events.usage))


def _message_turn(spec: str, *, empty: bool, stop_reason: str | None, texts: list[str],
                  calls: list[tuple[str, str, object]], usage: Any) -> ModelTurn:
    if empty and stop_reason is None:
        raise PolicyError(f"{spec}: the server answered with no content and no stop reason",
                          hint="the server failed without an error status: check its log; "
                               "the episode counts as an infrastructure failure, not a score")
    tokens_in = sum(_int(usage, name) for name in (
        "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    return ModelTurn(content="\n".join(texts),
                     tool_calls=tuple(decode_call(*call) for call in calls),
                     tokens_in=tokens_in, tokens_out=_int(usage, "output_tokens"),
                     finish_reason=stop_reason)
