"""The harness assembled from one level of each of the five factors.

Its :meth:`ComposedHarness.step` is the reference of what a harness does in one turn: parse
the model's turn into calls, announce each call for approval (product tools too), execute it
in the sandbox, observe the result, and let the workflow decide. It lives apart from the
:class:`~harnessgrid.harness.Harness` contract because it executes actions, which the contract
does not need to know how to do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from harnessgrid.episode import (
    ContextBudget,
    Decision,
    EpisodeState,
    ExecutedCall,
    PromptContext,
    TurnOutcome,
)
from harnessgrid.harness import task_message
from harnessgrid.models import (
    Action,
    FormatError,
    Message,
    ModelTurn,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from harnessgrid.sandboxing.tool_hooks import Denied, approved_call, denied_result
from harnessgrid.sandboxing.tools import Environment, as_shell, execute

if TYPE_CHECKING:
    from harnessgrid.levels import (
        ContextLevel,
        FactorLevel,
        ObservationLevel,
        SystemPromptLevel,
        ToolInterfaceLevel,
        WorkflowLevel,
    )
    from harnessgrid.space import HarnessConfig
    from harnessgrid.tasks import Task


def _readable(ti: ToolInterfaceLevel) -> Callable[[ToolCall], ToolCall]:
    """A modified call as the interface reads it: itself, if it has an action."""
    def read(call: ToolCall) -> ToolCall:
        ti.to_action(call)  # FormatError: the modification is not a valid call
        return call
    return read


class ComposedHarness:
    """A harness assembled from one level of each factor (see
    :func:`harnessgrid.plugin_system.composition`)."""

    def __init__(self, config: HarnessConfig, levels: dict[str, FactorLevel],
                 name: str | None = None) -> None:
        self.config = config
        # What trajectories and listings record: compose() passes the harness address, which
        # names the same harness on every machine (see harnessgrid.plugin_system.composition).
        self.name = name or config.code
        self.system_prompt: SystemPromptLevel = levels["system_prompt"]  # type: ignore[assignment]
        self.tool_interface: ToolInterfaceLevel = levels["tool_interface"]  # type: ignore[assignment]
        self.observation: ObservationLevel = levels["observation"]  # type: ignore[assignment]
        self.context: ContextLevel = levels["context"]  # type: ignore[assignment]
        self.workflow: WorkflowLevel = levels["workflow"]  # type: ignore[assignment]
        self.protocol = self.workflow.protocol
        self.native_tools = self.tool_interface.native_tools

    def __repr__(self) -> str:
        return f"ComposedHarness({self.name})"

    def tools(self) -> list[ToolSpec]:
        return self.tool_interface.tools()

    def factor_levels(self) -> dict[str, str]:
        return dict(self.config.levels)

    def add_product_tools(self, tools: Sequence[ToolSpec]) -> None:
        """Present an embedding product's tools (:mod:`harnessgrid.product_tools`) through
        this harness's tool interface, in its own syntax."""
        self.tool_interface.add_product_tools(tools)

    def system_prompt_text(self, mount_path: str) -> str:
        return self.system_prompt.render(PromptContext(
            mount_path=mount_path,
            tool_section=self.tool_interface.prompt_section(),
            workflow_section=self.workflow.prompt_section(),
            example_call=self.tool_interface.example(
                self._supported(Action.of("read", path="notes.txt")))))

    def start(self, task: Task, episode_id: str) -> EpisodeState:
        state = EpisodeState(episode_id=episode_id, task_id=task.id)
        state.append(Message(role="system", content=self.system_prompt_text(task.mount_path),
                             kind="system", pinned=True),
                     task_message(task))
        state.append(*self.workflow.on_start(state))
        return state

    def view(self, state: EpisodeState, budget: ContextBudget) -> list[Message]:
        return self.context.view(state.history, budget)

    def _supported(self, action: Action) -> Action:
        """``action`` itself, or the same effect as a shell command if the interface has no
        tool for it (``bash_only``)."""
        return action if self.tool_interface.supports(action.kind) else as_shell(action)

    def render_action(self, action: Action, call_id: str,
                      state: EpisodeState | None = None) -> ModelTurn:
        return self.tool_interface.render(self._supported(action), call_id)

    async def step(self, state: EpisodeState, turn: ModelTurn, env: Environment) -> tuple[
            TurnOutcome, Decision]:
        """Parse, execute and observe one turn, then let the workflow decide (its messages
        appended here; the runtime keeps the books)."""
        ti, obs = self.tool_interface, self.observation
        outcome = TurnOutcome(turn=turn)
        try:
            calls = ti.parse(turn)
        except FormatError as exc:
            outcome.format_error = exc
            calls = []
        message = turn.message()
        if calls and not turn.tool_calls:
            message = message.model_copy(update={"parsed_calls": tuple(calls)})
        state.append(message)
        if outcome.format_error is not None:
            state.append(Message(role="user", content=obs.format_error(outcome.format_error),
                                 kind="format_error"))
        for call in calls:
            if outcome.finish is not None:
                state.append(ti.observation_message(call, "skipped: finish was requested"))
                continue
            try:
                action = ti.to_action(call)
            except FormatError as exc:
                outcome.format_error = exc
                msg = ti.observation_message(call, obs.format_error(exc))
                state.append(msg.model_copy(update={"kind": "format_error"}))
                continue
            if action.kind == "finish":
                outcome.finish = action
                result = ToolResult(output=action.args["message"])
            else:
                # Announced with its own name and id (execute would ask about it anyway):
                # the product's callback sees the call the model wrote.
                checked = await approved_call(env, call, action, outcome,
                                              read=_readable(ti))
                if isinstance(checked, Denied):
                    result = denied_result(checked)
                    state.append(ti.observation_message(call, obs.format(action, env.shown(result))))
                    continue
                if isinstance(checked, FormatError):  # the callback's change does not parse
                    outcome.format_error = checked
                    msg = ti.observation_message(call, obs.format_error(checked))
                    state.append(msg.model_copy(update={"kind": "format_error"}))
                    continue
                if checked is not call:  # the approval callback changed it
                    call, action = checked, ti.to_action(checked)
                result = await execute(action, env)
            outcome.executed.append(ExecutedCall(call, action, result))
            state.append(ti.observation_message(call, obs.format(action, env.shown(result))))
        decision = self.workflow.on_turn(state, outcome)
        state.append(*decision.messages)
        return outcome, decision
