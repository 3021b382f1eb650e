"""A tiny Qwen3-style chat model built offline, for tests and CPU examples.

Why it exists: the ``hf:`` token policy, the rollout code and the TRL trainer must be exercised
end to end without a network and without gigabytes of weights. :func:`build_tiny_model` writes a
directory that looks exactly like a Hugging Face checkpoint of a real chat model
(``config.json``, ``model.safetensors``, ``generation_config.json``, ``tokenizer.json``,
``tokenizer_config.json``, ``chat_template.jinja``), so it is loaded through the very code path a
real model takes (``AutoModelForCausalLM.from_pretrained`` / ``AutoTokenizer.from_pretrained``).

The tokenizer is a byte-level BPE trained on the spot on a small built-in corpus; the chat
template is ChatML in the Qwen style (``<tools>`` in the system turn, ``<tool_call>`` JSON blocks,
``<tool_response>`` observations), with one deliberate difference: every tool message is its own
turn, so the template is strictly append-only (see :data:`CHAT_TEMPLATE`).

Importing this module is cheap: torch, transformers and tokenizers are imported inside
:func:`build_tiny_model`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "CHAT_TEMPLATE",
    "SIZES",
    "SPECIAL_TOKENS",
    "TOOL_TOKENS",
    "ToolCallParseError",
    "build_tiny_model",
    "parse_chatml_tool_calls",
]

#: Bumped whenever the builder's output changes, so a cached build is not reused by mistake.
BUILDER_VERSION = 1
_BUILD_INFO = "harnessgrid_tiny_model.json"

#: Control tokens: ``skip_special_tokens=True`` drops them when decoding.
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
#: Tool markup: single tokens (as in Qwen) but *not* special, so decoding keeps them and the
#: tool-call parser still sees them after ``skip_special_tokens=True``.
TOOL_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")

VOCAB_SIZE = 3072
#: Context length of a size that does not set ``max_position_embeddings`` itself.
DEFAULT_MAX_POSITIONS = 4096

#: Architecture per size name (``Qwen3Config`` arguments; ``max_position_embeddings`` defaults
#: to :data:`DEFAULT_MAX_POSITIONS`). ``tiny`` builds in about a second and runs GRPO steps on
#: CPU; ``small`` is big enough for a learning signal in CPU examples; ``micro`` (0.60M
#: parameters with the default vocabulary) is the model of the micro harness demo, built by
#: ``harnessgrid.plugins.micro.build_micro_model`` with ``corpus=micro_corpus()`` and the
#: ``words`` pre-tokenizer so that prompts are short in tokens: a micro configuration's first
#: prompt is 119-545 tokens, ``adapter:claude-code@1.0.98``'s about 2,600
#: (``adapter:openclaw@2026.2.26``'s about 1,900), which its 4096 positions hold with room for
#: the turns that follow; today's Claude Code (2.1.332) and Gemini CLI (0.61.0) take about
#: 3,100 and 3,300, and today's OpenClaw (2026.9.6, 54 tool schemas) about 19,000, more than
#: the positions. (Every word is at least one token, so a larger vocabulary would not shorten
#: these prompts.)
SIZES: dict[str, dict[str, Any]] = {
    "tiny": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "intermediate_size": 128,
    },
    "small": {
        "hidden_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 32,
        "intermediate_size": 768,
    },
    "micro": {
        "hidden_size": 96,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 24,
        "intermediate_size": 256,
        "max_position_embeddings": 4096,
    },
}

# Qwen2/Qwen3 pre-tokenizer split: contractions, words with one leading non-letter, single
# digits, punctuation runs, newline runs, whitespace. Same regex as the real tokenizer, so tool
# calls and code split at the same places.
_QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

#: Pre-tokenizers by name. ``qwen`` (default) is Qwen's split: a word takes the character before
#: it, so ``sorrel`` is one token after a space, another after a quote and a third at the start
#: of a line. ``words``: a word takes the space *after* it instead, so a word followed by
#: punctuation (a file name before its extension, a word before a quote) is the same token
#: wherever it stands. A model copying names from the instruction into a tool call then copies
#: a token as itself, which a sub-million-parameter model learns far sooner than a mapping
#: between three spellings of each word. It costs about 8 % more tokens on the micro texts.
PRETOKENIZERS = {
    "qwen": _QWEN_PATTERN,
    "words": r"\p{L}+ ?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}

#: ChatML chat template, Qwen3-Instruct style. Properties the project relies on:
#:
#: * append-only: rendering ``messages[:n]`` (with ``add_generation_prompt=True`` when message
#:   ``n`` is an assistant turn) is a string prefix of rendering ``messages[:n+1]``. Unlike Qwen,
#:   consecutive tool messages are *not* merged into one user turn, because merging rewrites the
#:   end of the previous tool turn when the next one arrives.
#: * assistant output (content, tool calls, ``<|im_end|>``) sits in ``{% generation %}`` so
#:   ``return_assistant_tokens_mask=True`` (TRL SFT ``assistant_only_loss``) works.
#: * tool calls: ``<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>``; ``arguments``
#:   may be a dict or an already-encoded JSON string (OpenAI style); ``tool_calls`` entries may be
#:   OpenAI-shaped (``{"type": "function", "function": {...}}``) or flat.
#: * ``content`` may be a string, ``None`` or a list of ``{"type": "text", "text": ...}`` parts.
CHAT_TEMPLATE = r"""
{%- macro render_content(content) -%}
    {%- if content is string -%}
        {{- content -}}
    {%- elif content is iterable and content is not mapping -%}
        {%- for part in content -%}
            {%- if part is string -%}
                {{- part -}}
            {%- elif part.type == 'text' -%}
                {{- part.text -}}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro -%}
{%- if messages and messages[0].role == 'system' -%}
    {%- set system_message = render_content(messages[0].content) -%}
    {%- set rest = messages[1:] -%}
{%- else -%}
    {%- set system_message = none -%}
    {%- set rest = messages -%}
{%- endif -%}
{%- if tools -%}
    {{- '<|im_start|>system\n' -}}
    {%- if system_message is not none -%}
        {{- system_message + '\n\n' -}}
    {%- endif -%}
    {{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' -}}
    {{- 'You are provided with function signatures within <tools></tools> XML tags:\n<tools>' -}}
    {%- for tool in tools -%}
        {{- '\n' + (tool | tojson) -}}
    {%- endfor -%}
    {{- '\n</tools>\n\nFor each function call, return a json object with function name and '
        'arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n'
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' -}}
{%- elif system_message is not none -%}
    {{- '<|im_start|>system\n' + system_message + '<|im_end|>\n' -}}
{%- endif -%}
{%- for message in rest -%}
    {%- set content = render_content(message.content) -%}
    {%- if message.role == 'user' or message.role == 'system' -%}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>\n' -}}
    {%- elif message.role == 'assistant' -%}
        {{- '<|im_start|>assistant\n' -}}
        {%- generation -%}
        {{- content -}}
        {%- for tool_call in message.tool_calls or [] -%}
            {%- if not loop.first or content -%}
                {{- '\n' -}}
            {%- endif -%}
            {%- if tool_call.function is defined -%}
                {%- set tool_call = tool_call.function -%}
            {%- endif -%}
            {{- '<tool_call>\n{"name": ' + (tool_call.name | tojson) + ', "arguments": ' -}}
            {%- if tool_call.arguments is string -%}
                {{- tool_call.arguments -}}
            {%- else -%}
                {{- (tool_call.arguments if tool_call.arguments is not none else {}) | tojson -}}
            {%- endif -%}
            {{- '}\n</tool_call>' -}}
        {%- endfor -%}
        {{- '<|im_end|>' -}}
        {%- endgeneration -%}
        {{- '\n' -}}
    {%- elif message.role == 'tool' -%}
        {{- '<|im_start|>user\n<tool_response>\n' + content + '\n</tool_response><|im_end|>\n' -}}
    {%- else -%}
        {{- raise_exception('Unknown message role: ' + message.role) -}}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|im_start|>assistant\n' -}}
{%- endif -%}
""".strip()


class ToolCallParseError(ValueError):
    """A ``<tool_call>`` block in model output is not a valid call (a format error of the turn)."""


_OPEN_CALL, _CLOSE_CALL = "<tool_call>", "</tool_call>"


def split_tool_calls(text: str) -> tuple[list[str], str, str | None]:
    """The ``<tool_call>`` blocks of ChatML assistant text, in one linear pass of
    ``str.find`` (the lazy regex this replaces searched the rest of the text again after
    every unclosed opening: quadratic on ``"<tool_call>" * n``). Never raises.

    Returns the blocks' bodies in order, the text outside them, and the text after an
    opening that is never closed (None when every block is closed; the outside text stops
    at that opening)."""
    blocks: list[str] = []
    outside: list[str] = []
    at = 0
    while (start := text.find(_OPEN_CALL, at)) != -1:
        outside.append(text[at:start])
        body = start + len(_OPEN_CALL)
        end = text.find(_CLOSE_CALL, body)
        if end == -1:
            return blocks, "".join(outside), text[body:]
        blocks.append(text[body:end])
        at = end + len(_CLOSE_CALL)
    outside.append(text[at:])
    return blocks, "".join(outside), None


def parse_chatml_tool_calls(text: str) -> list[dict[str, Any]]:
    """Extract the ``<tool_call>{json}</tool_call>`` blocks of a ChatML assistant turn.

    Returns ``[{"name": str, "arguments": dict}, ...]`` in order of appearance; an empty list
    when the turn has no tool call. ``arguments`` given as a JSON-encoded string is decoded,
    missing ``arguments`` becomes ``{}``. Raises :class:`ToolCallParseError` (and nothing
    else) for a block that is not a JSON object with a string ``name`` and object
    ``arguments`` (JSON too deep or with too long a number included: see
    :mod:`harnessgrid.safe_json`), and for an unclosed ``<tool_call>`` (a truncated
    generation): the caller turns that into a format error instead of silently dropping a
    call the model meant to make.
    """
    blocks, _, unclosed = split_tool_calls(text)
    calls = [_parse_tool_call_block(block) for block in blocks]
    if unclosed is not None:
        raise ToolCallParseError("unclosed <tool_call> block (generation truncated?)")
    return calls


def _shown_block(block: str) -> str:
    block = block.strip()
    return repr(block if len(block) <= 200 else block[:200] + "...")


def _parse_tool_call_block(block: str) -> dict[str, Any]:
    """Parse and validate the JSON body of one tool-call block (its ``arguments`` object one
    level below the block's, so the block may nest one level deeper than arguments may)."""
    # Imported here: importing this module stays cheap (safe_json brings pydantic).
    from harnessgrid import safe_json
    from harnessgrid.models import MAX_ARGUMENT_DEPTH

    try:
        payload = safe_json.loads(block, max_depth=MAX_ARGUMENT_DEPTH + 1)
    except safe_json.JSONError as exc:
        raise ToolCallParseError(
            f"tool call is not valid JSON: {exc}: {_shown_block(block)}") from None
    if not isinstance(payload, dict):
        raise ToolCallParseError(f"tool call is not a JSON object: {_shown_block(block)}")
    name = payload.get("name")
    if not isinstance(name, str) or not name:
        raise ToolCallParseError(f"tool call has no string 'name': {_shown_block(block)}")
    arguments = payload.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = safe_json.loads(arguments) if arguments.strip() else {}
        except safe_json.JSONError as exc:
            raise ToolCallParseError(
                f"tool call {name!r} has invalid JSON arguments ({exc})") from None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ToolCallParseError(f"tool call {name!r} arguments are not a JSON object")
    return {"name": name, "arguments": arguments}


def build_tiny_model(out_dir: str | Path, *, size: str = "tiny", seed: int = 0,
                     corpus: Sequence[str] | None = None,
                     vocab_size: int | None = None, pretokenizer: str = "qwen",
                     on_step: Callable[[str], None] | None = None) -> Path:
    """Write a randomly initialised Qwen3-style chat checkpoint to ``out_dir`` and return it.

    Fully offline and deterministic: the tokenizer does not depend on ``seed`` and the same
    ``(size, seed)`` gives byte-identical ``model.safetensors``. A directory that already holds
    a build of the same ``(size, seed, corpus, vocab_size)`` by this builder version is reused
    as is, so callers can point several tests or examples at one cache directory.

    ``corpus``: extra texts for the tokenizer's training corpus (after the built-in one), so
    the BPE learns the pieces a particular setting repeats (its prompts, tool specs,
    observations) as whole tokens; ``vocab_size``: the vocabulary size, special and tool
    tokens included (default :data:`VOCAB_SIZE`). Left out, both give exactly the default
    build. Both are part of the cache key (the corpus by its SHA-256). ``pretokenizer``: a
    name in :data:`PRETOKENIZERS` (``words`` for models that must copy names; see there).
    ``on_step`` hears what the build is doing (it takes seconds), e.g. for a progress line.
    """
    step = on_step or (lambda _what: None)
    if size not in SIZES:
        raise ValueError(f"unknown tiny model size {size!r}; choose one of {sorted(SIZES)}")
    reserved = 256 + len(SPECIAL_TOKENS) + len(TOOL_TOKENS)  # byte alphabet + markup tokens
    if vocab_size is not None and (isinstance(vocab_size, bool) or not isinstance(
            vocab_size, int) or vocab_size <= reserved):
        raise ValueError(f"vocab_size must be an integer above {reserved} (the byte alphabet "
                         f"and the special tokens), got {vocab_size!r}")
    if pretokenizer not in PRETOKENIZERS:
        raise ValueError(f"unknown pretokenizer {pretokenizer!r}; choose one of "
                         f"{sorted(PRETOKENIZERS)}")
    texts = None if corpus is None else [str(t) for t in corpus]
    out = Path(out_dir)
    info: dict[str, Any] = {"builder_version": BUILDER_VERSION, "size": size, "seed": seed}
    if vocab_size is not None:
        info["vocab_size"] = vocab_size
    if pretokenizer != "qwen":
        info["pretokenizer"] = pretokenizer
    if texts is not None:
        digest = hashlib.sha256(json.dumps(texts, ensure_ascii=False).encode("utf-8"))
        info["corpus_sha256"] = digest.hexdigest()
    info_path = out / _BUILD_INFO
    if info_path.is_file() and _read_json(info_path) == info and (out / "config.json").is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    info_path.unlink(missing_ok=True)  # written last: a half-finished build is never reused

    step("importing transformers")
    from transformers.utils import logging

    hf_logging: Any = logging  # partially typed upstream; only used at this boundary

    max_positions = int(SIZES[size].get("max_position_embeddings", DEFAULT_MAX_POSITIONS))
    step("training the tokenizer")
    tokenizer = _build_tokenizer(extra_corpus=texts, vocab_size=vocab_size or VOCAB_SIZE,
                                 max_length=max_positions, pretokenizer=pretokenizer)
    tokenizer.save_pretrained(out)
    step(f"initialising the {size} model")
    model = _build_model(tokenizer, size=size, seed=seed)
    step("writing the weights")
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a one-shard "Writing model shards" bar is only noise
    try:
        model.save_pretrained(out)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    info_path.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return out


def _read_json(path: Path) -> Any:
    """Read a JSON file, ``None`` when unreadable (a stale or half-written cache)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _build_tokenizer(extra_corpus: Sequence[str] | None = None, vocab_size: int = VOCAB_SIZE,
                     max_length: int = DEFAULT_MAX_POSITIONS, pretokenizer: str = "qwen") -> Any:
    """Train the byte-level BPE (on the built-in corpus, then ``extra_corpus``) and wrap it as a
    ``PreTrainedTokenizerFast`` with the template."""
    import transformers
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )

    hf: Any = transformers  # partially typed upstream; only used at this boundary
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZERS[pretokenizer]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(SPECIAL_TOKENS) - len(TOOL_TOKENS),
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_corpus() + list(extra_corpus or ()), trainer=trainer)
    # Added after training so they sit at the end of the vocabulary, as in Qwen.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])

    return hf.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=max_length,
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )


def _build_model(tokenizer: Any, *, size: str, seed: int) -> Any:
    """Randomly initialise a ``Qwen3ForCausalLM`` whose vocabulary matches ``tokenizer``."""
    import torch
    import transformers

    hf: Any = transformers  # partially typed upstream; only used at this boundary

    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    eot = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    architecture = {"max_position_embeddings": DEFAULT_MAX_POSITIONS, **SIZES[size]}
    config = hf.Qwen3Config(
        vocab_size=len(tokenizer),
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=im_end,
        pad_token_id=eot,
        **architecture,
    )
    # fork_rng: building a model must not disturb the caller's global torch RNG stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = hf.Qwen3ForCausalLM(config).to(torch.float32)
    model.generation_config = hf.GenerationConfig(
        eos_token_id=[im_end, eot],
        pad_token_id=eot,
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
    )
    model.eval()
    return model


# ----------------------------------------------------------------------------------------------
# Training corpus: small, fixed, and varied enough (prose, Python, JSON, shell, XML-ish markup,
# tool output) that tool calls and code tokenize into sensible pieces.

_PROSE = """\
You are a helpful assistant. You are working in a repository and you can call tools to read,
write, edit and search files, list directories and run shell commands. Think about the task, then
act. When the task is done, call the finish tool with a short summary of what you changed.
The user asked me to fix the failing test. First I will read the file to understand the problem.
The test expects the function to return an empty list when the input is empty, but it raises an
exception instead. I will edit the function and run the tests again to check that they pass.
All tests passed. The configuration file was updated and the output matches the expected result.
Error: the file does not exist. Please check the path and try again with a relative path.
Observation: the command exited with status 1. The output was truncated after 200 lines.
Summary of the changes: renamed the variable, added a missing import, and updated the docs.
The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with one step.
In the beginning the workspace is empty; the agent creates a file named notes.txt and writes
the answer into it. The grader checks that the file exists and that its content is correct.
Please write a function that counts the words in a text file and prints the ten most common ones.
Can you find where the configuration is loaded and add a default value for the timeout option?
I could not find the function in the current directory, so I will search the whole project.
The harness decides which tools the model sees, how calls are written and how results come back.
"""

_CODE = '''\
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any


def read_file(path: str) -> str:
    """Return the text of a file inside the workspace."""
    with open(path, "r", encoding="utf-8") as handle:
        return handle.read()


def write_file(path: str, content: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(content, encoding="utf-8")


class Counter:
    def __init__(self, start: int = 0) -> None:
        self.value = start

    def increment(self, step: int = 1) -> int:
        self.value += step
        return self.value


def word_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for word in re.findall(r"[a-z]+", text.lower()):
        counts[word] = counts.get(word, 0) + 1
    return counts


def main() -> None:
    args = sys.argv[1:]
    if not args:
        print("usage: main.py FILE")
        return
    for name in args:
        try:
            data = json.loads(read_file(name))
        except (OSError, ValueError) as exc:
            print(f"error: {exc}")
            continue
        print(len(data), sorted(data.keys()))


if __name__ == "__main__":
    main()

def test_word_counts():
    assert word_counts("a b a") == {"a": 2, "b": 1}
    assert word_counts("") == {}

for i in range(10):
    if i % 2 == 0:
        result.append(i * i)
    else:
        result.append(-i)
return [x for x in items if x is not None]
'''

_SHELL = """\
$ ls -la
total 24
drwxr-xr-x  4 user user 4096 Jan  1 12:00 .
-rw-r--r--  1 user user  312 Jan  1 12:00 README.md
-rw-r--r--  1 user user 1024 Jan  1 12:00 main.py
drwxr-xr-x  2 user user 4096 Jan  1 12:00 tests
$ cat README.md
$ python -m pytest -q tests/
..F.
FAILED tests/test_main.py::test_word_counts - AssertionError: assert {} == {'a': 2}
1 failed, 3 passed in 0.12s
$ grep -rn "timeout" src/ --include=*.py
src/config.py:12:    timeout: float = 30.0
$ find . -name "*.py" | head -20
$ sed -n '1,40p' main.py
$ echo "hello world" > notes.txt && wc -l notes.txt
$ git diff --stat
$ mkdir -p build && cd build && make -j4
Traceback (most recent call last):
  File "main.py", line 42, in <module>
    main()
  File "main.py", line 30, in main
    data = json.loads(read_file(name))
FileNotFoundError: [Errno 2] No such file or directory: 'data.json'
exit code: 0
exit code: 1
exit code: 127
bash: foo: command not found
"""

_MARKUP = """\
<tools>
{"type": "function", "function": {"name": "read_file", "description": "Read a file.", "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "Path relative to the workspace."}}, "required": ["path"]}}}
{"type": "function", "function": {"name": "run_shell", "description": "Run a shell command.", "parameters": {"type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}}, "required": ["command"]}}}
</tools>
<file path="main.py">
print("hello")
</file>
<result status="ok" exit_code="0">
<stdout>hello world</stdout>
<stderr></stderr>
</result>
<observation>The file was written.</observation>
<error type="FileNotFoundError">No such file or directory</error>
<edit path="src/app.py"><old>return None</old><new>return []</new></edit>
<finish summary="Fixed the bug and all tests pass." />
{"id": "call_0", "type": "function", "function": {"name": "write_file", "arguments": "{\\"path\\": \\"a.txt\\"}"}}
{"role": "assistant", "content": null, "tool_calls": []}
{"role": "tool", "tool_call_id": "call_0", "content": "ok"}
{"role": "user", "content": "Fix the failing test."}
{"ok": true, "count": 3, "items": [1, 2, 3], "name": null, "ratio": 0.5}
"""

_DOCS = """\
# Project notes

## Installation

Install the package with pip, then run the command line tool to check that everything works:
`pip install -e .[dev]` and `python -m pytest`. The documentation explains every option.

## Usage

1. Create a configuration file (YAML or JSON) describing the experiment.
2. Choose a model, a task suite, and the number of steps.
3. Start the run and watch the logs; results are written to the output directory.

- Supports multiple backends: local models, remote APIs, and a scripted oracle.
- Each episode records messages, tool calls, results, tokens, and timings.
- Reports show the average score, the pass rate, and the cost per configuration.

| name | default | meaning |
|------|---------|---------|
| steps | 300 | number of optimizer steps |
| batch_size | 16 | tasks per step |
| learning_rate | 1e-6 | step size of the optimizer |

Reinforcement learning trains a policy from rewards. The agent observes the environment, takes an
action, and receives a reward; the advantage compares each rollout with the group average. A
sandbox isolates commands: no network access, a read-only system, limited memory and processes.
Yesterday we measured the throughput, the latency, and the memory usage of several servers while
changing the batch size. Tomorrow we will compare these numbers with the previous release and
write a short report for the team, including charts, tables, and recommendations.
People often ask why the weather changes so quickly in the mountains; warm air rises, cools, and
forms clouds, which can bring rain or snow within an hour. Travelers should carry water, a map,
warm clothes, and a phone, and tell a friend where they are going and when they plan to return.
"""

_CONFIG = """\
model:
  name: Qwen/Qwen3-4B-Instruct-2507
  dtype: bfloat16
  max_new_tokens: 1024
training:
  algorithm: grpo
  num_generations: 8
  temperature: 1.0
  seed: 42
  output_dir: runs/experiment-001
harness:
  system_prompt: minimal
  tool_interface: function_calling
  observation: truncated
  context: window
  workflow: react
[tool.pytest.ini_options]
testpaths = ["tests"]
timeout = 60
SELECT id, name, created_at FROM users WHERE active = 1 ORDER BY created_at DESC LIMIT 10;
CREATE TABLE results (id INTEGER PRIMARY KEY, task TEXT NOT NULL, score REAL);
const response = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" } });
function add(a, b) { return a + b; }
export default { name: "app", version: "1.0.0", dependencies: {} };
diff --git a/src/app.py b/src/app.py
index 3b18e51..a9c2f4d 100644
--- a/src/app.py
+++ b/src/app.py
@@ -10,7 +10,7 @@ def load(path):
-    return None
+    return []
<html><head><title>Report</title></head><body><h1>Results</h1><p>Score: 0.75</p></body></html>
"""

_CODE_MORE = '''\
class Workspace:
    """A directory where tools act; paths are confined to the root."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def resolve(self, relative: str) -> Path:
        target = (self.root / relative).resolve()
        if not target.is_relative_to(self.root):
            raise ValueError(f"path escapes the workspace: {relative}")
        return target

    def list(self, directory: str = ".") -> list[str]:
        return sorted(p.name for p in self.resolve(directory).iterdir())


async def fetch_all(urls: list[str], timeout: float = 10.0) -> list[bytes]:
    async with httpx.AsyncClient(timeout=timeout) as client:
        responses = await asyncio.gather(*(client.get(url) for url in urls))
    return [response.content for response in responses]


@dataclass(frozen=True)
class Config:
    name: str
    levels: tuple[str, ...] = ()
    weight: float = 1.0
    enabled: bool = True

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "levels": list(self.levels), "weight": self.weight}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run an experiment.")
    parser.add_argument("--config", type=Path, required=True, help="configuration file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true")
    return parser.parse_args(argv)


logger = logging.getLogger(__name__)
while queue:
    node = queue.pop(0)
    visited.add(node)
    for neighbor in graph[node]:
        if neighbor not in visited:
            queue.append(neighbor)
with torch.no_grad():
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    tokens = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1)
numbers = [3.14, 2.71, 1.41, 42, 1000, 65536, 0x1F, 1e-5, -7]
'''

_CHATML = """\
<|im_start|>system
# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
</tools>

For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
<|im_start|>user
Create hello.py that prints a greeting, then run it.<|im_end|>
<|im_start|>assistant
I will create the file first.<|im_end|>
"""

_TOOL_NAMES = (
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "search",
    "run_shell",
    "finish",
    "Read",
    "Write",
    "Edit",
    "Bash",
    "Glob",
    "Grep",
    "exec",
    "apply_patch",
)
_PATHS = (
    "a.txt",
    "main.py",
    "src/app.py",
    "tests/test_main.py",
    "README.md",
    "notes.txt",
    "config.yaml",
    "data/input.json",
    "docs/index.md",
    "setup.cfg",
)
_COMMANDS = (
    "ls",
    "pytest -q",
    "python main.py",
    "cat a.txt",
    "grep -rn TODO .",
    "git status",
    "wc -l notes.txt",
    "echo done",
)


def _corpus() -> list[str]:
    """The fixed training texts; generated tool calls make the JSON call shape cheap to encode."""
    texts = [_CHATML, _PROSE, _DOCS, _CODE, _CODE_MORE, _SHELL, _CONFIG, _MARKUP]
    for i, name in enumerate(_TOOL_NAMES):
        path = _PATHS[i % len(_PATHS)]
        command = _COMMANDS[i % len(_COMMANDS)]
        for arguments in (
            {"path": path},
            {"path": path, "content": f"line {i}\n"},
            {"path": path, "old": "return None", "new": "return []"},
            {"command": command, "timeout": 10 + i},
            {"pattern": "def main", "path": "."},
            {"summary": "Done."},
        ):
            call = json.dumps({"name": name, "arguments": arguments})
            texts.append(f"<tool_call>\n{call}\n</tool_call>")
            texts.append(
                f'<tool_response>\n{{"output": "ok", "exit_code": {i % 3}}}\n</tool_response>'
            )
    return texts * 3
