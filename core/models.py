"""Value objects shared by harnesses, policies and the runtime.

An :class:`Action` is what a tool call *means* (read a file, run a command); a :class:`ToolCall`
is how one tool interface writes it; a :class:`ToolResult` is what running it produced. Keeping
the three apart is what lets the same task plan run through every tool interface.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ActionKind = Literal["read", "write", "edit", "list", "search", "shell", "finish", "tool"]

#: The arguments of each abstract action of the work, all strings, all required (defaults
#: filled by :meth:`Action.of`). Keeping them flat and total makes ``parse(render(a)) == a``
#: checkable. Every tool interface renders each of these.
ACTION_ARGS: dict[str, tuple[str, ...]] = {
    "read": ("path",),
    "write": ("path", "content"),
    "edit": ("path", "old", "new"),
    "list": ("path",),
    "search": ("pattern", "path"),
    "shell": ("command",),
    "finish": ("message",),
}
#: A call of a tool an embedding product registered (:mod:`harnessgrid.product_tools`):
#: ``name`` and ``arguments`` (a JSON object, as text). Only harnesses given product tools
#: present them, so it is not one of the work actions above.
PRODUCT_TOOL_ARGS: tuple[str, ...] = ("name", "arguments")
_ALL_ARGS: dict[str, tuple[str, ...]] = {**ACTION_ARGS, "tool": PRODUCT_TOOL_ARGS}
_DEFAULTS: dict[str, dict[str, str]] = {
    "list": {"path": "."},
    "search": {"path": "."},
    "finish": {"message": ""},
}


#: How deep tool-call arguments may nest (a dict or list inside another counts one level).
#: Deeper arguments become a ``parse_error`` the model is shown: every reader of a stored
#: trajectory (pydantic, ``json``, ``jq``) must be able to read back what a model wrote.
MAX_ARGUMENT_DEPTH = 64
#: The longest number literal a decoder of tool-call arguments reads, in characters
#: (:mod:`harnessgrid.safe_json`). A double has at most 17 significant digits and 309 integer
#: digits: a longer literal is never a value, and ``int()`` of 4,300 digits raises.
MAX_NUMBER_CHARS = 400
#: U+FFFD, what a lone surrogate escape (``"\ud800"``, not valid Unicode) is replaced by.
REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate (a code point that has no UTF-8 encoding) replaced
    by U+FFFD, so that it can be written to a file, a sandbox or a store."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def _clean_value(value: Any) -> Any:
    """A string cleaned, and the string keys and values of a flat dict (action arguments);
    anything else as it is (tool-call arguments are cleaned by :class:`ToolCall` itself)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k:
                clean_text(v) if isinstance(v, str) else v for k, v in value.items()}
    return value


