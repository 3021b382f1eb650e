"""``adapter:openclaw``: the OpenClaw agent shell, emulated as a black-box harness.

**Emulated releases** (:data:`VERSIONS`, newest first): ``adapter:openclaw`` is the newest,
2026.9.6; ``adapter:openclaw@2026.9.6`` and ``adapter:openclaw@2026.2.26`` name one (the
``version`` option does the same; an unknown one is a ConfigError listing these). OpenClaw is
the shell of the paper's black-box SFT/RL baselines, and the ClawGym/PinchBench graders read its
session files, so a policy must meet here what it would meet there. Everything below the
2026.2.26 heading applies to 2026.9.6 too unless its own section says otherwise.

**2026.9.6** (npm ``openclaw@2026.9.6``, recorded by ``scripts/openclaw_recording.py 2026.9.6``
from the package's own ``createOpenClawCodingTools()`` under Node 24, in a plain
``openclaw agent`` session's configuration; fixtures ``tests/fixtures/openclaw/*-2026.9.6.json``,
runtime copy :mod:`._openclaw_recorded_2026_9_6`):

- all 54 tools the factory builds, in its order, with the recorded schemas (descriptions ours,
  on exactly the properties the real ones describe): ``ls, read, edit, write, apply_patch,
  exec, process`` then the gateway, device, channel, session, agent, web and memory tools
  (:mod:`._openclaw_2026_9`). ``read{path, offset?, limit?, cursor?, optional?}``,
  ``write{path, content}``, ``edit{path, edits: [{oldText, newText}]}`` (no ``file_path`` /
  ``old_string`` aliases any more), ``ls{path?, limit? (500), after?}``,
  ``apply_patch{input}`` (``*** Begin Patch`` format), ``exec`` with ``timeoutSeconds`` and
  ``title`` (``timeout`` and ``security`` are gone, ``host`` takes ``auto``), ``process`` as
  before; ``cron`` became ``automations``;
- the workspace tools' result texts as recorded (write counts UTF-8 bytes now; edit answers
  ``Successfully replaced N block(s)``; a missing file, text not found, a patch that does not
  apply are thrown errors in OpenClaw's ``{status, tool, error}`` JSON; ``read`` past the end
  and ``read`` with ``optional`` of a missing file are normal results; ``ls`` lists
  JSON-quoted names, directories with ``/``, and a continuation note when ``limit`` cuts);
- a command that fails (not found, timed out, killed) is a normal result in 2026.9.6 (it was
  thrown in 2026.2.26): its output, a blank line, the reason;
- every other tool needs what a sandboxed task lacks (a gateway, chat channels, paired devices,
  web search, other sessions and agents, a memory index): a call that passes the schema check
  gets the answer that tool gave in the recording, where no gateway ran (mostly the thrown
  ``gateway <method> requires credentials ...`` error, ``{home}`` as ``/root``, fresh ids
  where it had them), and is recorded with ``result.error`` set, never as a success;
- the prompt's recorded structure (:mod:`._openclaw_prompt_2026_9`): identity line, the 16
  ``##`` sections in order with a ``### message tool`` subsection, the tool listing (summaries
  for 31 tools, bare names for the 23 the real listing leaves bare), the runtime line between
  OpenClaw's relocatable-boundary markers; the prompt date is fixed at 2026-09-06 09:00 UTC.

Known differences in 2026.9.6: ``session_status``, ``browser`` and ``memory_search`` answered
from the recording machine's state (its clock, an installed Chromium, a memory index), so they
answer a thrown "not available in this sandbox" error of ours instead; each unavailable tool
gives its one recorded answer whatever its arguments (the real one may name another gateway
method per ``action``, or reject arguments first); where OpenClaw wraps an error in its
external-content notice (``web_search``, ``web_fetch``, ``canvas``) only the wrapped message is
given; a timed-out command's advice is our wording; not recorded and so our guesses: the
overlapping-edits error, ``read``'s notes when the 2000-line / 50 KB page limits cut a file
read without ``limit``, the text of an edit error for an edit past the first, a whole-file
"Current file contents" for large files, apply_patch's errors other than the two recorded
(bad first line, lines not found) and its fuzzy matching (lines must match exactly here);
exec failures carry the sandbox's shell messages (``bash: line 1: ...``).

**2026.2.26** (npm ``openclaw@2026.2.26``, whose coding tools come from pi-coding-agent).
Facts carried over (from OpenClaw's public docs and source; every sentence the model reads is
harnessgrid's own):

- tools ``read{path, offset?, limit?}`` (pages of 2000 lines / 50 KB with OpenClaw's
  continuation notes; without ``limit`` up to 8 pages in one call, capped by the context
  window), ``write{path, content}``, ``edit{path, oldText, newText}`` (one exact match; all
  three also take ``file_path``/``old_string``/``new_string``, presence checked as they run),
  ``exec{command, workdir?, env?, yieldMs?, background?, timeout? (s), pty?, elevated?, host?,
  security?, ask?, node?}`` and ``process{action, sessionId?, data?, keys?, hex?, literal?,
  text?, bracketed?, eof?, offset?, limit?, timeout?}`` with OpenClaw's ten actions; schemas
  as captured from the npm packages (``tests/fixtures/openclaw/tool_schemas-2026.2.26.json``),
  native tool calls, arguments checked against them (:mod:`._openclaw_tools`);
- errors as the model reads them: a call that fails the schema check is an ``isError`` result
  (harnessgrid's ``format_error``); whatever a tool throws (missing parameters, a missing file,
  edit text not found, a command not found or timed out, a blocked call) is a normal result
  holding OpenClaw's ``{"status": "error", "tool": ..., "error": ...}`` JSON, recorded with
  its ``error`` set;
- the sectioned system prompt with the workspace bootstrap files (:mod:`._openclaw_prompt`);
- session pruning of old tool results and compaction into a checkpoint
  (:mod:`._openclaw_context`);
- the loop: a reply without tool calls ends the run (the episode's finish); an empty reply is
  answered with a nudge and counts as a format error (harnessgrid's choice: OpenClaw would end
  silently, which would waste an RL episode on a glitch);
- JSONL session files (:meth:`OpenClawHarness.session_events`);
- in an embedding session, product tools as plugin tools (after the core tools, listed in the
  prompt) and the approval callback as a ``before_tool_call`` hook: a denied call is blocked,
  which the model reads as OpenClaw's error result (:mod:`._openclaw_plugins`), a modified
  call's arguments are merged over the model's, as the hook's params are; commands in
  ``exec`` can call the product tools too.

Emulated differently, and why: background exec sessions run to completion inside their
``exec`` call, because the sandbox ends leftover processes (``process`` then sees them as
exited, so its stdin actions find no active session); ``pty`` runs without a terminal; exec
refuses ``elevated`` and other hosts as OpenClaw's default configuration does; pruning runs on every
request instead of after the prompt-cache TTL, and moves in blocks of 3 assistant turns (so it
rewrites the view once per block, not on every turn); at small windows a compaction that
leaves the session near the trigger defers the next one; the prompt's date is fixed
(``2026-02-26 09:00 UTC``) unless ``now`` is given, so identical episodes get identical prompts
and token ids; exec's default timeout is the sandbox's per-command limit, not 1800 s. Not
emulated: skills, memory, messaging channels, heartbeats, sub-agents, images, web tools, the
``apply_patch``/``grep``/``find``/``ls`` tools, fuzzy edit matching.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
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
from harnessgrid.observations import observation_message
from harnessgrid.plugins.adapters import _openclaw_2026_9 as v2026_9
from harnessgrid.plugins.adapters import _openclaw_plugins as plugins
from harnessgrid.plugins.adapters._openclaw_context import (
    CompactionSettings,
    PruningSettings,
    Summarizer,
    SummaryRequest,
    checkpoint,
    compaction_message,
    compaction_meta,
    find_cut,
    prune,
)
from harnessgrid.plugins.adapters._openclaw_prompt import (
    BOOTSTRAP_MAX_CHARS,
    BOOTSTRAP_TOTAL_MAX_CHARS,
    load_bootstrap,
    project_context,
    system_prompt,
)
from harnessgrid.plugins.adapters._openclaw_prompt_2026_9 import (
    system_prompt as system_prompt_2026_9,
)
from harnessgrid.plugins.adapters._openclaw_tools import (
    SCHEMAS,
    SUMMARIES,
    WINDOW_KEY,
    ExecLimits,
    check_arguments,
    describe,
    missing_parameters,
    normalize,
    run_call,
    thrown_text,
    tool_specs,
)
from harnessgrid.plugins.adapters._openclaw_transcript import session_events, session_jsonl
from harnessgrid.plugins.adapters._releases import release_specs
from harnessgrid.registrations import AdapterSpec
from harnessgrid.sandboxing.tool_hooks import Denied, approved_call, note_result
from harnessgrid.sandboxing.tools import Environment, as_shell
from harnessgrid.tasks import Task
from harnessgrid.trajectory import Trajectory

#: Every emulated release, newest first; ``adapter:openclaw`` is the first.
VERSIONS: tuple[str, ...] = ("2026.9.6", "2026.2.26")
VERSION = VERSIONS[0]
LEGACY = "2026.2.26"  # pi-coding-agent's five tools (see the module doc)
#: The prompt's date unless ``now`` is given: the release's day, 09:00 UTC.
FIXED_NOW = {version: datetime.strptime(f"{version} 09:00", "%Y.%m.%d %H:%M").replace(
    tzinfo=UTC) for version in VERSIONS}
EMPTY_REPLY_NUDGE = ("Your last reply was empty. Carry on with the request using the tools, or "
                     "answer in plain text if it is already handled.")


def _now_text(now: datetime | str | None, version: str) -> str:
    when = datetime.now(UTC) if now == "wall" else FIXED_NOW[version] if now is None else now
    if isinstance(when, str):
        return when
    return when.astimezone(UTC).strftime("%A, %B %d, %Y, %H:%M")


class OpenClawHarness:
    """OpenClaw as one :class:`harnessgrid.harness.Harness`.

    Options: ``version`` (one of :data:`VERSIONS`, the newest by default), ``model`` (shown in the Runtime line), ``now`` (prompt date: a datetime, a string
    shown as is, ``"wall"`` for the real clock, default fixed), ``pruning`` /
    ``compaction`` (:class:`PruningSettings` / :class:`CompactionSettings` or dicts of their
    fields), ``summarizer`` (writes compaction checkpoints; default: deterministic digest),
    ``bootstrap_max_chars``, ``bootstrap_total_max_chars``, ``exec_max_timeout_s``.
    """

    name = "adapter:openclaw"
    protocol = WorkflowProtocol()
    native_tools = True

    def __init__(self, *, version: str = VERSION, model: str = "unknown",
                 now: datetime | str | None = None,
                 pruning: PruningSettings | dict[str, Any] | None = None,
                 compaction: CompactionSettings | dict[str, Any] | None = None,
                 summarizer: Summarizer | None = None,
                 bootstrap_max_chars: int = BOOTSTRAP_MAX_CHARS,
                 bootstrap_total_max_chars: int = BOOTSTRAP_TOTAL_MAX_CHARS,
                 exec_max_timeout_s: float = 600.0) -> None:
        if version not in VERSIONS:
            raise ConfigError(f"OpenClaw version {version!r} is not emulated",
                              hint=f"emulated versions: {', '.join(VERSIONS)}")
        self.version = version
        self._core_schemas = SCHEMAS if version == LEGACY else v2026_9.SCHEMAS
        self.model = model
        self.now = now
        self.pruning = (PruningSettings(**pruning) if isinstance(pruning, dict)
                        else pruning or PruningSettings())
        self.compaction = (CompactionSettings(**compaction) if isinstance(compaction, dict)
                           else compaction or CompactionSettings())
        self.summarizer = summarizer
        self.bootstrap_max_chars = bootstrap_max_chars
        self.bootstrap_total_max_chars = bootstrap_total_max_chars
        self.exec_limits = ExecLimits(max_timeout_s=exec_max_timeout_s)
        self._plugins: dict[str, ToolSpec] = {}  # product tools, see add_product_tools

    def __repr__(self) -> str:
        return f"OpenClawHarness(v{self.version})"

    def tools(self) -> list[ToolSpec]:
        core = tool_specs() if self.version == LEGACY else v2026_9.tool_specs()
        return [*core, *self._plugins.values()]

    def add_product_tools(self, tools: Sequence[ToolSpec]) -> None:
        """Present an embedding product's tools (:mod:`harnessgrid.product_tools`) as plugin
        tools: after the core tools, under their own names (replacing any given before). A name
        of a core tool is refused (OpenClaw would drop the plugin tool)."""
        self._plugins = plugins.plugin_specs(self._core_schemas, tools)

    # ------------------------------------------------------------------------- prompt

    def system_prompt_text(self, task: Task) -> str:
        files = load_bootstrap(task)
        soul = next(f for f in files if f.name == "SOUL.md")
        build = system_prompt if self.version == LEGACY else system_prompt_2026_9
        listing = ([*SUMMARIES.items()] if self.version == LEGACY
                   else v2026_9.prompt_listing())
        return build(
            mount_path=task.mount_path,
            tools=[*listing, *plugins.prompt_lines(self._plugins)],
            context=project_context(files, self.bootstrap_max_chars,
                                    self.bootstrap_total_max_chars),
            has_soul=bool(soul.content and soul.content.strip()),
            now=_now_text(self.now, self.version), model=self.model)

    def start(self, task: Task, episode_id: str) -> EpisodeState:
        state = EpisodeState(episode_id=episode_id, task_id=task.id)
        state.append(Message(role="system", content=self.system_prompt_text(task),
                             kind="system", pinned=True), task_message(task))
        state.scratch["openclaw.task"] = task.instruction
        state.scratch["openclaw.mount"] = task.mount_path
        return state

    # ------------------------------------------------------------------------ context

    @staticmethod
    def _context(state: EpisodeState) -> list[tuple[int, Message]]:
        """``(history index, message)`` of what the session holds after its last compaction:
        system prompt, checkpoint, the kept messages, everything since."""
        hist = state.history
        marks = [i for i, m in enumerate(hist) if m.kind == "compaction"]
        if not marks:
            return list(enumerate(hist))
        last = marks[-1]
        first_kept = compaction_meta(hist[last])[0]
        kept = [(i, hist[i]) for i in range(first_kept, last) if hist[i].kind != "compaction"]
        return [(0, hist[0]), (last, hist[last]), *kept, *enumerate(hist[last + 1:], last + 1)]

    @staticmethod
    def _compacted(state: EpisodeState) -> list[Message]:
        """The session as it was right after its last compaction ([] before the first)."""
        hist = state.history
        last = next((i for i in range(len(hist) - 1, -1, -1) if hist[i].kind == "compaction"),
                    None)
        if last is None:
            return []
        first_kept = compaction_meta(hist[last])[0]
        return [hist[0], hist[last], *(hist[i] for i in range(first_kept, last)
                                       if hist[i].kind != "compaction")]

    def _maybe_compact(self, state: EpisodeState, budget: ContextBudget) -> None:
        settings, window = self.compaction, budget.max_tokens
        if not settings.enabled:
            return
        context = self._context(state)
        tokens = budget.count([m for _, m in context])
        if tokens <= settings.trigger(window):
            return
        compacted = self._compacted(state)
        after = budget.count(compacted) if compacted else 0
        if tokens <= settings.next_trigger(window, after):
            return  # the last compaction left little room: let the session grow first
        body = [(i, m) for i, m in context if m.role != "system" and m.kind != "compaction"]
        # each message's share of the prompt: counted after the system prompt, so the fixed
        # costs the budget's count includes (tool schemas, template framing) are not charged
        # once per message
        system = [state.history[0]]
        base = budget.count(system)
        sizes = [max(0, budget.count([*system, m]) - base) for _, m in body]
        previous = [m for _, m in context if m.kind == "compaction"]
        fixed = budget.count([*system, *previous])
        cut = find_cut(sizes, [m.role for _, m in body], settings.keep_for(window, fixed))
        if cut == 0:
            return  # the whole session is "recent": nothing to summarise
        first_kept = body[cut][0] if cut < len(body) else len(state.history)
        task = str(state.scratch.get("openclaw.task", ""))
        if self.summarizer is not None:
            older = tuple(m for i, m in context[1:] if m.kind == "compaction" or i < first_kept)
            summary = self.summarizer(SummaryRequest(messages=older, task=task,
                                                     tokens_before=tokens))
        else:
            older_all = [m for m in state.history[:first_kept]
                         if m.role != "system" and m.kind != "compaction"]
            summary = checkpoint(older_all, task, str(state.scratch.get("openclaw.mount", "")))
        state.append(compaction_message(summary, first_kept, tokens))

    def view(self, state: EpisodeState, budget: ContextBudget) -> list[Message]:
        """Compact the session if it passed the threshold (a persisted rewrite, so the runtime
        starts a new token segment), then prune old tool results for this request."""
        state.scratch[WINDOW_KEY] = budget.max_tokens  # read's aggregate cap follows it
        self._maybe_compact(state, budget)
        messages = [m for _, m in self._context(state)]
        return [messages[0], *prune(messages[1:], budget.max_tokens, self.pruning)]

    # --------------------------------------------------------------------------- turns

    async def step(self, state: EpisodeState, turn: ModelTurn, env: Environment) -> tuple[
            TurnOutcome, Decision]:
        """Run the turn's tool calls in order; a reply without calls ends the run."""
        outcome = TurnOutcome(turn=turn)
        state.append(turn.message())
        if not turn.tool_calls:
            if turn.content.strip():
                outcome.finish = Action.of("finish", message=turn.content)
                return outcome, Decision(finished=True)
            outcome.format_error = FormatError("the reply was empty: no text and no tool call")
            nudge = Message(role="user", content=EMPTY_REPLY_NUDGE, kind="format_error")
            state.append(nudge)
            return outcome, Decision(messages=[nudge], format_error=True)
        schemas = {name: spec.parameters for name, spec in self._plugins.items()}
        for asked in turn.tool_calls:
            call = await self._approved(asked, env, state, outcome, schemas)
            if call is None:
                continue
            if call.name in self._plugins:
                text, result = await plugins.call_product(env, call.name, call.arguments)
                outcome.executed.append(ExecutedCall(call, self._action(call), result))
                state.append(self._result(asked, text, "observation"))
                continue
            run = run_call if self.version == LEGACY else v2026_9.run_call
            done = await run(call, env, state, self.exec_limits)
            note_result(env, done.result)  # the session's tool_result says whether it went well
            outcome.executed.append(ExecutedCall(call, done.action, done.result))
            state.append(self._result(asked, done.text, "observation"))
        return outcome, Decision(format_error=outcome.format_error is not None)

    async def _approved(self, asked: ToolCall, env: Environment, state: EpisodeState,
                        outcome: TurnOutcome, schemas: dict[str, dict[str, Any]]) -> (
            ToolCall | None):
        """The call to run: ``asked`` or the approval callback's modification of it, once its
        arguments passed the check; None when it is refused (its answer already given)."""
        def refuse(call: ToolCall, problem: str) -> None:
            outcome.format_error = outcome.format_error or FormatError(problem, call=call)
            state.append(self._result(asked, problem, "format_error"))

        problem = check_arguments(asked, schemas, self._core_schemas)
        if problem is not None:
            refuse(asked, problem)
            return None

        def merged(changed: ToolCall) -> ToolCall:
            # OpenClaw's before_tool_call can only change parameters, and they are merged over
            # the model's ({...params, ...hookResult.params}); the result is checked again
            call = asked.model_copy(update={"arguments": {**asked.arguments,
                                                          **changed.arguments}})
            problem = check_arguments(call, schemas, self._core_schemas)
            if problem is not None:
                raise FormatError(problem, call=call)
            return call

        # before_tool_call runs after the arguments' check, before the tool
        checked = await approved_call(env, asked, self._action(asked), outcome, read=merged)
        if isinstance(checked, Denied):
            reason = checked.reason or "Tool call blocked by plugin hook"
            state.append(self._result(asked, thrown_text(asked.name, reason),
                                      "observation"))  # a normal result, not isError
            return None
        if isinstance(checked, FormatError):
            refuse(checked.call or asked, checked.message)
            return None
        return checked

    def _action(self, call: ToolCall) -> Action:
        """The abstract action of a call that passed :func:`check_arguments`."""
        if call.name in self._plugins:
            return plugins.action_of(call.name, call.arguments)
        if self.version != LEGACY:
            return v2026_9.describe(call.name, call.arguments)
        args = normalize(call.arguments)
        return describe(call.name, args if missing_parameters(call.name, args) is None else {})

    @staticmethod
    def _result(call: ToolCall, text: str, kind: str) -> Message:
        """A toolResult; ``kind`` ``format_error`` marks OpenClaw's isError (a call the schema
        check refused). A tool that threw is an ``observation``: OpenClaw answers it with a
        normal result (:func:`._openclaw_tools.thrown_text`)."""
        return observation_message(call, text, native=True, kind=kind)

    def render_action(self, action: Action, call_id: str,
                      state: EpisodeState | None = None) -> ModelTurn:
        """The turn that performs ``action``: file actions map to read/write/edit (2026.9.6:
        one-item ``edits``), list to the ``ls`` tool (2026.2.26: ``ls`` in exec), search to
        ``exec`` (``grep -rn``), shell to exec, a product tool to the plugin
        tool, finish to a text-only reply (``Done.`` when the message is empty, since an empty
        reply is not a finish here)."""
        a = action.args

        def call(name: str, **arguments: str) -> ModelTurn:
            return ModelTurn(tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),))

        match action.kind:
            case "tool":  # the arguments may hold any key, so not through call()
                return ModelTurn(tool_calls=(ToolCall(
                    id=call_id, name=a["name"],
                    arguments=plugins.arguments_of(a["arguments"])),))
            case "finish":
                return ModelTurn(content=a["message"] if a["message"].strip() else "Done.")
            case "read":
                return call("read", path=a["path"])
            case "write":
                return call("write", path=a["path"], content=a["content"])
            case "edit" if self.version == LEGACY:
                return call("edit", path=a["path"], oldText=a["old"], newText=a["new"])
            case "edit":
                return ModelTurn(tool_calls=(ToolCall(id=call_id, name="edit", arguments={
                    "path": a["path"], "edits": [{"oldText": a["old"], "newText": a["new"]}]}),))
            case "list" if self.version != LEGACY:
                return call("ls", path=a["path"])
        return call("exec", command=as_shell(action).args["command"])

    # ----------------------------------------------------------------------- transcripts

    @staticmethod
    def session_events(traj: Trajectory) -> list[dict[str, Any]]:
        """The episode as OpenClaw session events (see :mod:`._openclaw_transcript`)."""
        return session_events(traj)

    @staticmethod
    def session_jsonl(traj: Trajectory) -> str:
        return session_jsonl(traj)


_TOOLS_LINE = {"2026.9.6": "54 tools (read/write/edit/ls/apply_patch/exec/process work on the "
                           "workspace; the gateway, channel, web and agent tools answer as "
                           "when unavailable)",
               "2026.2.26": "read/write/edit/exec/process"}


def _describe(version: str) -> str:
    return (f"OpenClaw v{version} emulation: {_TOOLS_LINE[version]}, bootstrap files, session "
            "pruning, compaction checkpoints, JSONL session files.")


@hookimpl
def harnessgrid_adapters() -> Iterator[AdapterSpec]:
    # ``openclaw`` is the newest emulated release; ``openclaw@VERSION`` names one.
    return release_specs("openclaw", VERSIONS, OpenClawHarness, _describe)
