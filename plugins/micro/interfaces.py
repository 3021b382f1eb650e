"""Micro ``tool_interface`` levels: three compact ways to write the same six calls.

- ``micro_json``: native JSON tool calls with two-letter tools and one-letter arguments
  (``rd{p}``, ``wr{p,t}``, ``ed{p,a,b}``, ``ls{p}``, ``sh{c}``, ``end{m}``);
- ``micro_tags``: short tags written in the reply text (``<r>a.txt</r>``,
  ``<w p="a.txt">hi</w>``, ...), ``&``, ``<`` and (in attributes) ``"`` escaped as entities;
- ``micro_cmd``: one slash command per line (``/cat a.txt``, ``/put a.txt hello``,
  ``/run mv a b``), earlier arguments bare words or JSON strings, the last one the rest of the
  line (a JSON string when it holds a newline or starts with a quote).

Tool names, argument names and call syntax all differ between the three on purpose, so a
policy that overfits one of them notices when the harness changes. Search has no tool of its
own in any of them: the harness lowers it to a shell command (``grep``). Every interface
round-trips: ``to_action(parse(render(a))[0]) == a`` for every string.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from harnessgrid.levels import ToolInterfaceLevel
from harnessgrid.models import Action, ActionKind, FormatError, ModelTurn, ToolCall, ToolSpec


@dataclass(frozen=True)
class _Tool:
    """One tool: its name, the action it means, its arguments (tool name → action name), what
    it does, and defaults for arguments that may be left out."""

    name: str
    kind: ActionKind
    params: dict[str, str]
    summary: str
    defaults: dict[str, str] = field(default_factory=dict)

    def schema(self, *, strict: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "object",
                               "properties": {p: {"type": "string"} for p in self.params},
                               "required": [p for p in self.params if p not in self.defaults]}
        if strict:
            out["additionalProperties"] = False
        return out

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.summary, parameters=self.schema())

    def action(self, args: dict[str, str]) -> Action:
        full = {**self.defaults, **args}
        return Action(kind=self.kind, args={a: full[p] for p, a in self.params.items()})

    def arguments(self, action: Action) -> dict[str, str]:
        return {p: action.args[a] for p, a in self.params.items()}


def _index(tools: tuple[_Tool, ...]) -> tuple[dict[str, _Tool], dict[str, _Tool]]:
    return {t.name: t for t in tools}, {t.kind: t for t in tools}


def _names(tools: tuple[_Tool, ...], fmt: str = "{}") -> str:
    return ", ".join(fmt.format(t.name) for t in tools)


# -- micro_json -------------------------------------------------------------------------------

_JSON_TOOLS: tuple[_Tool, ...] = (
    _Tool("rd", "read", {"p": "path"}, "Read file p."),
    _Tool("wr", "write", {"p": "path", "t": "content"}, "Write text t to file p."),
    _Tool("ed", "edit", {"p": "path", "a": "old", "b": "new"}, "In file p replace a by b."),
    _Tool("ls", "list", {"p": "path"}, "List dir p.", {"p": "."}),
    _Tool("sh", "shell", {"c": "command"}, "Run shell command c."),
    _Tool("end", "finish", {"m": "message"}, "Finish; m is a short note.", {"m": ""}),
)
_JSON_BY_NAME, _JSON_BY_KIND = _index(_JSON_TOOLS)


class MicroJson(ToolInterfaceLevel):
    """Native tool calls with very short tool and argument names."""

    name = "micro_json"
    description = "Native JSON tool calls with short names: rd, wr, ed, ls, sh, end."
    native_tools = True

    def tools(self) -> list[ToolSpec]:
        return [t.spec() for t in _JSON_TOOLS]

    def prompt_section(self) -> str:
        return "Use the attached tools; call end when done."

    def supports(self, kind: str) -> bool:
        return kind in _JSON_BY_KIND

    def parse(self, turn: ModelTurn) -> list[ToolCall]:
        return list(turn.tool_calls)

    def to_action(self, call: ToolCall) -> Action:
        tool = _JSON_BY_NAME.get(call.name)
        if tool is None:
            raise FormatError(f"unknown tool {call.name!r}; tools: {_names(_JSON_TOOLS)}",
                              call=call)
        if call.parse_error is not None:
            raise FormatError(f"{call.name} arguments are not JSON ({call.parse_error})",
                              call=call)
        import jsonschema  # here, not at import: loading plugins must stay cheap

        validator = jsonschema.Draft202012Validator(tool.schema(strict=True))
        errors = sorted(validator.iter_errors(call.arguments), key=lambda e: str(e.path))
        if errors:
            takes = ", ".join(f"{p}{'?' if p in tool.defaults else ''}" for p in tool.params)
            raise FormatError(f"bad {call.name} arguments: {errors[0].message}; "
                              f"it takes {takes} (strings)", call=call)
        return tool.action(dict(call.arguments))

    def render(self, action: Action, call_id: str) -> ModelTurn:
        tool = _JSON_BY_KIND[action.kind]
        return ModelTurn(tool_calls=(ToolCall(id=call_id, name=tool.name,
                                              arguments=tool.arguments(action)),))


# -- micro_tags -------------------------------------------------------------------------------

_TAG_TOOLS: tuple[_Tool, ...] = (
    _Tool("r", "read", {"p": "path"}, "read a file"),
    _Tool("w", "write", {"p": "path", "t": "content"}, "write a file"),
    _Tool("e", "edit", {"p": "path", "a": "old", "b": "new"}, "replace OLD by NEW"),
    _Tool("l", "list", {"p": "path"}, "list a dir"),
    _Tool("x", "shell", {"c": "command"}, "run a shell command"),
    _Tool("end", "finish", {"m": "message"}, "finish"),
)
_TAG_BY_NAME, _TAG_BY_KIND = _index(_TAG_TOOLS)
_TAG_SYNTAX = {
    "r": "<r>PATH</r>",
    "w": '<w p="PATH">TEXT</w>',
    "e": '<e p="PATH"><a>OLD</a><b>NEW</b></e>',
    "l": "<l>DIR</l>",
    "x": "<x>CMD</x>",
    "end": "<end>NOTE</end>",
}
_TAG_BODY = "[^<]*"
_TAG_ATTR = '[^"<]*'
_TAG_CALL = {
    "r": re.compile(f"<r>({_TAG_BODY})</r>"),
    "w": re.compile(f'<w p="({_TAG_ATTR})">({_TAG_BODY})</w>'),
    "e": re.compile(f'<e p="({_TAG_ATTR})">\\s*<a>({_TAG_BODY})</a>\\s*<b>({_TAG_BODY})</b>\\s*</e>'),
    "l": re.compile(f"<l>({_TAG_BODY})</l>"),
    "x": re.compile(f"<x>({_TAG_BODY})</x>"),
    "end": re.compile(f"<end>({_TAG_BODY})</end>"),
}
_TAG_OPEN = re.compile(r"<(end|r|w|e|l|x)(?=[\s>])")
_ENTITY = re.compile(r"&(amp|lt|quot);")
_ENTITIES = {"amp": "&", "lt": "<", "quot": '"'}


def tag_escape(text: str, *, attr: bool = False) -> str:
    """Text written between tags (or, with ``attr``, in a quoted attribute)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;")
    return text.replace('"', "&quot;") if attr else text


