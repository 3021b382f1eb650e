"""Trajectories: everything an episode produced, and their JSONL store. (The transcript task
graders read is made from a trajectory by :mod:`harnessgrid.transcripts`.)

The store appends one JSON line per trajectory with a single ``write`` on a file opened with
``O_APPEND`` and fsyncs it, so concurrent writers never interleave and a reader (or a resumed
run) sees only whole trajectories; a line cut by a crash is skipped with a warning.

**Stored views.** In memory every turn holds its full ``view``; stored whole, views make a
trajectory quadratic in its turns. So the JSON form of a :class:`Trajectory`
(``model_dump_json``, ``model_dump(mode="json")``) stores each turn's view as ``view_delta``:
a list whose items are ``["h", start, stop]`` (the messages ``history[start:stop]`` of the
trajectory), ``["v", start, stop]`` (the previous turn's ``view[start:stop]``) or a message
written out (one that is in neither, e.g. a summary the first time it is shown). Pieces are
found by :class:`Message` equality on every field, so validation rebuilds the views exactly,
and rebuilt views share their message objects with ``history`` as the runtime's do. A turn
stored with a whole ``view`` (the earlier format) is read as it is. The Python form
(``model_dump()``) keeps whole views.

**Stored replies.** What a model sends is unbounded (a 10 MB reply, 50 calls of 10,000
characters each), and a trajectory holds each reply up to three times (the turn, the history,
the call records). :func:`cap_replies` bounds each of those copies to
``EpisodeLimits.stored_reply_bytes`` (:data:`STORED_REPLY_BYTES` by default) once the episode
is over and graded: the strings of a longer reply (text, call names, arguments) are cut to a
common length, each ending in a marker with its original size, and the turn records the
reply's size in ``original_reply_bytes``. The episode ran on the whole reply; token ids are
never cut (training reads them, and a token policy's ``max_new_tokens`` bounds them).
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from harnessgrid.models import Action, Message, TokenRecord, ToolCall, ToolResult, clean_text

if TYPE_CHECKING:
    from harnessgrid.token_rows import TokenRow

Termination = Literal["finished", "max_turns", "context_overflow", "token_budget", "timeout",
                      "format_errors", "policy_error", "sandbox_error", "internal_error",
                      "cancelled"]
#: Terminations not caused by the agent: excluded from scores and group statistics instead of
#: counting as 0. ``internal_error`` is a bug in harnessgrid or a plugin (a harness or grader
#: that raised), reported with its traceback.
INFRA_FAILURES: frozenset[str] = frozenset({"policy_error", "sandbox_error", "internal_error"})


#: How deep the free-form values of a stored trajectory (``meta``) may nest; deeper ones are
#: stored as a note. Far below the JSON readers' recursion limits (pydantic's is 200).
MAX_STORED_DEPTH = 64


def storable(value: Any, depth: int = MAX_STORED_DEPTH) -> Any:
    """``value`` as a JSON value every reader can read back: strings without lone surrogates
    (U+FFFD instead), dict keys as strings, at most ``depth`` levels of lists and dicts (what
    is deeper becomes a note), values that are not JSON as their ``repr``. Not recursive, so
    any depth is walked safely."""
    root: list[Any] = []
    stack: list[tuple[Any, list[Any] | dict[str, Any], Any, int]] = [(value, root, 0, 0)]
    while stack:
        item, target, key, level = stack.pop()
        if isinstance(item, str):
            out: Any = clean_text(item)
        elif item is None or isinstance(item, bool | int | float):
            out = item
        elif isinstance(item, dict | list | tuple):
            if level >= depth:
                out = f"<not stored: nested deeper than {depth} levels>"
            elif isinstance(item, dict):
                out = {}
                for k, v in item.items():
                    k = clean_text(k) if isinstance(k, str) else str(k)
                    out[k] = None  # keeps the order of the keys
                    stack.append((v, out, k, level + 1))
            else:
                out = [None] * len(item)
                for i, v in enumerate(item):
                    stack.append((v, out, i, level + 1))
        else:
            out = clean_text(repr(item))
        if isinstance(target, dict):
            target[key] = out
        elif target is root:
            root.append(out)
        else:
            target[key] = out
    return root[0]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_lone_surrogates(cls, value: Any) -> Any:
        return clean_text(value) if isinstance(value, str) else value


class CallRecord(_Record):

    call: ToolCall
    action: Action
    result: ToolResult


class TurnRecord(_Record):
    """One model turn: what the model saw and wrote, what ran, and what it cost."""

    index: int
    view: list[Message]  # exactly the messages the model was given
    assistant: Message
    tokens: TokenRecord | None = None
    #: Why generation stopped: ``"stop"`` (an end-of-turn token), ``"length"`` (cut by the
    #: per-turn token limit; the harness closed the turn), or what an API reported.
    finish_reason: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    calls: list[CallRecord] = Field(default_factory=list)
    format_error: str | None = None
    appended: list[Message] = Field(default_factory=list)  # what the harness added afterwards
    new_segment: bool = False
    #: Set when the reply is stored cut (:func:`cap_replies`): its size in bytes as the model
    #: sent it (the JSON form of ``assistant`` before the cut). None: stored whole.
    original_reply_bytes: int | None = None
    #: Where the turn's wall time went (:mod:`harnessgrid.timing`): the policy call, the tool
    #: executions host-side (round trip included), the CPU of harness code, and the rest,
    #: waiting for the event loop (or the CPU) while other episodes ran. They add up to
    #: ``wall_s``. Trajectories stored before ``wait_s`` and ``wall_s`` existed read them as 0.
    model_s: float = 0.0
    tools_s: float = 0.0
    harness_s: float = 0.0
    wait_s: float = 0.0
    wall_s: float = 0.0


class Trajectory(BaseModel):
    """An episode, end to end. ``score`` is None when the episode was not graded (an
    infrastructure failure, a grader error, or a task without grader)."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    harness: str
    config: dict[str, str] | None = None
    task_id: str
    suite: str = ""
    policy: str
    mount_path: str = "/workspace"
    environment: dict[str, str] | None = None
    """The toolchain mounted in the sandbox (name, kind, digest), see
    harnessgrid.sandboxing.environments."""
    turns: list[TurnRecord] = Field(default_factory=list)
    history: list[Message] = Field(default_factory=list)
    termination: Termination
    error: str | None = None
    score: float | None = None
    subscores: dict[str, float] = Field(default_factory=dict)
    passed: bool | None = None
    grade_error: str | None = None
    #: How the score was reached (:data:`harnessgrid.tasks.GRADINGS`); ``grading_note`` says
    #: why a partial one (``automated_only``) is no pass. Trajectories stored before these
    #: fields read them from their scores (:func:`harnessgrid.tasks.infer_grading`).
    grading: str = "ungraded"
    grading_note: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    wall_s: float = 0.0
    model_s: float = 0.0
    tools_s: float = 0.0
    harness_s: float = 0.0
    wait_s: float = 0.0  # the turns' parts, summed (see TurnRecord)
    grade_s: float = 0.0
    segments: int = 1
    started_at: float = 0.0
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _store_view_deltas(self, handler: SerializerFunctionWrapHandler,
                           info: SerializationInfo) -> dict[str, Any]:
        """JSON form: each turn's ``view`` as a ``view_delta`` (module doc), and the fields
        set after construction (``error``, ``meta``, ...) made :func:`storable`."""
        if not info.mode_is_json():
            return dict(handler(self))
        safe = self.model_copy()
        for name in _FREE_FIELDS:
            safe.__dict__[name] = storable(getattr(self, name))
        return safe._json_form(handler, info)

    def _json_form(self, handler: SerializerFunctionWrapHandler,
                   info: SerializationInfo) -> dict[str, Any]:
        if not self.turns or info.include is not None or info.exclude is not None:
            return dict(handler(self))  # what include/exclude keep may not hold the pieces
        deltas = view_deltas([t.view for t in self.turns], self.history)
        written = [[p for p in d if isinstance(p, Message)] for d in deltas]
        # Serialise only the messages written out, with the caller's options, in place of the
        # views; then put the references back around them.
        slim = self.model_copy()
        slim.__dict__["turns"] = [_with_view(t, w)
                                  for t, w in zip(self.turns, written, strict=True)]
        out = dict(handler(slim))
        turns = out.get("turns")
        history = out.get("history")
        uses_history = any(isinstance(p, tuple) and p[0] == "h" for d in deltas for p in d)
        if (not isinstance(turns, list) or len(turns) != len(deltas)
                or not all(isinstance(t, dict) and isinstance(t.get("view"), list)
                           and len(t["view"]) == len(w)
                           for t, w in zip(turns, written, strict=True))
                or (uses_history and not (isinstance(history, list)
                                          and len(history) == len(self.history)))):
            # exclude_unset / exclude_defaults dropped what the pieces refer to
            return dict(handler(self))
        for turn, delta in zip(turns, deltas, strict=True):
            messages = iter(turn.pop("view"))
            turn[VIEW_DELTA] = [list(p) if isinstance(p, tuple) else next(messages)
                                for p in delta]
        return out

    @model_validator(mode="before")
    @classmethod
    def _stored_grading(cls, data: Any) -> Any:
        """A trajectory stored before ``grading`` existed: say what its scores show."""
        if isinstance(data, dict) and "grading" not in data and "score" in data:
            from harnessgrid.tasks import infer_grading

            data = {**data, "grading": infer_grading(data.get("score"), data.get("subscores"),
                                                     data.get("grade_error"))}
        return data

    @model_validator(mode="before")
    @classmethod
    def _expand_view_deltas(cls, data: Any) -> Any:
        """Rebuild the views of turns stored as ``view_delta``; whole views pass as they are."""
        if not isinstance(data, dict) or not isinstance(data.get("turns"), list) or not any(
                isinstance(t, dict) and VIEW_DELTA in t for t in data["turns"]):
            return data
        data = dict(data)  # never change the caller's data
        history: list[Any] = []
        if isinstance(data.get("history"), list):
            history = data["history"] = [_shared(m) for m in data["history"]]
        previous: list[Any] = []
        turns: list[Any] = []
        for n, turn in enumerate(data["turns"]):
            if isinstance(turn, dict) and VIEW_DELTA in turn:
                turn = dict(turn)
                if "view" in turn:
                    raise ValueError(f"turns.{n}: both view and {VIEW_DELTA}")
                turn["view"] = _expand(turn.pop(VIEW_DELTA), history, previous, n)
            turns.append(turn)
            view = turn.get("view") if isinstance(turn, dict) else getattr(turn, "view", None)
            previous = view if isinstance(view, list) else []
        data["turns"] = turns
        return data

    @property
    def infra_failure(self) -> bool:
        return self.termination in INFRA_FAILURES

    def well_formed_turns(self) -> int:
        """How many of the model's turns spoke the harness's protocol: the reply parsed and
        made a call the harness accepted, or was the plan a plan-first workflow asked for
        (kept as a message of kind ``plan``). A text-only reply where a call was due, or a
        call the harness rejected, does not count. Whether a policy speaks each harness's
        protocol is what a harness change breaks first, and what a small model learns long
        before it solves tasks."""
        return sum(1 for t in self.turns if t.format_error is None and (
            bool(t.calls) or any(m.kind == "plan" for m in t.appended)))

    def token_rows(self) -> list[TokenRow]:
        """The episode as training rows, one per append-only token segment (see
        :mod:`harnessgrid.token_rows`); empty when the policy recorded no token ids."""
        from harnessgrid.token_rows import token_rows

        return token_rows(self)

    def transcript(self) -> list[dict[str, Any]]:
        """Deprecated since 0.2.3 (removed in 0.4.0): the generic session events,
        :func:`harnessgrid.transcripts.session_events`. What graders of an episode read
        depends on its harness too (a shell may write its own):
        :func:`harnessgrid.harness.grading_transcript`."""
        from harnessgrid.transcripts import session_events

        warnings.warn("Trajectory.transcript() is deprecated since 0.2.3 and will be removed "
                      "in 0.4.0; use harnessgrid.transcripts.session_events(trajectory), or "
                      "harnessgrid.harness.grading_transcript(harness, trajectory) for what "
                      "graders read", DeprecationWarning, stacklevel=2)
        return session_events(self)


