"""An episode as an OpenClaw session file: JSONL events as OpenClaw writes them.

The generic exporter (:func:`harnessgrid.trajectory.openclaw_transcript`) serves graders of any
harness. This one is exact for the adapter: a ``session`` header with an ISO timestamp, then
entries chained by ``id`` / ``parentId`` — ``message`` entries (``user``, ``assistant`` with
``text`` and ``toolCall`` parts, ``toolResult`` with ``toolCallId``, ``toolName`` and a true
``isError``) and a ``compaction`` entry (``summary``, ``firstKeptEntryId``, ``tokensBefore``)
where the session was compacted. The system prompt is not part of a session file.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from harnessgrid.models import Message
from harnessgrid.plugins.adapters._openclaw_context import compaction_meta
from harnessgrid.trajectory import Trajectory, TurnRecord


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def _entry_id(session: str, index: int) -> str:
    return hashlib.sha256(f"{session}:{index}".encode()).hexdigest()[:8]


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def session_events(traj: Trajectory) -> list[dict[str, Any]]:
    """The trajectory's history as OpenClaw session events (what ClawGym/PinchBench graders
    read). Timestamps are ``started_at`` plus one millisecond per entry, so files are
    reproducible and ordered."""
    sid = traj.episode_id
    start = traj.started_at
    provider, _, model = traj.policy.partition(":")
    usage = iter(traj.turns)
    ids = {i: _entry_id(sid, i) for i in range(len(traj.history))}
    events: list[dict[str, Any]] = [{"type": "session", "version": 3, "id": sid,
                                     "timestamp": _iso(start), "cwd": traj.mount_path}]
    names: dict[str, str] = {}
    parent: str | None = None
    for i, m in enumerate(traj.history):
        if m.role == "system":
            continue
        when = start + (i + 1) / 1000
        ms = int(when * 1000)
        head: dict[str, Any] = {"id": ids[i], "parentId": parent, "timestamp": _iso(when)}
        if m.kind == "compaction":
            first_kept, tokens_before, summary = compaction_meta(m)
            events.append({"type": "compaction", **head, "summary": summary,
                           "firstKeptEntryId": ids.get(first_kept), "tokensBefore": tokens_before})
        else:
            events.append({"type": "message", **head,
                           "message": _message(m, ms, names, next(usage, None) if
                                               m.role == "assistant" else None,
                                               provider, model or provider)})
        parent = ids[i]
    return events


def _message(m: Message, ms: int, names: dict[str, str], turn: TurnRecord | None, provider: str,
             model: str) -> dict[str, Any]:
    if m.role == "assistant":
        content = _text(m.content) if m.content else []
        for c in m.tool_calls:
            names[c.id] = c.name
            content.append({"type": "toolCall", "id": c.id, "name": c.name,
                            "arguments": c.arguments})
        tokens_in = turn.tokens_in if turn is not None else 0
        tokens_out = turn.tokens_out if turn is not None else 0
        return {"role": "assistant", "content": content, "api": "openai-completions",
                "provider": provider, "model": model,
                "usage": {"input": tokens_in, "output": tokens_out, "cacheRead": 0,
                          "cacheWrite": 0, "totalTokens": tokens_in + tokens_out,
                          "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                                   "total": 0}},
                "stopReason": "toolUse" if m.tool_calls else "stop", "timestamp": ms}
    if m.role == "tool":
        call_id = m.tool_call_id or ""
        return {"role": "toolResult", "toolCallId": call_id,
                "toolName": m.name or names.get(call_id, ""), "content": _text(m.content),
                "isError": m.kind in ("tool_error", "format_error"), "timestamp": ms}
    return {"role": "user", "content": _text(m.content), "timestamp": ms}


def session_jsonl(traj: Trajectory) -> str:
    """The session file's text: one JSON event per line."""
    return "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in session_events(traj))
