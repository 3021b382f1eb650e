"""The tokenizer corpus of the micro demo: every kind of text its model will read or write.

:func:`micro_corpus` plays the scripted oracle (and, for a few tasks, a policy that gives up) through
every one of the 243 micro configurations and through the emulated shells (:data:`ADAPTERS`),
and renders what the model sees as the tiny model's ChatML chat
template renders it: system prompts, tool specs (``<tools>`` JSON for native interfaces),
tasks, calls, observations, workflow notes, window markers and digests. It adds the
instructions of both splits of the ``micro`` suite. A byte-level BPE trained on it learns the
recurring pieces as whole tokens, so prompts stay short in tokens.

A third of the configurations also get an episode that starts with a mistake (prose without a
call, or a call the interface rejects), so format-error observations and re-prompts are in the
corpus too. The episodes run *dry*: file tools act on a real temporary workspace, but shell commands are
interpreted here for the few the micro plans use (``rm``, ``mv``, ``cp``) instead of in the
bubblewrap sandbox. That keeps the corpus fast (no sandbox start per episode), the same on
every machine (bubblewrap or not) and so the trained tokenizer reproducible.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import shutil
from collections.abc import Mapping, Sequence
from typing import Any, cast

from harnessgrid.episode import ContextBudget, EpisodeState
from harnessgrid.harness import Harness, offered_tools, play_turn
from harnessgrid.models import Action, Message, ModelTurn, ToolCall, ToolSpec
from harnessgrid.policies import Policy, PolicyRequest, bind_to_episode
from harnessgrid.policies.scripted import ScriptedPolicy, plan_text
from harnessgrid.sandboxing.sandbox import CommandResult, Sandbox, SandboxLimits
from harnessgrid.sandboxing.tools import Environment
from harnessgrid.sandboxing.workspace import Workspace, WorkspaceError
from harnessgrid.tasks import Task

#: The emulated shells whose prompts the corpus holds: each shell's newest release (what
#: ``--adapters`` names by default) and the releases before them that a 4096-position micro
#: model can still hold (today's Claude Code and OpenClaw prompts are longer).
ADAPTERS = ("claude-code", "claude-code@1.0.98", "openclaw", "openclaw@2026.2.26", "gemini-cli")
#: Episodes per adapter (tasks dealt round-robin over the families).
ADAPTER_EPISODES = 48
_MAX_TURNS = 16


class _DryShell:
    """Stands in for the sandbox in corpus episodes: applies ``rm``, ``mv`` and ``cp`` to the
    workspace, prints nothing and exits 0. Shells that hand the command to a wrapper through
    the environment (Claude Code's) are read from there."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.limits = SandboxLimits()

    async def run(self, command: str, *, timeout_s: float | None = None,
                  cwd: str | None = None, env: Mapping[str, str] | None = None) -> CommandResult:
        script = " ".join(env.values()) if env else command
        try:
            argv = shlex.split(script)
        except ValueError:
            argv = []
        with contextlib.suppress(OSError, WorkspaceError):  # a failed command changes nothing
            self._apply(argv)
        return CommandResult(stdout="", stderr="", exit_code=0, timed_out=False,
                             truncated=False, duration_s=0.0)

    def _apply(self, argv: list[str]) -> None:
        ws = self.workspace
        if len(argv) >= 2 and argv[0] == "rm":
            for path in argv[1:]:
                ws.resolve(path).unlink(missing_ok=True)
        elif len(argv) == 3 and argv[0] in ("mv", "cp"):
            src, dest = ws.resolve(argv[1]), ws.resolve(argv[2])
            (shutil.move if argv[0] == "mv" else shutil.copyfile)(src, dest)


# -- rendering as the tiny model's chat template does -----------------------------------------

_TOOLS_HEAD = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
               "You are provided with function signatures within <tools></tools> XML tags:\n"
               "<tools>")
_TOOLS_TAIL = ("\n</tools>\n\nFor each function call, return a json object with function name "
               "and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
               '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')


