"""A chat policy for OpenAI-compatible servers (OpenAI itself, vLLM, SGLang, llama.cpp, ...)
through the official async ``openai`` SDK, without litellm's translation layer.

It shares everything but the client with :class:`~harnessgrid.policies.api.LiteLLMPolicy`:
the message and tool formats (``Message.openai()``, ``ToolSpec.openai()``), the decoding of a
completion into a :class:`ModelTurn`, and the retry and error policy of
:mod:`harnessgrid.policies.api` (transient errors retried with backoff and ``retry-after``, none
past the episode's deadline; rejections and bad keys failing at once).

With ``PolicyRequest.on_text`` set the reply is streamed (``stream=True`` with
``stream_options.include_usage``, so the token counts stay right) and reassembled into the same
turn; the streaming rules (what is retried once text was shown, the callback's exceptions) are
those of :mod:`harnessgrid.policies.api`.

One ``AsyncOpenAI`` client per policy (per event loop) keeps its HTTP connections pooled across
turns and episodes; the SDK's own retries are off, ours count. The SDK is imported when the
policy is created, never by importing this module.

``transport=http`` replaces the SDK with :mod:`harnessgrid.policies.raw_http`, a lean HTTP/1.1
client on asyncio streams that costs the host a fraction of the SDK's CPU per request (what
matters with many episodes per core). The request body, the decoding, errors, retries,
deadlines and streaming rules are the same code; it speaks no proxy, so it refuses to start
when the environment sets one for a non-loopback ``base_url``, and it follows no redirects and
decompresses nothing (it asks for no compression).

``transport=auto``, the default, picks it where none of that can matter: a plain ``http://``
base_url on the loopback interface (``localhost``, 127.0.0.0/8, ``::1``: a local vLLM, SGLang
or llama.cpp server) for which the environment sets no proxy. Everything else - OpenAI's API,
any other host, ``https://`` (the SDK trusts certifi's CA bundle, the lean client the
system's), and a loopback URL that a proxy variable covers (the SDK sends such requests to the
proxy, so the lean client would change where they go) - gets the SDK, exactly as before.
``transport=sdk`` / ``transport=http`` choose outright. The choice and its reason are
:meth:`OpenAIPolicy.describe`'s, and logged (INFO) when the policy is made.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harnessgrid.errors import ConfigError
from harnessgrid.models import ModelTurn
from harnessgrid.policies import PolicyRequest
from harnessgrid.policies.api import (
    API_INSTALL_HINT,
    APIPolicy,
    PerLoopClient,
    chunks_turn,
    openai_turn,
    transient_status,
)
from harnessgrid.policies.keys import at_host, pass_option, resolve_key, withheld_hint
from harnessgrid.policies.streaming import ChatChunks, TextSink

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from harnessgrid.policies.raw_http import HTTPClient

#: The SDK's own variables, read the way the SDK reads them.
KEY_VARIABLE = "OPENAI_API_KEY"
BASE_URL_VARIABLE = "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"


def _is_openai(base_url: str | None) -> bool:
    """Whether requests go to OpenAI's own API (no base_url, or its host)."""
    return base_url is None or at_host(base_url, "api.openai.com")


#: ``transport=``: the official SDK, the lean client of :mod:`harnessgrid.policies.raw_http`,
#: or ``auto`` (the default): the lean client for a loopback ``http://`` server, else the SDK.
TRANSPORTS = ("auto", "sdk", "http")

logger = logging.getLogger(__name__)


def auto_transport(base_url: str | None) -> tuple[str, str]:
    """What ``transport=auto`` picks for ``base_url`` (``sdk`` or ``http``) and why, in words.
    ``http`` only where it sends the same requests to the same place as the SDK would: a
    plain-HTTP loopback server with no proxy variable covering it (module docstring)."""
    from urllib.parse import urlsplit

    from harnessgrid.policies import raw_http

    if base_url is None:
        return "sdk", "OpenAI's API"
    parts = urlsplit(base_url)
    if not raw_http.is_loopback(parts.hostname or ""):
        return "sdk", "base_url is not a loopback address"
    if parts.scheme != "http":
        return "sdk", f"base_url is {parts.scheme}://, not plain http://"
    proxy = raw_http.env_proxy(base_url)
    if proxy:
        return "sdk", (f"the environment sets the proxy {proxy} for base_url, which the SDK "
                       f"honours; list {parts.hostname} in NO_PROXY for the lean client")
    return "http", "loopback http:// base_url, no proxy set for it"


