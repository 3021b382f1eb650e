"""The experiment config of ``harnessgrid train``: one YAML file, validated.

Example (``examples/tiny-grpo.yaml``)::

    model: .tiny-model/tiny        # a local checkpoint or a hub name (hf: policy rules)
    algorithm: grpo                # grpo | ppo | sft
    design: oa                     # single | list | first-order | random | oa
                                   # | nearly-orthogonal | full | adapter:NAME
    k: 2                           # configurations per task, on successive steps
    tasks_per_step: 2
    rollouts_per_task: 4
    steps: 2
    output_dir: runs/tiny-grpo
    trl: {logging_steps: 1}        # passed to TRL's GRPOConfig / SFTConfig as they are

Every field has the paper's default where the paper has one (GRPO 16 tasks x 8 rollouts, PPO
128 x 1, 300 steps, K = 2). ``--set key=value`` overrides a field from the command line
(``--set ppo.gamma=0.99``, ``--set trl.report_to=[wandb]``); values are read as YAML. A bad
file, key or value is a :class:`~harnessgrid.errors.ConfigError` naming it.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.errors import ConfigError, HarnessgridError
from harnessgrid.sandboxing.sandbox import SandboxLimits

__all__ = ["ExperimentConfig", "PPOOptions", "SFTOptions", "apply_overrides", "load_config"]

Algorithm = Literal["grpo", "ppo", "sft"]
DESIGNS = ("single", "list", "first-order", "random", "oa", "nearly-orthogonal", "full")

#: GRPOConfig / SFTConfig fields this config sets itself; setting them under ``trl:`` would
#: silently disagree with the top-level field, so it is refused with the field to use instead.
OWNED_TRL_FIELDS: dict[str, str] = {
    "output_dir": "output_dir", "max_steps": "steps", "learning_rate": "learning_rate",
    "beta": "beta", "epsilon": "epsilon", "epsilon_high": "epsilon_high",
    "loss_type": "loss_type", "temperature": "temperature", "seed": "seed",
    "scale_rewards": "scale_rewards", "num_generations": "rollouts_per_task",
    "per_device_train_batch_size": "tasks_per_step (sft: sft.batch_size)",
    "gradient_accumulation_steps": "micro_batch_tokens (sft: sft.micro_batches)", "steps_per_generation": "(one generation per step)",
    "generation_batch_size": "tasks_per_step x rollouts_per_task",
    "max_completion_length": "max_new_tokens", "use_vllm": "generation",
    "vllm_importance_sampling_correction": "(the recorded logprobs are the old logprobs)",
    "num_train_epochs": "steps",
}


#: Top-level keys before 0.2.3 that are fields of ``limits:`` now (removed in 0.3.0): old key ->
#: its name in the table. A config's identity (:meth:`ExperimentConfig.identity`) still writes
#: them this way, so runs and shipped checkpoints fingerprinted before keep their fingerprints.
LEGACY_LIMIT_KEYS: dict[str, str] = {"max_turns": "max_turns",
                                     "context_budget": "max_context_tokens",
                                     "episode_timeout_s": "wall_s",
                                     "unsafe_no_sandbox": "unsafe_no_sandbox"}
#: The least context a training rollout may have (a chat template and one turn fit in it).
MIN_CONTEXT_TOKENS = 256


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PPOOptions(_Options):
    """The critic of ``algorithm: ppo``: a token-classification head (one value per
    position) on a copy of the policy's backbone, trained with its own optimizer on a clipped
    value loss; advantages are GAE over the episode's model tokens."""

    critic_learning_rate: float = Field(default=1e-5, gt=0)
    gamma: float = Field(default=1.0, ge=0, le=1)
    lam: float = Field(default=0.95, ge=0, le=1)
    value_clip: float = Field(default=0.2, gt=0)
    whiten_advantages: bool = True


