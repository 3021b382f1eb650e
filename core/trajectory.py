"""Trajectories: everything an episode produced, their JSONL store, and the OpenClaw-style
transcript that task graders read.

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
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator, Sequence
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
    """The toolchain mounted in the sandbox (name, kind, digest), see harnessgrid.environments."""
    turns: list[TurnRecord] = Field(default_factory=list)
    history: list[Message] = Field(default_factory=list)
    termination: Termination
    error: str | None = None
    score: float | None = None
    subscores: dict[str, float] = Field(default_factory=dict)
    passed: bool | None = None
    grade_error: str | None = None
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
                           and len(t["view"]) == len(w) for t, w in zip(turns, written))
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
        """The episode as OpenClaw session events (what ClawGym/PinchBench graders read)."""
        return openclaw_transcript(self.history, self.episode_id, self.mount_path,
                                   self.started_at)


#: The fields of a trajectory set after construction, by the runtime or plugins: made
#: :func:`storable` when it is stored (messages and records are clean when constructed).
_FREE_FIELDS = ("episode_id", "harness", "task_id", "suite", "policy", "mount_path", "error",
                "grade_error", "config", "subscores", "meta")
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


def openclaw_transcript(history: list[Message], session_id: str, cwd: str,
                        timestamp: float = 0.0) -> list[dict[str, Any]]:
    """Session events: a ``session`` header, then one ``message`` event per message, with
    assistant tool calls as ``toolCall`` parts (real names and arguments) and tool results as
    ``toolResult`` messages. The system prompt is not part of a session transcript."""
    events: list[dict[str, Any]] = [{"type": "session", "version": 3, "id": session_id,
                                     "timestamp": timestamp, "cwd": cwd}]
    pending: dict[str, str] = {}  # call id → tool name, to label tool results
    last_calls: list[ToolCall] = []
    for i, m in enumerate(history):
        if m.role == "system":
            continue
        if m.role == "assistant":
            content: list[dict[str, Any]] = []
            if m.content:
                content.append({"type": "text", "text": m.content})
            for c in m.tool_calls or m.parsed_calls:
                pending[c.id] = c.name
                content.append({"type": "toolCall", "id": c.id, "name": c.name,
                                "arguments": c.arguments})
            last_calls = list(m.tool_calls or m.parsed_calls)
            message: dict[str, Any] = {"role": "assistant", "content": content}
        elif m.role == "tool" or (m.kind == "observation" and last_calls):
            # Text-protocol interfaces return observations as user messages; they are still
            # results of the calls the assistant wrote, so graders see them as such.
            call_id = m.tool_call_id or (last_calls.pop(0).id if last_calls else "")
            message = {"role": "toolResult", "toolCallId": call_id,
                       "toolName": m.name or pending.get(call_id, ""),
                       "content": [{"type": "text", "text": m.content}],
                       "isError": m.kind in ("format_error", "tool_error")}
        else:
            message = {"role": m.role, "content": [{"type": "text", "text": m.content}]}
        events.append({"type": "message", "id": f"{session_id}-{i}", "message": message})
    return events


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
