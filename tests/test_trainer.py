"""The harness-scaled trainer (trainer/) on the tiny offline model, CPU, real TRL,
real sandboxed episodes.

A randomly initialised model never solves a task, so the runs that must change the weights use
a custom reward function (a documented extension point) that gives different rewards to
different episodes; everything else is the production path.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from interrupts import sigint_default

from harnessgrid.errors import ConfigError
from harnessgrid.trainer.config import ExperimentConfig, config_from_mapping, load_config
from harnessgrid.trainer.plan import TrainingPlan
from harnessgrid.trainer.rollout import RolloutJob, episode_id_for
from harnessgrid.trainer.run import TrainResult, train
from harnessgrid.trajectory import Trajectory

pytest.importorskip("trl")
torch = pytest.importorskip("torch")
safetensors = pytest.importorskip("safetensors.torch")

ROOT = Path(__file__).resolve().parents[1]


def parity_reward(trajectories: Sequence[Trajectory]) -> list[float | None]:
    """Reward = parity of the first sampled token: varies across a group's rollouts."""
    out: list[float | None] = []
    for t in trajectories:
        if t.infra_failure:
            out.append(None)
        else:
            first = next(turn.tokens for turn in t.turns if turn.tokens is not None)
            out.append(float(first.completion_ids[0] % 2))
    return out


def tiny_config(model: Path, out: Path, **overrides: Any) -> ExperimentConfig:
    data = {"model": str(model), "design": "oa", "suite": "grid", "max_tasks": 40,
            "tasks_per_step": 2, "rollouts_per_task": 3, "steps": 2, "learning_rate": 1e-3,
            "limits": {"max_turns": 3, "max_context_tokens": 4096}, "max_new_tokens": 24,
            "output_dir": str(out), "save_trajectories": True}
    data.update(overrides)
    return config_from_mapping(data)


def weights(path: Path) -> dict[str, Any]:
    return dict(safetensors.load_file(str(path / "model.safetensors")))


def changed(before: dict[str, Any], after: dict[str, Any]) -> bool:
    return any(not torch.equal(before[k], after[k]) for k in before)


def steps_log(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]


def saved_trajectories(out: Path, step: int) -> list[Trajectory]:
    path = out / "trajectories" / f"step-{step:06d}.rank0.jsonl"
    return [Trajectory.model_validate_json(line) for line in path.read_text().splitlines()]


# -- config --------------------------------------------------------------------------------------

def test_paper_defaults() -> None:
    grpo = config_from_mapping({"model": "m"})
    ppo = config_from_mapping({"model": "m", "algorithm": "ppo"})
    assert (grpo.tasks, grpo.group_size, grpo.steps, grpo.k) == (16, 8, 300, 2)
    assert (ppo.tasks, ppo.group_size) == (128, 1)
    assert grpo.loss_type == "dapo"
    assert grpo.pairing == "hamming"


def test_config_errors_name_the_bad_value(tmp_path: Path) -> None:
    cases = [({"model": "m", "stpes": 3}, "unknown key 'stpes'"),
             ({"model": "m", "design": "latin"}, "design 'latin'"),
             ({"model": "m", "design": "single"}, "needs harness"),
             ({"model": "m", "rollouts_per_task": 1}, "rollouts_per_task >= 2"),
             ({"model": "m", "trl": {"learning_rate": 1}}, "use learning_rate instead"),
             ({"model": "m", "steps": 0}, "steps")]
    for data, expected in cases:
        with pytest.raises(ConfigError, match=expected):
            config_from_mapping(data)
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_a_word_yaml_read_as_a_boolean_is_named_with_the_quoting(tmp_path: Path) -> None:
    """Found: ``--set trl.save_strategy=no`` (TRL's own word) reached GRPOConfig as False -
    YAML 1.1 reads no/yes/on/off as booleans - and the error said only "False is not a valid
    SaveStrategy". The hint now names the key and how to keep the word; quoted, it is TRL's."""
    from harnessgrid.trainer.run import grpo_args

    path = tmp_path / "c.yaml"
    path.write_text(f"model: m\noutput_dir: {tmp_path / 'out'}\n")
    cfg = load_config(path, ["trl.save_strategy=no"])
    assert cfg.trl == {"save_strategy": False}
    with pytest.raises(ConfigError, match="False is not a valid SaveStrategy") as refused:
        grpo_args(cfg, "cpu")
    assert "--set trl.save_strategy=\"'no'\"" in (refused.value.hint or "")
    quoted = load_config(path, ["trl.save_strategy='no'"])
    assert str(grpo_args(quoted, "cpu").save_strategy) in ("no", "SaveStrategy.NO")
    with pytest.raises(ConfigError) as other:  # a message naming no boolean: the plain hint
        grpo_args(load_config(path, ["trl.logging_steps=[1]"]), "cpu")
    assert other.value.hint == "fix or remove the key under trl:"