def internal_error(*, harness: str, task_id: str, suite: str, policy: str, episode_id: str,
                   error: str) -> Trajectory:
    """The trajectory of an episode that did not come back whole (it raised out of the
    runtime, or its worker died): ``internal_error``, an infrastructure failure that a resume
    runs again, never a score. Every runner reports such an episode through here."""
    return Trajectory(episode_id=episode_id, harness=harness, task_id=task_id, suite=suite,
                      policy=policy, termination="internal_error", error=error,
                      started_at=time.time())


#: The fields of a trajectory set after construction, by the runtime or plugins: made
#: :func:`storable` when it is stored (messages and records are clean when constructed).
_FREE_FIELDS = ("episode_id", "harness", "task_id", "suite", "policy", "mount_path", "error",
                "grade_error", "grading_note", "config", "subscores", "meta")
#: The key a stored turn holds instead of ``view`` (module doc).
VIEW_DELTA = "view_delta"
#: A piece of a stored view: ``("h" | "v", start, stop)``, a slice of the trajectory's history
#: or of the previous turn's view, or a message written out.
ViewPiece = tuple[str, int, int] | Message
#: Places tried for a piece starting with a message equal to, but not the same object as, one
#: already stored (the longest run wins); bounded so that many equal messages (the same short
#: observation, over and over) keep encoding linear.
_CANDIDATES = 8


