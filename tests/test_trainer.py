"""The harness-scaled trainer (trainer/; DESIGN §8) on the tiny offline model, CPU, real TRL,
real sandboxed episodes.

A randomly initialised model never solves a task, so the runs that must change the weights use
a custom reward function (a documented extension point) that gives different rewards to
different episodes; everything else is the production path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

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
            "max_turns": 3, "context_budget": 4096, "max_new_tokens": 24,
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
    assert grpo.loss_type == "dapo" and grpo.pairing == "hamming"


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


def test_set_overrides_nested_values(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("model: m\nppo: {gamma: 0.9}\n")
    cfg = load_config(path, ["steps=7", "ppo.lam=0.5", "trl.report_to=[wandb]", "harness=null"])
    assert (cfg.steps, cfg.ppo.gamma, cfg.ppo.lam) == (7, 0.9, 0.5)
    assert cfg.trl == {"report_to": ["wandb"]}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        load_config(path, ["steps"])


def test_examples_are_valid_configs() -> None:
    for name in ("tiny-grpo.yaml", "tiny-ppo.yaml", "qwen3-4b-grpo.yaml"):
        cfg = load_config(ROOT / "examples" / name)
        assert cfg.algorithm in ("grpo", "ppo")
    assert load_config(ROOT / "examples" / "qwen3-4b-grpo.yaml").tasks == 16


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
    adapter = TrainingPlan(tiny_config(Path("m"), tmp_path, design="adapter:openclaw"))
    assert {j.harness for j in adapter.jobs(0)} == {"adapter:openclaw"}


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
        assert report["logp_gap"]["max"] < 1e-4  # recorded logprobs served as old logprobs


def test_checkpoints_are_complete_and_resumable(grpo_run: TrainResult) -> None:
    checkpoint = grpo_run.output_dir / "checkpoint-2"
    state = json.loads((checkpoint / "harnessgrid_state.json").read_text())
    assert state["step"] == 2 and state["complete"]
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
    harnesses = ["S0-T0-O0-C0-W0", "S1-T1-O1-C1-W1", "S2-T2-O2-C2-W2",
                 "adapter:claude-code", "adapter:openclaw", "broken"]
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", steps=1, rollouts_per_task=2,
                      max_turns=6, context_budget=6000, max_new_tokens=48)
    result = train(cfg, reward_funcs=[parity_reward], plan=HandPickedPlan(cfg, harnesses))
    (report,) = result.reports
    assert report["logp_gap"]["max"] < 1e-4
    trajectories = saved_trajectories(result.output_dir, 0)
    assert {t.harness for t in trajectories} >= set(harnesses[:-1])
    # the broken harness's episodes are excluded, not scored 0
    broken = next(p for p in report["pairs"] if p["harness"] == "broken")
    assert broken["rewards"] == [] and broken["infra_failures"] == 2
    assert report["infra_failures"] == 2 and report["episodes"] == 12
    assert report["terminations"]["internal_error"] == 2
    valid = [t for t in trajectories if not t.infra_failure]
    assert report["rows"] == sum(len(t.token_rows()) for t in valid)
    assert report["model_tokens"] == sum(r.model_tokens for t in valid for r in t.token_rows())


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
                         "--set", "rollouts_per_task=2", "--set", "max_turns=2"],
                        capture_output=True, text=True, timeout=300, check=False)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "step 1/1" in ok.stderr and "reward" in ok.stderr
    assert (out / "final" / "model.safetensors").is_file()
    bad = subprocess.run([*env_cmd, str(ROOT / "examples" / "tiny-grpo.yaml"),
                          "--set", "stepz=3"], capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2
    assert "unknown key 'stepz'" in bad.stderr and "Traceback" not in bad.stderr