def test_set_overrides_nested_values(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("model: m\nppo: {gamma: 0.9}\n")
    cfg = load_config(path, ["steps=7", "ppo.lam=0.5", "trl.report_to=[wandb]", "harness=null"])
    assert (cfg.steps, cfg.ppo.gamma, cfg.ppo.lam) == (7, 0.9, 0.5)
    assert cfg.trl == {"report_to": ["wandb"]}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        load_config(path, ["steps"])


def test_examples_are_valid_configs() -> None:
    for name in ("tiny-grpo.yaml", "tiny-ppo.yaml", "tiny-sft.yaml", "qwen3-4b-grpo.yaml"):
        cfg = load_config(ROOT / "examples" / name)
        assert cfg.algorithm in ("grpo", "ppo", "sft")
    assert load_config(ROOT / "examples" / "qwen3-4b-grpo.yaml").tasks == 16


def test_the_limits_table_reaches_the_rollouts_sandboxes(tmp_path: Path) -> None:
    """Issue 42: training rollouts run under the same ``EpisodeLimits`` table as ``eval`` and
    ``run``, so a config (or ``--set``) reaches their sandboxes. Scripted rollouts through the
    plan's limits: the command's address-space limit is the ``memory_mb`` set, the format
    error limit is the one set, and ``limits.environment: none`` mounts nothing where the task
    declares an environment (recorded as missing without it)."""
    import asyncio

    from harnessgrid.policies.scripted import ScriptedPolicy
    from harnessgrid.tasks import Action, Task
    from harnessgrid.trainer.rollout import run_rollouts

    path = tmp_path / "c.yaml"
    path.write_text("model: m\nsuite: grid\nmax_tasks: 4\n")
    sets = ["limits.sandbox.memory_mb=300", "limits.environment=none",
            "limits.max_format_errors=7"]
    task = Task(id="ulimit", instruction="Say your memory limit.", suite="grid",
                environment="pinchbench",
                plan=(Action.of("shell", command="ulimit -v"),))

    def rollout(config: ExperimentConfig) -> Trajectory:
        plan = TrainingPlan(config, tasks=[task])
        job = RolloutJob(step=0, slot=0, position=0, task_id=task.id, harness="S0-T0-O0-C0-W0",
                         anchor="S0-T0-O0-C0-W0", rollout=0, episode_id="e0")
        (traj,) = asyncio.run(run_rollouts([job], plan.tasks, ScriptedPolicy(), plan.limits,
                                           make_harness=plan.make_harness))
        return traj

    configured = load_config(path, sets)
    assert configured.limits.max_format_errors == 7
    traj = rollout(configured)
    assert traj.error is None, traj.error
    said = "\n".join(str(m.content) for m in traj.history)
    assert str(300 * 1024) in said
    assert traj.environment is None
    with warnings.catch_warnings():  # the missing environment's warning (once a process)
        warnings.simplefilter("ignore", RuntimeWarning)
        default = rollout(load_config(path))
    assert str(300 * 1024) not in "\n".join(str(m.content) for m in default.history)
    assert default.environment == {"name": "pinchbench", "missing": "true"}


def test_limits_written_as_top_level_keys_still_load(tmp_path: Path) -> None:
    """Before 0.2.3 the limits were top-level keys (``max_turns``, ``context_budget``,
    ``episode_timeout_s``, ``unsafe_no_sandbox``): they load into the table, with a warning
    naming the new key, and the config keeps its fingerprint (a resumed run and the shipped
    warm start are recognised)."""
    new = config_from_mapping({"model": "m", "limits": {"max_turns": 4,
                                                        "max_context_tokens": 2048}})
    with pytest.warns(DeprecationWarning, match="write limits: {max_context_tokens: 2048}"):
        old = config_from_mapping({"model": "m", "max_turns": 4, "context_budget": 2048})
    assert old == new
    assert old.fingerprint() == new.fingerprint()
    assert new.identity()["context_budget"] == 2048  # the layout fingerprints were taken of
    assert "limits" not in new.identity()
    tightened = config_from_mapping({"model": "m", "limits": {"sandbox": {"memory_mb": 300}}})
    changed = tightened.identity()["limits"]  # only what differs from the defaults
    assert list(changed) == ["sandbox"]
    assert changed["sandbox"]["memory_mb"] == 300
    assert tightened.fingerprint() != new.fingerprint()
    with pytest.raises(ConfigError, match=r"max_turns and limits\.max_turns are one setting"):
        config_from_mapping({"model": "m", "max_turns": 4, "limits": {"max_turns": 5}})
    # an old key given on the command line overrides the file's table, as --set does
    file = tmp_path / "new.yaml"
    file.write_text("model: m\nlimits: {max_turns: 8, max_context_tokens: 2048}\n")
    with pytest.warns(DeprecationWarning, match="write --set limits.max_turns"):
        overridden = load_config(file, ["max_turns=2"])
    assert (overridden.limits.max_turns, overridden.limits.max_context_tokens) == (2, 2048)
    cases = [(["limits.sandbox.memroy_mb=1"], "did you mean 'limits.sandbox.memory_mb'"),
             (["limits.sandbox.memory_mb=-1"], "--set limits.sandbox.memory_mb=-1: "
                                               "SandboxLimits.memory_mb=-1 must be a positive"),
             (["limits.max_context_tokens=10"], "--set limits.max_context_tokens=10: limits: "
                                                "max_context_tokens 10 is too small")]
    path = tmp_path / "c.yaml"
    path.write_text("model: m\n")
    for sets, message in cases:
        with pytest.raises(ConfigError) as err:
            load_config(path, sets)
        assert message in str(err.value), str(err.value)


# -- rollout planning ------------------------------------------------------------------------------

def test_jobs_follow_the_schedule_with_stable_episode_ids(tmp_path: Path) -> None:
    cfg = tiny_config(Path("m"), tmp_path)
    plan = TrainingPlan(cfg)
    for step in range(4):
        jobs = plan.jobs(step)
        items = plan.schedule.step(step)
        assert [(j.task_id, j.harness) for j in jobs] == [
            (i.task_id, i.config.code) for i in items for _ in range(cfg.group_size)]
        assert jobs == TrainingPlan(cfg).jobs(step)  # recomputed from scratch: identical
        assert len({j.episode_id for j in jobs}) == len(jobs)
    adapter = TrainingPlan(tiny_config(Path("m"), tmp_path, design="adapter:openclaw@2026.2.26"))
    assert {j.harness for j in adapter.jobs(0)} == {"adapter:openclaw@2026.2.26"}


def test_unknown_adapter_is_named(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="nope"):
        TrainingPlan(tiny_config(Path("m"), tmp_path, design="adapter:nope"))


# -- training runs -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def grpo_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> TrainResult:
    out = tmp_path_factory.mktemp("grpo") / "run"
    return train(tiny_config(tiny_model_dir, out), reward_funcs=[parity_reward])


def test_grpo_two_steps_change_the_weights(grpo_run: TrainResult, tiny_model_dir: Path) -> None:
    assert grpo_run.steps == 2
    assert changed(weights(tiny_model_dir), weights(grpo_run.final_model))
    reports = steps_log(grpo_run.output_dir)
    assert [r["step"] for r in reports] == [0, 1]
    assert any(len(set(p["rewards"])) > 1 for r in reports for p in r["pairs"])


def test_the_same_run_repeats_bit_for_bit(grpo_run: TrainResult, tiny_model_dir: Path,
                                          tmp_path: Path) -> None:
    """The same config and seed again (the rollouts' episodes batched in lockstep, the update
    depending only on sampled ids): the same token ids *and* logprobs in every trajectory, the
    same step log apart from timings, the same weights byte for byte. Before lockstep the
    recorded logprobs differed with each run's batching, and so did the weights."""
    again = train(tiny_config(tiny_model_dir, tmp_path / "again"), reward_funcs=[parity_reward])
    assert weights(again.final_model).keys() == weights(grpo_run.final_model).keys()
    assert (again.final_model / "model.safetensors").read_bytes() == \
        (grpo_run.final_model / "model.safetensors").read_bytes()
    timing = {"rollout_s", "prepare_s", "train_s", "loss_s", "backward_s", "critic_s",
              "model_tokens_per_s"}
    for a, b in zip(steps_log(grpo_run.output_dir), steps_log(again.output_dir), strict=True):
        assert {k: v for k, v in a.items() if k not in timing} == \
            {k: v for k, v in b.items() if k not in timing}
        first, second = (saved_trajectories(run.output_dir, a["step"])
                         for run in (grpo_run, again))
        tokens = [[t.tokens for t in traj.turns] for traj in first]
        assert any(record is not None for turns in tokens for record in turns)
        assert tokens == [[t.tokens for t in traj.turns] for traj in second]


def test_step_log_shows_the_learning_signal(grpo_run: TrainResult) -> None:
    """The parity reward splits groups, so the steps have signal and the run says nothing."""
    reports = steps_log(grpo_run.output_dir)
    for r in reports:
        assert r["groups"] == 2
        assert 0 <= r["flat_groups"] <= 2
        assert 0 < r["signal_tokens"] <= r["trained_tokens"]
        assert r["score"] is not None
    assert any(r["flat_groups"] < 2 for r in reports)
    assert grpo_run.no_signal is None


def test_logged_pairs_are_the_schedules(grpo_run: TrainResult, tiny_model_dir: Path) -> None:
    cfg = tiny_config(tiny_model_dir, grpo_run.output_dir)
    plan = TrainingPlan(cfg)
    for report in steps_log(grpo_run.output_dir):
        expected = [(i.task_id, i.config.code, i.anchor.code)
                    for i in plan.schedule.step(report["step"])]
        assert [(p["task"], p["harness"], p["anchor"]) for p in report["pairs"]] == expected
        assert all(len(p["rewards"]) == cfg.group_size for p in report["pairs"])
        for code, reward in report["reward_per_config"].items():
            mine = [x for p in report["pairs"] if p["harness"] == code for x in p["rewards"]]
            assert reward == pytest.approx(sum(mine) / len(mine))


def test_every_model_token_carries_loss(grpo_run: TrainResult) -> None:
    """The loss covers exactly the tokens the model generated, counted on the trajectories."""
    for report in steps_log(grpo_run.output_dir):
        trajectories = saved_trajectories(grpo_run.output_dir, report["step"])
        generated = sum(len(t.tokens.completion_ids) for traj in trajectories
                        for t in traj.turns if t.tokens is not None)
        assert report["model_tokens"] == generated > 0
        assert report["logp_gap"]["max"] < 1e-4  # sampled on the weights being trained


def test_checkpoints_are_complete_and_resumable(grpo_run: TrainResult) -> None:
    checkpoint = grpo_run.output_dir / "checkpoint-2"
    state = json.loads((checkpoint / "harnessgrid_state.json").read_text())
    assert state["step"] == 2
    assert state["complete"]
    assert (checkpoint / "optimizer.pt").is_file()
    with pytest.raises(ConfigError, match="already holds a training run"):
        train(tiny_config(Path(grpo_run.final_model), grpo_run.output_dir))


class HandPickedPlan(TrainingPlan):
    """The given harnesses, each as one group of ``group_size`` rollouts of one task; a
    harness named ``"broken"`` is one whose episode crashes (an infrastructure failure)."""

    def __init__(self, config: ExperimentConfig, harnesses: list[str]) -> None:
        super().__init__(config)
        self.harnesses = harnesses

    def jobs(self, step: int) -> list[RolloutJob]:
        task = next(iter(self.tasks))
        return [RolloutJob(step=step, slot=0, position=p, task_id=task, harness=h, anchor=h,
                           rollout=r, episode_id=episode_id_for(0, step, p, task, h, r))
                for p, h in enumerate(self.harnesses) for r in range(self.config.group_size)]

    def make_harness(self, spec: str) -> Any:
        if spec == "broken":
            raise RuntimeError("this harness plugin is broken")
        return super().make_harness(spec)


def test_on_policy_through_every_context_level_and_both_shells(tiny_model_dir: Path,
                                                              tmp_path: Path) -> None:
    """Recomputed logprobs equal the sampling logprobs (1e-4, fp32) on every row, including
    rows that start after a history rewrite and rows of the emulated shells."""
    # the shells' earlier releases: today's prompts outgrow the tiny model's 4096 positions
    harnesses = ["S0-T0-O0-C0-W0", "S1-T1-O1-C1-W1", "S2-T2-O2-C2-W2",
                 "adapter:claude-code@1.0.98", "adapter:openclaw@2026.2.26", "broken"]
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", steps=1, rollouts_per_task=2,
                      limits={"max_turns": 6, "max_context_tokens": 6000},
                      max_new_tokens=48)
    result = train(cfg, reward_funcs=[parity_reward], plan=HandPickedPlan(cfg, harnesses))
    (report,) = result.reports
    assert report["logp_gap"]["max"] < 1e-4
    trajectories = saved_trajectories(result.output_dir, 0)
    assert {t.harness for t in trajectories} >= set(harnesses[:-1])
    # the broken harness's episodes are excluded, not scored 0
    broken = next(p for p in report["pairs"] if p["harness"] == "broken")
    assert broken["rewards"] == []
    assert broken["infra_failures"] == 2
    assert report["infra_failures"] == 2
    assert report["episodes"] == 12
    assert report["terminations"]["internal_error"] == 2
    valid = [t for t in trajectories if not t.infra_failure]
    assert report["rows"] == sum(len(t.token_rows()) for t in valid)
    assert report["model_tokens"] == sum(r.model_tokens for t in valid for r in t.token_rows())


