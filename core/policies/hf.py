"""``hf:<path-or-hub-name>``: a token policy on a transformers causal LM (DESIGN §3, §8).

Loads through ``AutoTokenizer`` / ``AutoModelForCausalLM.from_pretrained`` exactly as a user's
``hf:Qwen/Qwen3-4B-Instruct-2507`` would, or takes an already-loaded ``model``/``tokenizer`` (the
trainer passes its live model, so rollouts sample from the weights being trained). Prompt ids,
history extension, tool-call parsing and the :class:`~harnessgrid.models.TokenRecord` come from
:class:`~harnessgrid.policies.token.TokenBookkeeper`; this module only samples.

The sampling loop is ours (not ``model.generate``) so that the recorded log-probabilities are
exactly defined. For each sampled token ``y_t``::

    logprob_t = log_softmax(logits_t / temperature)[y_t]

computed in float32 from the raw logits over the *full* vocabulary -- the same quantity TRL's
GRPO trainer recomputes (it divides the logits by its ``temperature`` before ``log_softmax``),
so the on-policy check compares like with like. At ``temperature=1`` this is the model's own
distribution. ``top_p < 1`` samples from the nucleus, renormalised, but the recorded logprob is
still the untruncated one above (as TRL's recompute), so it is not the probability of the
truncated sampling distribution. ``temperature=0`` is greedy decoding and records
``log_softmax(logits)`` (temperature 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harnessgrid.errors import ConfigError
from harnessgrid.policies.token import Generation, TokenPolicy

_HINT = ("hf: takes a local checkpoint directory (config.json, weights, tokenizer files) or a "
         "Hugging Face hub name such as Qwen/Qwen3-4B-Instruct-2507; offline "
         "(HF_HUB_OFFLINE=1) a hub model loads only if it is already in the cache "
         "(`hf download <name>` on a machine with network). For tests, "
         "harnessgrid.tiny_model.build_tiny_model(dir) writes a small local checkpoint.")


class HFPolicy(TokenPolicy):
    """Samples turns from a transformers model, recording exact ids and logprobs.

    One instance serves any number of concurrent episodes: generation runs in a worker thread
    under a lock (one model, one forward at a time; no interleaved KV caches), and each
    episode's token history is kept separately by episode id. Sampling is deterministic given
    ``seed``: each turn is seeded from ``(seed, episode_id, turn)``, whatever the interleaving.
    """

    def __init__(self, name_or_path: str, *, device: str = "cpu", dtype: str = "auto",
                 temperature: float = 1.0, top_p: float = 1.0, max_new_tokens: int = 512,
                 seed: int | None = None, model: Any = None, tokenizer: Any = None,
                 max_episodes: int = 1024) -> None:
        self.spec = f"hf:{name_or_path}"
        if temperature < 0 or not 0 < top_p <= 1 or max_new_tokens < 1:
            raise ConfigError(f"{self.spec}: need temperature >= 0, 0 < top_p <= 1 and "
                              f"max_new_tokens >= 1, got {temperature}, {top_p}, "
                              f"{max_new_tokens}")
        self.temperature, self.top_p = float(temperature), float(top_p)
        self.max_new_tokens, self.seed = max_new_tokens, seed
        try:
            import torch
            import transformers
        except ImportError as exc:
            raise ConfigError(f"{self.spec} needs torch and transformers ({exc.name} is "
                              "missing)", hint="pip install 'harnessgrid[hf]'") from None
        self._torch = torch
        hf: Any = transformers  # partially typed upstream; only used at this boundary
        if model is None or tokenizer is None:
            self._check_local_path(name_or_path)
        if tokenizer is None:
            tokenizer = self._load("tokenizer", hf.AutoTokenizer.from_pretrained, name_or_path)
        if model is None:
            target = _resolve_device(torch, device)
            model = self._load("model", hf.AutoModelForCausalLM.from_pretrained, name_or_path,
                               dtype=_resolve_dtype(torch, dtype, self.spec))
            model.to(target).eval()
        self.model, self.tokenizer = model, tokenizer
        self.device = next(model.parameters()).device
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        self._init_tokens(tokenizer, eos, max_episodes)


    # -- loading --------------------------------------------------------------------------

    def _check_local_path(self, name: str) -> None:
        """Fail fast, without touching the hub, on a path that plainly is a missing folder."""
        if name.startswith(("/", "./", "../", "~")) and not Path(name).expanduser().is_dir():
            raise ConfigError(f"{self.spec}: no such model directory {name!r}", hint=_HINT)

    def _load(self, what: str, loader: Any, name: str, **kwargs: Any) -> Any:
        """``loader(name)``, with any load failure turned into a ConfigError naming the spec."""
        try:
            return loader(name, **kwargs)
        except (OSError, ValueError, ImportError) as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"{self.spec}: cannot load the {what}: {reason}",
                              hint=_HINT) from None

    # -- sampling -------------------------------------------------------------------------

    def _generate(self, prompt_ids: list[int], max_new_tokens: int,
                  seed: int | None) -> Generation:
        """Blocking: sample up to ``max_new_tokens`` after ``prompt_ids`` with a KV cache."""
        torch = self._torch
        with self._lock, torch.no_grad():
            was_training = bool(self.model.training)
            self.model.eval()  # a trainer's live model may be in train mode (dropout)
            try:
                return self._sample(prompt_ids, max_new_tokens, seed)
            finally:
                self.model.train(was_training)

    def _sample(self, prompt_ids: list[int], max_new_tokens: int,
                seed: int | None) -> Generation:
        torch = self._torch
        generator = torch.Generator(device=self.device)
        if seed is None:
            generator.seed()
        else:
            generator.manual_seed(seed)
        inputs = torch.tensor([prompt_ids], dtype=torch.long, device=self.device)
        past: Any = None
        ids: list[int] = []
        logprobs: list[float] = []
        for _ in range(max_new_tokens):
            out = self.model(input_ids=inputs, past_key_values=past, use_cache=True)
            past = out.past_key_values
            token, logprob = self._pick(out.logits[0, -1].float(), generator)
            ids.append(token)
            logprobs.append(logprob)
            if token in self.book.stop_ids:
                return Generation(ids, logprobs, "stop")
            inputs = torch.tensor([[token]], dtype=torch.long, device=self.device)
        return Generation(ids, logprobs, "length")

    def _pick(self, logits: Any, generator: Any) -> tuple[int, float]:
        """Sample one token; return it with ``log_softmax(logits / T)`` at it (module doc)."""
        torch = self._torch
        if self.temperature == 0:
            logp = torch.log_softmax(logits, dim=-1)
            token = int(torch.argmax(logp))
            return token, float(logp[token])
        logp = torch.log_softmax(logits / self.temperature, dim=-1)
        probs = logp.exp()
        if self.top_p < 1:
            sorted_probs, order = torch.sort(probs, descending=True)
            outside = torch.cumsum(sorted_probs, dim=-1) - sorted_probs >= self.top_p
            sorted_probs[outside] = 0.0  # the most likely token is always kept
            probs = torch.zeros_like(probs).scatter(0, order, sorted_probs)
        token = int(torch.multinomial(probs, 1, generator=generator))
        return token, float(logp[token])


def _resolve_device(torch: Any, device: str) -> Any:
    """``"auto"`` → CUDA when available, else CPU; anything else as torch spells it."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise ConfigError(f"unknown device {device!r}: {exc}",
                          hint="use 'cpu', 'cuda', 'cuda:1' or 'auto'") from None


def _resolve_dtype(torch: Any, dtype: str, spec: str) -> Any:
    """``"auto"`` (the checkpoint's dtype) or a torch dtype name such as ``"bfloat16"``."""
    if dtype == "auto":
        return "auto"
    value = getattr(torch, dtype, None)
    if not isinstance(value, torch.dtype):
        raise ConfigError(f"{spec}: unknown dtype {dtype!r}",
                          hint="use 'auto', 'float32', 'bfloat16' or 'float16'")
    return value
