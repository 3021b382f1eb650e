"""Testing a plugin against harnessgrid's contracts, with harnessgrid's own checks.

- :class:`ReplayPolicy` plays a fixed list of model turns, one per turn, and fails loudly when
  the harness asks for one more: an adapter's test says exactly what the model sends and reads
  exactly what came back (``policy.requests``).
- :func:`check_adapter` runs the contract an adapter must keep, through real episodes in real
  sandboxes, and returns the problems it found (``[]`` when none): the scripted oracle solves
  example tasks through it and a policy that says nothing does not; hostile tool results
  (:data:`HOSTILE_RESULTS`, :data:`HOSTILE_ACTIONS`) become observations that encode as UTF-8
  and stay bounded; its tool schemas equal a recorded fixture (:func:`tool_schemas`), when
  one is given; and with an approval callback that denies everything, nothing runs.

CONTRIBUTING.md's tests run the same hostile results through every level and adapter
(``tests/test_contributing.py`` imports them from here). Only the hostile check does not use a
real sandbox: no real command exits with 2**20_000 or prints a lone surrogate, so
:class:`ScriptedSandbox` stands in for the episode's sandbox and answers with them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from harnessgrid.errors import HarnessgridError, PolicyError
from harnessgrid.models import Action, ModelTurn
from harnessgrid.sandboxing.sandbox import CommandResult, SandboxLimits
from harnessgrid.tasks import Task

if TYPE_CHECKING:
    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.harness import Harness
    from harnessgrid.policies import PolicyRequest
    from harnessgrid.sandboxing.tool_hooks import Approval, ToolCallRequest
    from harnessgrid.sandboxing.workspace import Workspace

__all__ = [
    "HOSTILE_ACTIONS",
    "HOSTILE_RESULTS",
    "OBSERVATION_BOUND",
    "ReplayExhausted",
    "ReplayPolicy",
    "ScriptedSandbox",
    "acheck_adapter",
    "check_adapter",
    "hostile_observations",
    "observation_problems",
    "schema_problems",
    "tool_schemas",
]


# ----------------------------------------------------------------------------- replaying turns

class ReplayExhausted(PolicyError):
    """A :class:`ReplayPolicy` was asked for more turns than it was given."""


class ReplayPolicy:
    """Plays ``turns`` in order, one per turn: each a :class:`~harnessgrid.models.ModelTurn`
    (tool calls included) or a text (a text-only reply). Asked for one more, it raises
    :class:`ReplayExhausted` (a :class:`PolicyError`), so the episode ends as a
    ``policy_error`` whose message says so, never as a quiet empty reply: a harness that did
    not finish when the test expected fails the test. ``requests`` are what the harness sent,
    one per turn played (``request.messages`` is the model's view). One instance plays one
    episode."""

    def __init__(self, turns: Iterable[ModelTurn | str], *, spec: str = "replay") -> None:
        self.turns: list[ModelTurn] = []
        for i, turn in enumerate(turns):
            if isinstance(turn, str):
                turn = ModelTurn(content=turn)
            if not isinstance(turn, ModelTurn):
                raise TypeError(f"ReplayPolicy: turn {i} is {type(turn).__name__}, not a "
                                "ModelTurn or a str")
            self.turns.append(turn)
        self.spec = spec
        self.requests: list[PolicyRequest] = []

    @property
    def remaining(self) -> int:
        """Turns not played yet."""
        return max(0, len(self.turns) - len(self.requests))

    async def act(self, request: PolicyRequest) -> ModelTurn:
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self.turns):
            raise ReplayExhausted(
                f"ReplayPolicy was asked for turn {index + 1}, but was given {len(self.turns)}: "
                "the harness did not end the episode where the test expected",
                hint="add the turns the harness waits for, or check why it did not finish")
        return self.turns[index]


# ----------------------------------------------------------------------------- hostile results

def _result(stdout: str = "", stderr: str = "", exit_code: int | None = 0, *,
            timed_out: bool = False, truncated: bool = False,
            duration_s: float = 0.01) -> CommandResult:
    return CommandResult(stdout=stdout, stderr=stderr, exit_code=exit_code, timed_out=timed_out,
                         truncated=truncated, duration_s=duration_s)


#: What a command may come back with that no harness may fail on, by name.
HOSTILE_RESULTS: dict[str, CommandResult] = {
    "huge exit code": _result("out\n", exit_code=2**20_000),  # str() of it raises
    "huge negative exit code": _result(stderr="boom\n", exit_code=-(2**20_000)),
    "exit code 2**63": _result(exit_code=2**63),
    "negative exit code": _result("x", exit_code=-1),
    "lone surrogates": _result("\ud800 lone \udfff\n", "\udc80 err\n", 1),
    "NUL bytes": _result("a\x00b\x00\n", "\x00", 2),
    "empty": _result(),
    "empty failure": _result(exit_code=1),
    "1 MB on one line": _result("x" * 1_000_000),
    "1 MB of lines": _result("line\n" * 200_000, "e\n" * 100_000, 1, truncated=True),
    "timed out, no code, NaN time": _result("partial", exit_code=None, timed_out=True,
                                            duration_s=float("nan")),
    "infinite time": _result("ok\n", duration_s=float("inf")),
}
#: Actions with hostile arguments (paths with surrogates and NUL bytes, a 5,000-character
#: path, a broken pattern, a path out of the workspace): agent mistakes, never a crash.
HOSTILE_ACTIONS: list[Action] = [
    Action.of("read", path="\ud800/\x00x"),
    Action.of("list", path="d" * 5_000),
    Action.of("search", pattern="(\udcff", path="."),
    Action.of("read", path="../../etc/passwd"),
]
#: The most characters one observation may have (the largest built-in cap is OpenClaw's
#: 200,000).
OBSERVATION_BOUND = 250_000


class ScriptedSandbox:
    """Stands in for the episode's sandbox and answers each command with the next scripted
    result (then an empty success). A stand-in because nothing real can produce the hostile
    results: the real sandbox decodes output with errors="replace" and returns what the
    process returned. Like the real one, it rejects a command holding a NUL byte."""

    def __init__(self, results: Iterable[CommandResult]) -> None:
        self.results = list(results)
        self.limits = SandboxLimits()
        self.commands: list[str] = []

    async def run(self, command: str, **_: Any) -> CommandResult:
        if "\0" in command:
            raise HarnessgridError(f"command {command!r:.80} must be a string without NUL bytes")
        self.commands.append(command)
        return self.results.pop(0) if self.results else _result()


async def hostile_observations(harness: Harness, workspace: Workspace) -> list[str]:
    """Every message ``harness`` adds (its replies aside) while it performs one ``shell``
    action per hostile result, each answered with that result, and then the hostile actions.
    Raises whatever the harness raises."""
    from harnessgrid.harness import play_turn
    from harnessgrid.sandboxing.sandbox import Sandbox
    from harnessgrid.sandboxing.tools import Environment

    task = Task(id="hostile", instruction="Do something.", mount_path=workspace.mount_path)
    state = harness.start(task, "ep-hostile")
    sandbox = cast(Sandbox, ScriptedSandbox(HOSTILE_RESULTS.values()))
    env = Environment(workspace=workspace, sandbox=sandbox)
    added: list[str] = []
    actions = [Action.of("shell", command=f"echo {i}") for i in range(len(HOSTILE_RESULTS))]
    for i, action in enumerate([*actions, *HOSTILE_ACTIONS]):
        before = len(state.history)
        turn = harness.render_action(action, f"call_{i}", state)
        await play_turn(harness, state, turn, env)
        added += [m.content for m in state.history[before:] if m.role != "assistant"]
    return added


def observation_problems(name: str, texts: Sequence[str],
                         again: Sequence[str] | None = None) -> list[str]:
    """What is wrong with the observations ``texts``: one that does not encode as UTF-8, or
    is longer than :data:`OBSERVATION_BOUND`; with ``again`` (the same run repeated), any
    difference."""
    found = []
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            found.append(f"{name}: an observation does not encode as UTF-8 ({exc})")
        if len(text) > OBSERVATION_BOUND:
            found.append(f"{name}: a {len(text):,}-character observation")
    if again is not None and list(again) != list(texts):
        found.append(f"{name}: the same results gave different observations")
    return found


# ----------------------------------------------------------------------------- tool schemas

def _without_descriptions(schema: Any) -> Any:
    """A JSON schema without its descriptions (property names kept as they are)."""
    if isinstance(schema, list):
        return [_without_descriptions(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: ({n: _without_descriptions(s) for n, s in v.items()}
                if k in ("properties", "patternProperties") and isinstance(v, dict)
                else _without_descriptions(v))
            for k, v in schema.items() if k != "description"}


def tool_schemas(harness: Harness) -> dict[str, Any]:
    """The fixture format of a harness's tools: ``tool_order`` (names, as offered) and
    ``tools`` (name → parameter schema without descriptions), as the built-in adapters'
    fixtures under ``tests/fixtures/`` are. Record it from the product you emulate (what it
    sends to the model API), or from your adapter once, as a pin; :func:`check_adapter`
    compares against it."""
    specs = harness.tools()
    return {"tool_order": [s.name for s in specs],
            "tools": {s.name: _without_descriptions(s.parameters) for s in specs}}


def schema_problems(name: str, harness: Harness, fixture: Mapping[str, Any]) -> list[str]:
    """How ``harness``'s tools differ from ``fixture`` (:func:`tool_schemas`' format; other
    keys, such as where it came from, are ignored): names and order, then each tool's
    parameters (descriptions aside) and property order."""
    found: list[str] = []
    offered = tool_schemas(harness)
    recorded = fixture.get("tools")
    if not isinstance(recorded, Mapping):
        return [f"{name}: the schema fixture has no 'tools' mapping"]
    order = list(fixture.get("tool_order", list(recorded)))
    if offered["tool_order"] != order:
        found.append(f"{name}: offers the tools {offered['tool_order']}, the fixture "
                     f"records {order}")
    for tool, params in offered["tools"].items():
        if tool not in recorded:
            continue  # named above
        want = recorded[tool]
        if params != want:
            found.append(f"{name}: tool {tool}'s parameters differ from the fixture: "
                         f"{json.dumps(params, sort_keys=True)[:300]} vs "
                         f"{json.dumps(want, sort_keys=True)[:300]}")
        elif (isinstance(want, Mapping) and isinstance(want.get("properties"), Mapping)
              and list(params.get("properties", {})) != list(want["properties"])):
            found.append(f"{name}: tool {tool}'s properties are in another order than the "
                         "fixture's")
    return found


# ----------------------------------------------------------------------------- the checker

#: A line the denied read must not show the model.
_CANARY = "secret canary 3f9b1c"
#: The approval check's task: a read, an edit, a write, a command and a listing, each denied.
APPROVAL_TASK = Task(
    id="every-call-denied", suite="harnessgrid-testing",
    instruction="Read keep.txt, change 'keep me' in it to 'changed', write new.txt and run a "
                "command that writes ran.txt.",
    files={"keep.txt": f"keep me\n{_CANARY}\n"},
    plan=(Action.of("read", path="keep.txt"),
          Action.of("edit", path="keep.txt", old="keep me", new="changed"),
          Action.of("write", path="new.txt", content="new\n"),
          Action.of("shell", command="echo ran > ran.txt"),
          Action.of("list", path=".")))


def _example_tasks() -> list[Task]:
    from harnessgrid.plugins.tasks.examples import EDIT_TASK, UPPER_TASK

    return [UPPER_TASK, EDIT_TASK]


def _factory(adapter: str | Callable[[], Harness]) -> tuple[str, Callable[[], Harness]]:
    """(a name for messages, a function giving a fresh harness)."""
    if not isinstance(adapter, str):
        return getattr(adapter, "__qualname__", repr(adapter)), adapter
    from harnessgrid.plugin_system.registry import get_registry

    name = adapter.strip().removeprefix("adapter:")
    spec = get_registry().adapter(name)  # ConfigError: not registered, or not usable
    return f"adapter:{name}", lambda: cast("Harness", spec.create())


def _raised(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {_first_line(str(exc))}"


def _first_line(text: str | None, width: int = 300) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line[:width]


async def acheck_adapter(adapter: str | Callable[[], Harness], *,
                         tasks: Sequence[Task] | None = None,
                         schemas: str | Path | Mapping[str, Any] | None = None,
                         limits: EpisodeLimits | None = None) -> list[str]:
    """:func:`check_adapter` for callers that are already in an event loop."""
    from harnessgrid.engine.runtime import run_episode
    from harnessgrid.plugin_system.registry import harness_problems
    from harnessgrid.policies.scripted import ScriptedPolicy
    from harnessgrid.sandboxing.workspace import Workspace

    try:
        label, make = _factory(adapter)
    except HarnessgridError as exc:
        return [f"{adapter}: {exc.message}" + (f" ({exc.hint})" if exc.hint else "")]
    try:
        harness = make()
    except Exception as exc:  # noqa: BLE001 - the adapter's failure is the finding
        return [f"{label}: creating the harness raised {type(exc).__name__}: {exc}"]
    wrong = harness_problems(harness)
    if wrong:
        return [f"{label}: not a harness: {'; '.join(wrong)}"]
    problems: list[str] = []
    for task in tasks if tasks is not None else _example_tasks():
        try:
            solved = await run_episode(make(), task, ScriptedPolicy(), limits)
            idle = await run_episode(make(), task, ScriptedPolicy(empty=True), limits)
        except Exception as exc:  # noqa: BLE001 - the adapter's failure is the finding
            problems.append(f"{label}: an episode of {task.id} raised {_raised(exc)}")
            continue
        if not solved.passed:
            problems.append(f"{label}: the scripted oracle does not solve {task.id} "
                            f"(termination {solved.termination}, score {solved.score}"
                            + (f", error: {_first_line(solved.error)}" if solved.error else "")
                            + (f", grade error: {_first_line(solved.grade_error)}"
                               if solved.grade_error else "") + ")")
        if idle.passed:
            problems.append(f"{label}: a policy that says nothing passes {task.id}")
        if idle.infra_failure:
            problems.append(f"{label}: empty replies end {task.id} as {idle.termination}, not "
                            f"as the agent's failure: {_first_line(idle.error)}")
    workspace = Workspace.create({"a.txt": "a\n"}, None, mount_path="/workspace")
    try:
        problems += observation_problems(label, await hostile_observations(make(), workspace))
    except Exception as exc:  # noqa: BLE001 - the adapter's failure is the finding
        problems.append(f"{label}: hostile tool results raised {_raised(exc)}")
    finally:
        workspace.cleanup()
    if schemas is not None:
        fixture = (json.loads(Path(schemas).read_text(encoding="utf-8"))
                   if isinstance(schemas, str | Path) else schemas)
        problems += schema_problems(label, make(), fixture)
    problems += await _approval_problems(label, make, limits)
    return problems


async def _approval_problems(label: str, make: Callable[[], Harness],
                             limits: EpisodeLimits | None) -> list[str]:
    """The oracle plays :data:`APPROVAL_TASK` with every call denied: the callback must be
    asked, the workspace must stay as it was, the denied read must not reach the model, and
    the episode must end as the agent's, not as a crash."""
    from harnessgrid.engine.runtime import run_episode
    from harnessgrid.policies.scripted import ScriptedPolicy
    from harnessgrid.sandboxing.tool_hooks import deny
    from harnessgrid.sandboxing.workspace import Workspace

    asked: list[ToolCallRequest] = []

    def deny_all(request: ToolCallRequest) -> Approval:
        asked.append(request)
        return deny("harnessgrid.testing denies every call")

    task = APPROVAL_TASK
    workspace = Workspace.create(task.files, None, mount_path=task.mount_path)
    try:
        before = workspace.snapshot_files()
        traj = await run_episode(make(), task, ScriptedPolicy(), limits, workspace=workspace,
                                 on_tool_call=deny_all)
        after = workspace.snapshot_files()
    except Exception as exc:  # noqa: BLE001 - the adapter's failure is the finding
        return [f"{label}: with every call denied the episode raised {_raised(exc)}"]
    finally:
        workspace.cleanup()
    found = []
    if traj.infra_failure:
        found.append(f"{label}: with every call denied the episode ended as "
                     f"{traj.termination}: {_first_line(traj.error)}")
    if not asked:
        found.append(f"{label}: the approval callback was never asked, although the oracle "
                     f"made {len(task.plan)} calls")
    changed = sorted(set(before) ^ set(after) | {p for p in before.keys() & after.keys()
                                                 if before[p] != after[p]})
    if changed:
        found.append(f"{label}: denied calls ran: they changed {', '.join(changed)}")
    shown = [m for m in traj.history if m.role != "assistant" and _CANARY in m.content]
    if shown:
        found.append(f"{label}: a denied read ran: the model was shown keep.txt's content")
    return found


