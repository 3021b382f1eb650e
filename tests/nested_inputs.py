"""Model output shaped to break a recursive decoder: deep brackets, deep XML-like tags, huge
numbers, invalid UTF-8 and lone surrogates, written in each harness's own syntax.

Shared by ``tests/test_total_parsers.py`` (every tool interface, adapter and product-tool
parser, one harness step at a time) and ``benchmarks/fuzz_turns.py`` (the long run over every
configuration). Seeded and bounded: the same seed gives the same turns, and each turn is at
most a few hundred thousand characters.

Native-call turns are made the way policies make them, through their own decoders
(:func:`~harnessgrid.policies.api.decode_call` for an API's arguments,
:func:`~harnessgrid.policies.token.parse_tool_calls` for a token model's ChatML text), so
the decoders are fuzzed too.
"""

from __future__ import annotations

import json
import random
from typing import Any

from harnessgrid.models import ModelTurn, ToolCall

DEEP_ARRAY = "[" * 100_000
DEEP_OBJECT = '{"a":' * 50_000
BALANCED_ARRAY = "[" * 20_000 + "]" * 20_000
HUGE_NUMBER = "1" * 100_000
#: Bytes that are not UTF-8 as a model's text carries them (decoded with surrogateescape:
#: lone surrogates U+DC80..U+DCFF), next to lone surrogates written as they are.
INVALID_UTF8 = b"ok \xff\xfe \xc3( \xed\xa0\x80 \xf0\x28\x8c\x28".decode("utf-8",
                                                                           "surrogateescape")
LONE_SURROGATES = "a\ud800b\udfffc"
#: Tools that end the episode: not called with hostile arguments, so that turns keep coming.
FINISH = {"finish", "done", "finish_task"}


def deep_dict(depth: int) -> dict[str, Any]:
    """A dict nested ``depth`` levels, built without recursion (what an SDK may hand over)."""
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth - 1):
        node["a"] = {}
        node = node["a"]
    return root


def json_payloads(rng: random.Random) -> list[str]:
    """Tool-call arguments as text: too deep, numbers too long, invalid UTF-8, around the
    bounds (depths either side of 64, a 350-digit number a double cannot hold)."""
    depth = rng.choice([63, 64, 65, 1_000, 5_000])
    return [
        DEEP_ARRAY,
        DEEP_OBJECT,
        BALANCED_ARRAY,
        '{"a": ' + "[" * depth + "]" * depth + "}",
        '{"path": ' + HUGE_NUMBER + "}",
        '{"path": -' + "9" * rng.randrange(4_000, 5_000) + ".5e3}",
        '{"path": 1' + "0" * 350 + "}",
        '{"path": "' + INVALID_UTF8 + '"}',
        '{"path": "' + LONE_SURROGATES + '", "\\ud800": "\\udfff"}',
        '{"path": "' + "\\" * 99_999 + '"}',
        '"' + '\\"' * 50_000,
    ]


def text_payloads(rng: random.Random, product: str | None) -> list[str]:
    """Replies in the text protocols (XML-like tags, fenced blocks, ChatML) nested or sized
    to break a parser; ``product`` names a product tool for ``<tool name=...>`` calls."""
    n = rng.choice([5_000, 20_000])
    texts = [
        "<exec>" * n,
        "<exec>" * n + "</exec>" * n,
        "<think>" * n + "<view/>",
        '<replace path="a.txt">' + "<old>" * n + "</replace>",
        '<view path="&#' + HUGE_NUMBER + ';"/>',
        '<view path="&#x' + "f" * 50_000 + ';"/>',
        "<tool_call>" * n,
        "```bash\n" * n,
        "```bash\n" + DEEP_ARRAY + "\n```",
        "```bash\necho " + INVALID_UTF8 + "\n```",
        "<exec>\necho " + LONE_SURROGATES + INVALID_UTF8 + "\n</exec>",
    ]
    if product is not None:
        texts += [f'<tool name="{product}">\n{payload}\n</tool>'
                  for payload in json_payloads(rng)]
        texts += [f"```bash\n{product} '{DEEP_ARRAY}'\n```",
                  f"```bash\n{product} --order_id {HUGE_NUMBER}\n```"]
    return texts


def decoded_turns(names: list[str], rng: random.Random) -> list[ModelTurn]:
    """Native calls of ``names`` whose arguments went through the policies' decoders: an
    API's argument text and object (:func:`decode_call`), a token model's ChatML text
    (:func:`parse_tool_calls`), and one Python int too big for any JSON reader."""
    from harnessgrid.policies.api import decode_call
    from harnessgrid.policies.token import parse_tool_calls

    turns: list[ModelTurn] = []
    for i, payload in enumerate(json_payloads(rng)):
        name = rng.choice(names)
        turns.append(ModelTurn(tool_calls=(decode_call(f"api_{i}", name, payload),)))
        block = f'{{"name": {json.dumps(name)}, "arguments": {payload}}}'
        content, calls = parse_tool_calls(f"<tool_call>{block}</tool_call>", f"tok_{i}")
        turns.append(ModelTurn(content=content, tool_calls=calls))
        quoted = f'{{"name": {json.dumps(name)}, "arguments": {json.dumps(payload)}}}'
        content, calls = parse_tool_calls(f"<tool_call>{quoted}</tool_call>", f"str_{i}")
        turns.append(ModelTurn(content=content, tool_calls=calls))
    name = rng.choice(names)
    turns += [ModelTurn(tool_calls=(decode_call("sdk_deep", name, deep_dict(5_000)),)),
              ModelTurn(tool_calls=(decode_call("bytes", name, INVALID_UTF8.encode(
                  "utf-8", "surrogateescape")),)),
              ModelTurn(tool_calls=(ToolCall(id="int", name=name,
                                             arguments={"path": 10**5_000}),))]
    return turns


def nested_turns(harness: Any, seed: int, product: str | None = None) -> list[ModelTurn]:
    """The turns above for ``harness``: decoded native calls of its tools (and ``product``)
    when it calls tools natively, replies in its text syntax otherwise; shuffled by
    ``seed``."""
    rng = random.Random(seed)
    if harness.native_tools:
        names = [t.name for t in harness.tools() if t.name not in FINISH] or ["bash"]
        turns = decoded_turns(names, rng)
        turns += [ModelTurn(content=text) for text in text_payloads(rng, None)[:4]]
    else:
        turns = [ModelTurn(content=text) for text in text_payloads(rng, product)]
    rng.shuffle(turns)
    return turns
