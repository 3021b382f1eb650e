"""``hf:<path-or-hub-name>``: a token policy on a transformers causal LM.

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

Batching (:mod:`harnessgrid.policies.batching`): the turns of concurrent episodes that are
pending when the model is free are decoded together, up to ``max_batch_size`` (default 64; 1
decodes one turn at a time). One batch is a left-padded prefill (attention mask, explicit
position ids, so every row sees exactly its own prompt at positions ``0..len-1``) and then one
forward per step with the KV cache (written in place, :mod:`~harnessgrid.policies.kv_cache`:
the same logits as transformers' own cache, without its copy per step); a row that samples a stop id or reaches its own
``max_new_tokens`` leaves the batch (its rows of the KV cache are dropped). Padding changes the
logits only by floating-point rounding, so the recorded logprobs still equal a plain unbatched
forward of prompt + completion.

Two opt-in savings on the prefill, both off by default because they change that rounding (a
run with them repeats, but samples apart from a run without): ``shared_prefill=True``
computes a prompt that several turns of the batch share (a GRPO group's first turns) once and
copies its cache row; ``prefix_cache_mb=N`` keeps each finished turn's keys and values (up to
N MB, :mod:`~harnessgrid.policies.prefix_cache`), so an episode's next turn, whose prompt
extends the last one, prefills only its new tokens. ``stats.prefilled_tokens`` and
``stats.reused_tokens`` count what each did.

Seeding: every row draws from its own ``torch.Generator`` seeded with the turn's seed
(``derive_seed(seed, "episode_id/turn")``), one uniform per step, and takes the token where the
uniform falls in the row's cumulative distribution (inverse CDF, float64, vocabulary order). So
a sequence samples the same ids whether it is decoded alone or with others, unless the logits'
rounding differences move a cumulative boundary across its uniform -- ``torch.multinomial``,
whose draws depend on the whole batch, would give no such guarantee. In float32 the padded
batch's logits differ from an unbatched forward's by about 1e-7, so that is rare; in bfloat16
on a GPU, where batch shape changes the kernels, they differ more and batch independence is
approximate (the recorded logprobs are always those of the ids actually sampled).

Streaming (``PolicyRequest.on_text``): each sampled id is handed to the turn's
``GenerationRequest.on_token`` as soon as it is sampled, and the turn's event loop decodes the
text so far and sends the new part (:class:`~harnessgrid.policies.token.TokenPolicy`). The
sampling, hence the ids, logprobs and :class:`~harnessgrid.models.TokenRecord`, is the same
whether or not a turn streams.

Train mode: each batch runs under ``torch.no_grad()`` in eval mode and restores the model's
mode after, under :func:`generation_lock` (one lock per model object, shared by every policy on
it), which a trainer also holds while it updates the weights.
"""

from __future__ import annotations

import fnmatch
import inspect
import threading
import warnings
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harnessgrid.errors import ConfigError
from harnessgrid.policies.batching import GenerationRequest
from harnessgrid.policies.kv_cache import (
    growing_cache_fits,
    is_plain,
    merge_rows,
    new_cache,
    row_layers,
    stack_turns,
)
from harnessgrid.policies.prefix_cache import PrefixCache, StoredTurn, weights_stamp
from harnessgrid.policies.token import Generation, TokenPolicy

#: What a local checkpoint needs, for the tokenizer or the model: (what, for, file patterns).
_CHECKPOINT_FILES = (
    ("tokenizer files (tokenizer.json or tokenizer_config.json)", "tokenizer",
     ("tokenizer.json", "tokenizer_config.json")),
    ("config.json", "model", ("config.json",)),
    ("weights (*.safetensors or pytorch_model*.bin)", "model",
     ("*.safetensors", "pytorch_model*.bin", "*.safetensors.index.json")),
)
_HINT = ("hf: takes a local checkpoint directory (config.json, weights, tokenizer files) or a "
         "Hugging Face hub name such as Qwen/Qwen3-4B-Instruct-2507; offline "
         "(HF_HUB_OFFLINE=1) a hub model loads only if it is already in the cache "
         "(`hf download <name>` on a machine with network). For tests, "
         "harnessgrid.policies.tiny_model.build_tiny_model(dir) writes a small local checkpoint.")


