"""Claude Code's nine workspace tools: names and argument schemas as the pinned release sends
them, descriptions in our own words, and JSON-schema validation of incoming calls.

The schemas are the facts that matter for a policy trained on the real shell (names, which
parameters exist, which are required, their JSON types, enums and bounds); they are pinned by
``tests/fixtures/claude_code/tool_schemas.json``. The real descriptions are long usage
manuals; ours say the same things briefly and are not copies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harnessgrid.models import ToolCall, ToolSpec

if TYPE_CHECKING:
    import jsonschema

READ_MAX_LINES = 2000
READ_MAX_LINE_CHARS = 2000
READ_MAX_BYTES = 256 * 1024  # whole-file reads (no offset/limit) larger than this are refused
BASH_MAX_OUTPUT_CHARS = 30_000
BASH_DEFAULT_TIMEOUT_MS = 120_000
BASH_MAX_TIMEOUT_MS = 600_000
GLOB_MAX_RESULTS = 100
LS_MAX_ENTRIES = 1000

_STR: dict[str, Any] = {"type": "string"}


def _obj(properties: dict[str, dict[str, Any]], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


def _p(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {**schema, "description": description}


_EDIT_PAIR = {
    "old_string": _p(_STR, "Exact text to find; it must occur once unless replace_all is set."),
    "new_string": _p(_STR, "Text to put in its place (must differ from old_string)."),
    "replace_all": {"type": "boolean", "default": False,
                    "description": "Replace every occurrence instead of exactly one."},
}

_SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    "Read": (
        ("Read a text file. file_path must be absolute. Returns up to 2000 lines, numbered like "
        "`cat -n` (number, then the line); lines longer than 2000 characters are cut. Pass "
        "offset (first line number) and limit (line count) to page through long files. Read a "
        "file before you Edit or overwrite it."),
        _obj({"file_path": _p(_STR, "Absolute path of the file to read."),
              "offset": _p({"type": "number"}, "Line number to start from (1 = first line)."),
              "limit": _p({"type": "number"}, "How many lines to return.")},
             ["file_path"])),
    "Write": (
        ("Create a file or replace its whole content. file_path must be absolute. Overwriting "
        "an existing file fails unless it was read in this session and has not changed "
        "since. Prefer Edit for changes to existing files."),
        _obj({"file_path": _p(_STR, "Absolute path of the file to write."),
              "content": _p(_STR, "The complete new content of the file.")},
             ["file_path", "content"])),
    "Edit": (
        ("Replace exact text in a file that was read in this session. old_string must match "
        "the file exactly (whitespace included, no line-number prefix) and occur exactly "
        "once, unless replace_all is true. An empty old_string creates a new file."),
        _obj({"file_path": _p(_STR, "Absolute path of the file to modify."), **_EDIT_PAIR},
             ["file_path", "old_string", "new_string"])),
    "MultiEdit": (
        ("Apply several Edit-style replacements to one file, in order, as a single change: "
        "each edit sees the result of the previous ones, and if any edit fails none is "
        "applied. Same rules as Edit."),
        _obj({"file_path": _p(_STR, "Absolute path of the file to modify."),
              "edits": {"type": "array", "minItems": 1,
                        "description": "Replacements, applied one after another.",
                        "items": _obj(_EDIT_PAIR, ["old_string", "new_string"])}},
             ["file_path", "edits"])),
    "Bash": (
        ("Run a bash command and return its output (stdout, then stderr; a non-zero exit "
        "status is reported first as `Exit code N`). The working directory persists between "
        "calls; environment variables do not. Default timeout 120000 ms, at most 600000 ms. "
        "Output longer than 30000 characters is cut. Prefer Read/Edit/Write/Glob/Grep/LS "
        "over cat, sed, find and grep."),
        _obj({"command": _p(_STR, "The command line to run."),
              "timeout": _p({"type": "number"}, "Timeout in milliseconds (max 600000)."),
              "description": _p(_STR, "Five to ten words saying what the command does.")},
             ["command"])),
    "Glob": (
        ("Find files whose path matches a glob pattern such as `**/*.py` or `src/*.{ts,tsx}`; "
        "returns absolute paths, most recently modified first (at most 100)."),
        _obj({"pattern": _p(_STR, "Glob pattern, relative to path."),
              "path": _p(_STR, "Directory to search; leave out for the working directory.")},
             ["pattern"])),
    "Grep": (
        ("Search file contents with a regular expression. output_mode is `files_with_matches` "
        "(default: matching file paths), `content` (matching lines; -n adds line numbers, "
        "-A/-B/-C add context) or `count` (matches per file). Filter files with glob or type; "
        "head_limit keeps the first N lines or entries."),
        _obj({"pattern": _p(_STR, "Regular expression to look for."),
              "path": _p(_STR, "File or directory to search; defaults to the working "
                               "directory."),
              "glob": _p(_STR, "Only search files matching this glob, e.g. `*.py`."),
              "output_mode": {"type": "string",
                              "enum": ["content", "files_with_matches", "count"],
                              "description": "What to return (default files_with_matches)."},
              "-B": _p({"type": "number"}, "Lines of context before each match (content)."),
              "-A": _p({"type": "number"}, "Lines of context after each match (content)."),
              "-C": _p({"type": "number"}, "Lines of context around each match (content)."),
              "-n": _p({"type": "boolean"}, "Prefix line numbers (content mode)."),
              "-i": _p({"type": "boolean"}, "Ignore case."),
              "type": _p(_STR, "Only search files of this type, e.g. py, js, md."),
              "head_limit": _p({"type": "number"}, "Keep only the first N lines or entries."),
              "multiline": _p({"type": "boolean"},
                              "Let the pattern span lines ('.' matches newlines).")},
             ["pattern"])),
    "LS": (
        ("List a directory as an indented tree (recursive, hidden entries skipped). path must "
        "be absolute; ignore takes glob patterns of names to leave out."),
        _obj({"path": _p(_STR, "Absolute path of the directory to list."),
              "ignore": {"type": "array", "items": _STR,
                         "description": "Glob patterns of entries to skip."}},
             ["path"])),
    "TodoWrite": (
        ("Replace the session's todo list with the given one and get it back. Use it to plan "
        "and track multi-step work: keep exactly one item in_progress while you work and mark "
        "items completed as soon as they are done."),
        _obj({"todos": {"type": "array", "description": "The whole updated todo list.",
                        "items": _obj({"content": {"type": "string", "minLength": 1},
                                       "status": {"type": "string", "enum": [
                                           "pending", "in_progress", "completed"]},
                                       "activeForm": {"type": "string", "minLength": 1}},
                                      ["content", "status", "activeForm"])}},
             ["todos"])),
}

TOOL_NAMES: tuple[str, ...] = tuple(_SCHEMAS)
PATH_ARGUMENT: dict[str, str] = {"Read": "file_path", "Write": "file_path", "Edit": "file_path",
                                 "MultiEdit": "file_path", "LS": "path"}
"""Tools whose path argument must be absolute (Glob and Grep resolve theirs against the
working directory, as the real tools do)."""


def tool_specs() -> list[ToolSpec]:
    """The tools in the order the real shell lists them (workspace tools only)."""
    return [ToolSpec(name=name, description=desc, parameters=schema)
            for name, (desc, schema) in _SCHEMAS.items()]


def _problem(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, dict):
        schema_required = error.validator_value if isinstance(error.validator_value, list) else []
        missing = [p for p in schema_required if p not in error.instance]
        field = f"{where}.{missing[0]}" if where and missing else (missing or [where])[0]
        return f"missing required parameter `{field}`"
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        props = error.schema.get("properties", {})
        extra = sorted(k for k in error.instance if k not in props)
        return "unexpected parameter " + ", ".join(f"`{k}`" for k in extra)
    if error.validator == "type":
        got = type(error.instance).__name__
        return f"parameter `{where}` must be of type {error.validator_value}, got {got}"
    if error.validator == "enum":
        allowed = ", ".join(map(str, error.validator_value))
        return f"parameter `{where}` must be one of {allowed}, got {error.instance!r:.60}"
    return f"parameter `{where or '(input)'}`: {error.message}"


def validation_error(call: ToolCall) -> str | None:
    """Why ``call`` cannot run (unknown tool, undecodable or schema-violating arguments), in
    the shape Claude Code reports it inside ``<tool_use_error>``; None when it is valid."""
    entry = _SCHEMAS.get(call.name)
    if entry is None:
        return f"Error: No such tool available: {call.name}"
    if call.parse_error is not None:
        return (f"InputValidationError: {call.name} failed because its input is not valid "
                f"JSON ({call.parse_error})")
    import jsonschema  # here, not at import: loading plugins must stay cheap (50 ms)

    validator = jsonschema.Draft7Validator(entry[1])
    errors = sorted(validator.iter_errors(call.arguments), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    problems = list(dict.fromkeys(_problem(e) for e in errors))
    return (f"InputValidationError: {call.name} failed due to the following "
            f"issue{'s' if len(problems) > 1 else ''}:\n" + "\n".join(problems))
