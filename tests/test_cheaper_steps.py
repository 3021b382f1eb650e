"""Cheaper training steps (issue 26), counted in work, not timed:

- the LM head sees only the labelled positions on CPU inside our trainers, with the same
  log-probabilities and gradients, and TRL's own behaviour outside them (a spy on the fused
  head's autograd function records how many hidden-state rows it was given);
- ``sft.micro_batches`` sorts each step's rows into length-sorted forward passes: the same
  loss and gradient per step, fewer padded positions (a spy on the model's forward)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")


@pytest.fixture
def head_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows of hidden states handed to TRL's fused LM head, one entry per call."""
    import trl.trainer.utils as trl_utils

    seen: list[int] = []
    real = trl_utils._ChunkedLogProbFunction

    class Spy:
        @staticmethod
        def apply(hidden: Any, *args: Any) -> Any:
            seen.append(int(hidden.shape[0]))
            return real.apply(hidden, *args)

    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", Spy)
    return seen


def _fused_model(tiny_model_dir: Path) -> Any:
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))
    return model


def _batch() -> tuple[Any, Any, Any]:
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(10, 200, (3, 40), generator=gen)
    attention = torch.ones_like(ids)
    attention[1, 30:] = 0  # a padded row
    labels = torch.full_like(ids, -100)
    labels[0, 20:26] = ids[0, 20:26]
    labels[1, 5:9] = ids[1, 5:9]
    labels[2, 35:] = ids[2, 35:]
    return ids, attention, labels


def test_inside_the_block_the_head_gets_only_labelled_positions_with_equal_logprobs(
        tiny_model_dir: Path, head_rows: list[int]) -> None:
    from harnessgrid.trainer.labelled_head import labelled_positions_only

    model = _fused_model(tiny_model_dir)
    ids, attention, labels = _batch()
    labelled = int((labels[:, 1:] != -100).sum())
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=attention, labels=labels, fused_lm_head=True)
        with labelled_positions_only():
            compact = model(input_ids=ids, attention_mask=attention, labels=labels,
                            fused_lm_head=True)
    assert head_rows == [3 * 39, labelled]  # TRL's CPU default, then only the labelled ones
    assert labelled == 15
    assert torch.equal(full.label_mask, compact.label_mask)
    assert torch.allclose(full.log_probs, compact.log_probs, atol=1e-5)
    assert torch.allclose(full.entropy, compact.entropy, atol=1e-5)
    assert torch.equal(full.is_top1, compact.is_top1)
    assert full.loss.item() == pytest.approx(compact.loss.item(), abs=1e-5)


def test_gradients_through_the_compact_head_equal_the_full_ones(tiny_model_dir: Path) -> None:
    from harnessgrid.trainer.labelled_head import labelled_positions_only

    model = _fused_model(tiny_model_dir)
    ids, attention, labels = _batch()
    grads = []
    for compact in (False, True):
        model.zero_grad()
        if compact:
            with labelled_positions_only():
                out = model(input_ids=ids, attention_mask=attention, labels=labels,
                            fused_lm_head=True)
        else:
            out = model(input_ids=ids, attention_mask=attention, labels=labels,
                        fused_lm_head=True)
        out.loss.backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()
                                if p.grad is not None]))
    assert torch.allclose(grads[0], grads[1], atol=1e-6, rtol=1e-4)
    assert grads[0].abs().sum() > 0


def test_the_sft_trainer_steps_through_the_compact_head(tiny_model_dir: Path, tmp_path: Path,
                                                        head_rows: list[int]) -> None:
    """HarnessSFTTrainer's loss (TRL's SFT loss) projects only the assistant tokens."""
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig

    from harnessgrid.trainer.sft import HarnessSFTTrainer

    rows = datasets.Dataset.from_list([
        {"input_ids": list(range(20, 60)), "assistant_masks": [0] * 30 + [1] * 10},
        {"input_ids": list(range(20, 45)), "assistant_masks": [0] * 20 + [1] * 5}])
    args = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2,
                     use_cpu=True, report_to=[], save_strategy="no", disable_tqdm=True,
                     train_sampling_strategy="sequential")
    trainer = HarnessSFTTrainer(model=AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                                args=args, train_dataset=rows,
                                processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
                                fingerprint="test")
    trainer.train()
    # one step, one batch: the head saw the assistant tokens (less none: each mask starts
    # after the first token), not the 2 x 39 positions of the padded batch
    assert head_rows == [15]