def test_on_policy_with_the_prefill_savings(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The hf policy's ``shared_prefill`` and ``prefix_cache_mb`` in training, through every
    context level and both shells, over two steps (the weights change in between, which
    empties the cache): every row's recomputed logprobs equal the sampling ones, the weights
    move, and the step log counts prompt tokens read from the cache instead of prefilled."""
    harnesses = ["S0-T0-O0-C0-W0", "S1-T1-O1-C1-W1", "S2-T2-O2-C2-W2",
                 "adapter:claude-code@1.0.98", "adapter:openclaw@2026.2.26"]
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", rollouts_per_task=2,
                      limits={"max_turns": 4, "max_context_tokens": 6000}, max_new_tokens=32)
    result = train(cfg, reward_funcs=[parity_reward], plan=HandPickedPlan(cfg, harnesses),
                   policy_options={"shared_prefill": True, "prefix_cache_mb": 64})
    assert len(result.reports) == 2
    for report in result.reports:
        assert report["logp_gap"]["max"] < 1e-4
        assert report["reused_tokens"] > 0
        assert report["prefilled_tokens"] > 0
    assert changed(weights(tiny_model_dir), weights(result.final_model))
    logged = steps_log(result.output_dir)
    assert [r["reused_tokens"] for r in logged] == [r["reused_tokens"] for r in result.reports]


def test_rollout_policy_options_the_trainer_cannot_pass_on_are_refused_before_loading(
        tmp_path: Path) -> None:
    """Before, an option the hf policy does not take, or one the config sets (temperature),
    reached ``HFPolicy(**options)`` at the first step, after the model loaded: a TypeError
    traceback. Now each is a ConfigError naming it and the fix, before anything loads (the
    model path does not even exist here); SFT, which rolls out no policy, says so."""
    cfg = tiny_config(tmp_path / "no-model", tmp_path / "run")
    with pytest.raises(ConfigError, match=r"unknown rollout policy option\(s\) for "
                       r"generation: hf: top_k") as unknown:
        train(cfg, policy_options={"top_k": 5})
    assert "prefix_cache_mb" in (unknown.value.hint or "")
    with pytest.raises(ConfigError, match=r"max_new_tokens=\.\.\. is set by the training config"):
        train(cfg, policy_options={"max_new_tokens": 5})
    with pytest.raises(ConfigError, match="sft rolls out no policy of its own"):
        train(tiny_config(tmp_path / "no-model", tmp_path / "sft", algorithm="sft"),
              policy_options={"shared_prefill": True})


def test_ppo_two_steps_train_policy_and_critic(tiny_model_dir: Path, tmp_path: Path) -> None:
    cfg = tiny_config(tiny_model_dir, tmp_path / "ppo", algorithm="ppo", rollouts_per_task=1,
                      tasks_per_step=4)
    result = train(cfg, reward_funcs=[parity_reward])
    assert result.steps == 2
    assert changed(weights(tiny_model_dir), weights(result.final_model))
    critic = result.output_dir / "checkpoint-2" / "critic"
    assert (critic / "model.safetensors").is_file()
    assert (critic / "critic_optimizer.pt").is_file()
    reports = steps_log(result.output_dir)
    assert all(r["value_loss"] is not None and r["value_loss"] >= 0 for r in reports)
    assert all(len(p["rewards"]) == 1 for r in reports for p in r["pairs"])


def test_cli_train_runs_an_example_and_reports_bad_configs(tiny_model_dir: Path,
                                                          tmp_path: Path) -> None:
    env_cmd = [sys.executable, "-m", "harnessgrid", "train"]
    out = tmp_path / "cli"
    ok = subprocess.run([*env_cmd, str(ROOT / "examples" / "tiny-grpo.yaml"),
                         "--set", f"model={tiny_model_dir}", "--set", f"output_dir={out}",
                         "--set", "steps=1", "--set", "tasks_per_step=1",
                         "--set", "rollouts_per_task=2", "--set", "limits.max_turns=2",
                         "--policy-opt", "shared_prefill=true",
                         "--policy-opt", "prefix_cache_mb=64"],  # as docs/training.md shows
                        capture_output=True, text=True, timeout=300, check=False)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "prefilled_tokens" in json.loads((out / "steps.jsonl").read_text().splitlines()[0])
    assert "step 1/1" in ok.stderr
    assert "reward" in ok.stderr
    # A randomly initialised model fails every rollout alike: the line and the end say so.
    assert "NO LEARNING SIGNAL" in ok.stderr
    assert "warning: no learning signal in any of the 1 steps" in ok.stderr
    assert (out / "final" / "model.safetensors").is_file()
    bad = subprocess.run([*env_cmd, str(ROOT / "examples" / "tiny-grpo.yaml"),
                          "--set", "stepz=3"], capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2
    assert "unknown key 'stepz'" in bad.stderr
    owned = subprocess.run([*env_cmd, str(ROOT / "examples" / "tiny-grpo.yaml"),
                            "--set", f"output_dir={tmp_path / 'owned'}",
                            "--policy-opt", "temperature=0.5"],
                           capture_output=True, text=True, timeout=120, check=False)
    assert owned.returncode == 2
    assert "--policy-opt temperature=... is set by the training config" in owned.stderr
    assert "--set temperature=0.5" in owned.stderr
    assert "Traceback" not in owned.stderr
    assert "Traceback" not in bad.stderr


# -- SFT, warm start, resume (issue 16) ------------------------------------------------------------

@pytest.fixture(scope="module")
def sft_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> TrainResult:
    """Black-box SFT: scripted-oracle demonstrations through the emulated OpenClaw shell."""
    out = tmp_path_factory.mktemp("sft") / "run"
    cfg = tiny_config(tiny_model_dir, out, algorithm="sft", design="adapter:openclaw@2026.2.26",
                      limits={"max_turns": 30, "max_context_tokens": 16000},
                      learning_rate=1e-3,
                      sft={"episodes": 6, "batch_size": 4}, trl={"logging_steps": 1})
    seen: list[int] = []
    result = train(cfg, on_log=lambda step, logs: seen.append(step))
    result.reports.append({"on_log_steps": seen})
    return result


def test_sft_from_oracle_demonstrations_changes_the_weights(sft_run: TrainResult,
                                                           tiny_model_dir: Path) -> None:
    assert sft_run.steps == 2
    assert changed(weights(tiny_model_dir), weights(sft_run.final_model))
    demos = sft_run.output_dir / "demonstrations"
    trajectories = [Trajectory.model_validate_json(line)
                    for line in (demos / "trajectories.jsonl").read_text().splitlines()]
    assert len(trajectories) == 6
    assert {t.harness for t in trajectories} == {"adapter:openclaw@2026.2.26"}
    assert all(t.passed for t in trajectories)  # the oracle solves every task
    # every logged step reached the caller's on_log and the result, with its loss
    losses = [r for r in sft_run.reports if "loss" in r]
    assert [r["step"] for r in losses] == [1, 2]
    assert all(r["loss"] > 0 for r in losses)
    assert sft_run.reports[-1]["on_log_steps"][:2] == [1, 2]


def test_sft_rows_train_on_assistant_tokens_only(sft_run: TrainResult,
                                                 tiny_model_dir: Path) -> None:
    import datasets
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    dataset = datasets.load_from_disk(str(sft_run.output_dir / "demonstrations" / "dataset"))
    assert len(dataset) >= 6
    for row in dataset:
        ids, mask = row["input_ids"], row["assistant_masks"]
        assert len(ids) == len(mask)
        spans, current = [], []
        for token, m in zip(ids, mask, strict=True):
            if m:
                current.append(token)
            elif current:
                spans.append(current)
                current = []
        if current:
            spans.append(current)
        assistant = [tokenizer.decode(s) for s in spans]
        assert assistant
        assert all(a.endswith("<|im_end|>") for a in assistant)
        assert sum("<tool_call>" in a for a in assistant) >= len(assistant) - 1  # acts, finishes
        assert not any("<tool_response>" in a or "<|im_start|>" in a for a in assistant)
        harness_text = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if not m])
        messages = json.loads(row["messages"])
        # observations carry no loss: every row that holds one shows it on the harness's side
        # (a segment may end before any observation: one that starts at a context summary, or
        # a first turn whose next observation would not fit the context budget)
        observations = sum(m["role"] == "tool" for m in messages)
        assert harness_text.count("<tool_response>") == observations
        assert observations or "</summary>" in harness_text or len(assistant) == 1
        calls = [c["function"]["name"] for m in messages if m["role"] == "assistant"
                 for c in m.get("tool_calls", [])]
        assert set(calls) <= {"read", "write", "edit", "exec", "process"}  # OpenClaw's tools


def test_warm_start_from_an_sft_checkpoint(sft_run: TrainResult, tiny_model_dir: Path,
                                           tmp_path: Path) -> None:
    """GRPO with ``init_from`` trains the SFT model, not the base one (a learning rate too
    small to move the weights visibly shows where they came from)."""
    cfg = tiny_config(tiny_model_dir, tmp_path / "warm", init_from=str(sft_run.final_model),
                      steps=1, learning_rate=1e-12)
    result = train(cfg, reward_funcs=[parity_reward])
    start, end = weights(sft_run.final_model), weights(result.final_model)
    assert all(torch.allclose(start[k], end[k], atol=1e-6) for k in start)
    assert changed(weights(tiny_model_dir), end)
    with pytest.raises(ConfigError, match="no such directory"):
        train(tiny_config(tiny_model_dir, tmp_path / "x", init_from=str(tmp_path / "nope")))


@pytest.mark.slow
def test_kill_and_resume_redoes_the_same_batch(tiny_model_dir: Path, tmp_path: Path) -> None:
    """kill -9 during a run, then ``--resume``: the steps after the last complete checkpoint are
    redone with the same pairs, episode ids (hence sampling seeds) and token ids as an
    uninterrupted run, each step is logged once, and the logprobs and final weights are the
    same to float32 rounding (``LOGPROB_TOLERANCE``): here they repeat bit for bit, but CI
    once saw one record's logprobs differ in the last digit after a resume, which 19 kill and
    resume runs here (idle, under load, 1 and 2 threads, killed at each checkpoint) never
    showed; a failure says which record and by how much (:func:`record_differences`)."""
    import os
    import signal
    import time

    import yaml

    def config_file(out: Path) -> Path:
        data = tiny_config(tiny_model_dir, out, steps=4,
                           limits={"max_turns": 2, "max_context_tokens": 4096},
                           trl={"save_steps": 1}).model_dump(mode="json")
        path = out.parent / f"{out.name}.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    cmd = [sys.executable, "-m", "harnessgrid", "train", "--quiet"]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    done = subprocess.run([*cmd, str(config_file(whole))], capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]

    proc = subprocess.Popen([*cmd, str(config_file(killed))], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    marker = killed / "checkpoint-1" / "harnessgrid_state.json"
    deadline = time.monotonic() + 300
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert marker.exists()
    resumed = subprocess.run([*cmd, "--resume", str(config_file(killed))], capture_output=True,
                             text=True, timeout=600, check=False)
    assert resumed.returncode == 0, resumed.stderr[-2000:]

    assert [r["step"] for r in steps_log(killed)] == [0, 1, 2, 3]  # nothing counted twice
    compared = 0
    for step in range(4):
        a, b = saved_trajectories(whole, step), saved_trajectories(killed, step)
        assert [t.episode_id for t in a] == [t.episode_id for t in b]
        assert [(t.task_id, t.harness) for t in a] == [(t.task_id, t.harness) for t in b]
        # ids and logprobs: the same lockstep batches, the same rounding
        assert record_differences(step, a, b) == []
        compared += sum(len(t.turns) for t in a)
    assert compared
    end_a, end_b = weights(whole / "final"), weights(killed / "final")
    assert [k for k in end_a
            if not torch.allclose(end_a[k], end_b[k], rtol=1e-5, atol=1e-7)] == []


#: How far two repeats' logprobs of the same ids may be apart: float32 rounding (a logprob is
#: a float32 log-softmax; one ulp of a value near -10 is about 1e-6).
LOGPROB_TOLERANCE = 1e-5


def record_differences(step: int, a: list[Trajectory], b: list[Trajectory]) -> list[str]:
    """Where two runs' token records of one step differ (step, episode, turn and what): ids
    exactly, logprobs beyond :data:`LOGPROB_TOLERANCE`. A failure says which record and by
    how much rather than printing two cut reprs."""
    found = []
    for ta, tb in zip(a, b, strict=True):
        assert len(ta.turns) == len(tb.turns), (step, ta.episode_id)
        for turn, (x, y) in enumerate(zip(ta.turns, tb.turns, strict=True)):
            where = f"step {step} {ta.episode_id} turn {turn}"
            if x.tokens is None or y.tokens is None:
                found.append(f"{where}: no token record")
            elif x.tokens.prompt_ids != y.tokens.prompt_ids:
                found.append(f"{where}: prompt ids differ ({len(x.tokens.prompt_ids)} vs "
                             f"{len(y.tokens.prompt_ids)} ids)")
            elif x.tokens.completion_ids != y.tokens.completion_ids:
                found.append(f"{where}: completion ids differ")
            elif x.tokens.segment != y.tokens.segment:
                found.append(f"{where}: segment {x.tokens.segment} vs {y.tokens.segment}")
            else:
                gap = max((abs(p - q) for p, q in zip(x.tokens.logprobs, y.tokens.logprobs,
                                                      strict=True)), default=0.0)
                if gap > LOGPROB_TOLERANCE:
                    found.append(f"{where}: same ids, logprobs differ by up to {gap:.3g}")
    return found


REWARD_MODULE = '''
def parity(trajectories):
    out = []
    for t in trajectories:
        tokens = [turn.tokens for turn in t.turns if turn.tokens is not None]
        out.append(None if t.infra_failure else float(tokens[0].completion_ids[0] % 2))
    return out
'''


@pytest.mark.slow
def test_two_process_grpo_keeps_replicas_identical(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``accelerate launch`` with two CPU processes (gloo): each process rolls out its share of
    the step's episodes, group statistics are computed over both shares, and both processes
    hold identical, changed weights afterwards. (``accelerate launch --cpu`` starts a single
    process; two CPU processes are launched with ``--multi_gpu --num_processes 2``, which
    accelerate runs through torch.distributed on gloo when no GPU is present.)"""
    import os

    import yaml

    (tmp_path / "parity_reward.py").write_text(REWARD_MODULE)
    out = tmp_path / "ddp"
    data = tiny_config(tiny_model_dir, out, reward_funcs=["parity_reward:parity"],
                       rollouts_per_task=4).model_dump(mode="json")
    (tmp_path / "ddp.yaml").write_text(yaml.safe_dump(data))
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    launched = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes",
         "2", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
         "-m", "harnessgrid", "train", "--quiet", str(tmp_path / "ddp.yaml")],
        capture_output=True, text=True, timeout=600, env=env, check=False)
    assert launched.returncode == 0, launched.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2
    assert summary["steps"] == 2
    assert len(set(summary["weight_checksums"])) == 1  # replicas in sync
    assert changed(weights(tiny_model_dir), weights(out / "final"))
    for step, report in enumerate(steps_log(out)):
        shares = [[Trajectory.model_validate_json(line) for line in
                   (out / "trajectories" / f"step-{step:06d}.rank{r}.jsonl").read_text()
                   .splitlines()] for r in (0, 1)]
        ids = [t.episode_id for share in shares for t in share]
        assert len(shares[0]) == len(shares[1]) == 4
        assert len(set(ids)) == 8
        # the main process's report covers both shares: every group has all its rollouts
        assert report["episodes"] == 8
        assert all(len(p["rewards"]) == 4 for p in report["pairs"])


