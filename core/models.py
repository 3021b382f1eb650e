"""Value objects shared by harnesses, policies and the runtime (DESIGN §3).

An :class:`Action` is what a tool call *means* (read a file, run a command); a :class:`ToolCall`
is how one tool interface writes it; a :class:`ToolResult` is what running it produced. Keeping
the three apart is what lets the same task plan run through every tool interface.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ActionKind = Literal["read", "write", "edit", "list", "search", "shell", "finish"]

#: The arguments of each abstract action, all strings, all required (defaults filled by
#: :meth:`Action.of`). Keeping them flat and total makes ``parse(render(a)) == a`` checkable.
ACTION_ARGS: dict[str, tuple[str, ...]] = {
    "read": ("path",),
    "write": ("path", "content"),
    "edit": ("path", "old", "new"),
    "list": ("path",),
    "search": ("pattern", "path"),
    "shell": ("command",),
    "finish": ("message",),
}
_DEFAULTS: dict[str, dict[str, str]] = {
    "list": {"path": "."},
    "search": {"path": "."},
    "finish": {"message": ""},
}


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Action(_Value):
    """An abstract action: ``kind`` plus exactly the string arguments of :data:`ACTION_ARGS`."""

    kind: ActionKind
    args: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _exact_args(self) -> Action:
        want = set(ACTION_ARGS[self.kind])
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