def _sft_trainer(tiny_model_dir: Path, out: Path, micro_batches: int, rows: Any) -> Any:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harnessgrid.trainer.config import config_from_mapping
    from harnessgrid.trainer.sft import HarnessSFTTrainer, sft_args

    config = config_from_mapping({
        "model": str(tiny_model_dir), "algorithm": "sft", "steps": 1, "learning_rate": 1e-3,
        "output_dir": str(out), "sft": {"batch_size": 8, "micro_batches": micro_batches},
        "trl": {"save_strategy": "no"}})
    return HarnessSFTTrainer(model=AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                             args=sft_args(config, "cpu"), train_dataset=rows,
                             processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
                             fingerprint="test")


def test_micro_batches_give_the_same_step_with_fewer_padded_positions(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    """Eight rows of very different lengths, one step: four length-sorted passes compute the
    loss and gradient of one pass over all eight, on fewer (padded) positions."""
    import datasets

    lengths = [12, 90, 14, 85, 16, 80, 18, 75]
    rows = datasets.Dataset.from_list([
        {"input_ids": [20 + (i * 7 + j) % 150 for j in range(n)],
         "assistant_masks": [0] * (n // 2) + [1] * (n - n // 2)}
        for i, n in enumerate(lengths)])
    seen: dict[int, list[tuple[int, int]]] = {}
    logs: dict[int, dict[str, float]] = {}
    for micro in (1, 4):
        trainer = _sft_trainer(tiny_model_dir, tmp_path / str(micro), micro, rows)
        shapes = seen.setdefault(micro, [])
        forward = trainer.model.forward

        def spy(*args: Any, _forward: Any = forward, _shapes: Any = shapes,
                **kwargs: Any) -> Any:
            _shapes.append(tuple(kwargs["input_ids"].shape))
            return _forward(*args, **kwargs)

        trainer.model.forward = spy
        trainer.train()
        logs[micro] = next(h for h in trainer.state.log_history if "loss" in h)
    assert sum(b for b, _ in seen[1]) == sum(b for b, _ in seen[4]) == 8  # every row, once
    assert len(seen[1]) == 1
    assert len(seen[4]) > 1
    padded = {m: sum(b * n for b, n in shapes) for m, shapes in seen.items()}
    assert padded[1] == 8 * 90
    assert padded[4] < padded[1] * 0.75
    assert logs[4]["loss"] == pytest.approx(logs[1]["loss"], rel=1e-4)
    assert logs[4]["grad_norm"] == pytest.approx(logs[1]["grad_norm"], rel=1e-4)


def test_micro_batches_must_divide_the_batch_and_keep_their_sampler(tmp_path: Path) -> None:
    from harnessgrid.errors import ConfigError
    from harnessgrid.trainer.config import config_from_mapping
    from harnessgrid.trainer.sft import sft_args

    with pytest.raises(ConfigError, match=r"sft.micro_batches=3 does not divide "
                                          r"sft.batch_size=8"):
        config_from_mapping({"model": "tiny", "algorithm": "sft",
                             "sft": {"batch_size": 8, "micro_batches": 3}})
    config = config_from_mapping({"model": "tiny", "algorithm": "sft", "output_dir": str(tmp_path),
                                  "sft": {"batch_size": 8, "micro_batches": 2},
                                  "trl": {"train_sampling_strategy": "random"}})
    with pytest.raises(ConfigError, match="train_sampling_strategy is 'random'"):
        sft_args(config, "cpu")
