"""``openai:``'s default ``transport=auto``: the lean client (:mod:`harnessgrid.policies.raw_http`)
for a plain-HTTP loopback server, the official SDK for everything else, and never a change of
where a request goes: a loopback URL that a proxy variable covers keeps the SDK, which sends it
to the proxy. Checked against real local servers, by which client object the policy holds and
which server (model server or proxy) saw the request and with whose User-Agent."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import pytest
from servers import Canned, OpenAICompatServer, RecordedRequest, openai_text

from harnessgrid.models import Message
from harnessgrid.policies import PolicyRequest, make_policy, raw_http
from harnessgrid.policies.openai_compat import OpenAIPolicy, auto_transport

openai = pytest.importorskip("openai")  # the SDK side

PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY",
                   "all_proxy", "NO_PROXY", "no_proxy")


@pytest.fixture(autouse=True)
def no_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own proxy settings must not decide these tests."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


class ForwardProxy(OpenAICompatServer):
    """A forward proxy that answers by itself: a client configured to use it sends the request
    here with the target's absolute URL as the path (``targets`` records them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.targets: list[str] = []

    def handle(self, request: RecordedRequest) -> tuple[Canned, bool]:
        self.targets.append(request.path)
        return super().handle(dataclasses.replace(request, path=urlsplit(request.path).path))


@pytest.fixture
def proxy() -> Iterator[ForwardProxy]:
    with ForwardProxy([openai_text("via the proxy") for _ in range(4)]) as srv:
        yield srv


def request() -> PolicyRequest:
    stand_in: Any = SimpleNamespace()
    return PolicyRequest(messages=[Message(role="user", content="hi")], tools=[],
                         native_tools=False, state=stand_in,
                         new_segment=False)


def turn(policy: OpenAIPolicy) -> tuple[str | None, type]:
    """One turn; its text and the class of the client object that sent it."""
    async def go() -> tuple[str | None, type]:
        text = (await policy.act(request())).content
        return text, type(policy._client.get())

    return asyncio.run(go())


def make(base_url: str, **options: Any) -> OpenAIPolicy:
    return OpenAIPolicy("test-model", base_url=base_url, max_retries=0, **options)


def non_loopback_url(port: int) -> str:
    """A URL whose host is not a loopback address yet reaches the test server on 127.0.0.1:
    0.0.0.0, which Linux (and macOS) connect to this machine."""
    try:
        socket.create_connection(("0.0.0.0", port), timeout=5).close()
    except OSError:
        pytest.skip("connecting to 0.0.0.0 does not reach this machine here")
    return f"http://0.0.0.0:{port}/v1"


def test_a_loopback_server_gets_the_lean_client_and_others_the_sdk(
        caplog: pytest.LogCaptureFixture) -> None:
    with OpenAICompatServer([openai_text("direct") for _ in range(4)]) as srv:
        port = int(srv.base_url.rsplit(":", 1)[1])
        for host in ("127.0.0.1", "localhost"):
            with caplog.at_level(logging.INFO, logger="harnessgrid.policies.openai_compat"):
                policy = make(f"http://{host}:{port}/v1")
            assert policy.transport == "http"
            assert "transport=http (auto: loopback http:// base_url" in policy.describe()
            assert policy.describe() in caplog.text  # the choice is logged
            assert turn(policy) == ("direct", raw_http.HTTPClient)
        remote = make(non_loopback_url(port))
        assert remote.transport == "sdk"
        assert "not a loopback address" in remote.describe()
        assert turn(remote) == ("direct", openai.AsyncOpenAI)
    agents = [r.headers["user-agent"] for r in srv.requests]
    assert agents[:2] == ["harnessgrid", "harnessgrid"]  # the lean client's
    assert agents[2].startswith("AsyncOpenAI/Python")  # the SDK's


def test_an_explicit_transport_wins() -> None:
    with OpenAICompatServer([openai_text("a"), openai_text("b")]) as srv:
        local = make(srv.base_url + "/v1", transport="sdk")
        assert (local.transport, local.transport_reason) == ("sdk", "asked for")
        assert turn(local) == ("a", openai.AsyncOpenAI)
        port = int(srv.base_url.rsplit(":", 1)[1])
        remote = make(non_loopback_url(port), transport="http")
        assert turn(remote) == ("b", raw_http.HTTPClient)
    assert make_policy("openai:m", {"base_url": "http://127.0.0.1:8000/v1"}).transport == "http"
    assert make_policy("openai:m", {"base_url": "http://127.0.0.1:8000/v1",
                                    "transport": "sdk"}).transport == "sdk"


