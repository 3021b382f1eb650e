"""The trainer's generation backends (trainer/generation.py).

vLLM cannot run on this machine (no GPU, no vllm package), so the vLLM paths are exercised with
FAKE engines that stand in for vLLM / TRL's VLLMClient: they record the requests and answer with
fixed token ids. What is real: the tokenizer, the chat template, the token bookkeeping, the
harness and the sandboxed episode.
"""

from __future__ import annotations

import asyncio
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harnessgrid.engine.api import resolve_harness
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.plugin_system.registry import load_suite
from harnessgrid.trainer.config import config_from_mapping
from harnessgrid.trainer.generation import (
    TRLServerPolicy,
    generation_policy,
    sync_generation_weights,
)

transformers = pytest.importorskip("transformers")


class FakeServerClient:
    """Answers ``VLLMClient.generate`` with a fixed reply (a bash-only finish) for each prompt."""

    def __init__(self, tokenizer: Any) -> None:
        self.reply = tokenizer.encode("```bash\nfinish_task\n```<|im_end|>",
                                      add_special_tokens=False)
        self.calls: list[dict[str, Any]] = []

    def generate(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        n = len(kwargs["prompts"])
        reply = self.reply[: kwargs["max_tokens"]]
        return {"prompt_ids": kwargs["prompts"], "completion_ids": [reply] * n,
                "logprobs": [[[-0.25]] * len(reply)] * n}


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path) -> Any:
    return transformers.AutoTokenizer.from_pretrained(str(tiny_model_dir))


def test_server_policy_sends_exact_prompt_ids_and_records_the_reply(tokenizer: Any) -> None:
    client = FakeServerClient(tokenizer)
    policy = TRLServerPolicy(client, tokenizer, name="m", temperature=0.7, max_new_tokens=64)
    task = load_suite("examples").tasks()[0]

    async def episodes() -> list[Any]:  # bash-only harness: the fixed reply is a finish
        return list(await asyncio.gather(*(
            run_episode(resolve_harness("S0-T2-O0-C0-W0"), task, policy, EpisodeLimits(),
                        episode_id=f"e{i}") for i in range(4))))

    trajectories = asyncio.run(episodes())
    assert all(t.termination == "finished" for t in trajectories)
    sent = [p for call in client.calls for p in call["prompts"]]
    assert len(sent) == 4  # every turn's prompt reached the server (batching: policy tests)
    for call in client.calls:
        assert call["temperature"] == 0.7
        assert call["logprobs"] == 0
        assert call["n"] == 1
        assert call["generation_kwargs"]["stop_token_ids"] == sorted(policy.book.stop_ids)
    for traj in trajectories:
        (turn,) = traj.turns
        assert turn.tokens is not None
        assert list(turn.tokens.prompt_ids) in sent
        assert list(turn.tokens.completion_ids) == client.reply
        assert turn.tokens.logprobs == (-0.25,) * len(client.reply)
        assert turn.finish_reason == "stop"


def test_server_policy_marks_length_cut_turns(tokenizer: Any) -> None:
    client = FakeServerClient(tokenizer)
    policy = TRLServerPolicy(client, tokenizer, name="m", temperature=1.0, max_new_tokens=3)
    task = load_suite("examples").tasks()[0]
    traj = asyncio.run(run_episode(resolve_harness("S0-T2-O0-C0-W0"), task, policy,
                                   EpisodeLimits(max_turns=1), episode_id="cut"))
    assert traj.turns[0].finish_reason == "length"
    assert client.calls[0]["max_tokens"] == 3


class FakeEngine:
    def __init__(self, mode: str, **parts: Any) -> None:
        self.mode = mode
        self.syncs = 0
        self.__dict__.update(parts)

    def sync_weights(self) -> None:
        self.syncs += 1


def fake_trainer(tiny_model_dir: Path, tokenizer: Any, engine: Any, generation: str) -> Any:
    model = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=4096))
    exp = config_from_mapping({"model": str(tiny_model_dir), "generation": generation,
                               "max_new_tokens": 32})
    return SimpleNamespace(experiment=exp, vllm_generation=engine, processing_class=tokenizer,
                           accelerator=SimpleNamespace(unwrap_model=lambda m: m), model=model,
                           policy_options={}, args=SimpleNamespace())


def test_server_mode_wiring_and_one_weight_sync_per_step(tiny_model_dir: Path,
                                                         tokenizer: Any) -> None:
    engine = FakeEngine("server", vllm_client=FakeServerClient(tokenizer))
    trainer = fake_trainer(tiny_model_dir, tokenizer, engine, "vllm")
    policy = generation_policy(trainer)
    assert isinstance(policy, TRLServerPolicy)
    assert policy.client is engine.vllm_client
    assert policy.context_limit == 4096 - 32
    for step in (0, 0, 1, 1, 2):
        sync_generation_weights(trainer, step)
    assert engine.syncs == 3
    hf = fake_trainer(tiny_model_dir, tokenizer, engine, "hf")
    sync_generation_weights(hf, 5)
    assert engine.syncs == 3  # hf generation reads the trained weights directly


def test_colocate_mode_uses_the_vllm_policy_on_trls_engine(tiny_model_dir: Path,
                                                           tokenizer: Any,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    fake_vllm = types.ModuleType("vllm")
    fake_vllm.SamplingParams = lambda **kw: SimpleNamespace(**kw)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm)
    llm = SimpleNamespace(model_config=SimpleNamespace(max_model_len=2048))
    trainer = fake_trainer(tiny_model_dir, tokenizer, FakeEngine("colocate", llm=llm), "vllm")
    policy = generation_policy(trainer)
    from harnessgrid.policies.vllm import VLLMPolicy

    assert isinstance(policy, VLLMPolicy)
    assert policy.llm is llm
    assert policy.context_limit == 2048 - 32