# -- what a training run says and writes (issue 28, item 8) -----------------------------------------


def test_sft_writes_its_step_log_and_summary(sft_run: TrainResult) -> None:
    """Found: SFT ended with "step log in OUT/steps.jsonl" but wrote neither it nor
    summary.json."""
    lines = steps_log(sft_run.output_dir)
    assert [r["step"] for r in lines] == [0, 1]  # counted from 0, as GRPO's lines
    for r in lines:
        assert r["loss"] > 0
        assert r["learning_rate"] > 0
        assert r["tokens"] > 0
    summary = json.loads((sft_run.output_dir / "summary.json").read_text())
    assert summary["steps"] == 2
    assert summary["world_size"] == 1


def test_sft_writes_no_model_card_naming_none(sft_run: TrainResult) -> None:
    """Found: TRL's card in OUT/README.md said "a fine-tuned version of
    [None](https://huggingface.co/None)" for a local model."""
    for card in sft_run.output_dir.rglob("README.md"):
        assert "huggingface.co/None" not in card.read_text(), card


def test_demonstrations_fit_the_students_context(sft_run: TrainResult,
                                                 tiny_model_dir: Path) -> None:
    """Found: tiny-sft's teacher episodes ran to the config's context_budget (16384) through a
    student with 4096 positions, so the tokenizer warned "Token indices sequence length is
    longer than the specified maximum sequence length (4724 > 4096)" and such rows were
    trained on. The teacher's views are now kept within the student's length less
    max_new_tokens, as the hf: policy keeps its own."""
    import datasets
    from transformers import AutoConfig

    limit = AutoConfig.from_pretrained(str(tiny_model_dir)).max_position_embeddings
    dataset = datasets.load_from_disk(str(sft_run.output_dir / "demonstrations" / "dataset"))
    assert max(len(ids) for ids in dataset["input_ids"]) <= limit


