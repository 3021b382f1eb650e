"""Gemini CLI's tools as ``gemini -p --approval-mode yolo`` declares them: names, order and
parameter schemas of the pinned release (``tests/fixtures/gemini_cli/tool_schemas-V.json``,
recorded by ``scripts/gemini_recording.py``), descriptions in our own words, and the argument
check worded as the real CLI words it (ajv's messages behind ``params``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harnessgrid.models import ToolCall, ToolSpec

if TYPE_CHECKING:
    import jsonschema

_STR: dict[str, Any] = {"type": "string"}
_BOOL: dict[str, Any] = {"type": "boolean"}
_INT: dict[str, Any] = {"type": "integer"}
_POSITIVE: dict[str, Any] = {"type": "integer", "minimum": 1}


def _p(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {**schema, "description": description}


def _obj(properties: dict[str, dict[str, Any]], required: list[str] | None = None,
         **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        out["required"] = required
    return {**out, **extra}


_WAIT = _p(_BOOL, "True to start only after the calls before it in this turn have finished.")
_IGNORE_FLAGS = {
    "respect_git_ignore": _p(_BOOL, "Skip what .gitignore excludes (git repositories only; "
                                    "default true)."),
    "respect_gemini_ignore": _p(_BOOL, "Skip what .geminiignore excludes (default true)."),
}
#: The built-in subagents and skills the prompt lists (names are facts of the release).
SUBAGENTS = ("codebase_investigator", "cli_help", "generalist")
SKILLS = ("skill-creator", "antigravity-support")

_TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "update_topic": (
        "Start a new topic in the session's outline: a title, an optional summary of the "
        "work so far, and one sentence saying what you will do next.",
        _obj({"title": _p(_STR, "Title of the new topic."),
              "summary": _p(_STR, "Optional: what was done and what comes next."),
              "strategic_intent": _p(_STR, "One sentence: your next step."),
              "wait_for_previous": _WAIT}, ["strategic_intent"])),
    "list_directory": (
        "List the entries of one directory: subdirectories first as `[DIR] name`, then files "
        "with their size in bytes, each group by name.",
        _obj({"dir_path": _p(_STR, "Directory to list."),
              "ignore": {**_p({"items": _STR}, "Glob patterns of entries to leave out."),
                         "type": "array"},
              "file_filtering_options": _p(_obj(_IGNORE_FLAGS),
                                           "Optional: which ignore files to honour.")},
             ["dir_path"])),
    "read_file": (
        "Read a text file (path absolute or relative to the project root). Returns its text "
        "as is, at most 2000 lines of at most 2000 characters; start_line/end_line (1-based, "
        "inclusive) pick a range, and a partial read says which lines it shows.",
        _obj({"file_path": _p(_STR, "File to read."),
              "start_line": _p(_POSITIVE, "Optional: first line, 1-based."),
              "end_line": _p(_POSITIVE, "Optional: last line, inclusive.")}, ["file_path"])),
    "grep_search": (
        "Search file contents for a regular expression. Returns matching lines grouped by "
        "file as `L<n>: text`; when there are three matches or fewer, surrounding lines come "
        "too as `L<n>- text`. At most 100 matches unless total_max_matches says otherwise.",
        _obj({"pattern": _p(_STR, "Regular expression to look for."),
              "dir_path": _p(_STR, "Optional: directory to search; default the project root."),
              "include_pattern": _p(_STR, "Optional: glob of the files to search, e.g. `*.py`."),
              "exclude_pattern": _p(_STR, "Optional: regular expression of lines to drop."),
              "names_only": _p(_BOOL, "Optional: return only the paths of matching files."),
              "max_matches_per_file": _p(_POSITIVE, "Optional: cap per file."),
              "total_max_matches": _p(_POSITIVE, "Optional: overall cap (default 100).")},
             ["pattern"])),
    "glob": (
        "Find files whose path matches a glob such as `**/*.py`; returns absolute paths, "
        "most recently modified first.",
        _obj({"pattern": _p(_STR, "Glob pattern."),
              "dir_path": _p(_STR, "Optional: directory to search from; default the root."),
              "case_sensitive": _p(_BOOL, "Optional: match case (default false)."),
              **_IGNORE_FLAGS}, ["pattern"])),
    "replace": (
        "Replace exact text in a file. old_string must match the file literally and, unless "
        "allow_multiple is true, exactly once; the answer shows the changed region. An empty "
        "old_string on a missing file creates it.",
        _obj({"file_path": _p(_STR, "File to change."),
              "instruction": _p(_STR, "What the change is for, in one or two sentences."),
              "old_string": _p(_STR, "Exact text to find."),
              "new_string": _p(_STR, "Text to put in its place, complete."),
              "allow_multiple": _p(_BOOL, "Replace every occurrence instead of exactly one.")},
             ["file_path", "instruction", "old_string", "new_string"])),
    "write_file": (
        "Write a whole file, creating it (and its folders) or replacing what it held; the "
        "answer shows the written text.",
        _obj({"file_path": _p(_STR, "File to write."),
              "content": _p(_STR, "The complete new content.")}, ["file_path", "content"])),
    "web_fetch": (
        "Fetch the http(s) URLs named in the prompt (up to 20) and answer the prompt from "
        "their content.",
        _obj({"prompt": _p(_STR, "The URLs and what to find out from them.")}, ["prompt"])),
    "run_shell_command": (
        "Run a command with `bash -c` in the project root (or dir_path). Returns its combined "
        "output, the exit code when it is not 0, and the process group id.",
        _obj({"command": _p(_STR, "The command line."),
              "description": _p(_STR, "A short sentence saying what it does."),
              "dir_path": _p(_STR, "Optional: existing workspace directory to run it in."),
              "is_background": _p(_BOOL, "Run it in the background (servers, watchers)."),
              "delay_ms": _p(_INT, "Optional: wait this long before reporting a "
                                   "background start.")}, ["command"])),
    "list_background_processes": (
        "List the background processes this session started.",
        _obj({"wait_for_previous": _WAIT})),
    "read_background_output": (
        "Show the latest output lines of a background process.",
        _obj({"pid": _p(_INT, "Its process id."),
              "lines": _p(_POSITIVE, "Optional: how many trailing lines (default 100)."),
              "delay_ms": _p(_INT, "Optional: wait this long first."),
              "wait_for_previous": _WAIT}, ["pid"])),
    "google_web_search": (
        "Search the web with Google and answer from the results, with sources.",
        _obj({"query": _p(_STR, "What to search for.")}, ["query"])),
    "enter_plan_mode": (
        "Switch to plan mode: read and plan only; files outside the plans folder cannot be "
        "changed until the plan is approved.",
        _obj({"reason": _p(_STR, "Why, briefly.")})),
    "invoke_agent": (
        "Hand a self-contained task to one of the subagents the system prompt lists and get "
        "its report back.",
        _obj({"agent_name": _p(_STR, "The subagent's name."),
              "prompt": _p(_STR, "The whole task, with every detail it needs."),
              "wait_for_previous": _WAIT}, ["agent_name", "prompt"])),
    "exit_plan_mode": (
        "Leave plan mode once the plan is written: name the plan file (a bare file name in "
        "the plans folder); the session then carries on with every tool allowed.",
        _obj({"plan_filename": _p(_STR, "The plan's file name, e.g. `feature.md`.")},
             ["plan_filename"])),
    "activate_skill": (
        "Load one of the skills the system prompt lists, with its instructions.",
        _obj({"name": {"type": "string", "enum": list(SKILLS),
                       "description": "The skill to load."}}, ["name"],
             additionalProperties=False, **{"$schema": "http://json-schema.org/draft-07/schema#"})),
}

#: The emulated releases, newest first, each with its tools in the order they are declared.
RELEASES: dict[str, tuple[str, ...]] = {
    "0.61.0": ("update_topic", "list_directory", "read_file", "grep_search", "glob", "replace",
               "write_file", "web_fetch", "run_shell_command", "list_background_processes",
               "read_background_output", "google_web_search", "enter_plan_mode",
               "invoke_agent", "activate_skill"),
}
#: What each release declares once in plan mode (``enter_plan_mode``), in order.
PLAN_MODE: dict[str, tuple[str, ...]] = {
    "0.61.0": ("update_topic", "list_directory", "read_file", "grep_search", "glob", "replace",
               "write_file", "google_web_search", "exit_plan_mode", "invoke_agent"),
}
NEWEST = next(iter(RELEASES))
#: What a headless run offers without ``--approval-mode yolo`` (read-only; recorded, not
#: emulated: a workspace task needs the write tools).
DEFAULT_MODE_TOOLS = ("update_topic", "list_directory", "read_file", "grep_search", "glob",
                      "google_web_search", "enter_plan_mode", "invoke_agent")


def tool_specs(version: str = NEWEST, plan_mode: bool = False) -> list[ToolSpec]:
    """The tools release ``version`` declares (in plan mode: the plan-mode set)."""
    names = (PLAN_MODE if plan_mode else RELEASES)[version]
    return [ToolSpec(name=name, description=_TOOLS[name][0], parameters=_TOOLS[name][1])
            for name in names]


def _distance(a: str, b: str) -> int:
    """Levenshtein distance (the real CLI ranks its suggestions by it)."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (ca != cb))
    return row[-1]


