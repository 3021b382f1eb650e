"""Which engine generates the training rollouts (``generation:`` in the config).

* ``hf`` -- the ``hf:`` token policy on the very model being trained (batched across the
  step's concurrent episodes). Runs anywhere, including CPU.
* ``vllm`` -- TRL's vLLM engine, created by ``GRPOTrainer`` when ``use_vllm=True``, in either
  of TRL's modes (``trl: {vllm_mode: colocate | server}``):

  - ``colocate``: the engine lives in the training process; episodes go through the ``vllm:``
    token policy on that engine (``LLM.generate`` with one tokens prompt and per-turn seed per
    request).
  - ``server``: a separate ``trl vllm-serve`` process; episodes go through
    :class:`TRLServerPolicy`, token ids in and out over TRL's ``VLLMClient``.

  Either way the trained weights are pushed to the engine before each step's rollouts
  (``VLLMGeneration.sync_weights``), and prompt ids, history extension and tool-call parsing are
  the same :class:`~harnessgrid.policies.token.TokenBookkeeper` as for ``hf``.

NOT VERIFIED HERE: vLLM needs a CUDA GPU; the CPU-testable parts (the wiring, request
building, token bookkeeping) are tested with fake engines (tests/test_trainer_generation.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harnessgrid.errors import ConfigError
from harnessgrid.policies.batching import GenerationRequest
from harnessgrid.policies.token import Generation, TokenPolicy

__all__ = ["TRLServerPolicy", "generation_policy", "sync_generation_weights"]


class TRLServerPolicy(TokenPolicy):
    """Token-in/token-out turns through a ``trl vllm-serve`` server (``VLLMClient.generate``).

    The server's ``/generate`` call takes one set of sampling parameters for all its prompts,
    so a batch is sent as one call per distinct token limit, with no per-turn seed: sampling is
    not reproducible turn by turn in server mode (it is with ``hf`` and colocated vLLM).
    Logprobs are the sampled tokens' (``logprobs=0``); start the server with
    ``--logprobs-mode processed_logprobs`` so they are after temperature, as the loss expects.
    """

    def __init__(self, client: Any, tokenizer: Any, *, name: str, temperature: float,
                 top_p: float = 1.0, max_new_tokens: int, max_length: int | None = None,
                 max_batch_size: int = 256) -> None:
        self.spec = f"vllm-server:{name}"
        self.client = client
        self.temperature, self.top_p = float(temperature), float(top_p)
        self.max_new_tokens, self.seed = max_new_tokens, None
        self.tokenizer = tokenizer
        self._init_tokens(tokenizer, getattr(tokenizer, "eos_token_id", None), 4096,
                          max_batch_size=max_batch_size, max_length=max_length)

    def _generate_batch(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out: list[Generation | None] = [None] * len(requests)
        by_limit: dict[int, list[int]] = {}
        for i, r in enumerate(requests):
            by_limit.setdefault(r.max_new_tokens, []).append(i)
        stop = sorted(self.book.stop_ids)
        for limit, indices in sorted(by_limit.items()):
            with self.generation_lock:
                result = self.client.generate(
                    prompts=[list(requests[i].prompt_ids) for i in indices], n=1,
                    temperature=self.temperature, top_p=self.top_p, max_tokens=limit,
                    logprobs=0, generation_kwargs={"stop_token_ids": stop})
            self.stats.forwards += 1
            completions, logprobs = result["completion_ids"], result["logprobs"]
            if len(completions) != len(indices):
                raise RuntimeError(f"{self.spec}: the server returned {len(completions)} "
                                   f"completions for {len(indices)} prompts")
            for i, ids, lps in zip(indices, completions, logprobs, strict=True):
                ids = [int(t) for t in ids]
                finish = "stop" if ids and ids[-1] in self.book.stop_ids else "length"
                out[i] = Generation(ids, [float(step[0]) for step in lps], finish)
        return [g for g in out if g is not None]


#: What ``--policy-opt`` may set on the rollouts' policy, per ``generation`` (the config owns
#: the model, temperature, max_new_tokens and seed; the trainer owns the device and dtype).
TRAINING_POLICY_OPTIONS: dict[str, tuple[str, ...]] = {
    "hf": ("max_batch_size", "max_episodes", "shared_prefill", "prefix_cache_mb"),
    "vllm": ("max_batch_size", "max_episodes"),
}
#: Policy options that are training config keys of the same name.
_CONFIG_OWNED = ("temperature", "max_new_tokens", "seed", "device", "dtype")


def check_policy_options(options: Mapping[str, Any], generation: str) -> None:
    """Refuse, before any model loads, a rollout policy option the trainer cannot pass on:
    one the training config sets (named with its key) or one this generation does not take."""
    for key in options:
        if key in _CONFIG_OWNED:
            raise ConfigError(f"--policy-opt {key}=... is set by the training config",
                              hint=f"--set {key}={options[key]}")
    allowed = TRAINING_POLICY_OPTIONS.get(generation, ())
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(f"unknown rollout policy option(s) for generation: {generation}: "
                          f"{', '.join(unknown)}",
                          hint="--policy-opt takes " + (", ".join(allowed) or "nothing here"))


def generation_policy(trainer: Any) -> TokenPolicy:
    """The token policy the trainer's rollouts use (see the module docstring)."""
    exp = trainer.experiment
    name = exp.init_from or exp.model
    model = trainer.accelerator.unwrap_model(trainer.model)
    max_length = getattr(model.config, "max_position_embeddings", None)
    if exp.generation == "hf":
        from harnessgrid.policies.hf import HFPolicy

        return HFPolicy(name, model=model, tokenizer=trainer.processing_class,
                        temperature=exp.temperature, max_new_tokens=exp.max_new_tokens,
                        seed=exp.seed, **trainer.policy_options)
    engine = getattr(trainer, "vllm_generation", None)
    if engine is None:
        raise ConfigError("generation: vllm, but TRL created no vLLM engine",
                          hint="install the [vllm] extra on a CUDA machine")
    if engine.mode == "colocate":
        from harnessgrid.policies.vllm import VLLMPolicy

        return VLLMPolicy(name, llm=engine.llm, tokenizer=trainer.processing_class,
                          temperature=exp.temperature, max_new_tokens=exp.max_new_tokens,
                          seed=exp.seed, **trainer.policy_options)
    client = getattr(engine, "vllm_client", None)
    if client is None:  # only the main process holds TRL's client (with the weight-sync group)
        from trl.generation.vllm_client import VLLMClient

        args = trainer.args
        client = VLLMClient(base_url=args.vllm_server_base_url, host=args.vllm_server_host,
                            server_port=args.vllm_server_port)
    return TRLServerPolicy(client, trainer.processing_class, name=name,
                           temperature=exp.temperature, max_new_tokens=exp.max_new_tokens,
                           max_length=max_length, **trainer.policy_options)


def sync_generation_weights(trainer: Any, step: int) -> None:
    """Push the current weights to the vLLM engine once per step (no-op for ``hf``)."""
    engine = getattr(trainer, "vllm_generation", None)
    if trainer.experiment.generation != "vllm" or engine is None:
        return
    if getattr(trainer, "_last_loaded_step", None) != step:
        engine.sync_weights()
        trainer._last_loaded_step = step
