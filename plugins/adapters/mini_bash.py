"""``adapter:mini-bash``: one bash command per turn, in the style of mini-swe-agent.

A deliberately small adapter, and the worked example of CONTRIBUTING.md ("Writing an
adapter"): it implements the ``Harness`` protocol directly in about a hundred lines. The model
writes exactly one fenced ```bash block per reply; the block runs in the sandbox and the model
reads back the exit code and output as a plain user message. There are no other tools. To
finish, the model runs ``echo MINI_BASH_DONE`` followed by its summary: the command is executed
like any other, and when its output starts with the line ``MINI_BASH_DONE`` the episode ends
with the rest of the output as the final message (mini-swe-agent also submits through the
output of a sentinel command, so a model can compute its answer in the same step).

In an embedding session, product tools are commands inside the sandbox that call back to the
host (``NAME '<JSON arguments>'``, listed at the end of the system prompt), since the model
has nothing but bash; an approval callback that denies a command leaves it unrun and answers
with mini-swe-agent's rejection text for confirm mode (``InteractiveAgent``: "Commands not
executed. The user rejected your commands with the following message: ...").
"""

from __future__ import annotations

import bisect
import json
import re
import shlex
from collections.abc import Iterator, Sequence
from typing import Any

from harnessgrid import hookimpl
from harnessgrid.episode import (
    ContextBudget,
    Decision,
    EpisodeState,
    ExecutedCall,
    TurnOutcome,
    WorkflowProtocol,
)
from harnessgrid.errors import ConfigError
from harnessgrid.harness import task_message
from harnessgrid.models import Action, FormatError, Message, ModelTurn, ToolCall, ToolSpec
from harnessgrid.observations import exit_code, observation_message
from harnessgrid.registrations import AdapterSpec
from harnessgrid.sandboxing.tool_hooks import Denied, approved_call
from harnessgrid.sandboxing.tools import Environment, as_shell, execute
from harnessgrid.tasks import Task

SENTINEL = "MINI_BASH_DONE"
MAX_OUTPUT_CHARS = 10_000
_OPENING = re.compile(r"(`{3,})bash[ \t]*")
_CLOSING = re.compile(r"(`{3,})[ \t]*")

SYSTEM_PROMPT = """You solve tasks by running shell commands in a sandboxed workspace at {mount}.
Every reply has two parts: a short thought, then exactly one ```bash block holding one command
line or script. It runs from the workspace directory and you get back its exit code and output.
Commands do not share state (no cd or exported variables carry over). When the task is done and
checked, run `echo {sentinel}` followed by a one-line summary, e.g.:
```bash
echo {sentinel} && echo "Converted data.tsv to CSV and checked the header."
```"""
PRODUCT_TOOLS_PROMPT = """
These commands call the application's tools. Each takes its arguments as one JSON object in
single quotes, e.g. `{example}`, and prints the tool's result (or an error, with exit code 1):
{tools}"""
REJECTED = "Commands not executed. The user rejected your commands with the following message: "


def bash_blocks(text: str) -> list[str]:
    """The bodies of the ```bash blocks of a reply, in one linear pass over its lines.

    A block opens on a line ``<fence>bash`` (a fence being three or more backticks, trailing
    spaces allowed) and closes at the first later line holding exactly the same fence, not
    the line right after the opening (that one is always body). Blocks do not nest or overlap.
    (The same blocks as ``^(`{3,})bash[ \\t]*\\n(.*?)\\n\\1[ \\t]*$`` finds with DOTALL and
    MULTILINE, whose backtracking took quadratic time on a reply of many unclosed openings.)
    """
    lines = text.split("\n")
    closings: dict[int, list[int]] = {}
    for number, line in enumerate(lines):
        match = _CLOSING.fullmatch(line)
        if match is not None:
            closings.setdefault(len(match.group(1)), []).append(number)
    blocks: list[str] = []
    i = 0
    while i < len(lines) - 1:  # an opening needs a newline after it
        match = _OPENING.fullmatch(lines[i])
        if match is not None:
            candidates = closings.get(len(match.group(1)), [])
            k = bisect.bisect_left(candidates, i + 2)
            if k < len(candidates):
                close = candidates[k]
                blocks.append("\n".join(lines[i + 1:close]))
                i = close + 1
                continue
        i += 1
    return blocks


def _clip(text: str) -> str:
    """Head and tail of a long output, so one noisy command cannot flood the context."""
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    half = MAX_OUTPUT_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