def tag_unescape(text: str) -> str:
    """The inverse of :func:`tag_escape`; any other ``&`` is kept as written."""
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text)


class MicroTags(ToolInterfaceLevel):
    """Short tags in the reply text; several calls per reply run in order."""

    name = "micro_tags"
    description = "Calls as short tags in text: <r>, <w p=...>, <e p=...>, <l>, <x>, <end>."
    native_tools = False

    def tools(self) -> list[ToolSpec]:
        return [t.spec() for t in _TAG_TOOLS]

    def prompt_section(self) -> str:
        lines = "\n".join(f"{_TAG_SYNTAX[t.name]} {t.summary}" for t in _TAG_TOOLS)
        return f"Call tools with tags:\n{lines}\nWrite & as &amp; and < as &lt;."

    def supports(self, kind: str) -> bool:
        return kind in _TAG_BY_KIND

    def parse(self, turn: ModelTurn) -> list[ToolCall]:
        text, at = turn.content, 0
        calls: list[ToolCall] = []
        while (m := _TAG_OPEN.search(text, at)) is not None:
            tool = _TAG_BY_NAME[m.group(1)]
            call = _TAG_CALL[tool.name].match(text, m.start())
            if call is None:
                raise FormatError(f"bad <{tool.name}> call; write {_TAG_SYNTAX[tool.name]} "
                                  "(& as &amp;, < as &lt;)")
            values = [tag_unescape(v) for v in call.groups()]
            calls.append(ToolCall(id=f"tag_{len(calls)}", name=tool.name,
                                  arguments=dict(zip(tool.params, values, strict=True))))
            at = call.end()
        return calls

    def to_action(self, call: ToolCall) -> Action:
        tool = _TAG_BY_NAME.get(call.name)
        if tool is None:
            raise FormatError(f"unknown tag <{call.name}>; tags: {_names(_TAG_TOOLS, '<{}>')}",
                              call=call)
        args = {**tool.defaults, **call.arguments}
        if set(args) != set(tool.params) or not all(isinstance(v, str) for v in args.values()):
            raise FormatError(f"bad <{tool.name}> call; write {_TAG_SYNTAX[tool.name]}",
                              call=call)
        return tool.action(args)

    def render(self, action: Action, call_id: str) -> ModelTurn:
        tool = _TAG_BY_KIND[action.kind]
        a = {k: tag_escape(v) for k, v in tool.arguments(action).items()}
        if tool.name == "w":
            text = f'<w p="{tag_escape(action.args["path"], attr=True)}">{a["t"]}</w>'
        elif tool.name == "e":
            text = (f'<e p="{tag_escape(action.args["path"], attr=True)}">'
                    f'<a>{a["a"]}</a><b>{a["b"]}</b></e>')
        else:
            (value,) = a.values()
            text = f"<{tool.name}>{value}</{tool.name}>"
        return ModelTurn(content=text)