class SFTOptions(_Options):
    """Demonstrations for ``algorithm: sft`` (and a warm start): ``episodes`` episodes of a
    teacher policy through the design's harnesses (the schedule's pairs, one rollout each),
    kept when their score reaches ``min_score``; ``steps`` optimizer steps of ``batch_size``
    segment rows each."""

    teacher: str = "scripted"
    teacher_options: dict[str, Any] = Field(default_factory=dict)
    episodes: int = Field(default=256, ge=1)
    min_score: float = Field(default=1.0, ge=0, le=1)
    batch_size: int = Field(default=8, ge=1)
    max_length: int | None = Field(default=None, ge=16,
                                   description="truncate rows (None: keep them whole)")
    micro_batches: int = Field(
        default=1, ge=1,
        description="split each step's batch_size rows, sorted by length, into this many "
                    "forward passes (transformers' batch_rebalance sampler): the same rows and "
                    "gradient per step with less padding (the demo: 4, 1.6x faster on CPU)")

    @model_validator(mode="after")
    def _whole_micro_batches(self) -> SFTOptions:
        if self.batch_size % self.micro_batches:
            raise ValueError(f"sft.micro_batches={self.micro_batches} does not divide "
                             f"sft.batch_size={self.batch_size}; use a divisor of it")
        return self