class HFPolicy(TokenPolicy):
    """Samples turns from a transformers model, recording exact ids and logprobs.

    One instance serves any number of concurrent episodes: their pending turns are decoded in
    batches by one generation thread (module docstring), and each episode's token history is
    kept separately by episode id. Sampling is deterministic given ``seed``: each turn is
    seeded from ``(seed, episode_id, turn)``, whatever the interleaving or the batch.

    ``context_limit`` is ``model.config.max_position_embeddings - max_new_tokens`` (None when
    the config has no such field); ``stats`` counts requests, batches and forwards.
    """

    streams_text = True

    def __init__(self, name_or_path: str, *, device: str = "cpu", dtype: str = "auto",
                 temperature: float = 1.0, top_p: float = 1.0, max_new_tokens: int = 512,
                 seed: int | None = None, model: Any = None, tokenizer: Any = None,
                 max_episodes: int = 1024, max_batch_size: int = 64,
                 shared_prefill: bool = False, prefix_cache_mb: float = 0) -> None:
        self.spec = f"hf:{name_or_path}"
        if temperature < 0 or not 0 < top_p <= 1 or max_new_tokens < 1:
            raise ConfigError(f"{self.spec}: need temperature >= 0, 0 < top_p <= 1 and "
                              f"max_new_tokens >= 1, got {temperature}, {top_p}, "
                              f"{max_new_tokens}")
        self.temperature, self.top_p = float(temperature), float(top_p)
        self.max_new_tokens, self.seed = max_new_tokens, seed
        self.shared_prefill = bool(shared_prefill)
        if isinstance(prefix_cache_mb, bool) or not isinstance(prefix_cache_mb, int | float) \
                or not prefix_cache_mb >= 0:
            raise ConfigError(f"{self.spec}: prefix_cache_mb must be a number of MB >= 0, got "
                              f"{prefix_cache_mb!r}", hint="e.g. prefix_cache_mb=1024; 0 turns "
                              "the cache off")
        try:
            import torch
            import transformers
        except ImportError as exc:
            raise ConfigError(f"{self.spec} needs torch and transformers ({exc.name} is "
                              "missing)", hint="pip install 'harnessgrid[hf]'") from None
        self._torch, self._transformers = torch, transformers
        hf: Any = transformers  # partially typed upstream; only used at this boundary
        if model is None or tokenizer is None:
            self._check_local_path(name_or_path, tokenizer is None, model is None)
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
        max_length = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        self._init_tokens(tokenizer, eos, max_episodes, max_batch_size=max_batch_size,
                          max_length=max_length if isinstance(max_length, int) else None,
                          lock=generation_lock(model))
        pad = getattr(tokenizer, "pad_token_id", None)
        self._pad_id = pad if isinstance(pad, int) else min(self.book.stop_ids, default=0)
        try:
            self._logits_to_keep = "logits_to_keep" in inspect.signature(
                model.forward).parameters
        except (TypeError, ValueError):
            self._logits_to_keep = False
        self._growing = growing_cache_fits(model)  # see kv_cache: the same logits, less copying
        self._prefix_cache = (PrefixCache(int(prefix_cache_mb * 2**20),
                                          lambda: weights_stamp(self.model))
                              if prefix_cache_mb > 0 else None)

    # -- loading --------------------------------------------------------------------------

    def _check_local_path(self, name: str, tokenizer: bool, model: bool) -> None:
        """Fail fast, without touching the hub, on a path that plainly is a missing folder or
        a folder without the files a checkpoint needs (named, with what is there)."""
        path = Path(name).expanduser()
        if name.startswith(("/", "./", "../", "~")) and not path.is_dir():
            raise ConfigError(f"{self.spec}: no such model directory {name!r}", hint=_HINT)
        if not path.is_dir():
            return  # a hub name
        present = {p.name for p in path.iterdir()}
        missing = [what for what, needed, alternatives in _CHECKPOINT_FILES
                   if (tokenizer if needed == "tokenizer" else model)
                   and not any(fnmatch.filter(present, a) for a in alternatives)]
        if missing:
            found = ", ".join(sorted(present)[:8]) + (" …" if len(present) > 8 else "")
            raise ConfigError(f"{self.spec}: {name} is not a checkpoint directory: no "
                              f"{'; no '.join(missing)} (it holds: {found or 'nothing'})",
                              hint=_HINT)

    def _load(self, what: str, loader: Any, name: str, **kwargs: Any) -> Any:
        """``loader(name)``, with any load failure turned into a ConfigError naming the spec."""
        try:
            return loader(name, **kwargs)
        except (OSError, ValueError, ImportError) as exc:
            text = " ".join(str(exc).split())  # the whole message: its first line may be cut
            reason = (text[:400] + " …" if len(text) > 400 else text) or type(exc).__name__
            raise ConfigError(f"{self.spec}: cannot load the {what}: {reason}",
                              hint=_HINT) from None

    # -- sampling -------------------------------------------------------------------------

    def _generate_batch(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Blocking: decode every request together (module docstring), in eval mode under the
        model's generation lock; the model's train/eval mode is restored afterwards."""
        torch = self._torch
        out: list[Generation | None] = [None] * len(requests)
        rows = [i for i, r in enumerate(requests) if r.max_new_tokens >= 1]
        for i in set(range(len(requests))) - set(rows):
            out[i] = Generation([], [], "length")
        if rows:
            with self.generation_lock, torch.no_grad():
                was_training = bool(self.model.training)
                self.model.eval()  # a trainer's live model may be in train mode (dropout)
                try:
                    done = self._decode([requests[i] for i in rows])
                finally:
                    self.model.train(was_training)
            for i, generation in zip(rows, done, strict=True):
                out[i] = generation
        return [g for g in out if g is not None]

    def _decode(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """One left-padded prefill (:meth:`_prefill`), then one forward per step for the rows
        still running; a row that stops or reaches its own limit leaves the batch (and the KV
        cache), its turn kept in the prefix cache first when there is one."""
        torch, device = self._torch, self.device
        reserve = max(r.max_new_tokens for r in requests)  # columns the decode may add
        logits, past, mask, positions, used = self._prefill(requests, reserve)
        self._check_keepable(past)
        generators = [_row_generator(torch, r.seed) for r in requests]
        completions: list[list[int]] = [[] for _ in requests]
        logprobs: list[list[float]] = [[] for _ in requests]
        finish: list[str | None] = [None] * len(requests)
        rows = list(range(len(requests)))  # the request behind each row of the KV cache
        while True:
            live = [row for row, i in enumerate(rows) if finish[i] is None]
            index = torch.tensor(live, dtype=torch.long, device=device)
            tokens, token_logprobs = self._pick(logits[index, -1].float(),
                                                [generators[rows[row]] for row in live])
            for row, token, logprob in zip(live, tokens, token_logprobs, strict=True):
                i = rows[row]
                completions[i].append(token)
                logprobs[i].append(logprob)
                on_token = requests[i].on_token
                if on_token is not None:  # a streamed turn (TokenPolicy.act)
                    on_token(token)
                if token in self.book.stop_ids:
                    finish[i] = "stop"
                elif len(completions[i]) >= requests[i].max_new_tokens:
                    finish[i] = "length"
                if finish[i] is not None:
                    self._keep_turn(past, mask, row, [*requests[i].prompt_ids,
                                                      *completions[i][:-1]])
            keep = [row for row in live if finish[rows[row]] is None]
            if not keep:
                break
            if len(keep) < len(rows) and hasattr(past, "batch_select_indices"):
                index = torch.tensor(keep, dtype=torch.long, device=device)
                past.batch_select_indices(index)  # finished rows leave the batch
                mask, positions = mask[index], positions[index]
                rows = [rows[row] for row in keep]
            # Without a prunable cache, finished rows stay, fed padding that nothing attends to.
            running = [finish[i] is None for i in rows]
            inputs = torch.tensor([[completions[i][-1] if run else self._pad_id]
                                   for i, run in zip(rows, running, strict=True)],
                                  dtype=torch.long, device=device)
            step_mask = torch.tensor([[int(run)] for run in running], dtype=torch.long,
                                     device=device)
            mask = torch.cat([mask, step_mask], dim=1)
            positions = positions[:, -1:] + 1
            result = self.model(input_ids=inputs, attention_mask=mask, position_ids=positions,
                                past_key_values=past, use_cache=True)
            self.stats.forwards += 1
            logits, past = result.logits, result.past_key_values
        del past
        if self._prefix_cache is not None:
            for entry in used:  # those episodes have moved on: their new turns are kept
                self._prefix_cache.discard(entry)
        return [Generation(c, lp, f or "length")
                for c, lp, f in zip(completions, logprobs, finish, strict=True)]

    def _prefill(self, requests: Sequence[GenerationRequest], reserve: int,
                 ) -> tuple[Any, Any, Any, Any, list[StoredTurn]]:
        """The batch's first forwards: ``(logits, KV cache, attention mask, positions, the
        prefix-cache entries used)``, one row per request. Requests whose prompt extends a
        kept turn (the ``prefix_cache_mb`` option, :mod:`~harnessgrid.policies.prefix_cache`)
        prefill only their new tokens over its keys and values (:meth:`_extend`); the others
        their whole prompt (:meth:`_prefill_whole`); the two groups' caches are then merged,
        left-padded to one width, into the batch. ``reserve``: the columns the decode may add
        (room a growing cache keeps, :mod:`~harnessgrid.policies.kv_cache`)."""
        cache = self._prefix_cache
        if cache is not None:
            cache.check_weights()
        found = [cache.longest(r.prompt_ids) if cache is not None else None for r in requests]
        reused = [i for i, entry in enumerate(found) if entry is not None]
        if not reused:
            return (*self._prefill_whole(requests, self.shared_prefill, reserve), [])
        turns = [e for e in found if e is not None]
        parts = [(reused, *self._extend([requests[i] for i in reused], turns, reserve))]
        whole = [i for i, entry in enumerate(found) if entry is None]
        if whole:
            parts.append((whole, *self._prefill_whole([requests[i] for i in whole],
                                                      self.shared_prefill, reserve)))
        return (*merge_rows(self._torch, lambda layers: self._cache(reserve, layers), parts),
                turns)

    def _extend(self, requests: Sequence[GenerationRequest], turns: Sequence[StoredTurn],
                reserve: int) -> tuple[Any, Any, Any, Any]:
        """Prefill each request's tokens after its kept turn, over that turn's keys and values
        (right-aligned in one left-padded cache): row ``r`` reads ``[pad, turn, pad, new]``
        with the pads masked and the new tokens at positions ``len(turn)..len(prompt)-1``."""
        torch, device = self._torch, self.device
        past_width = max(len(t.tokens) for t in turns)
        new = [r.prompt_ids[len(t.tokens):] for r, t in zip(requests, turns, strict=True)]
        width = max(len(n) for n in new)
        ids = torch.full((len(requests), width), self._pad_id, dtype=torch.long)
        mask = torch.zeros((len(requests), past_width + width), dtype=torch.long)
        positions = torch.zeros((len(requests), width), dtype=torch.long)
        for row, (turn, tokens) in enumerate(zip(turns, new, strict=True)):
            done = len(turn.tokens)
            mask[row, past_width - done:past_width] = 1
            mask[row, past_width + width - len(tokens):] = 1
            ids[row, width - len(tokens):] = torch.tensor(tokens, dtype=torch.long)
            positions[row, width - len(tokens):] = torch.arange(done, done + len(tokens))
        past = self._cache(width + reserve, stack_turns(torch, turns, past_width, device))
        extra: dict[str, Any] = {"logits_to_keep": 1} if self._logits_to_keep else {}
        mask, positions = mask.to(device), positions.to(device)
        result = self.model(input_ids=ids.to(device), attention_mask=mask,
                            position_ids=positions, past_key_values=past, use_cache=True,
                            **extra)
        self.stats.forwards += 1
        self.stats.prefilled_tokens += sum(len(n) for n in new)
        self.stats.reused_tokens += sum(len(t.tokens) for t in turns)
        return result.logits, result.past_key_values, mask, positions

    def _prefill_whole(self, requests: Sequence[GenerationRequest], share: bool,
                       reserve: int) -> tuple[Any, Any, Any, Any]:
        """Whole prompts: ``(logits, KV cache, attention mask, positions)``, one row per
        request, left-padded with explicit positions, so every row sees exactly its
        prompt at ``0..len-1``. With ``share`` (the ``shared_prefill`` option), each distinct
        prompt is computed once and its cache row copied to the requests that share it: a
        GRPO group's rollouts of one (task, harness) pair all start from the same prompt, and
        its prefill is most of a turn's cost. The batch's shape then differs, so logits differ
        by float rounding from a run without it (a run with it repeats). A cache that cannot
        be copied by row (not transformers' dynamic cache) is prefilled again with a row per
        request."""
        torch, device = self._torch, self.device
        first: dict[tuple[int, ...], int] = {}
        shared = [first.setdefault(tuple(r.prompt_ids), len(first)) if share else n
                  for n, r in enumerate(requests)]
        prompts = list(first) if share else [tuple(r.prompt_ids) for r in requests]
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self._pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
            mask[row, width - len(prompt):] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        extra: dict[str, Any] = {"logits_to_keep": 1} if self._logits_to_keep else {}
        mask, positions = mask.to(device), positions.to(device)
        result = self.model(input_ids=ids.to(device), attention_mask=mask,
                            position_ids=positions, use_cache=True,
                            past_key_values=self._cache(reserve) if self._growing else None,
                            **extra)
        self.stats.forwards += 1
        self.stats.prefilled_tokens += sum(len(p) for p in prompts)
        logits, past = result.logits, result.past_key_values
        if len(prompts) == len(requests):
            return logits, past, mask, positions
        if not hasattr(past, "batch_select_indices"):
            return self._prefill_whole(requests, False, reserve)
        index = torch.tensor(shared, dtype=torch.long, device=device)
        past.batch_select_indices(index)  # each request's row, copied from its prompt's
        self.stats.shared_prefills += len(requests) - len(prompts)
        return logits[index], past, mask[index], positions[index]

    def _check_keepable(self, past: Any) -> None:
        """Turn the prefix cache off, with a warning, when the batch's KV cache is of another
        kind than transformers' plain dynamic one (sliding windows, quantised, offloaded):
        its rows cannot be copied out and back."""
        if self._prefix_cache is not None and not is_plain(past):
            self._prefix_cache = None
            warnings.warn(f"{self.spec}: prefix_cache_mb is ignored: the model's KV cache "
                          f"({type(past).__name__}) is not a plain dynamic cache whose rows "
                          "can be kept", RuntimeWarning, stacklevel=3)

    def _keep_turn(self, past: Any, mask: Any, row: int, tokens: list[int]) -> None:
        """Keep row ``row``'s finished turn (``tokens``: its prompt and completion less the
        last token) in the prefix cache, if there is one."""
        cache = self._prefix_cache
        if cache is None:
            return
        layers = row_layers(past, mask, row)
        if layers[0][0].shape[1] != len(tokens):
            raise RuntimeError(f"{self.spec}: a finished turn has {len(tokens)} tokens but "
                               f"{layers[0][0].shape[1]} cached positions (a bug)")
        cache.put(tokens, layers)

    def _cache(self, reserve: int, layers: Sequence[tuple[Any, Any]] = ()) -> Any:
        """A cache holding ``layers``: growing (room for ``reserve`` more columns) when the
        model's own would be plain dynamic layers, else transformers' dynamic cache."""
        if self._growing:
            return new_cache(reserve, layers)
        return self._transformers.DynamicCache(ddp_cache_data=list(layers))

    def _pick(self, logits: Any, generators: Sequence[Any]) -> tuple[list[int], list[float]]:
        """Sample one token per row; return them with ``log_softmax(logits / T)`` at each
        (module docstring). Row ``r`` draws one uniform from ``generators[r]`` and takes the
        token where it falls in the row's cumulative distribution (inverse CDF, vocabulary
        order, float64), so its choice depends on nothing else in the batch and moves only
        if a floating-point difference crosses the uniform, unlike ``torch.multinomial``."""
        torch = self._torch
        if self.temperature == 0:
            logp = torch.log_softmax(logits, dim=-1)
            tokens = torch.argmax(logp, dim=-1)
        else:
            logp = torch.log_softmax(logits / self.temperature, dim=-1)
            probs = logp.exp()
            if self.top_p < 1:
                sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
                outside = torch.cumsum(sorted_probs, dim=-1) - sorted_probs >= self.top_p
                sorted_probs = sorted_probs.masked_fill(outside, 0.0)  # the top token stays
                probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
            uniforms = torch.tensor(
                [float(torch.rand((), generator=g, dtype=torch.float64)) for g in generators],
                dtype=torch.float64, device=probs.device)
            cdf = torch.cumsum(probs.double(), dim=-1)
            targets = (uniforms * cdf[:, -1]).unsqueeze(-1)
            tokens = torch.searchsorted(cdf, targets, right=True).squeeze(-1)
            tokens = tokens.clamp(max=probs.shape[-1] - 1)
        chosen = logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        return [int(t) for t in tokens.tolist()], [float(x) for x in chosen.tolist()]


def _row_generator(torch: Any, seed: int | None) -> Any:
    """A row's own random stream (on the CPU: one scalar per step, whatever the device)."""
    generator = torch.Generator()
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)
    return generator


_MODEL_LOCKS: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
_MODEL_LOCKS_GUARD = threading.Lock()


def generation_lock(model: Any) -> threading.RLock:
    """The lock every :class:`HFPolicy` on ``model`` holds while it generates (one per model
    object, shared by all policies on it). A trainer that updates the weights of a live model
    holds it around the update, so a training step never runs during generation (which also
    switches the model to eval mode and back)."""
    with _MODEL_LOCKS_GUARD:
        try:
            lock = _MODEL_LOCKS.get(model)
            if lock is None:
                lock = _MODEL_LOCKS[model] = threading.RLock()
        except TypeError:  # not weak-referenceable or not hashable: a lock of its own
            lock = threading.RLock()
        return lock
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