class _Pool:
    """Messages that views may refer to, found by identity (the runtime's views and rebuilt
    ones share their message objects with the history), else by (role, content)."""

    def __init__(self, tag: str, messages: Sequence[Message]) -> None:
        self.tag = tag
        self.messages = messages
        self.ids: dict[int, int] = {}
        for i, m in enumerate(messages):
            self.ids.setdefault(id(m), i)
        self._index: dict[tuple[str, str], list[int]] | None = None

    def equal(self, m: Message) -> Iterator[int]:
        """Where messages equal to ``m`` may be (the first few with its role and content)."""
        if self._index is None:
            self._index = {}
            for i, mine in enumerate(self.messages):
                self._index.setdefault((mine.role, mine.content), []).append(i)
        return islice(self._index.get((m.role, m.content), ()), _CANDIDATES)

    def run(self, start: int, view: Sequence[Message], at: int) -> int:
        """How many messages from ``view[at]`` on equal ``messages[start:]``."""
        n = min(len(self.messages) - start, len(view) - at)
        k = 0
        while k < n:
            mine, theirs = self.messages[start + k], view[at + k]
            if mine is not theirs and mine != theirs:
                break
            k += 1
        return k


def view_deltas(views: Sequence[Sequence[Message]],
                history: Sequence[Message]) -> list[list[ViewPiece]]:
    """Each view as pieces of ``history``, of the view before it, and messages written out.

    Greedy and linear in the views' lengths: at each position, the longest run from where the
    same message object is (history first on ties), else from at most :data:`_CANDIDATES`
    places of equal messages per source, else the message itself."""
    past = _Pool("h", history)
    previous = _Pool("v", [])
    out: list[list[ViewPiece]] = []
    for view in views:
        pieces: list[ViewPiece] = []
        at = 0
        while at < len(view):
            best: tuple[int, str, int] | None = None  # (length, tag, start)
            for pool in (past, previous):
                start = pool.ids.get(id(view[at]))
                if start is not None:
                    length = pool.run(start, view, at)
                    if best is None or length > best[0]:
                        best = (length, pool.tag, start)
            if best is None:
                for pool in (past, previous):
                    for start in pool.equal(view[at]):
                        length = pool.run(start, view, at)
                        if length and (best is None or length > best[0]):
                            best = (length, pool.tag, start)
                        if length == len(view) - at:
                            break  # the rest of the view: nothing is longer
            if best is None:
                pieces.append(view[at])
                at += 1
            else:
                length, tag, start = best
                pieces.append((tag, start, start + length))
                at += length
        out.append(pieces)
        previous = _Pool("v", view)
    return out