def render_chatml(messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> str:
    """``messages`` (and native ``tools``) as :data:`harnessgrid.policies.tiny_model.CHAT_TEMPLATE`
    renders them (without the generation prompt)."""
    out: list[str] = []
    rest = list(messages)
    system = rest.pop(0).content if rest and rest[0].role == "system" else None
    if tools:
        specs = "".join("\n" + json.dumps(t.openai(), ensure_ascii=False) for t in tools)
        head = f"{system}\n\n" if system is not None else ""
        out.append(f"<|im_start|>system\n{head}{_TOOLS_HEAD}{specs}{_TOOLS_TAIL}<|im_end|>\n")
    elif system is not None:
        out.append(f"<|im_start|>system\n{system}<|im_end|>\n")
    for m in rest:
        if m.role in ("user", "system"):
            out.append(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n")
        elif m.role == "tool":
            out.append(f"<|im_start|>user\n<tool_response>\n{m.content}\n</tool_response>"
                       "<|im_end|>\n")
        else:
            calls = []
            for i, c in enumerate(m.tool_calls):
                sep = "\n" if i or m.content else ""
                args = (c.raw_arguments if c.raw_arguments is not None
                        else json.dumps(c.arguments, ensure_ascii=False))
                calls.append(f'{sep}<tool_call>\n{{"name": {json.dumps(c.name)}, '
                             f'"arguments": {args}}}\n</tool_call>')
            out.append(f"<|im_start|>assistant\n{m.content}{''.join(calls)}<|im_end|>\n")
    return "".join(out)


# -- dry episodes -----------------------------------------------------------------------------

async def _episode(harness: Any, task: Task, policy: Any) -> str:
    """One dry episode, rendered: the first view whole, then every message a later view adds
    (so window markers and digests appear as the model sees them)."""
    ws = Workspace.create(task.files, task.source_dir, mount_path=task.mount_path)
    try:
        env = Environment(workspace=ws, sandbox=cast(Sandbox, _DryShell(ws)))
        state = harness.start(task, f"corpus-{task.id}")
        policy = bind_to_episode(policy, harness, task, state)  # as every episode does
        budget = ContextBudget(max_tokens=32_768)
        parts: list[str] = []
        seen: list[Message] = []
        for _ in range(_MAX_TURNS):
            # what this turn offers (a shell that loads tools on demand offers more later)
            tools: list[ToolSpec] = offered_tools(harness, state) if harness.native_tools else []
            view = harness.view(state, budget)
            new = [m for m in view if m not in seen]
            parts.append(render_chatml(new, tools if not seen else ()))
            seen.extend(new)
            turn = await policy.act(PolicyRequest(
                messages=view, tools=tools, native_tools=harness.native_tools, state=state,
                new_segment=False))
            before = len(state.history)
            await play_turn(harness, state, turn, env)  # the step and the runtime's books
            parts.append(render_chatml(state.history[before:before + 1]))
            seen.append(state.history[before])
            if state.finished:
                break
        return "".join(parts)
    finally:
        ws.cleanup()


#: A wrong first reply per tool interface, so the corpus also holds the format-error
#: observations and re-prompts a learning policy meets.
_MISTAKES: dict[str, ModelTurn] = {
    "micro_json": ModelTurn(tool_calls=(ToolCall(id="bad_1", name="read_file",
                                                 arguments={"path": "notes.txt"}),)),
    "micro_tags": ModelTurn(content="<r>notes.txt"),
    "micro_cmd": ModelTurn(content="/cat"),
}


class _Sloppy:
    """The scripted oracle, but its first reply is a mistake: prose without a call, or a call
    its tool interface rejects."""

    def __init__(self, mistake: ModelTurn, oracle: Policy | None = None) -> None:
        self.mistake = mistake
        self.oracle: Policy = oracle or ScriptedPolicy()
        self.spec = "sloppy"

    def for_episode(self, harness: Harness, task: Task, state: EpisodeState) -> Policy:
        return _Sloppy(self.mistake, bind_to_episode(self.oracle, harness, task, state))

    async def act(self, request: PolicyRequest) -> ModelTurn:
        if request.state.turn == 0:
            return self.mistake
        return await self.oracle.act(request)


class _GivingUp:
    """Does nothing and says so through the workflow's protocol: an empty plan where one is
    asked for, then a finish call. (The null policy sends nothing at all; these texts are the
    ones the corpus has always had, so the tokenizer and the micro model stay as they were.)"""

    spec = "giving-up"

    def __init__(self, harness: Harness | None = None) -> None:
        self.harness = harness

    def for_episode(self, harness: Harness, task: Task, state: EpisodeState) -> Policy:
        return _GivingUp(harness)

    async def act(self, request: PolicyRequest) -> ModelTurn:
        state, harness = request.state, self.harness
        assert harness is not None, "bound to its episode first (bind_to_episode)"
        call_id = f"call_{state.turn + 1}"
        expected = harness.protocol.expected_turn(state)
        if expected is None:
            return harness.render_action(Action.of("finish", message="Done."), call_id, state)
        if expected.kind == "plan":
            return ModelTurn(content=plan_text(()))
        if expected.kind == "text":
            return ModelTurn(content=expected.text)
        return harness.render_action(expected.action, call_id, state)


def _sample(tasks: Sequence[Task], n: int) -> list[Task]:
    """``n`` tasks dealt round-robin over the families (deterministic)."""
    by_family: dict[str, list[Task]] = {}
    for t in tasks:
        by_family.setdefault(str(t.metadata["family"]), []).append(t)
    names = sorted(by_family)
    return [by_family[names[i % len(names)]][i // len(names)] for i in range(n)]


async def _all_episodes() -> list[str]:
    from harnessgrid.plugin_system.composition import compose
    from harnessgrid.plugin_system.registry import get_registry
    from harnessgrid.plugins.micro import MICRO_SPACE
    from harnessgrid.plugins.micro.tasks import micro_suite

    suite = micro_suite()
    train, evals = suite.tasks("train"), suite.tasks("eval")
    oracle, null = ScriptedPolicy(), _GivingUp()
    configs = list(MICRO_SPACE)
    picks = _sample(train, 2 * len(configs))
    texts: list[str] = []
    for i, config in enumerate(configs):
        harness = compose(config)
        texts.append(await _episode(harness, picks[2 * i], oracle))
        second: Any = oracle
        mistake = (i + i // 3) % 3  # not i % 3 alone: that is the workflow level's index
        if mistake == 1:
            second = _Sloppy(ModelTurn(content="Let me look at the files first."))
        elif mistake == 2:
            second = _Sloppy(_MISTAKES[config.level("tool_interface")])
        texts.append(await _episode(harness, picks[2 * i + 1], second))
        if i % 9 == 0:
            texts.append(await _episode(harness, picks[2 * i], null))
    registry = get_registry()
    for name in ADAPTERS:
        adapter = registry.adapter(name)
        for task in _sample(evals, ADAPTER_EPISODES):
            texts.append(await _episode(adapter.create(), task, oracle))
    return texts


def micro_corpus() -> list[str]:
    """Texts covering what the micro demo's model sees: dry oracle episodes through all 243
    micro configurations and the emulated shells of :data:`ADAPTERS`, rendered through the chat template, plus every
    instruction of its ``train`` and ``eval`` splits. Deterministic: the same list on every call and
    machine. Takes a few seconds (no sandbox needed)."""
    from harnessgrid.plugins.micro.tasks import micro_suite

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        texts = asyncio.run(_all_episodes())
    else:  # called from async code: run the episodes on a loop of their own
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1) as pool:
            texts = pool.submit(asyncio.run, _all_episodes()).result()
    # train and eval only: the held-out validation and test splits stay out of the tokenizer
    suite = micro_suite()
    texts.extend(f"<|im_start|>user\n{t.instruction}<|im_end|>\n"
                 for t in (*suite.tasks("train"), *suite.tasks("eval")))
    return texts