def unknown_tool(name: str, declared: tuple[str, ...]) -> str:
    """The answer to a call of a tool not ``declared`` (the three closest names)."""
    closest = sorted(declared, key=lambda tool: _distance(name, tool))[:3]
    listed = ", ".join(f'"{tool}"' for tool in closest)
    return f'Tool "{name}" not found. Did you mean one of: {listed}?'


def _ajv_message(error: jsonschema.ValidationError) -> str:
    """One ajv issue as ajv words it (``params`` then the JSON pointer of the value)."""
    where = "params" + "".join(f"/{part}" for part in error.absolute_path)
    match error.validator:
        case "required":
            missing = next(p for p in error.validator_value if p not in error.instance)
            return f"{where} must have required property '{missing}'"
        case "type":
            return f"{where} must be {error.validator_value}"
        case "minimum":
            return f"{where} must be >= {error.validator_value}"
        case "enum":
            return f"{where} must be equal to one of the allowed values"
        case "additionalProperties":
            return f"{where} must NOT have additional properties"
    return f"{where} {error.message}"


def validation_error(call: ToolCall, version: str = NEWEST,
                     plan_mode: bool = False) -> str | None:
    """Why ``call`` cannot run (a tool not declared now, undecodable or schema-violating
    arguments), as the real CLI answers it; None when it is valid. ajv stops at the first
    issue."""
    declared = (PLAN_MODE if plan_mode else RELEASES)[version]
    if call.name not in declared:
        return unknown_tool(call.name, declared)
    if call.parse_error is not None:
        return f"params could not be read: {call.parse_error}"  # our words: see gemini_cli
    import jsonschema  # here, not at import: loading plugins must stay cheap

    schema = _TOOLS[call.name][1]
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(call.arguments),
                    key=lambda e: (e.validator != "required", list(e.absolute_path)))
    return _ajv_message(errors[0]) if errors else None
