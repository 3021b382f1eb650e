"""A lean HTTP/1.1 client for the ``openai:`` policy's ``transport=http``: JSON POSTs over
pooled keep-alive connections on asyncio streams, plain or server-sent-event (SSE) answers.

Why: at high concurrency the official SDK's per-request cost (httpx's machinery, pydantic
response objects) is most of the host CPU of an episode. Chat completions need little of it:
one POST, a JSON or SSE answer. This client does exactly that and leaves everything else --
retries, timeouts, deadlines, error classification, decoding -- to the policy's shared code
(:mod:`harnessgrid.policies.api`), which sees the same shapes the SDK gives it: objects with
attributes (:class:`JSONObject`) and exceptions with ``status_code`` and
``response.headers``.

What it speaks: ``http`` and ``https`` (the default SSL context, SNI), a path prefix in the
base URL, ``Content-Length``, ``chunked`` and close-delimited bodies. What it does not:
proxies (the policy refuses to start when one applies), redirects (a 3xx answer is an error
naming where it points), compression (it asks for ``Accept-Encoding: identity`` and refuses a
compressed answer by name), HTTP/2. Only the standard library, and nothing but ``asyncio``
streams at import.

:func:`is_loopback` and :func:`env_proxy` are what the policy's ``transport=auto`` decides
with (:mod:`harnessgrid.policies.openai_compat`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from harnessgrid.errors import ConfigError

#: Idle connections kept per client; more are closed when returned (a burst's leftovers).
MAX_IDLE = 512


class JSONObject:
    """A decoded JSON object read by attribute, as the SDK's response objects are; a missing
    field reads as ``None`` (servers omit optional fields that the SDK defaults to None)."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.__dict__ = fields

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and friends must see the truth
            raise AttributeError(name)
        return None

    def __repr__(self) -> str:
        return f"JSONObject({self.__dict__!r})"


#: How deep a server's answer may nest: an envelope of a few levels around tool-call
#: arguments, which travel as strings. Deeper is not an answer (and would recurse past the
#: stack in ``json.loads``).
MAX_BODY_DEPTH = 128


def loads(data: bytes | str, object_hook: Any = JSONObject) -> Any:
    """JSON with objects as :class:`JSONObject` (``object_hook``); a :class:`ValueError`
    (and nothing else) for an answer that is not JSON within :data:`MAX_BODY_DEPTH` levels."""
    # Imported here: importing this module stays light (safe_json brings pydantic).
    from harnessgrid import safe_json

    return safe_json.loads(data, max_depth=MAX_BODY_DEPTH, max_chars=None,
                           object_hook=object_hook)


class TransportError(Exception):
    """The connection failed or closed before a complete answer (transient, like the SDK's
    ``APIConnectionError``)."""


