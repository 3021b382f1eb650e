"""API policies without a key, or with a wrong one: they fail at once, say why, and name the
variable to set, instead of retrying for half a minute and calling the provider *overloaded*.

Every server here is a real HTTP server on 127.0.0.1 (tests/servers.py); nothing reaches the
network. Without a key the policies fail when they are created, before any sandbox starts.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from servers import (
    AnthropicCompatServer,
    OpenAICompatServer,
    anthropic_error,
    anthropic_text,
    http_error,
    openai_text,
)

import harnessgrid as hg
from harnessgrid.errors import ConfigError, PolicyError
from harnessgrid.models import Message, ModelTurn
from harnessgrid.policies import Policy, PolicyRequest, make_policy
from harnessgrid.policies.api import AnthropicPolicy, LiteLLMPolicy

if not all(importlib.util.find_spec(name) for name in ("litellm", "anthropic")):
    pytest.skip("needs the api extra: pip install 'harnessgrid[api]'", allow_module_level=True)

pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly. qualifier:UserWarning")

#: Retries that would take 15 s or more if an error were (wrongly) treated as transient.
SLOW_RETRIES = {"max_retries": 4, "backoff_s": 1.0, "timeout_s": 10.0}
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL",
        "GEMINI_API_KEY", "GOOGLE_API_KEY")


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module", autouse=True)
def litellm_imported() -> None:
    """Import litellm once (seconds on a busy machine), so the timings below measure retries,
    not the import."""
    from harnessgrid.policies.api import _import_litellm

    _import_litellm()


def request() -> PolicyRequest:
    stand_in: Any = SimpleNamespace()
    return PolicyRequest(messages=[Message(role="user", content="hi")], tools=[],
                         native_tools=False, state=stand_in,
                         new_segment=False)


def act(policy: Policy) -> ModelTurn:
    return asyncio.run(policy.act(request()))


# --- a missing key: a ConfigError when the policy is created ------------------------------------


@pytest.mark.parametrize(("spec", "provider", "variable"), [
    ("litellm:openai/gpt-4o-mini", "openai", "OPENAI_API_KEY"),
    ("litellm:gpt-4o-mini", "openai", "OPENAI_API_KEY"),
    ("litellm:anthropic/claude-sonnet-4-5", "anthropic", "ANTHROPIC_API_KEY"),
    ("litellm:gemini/gemini-2.0-flash", "gemini", "GEMINI_API_KEY"),
    ("anthropic:claude-sonnet-4-5", "Anthropic", "ANTHROPIC_API_KEY"),
])
def test_missing_key_fails_at_creation_naming_provider_and_variable(
        spec: str, provider: str, variable: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        make_policy(spec)  # at creation: before any request could be sent
    message, hint = excinfo.value.message, excinfo.value.hint or ""
    assert message.startswith(f"{spec}: no API key for {provider}")
    assert variable in message
    assert variable in hint
    assert "api_key" in hint
    assert "overloaded" not in str(excinfo.value)


@pytest.mark.parametrize("spec", ["litellm:openai/gpt-4o-mini", "anthropic:claude-sonnet-4-5"])
def test_a_key_option_or_a_local_server_needs_no_variable(spec: str) -> None:
    base = "api_base" if spec.startswith("litellm") else "base_url"
    make_policy(spec, {"api_key": "sk-given"})
    make_policy(spec, {base: "http://127.0.0.1:1/v1"})


def test_providers_without_an_api_key_variable_are_not_blocked() -> None:
    """Ollama's missing variable is a server address (localhost by default), vLLM's servers
    take none: neither is a key."""
    LiteLLMPolicy("ollama/llama3")
    LiteLLMPolicy("hosted_vllm/my-model")


def test_a_key_in_the_environment_is_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    make_policy("litellm:openai/gpt-4o-mini")
    make_policy("anthropic:claude-sonnet-4-5")


def test_local_openai_server_without_any_key() -> None:
    """api_base alone: the OpenAI client would refuse to send without a key, so a placeholder
    travels and the local server answers."""
    with OpenAICompatServer([openai_text("hello")]) as srv:
        policy = LiteLLMPolicy("openai/local-model", api_base=srv.base_url + "/v1",
                               max_retries=0)
        assert act(policy).content == "hello"
    assert len(srv.requests) == 1


def test_readme_snippet_without_a_key_fails_at_once(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's run_agent example: a ConfigError before any request (was: policy_error
    after 17-23 s of retries), and no copy of the workspace is left behind. The provider's
    URL points at a local server, which counts what would have been sent."""
    (tmp_path / "app.log").write_text("ERROR disk full\n")
    before = sorted(Path(tempfile.gettempdir()).glob("hg-ws-*"))
    with OpenAICompatServer([openai_text("unused")] * 5) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url + "/v1")
        with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
            hg.run_agent("Summarise the errors in app.log into errors.md", workspace=tmp_path,
                         harness="S1-T0-O2-C1-W0", policy="litellm:openai/gpt-4o-mini")
    assert srv.requests == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.log"]
    assert sorted(Path(tempfile.gettempdir()).glob("hg-ws-*")) == before


