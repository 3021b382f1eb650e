"""Streamed replies: the text pieces a policy hands to ``PolicyRequest.on_text`` while it
produces a turn, and the reassembly of a streamed reply into the same :class:`ModelTurn` the
unstreamed call returns.

Shared rules (every streaming policy keeps them):

* the pieces given to ``on_text`` are non-empty, in order, and concatenate to exactly the
  returned turn's ``content``;
* the callback is the embedder's (a UI): an exception it raises propagates *as itself* out of
  ``act`` -- never retried, never turned into a :class:`PolicyError`;
* an API policy retries a failed stream only while no text has reached the callback; once
  some has, a failure is a :class:`PolicyError` (a retry could answer differently, and the
  consumer has already shown part of this answer -- no text is ever repeated or retracted).

:class:`TextSink` enforces the callback rules; :class:`ChatChunks` and
:class:`AnthropicEvents` rebuild the OpenAI chat and Anthropic Messages streams;
:class:`TokenTextStream` turns a token policy's sampled ids into text pieces.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harnessgrid.policies.tiny_model import split_tool_calls

#: ``on_text``: called with each piece of the reply's text.
OnText = Callable[[str], None]


class StreamBrokeOff(Exception):
    """The stream ended before the reply did (no finish reason / ``message_stop``): the
    connection was lost mid-reply. Transient, like a lost connection before the reply."""


class TextSink:
    """Hands pieces to the embedder's ``on_text`` and remembers what happened.

    ``delivered`` says whether any piece reached the callback (a failure after that is not
    retried); ``error`` is the exception the callback raised, if any (re-raised as itself)."""

    def __init__(self, on_text: OnText) -> None:
        self._on_text = on_text
        self.delivered = False
        self.error: Exception | None = None

    def __call__(self, piece: str) -> None:
        if not piece:
            return
        self.delivered = True
        try:
            self._on_text(piece)
        except Exception as exc:
            self.error = exc
            raise


class ChatChunks:
    """An OpenAI chat-completion stream (``chat.completion.chunk`` objects, from the OpenAI SDK
    or litellm) reassembled: the first choice's text (streamed to ``sink`` as it arrives), tool
    calls by ``index`` (id and name from their first fragment, arguments concatenated), the
    last finish reason and the usage chunk (``stream_options.include_usage``)."""

    def __init__(self, sink: TextSink) -> None:
        self.sink = sink
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.choices = False  # any chunk carried the first choice

    def add(self, chunk: Any) -> None:
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = usage
        for choice in getattr(chunk, "choices", None) or ():
            if (getattr(choice, "index", 0) or 0) != 0:
                continue  # the unstreamed turn reads choices[0] only
            self.choices = True
            delta = getattr(choice, "delta", None)
            content = getattr(delta, "content", None)
            if isinstance(content, str) and content:
                self.text.append(content)
                self.sink(content)
            for call in getattr(delta, "tool_calls", None) or ():
                self._add_call(call)
            if getattr(choice, "finish_reason", None):
                self.finish_reason = choice.finish_reason

    def _add_call(self, fragment: Any) -> None:
        index = getattr(fragment, "index", None)
        if not isinstance(index, int):  # servers that omit it send one call per id
            index = len(self.calls) - (0 if getattr(fragment, "id", None) or not self.calls
                                       else 1)
        call = self.calls.setdefault(index, {"id": None, "name": None, "arguments": None})
        function = getattr(fragment, "function", None)
        # Some servers repeat the id and name in every fragment: the first one counts.
        call["id"] = call["id"] or getattr(fragment, "id", None)
        call["name"] = call["name"] or getattr(function, "name", None)
        piece = getattr(function, "arguments", None)
        if isinstance(piece, str):
            call["arguments"] = (call["arguments"] or "") + piece

    def check_complete(self) -> None:
        """Raise :class:`StreamBrokeOff` when choices arrived but never a finish reason."""
        if self.choices and self.finish_reason is None:
            raise StreamBrokeOff("the stream ended before the reply did (no finish_reason)")


class AnthropicEvents:
    """A Messages API event stream reassembled: text blocks (streamed to ``sink``; a ``\\n``
    between blocks, as the unstreamed turn joins them), ``tool_use`` blocks with their input
    JSON, the stop reason and the usage (``message_start``, updated by ``message_delta``)."""

    _USAGE = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
              "output_tokens")

    def __init__(self, sink: TextSink) -> None:
        self.sink = sink
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stop_reason: str | None = None
        self.usage: dict[str, int] = {}
        self.stopped = False
        self.block_count = 0  # content blocks of any type (thinking too), as in the message
        self._texts = 0

    def add(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            message = event.message
            self.stop_reason = getattr(message, "stop_reason", None)
            self._usage(getattr(message, "usage", None))
        elif kind == "content_block_start":
            self.block_count += 1
            self._start(event.index, event.content_block)
        elif kind == "content_block_delta":
            block, delta = self.blocks.get(event.index), event.delta
            if block is None:
                return
            if delta.type == "text_delta" and block["type"] == "text":
                block["text"].append(delta.text)
                self.sink(delta.text)
            elif delta.type == "input_json_delta" and block["type"] == "tool_use":
                block["json"].append(delta.partial_json)
        elif kind == "message_delta":
            self.stop_reason = getattr(event.delta, "stop_reason", None) or self.stop_reason
            self._usage(getattr(event, "usage", None))
        elif kind == "message_stop":
            self.stopped = True

    def _start(self, index: int, block: Any) -> None:
        if block.type == "text":
            if self._texts:
                self.sink("\n")
            self._texts += 1
            text = getattr(block, "text", "") or ""
            self.blocks[index] = {"type": "text", "text": [text]}
            self.sink(text)
        elif block.type == "tool_use":
            self.blocks[index] = {"type": "tool_use", "id": block.id, "name": block.name,
                                  "input": getattr(block, "input", None), "json": []}

    def _usage(self, usage: Any) -> None:
        for name in self._USAGE:  # the later event's counts replace the earlier ones
            value = getattr(usage, name, None)
            if isinstance(value, int):
                self.usage[name] = value

    def texts(self) -> list[str]:
        return ["".join(b["text"]) for _, b in sorted(self.blocks.items())
                if b["type"] == "text"]

    def calls(self) -> list[tuple[str, str, object]]:
        """``(id, name, arguments)``: the streamed input JSON, else the start's input."""
        return [(b["id"], b["name"], "".join(b["json"]) if b["json"] else b["input"])
                for _, b in sorted(self.blocks.items()) if b["type"] == "tool_use"]

    def check_complete(self) -> None:
        if not self.stopped:
            raise StreamBrokeOff("the stream ended before the message did (no message_stop)")


