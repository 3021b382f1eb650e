"""The offline tiny model: loads like a real checkpoint, renders tools, is append-only, deterministic."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessgrid.policies.tiny_model import (
    SPECIAL_TOKENS,
    TOOL_TOKENS,
    ToolCallParseError,
    build_tiny_model,
    parse_chatml_tool_calls,
)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


@pytest.fixture(scope="session")
def tokenizer(tiny_model_dir: Path) -> Any:
    return transformers.AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def model(tiny_model_dir: Path) -> Any:
    return transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()


def render(tokenizer: Any, messages: list[dict[str, Any]], **kwargs: Any) -> str:
    text = tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)
    assert isinstance(text, str)
    return text


# --- checkpoint layout and loading -----------------------------------------------------------


def test_checkpoint_loads_through_auto_classes(
    tiny_model_dir: Path, tokenizer: Any, model: Any
) -> None:
    for name in ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json"):
        assert (tiny_model_dir / name).is_file(), name
    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert model.config.vocab_size == len(tokenizer)
    assert 2000 <= len(tokenizer) <= 4096
    im_end, eot = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token == "<|endoftext|>"
    assert model.generation_config.eos_token_id == [im_end, eot]
    assert model.generation_config.pad_token_id == eot
    for token in SPECIAL_TOKENS + TOOL_TOKENS:  # each markup token is a single id
        assert len(tokenizer(token, add_special_tokens=False)["input_ids"]) == 1, token


def test_tool_tokens_survive_skip_special_tokens(tokenizer: Any) -> None:
    text = (
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt"}}\n</tool_call><|im_end|>'
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    decoded = tokenizer.decode(ids, skip_special_tokens=True)
    assert decoded == text.removesuffix("<|im_end|>")
    assert tokenizer.decode(ids) == text


def test_generate_a_few_tokens(tokenizer: Any, model: Any) -> None:
    prompt = render(tokenizer, [{"role": "user", "content": "hi"}], add_generation_prompt=True)
    input_ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    torch.manual_seed(0)
    out = model.generate(input_ids, max_new_tokens=5, min_new_tokens=5, do_sample=True)
    assert out.shape == (1, input_ids.shape[1] + 5)
    assert torch.equal(out[0, : input_ids.shape[1]], input_ids[0])
    assert isinstance(tokenizer.decode(out[0, input_ids.shape[1] :]), str)


def test_build_is_reused_and_rejects_unknown_size(tiny_model_dir: Path) -> None:
    before = (tiny_model_dir / "model.safetensors").stat().st_mtime_ns
    assert build_tiny_model(tiny_model_dir) == tiny_model_dir
    assert (tiny_model_dir / "model.safetensors").stat().st_mtime_ns == before
    with pytest.raises(ValueError, match="unknown tiny model size"):
        build_tiny_model(tiny_model_dir, size="huge")


def test_import_is_light() -> None:
    code = ("import sys, harnessgrid.policies.tiny_model; "
            "print(sorted({'torch', 'transformers', 'tokenizers'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- chat template ----------------------------------------------------------------------------


def test_chat_template_format(tokenizer: Any) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Read a.txt"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
        {
            "role": "assistant",
            "content": "Done.",
            "tool_calls": [{"name": "finish", "arguments": {}}],
        },
    ]
    expected = (
        "<|im_start|>system\nBe brief.\n\n# Tools\n\n"
        "You may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        + json.dumps(TOOLS[0])
        + "\n</tools>\n\nFor each function call, return a json object with function name and "
        "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\nRead a.txt<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt"}}\n'
        "</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nhello\n</tool_response><|im_end|>\n"
        '<|im_start|>assistant\nDone.\n<tool_call>\n{"name": "finish", "arguments": {}}\n'
        "</tool_call><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert render(tokenizer, messages, tools=TOOLS, add_generation_prompt=True) == expected


def test_chat_template_without_tools_or_system(tokenizer: Any) -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": "c"},
    ]
    assert render(tokenizer, messages) == (
        "<|im_start|>user\nab<|im_end|>\n<|im_start|>assistant\nc<|im_end|>\n"
    )
    with_tools = render(tokenizer, messages, tools=TOOLS)
    assert with_tools.startswith("<|im_start|>system\n# Tools\n\n")  # no default system text


def test_unknown_role_is_an_error(tokenizer: Any) -> None:
    with pytest.raises(Exception, match="Unknown message role"):
        render(tokenizer, [{"role": "robot", "content": "x"}])


def test_assistant_tokens_mask_covers_model_output(tokenizer: Any) -> None:
    messages = [
        {"role": "user", "content": "Read a.txt"},
        {
            "role": "assistant",
            "content": "ok",
            "tool_calls": [{"name": "read_file", "arguments": {"path": "a"}}],
        },
        {"role": "tool", "content": "data"},
        {"role": "assistant", "content": "Done."},
    ]
    out = tokenizer.apply_chat_template(
        messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    ids, mask = out["input_ids"], out["assistant_masks"]
    masked = tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if m])
    assert masked == (
        'ok\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n</tool_call><|im_end|>'
        "Done.<|im_end|>"
    )


_text = st.lists(
    st.sampled_from(
        [*"ab <>{}\"'\n\\/:é中", "<|im_end|>", "<tool_call>", "</tool_response>"]
    ),
    max_size=12,
).map("".join)
_arguments = st.one_of(
    st.dictionaries(
        st.sampled_from(["path", "command", "n"]), st.one_of(_text, st.integers()), max_size=2
    ),
    st.just('{"path": "x"}'),
)
_tool_call = st.builds(
    lambda name, args, openai: (
        {"id": "c", "type": "function", "function": {"name": name, "arguments": args}}
        if openai
        else {"name": name, "arguments": args}
    ),
    st.sampled_from(["read_file", "run_shell"]),
    _arguments,
    st.booleans(),
)
_message = st.one_of(
    st.builds(lambda c: {"role": "user", "content": c}, _text),
    st.builds(lambda c: {"role": "tool", "content": c}, _text),
    st.builds(lambda c: {"role": "system", "content": c}, _text),
    st.builds(
        lambda c, calls: {"role": "assistant", "content": c, "tool_calls": calls},
        st.one_of(st.none(), _text),
        st.lists(_tool_call, max_size=2),
    ),
)
_conversation = st.builds(
    lambda system, rest: (
        ([{"role": "system", "content": system}] if system is not None else []) + rest
    ),
    st.one_of(st.none(), _text),
    st.lists(_message, min_size=1, max_size=7),
)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(messages=_conversation, with_tools=st.booleans())
def test_chat_template_is_append_only(
    tokenizer: Any, messages: list[dict[str, Any]], with_tools: bool
) -> None:
    tools = TOOLS if with_tools else None
    rendered = [render(tokenizer, messages[:n], tools=tools) for n in range(1, len(messages) + 1)]
    for shorter, longer in itertools.pairwise(rendered):
        assert longer.startswith(shorter)
    for n in range(1, len(messages)):
        if messages[n]["role"] == "assistant":
            prompt = render(tokenizer, messages[:n], tools=tools, add_generation_prompt=True)
            assert rendered[n].startswith(prompt)  # rendered[n] renders messages[:n+1]


# --- tool-call parser -------------------------------------------------------------------------


def test_parse_tool_calls_round_trips_the_template(tokenizer: Any) -> None:
    calls = [
        {"name": "read_file", "arguments": {"path": "a.txt"}},
        {"name": "run_shell", "arguments": {"command": "echo '<x>'\n", "timeout": 5}},
    ]
    text = render(
        tokenizer,
        [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "Let me look.", "tool_calls": calls},
        ],
    )
    turn = text.split("<|im_start|>assistant\n", 1)[1]
    assert parse_chatml_tool_calls(turn) == calls
    assert parse_chatml_tool_calls("no calls here") == []


def test_parse_tool_calls_decodes_string_arguments() -> None:
    text = '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call><tool_call>{"name": "g"}</tool_call>'
    assert parse_chatml_tool_calls(text) == [
        {"name": "f", "arguments": {"a": 1}},
        {"name": "g", "arguments": {}},
    ]


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>\n{not json}\n</tool_call>",
        "<tool_call>[1, 2]</tool_call>",
        '<tool_call>{"arguments": {}}</tool_call>',
        '<tool_call>{"name": "f", "arguments": [1]}</tool_call>',
        '<tool_call>{"name": "f", "arguments": "{bad"}</tool_call>',
        '<tool_call>\n{"name": "f", "arguments": {"a": 1',
    ],
)
def test_parse_tool_calls_rejects_malformed_blocks(text: str) -> None:
    with pytest.raises(ToolCallParseError):
        parse_chatml_tool_calls(text)


# --- determinism ------------------------------------------------------------------------------


def test_same_seed_gives_byte_identical_checkpoint(tiny_model_dir: Path, tmp_path: Path) -> None:
    again = build_tiny_model(tmp_path / "again", seed=0)
    other = build_tiny_model(tmp_path / "other", seed=1)
    for name in ("model.safetensors", "tokenizer.json", "config.json", "chat_template.jinja"):
        assert (again / name).read_bytes() == (tiny_model_dir / name).read_bytes(), name
    assert (other / "model.safetensors").read_bytes() != (again / "model.safetensors").read_bytes()
    assert (other / "tokenizer.json").read_bytes() == (again / "tokenizer.json").read_bytes()


def test_small_size(tmp_path: Path) -> None:
    config = transformers.AutoConfig.from_pretrained(build_tiny_model(tmp_path, size="small"))
    assert (config.hidden_size, config.num_hidden_layers, config.model_type) == (256, 4, "qwen3")


def test_building_does_not_touch_global_rng(tmp_path: Path) -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_tiny_model(tmp_path / "m", seed=5)
    assert torch.equal(torch.rand(3), expected)


def test_sampled_logprobs_match_a_fresh_forward_pass(tokenizer: Any, model: Any) -> None:
    """What the ``hf:`` policy relies on: logprobs recorded while sampling equal a recompute."""
    prompts = [
        render(tokenizer, [{"role": "user", "content": "hello"}], add_generation_prompt=True),
        render(
            tokenizer,
            [{"role": "user", "content": "run the tests please"}],
            tools=TOOLS,
            add_generation_prompt=True,
        ),
    ]
    # Like Qwen, the tokenizer pads right by default; generation code must ask for left padding.
    tokenizer.padding_side = "left"
    batch = tokenizer(prompts, return_tensors="pt", padding=True)
    tokenizer.padding_side = "right"
    torch.manual_seed(0)
    out = model.generate(
        **batch,
        max_new_tokens=8,
        min_new_tokens=8,
        do_sample=True,
        return_dict_in_generate=True,
        output_logits=True,
        output_scores=True,
    )
    prompt_len = batch["input_ids"].shape[1]
    completion = out.sequences[:, prompt_len:]
    logits = torch.stack(out.logits, dim=1)
    # generation_config samples from the raw distribution (temperature 1, no top-k/top-p), so
    # the processed scores equal the logits: recorded logprobs are the policy's own.
    # (min_new_tokens masks the eos ids, hence they are left out here.)
    other = torch.ones(logits.shape[-1], dtype=torch.bool)
    other[model.generation_config.eos_token_id] = False
    torch.testing.assert_close(torch.stack(out.scores, dim=1)[..., other], logits[..., other])
    sampled = torch.log_softmax(logits.float(), dim=-1).gather(-1, completion[..., None])[..., 0]

    for row in range(len(prompts)):  # recompute each row alone, unpadded
        keep = batch["attention_mask"][row].bool()
        ids = torch.cat([batch["input_ids"][row][keep], completion[row]])[None]
        with torch.no_grad():
            fresh = torch.log_softmax(model(input_ids=ids).logits.float(), dim=-1)
        n_prompt = int(keep.sum())
        recomputed = fresh[0, n_prompt - 1 : -1].gather(-1, completion[row][:, None])[:, 0]
        torch.testing.assert_close(recomputed, sampled[row], atol=1e-4, rtol=1e-4)

    with torch.no_grad():  # and a forward pass is deterministic
        again = model(input_ids=out.sequences, attention_mask=torch.ones_like(out.sequences)).logits
        once = model(input_ids=out.sequences, attention_mask=torch.ones_like(out.sequences)).logits
    assert torch.equal(again, once)