class OpenAIPolicy(APIPolicy):
    """A chat policy on the Chat Completions API of any OpenAI-compatible server.

    ``base_url`` is the server's API root (``http://127.0.0.1:8000/v1`` for a local vLLM;
    ``OPENAI_BASE_URL`` when not given, OpenAI's own API when neither is). ``api_key`` (or
    ``api_key_env``, the name of a variable holding it) defaults to ``OPENAI_API_KEY`` for
    OpenAI's API and ``OPENAI_BASE_URL``'s server, never for a ``base_url`` given here (see
    :mod:`harnessgrid.policies.keys`); a local server may need none. ``temperature=None`` sends
    no temperature (for models that reject one). ``extra`` goes into the request body as is
    (e.g. ``{"top_p": 0.9}``, vLLM's ``{"top_k": 20}``). ``transport`` is ``sdk`` (the official
    async SDK), ``http`` (the lean client) or ``auto`` (the default: the lean client for a
    loopback ``http://`` server no proxy variable covers, the SDK otherwise; module docstring).
    ``self.transport`` is the one in use, :meth:`describe` says why.
    """

    model_hint = ("check the model name the server serves (GET <base_url>/models lists them), "
                  "base_url and the options; the server's message says what it rejected")

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 api_key_env: str | None = None, temperature: float | None = 0.0, max_tokens: int = 2048, max_retries: int = 4,
                 backoff_s: float = 1.0, timeout_s: float = 120.0,
                 extra: dict[str, Any] | None = None, transport: str = "auto") -> None:
        if not model.strip():
            raise ConfigError("the openai policy needs a model name",
                              hint="write openai:<model>, e.g. openai:gpt-4o-mini, or the name a "
                                   "local server serves (openai:Qwen/Qwen3-4B with base_url=...)")
        super().__init__(f"openai:{model}", temperature=temperature, max_tokens=max_tokens,
                         max_retries=max_retries, backoff_s=backoff_s, timeout_s=timeout_s)
        if extra is not None and not isinstance(extra, dict):
            raise ConfigError(f"{self.spec}: extra must be a JSON object, not {extra!r}",
                              hint="e.g. --policy-opt 'extra={\"top_p\": 0.9}'")
        self.model = model
        self.base_url = base_url or os.environ.get(BASE_URL_VARIABLE) or None
        self.extra = dict(extra or {})
        # OpenAI's own API takes the reply limit as ``max_completion_tokens`` (its reasoning
        # models refuse ``max_tokens``); vLLM, SGLang and llama.cpp servers read ``max_tokens``.
        self.limit_field = ("max_completion_tokens" if _is_openai(self.base_url)
                            else "max_tokens")
        self._key = resolve_key(self.spec, api_key=api_key, api_key_env=api_key_env,
                                variable=KEY_VARIABLE, base_url=base_url,
                                own_api=at_host(base_url, "api.openai.com"),
                                base_variable=BASE_URL_VARIABLE)
        self._key_source = self._key.source
        api_key = self._key.value
        if not api_key and _is_openai(self.base_url):
            raise ConfigError(f"{self.spec}: no API key for OpenAI: {KEY_VARIABLE} is not set",
                              hint=f"export {KEY_VARIABLE}=..., or "
                                   + pass_option("api_key=...")
                                   + "; a local OpenAI-compatible server at base_url=URL "
                                     "(e.g. http://127.0.0.1:8000/v1) needs no key")
        if transport not in TRANSPORTS:
            raise ConfigError(f"{self.spec}: unknown transport {transport!r}",
                              hint="transport=auto (the default: the lean client for a local "
                                   "http:// server, the SDK otherwise), transport=sdk (the "
                                   "official openai SDK) or transport=http (the lean built-in "
                                   "HTTP/1.1 client)")
        if transport == "auto":
            self.transport, why = auto_transport(self.base_url)
            self.transport_reason = f"auto: {why}"
        else:
            self.transport, self.transport_reason = transport, "asked for"
        #: The per-loop client of the transport in use: ``AsyncOpenAI`` (sdk) or
        #: :class:`~harnessgrid.policies.raw_http.HTTPClient` (http).
        self._client: PerLoopClient[Any]
        if self.transport == "http":
            self._client = self._http_client(api_key)
        else:
            try:
                import openai
            except ImportError as exc:
                raise ConfigError("the openai policy needs the openai package",
                                  API_INSTALL_HINT) from exc
            self._openai = openai
            # The SDK refuses to send a request without a key; a local server ignores it.
            key = api_key or "unused"
            self._client = PerLoopClient(
                lambda: openai.AsyncOpenAI(api_key=key, base_url=self.base_url, max_retries=0,
                                           timeout=self.timeout_s))
        logger.info("%s", self.describe())

    def describe(self) -> str:
        """Where requests go, over which transport, and why that one (``transport=auto``
        picks; module docstring)."""
        return (f"{self.spec} at {self.base_url or DEFAULT_BASE_URL}: "
                f"transport={self.transport} ({self.transport_reason})")

    def _http_client(self, api_key: str | None) -> PerLoopClient[HTTPClient]:
        from harnessgrid.policies import raw_http

        url = self.base_url or DEFAULT_BASE_URL
        endpoint = raw_http.Endpoint(url)  # a bad URL fails here, not at the first turn
        proxy = raw_http.proxy_for(url)
        if proxy:
            raise ConfigError(f"{self.spec}: transport=http does not go through proxies, and "
                              f"the environment sets {proxy} for {url}",
                              hint="use transport=sdk (it honours HTTPS_PROXY / HTTP_PROXY / "
                                   "ALL_PROXY), or exempt the host with NO_PROXY")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        return PerLoopClient(lambda: raw_http.HTTPClient(endpoint, headers))

    async def act(self, request: PolicyRequest) -> ModelTurn:
        params: dict[str, Any] = {"model": self.model,
                                  "messages": [m.openai() for m in request.messages],
                                  self.limit_field: self._max_tokens(request)}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if request.native_tools and request.tools:  # OpenAI rejects an empty tools list
            params["tools"] = [t.openai() for t in request.tools]
        if self.transport == "http":
            return await self._act_http(params, request)
        if self.extra:
            params["extra_body"] = self.extra
        client: AsyncOpenAI = self._client.get()
        connection_error = self._openai.APIConnectionError  # timeouts included

        def transient(exc: Exception) -> bool:
            return isinstance(exc, connection_error) or transient_status(exc)

        if request.on_text is not None:
            return chunks_turn(self.spec, await self._stream(params, transient, request))
        response = await self._send(
            lambda timeout: client.chat.completions.create(**params, timeout=timeout),
            transient, request.deadline)
        return openai_turn(self.spec, response)

    async def _stream(self, params: dict[str, Any], transient: Callable[[Exception], bool],
                      request: PolicyRequest) -> ChatChunks:
        """The streamed call; a connection lost mid-stream (a raw transport error there, or a
        stream that ends without a finish reason) is transient like one lost before it."""
        assert request.on_text is not None
        import httpx  # the SDK's transport; its read errors surface raw mid-stream

        sink = TextSink(request.on_text)
        client: AsyncOpenAI = self._client.get()

        def transient_stream(exc: Exception) -> bool:
            return transient(exc) or isinstance(exc, httpx.TransportError)

        async def send(timeout: float) -> ChatChunks:
            chunks = ChatChunks(sink)
            stream = await client.chat.completions.create(
                **params, stream=True, stream_options={"include_usage": True}, timeout=timeout)
            async with stream:  # closes the connection, also when cancelled
                async for chunk in stream:
                    chunks.add(chunk)
            chunks.check_complete()
            return chunks

        return await self._send(send, transient_stream, request.deadline, sink)

    async def _act_http(self, params: dict[str, Any], request: PolicyRequest) -> ModelTurn:
        """``act`` on the lean client: the body the SDK would send (``extra`` merged in at
        the top level, as the SDK's ``extra_body``), its answer decoded by the same code."""
        from contextlib import aclosing

        from harnessgrid.policies.raw_http import TransportError

        params.update(self.extra)
        client: HTTPClient = self._client.get()

        def transient(exc: Exception) -> bool:
            return isinstance(exc, TransportError) or transient_status(exc)

        if request.on_text is None:
            response = await self._send(lambda timeout: client.post("/chat/completions", params),
                                        transient, request.deadline)
            return openai_turn(self.spec, response)
        params.update(stream=True, stream_options={"include_usage": True})
        sink = TextSink(request.on_text)

        async def send(timeout: float) -> ChatChunks:
            chunks = ChatChunks(sink)
            async with aclosing(client.stream("/chat/completions", params)) as events:
                async for chunk in events:
                    chunks.add(chunk)
            chunks.check_complete()
            return chunks

        return chunks_turn(self.spec, await self._send(send, transient, request.deadline, sink))

    def _key_hint(self) -> str:
        if self._key_source == "api_key":
            return "check the key passed as api_key"
        if self._key_source:
            return f"check the key in {self._key_source}, or " + pass_option("api_key=...")
        return withheld_hint(self._key, self.base_url) or (
            f"the server at {self.base_url} wants a key: "
            + pass_option("api_key_env=NAME (the variable holding it)", "api_key=..."))