class HTTPStatusError(Exception):
    """A non-2xx answer. ``status_code`` and ``response.headers`` (lower-cased names) are
    where the shared error policy looks for the status and ``retry-after``. The message is
    the server's own words where its body has them (:func:`error_text`), and for a redirect
    where it points."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status_code = status
        self.response = JSONObject({"headers": headers, "status_code": status})
        self.body: Any = None
        with contextlib.suppress(ValueError):
            self.body = loads(body, object_hook=None)
        text = error_text(self.body) or body.decode("utf-8", "replace")[:300]
        if 300 <= status < 400:
            text = (f"a redirect to {headers.get('location') or '(no location)'}; "
                    "transport=http follows no redirects: set base_url to where it points, "
                    f"or use transport=sdk. {text}").rstrip()
        super().__init__(f"HTTP {status}: {text}")


def error_text(body: Any) -> str | None:
    """The message in an error body, in the shapes OpenAI-compatible servers use:
    ``{"error": {"message": ...}}`` (OpenAI, newer vLLM), ``{"error": "..."}`` (vLLM's
    key check), ``{"object": "error", "message": ...}`` (SGLang, older vLLM) and
    ``{"detail": "..."}`` (FastAPI's own 404 / 405)."""
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    for candidate in (error.get("message") if isinstance(error, dict) else error,
                      body.get("message"), body.get("detail")):
        if isinstance(candidate, str) and candidate:
            return candidate
    return None


class StreamErrorEvent(Exception):
    """An ``{"error": ...}`` event inside an SSE stream (what the SDK raises as a status-less
    ``APIError``: not retried before text, a broken-off reply after)."""


class BadResponse(Exception):
    """A 2xx answer that is not what was asked for (not JSON)."""


class Endpoint:
    """Where requests go: a base URL split into scheme, host, port and path prefix."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"transport=http needs an http:// or https:// base_url, not "
                              f"{base_url!r}", hint="e.g. base_url=http://127.0.0.1:8000/v1")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        default = self.port == (443 if self.tls else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.authority = host if default else f"{host}:{self.port}"


_SSL: Any = None


def _ssl_context() -> Any:
    """The default (verifying) context, made once: loading the CA store costs milliseconds."""
    global _SSL
    if _SSL is None:
        import ssl

        _SSL = ssl.create_default_context()
    return _SSL


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def usable(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        self.writer.close()


class HTTPClient:
    """JSON POSTs to one endpoint over a pool of keep-alive connections. Belongs to the event
    loop it is first used on (the policy keeps one per loop, as it does SDK clients).

    A request on a pooled connection that fails before any byte of the answer arrived (the
    server closed the idle connection meanwhile) is sent once more on a fresh connection:
    the server cannot have acted on it. Any other failure closes the connection; the caller
    bounds the whole exchange with its own timeout (cancellation closes the connection too).
    """

    def __init__(self, endpoint: Endpoint, headers: dict[str, str]) -> None:
        self.endpoint = endpoint
        lines = [f"Host: {endpoint.authority}", "User-Agent: harnessgrid",
                 "Content-Type: application/json", "Accept-Encoding: identity"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self._head = ("\r\n".join(lines) + "\r\n").encode("latin-1")
        self._idle: list[_Connection] = []
        self.opened = 0  # connections opened so far (tests check reuse with it)
        self._closer: AsyncGenerator[None, None] | None = None

    async def post(self, path: str, payload: Any) -> Any:
        """POST ``payload`` as JSON; the answer decoded (:func:`loads`). Raises
        :class:`HTTPStatusError` for a non-2xx answer, :class:`TransportError` when the
        connection fails."""
        conn, status, headers = await self._exchange(path, payload, b"application/json")
        try:
            _identity(headers)
            body = b"".join([piece async for piece in self._body(conn, headers)])
        except BaseException:
            conn.close()
            raise
        self._release(conn, headers)
        if not 200 <= status < 300:
            raise HTTPStatusError(status, headers, body)
        try:
            return loads(body)
        except ValueError as exc:
            raise BadResponse(f"the HTTP {status} answer is not JSON (is base_url the API root "
                              f"of an OpenAI-compatible server?): {body[:200]!r}") from exc

    async def stream(self, path: str, payload: Any) -> AsyncGenerator[Any, None]:
        """POST ``payload`` as JSON and yield the SSE events' decoded ``data`` up to
        ``[DONE]``. Use it inside :func:`contextlib.aclosing` so that an abandoned stream
        closes its connection at once."""
        conn, status, headers = await self._exchange(path, payload, b"text/event-stream")
        done = False
        try:
            _identity(headers)
            body = self._body(conn, headers)
            if not 200 <= status < 300:
                raise HTTPStatusError(status, headers,
                                      b"".join([piece async for piece in body]))
            async for data in _sse_data(body):
                if data == "[DONE]":
                    break
                event = loads(data)
                if isinstance(event, JSONObject) and event.error is not None:
                    raise StreamErrorEvent(f"error event in the stream: {data[:300]}")
                yield event
            if headers.get("connection", "").lower() != "close":
                async for _ in body:  # the rest (the last chunk), to reuse the connection
                    pass
                done = True
        finally:
            if done:
                self._release(conn, headers)
            else:
                conn.close()

    async def aclose(self) -> None:
        while self._idle:
            self._idle.pop().close()

    async def _close_at_shutdown(self) -> AsyncGenerator[None, None]:
        """Suspended until the loop shuts down its async generators (``asyncio.run`` does,
        before it closes the loop): then the idle connections are closed, not leaked."""
        try:
            yield
        finally:
            await self.aclose()

    # -- one exchange ---------------------------------------------------------------------

    async def _exchange(self, path: str, payload: Any,
                        accept: bytes) -> tuple[_Connection, int, dict[str, str]]:
        """Send the request; return the connection, status and headers of the answer."""
        data = json.dumps(payload).encode()
        request = b"".join((b"POST ", (self.endpoint.prefix + path).encode(), b" HTTP/1.1\r\n",
                            self._head, b"Accept: ", accept, b"\r\nContent-Length: ",
                            str(len(data)).encode(), b"\r\n\r\n", data))
        fresh = False
        while True:
            conn, reused = await self._acquire(fresh)
            try:
                conn.writer.write(request)
                await conn.writer.drain()
                line = await conn.reader.readline()
            except BaseException as exc:
                conn.close()
                if reused and isinstance(exc, (OSError, asyncio.IncompleteReadError)):
                    fresh = True  # a stale pooled connection: nothing reached the server
                    continue
                if isinstance(exc, (OSError, asyncio.IncompleteReadError)):
                    raise TransportError(f"request to {self.endpoint.authority} failed: "
                                         f"{exc!r}") from exc
                raise
            if not line:
                conn.close()
                if reused:
                    fresh = True
                    continue
                raise TransportError(f"{self.endpoint.authority} closed the connection "
                                     "without answering")
            try:
                status, headers = await self._head_of(conn, line)
            except BaseException:
                conn.close()
                raise
            return conn, status, headers

    async def _head_of(self, conn: _Connection, line: bytes) -> tuple[int, dict[str, str]]:
        while True:
            parts = line.split(None, 2)
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
                raise TransportError(f"not an HTTP answer from {self.endpoint.authority}: "
                                     f"{line[:100]!r}")
            status = int(parts[1])
            headers: dict[str, str] = {"": parts[0].decode("latin-1")}  # the version
            while True:
                raw = await conn.reader.readline()
                if not raw:
                    raise TransportError("the connection closed in the answer's headers")
                if raw in (b"\r\n", b"\n"):
                    break
                name, _, value = raw.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            if status in (204, 304):  # never a body, whatever the headers say
                headers["content-length"] = "0"
                headers.pop("transfer-encoding", None)
            if status != 100:  # "100 Continue": the real answer follows
                return status, headers
            line = await conn.reader.readline()

    async def _body(self, conn: _Connection, headers: dict[str, str]) -> AsyncIterator[bytes]:
        """The answer's body in pieces, however it is delimited."""
        reader = conn.reader
        try:
            if "chunked" in headers.get("transfer-encoding", "").lower():
                while True:
                    size = int((await reader.readline()).split(b";", 1)[0].strip() or b"x", 16)
                    if size == 0:
                        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return
                    yield await reader.readexactly(size)
                    await reader.readexactly(2)  # the CRLF after each chunk
            elif "content-length" in headers:
                length = int(headers["content-length"])
                if length:
                    yield await reader.readexactly(length)
            else:  # delimited by the server closing the connection
                headers["connection"] = "close"
                while piece := await reader.read(65536):
                    yield piece
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            raise TransportError(f"the answer from {self.endpoint.authority} broke off: "
                                 f"{exc!r}") from exc

    # -- the pool -------------------------------------------------------------------------

    async def _acquire(self, fresh: bool) -> tuple[_Connection, bool]:
        """An idle pooled connection (``(conn, True)``), or a new one when there is none or
        ``fresh`` is asked for (after a stale one failed: the others are as old)."""
        while self._idle and not fresh:
            conn = self._idle.pop()
            if conn.usable():
                return conn, True
            conn.close()
        endpoint = self.endpoint
        try:
            if endpoint.tls:
                reader, writer = await asyncio.open_connection(
                    endpoint.host, endpoint.port, ssl=_ssl_context(),
                    server_hostname=endpoint.host)
            else:
                reader, writer = await asyncio.open_connection(endpoint.host, endpoint.port)
        except OSError as exc:
            raise TransportError(f"cannot connect to {endpoint.authority}: {exc!r}") from exc
        self.opened += 1
        if self._closer is None:
            self._closer = self._close_at_shutdown()  # a strong reference: the loop's is weak
            await self._closer.__anext__()
        return _Connection(reader, writer), False

    def _release(self, conn: _Connection, headers: dict[str, str]) -> None:
        keep = (headers.get("") == "HTTP/1.1"
                and headers.get("connection", "").lower() != "close")
        if keep and conn.usable() and len(self._idle) < MAX_IDLE:
            self._idle.append(conn)
        else:
            conn.close()


def _identity(headers: dict[str, str]) -> None:
    """Refuse a compressed answer (the request asked for none; this client decodes none)."""
    coding = headers.get("content-encoding", "").strip().lower()
    if coding not in ("", "identity"):
        raise BadResponse(f"the answer is compressed (content-encoding: {coding}) although "
                          "the request asked for none; transport=http does not decompress: "
                          "use transport=sdk for this server")


async def _sse_data(body: AsyncIterator[bytes]) -> AsyncIterator[str]:
    """The ``data`` of each server-sent event (multi-line data joined with newlines)."""
    buffer, data = b"", list[str]()
    async for piece in body:
        buffer += piece
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8")
            if not line:
                if data:
                    yield "\n".join(data)
                    data = []
            elif line.startswith("data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a URL's hostname) names this machine's loopback interface:
    ``localhost`` (and ``*.localhost``), 127.0.0.0/8, ``::1`` (also IPv4-mapped)."""
    import ipaddress

    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def env_proxy(base_url: str) -> str | None:
    """The proxy the environment sets for ``base_url`` (``HTTP(S)_PROXY`` / ``ALL_PROXY``,
    either case, read as httpx and so the SDK read them), loopback hosts included: the SDK
    sends even a loopback request through it unless ``NO_PROXY`` exempts the host. Read
    conservatively: only ``*`` or the host's exact name in ``NO_PROXY`` exempts it here (httpx
    also matches domain suffixes and networks), so a None is certain and a proxy may be one the
    SDK would not use."""
    import urllib.request

    parts = urlsplit(base_url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy:
        return None
    host = (parts.hostname or "").lower()
    exempt = {name.strip().strip("[]").lower() for name in proxies.get("no", "").split(",")}
    if "*" in exempt or host in exempt:
        return None
    return str(proxy)


def proxy_for(base_url: str) -> str | None:
    """The proxy the environment sets for ``base_url`` (``HTTPS_PROXY`` / ``HTTP_PROXY`` /
    ``ALL_PROXY``, less ``NO_PROXY``), None for none or a loopback host (:func:`is_loopback`:
    ``transport=http`` asked for by name never proxies those)."""
    import urllib.request

    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if is_loopback(host):
        return None
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(host):  # NO_PROXY
        return None
    return str(proxy)
