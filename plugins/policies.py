"""Built-in policy backends, registered through the same hook as third-party ones."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from harnessgrid import hookimpl
from harnessgrid.errors import ConfigError
from harnessgrid.registrations import PolicyBackend


def _scripted(rest: str, options: Mapping[str, Any]) -> Any:
    from harnessgrid.policies.scripted import ScriptedPolicy

    return ScriptedPolicy()


def _null(rest: str, options: Mapping[str, Any]) -> Any:
    from harnessgrid.policies.scripted import ScriptedPolicy

    return ScriptedPolicy(empty=True)


def _check_options(scheme: str, rest: str, options: Mapping[str, Any],
                   allowed: Iterable[str]) -> None:
    """Name unknown ``--policy-opt`` keys (a TypeError from a constructor names neither the
    policy nor what it does take)."""
    allowed = set(allowed)
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ConfigError(f"unknown option(s) for {scheme}:{rest}: {', '.join(unknown)}",
                          hint=f"{scheme}: takes " + ", ".join(sorted(allowed)))


def _keyword_options(cls: type) -> list[str]:
    """The keyword-only parameters of ``cls``'s constructor: the API policies' options."""
    import inspect

    return [name for name, param in inspect.signature(cls).parameters.items()
            if param.kind is inspect.Parameter.KEYWORD_ONLY]


def _litellm(rest: str, options: Mapping[str, Any]) -> Any:
    from harnessgrid.policies.api import LiteLLMPolicy

    _check_options("litellm", rest, options, _keyword_options(LiteLLMPolicy))
    return LiteLLMPolicy(rest, **options)


def _anthropic(rest: str, options: Mapping[str, Any]) -> Any:
    from harnessgrid.policies.api import AnthropicPolicy

    _check_options("anthropic", rest, options, _keyword_options(AnthropicPolicy))
    return AnthropicPolicy(rest, **options)


def _openai(rest: str, options: Mapping[str, Any]) -> Any:
    from harnessgrid.policies.openai_compat import OpenAIPolicy

    if "api_base" in options:  # litellm's name for it, the one a user switching over writes
        raise ConfigError(f"openai:{rest} takes base_url, not api_base",
                          hint=f"--policy-opt base_url={options['api_base']}")
    _check_options("openai", rest, options, _keyword_options(OpenAIPolicy))
    return OpenAIPolicy(rest, **options)


#: ``--policy-opt KEY=VALUE`` options of the token backends (``hf`` accepts only these).
_TOKEN_OPTIONS = {
    "temperature": "sampling temperature; 0 = greedy (default 1.0)",
    "top_p": "nucleus sampling threshold (default 1.0)",
    "max_new_tokens": "most tokens per turn (default 512)",
    "seed": "seeds every turn from (seed, episode id, turn); unset = unseeded",
    "max_episodes": "episodes whose token history is kept (default 1024)",
    "max_batch_size": "most concurrent turns generated together (default 64; 1 = one at a time)",
}
_HF_OPTIONS = {
    **_TOKEN_OPTIONS,
    "device": "cpu, cuda, cuda:N or auto (default cpu)",
    "dtype": "auto (the checkpoint's), float32, bfloat16 or float16",
    "shared_prefill": "true: a prompt several turns of a batch share is prefilled once "
                      "(default false; changes the logits' rounding)",
    "prefix_cache_mb": "keep each episode's KV cache between its turns, up to this many MB, so "
                       "a turn prefills only its new tokens (default 0 = off; changes the "
                       "logits' rounding)",
}
_VLLM_OPTIONS = {
    **_TOKEN_OPTIONS,
    "gpu_memory_utilization": "fraction of GPU memory vLLM may take (default 0.5)",
    "max_model_len": "the engine's maximum sequence length (default: the model's)",
    "dtype": "auto, bfloat16, float16 ...",
}


def _hf(rest: str, options: Mapping[str, Any]) -> Any:
    from harnessgrid.policies.hf import HFPolicy

    # model= / tokenizer= (already-loaded objects) are for Python callers, not the CLI.
    _check_options("hf", rest, {k: v for k, v in options.items()
                                if k not in ("model", "tokenizer")}, _HF_OPTIONS)
    return HFPolicy(rest, **options)


def _vllm(rest: str, options: Mapping[str, Any]) -> Any:
    from harnessgrid.policies.vllm import VLLMPolicy

    return VLLMPolicy(rest, **options)


@hookimpl
def harnessgrid_policies() -> Iterator[PolicyBackend]:
    yield PolicyBackend("scripted", "Oracle: plays the task's action plan through any harness.",
                        _scripted)
    yield PolicyBackend("null", "Sends nothing (empty replies): a task it passes has a weak grader.",
                        _null)
    yield PolicyBackend("litellm", "Chat policy through litellm (any provider; api_base for "
                        "OpenAI-compatible servers such as a local vLLM or Ollama).", _litellm,
                        extra="api")
    yield PolicyBackend("anthropic", "Anthropic Messages API through the official SDK "
                        "(base_url configurable).", _anthropic, extra="api")
    yield PolicyBackend("openai", "OpenAI-compatible chat API through the official async SDK "
                        "(OpenAI, or a vLLM / SGLang / llama.cpp server at base_url).", _openai,
                        extra="api")
    yield PolicyBackend("hf", "Token policy through transformers: exact prompt/completion ids "
                        "and logprobs per turn.", _hf, extra="hf", options=_HF_OPTIONS)
    yield PolicyBackend("vllm", "Token policy on vLLM (GPU; not verified on CPU machines).",
                        _vllm, extra="vllm", options=_VLLM_OPTIONS)