class MiniBashHarness:
    """One ```bash block per turn; full history; finish through the sentinel's output."""

    name = "adapter:mini-bash"
    protocol = WorkflowProtocol()
    native_tools = False  # the command is written in text, not as a native tool call
    product_tools: tuple[ToolSpec, ...] = ()

    def add_product_tools(self, tools: Sequence[ToolSpec]) -> None:
        """Present an embedding product's tools as commands in the sandbox (the sandbox runs
        them on the host), listed in the system prompt (replacing any given before)."""
        names = [t.name for t in tools]
        for name in names:
            if name == "bash" or names.count(name) > 1:
                raise ConfigError(f"product tool {name!r} " + (
                    "would shadow bash, adapter:mini-bash's only tool" if name == "bash"
                    else "is given twice"),
                    hint="register it under another name: product_tool(fn, name=...)")
        self.product_tools = tuple(tools)

    def tools(self) -> list[ToolSpec]:
        schema = {"type": "object", "properties": {"command": {"type": "string"}},
                  "required": ["command"]}
        return [ToolSpec(name="bash", description="Run one command (one ```bash block).",
                         parameters=schema)]

    def start(self, task: Task, episode_id: str) -> EpisodeState:
        state = EpisodeState(episode_id=episode_id, task_id=task.id)
        prompt = SYSTEM_PROMPT.format(mount=task.mount_path, sentinel=SENTINEL)
        if self.product_tools:
            first = self.product_tools[0]
            example = as_shell(Action.of("tool", name=first.name, arguments=json.dumps(
                _example(first.parameters)))).args["command"]
            prompt += PRODUCT_TOOLS_PROMPT.format(example=example, tools="\n".join(
                    f"- {t.name}: {t.description} Arguments: {_arguments(t.parameters)}."
                    for t in self.product_tools))
        state.append(Message(role="system", content=prompt, kind="system", pinned=True),
                     task_message(task))
        return state

    def view(self, state: EpisodeState, budget: ContextBudget) -> list[Message]:
        return list(state.history)  # no context management: the whole history every turn

    async def step(self, state: EpisodeState, turn: ModelTurn, env: Environment) -> tuple[
            TurnOutcome, Decision]:
        outcome = TurnOutcome(turn=turn)
        blocks = bash_blocks(turn.content)
        if len(blocks) != 1:
            outcome.format_error = FormatError(
                f"expected exactly one ```bash block, found {len(blocks)}")
            state.append(turn.message(), Message(
                role="user", kind="format_error",
                content=f"Format error: {outcome.format_error.message}. Reply with one thought "
                        "and exactly one ```bash block."))
            return outcome, Decision(format_error=True)
        call = ToolCall(id=f"bash_{state.turn}", name="bash", arguments={"command": blocks[0]})
        state.append(turn.message().model_copy(update={"parsed_calls": (call,)}))
        action = Action.of("shell", command=blocks[0])
        checked = await approved_call(env, call, action, outcome, read=_command_call)
        if isinstance(checked, Denied):
            state.append(observation_message(call, REJECTED + checked.reason, native=False,
                                             kind="tool_error"))
            return outcome, Decision()
        if isinstance(checked, ToolCall) and checked is not call:  # the callback changed it
            call, action = checked, Action.of("shell", command=checked.arguments["command"])
        result = await execute(action, env)
        outcome.executed.append(ExecutedCall(call, action, result))
        output = result.output + result.stderr
        if output.split("\n", 1)[0].strip() == SENTINEL:
            outcome.finish = Action.of("finish", message=output.partition("\n")[2].strip())
            return outcome, Decision(finished=True)
        code = exit_code(result.exit_code)  # None for a code no process returns: total
        status = "timed out" if result.timed_out else f"exit code {'?' if code is None else code}"
        state.append(observation_message(
            call, f"[{status}]\n{_clip(output) or '(no output)'}", native=False))
        return outcome, Decision()

    def render_action(self, action: Action, call_id: str,
                      state: EpisodeState | None = None) -> ModelTurn:
        if action.kind == "finish":
            command = f"echo {SENTINEL} && echo {shlex.quote(action.args['message'])}"
        else:
            command = as_shell(action).args["command"]
        fence = "`" * max(3, 1 + max((len(r) for r in re.findall("`+", command)), default=0))
        return ModelTurn(content=f"Next step: {action.kind}.\n{fence}bash\n{command}\n{fence}")


def _command_call(call: ToolCall) -> ToolCall:
    """The approval callback's change of a command: still one bash command, or the product's
    mistake (a ConfigError: mini-bash has nothing else to run)."""
    command = call.arguments.get("command")
    if call.name != "bash" or not isinstance(command, str):
        raise ConfigError(f"the approval callback modified a call into {call.name!r} "
                          f"with arguments {dict(call.arguments)!r}, which "
                          "adapter:mini-bash cannot run",
                          hint="modify only the command: modify(request.call."
                               "model_copy(update={'arguments': {'command': ...}}))")
    return call


def _arguments(schema: dict[str, Any]) -> str:
    """A product tool's arguments in a few words: ``id (string), full (boolean, optional)``."""
    required = set(schema.get("required", ()))
    parts = []
    for key, prop in schema.get("properties", {}).items():
        kind = prop.get("type", "value") if isinstance(prop, dict) else "value"
        kind = kind if isinstance(kind, str) else " or ".join(map(str, kind))
        parts.append(f"{key} ({kind}{'' if key in required else ', optional'})")
    return ", ".join(parts) or "none"


def _example(schema: dict[str, Any]) -> dict[str, Any]:
    """Example arguments: the required ones (else the first), each a value of its type."""
    props: dict[str, Any] = schema.get("properties", {})
    keys = [k for k in props if k in set(schema.get("required", ()))] or list(props)[:1]
    values = {"integer": 1, "number": 1.5, "boolean": True, "array": [], "object": {}}
    return {k: values.get(props[k].get("type") if isinstance(props[k], dict) else "", "text")
            for k in keys}


def create(**options: Any) -> MiniBashHarness:
    if options:
        raise ConfigError(f"adapter:mini-bash takes no options, got {sorted(options)}")
    return MiniBashHarness()


@hookimpl
def harnessgrid_adapters() -> Iterator[AdapterSpec]:
    yield AdapterSpec(name="mini-bash", create=create, version="1",
                      description="One ```bash block per turn, plain observations, finish by "
                                  "`echo MINI_BASH_DONE` (mini-swe-agent style).")
