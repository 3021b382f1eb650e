"""What the built-in tool interfaces share about an embedding product's tools.

A product tool (:mod:`harnessgrid.product_tools`) arrives as a :class:`ToolSpec` with any JSON
schema; each interface writes its calls in its own syntax, but all of them check a call's
arguments the same way and describe the parameters to the model the same way, so a model
moved between interfaces hears the same words for the same mistake.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harnessgrid import safe_json
from harnessgrid.models import Action, FormatError, ToolCall, ToolSpec

if TYPE_CHECKING:
    import jsonschema

#: Placeholder values by JSON type, for the call examples in prompts (the schema's own
#: ``examples`` or ``default`` win when it has one).
_PLACEHOLDER: dict[str, Any] = {"string": "text", "integer": 1, "number": 1.5,
                                "boolean": True, "array": [], "object": {}}


def by_name(specs: Sequence[ToolSpec]) -> dict[str, ToolSpec]:
    return {spec.name: spec for spec in specs}


def tool_action(name: str, arguments: Mapping[str, Any]) -> Action:
    """The action a product-tool call means. ``arguments`` is written with plain
    ``json.dumps``: one canonical text per argument object, so render → parse is exact."""
    return Action.of("tool", name=name, arguments=json.dumps(dict(arguments)))


def action_arguments(action: Action) -> dict[str, Any] | None:
    """The argument object of a ``tool`` action; None when its text is not a JSON object
    (within the bounds of :func:`harnessgrid.safe_json.loads`). Never raises."""
    try:
        value = safe_json.loads(action.args["arguments"])
    except safe_json.JSONError:
        return None
    return value if isinstance(value, dict) else None


def type_name(schema: Any) -> str:
    """A short name for the type a (sub)schema describes, e.g. ``string``, ``list of
    integer``, ``string or null``, ``one of 'a', 'b'``."""
    if not isinstance(schema, dict):
        return "value"
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"][:8])
    if "const" in schema:
        return json.dumps(schema["const"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind == "array":
        items = schema.get("items")
        return f"list of {type_name(items)}" if items else "list"
    if isinstance(kind, str):
        return kind
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " or ".join(dict.fromkeys(type_name(s) for s in schema[key]))
    if isinstance(schema.get("$ref"), str):
        return "object " + str(schema["$ref"]).rsplit("/", 1)[-1]
    return "value"


def signature(spec: ToolSpec) -> str:
    """The parameters in one line: ``order_id (string), count (integer, optional)``."""
    required = set(spec.parameters.get("required", ()))
    parts = [f"{key} ({type_name(prop)}{'' if key in required else ', optional'})"
             for key, prop in spec.parameters.get("properties", {}).items()]
    return ", ".join(parts) or "no arguments"


def parameter_lines(spec: ToolSpec, indent: str = "    ") -> list[str]:
    """One line per parameter for a prompt: name, type, required or default, description."""
    required = set(spec.parameters.get("required", ()))
    lines = []
    for key, prop in spec.parameters.get("properties", {}).items():
        prop = prop if isinstance(prop, dict) else {}
        need = ("required" if key in required else
                f"optional, default {json.dumps(prop['default'])}" if "default" in prop
                else "optional")
        about = f": {prop['description']}" if prop.get("description") else ""
        lines.append(f"{indent}{key} ({type_name(prop)}, {need}){about}")
    return lines or [f"{indent}(no arguments)"]


def listing(specs: Sequence[ToolSpec], quote: str = "") -> str:
    """Each tool as a prompt line (name, description) followed by its parameter lines."""
    return "\n".join("\n".join([f"- {quote}{t.name}{quote}: {t.description}",
                                  *parameter_lines(t)]) for t in specs)


def example_arguments(spec: ToolSpec) -> dict[str, Any]:
    """Arguments for a prompt's example call: every required parameter (or the first one
    when none is required) with a value of its type."""
    props: dict[str, Any] = spec.parameters.get("properties", {})
    keys = [k for k in props if k in set(spec.parameters.get("required", ()))] or list(props)[:1]
    out: dict[str, Any] = {}
    for key in keys:
        prop = props[key] if isinstance(props[key], dict) else {}
        if isinstance(prop.get("examples"), list) and prop["examples"]:
            out[key] = prop["examples"][0]
        elif "default" in prop:
            out[key] = prop["default"]
        elif prop.get("enum"):
            out[key] = prop["enum"][0]
        else:
            kind = prop.get("type")
            out[key] = _PLACEHOLDER.get(kind if isinstance(kind, str) else "string", "text")
    return out


def _where(error: jsonschema.ValidationError) -> str:
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _describe(value: Any) -> str:
    shown = json.dumps(value, ensure_ascii=False, default=str)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"{type(value).__name__} {shown}"


def _problem(spec: ToolSpec, error: jsonschema.ValidationError) -> str:
    """One schema violation as a phrase naming the argument and what was expected."""
    where = _where(error)
    props: dict[str, Any] = spec.parameters.get("properties", {})
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [k for k in error.validator_value if k not in error.instance]
        if missing and not where:
            return (f"missing required argument {missing[0]!r} "
                    f"({type_name(props.get(missing[0]))})")
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = props if not where else (error.schema.get("properties") or {})
        extra = sorted(k for k in error.instance if k not in known)
        if extra:
            return (f"unexpected argument {', '.join(map(repr, extra))}"
                    + (f" in {where!r}" if where else ""))
    deeper = [e for e in error.context or () if len(e.absolute_path) > len(error.absolute_path)]
    if deeper:  # one alternative fits the value's shape and fails inside it: say where
        return _problem(spec, max(deeper, key=lambda e: len(e.absolute_path)))
    if error.validator == "type" and not where:
        return f"the arguments must be a JSON object, got {_describe(error.instance)}"
    if error.validator in ("type", "anyOf", "oneOf") and where:
        return (f"argument {where!r} must be {type_name(error.schema)}, "
                f"got {_describe(error.instance)}")
    return f"argument {where!r}: {error.message}" if where else str(error.message)


def check_arguments(spec: ToolSpec, arguments: Any) -> str | None:
    """Why ``arguments`` do not fit the tool's schema (naming each wrong argument and what
    the tool takes), or None when they do."""
    import jsonschema  # here, not at import: loading plugins must stay cheap

    validator = jsonschema.Draft202012Validator(spec.parameters)
    errors = sorted(validator.iter_errors(arguments),
                    key=lambda e: ([str(p) for p in e.absolute_path], str(e.validator)))
    if not errors:
        return None
    problems = "; ".join(dict.fromkeys(_problem(spec, e) for e in errors[:5]))
    return (f"invalid arguments for tool {spec.name!r}: {problems}. "
            f"It takes: {signature(spec)}")


def undecodable(call: ToolCall, how: str) -> FormatError:
    """The error for a call whose arguments were not valid JSON, showing (the start of)
    what was sent and ending with ``how`` to write them."""
    raw = call.raw_arguments if call.raw_arguments is not None else ""
    raw = raw if len(raw) <= 200 else raw[:200] + "..."
    return FormatError(f"the arguments of the {call.name!r} call were not valid JSON "
                       f"({call.parse_error}): {raw!r}; {how}", call=call)


def product_action(spec: ToolSpec, call: ToolCall, how: str) -> Action:
    """The action for a call of a product tool whose arguments were decoded into
    ``call.arguments``; :class:`FormatError` (ending with ``how``, the interface's way to
    write the call) for undecodable or schema-violating arguments."""
    if call.parse_error is not None:
        raise undecodable(call, how)
    problem = check_arguments(spec, call.arguments)
    if problem is not None:
        raise FormatError(problem, call=call)
    return tool_action(spec.name, call.arguments)