# -- micro_cmd --------------------------------------------------------------------------------

_CMD_TOOLS: tuple[_Tool, ...] = (
    _Tool("cat", "read", {"path": "path"}, "read"),
    _Tool("put", "write", {"path": "path", "text": "content"}, "write"),
    _Tool("sub", "edit", {"path": "path", "old": "old", "new": "new"}, "replace"),
    _Tool("dir", "list", {"path": "path"}, "list", {"path": "."}),
    _Tool("run", "shell", {"cmd": "command"}, "shell"),
    _Tool("bye", "finish", {"note": "message"}, "finish", {"note": ""}),
)
_CMD_BY_NAME, _CMD_BY_KIND = _index(_CMD_TOOLS)
_CMD_LINE = re.compile(r"^/([a-z]+)(?= |$)(.*)$")
_BARE = re.compile(r'[^\s"]+')
_DECODER = json.JSONDecoder()


def _cmd_usage(tool: _Tool) -> str:
    params = " ".join(p.upper() if p not in tool.defaults else f"[{p.upper()}]"
                      for p in tool.params)
    return f"/{tool.name} {params}".rstrip()


def _cmd_token(value: str) -> str:
    """An argument that is not the last: a bare word, else a JSON string."""
    if _BARE.fullmatch(value):
        return value
    return json.dumps(value, ensure_ascii=False)


def _cmd_rest(value: str) -> str:
    """The last argument: the rest of the line as written, else a JSON string."""
    if value and value == value.strip() and not value.startswith('"') and not (
            "\n" in value or "\r" in value):
        return value
    return json.dumps(value, ensure_ascii=False)


