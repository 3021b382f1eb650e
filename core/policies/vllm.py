"""``vllm:<name>``: a token policy on vLLM's offline engine (GPU machines).

NOT VERIFIED ON THIS MACHINE: the project's CI has no GPU and no vLLM, so this module is
written against vLLM's public offline API; what is tested is its import guard and, against a
fake engine that records its calls, the batching and the token bookkeeping. What it relies on:

* ``vllm.LLM(model=..., seed=..., gpu_memory_utilization=..., logprobs_mode=...)`` and
  ``LLM.get_tokenizer()``;
* ``LLM.generate(prompts, sampling_params, use_tqdm=False) -> list[RequestOutput]``, in
  prompt order, with a list of tokens prompts and a list of ``SamplingParams`` (one per
  prompt); a tokens prompt is the ``TokensPrompt`` TypedDict ``{"prompt_token_ids": [...]}``
  (passed as a plain dict, which is what ``vllm.inputs.TokensPrompt`` is);
* ``SamplingParams(temperature, top_p, max_tokens, seed, logprobs=0, stop_token_ids)``:
  ``logprobs=0`` returns the sampled token's logprob only;
* ``RequestOutput.outputs[0]``: ``token_ids`` (including a final stop token), ``logprobs`` (one
  ``{token_id: Logprob(logprob=...)}`` per generated token) and ``finish_reason`` (``"stop"`` or
  ``"length"``);
* ``LLM.model_config.max_model_len`` or ``LLM.llm_engine.model_config.max_model_len`` for
  ``context_limit`` (else the ``max_model_len`` option, else None).

Log-probabilities: vLLM's default ``logprobs_mode="raw_logprobs"`` reports
``log_softmax(logits)`` *before* temperature. An engine created here uses
``logprobs_mode="processed_logprobs"`` (vLLM >= 0.10.2; what TRL's colocated GRPO uses), i.e.
after temperature and top-k/top-p: with ``top_p=1`` that is ``log_softmax(logits /
temperature)``, the same definition as the ``hf:`` policy (see :mod:`harnessgrid.policies.hf`).
With ``top_p < 1`` vLLM reports the renormalised nucleus distribution, which differs from the
``hf:`` policy's untruncated value. An engine passed in as ``llm=`` keeps its own mode.

Prompt ids, history extension and tool-call parsing are the shared
:class:`~harnessgrid.policies.token.TokenBookkeeper`. ``LLM`` is not thread-safe, so only the
policy's one generation thread calls it (:mod:`harnessgrid.policies.batching`): the turns of
concurrent episodes pending when the engine is free go to ONE ``LLM.generate`` call, a tokens
prompt and a ``SamplingParams`` per turn (``LLM.generate`` accepts a list of sampling params,
one per prompt), each with its own per-turn ``seed`` (vLLM then samples that request from its
own generator, so batching does not change what it samples) and its own ``max_tokens``.
``max_batch_size`` (default 64) caps the prompts per call; vLLM schedules within the call.
``context_limit`` is the engine's ``max_model_len`` minus ``max_new_tokens``.

No streaming: ``LLM.generate`` returns whole completions only (the offline engine has no
per-token callback; a streaming path would need the async engine), so ``PolicyRequest.on_text``
is ignored and the whole text arrives with the turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harnessgrid.errors import ConfigError
from harnessgrid.policies.batching import GenerationRequest
from harnessgrid.policies.token import Generation, TokenPolicy


class VLLMPolicy(TokenPolicy):
    """Token-in/token-out turns through ``vllm.LLM.generate`` (see the module docstring)."""

    def __init__(self, name: str, *, temperature: float = 1.0, top_p: float = 1.0,
                 max_new_tokens: int = 512, seed: int | None = None, llm: Any = None,
                 tokenizer: Any = None, gpu_memory_utilization: float = 0.5,
                 max_model_len: int | None = None, dtype: str = "auto",
                 max_episodes: int = 1024, max_batch_size: int = 64,
                 **engine_options: Any) -> None:
        self.spec = f"vllm:{name}"
        if temperature < 0 or not 0 < top_p <= 1 or max_new_tokens < 1:
            raise ConfigError(f"{self.spec}: need temperature >= 0, 0 < top_p <= 1 and "
                              f"max_new_tokens >= 1, got {temperature}, {top_p}, "
                              f"{max_new_tokens}")
        try:
            import vllm
        except ImportError:
            raise ConfigError(
                f"{self.spec}: vLLM is not installed",
                hint="pip install 'harnessgrid[vllm]' on a machine with a CUDA GPU (vLLM does "
                     "not run on CPU-only machines); on CPU use hf:<model> instead") from None
        self._vllm: Any = vllm
        self.temperature, self.top_p = float(temperature), float(top_p)
        self.max_new_tokens, self.seed = max_new_tokens, seed
        if llm is None:
            options: dict[str, Any] = {"gpu_memory_utilization": gpu_memory_utilization,
                                       "dtype": dtype, "logprobs_mode": "processed_logprobs",
                                       **engine_options}
            if max_model_len is not None:
                options["max_model_len"] = max_model_len
            if seed is not None:
                options["seed"] = seed
            try:
                llm = vllm.LLM(model=name, **options)
            except (OSError, ValueError) as exc:
                raise ConfigError(f"{self.spec}: cannot start vLLM: {exc}",
                                  hint="check the model name/path and the engine options "
                                       "(gpu_memory_utilization, max_model_len)") from None
        self.llm = llm
        self.tokenizer = tokenizer if tokenizer is not None else llm.get_tokenizer()
        eos = getattr(self.tokenizer, "eos_token_id", None)
        self._init_tokens(self.tokenizer, eos, max_episodes, max_batch_size=max_batch_size,
                          max_length=_max_model_len(llm, max_model_len))

    def _generate_batch(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Blocking: ONE ``LLM.generate`` call for the whole batch, one tokens prompt and one
        ``SamplingParams`` (with the request's own seed and limit) per request."""
        prompts = [{"prompt_token_ids": list(r.prompt_ids)} for r in requests]
        params = [self._vllm.SamplingParams(
            temperature=self.temperature, top_p=self.top_p, max_tokens=r.max_new_tokens,
            seed=r.seed, logprobs=0, stop_token_ids=sorted(self.book.stop_ids))
            for r in requests]
        with self.generation_lock:
            results = self.llm.generate(prompts, params, use_tqdm=False)
        self.stats.forwards += 1
        if len(results) != len(requests):
            raise RuntimeError(f"{self.spec}: vLLM returned {len(results)} outputs for "
                               f"{len(requests)} prompts")
        return [self._generation(result) for result in results]

    def _generation(self, result: Any) -> Generation:
        """One ``RequestOutput`` as a :class:`Generation`."""
        out = result.outputs[0]
        ids = [int(t) for t in out.token_ids]
        if out.logprobs is None or len(out.logprobs) != len(ids):
            raise RuntimeError(f"{self.spec}: vLLM returned {len(ids)} tokens but "
                               "no matching logprobs (SamplingParams.logprobs=0 ignored?)")
        logprobs = [float(step[token].logprob)
                    for step, token in zip(out.logprobs, ids, strict=True)]
        finish = "length" if out.finish_reason == "length" else "stop"
        return Generation(ids, logprobs, finish)


def _max_model_len(llm: Any, configured: int | None) -> int | None:
    """The engine's maximum sequence length: its model config's ``max_model_len`` (on ``LLM``
    or ``LLM.llm_engine``, depending on the vLLM version), else the one asked for."""
    for owner in (llm, getattr(llm, "llm_engine", None)):
        value = getattr(getattr(owner, "model_config", None), "max_model_len", None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return configured