def _with_view(turn: TurnRecord, view: list[Message]) -> TurnRecord:
    copy = turn.model_copy()
    copy.__dict__["view"] = view  # not an assignment: fields set stay as they were
    return copy


def _shared(raw: Any) -> Any:
    """A stored message as a :class:`Message`, so that every view refers to one object; left
    raw when invalid, for the model's own validation to report where it is."""
    if isinstance(raw, dict):
        try:
            return Message.model_validate(raw)
        except ValidationError:
            return raw
    return raw


def _expand(delta: Any, history: list[Any], previous: list[Any], n: int) -> list[Any]:
    if not isinstance(delta, list):
        raise ValueError(f"turns.{n}.{VIEW_DELTA}: a list expected")
    view: list[Any] = []
    for i, piece in enumerate(delta):
        if isinstance(piece, list | tuple):
            if len(piece) == 3 and piece[0] in ("h", "v"):
                source = history if piece[0] == "h" else previous
                start, stop = piece[1], piece[2]
                if type(start) is int and type(stop) is int and 0 <= start < stop <= len(source):
                    view.extend(source[start:stop])
                    continue
            raise ValueError(f"turns.{n}.{VIEW_DELTA}.{i}: {piece!r} is not a slice "
                             "[\"h\" or \"v\", start, stop] of the history or previous view")
        view.append(_shared(piece))
    return view