def check_adapter(adapter: str | Callable[[], Harness], *,
                  tasks: Sequence[Task] | None = None,
                  schemas: str | Path | Mapping[str, Any] | None = None,
                  limits: EpisodeLimits | None = None) -> list[str]:
    """What is wrong with an adapter, as a list of problems (``[]``: none found).

    ``adapter`` is a registered name (``"qwen-code"``, ``"adapter:qwen-code@0.24.4"``) or a
    function giving a fresh harness (``lambda: MyHarness(max_chars=2000)``). Through real
    episodes in real sandboxes (``limits``, default :class:`~harnessgrid.engine.runtime.
    EpisodeLimits`), it checks that:

    - it is a harness (:func:`harnessgrid.plugin_system.registry.harness_problems`);
    - the scripted oracle solves each of ``tasks`` through it (default: the ``examples``
      suite's two tasks) and a policy that says nothing solves none, ending as the agent's
      failure, not a crash;
    - whatever a tool returns (:data:`HOSTILE_RESULTS`, :data:`HOSTILE_ACTIONS`), its
      observations encode as UTF-8 and stay within :data:`OBSERVATION_BOUND`, and nothing
      raises;
    - its tools equal ``schemas`` (a JSON file or mapping in :func:`tool_schemas`' format),
      when given;
    - with an approval callback that denies every call, the callback is asked, nothing runs
      (no file changes, a denied read shows nothing) and the episode ends normally.
    """
    return asyncio.run(acheck_adapter(adapter, tasks=tasks, schemas=schemas, limits=limits))
