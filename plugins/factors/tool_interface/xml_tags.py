"""``xml_tags``: tools described in the prompt, called with XML-like tags in the reply text.

Calls look like ``<view path="notes.txt"/>`` or ``<exec>ls -la</exec>``; a reply may hold several,
run in order. The tag names differ from the other interfaces on purpose. The syntax is our own
small dialect, not XML, chosen so any string survives a render → parse round trip:

- short parameters (``path``, ``pattern``) are quoted attributes; long text (file content, a
  command, the finish message, the ``old``/``new`` text of a replacement) goes between tags;
- between tags, one newline right after the opening tag and one right before the closing tag
  are layout and dropped; everything else is kept exactly, including spaces;
- :func:`escape_text` writes ``&lt;/`` for ``</`` (so content never closes its tag),
  ``&amp;`` for an ``&`` that starts something entity-like, and ``&#N;`` for control characters
  other than newline and tab; in attributes also ``&quot;`` and ``&#10;``/``&#9;``. Parsing
  decodes ``&amp; &lt; &gt; &quot; &apos; &#N; &#xH;`` and leaves any other ``&`` as written, so
  a model may write ``a && b`` or ``x < y`` without escaping (a reference that is no
  character, such as one of 100,000 digits, stays as written too). Every character, NUL
  included, round-trips.

Lenient where it is safe: attribute order, extra whitespace, single or double quotes, tag names in
any case, calls anywhere in the text. Strict where a guess could run the wrong thing: a tag at the
start of a line that is not a tool (except reasoning tags such as ``<think>``, whose contents are
ignored), a missing or unknown parameter, an unclosed tag. Those reject the whole reply with a
:class:`FormatError` that shows the expected syntax.

An embedding product's tools (:meth:`~harnessgrid.levels.ToolInterfaceLevel.add_product_tools`)
share one more tag, ``<tool name="lookup_order">{"order_id": "A1"}</tool>``: the tool's name as
the attribute, its arguments as one JSON object between the tags (escaped like any text
between tags). An unknown name or text that is not a JSON object (nesting too deep or a
number too long included: :mod:`harnessgrid.safe_json`) rejects the reply like any other
malformed call; arguments that break the tool's schema fail that call only, as wrong
arguments do in native tool calling. Without product tools ``<tool>`` is not a tag.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from harnessgrid import hookimpl, safe_json
from harnessgrid.levels import FactorLevel, ToolInterfaceLevel
from harnessgrid.models import Action, ActionKind, FormatError, ModelTurn, ToolCall, ToolSpec
from harnessgrid.plugins.factors.tool_interface import _product


@dataclass(frozen=True)
class _Tag:
    """One tool: tag name, the action it means and where each parameter is written."""

    name: str
    kind: ActionKind
    summary: str
    syntax: str
    attrs: tuple[str, ...] = ()
    body: str | None = None  # parameter written between the tags
    children: tuple[str, ...] = ()  # parameters written as child elements, in this order
    defaults: dict[str, str] = field(default_factory=dict)

    def params(self) -> tuple[str, ...]:
        return self.attrs + ((self.body,) if self.body else ()) + self.children


_TAGS: tuple[_Tag, ...] = (
    _Tag("view", "read", "show the text of a file", '<view path="FILE"/>', attrs=("path",)),
    _Tag("create", "write", "create or overwrite a file with exactly the text between the tags",
         '<create path="FILE">\nTEXT\n</create>', attrs=("path",), body="content"),
    _Tag("replace", "edit", "replace one exact occurrence of OLD with NEW in a file",
         '<replace path="FILE">\n<old>\nOLD\n</old>\n<new>\nNEW\n</new>\n</replace>',
         attrs=("path",), children=("old", "new")),
    _Tag("ls", "list", "list a directory (path defaults to \".\")", '<ls path="DIR"/>',
         attrs=("path",), defaults={"path": "."}),
    _Tag("grep", "search", "find lines matching a regular expression under a path "
         "(path defaults to \".\")", '<grep pattern="REGEX" path="DIR"/>',
         attrs=("pattern", "path"), defaults={"path": "."}),
    _Tag("exec", "shell", "run a shell command (bash) in the workspace",
         "<exec>\nCOMMAND\n</exec>", body="command"),
    _Tag("done", "finish", "end the task with a short summary", "<done>\nSUMMARY\n</done>",
         body="message", defaults={"message": ""}),
)
_BY_NAME: dict[str, _Tag] = {t.name: t for t in _TAGS}
_BY_KIND: dict[str, _Tag] = {t.kind: t for t in _TAGS}
#: Tags models use for thinking out loud: their contents are skipped, never run or rejected.
PROSE_TAGS = frozenset({"think", "thinking", "reasoning", "reflection", "analysis", "plan",
                        "answer", "summary", "scratchpad"})

# -- escaping --------------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ENTITY_LIKE = re.compile(r"&(?=#?\w+;)")
_ENTITY = re.compile(r"&(?:(amp|lt|gt|quot|apos)|#([0-9]+)|#[xX]([0-9a-fA-F]+));")
_NAMED = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}


def _char_ref(m: re.Match[str]) -> str:
    return f"&#{ord(m.group())};"


def escape_text(text: str) -> str:
    """Text between tags, written so that parsing gives it back unchanged."""
    text = _ENTITY_LIKE.sub("&amp;", text).replace("</", "&lt;/")
    return _CONTROL.sub(_char_ref, text)


def escape_attr(value: str) -> str:
    """An attribute value for double quotes, on one line."""
    value = _ENTITY_LIKE.sub("&amp;", value).replace('"', "&quot;")
    return re.sub(r"[\x00-\x1f\x7f-\x9f]", _char_ref, value)


#: Digits a character reference may have (leading zeros aside): U+10FFFF is 1114111 in
#: decimal. Longer is never a character, and ``int()`` of 4,300 digits raises.
_MAX_REF_DIGITS = 7


def _decode(m: re.Match[str]) -> str:
    named, dec, hexa = m.groups()
    if named:
        return _NAMED[named]
    if len((dec or hexa).lstrip("0")) > _MAX_REF_DIGITS:
        return m.group()  # not a character: leave it as written
    code = int(dec) if dec else int(hexa, 16)
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        return m.group()  # not a character: leave it as written
    return chr(code)


def unescape(text: str) -> str:
    """Decode the entities :func:`escape_text` / :func:`escape_attr` write; keep any other ``&``."""
    return _ENTITY.sub(_decode, text)


def _trim_layout(body: str) -> str:
    """Drop the one newline after the opening tag and the one before the closing tag."""
    for nl in ("\r\n", "\n"):
        if body.startswith(nl):
            body = body[len(nl):]
            break
    for nl in ("\r\n", "\n"):
        if body.endswith(nl):
            return body[: -len(nl)]
    return body


# -- parsing ---------------------------------------------------------------------------------

_OPEN = re.compile(r"(?P<bol>^[ \t]*)?<(?P<name>[A-Za-z_][\w.-]*)(?=[\s/>]|\Z)", re.MULTILINE)
_ATTR = re.compile(r"\s+([A-Za-z_][\w.-]*)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")
_UNQUOTED = re.compile(r"\s+([A-Za-z_][\w.-]*)\s*=\s*[^\s\"']")
_TAG_END = re.compile(r"\s*(/?)>")
_CHILD = re.compile(r"\s*<([A-Za-z_][\w.-]*)\s*>")


def _snippet(text: str, at: int) -> str:
    shown = text[at:at + 40]
    return repr(shown + ("..." if len(text) > at + 40 else ""))


def _tool_list(product: Mapping[str, ToolSpec] | None = None) -> str:
    tags = ", ".join(f"<{t.name}>" for t in _TAGS)
    if not product:
        return tags
    return f'{tags}, and <tool name="..."> for {", ".join(product)}'


def _closing(text: str, name: str, start: int) -> re.Match[str] | None:
    return re.compile(rf"</{re.escape(name)}\s*>", re.IGNORECASE).search(text, start)


def _parse_attrs(text: str, at: int, tag: _Tag) -> tuple[dict[str, str], bool, int]:
    """Attributes from ``at`` to the end of the opening tag: (values, self-closing, end)."""
    values: dict[str, str] = {}
    while True:
        end = _TAG_END.match(text, at)
        if end:
            return values, end.group(1) == "/", end.end()
        attr = _ATTR.match(text, at)
        if attr is None:
            if at >= len(text.rstrip()):
                problem = "the tag is cut off"
            elif _UNQUOTED.match(text, at):
                problem = "attribute values must be in quotes"
            else:
                problem = f"cannot read the tag at {_snippet(text, at)}"
            raise FormatError(f"malformed <{tag.name}> call: {problem}; write it as "
                              f"{tag.syntax!r}")
        key = attr.group(1).lower()
        if key not in tag.attrs:
            takes = ", ".join(tag.attrs) or "no attributes"
            raise FormatError(f"<{tag.name}> has no attribute {key!r} (it takes {takes}); "
                              f"write it as {tag.syntax!r}")
        if key in values:
            raise FormatError(f"<{tag.name}> sets the attribute {key!r} twice")
        raw = attr.group(2) if attr.group(2) is not None else attr.group(3)
        values[key] = unescape(raw)
        at = attr.end()


def _parse_children(body: str, tag: _Tag) -> dict[str, str]:
    """``<old>…</old><new>…</new>`` inside a tag, separated by whitespace only."""
    values: dict[str, str] = {}
    at = 0
    while body[at:].strip():
        child = _CHILD.match(body, at)
        name = child.group(1).lower() if child else ""
        if child is None or name not in tag.children:
            allowed = " and ".join(f"<{c}>" for c in tag.children)
            raise FormatError(f"inside <{tag.name}> only {allowed} elements may appear, found "
                              f"{_snippet(body, at)}; write it as {tag.syntax!r}")
        if name in values:
            raise FormatError(f"<{tag.name}> has two <{name}> elements")
        close = _closing(body, name, child.end())
        if close is None:
            raise FormatError(f"<{name}> inside <{tag.name}> is never closed; "
                              f"end it with </{name}>")
        values[name] = unescape(_trim_layout(body[child.end():close.start()]))
        at = close.end()
    return values


def _parse_call(text: str, at: int, tag: _Tag) -> tuple[dict[str, str], int]:
    """One call whose tag name ends at ``at``: (arguments, end of the call)."""
    args, self_closing, at = _parse_attrs(text, at, tag)
    body: str | None = None
    if not self_closing:
        close = _closing(text, tag.name, at)
        if close is None:
            raise FormatError(f"<{tag.name}> is never closed: end it with </{tag.name}> "
                              f"(or write a tag without content as <{tag.name} .../>); "
                              f"expected {tag.syntax!r}")
        body, at = text[at:close.start()], close.end()
    if tag.children:
        args.update(_parse_children(body or "", tag))
    elif tag.body:
        if body is not None:
            args[tag.body] = unescape(_trim_layout(body))
    elif body is not None and body.strip():
        raise FormatError(f"<{tag.name}> takes no text between tags; write it as {tag.syntax!r}")
    missing = [p for p in tag.params() if p not in args and p not in tag.defaults]
    if missing:
        raise FormatError(f"<{tag.name}> is missing its {missing[0]!r} parameter; write it as "
                          f"{tag.syntax!r}")
    return {**tag.defaults, **args}, at


def _product_example(spec: ToolSpec) -> str:
    return _render_product(spec.name, _product.example_arguments(spec))


def _product_call(text: str, at: int, product: Mapping[str, ToolSpec], index: int) -> tuple[
        ToolCall, int]:
    """One ``<tool name=...>`` call whose tag name ends at ``at``: (call, end of the call)."""
    first = _product_example(next(iter(product.values())))
    tag = _Tag("tool", "tool", "", first, attrs=("name",), body="arguments",
               defaults={"arguments": ""})
    args, end = _parse_call(text, at, tag)
    spec = product.get(args["name"])
    if spec is None:
        raise FormatError(f"unknown tool {args['name']!r} in <tool name=...>; the application "
                          f"tools are {', '.join(product)} (the others have tags of their "
                          f"own: {_tool_list()})")
    body = args["arguments"].strip()
    try:
        arguments = safe_json.loads(body) if body else {}
    except safe_json.JSONError as exc:
        raise FormatError(f"the arguments of <tool name=\"{spec.name}\"> are not valid JSON "
                          f"({exc}); write one JSON object between the tags, e.g. "
                          f"{_product_example(spec)!r}") from None
    if not isinstance(arguments, dict):
        raise FormatError(f"the arguments of <tool name=\"{spec.name}\"> must be one JSON "
                          f"object ({{...}}), got a {type(arguments).__name__}; write it as "
                          f"{_product_example(spec)!r}")
    return ToolCall(id=f"xml_{index}", name=spec.name, arguments=arguments), end


def parse_calls(text: str, product: Mapping[str, ToolSpec] | None = None) -> list[ToolCall]:
    """Every call in ``text``, in order; :class:`FormatError` for a call written wrongly.
    ``product`` (name → spec) makes ``<tool name=...>`` a tag calling those tools."""
    calls: list[ToolCall] = []
    at = 0
    while (m := _OPEN.search(text, at)) is not None:
        name = m.group("name").lower()
        if name in PROSE_TAGS:
            close = _closing(text, name, m.end())
            if close is None:
                break  # an unclosed reasoning block runs to the end of the reply
            at = close.end()
        elif name in _BY_NAME:
            args, at = _parse_call(text, m.end(), _BY_NAME[name])
            calls.append(ToolCall(id=f"xml_{len(calls)}", name=name, arguments=args))
        elif name == "tool" and product:
            call, at = _product_call(text, m.end(), product, len(calls))
            calls.append(call)
        elif m.group("bol") is not None:
            raise FormatError(f"unknown tool <{m.group('name')}>; the tools are "
                              f"{_tool_list(product)}")
        else:
            at = m.end()
    return calls


def _render_call(tag: _Tag, args: dict[str, str]) -> str:
    attrs = "".join(f' {a}="{escape_attr(args[a])}"' for a in tag.attrs)
    if tag.children:
        inner = "".join(f"<{c}>\n{escape_text(args[c])}\n</{c}>\n" for c in tag.children)
        return f"<{tag.name}{attrs}>\n{inner}</{tag.name}>"
    if tag.body:
        return f"<{tag.name}{attrs}>\n{escape_text(args[tag.body])}\n</{tag.name}>"
    return f"<{tag.name}{attrs}/>"


def _render_product(name: str, arguments: dict[str, Any] | str) -> str:
    """A product-tool call; the JSON is written with its characters as they are (the
    action's canonical text escapes non-ASCII), text that is not an object as written."""
    body = arguments if isinstance(arguments, str) else json.dumps(arguments,
                                                                   ensure_ascii=False)
    return f'<tool name="{escape_attr(name)}">\n{escape_text(body)}\n</tool>'


class XmlTags(ToolInterfaceLevel):
    """Tools described in the system prompt and called with XML-like tags in the text."""

    name = "xml_tags"
    description = ("Calls written in the reply as tags: <view/>, <create>, <replace>, <ls/>, "
                   "<grep/>, <exec>, <done>.")
    native_tools = False
    supports_product_tools = True

    def tools(self) -> list[ToolSpec]:
        return [*(ToolSpec(name=t.name, description=t.summary, parameters={
            "type": "object",
            "properties": {p: {"type": "string"} for p in t.params()},
            "required": [p for p in t.params() if p not in t.defaults],
            "additionalProperties": False,
        }) for t in _TAGS), *self.product_tools]

    def prompt_section(self) -> str:
        tools = "\n".join(f"- {t.summary}:\n{_indent(t.syntax)}" for t in _TAGS)
        example = _render_call(_BY_NAME["replace"], {"path": "app/config.ini",
                                                     "old": "debug = true",
                                                     "new": "debug = false"})
        return (
            "## Tools\n"
            "Call a tool by writing its tag in your reply; text outside tags is for your own "
            "notes. You may write several calls in one reply: they run in order and you see "
            "every result in the next message. Paths are relative to the workspace.\n\n"
            f"{tools}\n\n"
            "Syntax rules: put attribute values in double quotes. Text between tags is taken "
            "exactly, except the newline right after the opening tag and the one right before "
            "the closing tag. Inside text or attributes write `&lt;/` for `</`, and `&amp;` "
            "for an `&` that would otherwise read as an entity such as `&lt;`; other "
            "characters (`<`, `>`, `&&`, quotes, newlines) may be written as they are.\n\n"
            f"Example — change one line of a file:\n{example}"
        ) + self._product_section()

    def _product_section(self) -> str:
        if not self.product_tools:
            return ""
        tools = _product.listing(self.product_tools)
        first = self.product_tools[0]
        return (
            "\n\n## Application tools\n"
            "These tools belong to the application you work in and run outside the workspace. "
            "Call one with a tag named tool: the tool's name in its name attribute, the "
            "arguments as one JSON object between the tags (the syntax rules above "
            "apply).\n\n"
            f"{tools}\n\n"
            f"Example — call {first.name}:\n{_product_example(first)}"
        )

    def supports(self, kind: str) -> bool:
        return kind in _BY_KIND or (kind == "tool" and bool(self.product_tools))

    def parse(self, turn: ModelTurn) -> list[ToolCall]:
        return parse_calls(turn.content, _product.by_name(self.product_tools))

    def to_action(self, call: ToolCall) -> Action:
        product = _product.by_name(self.product_tools)
        spec = product.get(call.name)
        if spec is not None:  # the exact name first: tag names match in any case
            return _product.product_action(
                spec, call, f"write it as {_product_example(spec)!r}")
        tag = _BY_NAME.get(call.name.lower())
        if tag is None:
            raise FormatError(f"unknown tool <{call.name}>; the tools are "
                              f"{_tool_list(product)}", call=call)
        args: dict[str, Any] = {**tag.defaults, **call.arguments}
        wrong = sorted(set(args) - set(tag.params()))
        missing = [p for p in tag.params() if p not in args]
        bad = [p for p in tag.params() if p in args and not isinstance(args[p], str)]
        if wrong or missing or bad:
            problem = (f"unknown parameter {wrong[0]!r}" if wrong else
                       f"missing parameter {missing[0]!r}" if missing else
                       f"parameter {bad[0]!r} must be text")
            raise FormatError(f"<{tag.name}>: {problem}; write it as {tag.syntax!r}", call=call)
        return Action(kind=tag.kind, args={p: args[p] for p in tag.params()})

    def render(self, action: Action, call_id: str) -> ModelTurn:
        if action.kind == "tool":
            arguments = _product.action_arguments(action)
            return ModelTurn(content=_render_product(
                action.args["name"], action.args["arguments"] if arguments is None
                else arguments))
        return ModelTurn(content=_render_call(_BY_KIND[action.kind], dict(action.args)))


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.split("\n"))


@hookimpl
def harnessgrid_factor_levels() -> Iterator[type[FactorLevel]]:
    yield XmlTags
