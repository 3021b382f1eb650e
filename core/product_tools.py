"""Tools an embedding product gives the agent: Python functions that run on the host.

A product registers a function; harnessgrid derives the tool's JSON schema from its typed
parameters (pydantic), every tool interface presents it in its own syntax (a native tool, an
XML tag, a command inside the sandbox that calls back to the host) and every call runs here,
outside the sandbox, with a timeout. Whatever the function does wrong (bad arguments, an
exception, a timeout) is an observation for the model, never a crashed session::

    import harnessgrid as hg

    @hg.product_tool(timeout_s=5)
    def lookup_order(order_id: str, include_items: bool = False) -> dict:
        \"\"\"Look up an order in the shop's database.\"\"\"
        return {"id": order_id, "status": "shipped"}

    with hg.Session("./repo", harness="S1-T0-O2-C1-W0", policy="openai:gpt-4o-mini",
                    tools=[lookup_order]) as session:
        session.run("Is order A17 shipped? Write the answer to status.md")
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
from collections.abc import Callable, Iterable
from typing import Any, get_type_hints

from harnessgrid.errors import ConfigError
from harnessgrid.models import ToolResult, ToolSpec

#: A name every tool syntax accepts: OpenAI/Anthropic tool names, XML tag values, shell
#: function names, Claude Code's ``mcp__server__tool`` parts.
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,47}$")
MAX_RESULT_CHARS = 100_000


class ProductTool:
    """A host function presented to the agent as a tool. Make one with :func:`product_tool`."""

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None,
                 description: str | None = None, timeout_s: float = 30.0) -> None:
        import pydantic

        if not callable(fn):
            raise ConfigError(f"product tool {fn!r} is not callable",
                              hint="pass a function (def or async def)")
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", ""))
        if not _NAME.match(self.name):
            raise ConfigError(f"product tool name {self.name!r} is not usable in every tool "
                              "syntax",
                              hint="use a letter then letters, digits or '_' (at most 48), "
                                   "e.g. name='lookup_order'")
        doc = inspect.getdoc(fn) or ""
        self.description = (description or doc.split("\n\n")[0].replace("\n", " ")).strip()
        if not self.description:
            raise ConfigError(f"product tool {self.name!r} has no description",
                              hint="give the function a docstring or pass description=...: "
                                   "the model decides from it when to call the tool")
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not (
                timeout_s > 0):
            raise ConfigError(f"timeout_s={timeout_s!r} for product tool {self.name!r} must "
                              "be a positive number of seconds", hint="e.g. timeout_s=10")
        self.timeout_s = float(timeout_s)
        self._model = _arguments_model(fn, self.name, pydantic)
        self.parameters = _schema(self._model)

    def __repr__(self) -> str:
        return f"ProductTool({self.name!r})"

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description,
                        parameters=self.parameters)

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        """Run the function with ``arguments`` (validated against the schema) on the host."""
        import pydantic

        start = time.perf_counter()

        def failed(error: str, *, timed_out: bool = False) -> ToolResult:
            return ToolResult(error=error, timed_out=timed_out,
                              duration_s=time.perf_counter() - start)

        if not isinstance(arguments, dict):
            return failed(f"the arguments of {self.name!r} must be a JSON object, got "
                          f"{type(arguments).__name__}")
        try:
            values = self._model.model_validate(arguments)
        except pydantic.ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                                 for e in exc.errors()[:5])
            return failed(f"invalid arguments for tool {self.name!r}: {problems}. It takes: "
                          f"{_signature(self.parameters)}")
        kwargs = {field: getattr(values, field) for field in type(values).model_fields}
        try:
            if inspect.iscoroutinefunction(self.fn):
                value = await asyncio.wait_for(self.fn(**kwargs), self.timeout_s)
            else:
                # A blocking function runs in a thread; on timeout the model is told at once
                # (the thread itself cannot be stopped and finishes on its own).
                value = await asyncio.wait_for(asyncio.to_thread(self.fn, **kwargs),
                                               self.timeout_s)
                if inspect.isawaitable(value):
                    value = await asyncio.wait_for(value, self.timeout_s)
        except TimeoutError:
            return failed(f"tool {self.name!r} did not answer within {self.timeout_s:g} s",
                          timed_out=True)
        except Exception as exc:  # noqa: BLE001 - the product's bug is the model's observation
            return failed(f"tool {self.name!r} failed: {type(exc).__name__}: {exc}")
        text = _as_text(value)
        truncated = len(text) > MAX_RESULT_CHARS
        return ToolResult(output=text[:MAX_RESULT_CHARS], truncated=truncated,
                          duration_s=time.perf_counter() - start)


def product_tool(fn: Callable[..., Any] | None = None, *, name: str | None = None,
                 description: str | None = None,
                 timeout_s: float = 30.0) -> Any:
    """Make ``fn`` a :class:`ProductTool`; usable bare (``@product_tool``) or with options
    (``@product_tool(timeout_s=5)``). Parameters need type hints (``str``, ``int``, ``bool``,
    ``list[str]``, pydantic models, ``Annotated[str, Field(description=...)]``); the
    docstring's first paragraph is the tool's description."""
    if fn is None:
        return lambda f: ProductTool(f, name=name, description=description,
                                     timeout_s=timeout_s)
    return ProductTool(fn, name=name, description=description, timeout_s=timeout_s)


def product_tools(tools: Iterable[Callable[..., Any] | ProductTool]) -> dict[str, ProductTool]:
    """Functions and tools as a name → tool table; a plain function becomes a tool with the
    defaults. Two tools with one name are refused."""
    table: dict[str, ProductTool] = {}
    for item in tools:
        tool = item if isinstance(item, ProductTool) else ProductTool(item)
        if tool.name in table:
            raise ConfigError(f"two product tools are named {tool.name!r}",
                              hint="give one of them another name: product_tool(fn, name=...)")
        table[tool.name] = tool
    return table


def _arguments_model(fn: Callable[..., Any], name: str, pydantic: Any) -> Any:
    try:
        signature = inspect.signature(fn)
        hints = get_type_hints(fn, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise ConfigError(f"cannot read the parameters of product tool {name!r}: {exc}",
                          hint="use a plain function with type-hinted parameters") from None
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigError(f"product tool {name!r} takes *{param.name}: a tool's arguments "
                              "must be named", hint="declare each argument as a parameter")
        if param.name not in hints:
            raise ConfigError(f"parameter {param.name!r} of product tool {name!r} has no type "
                              "hint", hint=f"annotate it, e.g. {param.name}: str")
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hints[param.name], default)
    try:
        return pydantic.create_model(f"{name}_arguments",
                                     __config__=pydantic.ConfigDict(extra="forbid"), **fields)
    except (TypeError, pydantic.PydanticSchemaGenerationError) as exc:
        raise ConfigError(f"the parameters of product tool {name!r} have a type pydantic "
                          f"cannot describe: {exc}",
                          hint="use JSON-like types (str, int, float, bool, list, dict, "
                               "pydantic models)") from None


def _schema(model: Any) -> dict[str, Any]:
    """The JSON schema of the arguments, without pydantic's titles (noise in the prompt)."""
    schema = model.model_json_schema()

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items()
                    if not (k == "title" and isinstance(v, str))}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    out: dict[str, Any] = strip(schema)
    out.setdefault("properties", {})
    return out


def _signature(schema: dict[str, Any]) -> str:
    required = set(schema.get("required", ()))
    parts = []
    for key, prop in schema.get("properties", {}).items():
        kind = prop.get("type", "value") if isinstance(prop, dict) else "value"
        parts.append(f"{key} ({kind}{'' if key in required else ', optional'})")
    return ", ".join(parts) or "no arguments"


def _as_text(value: Any) -> str:
    """What the function returned, as the model reads it; never raises: a value that no
    encoding can write (an int past 4,300 digits, a cycle, nesting deeper than the stack, a
    ``__str__`` that raises) is described by its type instead."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        from pydantic import BaseModel

        if isinstance(value, BaseModel):
            return value.model_dump_json()
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - the product's value: the model learns only its type
        return f"<a {type(value).__name__} that cannot be shown as text>"