def _cmd_args(tool: _Tool, rest: str) -> list[str]:
    """The arguments written after ``/name`` (``rest`` starts with a space or is empty)."""
    values: list[str] = []
    wanted = len(tool.params)
    at = 0
    while at < len(rest) and len(values) < wanted:
        if rest[at] != " ":
            raise ValueError("separate arguments with spaces")
        while at < len(rest) and rest[at] == " ":
            at += 1
        if at == len(rest):
            break
        if len(values) == wanted - 1:  # the last argument: the rest of the line
            tail = rest[at:].rstrip()
            values.append(json.loads(tail) if tail.startswith('"') else tail)
            at = len(rest)
        elif rest[at] == '"':
            value, at = _DECODER.raw_decode(rest, at)
            values.append(value)
        else:
            word = _BARE.match(rest, at)
            assert word is not None
            values.append(word.group())
            at = word.end()
    if rest[at:].strip():
        raise ValueError("too many arguments")
    return values


class MicroCmd(ToolInterfaceLevel):
    """One slash command per line; the last argument takes the rest of the line."""

    name = "micro_cmd"
    description = "One slash command per line: /cat, /put, /sub, /dir, /run, /bye."
    native_tools = False

    def tools(self) -> list[ToolSpec]:
        return [t.spec() for t in _CMD_TOOLS]

    def prompt_section(self) -> str:
        usage = " | ".join(_cmd_usage(t) for t in _CMD_TOOLS)
        return (f"Commands, one per line: {usage}\n"
                'Quote an argument as a JSON string ("a b\\n") if it has spaces or newlines.')

    def supports(self, kind: str) -> bool:
        return kind in _CMD_BY_KIND

    def parse(self, turn: ModelTurn) -> list[ToolCall]:
        calls: list[ToolCall] = []
        for line in turn.content.split("\n"):
            m = _CMD_LINE.match(line.removesuffix("\r"))
            if m is None:
                continue
            tool = _CMD_BY_NAME.get(m.group(1))
            if tool is None:
                raise FormatError(f"unknown command /{m.group(1)}; commands: "
                                  f"{_names(_CMD_TOOLS, '/{}')}")
            try:
                values = _cmd_args(tool, m.group(2))
            except (ValueError, TypeError) as exc:
                raise FormatError(f"bad /{tool.name} line ({exc}); write "
                                  f"{_cmd_usage(tool)}") from None
            if not all(isinstance(v, str) for v in values):
                raise FormatError(f"bad /{tool.name} line; quoted arguments must be strings")
            calls.append(ToolCall(id=f"cmd_{len(calls)}", name=tool.name,
                                  arguments=dict(zip(tool.params, values, strict=False))))
        return calls

    def to_action(self, call: ToolCall) -> Action:
        tool = _CMD_BY_NAME.get(call.name)
        if tool is None:
            raise FormatError(f"unknown command /{call.name}; commands: "
                              f"{_names(_CMD_TOOLS, '/{}')}", call=call)
        args = {**tool.defaults, **call.arguments}
        if set(args) != set(tool.params) or not all(isinstance(v, str) for v in args.values()):
            raise FormatError(f"bad /{tool.name} arguments; write {_cmd_usage(tool)}",
                              call=call)
        return tool.action(args)

    def render(self, action: Action, call_id: str) -> ModelTurn:
        tool = _CMD_BY_KIND[action.kind]
        values = list(tool.arguments(action).values())
        parts = [_cmd_token(v) for v in values[:-1]] + [_cmd_rest(values[-1])]
        return ModelTurn(content=" ".join([f"/{tool.name}", *parts]))


#: In level order (index 0, 1, 2 of the micro space).
LEVELS: tuple[type[ToolInterfaceLevel], ...] = (MicroJson, MicroTags, MicroCmd)