class _Arguments:
    """Tool-call arguments made storable: JSON values only, strings without lone surrogates,
    at most :data:`MAX_ARGUMENT_DEPTH` levels (walked without recursion, whatever the depth)."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.depth = 0

    def note(self, problem: str) -> None:
        if len(self.problems) < 3:
            self.problems.append(problem)

    def clean(self, arguments: dict[Any, Any]) -> dict[str, Any]:
        root: dict[str, Any] = {}
        # (source container, target container, depth, path)
        stack: list[tuple[Any, Any, int, str]] = [(arguments, root, 1, "$")]
        while stack:
            source, target, depth, path = stack.pop()
            self.depth = max(self.depth, depth)
            if depth > MAX_ARGUMENT_DEPTH:
                continue  # reported from the depth once the walk is done
            items = (source.items() if isinstance(source, dict) else enumerate(source))
            clean_key: Any
            for key, value in items:
                if isinstance(source, dict):
                    if not isinstance(key, str):
                        self.note(f"a key of type {type(key).__name__} at {path}")
                        key = str(key)
                    clean_key = clean_text(key)
                    if clean_key != key:
                        self.note(f"a lone surrogate in a key at {path}")
                    where = f"{path}.{clean_key[:40]}"
                else:
                    clean_key, where = key, f"{path}[{key}]"
                value = self._scalar(value, where)
                if isinstance(value, dict | list | tuple):
                    child: dict[str, Any] | list[Any] = {} if isinstance(value, dict) else []
                    stack.append((value, child, depth + 1, where))
                    value = child
                if isinstance(target, dict):
                    target[clean_key] = value
                else:
                    target.append(value)
        return root

    def _scalar(self, value: Any, where: str) -> Any:
        if isinstance(value, str):
            clean = clean_text(value)
            if clean != value:
                self.note(f"a lone surrogate (not valid Unicode) at {where}")
            return clean
        if isinstance(value, int) and not isinstance(value, bool) and not _double(value):
            # No JSON reader but Python's reads it back (and past 4,300 digits not even
            # that), and every tool that takes a number converts it to a float.
            self.note(f"a number too large for a JSON number (about "
                      f"{value.bit_length() * 3 // 10:,} digits) at {where}")
            return f"<a {value.bit_length()}-bit integer>"
        if value is None or isinstance(value, bool | int | dict | list | tuple):
            return value
        if isinstance(value, float):
            if not math.isfinite(value):  # kept as text: JSON has no such number
                self.note(f"a number that is not finite ({value}) at {where}")
                return str(value)
            return value
        self.note(f"a value of type {type(value).__name__} (not JSON) at {where}")
        return clean_text(str(value))[:200]


def _double(value: int) -> bool:
    """Whether ``value`` fits a double (what JSON readers other than Python's make of it)."""
    try:
        float(value)
    except OverflowError:
        return False
    return True


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_lone_surrogates(cls, value: Any) -> Any:
        """Every string a harness, policy or tool puts in a value object can be encoded: a
        lone surrogate becomes U+FFFD (visible where it was)."""
        return _clean_value(value)


class Action(_Value):
    """An abstract action: ``kind`` plus exactly the string arguments of :data:`ACTION_ARGS`."""

    kind: ActionKind
    args: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _exact_args(self) -> Action:
        want = set(_ALL_ARGS[self.kind])
        if set(self.args) != want:
            raise ValueError(f"action {self.kind!r} takes arguments {sorted(want)}, "
                             f"got {sorted(self.args)}")
        return self

    @classmethod
    def of(cls, kind: ActionKind, **args: str) -> Action:
        """``Action.of("list")`` → ``list .``; defaults filled, unknown arguments rejected."""
        return cls(kind=kind, args={**_DEFAULTS.get(kind, {}), **args})

    def __str__(self) -> str:
        shown = ", ".join(f"{k}={v[:40]!r}" for k, v in self.args.items())
        return f"{self.kind}({shown})"


class ToolSpec(_Value):
    """A tool as a model sees it: name, description and a JSON schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]

    def openai(self) -> dict[str, Any]:
        """OpenAI / litellm ``tools=`` entry (also what HF chat templates accept)."""
        return {"type": "function", "function": {"name": self.name,
                                                 "description": self.description,
                                                 "parameters": self.parameters}}

    def anthropic(self) -> dict[str, Any]:
        """Anthropic Messages API tool definition."""
        return {"name": self.name, "description": self.description,
                "input_schema": self.parameters}


class ToolCall(_Value):
    """A call as written by the model. ``parse_error`` is set when the arguments could not be
    decoded (e.g. invalid JSON from an API): the call is kept so the harness can say so."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None
    parse_error: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _storable_arguments(cls, data: Any) -> Any:
        """Arguments a model wrote that cannot be stored and read back as they are (nested
        deeper than :data:`MAX_ARGUMENT_DEPTH`, lone surrogates, values that are not JSON)
        are made storable and the call gets a ``parse_error``: the harness shows it to the
        model as a format error instead of running a call with altered arguments."""
        if not isinstance(data, dict) or not isinstance(data.get("arguments"), dict):
            return data
        walk = _Arguments()
        arguments = walk.clean(data["arguments"])
        problem: str | None = None
        if walk.depth > MAX_ARGUMENT_DEPTH:
            problem = (f"the arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels; "
                       "send flat JSON values")
            arguments = {}
        elif walk.problems:
            problem = "the arguments hold " + "; ".join(walk.problems)
        if problem is None:
            return {**data, "arguments": arguments}
        error = data.get("parse_error")
        return {**data, "arguments": arguments,
                "parse_error": error if isinstance(error, str) and error else problem}


class ToolResult(_Value):
    """What executing one call produced. ``error`` is a tool-level failure (bad path, no such
    file); a shell command that ran and failed has ``exit_code != 0`` and no ``error``."""

    output: str = ""
    stderr: str = ""
    exit_code: int | None = None
    error: str | None = None
    truncated: bool = False
    timed_out: bool = False
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out and self.exit_code in (None, 0)


Role = Literal["system", "user", "assistant", "tool"]


class Message(_Value):
    """One chat message. ``kind`` tags what the harness put there (``task``, ``observation``,
    ``format_error``, ``plan``, ``reminder``, ``digest``, ``stub``) so context levels and reports
    can tell messages apart without parsing their text."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    kind: str | None = None
    pinned: bool = False
    #: Calls a text-protocol interface parsed out of ``content``. Kept for transcripts and
    #: graders (real tool names and arguments); never sent back to the model.
    parsed_calls: tuple[ToolCall, ...] = ()

    def openai(self) -> dict[str, Any]:
        """The message in OpenAI chat format (also the HF chat-template input)."""
        import json

        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name,
                              "arguments": c.raw_arguments if c.raw_arguments is not None
                              else json.dumps(c.arguments)}}
                for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None and self.role == "tool":
            out["name"] = self.name
        return out


class TokenRecord(_Value):
    """The exact tokens of one model turn: the prompt ids the model saw, the ids it produced and
    their log-probabilities. ``segment`` counts history rewrites: within a segment each prompt
    extends the previous prompt + completion, so a trainer never re-tokenises history."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    segment: int = 0

    @model_validator(mode="after")
    def _aligned(self) -> TokenRecord:
        if len(self.logprobs) != len(self.completion_ids):
            raise ValueError("one logprob per completion token")
        return self


class ModelTurn(_Value):
    """What a policy returned for one turn."""

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tokens_in: int = 0
    tokens_out: int = 0
    tokens: TokenRecord | None = None
    finish_reason: str | None = None

    def message(self) -> Message:
        return Message(role="assistant", content=self.content, tool_calls=self.tool_calls)


class FormatError(Exception):
    """A model turn that the tool interface could not turn into valid calls. Not a crash: the
    harness shows it to the model as an observation."""

    def __init__(self, message: str, *, call: ToolCall | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.call = call