def test_the_teacher_keeps_to_the_students_length(tiny_model_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from harnessgrid.trainer.sft import long_rows_warning, teacher_policy

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    cfg = tiny_config(tiny_model_dir, tmp_path, algorithm="sft", design="adapter:openclaw@2026.2.26",
                      limits={"max_turns": 3, "max_context_tokens": 16000},
                      max_new_tokens=100)
    teacher = teacher_policy(cfg, tokenizer, 4096)
    assert getattr(teacher, "context_limit", None) == 3996
    with pytest.raises(ConfigError, match="leaves no room"):
        teacher_policy(cfg, tokenizer, 100)
    assert long_rows_warning([], 4096, None) is None
    assert long_rows_warning([], None, None) is None


def test_resume_does_not_warn_about_tied_weights(tiny_model_dir: Path) -> None:
    """Found: ``--resume`` warned "missing keys in the checkpoint model loaded:
    ['lm_head.weight']": a checkpoint stores the tied embedding once. The trainer's warning
    method is called here with what loading such a checkpoint returns (a stand-in parent
    records what transformers would be asked to print)."""
    from types import SimpleNamespace

    from transformers import AutoModelForCausalLM

    from harnessgrid.trainer.checkpoints import CompleteCheckpoints

    class Recorder:
        def _issue_warnings_after_load(self, load_result: Any) -> None:
            self.seen = load_result

    class Trainer(CompleteCheckpoints, Recorder):
        pass

    trainer = Trainer()
    trainer.model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    assert trainer.model.lm_head.weight is trainer.model.model.embed_tokens.weight
    trainer._issue_warnings_after_load(SimpleNamespace(missing_keys=["lm_head.weight"],
                                                       unexpected_keys=[]))
    assert trainer.seen.missing_keys == []
    # A tied pair missing together, or an untied weight, is still reported.
    both = ["model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"]
    trainer._issue_warnings_after_load(SimpleNamespace(missing_keys=both,
                                                       unexpected_keys=["extra"]))
    assert trainer.seen.missing_keys == both
    assert trainer.seen.unexpected_keys == ["extra"]


def test_resuming_sft_loads_the_checkpoint_without_the_tied_weight_warning(
        sft_run: TrainResult, tmp_path: Path) -> None:
    import logging
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(sft_run.output_dir, out)
    cfg = load_config_like(sft_run.output_dir / "config.yaml", output_dir=str(out))
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("transformers.trainer")
    logger.addHandler(handler)
    try:
        result = train(cfg, resume=True)
    finally:
        logger.removeHandler(handler)
    assert result.resumed_from is not None
    assert not [r for r in records if "missing keys" in r], records


def load_config_like(path: Path, **overrides: Any) -> ExperimentConfig:
    import yaml

    return config_from_mapping({**yaml.safe_load(path.read_text()), **overrides})


def test_interrupting_train_says_how_to_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Found: Ctrl-C of ``train`` exited 130 without a word about ``--resume``. Ctrl-C is
    stood in for by a train() that raises KeyboardInterrupt (the signal itself is sent in
    the slow test below)."""
    import harnessgrid.trainer.run as run_module
    from harnessgrid.cli import main
    from harnessgrid.trainer.checkpoints import STATE_FILE

    out = tmp_path / "run"
    (out / "checkpoint-3").mkdir(parents=True)
    (out / "checkpoint-3" / STATE_FILE).write_text("{}")
    (out / "checkpoint-5").mkdir()  # incomplete: not the one to resume from
    config = tmp_path / "train.yaml"
    config.write_text(f"model: tiny:tiny\noutput_dir: {out}\n")

    def interrupted(*args: Any, **kwargs: Any) -> TrainResult:
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "train", interrupted)
    monkeypatch.setattr(sys, "argv", ["harnessgrid", "train", str(config), "--quiet"])
    with pytest.raises(SystemExit) as caught:
        main()
    assert caught.value.code == 130
    err = capsys.readouterr().err
    assert f"{out / 'checkpoint-3'} is the newest complete checkpoint" in err
    assert "--resume" in err
    assert "before the first complete checkpoint" in run_module.interrupted_message(tmp_path)


@pytest.mark.slow
def test_ctrl_c_during_sft_exits_130_with_the_resume_hint(tiny_model_dir: Path,
                                                           tmp_path: Path) -> None:
    import os
    import signal
    import time

    import yaml

    from harnessgrid.trainer.checkpoints import STATE_FILE

    out = tmp_path / "run"
    data = tiny_config(tiny_model_dir, out, algorithm="sft", design="adapter:openclaw@2026.2.26",
                       steps=50, sft={"episodes": 4, "batch_size": 2},
                       trl={"save_steps": 1}).model_dump(mode="json")
    (tmp_path / "sft.yaml").write_text(yaml.safe_dump(data))
    proc = subprocess.Popen(
        [sys.executable, "-m", "harnessgrid", "train", "--quiet", str(tmp_path / "sft.yaml")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        # a shell's background job ignores SIGINT, and children inherit that
        preexec_fn=sigint_default)
    deadline = time.monotonic() + 300
    while (not list(out.glob(f"checkpoint-*/{STATE_FILE}"))
           and proc.poll() is None and time.monotonic() < deadline):
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-2000:]
    assert "is the newest complete checkpoint" in err, err[-2000:]
    assert "--resume" in err, err[-2000:]
    assert "Traceback" not in err
