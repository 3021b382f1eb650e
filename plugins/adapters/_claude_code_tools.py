"""Claude Code's nine workspace tools: names and argument schemas as the pinned release sends
them, descriptions in our own words, and JSON-schema validation of incoming calls.

The schemas are the facts that matter for a policy trained on the real shell (names, which
parameters exist, which are required, their JSON types, enums, bounds and defaults); they are
pinned by ``tests/fixtures/claude_code/tool_schemas-VERSION.json``, captured from each published
package by ``scripts/adapter_schemas.py``. The real descriptions are long usage manuals; ours
say the same things briefly and are not copies. Validation errors are worded as the real
shell words them (cli.js 1.0.96, ``UmB``).

Releases here (:data:`RELEASES`): 1.0.96 and 1.0.98 (2.x's tools are in
``_claude_code_v2_tools``; :func:`tool_specs` and :func:`check_arguments` serve both). Their schemas are identical except that
1.0.98 has no ``LS``; in the texts the model sees, 1.0.98's Bash description no longer steers
``ls`` to LS, and its Read description adds that directories are listed with ``ls`` in Bash
(its Bash description still tells the model to check a parent directory "with the LS tool", a
leftover of the package we do not repeat). The system prompts differ only in a security
sentence that our prompt, which has no security section, does not carry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harnessgrid.models import ToolCall, ToolSpec

if TYPE_CHECKING:
    import jsonschema

# Read has no line cap and cuts no line: the description promises 2000 lines of at most 2000
# characters, but cli.js 1.0.96/1.0.98 use those numbers (``bQ1``, ``OG9``) only in that text
# and for @-mentioned files; the tool reads ``offset``.. to the end (1.0.96 ``SVA``, 1.0.98
# ``vVA``) and numbers every line whole (``vy``). Only the size and token limits bound it.
READ_MAX_BYTES = 256 * 1024  # cli.js ``Dy1``/``Cy1``: whole-file reads over this are refused
BASH_MAX_OUTPUT_CHARS = 30_000
BASH_DEFAULT_TIMEOUT_MS = 120_000
BASH_MAX_TIMEOUT_MS = 600_000
GLOB_MAX_RESULTS = 100
LS_MAX_CHARS = 40_000  # cli.js 1.0.96 ``nZ1``: the listing stops past this many characters
READ_MAX_TOKENS = 25_000  # cli.js ``X1B``: Read refuses content estimated above this

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
        ("Read a text file. file_path must be absolute. Returns its lines numbered like "
        "`cat -n` (number, then the line). Pass offset (first line number) and limit (line "
        "count) to page through long files; a whole-file read over 256 KB or about 25000 "
        "tokens is refused. Read a file before you Edit or overwrite it."),
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
        ("Run a bash command and return its output (stdout, then stderr). A failing command "
        "comes back as an error showing stderr, then stdout. The working directory persists "
        "between calls; environment variables do not. Default timeout 120000 ms, at most "
        "600000 ms. Output longer than 30000 characters is cut. Prefer Read/Edit/Write/Glob/"
        "Grep/LS over cat, sed, find, grep and ls."),
        _obj({"command": _p(_STR, "The command line to run."),
              "timeout": _p({"type": "number"}, "Timeout in milliseconds (max 600000)."),
              "description": _p(_STR, "Five to ten words saying what the command does."),
              "run_in_background": _p({"type": "boolean"},
                                      "Accepted; here the command always runs to completion.")},
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

#: The emulated releases, newest first, each with the workspace tools it sends in the order
#: its cli.js sends them (see each fixture's ``tool_order``), which is what the model sees.
RELEASES: dict[str, tuple[str, ...]] = {
    "1.0.98": ("Bash", "Glob", "Grep", "Read", "Edit", "MultiEdit", "Write", "TodoWrite"),
    "1.0.96": ("Bash", "Glob", "Grep", "LS", "Read", "Edit", "MultiEdit", "Write", "TodoWrite"),
}
NEWEST = next(iter(RELEASES))
TOOL_NAMES: tuple[str, ...] = RELEASES["1.0.96"]  # every tool some release has

#: Descriptions that change with the release (our words for what each release's text says).
_RELEASE_DESCRIPTIONS: dict[str, dict[str, str]] = {
    "1.0.98": {
        "Read": _SCHEMAS["Read"][0] + " Only files: list a directory with `ls` in Bash.",
        "Bash": _SCHEMAS["Bash"][0].replace("Grep/LS over cat, sed, find, grep and ls.",
                                            "Grep over cat, sed, find and grep."),
    },
}
PATH_ARGUMENT: dict[str, str] = {"Read": "file_path", "Write": "file_path", "Edit": "file_path",
                                 "MultiEdit": "file_path", "LS": "path"}
"""Tools whose path argument must be absolute (Glob and Grep resolve theirs against the
working directory, as the real tools do)."""


def tool_specs(version: str = NEWEST) -> list[ToolSpec]:
    """The tools of release ``version`` in the order it lists them (1.x: workspace tools
    only; 2.x: every tool, deferred ones included, in the order of a request that has them
    all)."""
    if version not in RELEASES:
        # here, not at the top: the 2.x module builds its schemas with this one's helpers
        from harnessgrid.plugins.adapters import _claude_code_v2_tools as v2

        if version == v2.VERSION:
            return [ToolSpec(name=n, description=v2.SCHEMAS[n][0], parameters=v2.SCHEMAS[n][1])
                    for n in v2.LOADED_ORDER]
    texts = _RELEASE_DESCRIPTIONS.get(version, {})
    return [ToolSpec(name=name, description=texts.get(name, _SCHEMAS[name][0]),
                     parameters=_SCHEMAS[name][1])
            for name in RELEASES[version]]


_ZOD_TYPES = {str: "string", bool: "boolean", int: "number", float: "number", list: "array",
              dict: "object", type(None): "null"}


def _zod_type(value: Any) -> str:
    """The type name zod reports as ``received`` (what the real messages quote)."""
    return _ZOD_TYPES.get(type(value), "unknown")


def _issues(errors: list[jsonschema.ValidationError]) -> list[str]:
    """cli.js ``UmB``: missing required parameters, then unexpected ones, then wrong types,
    each named by its top-level parameter (zod's ``path[0]``)."""
    missing: list[str] = []
    extra: list[str] = []
    typed: list[str] = []
    for error in errors:
        top = str(error.absolute_path[0]) if error.absolute_path else ""
        if error.validator == "required" and isinstance(error.instance, dict):
            schema_required = error.validator_value if isinstance(error.validator_value,
                                                                  list) else []
            missing += [top or p for p in schema_required if p not in error.instance]
        elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
            props = error.schema.get("properties", {})
            extra += [str(k) for k in error.instance if k not in props]
        elif error.validator == "type":
            expected = "number" if error.validator_value == "integer" else error.validator_value
            typed.append(f"The parameter `{top}` type is expected as "
                         f"`{expected}` but provided as "
                         f"`{_zod_type(error.instance)}`")
    return ([f"The required parameter `{p}` is missing" for p in dict.fromkeys(missing)]
            + [f"An unexpected parameter `{p}` was provided" for p in dict.fromkeys(extra)]
            + list(dict.fromkeys(typed)))


def _zod_message(errors: list[jsonschema.ValidationError]) -> str:
    """What the real shell shows when no issue has a worded form (an enum, a bound): zod's
    own message, the JSON list of its issues (code, path, message)."""
    import json

    issues = []
    for error in errors:
        path = list(error.absolute_path)
        if error.validator == "enum":
            options = " | ".join(f"'{o}'" for o in error.validator_value)
            issues.append({"received": error.instance, "code": "invalid_enum_value",
                           "options": error.validator_value, "path": path,
                           "message": f"Invalid enum value. Expected {options}, received "
                                      f"'{error.instance}'"})
        else:
            issues.append({"code": "custom", "path": path, "message": error.message})
    return json.dumps(issues, indent=2, default=str)


def validation_error(call: ToolCall, version: str = NEWEST) -> str | None:
    """Why ``call`` cannot run in release ``version`` (a tool it does not have, undecodable or
    schema-violating arguments), in the shape Claude Code reports it inside
    ``<tool_use_error>``; None when it is valid."""
    entry = _SCHEMAS.get(call.name)
    if entry is None or call.name not in RELEASES[version]:
        return f"Error: No such tool available: {call.name}"
    return check_arguments(call, entry[1])


def check_arguments(call: ToolCall, schema: dict[str, Any]) -> str | None:
    """Why ``call``'s arguments do not fit ``schema``, as the real shell words it (the zod
    type ``number`` stands for JSON-schema integers too); None when they fit."""
    if call.parse_error is not None:
        return (f"InputValidationError: {call.name} failed because its input is not valid "
                f"JSON ({call.parse_error})")
    import jsonschema  # here, not at import: loading plugins must stay cheap (50 ms)

    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(call.arguments), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    problems = _issues(errors)
    if not problems:
        return f"InputValidationError: {_zod_message(errors)}"
    return (f"InputValidationError: {call.name} failed due to the following "
            f"issue{'s' if len(problems) > 1 else ''}:\n" + "\n".join(problems))