def test_cli_run_without_a_key_is_a_config_error() -> None:
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    with OpenAICompatServer([openai_text("unused")] * 5) as srv:
        out = subprocess.run([sys.executable, "-m", "harnessgrid", "run", "--task",
                              "examples/upper", "--harness", "S1-T0-O2-C1-W0", "--policy",
                              "litellm:openai/gpt-4o-mini"],
                             env={**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                                  "OPENAI_BASE_URL": srv.base_url + "/v1"},
                             capture_output=True, text=True, timeout=600, check=False)
    assert srv.requests == []  # refused before any request, so before any retry
    assert out.returncode == 2, out.stderr
    assert "no API key for openai: OPENAI_API_KEY is not set" in out.stderr
    assert "Traceback" not in out.stderr
    assert out.stdout == ""


# --- a wrong key: one request, no retries, "the API key was rejected" ---------------------------


def test_litellm_401_is_not_retried_and_says_the_key_was_rejected() -> None:
    with OpenAICompatServer([openai_text("unused")] * 5, api_key="sk-right") as srv:
        policy = LiteLLMPolicy("openai/test-model", api_base=srv.base_url + "/v1",
                               api_key="sk-wrong", **SLOW_RETRIES)
        with pytest.raises(PolicyError) as excinfo:
            act(policy)
    assert len(srv.requests) == 1  # not retried
    error = excinfo.value
    assert "the API key was rejected (HTTP 401)" in error.message
    assert "invalid api key" in error.message  # the server's own words
    assert "api_key" in (error.hint or "")
    assert "overloaded" not in str(error)


def test_litellm_403_is_not_retried() -> None:
    with OpenAICompatServer([http_error(403, message="model not allowed for this key"),
                             openai_text("unused")]) as srv:
        policy = LiteLLMPolicy("openai/test-model", api_base=srv.base_url + "/v1",
                               api_key="sk-x", **SLOW_RETRIES)
        with pytest.raises(PolicyError, match=r"the API key was rejected \(HTTP 403\)"):
            act(policy)
    assert len(srv.requests) == 1


def test_local_server_that_wants_a_key_says_so() -> None:
    with OpenAICompatServer([openai_text("unused")], api_key="sk-right") as srv:
        base = srv.base_url + "/v1"
        policy = LiteLLMPolicy("openai/test-model", api_base=base, **SLOW_RETRIES)
        with pytest.raises(PolicyError) as excinfo:
            act(policy)
    assert len(srv.requests) == 1
    assert f"the server at {base} wants a key" in (excinfo.value.hint or "")


def test_key_removed_after_creation_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm reports the OpenAI client's "Missing credentials" as a 500: not transient."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    policy = LiteLLMPolicy("openai/gpt-4o-mini", **SLOW_RETRIES)
    monkeypatch.delenv("OPENAI_API_KEY")
    waits: list[object] = []  # one per retry the policy would sleep before
    monkeypatch.setattr(policy, "_wait", lambda *args: waits.append(args) or 0.0)
    with pytest.raises(PolicyError) as excinfo:
        act(policy)
    assert waits == []
    assert "no API key was sent" in excinfo.value.message
    assert "OPENAI_API_KEY" in (excinfo.value.hint or "")


@pytest.mark.parametrize("status", [401, 403])
def test_anthropic_auth_errors_are_not_retried(status: int) -> None:
    with AnthropicCompatServer([anthropic_error(status, "bad key"),
                                anthropic_text("unused")]) as srv:
        policy = AnthropicPolicy("claude-test", base_url=srv.base_url, api_key="sk-wrong",
                                 **SLOW_RETRIES)
        with pytest.raises(PolicyError) as excinfo:
            act(policy)
    assert len(srv.requests) == 1
    assert f"the API key was rejected (HTTP {status})" in excinfo.value.message
    assert "bad key" in excinfo.value.message
    assert "api_key" in (excinfo.value.hint or "")


def test_anthropic_key_from_the_environment_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment's key goes to the server ANTHROPIC_BASE_URL names (the variables set
    together); refused, the hint names the variable. A base_url passed as an option never gets
    it: the hint says it was withheld (tests/test_policies_api.py has the rule itself)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env-wrong")
    with AnthropicCompatServer([anthropic_text("unused")] * 2, api_key="sk-right") as srv:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
        with pytest.raises(PolicyError) as excinfo:
            act(AnthropicPolicy("claude-test", **SLOW_RETRIES))
        assert "check the key in ANTHROPIC_API_KEY" in (excinfo.value.hint or "")
        monkeypatch.delenv("ANTHROPIC_BASE_URL")
        with pytest.raises(PolicyError) as excinfo:
            act(AnthropicPolicy("claude-test", base_url=srv.base_url, **SLOW_RETRIES))
        assert "ANTHROPIC_API_KEY is not sent" in (excinfo.value.hint or "")
    assert len(srv.requests) == 2


def test_transient_errors_are_still_retried() -> None:
    """The counterpart: a 503 then success is one call that took two requests."""
    with OpenAICompatServer([http_error(503), openai_text("ok")]) as srv:
        policy = LiteLLMPolicy("openai/test-model", api_base=srv.base_url + "/v1",
                               api_key="sk-x", backoff_s=0.01)
        assert act(policy).content == "ok"
    assert len(srv.requests) == 2
