"""Claude Code 2.x's tools: the 23 that ``claude -p`` offers (2.1.332), with their real names
and argument schemas, descriptions in our own words, and which of them are deferred.

Facts from ``tests/fixtures/claude_code/tool_schemas-2.1.332.json`` (recorded from the native
binary by ``scripts/adapter_schemas.py``): the first request carries :data:`INITIAL` (in that
order); the tools of :data:`DEFERRED` are only named, in the system-role message, and come with
``defer_loading`` once ToolSearch has loaded them; the request then lists every offered tool in
:data:`LOADED_ORDER` (alphabetical, except that ``DeferredToolPlaceholder`` stays just before
``Write``). Compared with 1.0.98: Glob, Grep, MultiEdit and TodoWrite are gone; Read's
``offset``/``limit`` are integers (0 or more, and more than 0) and it gains ``pages`` and
``allow_large``; Bash gains ``dangerouslyDisableSandbox``. The interactive-only tools
(AskUserQuestion, EnterPlanMode, ExitPlanMode) are not offered in print mode.
"""

from __future__ import annotations

from typing import Any

from harnessgrid.plugins.adapters._claude_code_tools import _EDIT_PAIR, _STR, _p
from harnessgrid.plugins.adapters._claude_code_tools import _obj as _closed


def _obj(properties: dict[str, dict[str, Any]], required: list[str]) -> dict[str, Any]:
    """A closed object schema; zod leaves ``required`` out when nothing is."""
    schema = _closed(properties, required)
    if not required:
        del schema["required"]
    return schema


VERSION = "2.1.332"
#: JavaScript's ``Number.MAX_SAFE_INTEGER``: zod's bound for an integer without one of its own.
MAX_SAFE = 9007199254740991
_INT: dict[str, Any] = {"type": "integer", "minimum": -MAX_SAFE, "maximum": MAX_SAFE}
_COUNT: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": MAX_SAFE}
_EFFORT = ["low", "medium", "high", "xhigh", "max"]
_SHORT: dict[str, Any] = {"type": "string", "maxLength": 256}

INITIAL: tuple[str, ...] = ("Agent", "Bash", "Edit", "ListAgents", "Read", "ReportFindings",
                            "ScheduleWakeup", "Skill", "ToolSearch", "Workflow",
                            "DeferredToolPlaceholder", "Write")
DEFERRED: tuple[str, ...] = ("CronCreate", "CronDelete", "CronList", "EnterWorktree",
                             "ExitWorktree", "Monitor", "NotebookEdit", "SendMessage",
                             "TaskStop", "WebFetch", "WebSearch")
LOADED_ORDER: tuple[str, ...] = (
    "Agent", "Bash", "CronCreate", "CronDelete", "CronList", "Edit", "EnterWorktree",
    "ExitWorktree", "ListAgents", "Monitor", "NotebookEdit", "Read", "ReportFindings",
    "ScheduleWakeup", "SendMessage", "Skill", "TaskStop", "ToolSearch", "WebFetch", "WebSearch",
    "Workflow", "DeferredToolPlaceholder", "Write")
#: What the system-role message tells the model to send to ToolSearch.
QUERY_SYNTAX = "select:<name>[,<name>...]"
AGENT_TYPES = ("claude", "Explore", "general-purpose", "Plan", "statusline-setup")
SKILLS = ("dataviz", "update-config", "keybindings-help", "code-review", "simplify",
          "fewer-permission-prompts", "loop", "claude-api", "workflow-authoring", "run",
          "plugin-authoring", "init", "security-review")

_FINDING = _obj({
    "file": _p(_STR, "File the finding is about."),
    "line": _p(_INT, "Line number in that file."),
    "summary": _p(_STR, "What is wrong."),
    "short_summary": {"type": "string", "maxLength": 60},
    "failure_scenario": _p(_STR, "How it fails in practice."),
    "category": {"type": "string", "maxLength": 40},
    "severity": {"type": "string", "enum": ["important", "pre_existing", "nit"]},
    "verdict": {"type": "string", "enum": ["CONFIRMED", "PLAUSIBLE"]},
    "outcome": {"type": "string", "enum": ["fixed", "skipped", "no_change_needed"]},
}, ["file", "summary", "failure_scenario"])

SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    "Agent": (
        "Hand a self-contained piece of work to a subagent of the given type; it works on "
        "its own and reports back once.",
        _obj({"description": _p(_STR, "Three to five words naming the work."),
              "prompt": _p(_STR, "Everything the subagent needs to know to do it."),
              "subagent_type": _p(_STR, "Which agent type to use."),
              "model": {"type": "string", "enum": ["sonnet", "opus", "haiku", "fable"]},
              "effort": {"type": "string", "enum": _EFFORT},
              "run_in_background": {"type": "boolean"},
              "isolation": {"type": "string", "enum": ["worktree", "remote"]}},
             ["description", "prompt"])),
    "Bash": (
        "Run a bash command and return its output. The working directory persists between "
        "calls. Default timeout 120000 ms, at most 600000 ms; output past 30000 characters "
        "is cut. There are no search tools: list with ls and search with grep or rg here; "
        "use Read, Edit and Write for files.",
        _obj({"command": _p(_STR, "The command line to run."),
              "timeout": _p({"type": "number"}, "Timeout in milliseconds (max 600000)."),
              "description": _p(_STR, "A few words saying what the command does."),
              "run_in_background": _p({"type": "boolean"}, "Run without waiting for it."),
              "dangerouslyDisableSandbox": _p({"type": "boolean"},
                                              "Run outside the command sandbox.")},
             ["command"])),
    "CronCreate": (
        "Schedule a prompt to run on a cron expression, once or repeatedly.",
        _obj({"cron": _p(_STR, "Five-field cron expression."), "prompt": _STR,
              "recurring": {"type": "boolean"}, "durable": {"type": "boolean"}},
             ["cron", "prompt"])),
    "CronDelete": ("Cancel a scheduled prompt by its id.",
                   _obj({"id": _p(_STR, "The schedule's id.")}, ["id"])),
    "CronList": ("List the scheduled prompts of this session.", _obj({}, [])),
    "Edit": (
        "Replace exact text in a file read earlier in this session. old_string must occur "
        "exactly once unless replace_all is true.",
        _obj({"file_path": _p(_STR, "Absolute path of the file to modify."), **_EDIT_PAIR},
             ["file_path", "old_string", "new_string"])),
    "EnterWorktree": (
        "Move this session into a new git worktree.",
        _obj({"name": _p(_STR, "Name of the worktree."), "path": _STR}, [])),
    "ExitWorktree": (
        "Leave the worktree entered with EnterWorktree, keeping or removing it.",
        _obj({"action": {"type": "string", "enum": ["keep", "remove"]},
              "discard_changes": {"type": "boolean"}}, ["action"])),
    "ListAgents": (
        "List the other agents this one can message.",
        _obj({"channel": _SHORT, "q": _SHORT, "cursor": _SHORT}, [])),
    "Monitor": (
        "Watch a command's output or a websocket in the background and be told about it.",
        _obj({"description": _p(_STR, "What is watched."),
              "timeout_ms": {"default": 300000, "type": "number", "minimum": 1000,
                             "maximum": 3600000},
              "command": _STR,
              "ws": _obj({"url": _STR,
                          "protocols": {"type": "array", "items": {
                              "type": "string", "pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"}}},
                         ["url"])},
             ["description", "timeout_ms"])),
    "NotebookEdit": (
        "Replace, insert or delete one cell of a Jupyter notebook.",
        _obj({"notebook_path": _p(_STR, "Absolute path of the .ipynb file."),
              "cell_id": _STR, "new_source": _STR,
              "cell_type": {"type": "string", "enum": ["code", "markdown"]},
              "edit_mode": {"type": "string", "enum": ["replace", "insert", "delete"]}},
             ["notebook_path", "new_source"])),
    "Read": (
        "Read a file (absolute file_path). Text comes back with numbered lines; offset and "
        "limit page through long files, pages picks pages of a PDF. A whole read past the "
        "size or token limit is refused unless allow_large is set. Read a file before you "
        "Edit or overwrite it.",
        _obj({"file_path": _p(_STR, "Absolute path of the file to read."),
              "offset": _p(_COUNT, "Line number to start from."),
              "limit": _p({"type": "integer", "exclusiveMinimum": 0, "maximum": MAX_SAFE},
                          "How many lines to return."),
              "pages": _p(_STR, "PDF pages to read, e.g. 1-5."),
              "allow_large": _p({"type": "boolean"}, "Read past the size limit.")},
             ["file_path"])),
    "ReportFindings": (
        "Report the findings of a code review.",
        _obj({"level": {"type": "string", "enum": _EFFORT},
              "findings": {"maxItems": 32, "type": "array", "items": _FINDING}},
             ["findings"])),
    "ScheduleWakeup": (
        "Ask to be woken up later with a prompt, or stop a scheduled wakeup.",
        _obj({"delaySeconds": {"type": "number"}, "reason": _STR, "prompt": _STR,
              "stop": {"type": "boolean"}, "noop": {"type": "boolean"}}, [])),
    "SendMessage": (
        "Send a message to another agent.",
        _obj({"to": {"type": "string", "allOf": [{"pattern": "^[^\\n\\r]*$"},
                                                 {"pattern": "^[\\s\\S]{0,300}$"}]},
              "summary": {"type": "string", "maxLength": 200},
              "message": {"default": "", "type": "string"},
              "notify_when_idle": {"type": "boolean"}}, ["to", "message"])),
    "Skill": (
        "Load one of the listed skills by name.",
        _obj({"skill": _p(_STR, "The skill's name."), "args": _STR}, ["skill"])),
    "TaskStop": (
        "Stop a background task or shell by its id.",
        _obj({"task_id": _STR, "shell_id": _STR}, [])),
    "ToolSearch": (
        "Load deferred tools so that they can be called. Query `select:Name1,Name2` for "
        "tools named in the session's list, or keywords to search for them.",
        _obj({"query": _p(_STR, "select:<names> or keywords."),
              "max_results": {"default": 5, "type": "number"}}, ["query"])),
    "WebFetch": (
        "Fetch a URL and answer a prompt about its content.",
        _obj({"url": {"type": "string", "format": "uri"}, "prompt": _STR, "offset": _COUNT},
             ["url", "prompt"])),
    "WebSearch": (
        "Search the web.",
        _obj({"query": {"type": "string", "minLength": 2},
              "allowed_domains": {"type": "array", "items": _STR},
              "blocked_domains": {"type": "array", "items": _STR}}, ["query"])),
    "Workflow": (
        "Run a workflow script, or resume a run.",
        _obj({"script": {"type": "string", "maxLength": 524288}, "name": _STR,
              "description": _STR, "title": _STR, "args": {}, "scriptPath": _STR,
              "resumeFromRunId": {"type": "string", "pattern": "^wf_[a-z0-9-]{6,}$"}}, [])),
    "DeferredToolPlaceholder": (
        "Keeps deferred tool loading switched on. Never call it.",
        {"type": "object", "properties": {}}),
    "Write": (
        "Create a file or replace its whole content (absolute file_path). Overwriting a file "
        "needs a Read of it first in this session.",
        _obj({"file_path": _p(_STR, "Absolute path of the file to write."),
              "content": _p(_STR, "The complete new content.")}, ["file_path", "content"])),
}