@pytest.mark.parametrize(("base_url", "transport"), [
    (None, "sdk"),  # OpenAI's API
    ("https://api.example.com/v1", "sdk"),
    ("http://10.0.0.5:8000/v1", "sdk"),
    ("http://0.0.0.0:8000/v1", "sdk"),  # every interface, not the loopback one
    ("https://localhost:8443/v1", "sdk"),  # TLS: the SDK's CA bundle stays in charge
    ("http://127.0.0.1:8000/v1", "http"),
    ("http://127.3.2.1:8000/v1", "http"),
    ("http://[::1]:8000/v1", "http"),
    ("http://[::ffff:127.0.0.1]:8000/v1", "http"),
    ("http://LOCALHOST:8000/v1", "http"),
    ("http://vllm.localhost:8000/v1", "http"),
    ("http://localhost.example.com:8000/v1", "sdk"),
    ("127.0.0.1:8000/v1", "sdk"),  # no scheme: left to the SDK, as before
])
def test_what_auto_picks(base_url: str | None, transport: str) -> None:
    assert auto_transport(base_url)[0] == transport


# --- proxy variables: auto never changes where a request goes ---------------------------------


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
def test_a_proxy_covering_the_loopback_url_keeps_the_sdk_and_its_route(
        variable: str, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK (httpx) sends even a loopback request to HTTP_PROXY / ALL_PROXY unless
    NO_PROXY names the host; auto then keeps the SDK, so the request still goes to the proxy,
    as it did when the SDK was the default. Naming the host in NO_PROXY (or ``*``) sends it
    straight to the server, over the lean client."""
    monkeypatch.setenv(variable, proxy.base_url)
    with OpenAICompatServer([openai_text("direct") for _ in range(4)]) as srv:
        url = srv.base_url + "/v1"
        policy = make(url)
        assert policy.transport == "sdk"
        assert f"the environment sets the proxy {proxy.base_url}" in policy.describe()
        assert "NO_PROXY" in policy.describe()
        assert turn(policy) == ("via the proxy", openai.AsyncOpenAI)
        assert proxy.targets == [url + "/chat/completions"]
        monkeypatch.setenv("NO_PROXY", "localhost")  # names another host: still proxied
        assert turn(make(url)) == ("via the proxy", openai.AsyncOpenAI)
        for exempt in ("localhost,127.0.0.1", "*"):
            monkeypatch.setenv("NO_PROXY", exempt)
            assert turn(make(url)) == ("direct", raw_http.HTTPClient)
        assert len(srv.requests) == 2
    assert len(proxy.targets) == 2


def test_an_https_proxy_does_not_cover_a_plain_http_url(
        proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTPS_PROXY applies to https:// URLs only, for the SDK as here: a local http://
    server still gets the lean client, and the request goes to it directly."""
    monkeypatch.setenv("HTTPS_PROXY", proxy.base_url)
    with OpenAICompatServer([openai_text("direct")]) as srv:
        assert turn(make(srv.base_url + "/v1")) == ("direct", raw_http.HTTPClient)
        assert len(srv.requests) == 1
    assert proxy.targets == []


def test_transport_http_asked_for_goes_straight_to_a_loopback_server(
        proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asked for by name, the lean client ignores a proxy for a loopback server (a proxy
    cannot reach this machine's loopback interface), as it always did; a remote host with a
    proxy set is refused (test_openai_raw_transport)."""
    monkeypatch.setenv("ALL_PROXY", proxy.base_url)
    with OpenAICompatServer([openai_text("direct")]) as srv:
        policy = make(srv.base_url + "/v1", transport="http")
        assert turn(policy) == ("direct", raw_http.HTTPClient)
    assert proxy.targets == []


def test_a_proxied_remote_host_goes_through_the_sdk(proxy: ForwardProxy,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A non-loopback base_url with a proxy set: the SDK, through the proxy (unchanged)."""
    monkeypatch.setenv("HTTP_PROXY", proxy.base_url)
    policy = make("http://model-server.test:8000/v1")
    assert policy.transport == "sdk"
    assert turn(policy) == ("via the proxy", openai.AsyncOpenAI)
    assert proxy.targets == ["http://model-server.test:8000/v1/chat/completions"]
