"""Built-in policy backends, registered through the same hook as third-party ones."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from harnessgrid import hookimpl
from harnessgrid.registrations import PolicyBackend


def _scripted(rest: str, options: Mapping[str, Any]) -> Any:
    from harnessgrid.policies.scripted import ScriptedPolicy

    return ScriptedPolicy()


def _null(rest: str, options: Mapping[str, Any]) -> Any:
    from harnessgrid.policies.scripted import ScriptedPolicy

    return ScriptedPolicy(empty=True)


def _litellm(rest: str, options: Mapping[str, Any]) -> Any:
    from harnessgrid.policies.api import LiteLLMPolicy

    return LiteLLMPolicy(rest, **options)


def _anthropic(rest: str, options: Mapping[str, Any]) -> Any:
    from harnessgrid.policies.api import AnthropicPolicy

    return AnthropicPolicy(rest, **options)


def _hf(rest: str, options: Mapping[str, Any]) -> Any:
    from harnessgrid.policies.hf import HFPolicy

    return HFPolicy(rest, **options)


def _vllm(rest: str, options: Mapping[str, Any]) -> Any:
    from harnessgrid.policies.vllm import VLLMPolicy

    return VLLMPolicy(rest, **options)


@hookimpl
def harnessgrid_policies() -> Iterator[PolicyBackend]:
    yield PolicyBackend("scripted", "Oracle: plays the task's action plan through any harness.",
                        _scripted)
    yield PolicyBackend("null", "Finishes at once (proves graders fail when nothing is done).",
                        _null)
    yield PolicyBackend("litellm", "Chat policy through litellm (any provider; api_base for "
                        "OpenAI-compatible servers such as a local vLLM or Ollama).", _litellm,
                        extra="api")
    yield PolicyBackend("anthropic", "Anthropic Messages API through the official SDK "
                        "(base_url configurable).", _anthropic, extra="api")
    yield PolicyBackend("hf", "Token policy through transformers: exact prompt/completion ids "
                        "and logprobs per turn.", _hf, extra="hf")
    yield PolicyBackend("vllm", "Token policy on vLLM (GPU; not verified on CPU machines).",
                        _vllm, extra="vllm")
