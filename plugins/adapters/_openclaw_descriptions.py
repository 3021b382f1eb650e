"""harnessgrid's own wording for OpenClaw 2026.9.6's tools: one summary per tool and a
description for each property the real schema describes (which ones do is a recorded fact:
``DESCRIBED`` of :mod:`._openclaw_recorded_2026_9_6`). None of this text is OpenClaw's.

Properties of the workspace tools get a sentence each; those of tools that need a gateway or
another service (they only answer that it is missing, see :mod:`._openclaw_2026_9`) get their
name spelt out, which is all a model needs to fill them in.
"""

from __future__ import annotations

import copy
import re
from typing import Any

#: ``name: summary`` per tool. The prompt's listing shows a summary only for the tools the
#: recorded listing gives one (``PROMPT["tool_listing"]``); every tool spec carries its own.
SUMMARIES: dict[str, str] = {
    "ls": "List a directory's entries, a page at a time",
    "read": "Show a file's text, a page at a time",
    "edit": "Replace exact passages of a file, several in one call",
    "write": "Create a file or replace everything in it",
    "apply_patch": "Add, change, move or delete files with one patch",
    "exec": "Run a shell command in the workspace",
    "process": "Look after background exec sessions",
    "dashboard": "Arrange the operator's dashboard tabs",
    "nodes": "Check and drive paired devices",
    "mobile_ui": "Look at and operate a paired phone's screen",
    "computer": "Operate a desktop: screenshots, pointer, keyboard",
    "automations": "Schedule reminders and recurring jobs",
    "sessions": "Manage the gateway's sessions and their profiles",
    "theme": "Choose or define the interface's colour theme",
    "terminal": "Read or steer terminals the operator opened",
    "portal": "Expose a local port as a shareable link",
    "message": "Send to chat channels",
    "tts": "Turn text into speech",
    "gateway": "Inspect or update the gateway's configuration",
    "plugins": "Find, install and manage plugins",
    "openclaw": "Ask the gateway's own assistant about setup",
    "agents_list": "Show which agents can be started as helpers",
    "get_goal": "Show the session's current goal",
    "create_goal": "Set a goal for the session",
    "update_goal": "Mark the session's goal done or blocked",
    "skill_workshop": "Draft, review and apply reusable skills",
    "progress_card": "Show the user a progress card",
    "ask_user": "Ask the user multiple-choice questions",
    "secrets": "Ask for, list or delete stored secrets",
    "sessions_list": "List sessions you can see",
    "sessions_history": "Read another session's messages",
    "sessions_search": "Search earlier sessions",
    "conversations_list": "List external conversations",
    "conversations_send": "Post into an external conversation",
    "conversations_turn": "Post into an external conversation and wait for the reply",
    "sessions_send": "Send a message to another session",
    "sessions_spawn": "Start a helper agent on a task",
    "agents_wait": "Wait for helper runs to finish",
    "sessions_yield": "End the turn until helpers report back",
    "subagents": "Check on helper agents",
    "session_status": "Show this session's model, usage and time",
    "web_search": "Search the web",
    "web_fetch": "Fetch a web page as text",
    "browser": "Drive a web browser",
    "canvas": "Show or capture a canvas on a paired device",
    "file_fetch": "Fetch a file from a paired device",
    "dir_list": "List a folder on a paired device",
    "dir_fetch": "Fetch a folder from a paired device",
    "file_write": "Write a file on a paired device",
    "memory_search": "Search the agent's memory notes",
    "memory_get": "Read one of the agent's memory notes",
    "intent": "Set up standing intents that fire on keywords",
    "node_inference": "Run a model on a paired device",
    "talk_voice": "Pick the voice used for talk mode",
}

#: The workspace tools' properties, by ``tool.path`` as ``DESCRIBED`` spells it.
_PROPERTIES: dict[str, str] = {
    "ls.path": "Directory to list (default: the working directory).",
    "ls.limit": "Most entries to return (default 500).",
    "ls.after": "Continue after this entry name (from the previous page).",
    "read.path": "File to read, relative to the workspace or absolute.",
    "read.offset": "First line to show, counting from 1.",
    "read.limit": "Most lines to show.",
    "read.cursor": "Skip this many characters of the first line.",
    "read.optional": "Set to true to get a plain note instead of an error for a missing file.",
    "edit.path": "File to change, relative to the workspace or absolute.",
    "edit.edits": "The replacements, each matched against the file as it was before the call.",
    "edit.edits[].oldText": "Passage to replace; must occur exactly once.",
    "edit.edits[].newText": "Text to put in its place.",
    "write.path": "File to write, relative to the workspace or absolute.",
    "write.content": "The file's complete new content.",
    "apply_patch.input": "The patch, from *** Begin Patch to *** End Patch.",
    "exec.title": "A few words on what this command is for.",
    "exec.command": "Shell command line.",
    "exec.workdir": "Directory to run in (default: the working directory).",
    "exec.env": "Extra environment variables, taken literally.",
    "exec.yieldMs": "Move to the background after this many milliseconds (default 10000).",
    "exec.background": "Start in the background straight away.",
    "exec.timeoutSeconds": "Stop the command after this many seconds.",
    "exec.pty": "Run under a pseudo-terminal.",
    "exec.elevated": "Ask for elevated rights where they are allowed.",
    "exec.host": "Where to run: auto, sandbox, gateway or node.",
    "exec.ask": "Ask for stricter approval of this command.",
    "exec.node": "Device to run on when host is node.",
    "process.action": "One of list, poll, log, write, send-keys, submit, paste, kill, clear, "
                      "remove.",
    "process.sessionId": "Background session to act on (all actions but list).",
    "process.data": "write: what to send to stdin.",
    "process.keys": "send-keys: key names.",
    "process.hex": "send-keys: raw bytes in hex.",
    "process.literal": "send-keys: text sent as typed.",
    "process.text": "paste: text to paste.",
    "process.bracketed": "paste: use bracketed paste.",
    "process.eof": "write: close stdin afterwards.",
    "process.offset": "log: first line, counting from 0.",
    "process.limit": "log: how many lines.",
    "process.timeout": "poll: wait up to this many milliseconds.",
}


def _spelt_out(name: str) -> str:
    """``timeoutMs`` -> ``Timeout ms.``; ``date_after`` -> ``Date after.``"""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").lower().split()
    return (" ".join(words).capitalize() or name) + "."


def property_text(tool: str, path: str) -> str:
    return _PROPERTIES.get(f"{tool}.{path}") or _spelt_out(path.rsplit(".", 1)[-1]
                                                          .removesuffix("[]"))


def with_descriptions(tool: str, schema: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    """``schema`` with a description (ours) on each property ``paths`` names: ``a``,
    ``a.b`` (a property of object ``a``), ``a[].b`` (of ``a``'s items)."""
    out = copy.deepcopy(schema)
    for path in paths:
        node = out
        *outer, last = path.split(".")
        for part in outer:
            node = node["properties"][part.removesuffix("[]")]
            if part.endswith("[]"):
                node = node["items"]
        node["properties"][last]["description"] = property_text(tool, path)
    return out