# --- stored replies (module doc) -----------------------------------------------------------

#: The default of ``EpisodeLimits.stored_reply_bytes``: the most bytes one copy of a model
#: reply takes in a stored trajectory. Far above a normal reply (a few KB, a whole file
#: written), far below what a runaway or hostile model may send.
STORED_REPLY_BYTES = 256 * 1024
#: Room kept for the marker that ends a cut string (``[... harnessgrid: stored N of M bytes]``).
_MARKER_BYTES = 96
#: When less than 1/_STRUCTURE_SHARE of the limit is left for strings, a reply is mostly
#: structure (arguments holding a million numbers): its calls' arguments are stored as their
#: JSON text instead (``raw_arguments``), which can be cut.
_STRUCTURE_SHARE = 4

#: What a stored copy of a reply is made of: the message, or its calls and their actions.
ReplyPart = Message | ToolCall | Action


def stored_size(part: BaseModel) -> int:
    """Bytes of ``part``'s JSON form, as a trajectory stores it."""
    return len(part.model_dump_json().encode())


def cap_reply(message: Message, limit: int) -> Message:
    """``message`` (a model reply) as stored: itself when its JSON form takes at most
    ``limit`` bytes, else a copy with its strings cut (:func:`fit_reply`)."""
    [out] = fit_reply([message], limit)
    assert isinstance(out, Message)
    return out


def cap_calls(records: list[CallRecord], limit: int) -> list[CallRecord]:
    """One turn's call records with their calls and actions (the reply's arguments again) cut
    together to ``limit`` bytes; ``records`` itself when they fit."""
    parts: list[ReplyPart] = [p for r in records for p in (r.call, r.action)]
    cut = fit_reply(parts, limit)
    if cut is parts:
        return records
    return [r.model_copy(update={"call": call, "action": action})
            for r, call, action in zip(records, cut[::2], cut[1::2], strict=True)]


def fit_reply(parts: list[ReplyPart], limit: int) -> list[ReplyPart]:
    """``parts`` with every string longer than one common length cut to it, each cut ending in
    a marker with its original size, so that their JSON forms take at most ``limit`` bytes
    together; ``parts`` itself when they fit. Arguments that are mostly structure are first
    replaced by their JSON text, which can be cut. Ids, roles and kinds are never cut."""
    total = sum(stored_size(p) for p in parts)
    if total <= limit:
        return parts
    length = _common_length(parts, total, limit)
    if length is None:
        parts = [_arguments_as_text(p) for p in parts]
        length = _common_length(parts, sum(stored_size(p) for p in parts), limit) or 0
    cut = _Cut(length)
    return [cut.part(p) for p in parts]


