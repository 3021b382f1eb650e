"""An episode as an OpenClaw session file: JSONL events as OpenClaw writes them.

The generic exporter (:func:`harnessgrid.transcripts.session_events`) serves graders of
any harness. This one is exact for the adapter (pi-coding-agent 0.55.1's ``SessionManager``, as
OpenClaw 2026.2.26 drives it): a ``session`` header with an ISO timestamp; the two entries a new
session starts with, ``model_change`` (provider, model id) and ``thinking_level_change``
(OpenClaw's default, ``off``); then entries chained by ``id`` / ``parentId`` — ``message``
entries (``user``; ``assistant`` with ``text`` and ``toolCall`` parts and the provider's
``api``; ``toolResult`` with ``toolCallId``, ``toolName``, ``details`` and ``isError``, true
only for a call the schema check refused: a tool that threw has a normal result whose
``details`` are its ``{status, tool, error}`` payload)
and ``compaction`` entries (``summary``, ``firstKeptEntryId``, ``tokensBefore`` and
``details`` with the files read and modified before the cut). The system prompt is not part of a
session file. Episodes of the 2026.9.6 emulation are written in the same format: its session
files were not re-recorded.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from datetime import UTC, datetime
from typing import Any

from harnessgrid.models import Message
from harnessgrid.plugins.adapters._openclaw_context import compaction_meta
from harnessgrid.plugins.adapters._openclaw_tools import thrown_payload
from harnessgrid.trajectory import CallRecord, Trajectory, TurnRecord


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def _entry_id(session: str, index: int) -> str:
    return hashlib.sha256(f"{session}:{index}".encode()).hexdigest()[:8]


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


#: pi-ai 0.55.1 ``models.generated.js``: the API each provider's models speak (the rest, e.g.
#: openrouter, groq, mistral, xai, huggingface, speak ``openai-completions``).
PROVIDER_APIS = {"anthropic": "anthropic-messages", "openai": "openai-responses",
                 "google": "google-generative-ai", "google-vertex": "google-vertex",
                 "amazon-bedrock": "bedrock-converse-stream",
                 "azure-openai-responses": "azure-openai-responses"}
#: LiteLLM's provider prefixes that pi-ai names differently.
_LITELLM_PROVIDERS = {"gemini": "google", "vertex_ai": "google-vertex",
                      "bedrock": "amazon-bedrock", "azure": "azure-openai-responses"}
THINKING_LEVEL = "off"  # OpenClaw's mapThinkingLevel of an unset level


def provider_model(policy: str) -> tuple[str, str]:
    """``(provider, model id)`` of a policy spec: ``litellm:openai/gpt-4o-mini`` →
    ``("openai", "gpt-4o-mini")``; other schemes are their own provider."""
    scheme, _, rest = policy.partition(":")
    if scheme == "litellm" and "/" in rest:
        provider, model = rest.split("/", 1)
        return _LITELLM_PROVIDERS.get(provider, provider), model
    return scheme, rest or scheme


def _details(record: CallRecord | None, name: str, is_error: bool, text: str,
             mount: str) -> dict[str, Any] | None:
    """A tool result's ``details`` as the real tools set them (pi-agent-core ``agent-loop``:
    ``{}`` for an ``isError`` result; ``toToolDefinitions``: the ``jsonResult`` payload for a
    tool that threw; OpenClaw's exec: status, exit code, duration, output, cwd; process: its
    status); none for read and write, whose details are empty there."""
    if is_error:
        return {}
    if record is None:
        return None
    result = record.result
    if result.error is not None and (payload := thrown_payload(text)) is not None:
        return dict(payload)
    if name not in ("exec", "process"):
        return None
    if name == "process":
        return {"status": "completed"}
    workdir = record.call.arguments.get("workdir")
    cwd = posixpath.normpath(posixpath.join(mount, workdir)) if isinstance(
        workdir, str) and workdir.strip() else mount
    if result.exit_code is None and result.output.startswith("Command still running"):
        return {"status": "running", "cwd": cwd}
    return {"status": "completed", "exitCode": result.exit_code or 0,
            "durationMs": round(result.duration_s * 1000),
            "aggregated": (result.output + result.stderr).strip(), "cwd": cwd}


def _file_lists(history: list[Message], end: int) -> dict[str, list[str]]:
    """pi-coding-agent's ``computeFileLists`` over the calls before ``end``: files only read,
    and files written or edited, each sorted."""
    read: set[str] = set()
    modified: set[str] = set()
    for m in history[:end]:
        for c in m.tool_calls:
            path = c.arguments.get("path", c.arguments.get("file_path"))
            if isinstance(path, str) and path:
                (read if c.name == "read" else modified if c.name in ("write", "edit")
                 else set()).add(path)
    return {"readFiles": sorted(read - modified), "modifiedFiles": sorted(modified)}


def session_events(traj: Trajectory) -> list[dict[str, Any]]:
    """The trajectory's history as OpenClaw session events (what ClawGym/PinchBench graders
    read). Timestamps are ``started_at`` plus one millisecond per entry, so files are
    reproducible and ordered."""
    sid = traj.episode_id
    start = traj.started_at
    provider, model = provider_model(traj.policy)
    usage = iter(traj.turns)
    records = {c.call.id: c for t in traj.turns for c in t.calls}
    ids = {i: _entry_id(sid, i) for i in range(len(traj.history))}
    events: list[dict[str, Any]] = [{"type": "session", "version": 3, "id": sid,
                                     "timestamp": _iso(start), "cwd": traj.mount_path}]
    # A new session's first two entries (pi-coding-agent sdk: appendModelChange, then
    # appendThinkingLevelChange), stamped with the session's start.
    model_id, thinking_id = _entry_id(sid, -2), _entry_id(sid, -1)
    events.append({"type": "model_change", "id": model_id, "parentId": None,
                   "timestamp": _iso(start), "provider": provider, "modelId": model})
    events.append({"type": "thinking_level_change", "id": thinking_id, "parentId": model_id,
                   "timestamp": _iso(start), "thinkingLevel": THINKING_LEVEL})
    names: dict[str, str] = {}
    parent: str | None = thinking_id
    for i, m in enumerate(traj.history):
        if m.role == "system":
            continue
        when = start + (i + 1) / 1000
        ms = int(when * 1000)
        head: dict[str, Any] = {"id": ids[i], "parentId": parent, "timestamp": _iso(when)}
        if m.kind == "compaction":
            first_kept, tokens_before, summary = compaction_meta(m)
            events.append({"type": "compaction", **head, "summary": summary,
                           "firstKeptEntryId": ids.get(first_kept), "tokensBefore": tokens_before,
                           "details": _file_lists(traj.history, first_kept)})
        else:
            message = _message(m, ms, names, next(usage, None) if m.role == "assistant" else None,
                               provider, model)
            if m.role == "tool":
                details = _details(records.get(m.tool_call_id or ""), message["toolName"],
                                   message["isError"], m.content, traj.mount_path)
                if details is not None:
                    message["details"] = details
            events.append({"type": "message", **head, "message": message})
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
        return {"role": "assistant", "content": content,
                "api": PROVIDER_APIS.get(provider, "openai-completions"),
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
