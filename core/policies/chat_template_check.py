"""Whether a tokenizer's chat template can write the rows a training run trains on.

Why: a chat template that ignores ``tools=`` never shows the model the harness's tool schemas,
and one that ignores the assistant's ``tool_calls`` renders every tool-call turn as an empty
turn, so the demonstration rows of SFT train nothing but end-of-turn tokens (the loss falls to 0
in two steps and the run "succeeds"). A checkpoint converted from GGUF may also name another
token of the chat format as its eos (``<|im_start|>``), and leave no pad token, so trainers pad
with it. None of this raises anywhere in transformers or TRL; these checks find it before any
episode runs, by rendering probes through the template itself:

* **tools**: a prompt rendered with a probe tool schema (a distinctive name) must contain that
  name;
* **tool calls**: an assistant message holding a probe tool call must render its name and its
  argument;
* **eos / pad**: neither may be a special token the template writes somewhere other than where
  an assistant turn ends (a missing pad counts as the eos, which trainers pad with);
* **rows**: the tokens under a row's loss mask must decode to something besides special
  (end-of-turn) tokens.

The tool checks matter only to harnesses that pass tools natively (``native_tools``); harnesses
that write calls as text (xml tags, shell commands) need neither. ``harnessgrid model check``
prints the same report. Plain Python on any tokenizer with ``apply_chat_template``: nothing
here imports torch or transformers.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from harnessgrid.errors import ConfigError

__all__ = [
    "PROBE_CALL",
    "PROBE_TOOL",
    "TemplateReport",
    "inspect_template",
    "require_trainable_rows",
    "require_trainable_template",
    "untrainable_rows",
]

logger = logging.getLogger(__name__)

#: Names no real template or prompt contains, so finding them in a rendering proves it.
PROBE_TOOL = "hg_probe_tool_q5x"
PROBE_CALL = "hg_probe_call_k8w"
PROBE_ARGUMENT = "hg-probe-argument-3vd"
_PROBE_TEXT = "hg probe reply 2mf"
_USER = {"role": "user", "content": "hi"}

#: Where a refused template or token is fixed.
TEMPLATE_HINT = ("give the tokenizer a chat template that renders tools= and the assistant's "
                 "tool_calls (write it to chat_template.jinja in the checkpoint, or set "
                 "tokenizer.chat_template), or train through harnesses that write tool calls "
                 "as text (tool_interface xml_tags or bash_only)")
ROWS_SAMPLE = 256


@dataclass(frozen=True)
class TemplateReport:
    """What a tokenizer's chat template does with tools, tool calls and turn ends.

    ``tools_detail`` / ``tool_calls_detail`` say how the probe came out (``rendered``,
    ``dropped ...`` or ``fails: ERROR``); ``assistant_turn`` is the probe tool-call turn as
    rendered; ``end_of_turn`` the special token that closes an assistant turn;
    ``format_tokens`` the special tokens the template writes; ``eos_problem`` /
    ``pad_problem`` say why those tokens cannot train (None when they can).
    """

    has_template: bool
    tools_rendered: bool
    tools_detail: str
    tool_calls_rendered: bool
    tool_calls_detail: str
    assistant_turn: str | None
    end_of_turn: str | None
    format_tokens: tuple[str, ...]
    eos_token: str | None
    eos_token_id: int | None
    eos_problem: str | None
    pad_token: str | None
    pad_token_id: int | None
    pad_problem: str | None
    context_length: int | None
    context_source: str | None

    def problems(self, *, native_tools: bool) -> list[tuple[str, str]]:
        """``(what, hint)`` for each reason a run cannot train on this tokenizer; the tool
        checks only when the run passes tools natively."""
        if not self.has_template:
            return [("it has no chat template",
                     "give the tokenizer a chat template (chat_template.jinja in the "
                     "checkpoint, or tokenizer.chat_template)")]
        out: list[tuple[str, str]] = []
        if native_tools and not self.tools_rendered:
            out.append((f"its chat template drops tools= ({self.tools_detail}), so the model "
                        "never sees the harness's tool schemas", TEMPLATE_HINT))
        if native_tools and not self.tool_calls_rendered:
            out.append((f"its chat template drops the assistant's tool calls "
                        f"({self.tool_calls_detail}), so every tool-call turn trains as an "
                        "empty turn", TEMPLATE_HINT))
        token_hint = ("set the tokenizer's eos_token to the token that ends an assistant turn"
                      + (f" ({self.end_of_turn!r})" if self.end_of_turn else "")
                      + " and pad_token to one the template never writes (e.g. "
                      "'<|endoftext|>'), in tokenizer_config.json or on the tokenizer")
        for problem in (self.eos_problem, self.pad_problem):
            if problem is not None:
                out.append((problem, token_hint))
        return out

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["format_tokens"] = list(self.format_tokens)
        return data


def inspect_template(tokenizer: Any, config: Any = None) -> TemplateReport:
    """Render the probes (module docstring) through ``tokenizer``'s chat template.
    ``config``: the model's config, for the context length (the tokenizer's
    ``model_max_length`` otherwise)."""
    context, source = _context_length(tokenizer, config)
    eos, pad = _token(tokenizer, "eos"), _token(tokenizer, "pad")
    if not getattr(tokenizer, "chat_template", None):
        return TemplateReport(
            has_template=False, tools_rendered=False, tools_detail="no chat template",
            tool_calls_rendered=False, tool_calls_detail="no chat template",
            assistant_turn=None, end_of_turn=None, format_tokens=(), eos_token=eos[0],
            eos_token_id=eos[1], eos_problem=None, pad_token=pad[0], pad_token_id=pad[1],
            pad_problem=None, context_length=context, context_source=source)
    tools = [_probe_tool()]
    prompt, prompt_error = _render(tokenizer, [_USER], tools, generation_prompt=True)
    tools_rendered = prompt is not None and PROBE_TOOL in prompt
    tools_detail = ("rendered" if tools_rendered else f"fails: {prompt_error}"
                    if prompt is None else
                    f"a probe tool schema named {PROBE_TOOL!r} does not appear in the prompt")

    call_turn, call_error = _render(tokenizer, [_USER, _probe_call()], tools,
                                    generation_prompt=False)
    assistant_turn = None if call_turn is None else _after_prefix(tokenizer, call_turn, tools)
    calls_rendered = (call_turn is not None and PROBE_CALL in call_turn
                      and PROBE_ARGUMENT in call_turn)
    calls_detail = ("rendered" if calls_rendered else f"fails: {call_error}"
                    if call_turn is None else
                    f"a probe call to {PROBE_CALL!r} renders as {assistant_turn!r}")

    specials = _special_tokens(tokenizer)
    reply, _ = _render(tokenizer, [_USER, {"role": "assistant", "content": _PROBE_TEXT}],
                       None, generation_prompt=False)
    generation, _ = _render(tokenizer, [_USER], None, generation_prompt=True)
    bos = _token(tokenizer, "bos")[0]
    # A bos written once at the start of a conversation marks no turn (some models' eos is
    # their bos too); the tokens that open and close turns are what an eos must not be.
    written = "".join(text[len(bos):] if bos and text.startswith(bos) else text
                      for text in (reply, generation, prompt, call_turn) if text)
    format_tokens = tuple(sorted(t for t in specials if t in written))
    end_of_turn = None
    if reply is not None and _PROBE_TEXT in reply:
        closing = reply[reply.rfind(_PROBE_TEXT) + len(_PROBE_TEXT):]
        found = [(closing.find(t), t) for t in specials if t in closing]
        end_of_turn = min(found)[1] if found else None

    eos_problem = None
    if eos[0] is not None and eos[0] in format_tokens and eos[0] != end_of_turn:
        eos_problem = (f"eos token {eos[0]!r} is another token of the chat format: the template "
                       f"writes it where no assistant turn ends"
                       + (f" (an assistant turn ends with {end_of_turn!r})" if end_of_turn
                          else ""))
    pad_problem = None
    padding = pad[0] if pad[0] is not None else eos[0]
    if padding is not None and padding in format_tokens and padding != end_of_turn:
        pad_problem = ((f"pad token {padding!r}" if pad[0] is not None else
                        f"no pad token, so trainers pad with the eos {padding!r}, which")
                       + " is another token of the chat format: padding would look like the "
                         "turn markup the template writes")
    return TemplateReport(
        has_template=True, tools_rendered=tools_rendered, tools_detail=tools_detail,
        tool_calls_rendered=calls_rendered, tool_calls_detail=calls_detail,
        assistant_turn=assistant_turn, end_of_turn=end_of_turn, format_tokens=format_tokens,
        eos_token=eos[0], eos_token_id=eos[1], eos_problem=eos_problem, pad_token=pad[0],
        pad_token_id=pad[1], pad_problem=pad_problem, context_length=context,
        context_source=source)


def require_trainable_template(tokenizer: Any, *, native_tools: bool, model: str,
                               config: Any = None, harnesses: Sequence[str] = ()
                               ) -> TemplateReport:
    """:func:`inspect_template`, raising :class:`ConfigError` naming every problem when a run
    (through native-tool harnesses when ``native_tools``; ``harnesses`` names them in the
    message) could not train on ``tokenizer``."""
    report = inspect_template(tokenizer, config)
    problems = report.problems(native_tools=native_tools)
    if problems:
        through = ""
        if native_tools and harnesses and not (report.tools_rendered
                                               and report.tool_calls_rendered):
            shown = ", ".join(harnesses[:4]) + (", ..." if len(harnesses) > 4 else "")
            through = f" (the run's harnesses {shown} pass tools natively)"
        hints = list(dict.fromkeys(hint for _, hint in problems))
        raise ConfigError(f"model {model!r} cannot be trained{through}: "
                          + "; ".join(what for what, _ in problems),
                          hint="; ".join(hints) + f" (see `harnessgrid model check {model}`)")
    return report


def untrainable_rows(tokenizer: Any, rows: Sequence[tuple[Sequence[int], Sequence[int]]]
                     ) -> list[int]:
    """Indices of the ``(input_ids, loss_mask)`` rows whose masked tokens are nothing but
    special (end-of-turn) tokens and whitespace."""
    special = _special_ids(tokenizer)
    bad = []
    for index, (ids, mask) in enumerate(rows):
        trained = [int(i) for i, m in zip(ids, mask, strict=True) if m and int(i) not in special]
        text = tokenizer.decode(trained, skip_special_tokens=True) if trained else ""
        if not str(text).strip():
            bad.append(index)
    return bad


def require_trainable_rows(tokenizer: Any, rows: Sequence[tuple[Sequence[int], Sequence[int]]],
                           *, model: str, where: str = "") -> None:
    """Refuse when at least half of ``rows`` (up to :data:`ROWS_SAMPLE`, spread evenly) train
    only end-of-turn tokens; warn when some do."""
    step = max(1, len(rows) // ROWS_SAMPLE)
    sample = list(rows[::step])
    bad = untrainable_rows(tokenizer, sample)
    if not bad:
        return
    ids, mask = sample[bad[0]]
    shown = tokenizer.decode([int(i) for i, m in zip(ids, mask, strict=True) if m],
                             skip_special_tokens=False)
    what = (f"{len(bad)} of {len(sample)} training rows{' ' + where if where else ''} train "
            f"only end-of-turn tokens (the first one's trained text: {str(shown)!r})")
    if 2 * len(bad) < len(sample):
        logger.warning("%s; those rows teach the model only to end its turn", what)
        return
    raise ConfigError(f"model {model!r}: {what}: the chat template writes the assistant's "
                      "turns as nothing but their end", hint=f"{TEMPLATE_HINT} (see "
                      f"`harnessgrid model check {model}`)")


# -- internals ----------------------------------------------------------------------------


def _probe_tool() -> dict[str, Any]:
    from harnessgrid.models import ToolSpec

    return ToolSpec(name=PROBE_TOOL, description="A probe tool.",
                    parameters={"type": "object", "properties": {"path": {"type": "string"}},
                                "required": ["path"]}).openai()


def _probe_call() -> dict[str, Any]:
    """An assistant tool-call message in the form the harnesses send (``Message.openai``)."""
    from harnessgrid.models import Message, ToolCall

    return Message(role="assistant", content="", tool_calls=(
        ToolCall(id="call_0", name=PROBE_CALL, arguments={"path": PROBE_ARGUMENT}),)).openai()


def _render(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
            *, generation_prompt: bool) -> tuple[str | None, str | None]:
    """The rendering, or None and why it failed (a template may raise on what it rejects)."""
    try:
        text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
                                             add_generation_prompt=generation_prompt)
    except Exception as exc:  # noqa: BLE001 - any template error is the answer we report
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return None, reason
    return (text, None) if isinstance(text, str) else (None, "did not render text")


def _after_prefix(tokenizer: Any, text: str, tools: list[dict[str, Any]]) -> str:
    """``text`` past the conversation before the assistant turn, when it extends it."""
    prefix, _ = _render(tokenizer, [_USER], tools, generation_prompt=False)
    return text[len(prefix):] if prefix is not None and text.startswith(prefix) else text


def _special_tokens(tokenizer: Any) -> set[str]:
    """The special tokens: the named ones and every added token marked special (a GGUF
    conversion names only a few, e.g. not ``<|im_end|>``)."""
    out = {str(t) for t in getattr(tokenizer, "all_special_tokens", None) or ()}
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    out.update(str(t.content) for t in decoder.values() if getattr(t, "special", False))
    return {t for t in out if t}


def _special_ids(tokenizer: Any) -> set[int]:
    ids = {int(i) for i in getattr(tokenizer, "all_special_ids", None) or ()}
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    ids.update(int(i) for i, t in decoder.items() if getattr(t, "special", False))
    for name in ("eos_token_id", "pad_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            ids.add(value)
    return ids


def _token(tokenizer: Any, kind: str) -> tuple[str | None, int | None]:
    token, token_id = getattr(tokenizer, f"{kind}_token", None), getattr(
        tokenizer, f"{kind}_token_id", None)
    return (str(token) if token else None,
            int(token_id) if isinstance(token_id, int) else None)


def _context_length(tokenizer: Any, config: Any) -> tuple[int | None, str | None]:
    for field in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, field, None)
        if isinstance(value, int) and value > 0:
            return value, f"config {field}"
    value = getattr(tokenizer, "model_max_length", None)
    if isinstance(value, int) and 0 < value < 10**8:  # unset is a huge sentinel
        return value, "tokenizer model_max_length"
    return None, None