def _common_length(parts: list[ReplyPart], total: int, limit: int) -> int | None:
    """The length (JSON bytes) to cut every longer string of ``parts`` to, so that the parts
    take ``limit`` bytes: short strings stay whole and leave their share to the long ones.
    None when the structure around the strings leaves them too little room."""
    sizes = sorted(_json_len(text) for p in parts for text in _strings(p))
    room = limit - (total - sum(sizes))
    if room < limit // _STRUCTURE_SHARE:
        return None
    for i, size in enumerate(sizes):
        share = room // (len(sizes) - i)
        if size > share:  # this one and every longer one get the same share
            return max(0, share - _MARKER_BYTES)
        room -= size
    return room  # not reached: the parts did not fit, so some string is longer than its share


def _json_len(text: str) -> int:
    """Bytes of ``text`` inside a JSON string (escapes included, quotes not)."""
    return len(json.dumps(text, ensure_ascii=False).encode()) - 2


def _strings(part: ReplyPart) -> Iterator[str]:
    """The strings of a reply part that the model wrote (what :class:`_Cut` may cut)."""
    if isinstance(part, Action):
        yield from part.args.values()
        return
    calls = (part,) if isinstance(part, ToolCall) else (*part.tool_calls, *part.parsed_calls)
    if isinstance(part, Message):
        yield part.content
    for call in calls:
        yield call.name
        if call.raw_arguments is not None:
            yield call.raw_arguments
        yield from _leaves(call.arguments)


