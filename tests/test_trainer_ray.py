"""The trainer's ``rollout_backend: ray`` on a real local Ray cluster (a head and one worker
node on 127.0.0.1, the fixtures of tests/test_evaluation_ray.py): a GRPO step whose episodes
run as Ray tasks samples exactly what the same step samples locally."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_evaluation_ray import cluster, worker  # noqa: F401 - fixtures
from test_trainer import parity_reward, saved_trajectories, steps_log, tiny_config

from harnessgrid.trainer.run import train


@pytest.mark.slow
def test_ray_rollouts_sample_what_local_rollouts_sample(
        cluster: tuple[Any, dict[str, str]], worker: Any, tiny_model_dir: Path,  # noqa: F811
        tmp_path: Path) -> None:
    head, _ = cluster
    local = train(tiny_config(tiny_model_dir, tmp_path / "local", steps=1,
                              limits={"max_turns": 2, "max_context_tokens": 4096}),
                  reward_funcs=[parity_reward])
    remote = train(tiny_config(tiny_model_dir, tmp_path / "ray", steps=1,
                               limits={"max_turns": 2, "max_context_tokens": 4096},
                               rollout_backend="ray", ray_address=head.address),
                   reward_funcs=[parity_reward])
    a = saved_trajectories(local.output_dir, 0)
    b = saved_trajectories(remote.output_dir, 0)
    assert [t.episode_id for t in a] == [t.episode_id for t in b]
    for x, y in zip(a, b, strict=True):
        assert [(t.tokens.prompt_ids, t.tokens.completion_ids) for t in x.turns if t.tokens] \
            == [(t.tokens.prompt_ids, t.tokens.completion_ids) for t in y.turns if t.tokens]
    assert steps_log(local.output_dir)[0]["pairs"] == steps_log(remote.output_dir)[0]["pairs"]
    assert (remote.output_dir / "rollout-policy" / "step-000000" / "config.json").is_file()