class ExperimentConfig(BaseModel):
    """One training run. See the module docstring and docs/training.md."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # what is trained
    model: str = Field(description="hf checkpoint directory or hub name; tiny:SIZE builds "
                                   "the offline tiny model (tests, CPU examples)")
    init_from: str | None = Field(
        default=None, description="start from this checkpoint (e.g. an SFT run's final/)")
    algorithm: Algorithm = "grpo"
    device: str = "auto"
    dtype: str = "float32"
    generation: Literal["hf", "vllm"] = Field(
        default="hf", description="hf: transformers on the trained model; vllm: TRL's vLLM "
                                  "engine (trl.vllm_mode colocate or server)")

    # which (task, harness) pairs are rolled out
    design: str = "oa"
    harness: str | None = Field(default=None, description="the configuration of design: single: "
                                                          "a code or a level list")
    harnesses: tuple[str, ...] = Field(default=(), description="the configurations of "
                                                               "design: list (codes)")
    design_size: int = Field(default=18, ge=1, description="N of design: random and "
                                                           "nearly-orthogonal")
    space: dict[str, tuple[str, ...]] | None = Field(
        default=None, description="factor -> level names: the space designs and codes refer to "
                                  "(default: the five built-in factors x three levels)")
    with_levels: tuple[str, ...] = Field(default=(), description="FACTOR:LEVEL added to the "
                                                                 "space")
    k: int = Field(default=2, ge=1)
    pairing: Literal["hamming", "random", "repeat"] = "hamming"
    suite: str = "grid"
    split: str = "train"
    max_tasks: int | None = Field(default=None, ge=1, description="use N tasks, evenly spread over the split")

    # how many
    tasks_per_step: int | None = Field(default=None, ge=1,
                                       description="default: grpo 16, ppo 128")
    rollouts_per_task: int | None = Field(default=None, ge=1,
                                          description="default: grpo 8, ppo 1")
    steps: int = Field(default=300, ge=1)

    # the objective (TRL's clipped surrogate, unchanged)
    learning_rate: float = Field(default=1e-6, gt=0)
    beta: float = Field(default=0.0, ge=0, description="KL coefficient")
    epsilon: float = Field(default=0.2, gt=0, description="clip range")
    epsilon_high: float | None = Field(default=None, gt=0)
    loss_type: Literal["dapo", "grpo", "bnpo", "dr_grpo", "cispo"] = "dapo"
    scale_rewards: Literal["group", "batch", "none"] = "group"
    negate_advantages: bool = Field(
        default=False, description="a control arm: every advantage's sign flipped, so the "
                                   "update pushes away from what scored well (GRPO and PPO); "
                                   "a real learning signal then moves results the other way")
    reward: Literal["score", "pass"] = "score"
    format_bonus: float = Field(
        default=0.0, ge=0, le=1,
        description="add this times the episode's share of well-formed turns to the reward "
                    "(0: the task's grade alone, the paper's)")
    reward_funcs: tuple[str, ...] = Field(
        default=(), description="module:function reward functions replacing `reward` "
                                "(called with the step's trajectories; see docs/training.md)")
    mask_truncated_turns: bool = Field(
        default=False, description="no loss on turns cut by max_new_tokens")

    # episodes
    limits: EpisodeLimits = Field(
        default_factory=EpisodeLimits,
        description="every rollout's limits, the table `eval` and `run` take: max_turns, "
                    "max_context_tokens, wall_s, max_format_errors, sandbox (memory_mb, ...), "
                    "environment, unsafe_no_sandbox, ...")
    max_new_tokens: int = Field(default=1024, ge=1, description="per turn")
    temperature: float = Field(default=1.0, gt=0,
                               description="sampling and loss (must be the same)")
    concurrency: int = Field(default=64, ge=1, description="episodes in flight per process")
    micro_batch_tokens: int = Field(default=16_384, ge=64,
                                    description="padded tokens per forward/backward chunk")

    # bookkeeping
    seed: int = 0
    output_dir: str = "runs/train"
    save_trajectories: bool = False
    rollout_backend: Literal["local", "ray"] = Field(
        default="local", description="ray: episodes as Ray tasks on a cluster (generation on "
                                     "the workers from a per-step weight snapshot)")
    ray_address: str | None = Field(default=None, description="HOST:PORT of the Ray head, or "
                                                              "auto")
    ppo: PPOOptions = PPOOptions()
    sft: SFTOptions = SFTOptions()
    trl: dict[str, Any] = Field(default_factory=dict,
                                description="passed to TRL's GRPOConfig / SFTConfig")

    @model_validator(mode="before")
    @classmethod
    def _legacy_limit_keys(cls, data: Any) -> Any:
        """``max_turns: 8`` (a key before 0.2.3) read as ``limits: {max_turns: 8}``, with a
        warning naming the new key; the same setting given both ways is refused."""
        if not isinstance(data, dict) or not LEGACY_LIMIT_KEYS.keys() & data.keys():
            return data
        data = dict(data)
        limits = data.get("limits", {})
        if isinstance(limits, EpisodeLimits):
            limits = limits.model_dump(exclude_unset=True)
        if not isinstance(limits, dict):
            return data  # the table's own validation names the mistake
        limits = dict(limits)
        for old, new in LEGACY_LIMIT_KEYS.items():
            if old not in data:
                continue
            if new in limits:
                raise ValueError(f"{old} and limits.{new} are one setting; keep limits.{new}")
            warnings.warn(f"the training config key {old!r} is deprecated since 0.2.3 and "
                          f"will be removed in 0.3.0; write limits: {{{new}: "
                          f"{data[old]!r}}} (--set limits.{new}=...)", DeprecationWarning,
                          stacklevel=2)
            limits[new] = data.pop(old)
        data["limits"] = limits
        return data

    @field_validator("limits")
    @classmethod
    def _rollout_limits(cls, limits: EpisodeLimits) -> EpisodeLimits:
        if limits.max_context_tokens < MIN_CONTEXT_TOKENS:
            raise ValueError(f"max_context_tokens {limits.max_context_tokens} is too small for "
                             f"a training rollout (at least {MIN_CONTEXT_TOKENS})")
        if limits.max_turns < 1 or limits.wall_s <= 0:
            raise ValueError(f"max_turns ({limits.max_turns}) must be at least 1 and wall_s "
                             f"({limits.wall_s}) positive")
        return limits

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentConfig:
        if not (self.design in DESIGNS or self.design.startswith("adapter:")):
            raise ValueError(f"design {self.design!r} is not one of {', '.join(DESIGNS)} "
                             "or adapter:NAME")
        if self.design == "single" and self.harness is None:
            raise ValueError("design: single needs harness: CODE (e.g. S0-T0-O0-C0-W0) or a "
                             "level list")
        if (self.design == "list") != bool(self.harnesses):
            raise ValueError("design: list needs harnesses: [CODE, ...], and harnesses: is "
                             "read only by design: list")
        if self.rollout_backend == "ray" and self.generation != "hf":
            raise ValueError("rollout_backend: ray generates on the workers (generation: hf); "
                             "with vLLM, use its server mode and local rollouts")
        if self.algorithm == "sft" and self.generation != "hf":
            raise ValueError("sft does not generate; leave generation: hf")
        if self.algorithm == "grpo" and self.group_size < 2:
            raise ValueError("grpo needs rollouts_per_task >= 2 (the group baseline); "
                             "use algorithm: ppo for one rollout per task")
        for key in self.trl:
            if key in OWNED_TRL_FIELDS:
                raise ValueError(f"trl.{key} is set by this config; use "
                                 f"{OWNED_TRL_FIELDS[key]} instead")
        return self

    # -- derived ------------------------------------------------------------------------------
    @property
    def tasks(self) -> int:
        """Tasks per step (the algorithm's paper default when not set)."""
        if self.tasks_per_step is not None:
            return self.tasks_per_step
        return 128 if self.algorithm == "ppo" else 16

    @property
    def group_size(self) -> int:
        """Rollouts per (task, configuration) pair."""
        if self.rollouts_per_task is not None:
            return self.rollouts_per_task
        return 1 if self.algorithm == "ppo" else 8

    @property
    def is_adapter(self) -> bool:
        return self.design.startswith("adapter:")

    def identity(self, exclude: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
        """The config as plain data in the layout fingerprints are taken of: the limits that
        were top-level keys before 0.2.3 under those names, the table's other settings under
        ``limits`` only where they differ from their defaults. A run (or a shipped
        checkpoint) fingerprinted before the table existed keeps its fingerprint."""
        data = self.model_dump(mode="json", exclude={"limits", *exclude})
        limits = self.limits.model_dump(mode="json")
        data.update({old: limits.pop(new) for old, new in LEGACY_LIMIT_KEYS.items()})
        defaults = EpisodeLimits().model_dump(mode="json")
        changed = {k: v for k, v in limits.items() if v != defaults.get(k)}
        if changed:
            data["limits"] = changed
        return data

    def fingerprint(self) -> str:
        """A hash of everything that decides what a run computes (not where it writes), so a
        resumed run can refuse a changed config."""
        data = self.identity({"output_dir", "save_trajectories", "concurrency", "ray_address",
                              "rollout_backend"})
        data["trl"] = {k: v for k, v in data["trl"].items()
                       if k not in ("report_to", "logging_steps", "save_steps",
                                    "save_total_limit", "run_name", "disable_tqdm")}
        blob = json.dumps(data, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


#: The tables of the config whose keys are fields (``trl`` is passed on as it is).
_TABLES: dict[str, type] = {"": ExperimentConfig, "ppo": PPOOptions,
                            "sft": SFTOptions, "limits": EpisodeLimits,
                            "limits.sandbox": SandboxLimits}


def _keys(table: str) -> list[str]:
    """The keys a table of the config takes (a pydantic model's fields, a dataclass's)."""
    kind = _TABLES.get(table)
    if kind is None:
        return []
    if dataclasses.is_dataclass(kind):
        return [f.name for f in dataclasses.fields(kind)]
    return list(getattr(kind, "model_fields", {}))


def _describe(error: ValidationError, source: str,
              overrides: Mapping[str, str] | None = None) -> ConfigError:
    """One message for every problem, each blamed on where its value came from (the file, or
    the ``--set`` that gave it); an unknown key with the field it is probably a typo of."""
    problems: dict[str, list[str]] = {}
    unmatched: list[tuple[str, str]] = []  # (table, key) of unknown keys without a near field
    for e in error.errors():
        loc = [str(p) for p in e["loc"]]
        where = ".".join(loc) or "(top level)"
        if e["type"] in ("extra_forbidden", "unexpected_keyword_argument"):  # a model's, a
            # dataclass's (limits.sandbox)
            table, key = ".".join(loc[:-1]), loc[-1] if loc else ""
            known = _keys(table)
            near = difflib.get_close_matches(key, known, n=1)
            problem = f"unknown key {where!r}" + (
                f" (did you mean {'.'.join([*loc[:-1], near[0]])!r}?)" if near else "")
            if not near:
                unmatched.append((table, key))
        elif e["type"] == "missing":
            problem = f"{where}: required"
        else:
            shown = "" if e["type"] == "value_error" else f" (got {e.get('input')!r})"
            problem = f"{where}: {e['msg'].removeprefix('Value error, ')}{shown}"
        problems.setdefault(_origin(where, source, overrides or {}), []).append(problem)
    message = "; ".join(f"{origin}: {'; '.join(found)}" for origin, found in problems.items())
    hint = "see docs/training.md for every key"
    if unmatched and unmatched[0][0] in _TABLES:  # no near field: list the table's keys
        table = unmatched[0][0]
        hint = (f"{f'keys of {table}' if table else 'top-level keys'}: "
                f"{', '.join(_keys(table))}; see docs/training.md")
    return ConfigError(message, hint=hint)


def _origin(where: str, source: str, overrides: Mapping[str, str]) -> str:
    """``--set KEY=VALUE`` when that override gave the value at ``where`` (or a table above
    it), else the file."""
    for key, item in overrides.items():  # the value itself, a table above it, or a key in it
        if where == key or where.startswith(key + ".") or key.startswith(where + "."):
            return f"--set {item}"
    return source


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """``key=value`` strings applied to ``data`` (dotted keys reach nested tables; values are
    YAML, so ``--set steps=10``, ``--set trl.report_to=[wandb]``, ``--set harness=null``)."""
    import yaml

    out: dict[str, Any] = json.loads(json.dumps(data))  # a deep copy of plain data
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"bad --set {item!r}", hint="write KEY=VALUE, e.g. --set steps=10")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as exc:
            raise ConfigError(f"bad value in --set {item!r}: {exc}",
                              hint="values are YAML: 10, 0.5, true, [a, b], 'text'") from None
        key = key.strip()
        if key in LEGACY_LIMIT_KEYS:  # an old key from the command line overrides the table's
            new = f"limits.{LEGACY_LIMIT_KEYS[key]}"
            warnings.warn(f"--set {key}=... is deprecated since 0.2.3 and will be removed in "
                          f"0.3.0; write --set {new}=...", DeprecationWarning, stacklevel=2)
            key = new
        node = out
        *parents, leaf = key.split(".")
        for p in parents:
            child = node.setdefault(p, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--set {item!r}: {p!r} is not a table",
                                  hint="dotted keys only reach nested tables (ppo, sft, limits, trl)")
            node = child
        node[leaf] = value
    return out


def config_from_mapping(data: Mapping[str, Any], source: str = "config",
                        overrides: Iterable[str] = ()) -> ExperimentConfig:
    """Validate ``data``; ``overrides`` are the ``--set KEY=VALUE`` items already applied to it
    (a bad value they gave is blamed on them, not on ``source``)."""
    try:
        return ExperimentConfig.model_validate(dict(data))
    except HarnessgridError as exc:  # a dataclass table's own check (limits.sandbox)
        given = {item.partition("=")[0].strip(): item for item in overrides}
        field = exc.message.partition("=")[0].removeprefix("SandboxLimits.")
        origin = _origin(f"limits.sandbox.{field}", source, given)
        raise ConfigError(f"{origin}: {exc.message}", hint=exc.hint) from None
    except ValidationError as exc:
        given = {item.partition("=")[0].strip(): item for item in overrides}
        raise _describe(exc, source, given) from None


def load_config(path: str | Path, overrides: Iterable[str] = ()) -> ExperimentConfig:
    """Read, override and validate an experiment config file."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no such config file: {str(path)!r}",
                          hint="see examples/tiny-grpo.yaml for a complete one")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}", hint="fix the line it names") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys to values, got "
                          f"{type(data).__name__}", hint="see examples/tiny-grpo.yaml")
    overrides = list(overrides)
    return config_from_mapping(apply_overrides(data, overrides), str(path), overrides)