def _leaves(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def _arguments_as_text(part: ReplyPart) -> ReplyPart:
    """``part`` with each call's arguments as JSON text in ``raw_arguments`` (and ``{}``)."""
    def as_text(call: ToolCall) -> ToolCall:
        if not call.arguments:
            return call
        raw = call.raw_arguments
        return call.model_copy(update={"arguments": {}, "raw_arguments": raw if raw is not None
                                       else json.dumps(call.arguments, ensure_ascii=False)})

    if isinstance(part, ToolCall):
        return as_text(part)
    if isinstance(part, Message):
        return part.model_copy(update={"tool_calls": tuple(map(as_text, part.tool_calls)),
                                       "parsed_calls": tuple(map(as_text, part.parsed_calls))})
    return part


class _Cut:
    """Cuts each string longer than ``length`` JSON bytes (and the marker) to ``length``."""

    def __init__(self, length: int) -> None:
        self.length = length

    def text(self, text: str) -> str:
        if _json_len(text) <= self.length + _MARKER_BYTES:
            return text
        head = text.encode()[:self.length].decode("utf-8", "ignore")
        while (over := _json_len(head) - self.length) > 0:  # escapes take more than a byte
            head = head[:len(head) - max(1, over // 6)]
        return (f"{head} [... harnessgrid: stored {len(head.encode()):,} of "
                f"{len(text.encode()):,} bytes]")

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):  # arguments nest at most MAX_ARGUMENT_DEPTH levels
            return {key: self.value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        return value

    def call(self, call: ToolCall) -> ToolCall:
        raw = call.raw_arguments
        return call.model_copy(update={"name": self.text(call.name),
                                       "arguments": self.value(call.arguments),
                                       "raw_arguments": None if raw is None else self.text(raw)})

    def part(self, part: ReplyPart) -> ReplyPart:
        if isinstance(part, Action):
            return part.model_copy(update={"args": {k: self.text(v)
                                                    for k, v in part.args.items()}})
        if isinstance(part, ToolCall):
            return self.call(part)
        return part.model_copy(update={"content": self.text(part.content),
                                       "tool_calls": tuple(map(self.call, part.tool_calls)),
                                       "parsed_calls": tuple(map(self.call, part.parsed_calls))})


class _StoredReplies:
    """Each assistant message capped once, by identity, so that views keep sharing their
    messages with the history (what their stored deltas refer to)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._seen: dict[int, tuple[Message, Message]] = {}  # id → (original, stored)

    def __call__(self, message: Message) -> Message:
        if message.role != "assistant":
            return message
        seen = self._seen.get(id(message))
        if seen is None:
            seen = self._seen[id(message)] = (message, cap_reply(message, self.limit))
        return seen[1]


def cap_replies(traj: Trajectory, limit: int) -> int:
    """Cut, in place, each copy of a model reply that takes more than ``limit`` bytes stored
    (module doc): the assistant messages of the history, views and turns, and each turn's
    call records; a cut turn records ``original_reply_bytes``. Token records stay whole.
    Returns how many turns were cut."""
    stored: Callable[[Message], Message] = _StoredReplies(limit)
    traj.history = [stored(m) for m in traj.history]
    cut = 0
    for turn in traj.turns:
        assistant, calls = stored(turn.assistant), cap_calls(turn.calls, limit)
        if assistant is not turn.assistant or calls is not turn.calls:
            turn.original_reply_bytes = (turn.original_reply_bytes
                                         or stored_size(turn.assistant))
            turn.assistant, turn.calls = assistant, calls
            cut += 1
        turn.view = [stored(m) for m in turn.view]
        turn.appended = [stored(m) for m in turn.appended]
    return cut


class TrajectoryStore:
    """Append-only JSONL file of trajectories."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def append(self, trajectory: Trajectory) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = trajectory_line(trajectory)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)  # one write of a whole line: O_APPEND keeps writers apart
            os.fsync(fd)
        finally:
            os.close(fd)

    def __iter__(self) -> Iterator[Trajectory]:
        """Every stored trajectory; a line that cannot be read (edited, or written by an
        older version that stored what it cannot read back) is reported and skipped."""
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            for n, raw in enumerate(f, 1):
                if not raw.endswith(b"\n"):
                    warnings.warn(f"{self.path}:{n}: skipping an incomplete last line "
                                  "(a writer was interrupted)", stacklevel=2)
                    return
                if not raw.strip():
                    continue
                traj = read_trajectory_line(raw, f"{self.path}:{n}")
                if traj is not None:
                    yield traj

    def load(self) -> list[Trajectory]:
        return list(self)


def trajectory_line(trajectory: Trajectory) -> bytes:
    """The trajectory as one stored JSON line. Never raises for what an episode may hold: if
    the JSON form cannot be encoded (a value set by a plugin that is not JSON, a string that
    bypassed validation), every value is made :func:`storable` instead."""
    try:
        return (trajectory.model_dump_json() + "\n").encode()
    except (ValueError, RecursionError, UnicodeError) as exc:  # PydanticSerializationError
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    try:
        data = trajectory.model_dump(mode="json", warnings=False)
    except (ValueError, RecursionError, UnicodeError):
        data = {name: getattr(trajectory, name) for name in ("episode_id", "harness", "config",
                                                             "task_id", "suite", "policy",
                                                             "termination", "meta")}
        data["error"] = f"{trajectory.error or ''}\n[harnessgrid: turns not stored: {reason}]"
    data["meta"] = {**(data.get("meta") or {}), "storage_repair": clean_text(reason)}
    return (json.dumps(storable(data, depth=MAX_STORED_DEPTH * 2), ensure_ascii=False)
            + "\n").encode()


def read_trajectory_line(raw: bytes, where: str) -> Trajectory | None:
    """A stored line as a trajectory, or None with a warning naming ``where`` when it cannot
    be read (a resume then runs that episode again instead of crashing)."""
    try:
        return Trajectory.model_validate_json(raw)
    except (ValueError, RecursionError) as exc:  # ValidationError included
        first = str(exc).splitlines()
        warnings.warn(f"{where}: skipping a trajectory that cannot be read "
                      f"({' '.join(first[:3])[:300]})", stacklevel=3)
        return None


def load_trajectories(path: str | Path) -> list[Trajectory]:
    return TrajectoryStore(path).load()


def dumps_transcript(events: list[dict[str, Any]]) -> str:
    """The transcript as a JSONL session file."""
    return "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events)


if not TYPE_CHECKING:  # names that moved out (harnessgrid._deprecated)
    from harnessgrid._deprecated import module_getattr

    __getattr__ = module_getattr(__name__)