# --- token policies -----------------------------------------------------------------------------

_TOOL_OPEN = "<tool_call>"


def visible_text(text: str, native_tools: bool) -> str:
    """The part of a token policy's decoded reply so far that its final ``content`` is sure to
    start with, whatever comes next (:func:`harnessgrid.policies.token.parse_tool_calls`
    removes ``<tool_call>`` blocks and strips the rest when tools are native).

    Held back: an unfinished UTF-8 character (``\\ufffd`` at the end), trailing whitespace
    (a strip, or a tokenizer's space clean-up, may still remove it), and with native tools
    anything from an unclosed ``<tool_call>`` or a trailing prefix of one on."""
    text = text.rstrip("\ufffd")
    if native_tools:
        _, text, _ = split_tool_calls(text)  # linear, up to an unclosed block
        for k in range(min(len(_TOOL_OPEN) - 1, len(text)), 0, -1):
            if _TOOL_OPEN.startswith(text[-k:]):
                text = text[:-k]
                break
        text = text.lstrip()
    return text.rstrip()


class TokenTextStream:
    """Turns the ids a token policy samples into text pieces for ``on_text``.

    ``decode(ids)`` is the policy's own decoding (special tokens skipped). After each batch
    of new ids the whole completion is decoded again and the newly :func:`visible_text` part
    is sent; :meth:`close` sends the rest of the final ``content``. Decoding the whole
    completion (not the new ids alone) is what keeps the pieces equal to the content: a
    token's text can depend on its neighbours (multi-byte characters, space clean-up). If the
    decoded text ever stops extending what was sent (a tokenizer whose clean-up rewrites text
    already sent), streaming stops for the turn and the turn's content stays authoritative.
    """

    def __init__(self, sink: TextSink, decode: Callable[[list[int]], str],
                 native_tools: bool) -> None:
        self.sink = sink
        self._decode = decode
        self._native = native_tools
        self.ids: list[int] = []
        self.sent = ""
        self.diverged = False

    def add(self, ids: list[int]) -> None:
        self.ids.extend(ids)
        if not self.diverged:
            self._send_up_to(visible_text(self._decode(self.ids), self._native))

    def close(self, content: str) -> None:
        """Send what of the final ``content`` was not sent yet."""
        if not self.diverged:
            self._send_up_to(content)

    def _send_up_to(self, text: str) -> None:
        if not text.startswith(self.sent):
            self.diverged = not self.sent.startswith(text)  # shorter: just not yet
            return
        piece, self.sent = text[len(self.sent):], text
        self.sink(piece)

