"""``adapter:claude-code``: an emulation of Claude Code **2.1.332** (and 1.0.98, 1.0.96) as a
black-box harness.

Pinned releases: ``@anthropic-ai/claude-code@2.1.332``, ``@1.0.98`` and ``@1.0.96`` on npm.
``adapter:claude-code`` is the newest emulated release, 2.1.332; ``adapter:claude-code@V``
names one (``@1.0.98`` and ``@1.0.96`` behave exactly as before 2.1.332 was added). Every
schema is checked field by field against ``tests/fixtures/claude_code/tool_schemas-V.json``
(``scripts/adapter_schemas.py``), and the answers of a fixed set of calls against
``outputs-V.json`` (``scripts/adapter_outputs.py``); 1.x from each package's ``cli.js``, 2.x
from the native binary of ``@anthropic-ai/claude-code-linux-x64``. All prompt and message
text is ours; only facts (names, schemas, limits, formats, layout) follow the real shell.

**2.1.332** (``_claude_code_v2_tools``, ``_claude_code_v2``). Emulated: the 23 tools ``claude -p``
offers, with their real names, schemas and order; deferred loading: the first request offers
the 12 loaded from the start (Agent, Bash, Edit, ListAgents, Read, ReportFindings,
ScheduleWakeup, Skill, ToolSearch, Workflow, DeferredToolPlaceholder, Write), the system-role
message names the 11 deferred ones, and a ToolSearch call (``select:A,B`` or keywords, scored as
the release scores them) answers with the ``tool_reference`` blocks (as JSON text) followed by
the user text ``Tool loaded.``, after which those tools are offered in the release's order for
the rest of the episode (:meth:`ClaudeCodeHarness.episode_tools`; a deferred tool called before
it is loaded runs as in the real shell, which does not check); ``anthropic_tools`` flags them
``defer_loading``. Read/Write/Edit/Bash as 2.x words and shapes their results (tab-numbered
lines, no listing after Write/Edit, ``Exit code N`` then stdout then stderr, its texts for a
missing file, an unread file, several matches, an empty file, a command without output); Read's
``offset``/``limit`` are integers, ``allow_large`` lifts the size and token limits, ``pages``
changes nothing on a text file; the CLAUDE.md sent with the first message counts as read.
There is no Glob or Grep: the scripted oracle lists and searches with ``ls``/``grep`` in Bash.
Tools a sandboxed task cannot use answer as the real shell does in the state the emulated
session is in - no background task (TaskStop), no schedule (CronList, CronDelete), no worktree
(ExitWorktree; EnterWorktree outside a git repository), no other agent (SendMessage), no
findings (ReportFindings with none), an unknown workflow, an unread notebook - and otherwise
with the refusal of a tool the session was not granted (the recorded answer to WebFetch and
WebSearch in ``claude -p --allowedTools Bash Read Edit Write``), as an error. The prompt:
three ``system`` blocks (the header line, a one-line identity, the main prompt with the real
headings), the first user message (a CLAUDE.md ``<system-reminder>`` when there is one, an
attribution ``<system-reminder>``, the text), then the ``system``-role listing (environment,
model, deferred tools, agent types, skills, date), sent again after a compaction summary.
Known differences: Agent, CronCreate, Monitor, ScheduleWakeup, ListAgents and Skill really run
(a subagent, a session-only schedule, ...) where the emulation refuses them as not granted;
WebFetch/WebSearch would run if granted; NotebookEdit of a read notebook is refused; Bash's
``dangerouslyDisableSandbox`` is accepted and changes nothing (the task's sandbox stays); ``grep``
in the real Bash is its bundled ripgrep (file names without ``./``), here the sandbox's grep;
keyword ToolSearch ranks with our descriptions; the real header's ``bd3`` suffix is copied,
not computed; the memory directory, git status, MCP servers, hooks, permission rules and
interactive-only tools (AskUserQuestion, EnterPlanMode, ExitPlanMode) are not emulated; the
context budget counts the tools offered at the start; the interruption texts, the compaction
summary and a timed-out command's text are 1.0.98's (not recorded for 2.x). The tool result of
a ToolSearch is text (our messages are text), where the API receives ``tool_reference``
blocks.

**1.0.98 and 1.0.96.** 1.0.96 is the last release with the ``LS`` tool; 1.0.98 dropped it and
changed nothing else in the tool schemas (see ``_claude_code_tools`` for the text
differences). Without LS the scripted oracle lists a directory with ``ls`` in Bash, as
1.0.98's Read description tells the model to. Emulated: the workspace tools (nine in 1.0.96,
eight in 1.0.98) with their names and argument schemas (Anthropic tool format, and the
chat-template form for token policies), their limits, rules and result shapes (see
``_claude_code_files``, ``_claude_code_search``, ``_claude_code_shell``); errors wrapped in
``<tool_use_error>`` when the input check refuses the call, bare (with is_error) when the tool
fails as it runs (a failed Bash command, an oversized Read), as cli.js does; the system
prompt's structure and ``<env>`` block; ``CLAUDE.md`` in the ``<system-reminder>`` context
block that opens the first user message; the turn ending when the model replies without tool
calls. Not emulated: Task (subagents), WebFetch, WebSearch, NotebookRead/NotebookEdit,
ExitPlanMode, background shells (BashOutput/KillBash; ``run_in_background`` is accepted and
the command runs to completion), images/PDFs in Read, interactive permission prompts and
permission rules, hooks, slash commands, git status in the prompt, user-level memory files,
and the re-attachment of recently read files after compaction.

**Every version:** auto-compaction into a nine-section summary that replaces the history, the
following turns appending to it (``_claude_code_compact``; at small windows the next
compaction waits until half the room left after the summary is used). In an embedding session
(:mod:`harnessgrid.engine.session`): product tools are the tools of an MCP server
(``mcp__product__<name>``, after the built-in tools, always offered) and an approval callback
is the SDK's ``canUseTool``: a denied call is answered, unrun, with the permission-denied
result (``_claude_code_mcp``); commands in Bash can call the product tools too. A cancelled run
is recorded as cli.js records an interruption (:meth:`ClaudeCodeHarness.interrupted_messages`),
except that a killed command's partial output is lost with its sandbox.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from harnessgrid import hookimpl
from harnessgrid.episode import (
    ContextBudget,
    Decision,
    EpisodeState,
    ExecutedCall,
    TurnOutcome,
    WorkflowProtocol,
)
from harnessgrid.models import (
    Action,
    FormatError,
    Message,
    ModelTurn,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from harnessgrid.observations import observation_message
from harnessgrid.plugins.adapters import _claude_code_files as files
from harnessgrid.plugins.adapters import _claude_code_mcp as mcp
from harnessgrid.plugins.adapters import _claude_code_search as search
from harnessgrid.plugins.adapters import _claude_code_shell as shell
from harnessgrid.plugins.adapters import _claude_code_v2 as v2
from harnessgrid.plugins.adapters._claude_code_compact import (
    SUMMARY_INSTRUCTIONS,
    CompactionPolicy,
    Summarizer,
    clean_policy_summary,
    digest,
    summary_message,
)
from harnessgrid.plugins.adapters._claude_code_prompt import (
    DEFAULT_DATE,
    DEFAULT_OS_VERSION,
    DEFAULT_PLATFORM,
    EMPTY_TURN_NUDGE,
    EnvInfo,
    context_reminder,
    system_prompt,
)
from harnessgrid.plugins.adapters._claude_code_session import (
    SCRATCH_KEY,
    Session,
    find_session,
    session_of,
)
from harnessgrid.plugins.adapters._claude_code_tools import (
    RELEASES,
    tool_specs,
    validation_error,
)
from harnessgrid.plugins.adapters._claude_code_v2_tools import INITIAL, LOADED_ORDER
from harnessgrid.plugins.adapters._claude_code_v2_tools import VERSION as VERSION_2
from harnessgrid.plugins.adapters._releases import release_specs
from harnessgrid.plugins.adapters._reply import end_or_nudge
from harnessgrid.plugins.adapters._task_start import initial_paths, initial_text
from harnessgrid.registrations import AdapterSpec
from harnessgrid.sandboxing.tool_hooks import Denied, approved_call
from harnessgrid.sandboxing.tools import Environment, as_shell
from harnessgrid.sandboxing.workspace import WorkspaceError

if TYPE_CHECKING:
    from harnessgrid.tasks import Task

#: What cli.js records when the user interrupts (1.0.96 and 1.0.98): a tool call not started
#: yet is answered ``mx`` (is_error); a Bash command killed while running gets its output and
#: this ``<error>`` line (the Bash tool's ``mapToolResultToToolResultBlockParam`` with
#: ``interrupted``), and the turn ends with a user message: ``aU`` after tool use, ``ge``
#: when the reply itself was interrupted.
NOT_STARTED = ("The user doesn't want to take this action right now. STOP what you are doing "
               "and wait for the user to tell you how to proceed.")
COMMAND_ABORTED = "<error>Command was aborted before completion</error>"
INTERRUPTED_FOR_TOOL_USE = "[Request interrupted by user for tool use]"
INTERRUPTED = "[Request interrupted by user]"

#: Every emulated release with the tools it has (2.x: the deferred ones too), newest first;
#: ``claude-code`` is the first.
TOOLS_OF: dict[str, tuple[str, ...]] = {VERSION_2: LOADED_ORDER, **RELEASES}
VERSIONS: tuple[str, ...] = tuple(TOOLS_OF)
VERSION = VERSIONS[0]
#: The tools a 2.x session works on the workspace with; the others are :func:`v2.unavailable`.
WORKSPACE_TOOLS_V2 = frozenset({"Read", "Write", "Edit", "Bash", "ToolSearch"})
MEMORY_FILE = "CLAUDE.md"


def _is_git_repo(files: frozenset[str]) -> bool:
    """Whether the task's workspace is a git repository (what the prompt says, and what
    2.x's EnterWorktree checks)."""
    return any(p == ".git" or p.startswith(".git/") for p in files)


class ClaudeCodeHarness:
    """Claude Code as a :class:`~harnessgrid.harness.Harness`.

    Options: ``version`` (one of :data:`VERSIONS`, the newest by default); ``date``,
    ``platform``, ``os_version``, ``model`` (the ``<env>`` block);
    ``auto_compact`` and the threshold numbers ``output_reserve``, ``compact_buffer``,
    ``reference_window``, ``context_window``; ``summarizer``, an async callable
    ``(messages, instructions) -> str`` that lets the policy write the compaction summary
    (the deterministic digest is used without it and whenever it fails); ``mcp_server``, the
    MCP server name product tools are presented under (``mcp__<mcp_server>__<tool>``).
    """

    name = "adapter:claude-code"
    version = VERSION
    native_tools = True

    def __init__(self, *, version: str = VERSION, date: str = DEFAULT_DATE,
                 platform: str = DEFAULT_PLATFORM,
                 os_version: str = DEFAULT_OS_VERSION, model: str | None = None,
                 auto_compact: bool = True, output_reserve: int = 20_000,
                 compact_buffer: int = 13_000, reference_window: int = 200_000,
                 context_window: int | None = None, summarizer: Summarizer | None = None,
                 mcp_server: str = mcp.SERVER) -> None:
        if version not in TOOLS_OF:
            from harnessgrid.errors import ConfigError

            raise ConfigError(f"Claude Code version {version!r} is not emulated",
                              hint=f"emulated versions: {', '.join(VERSIONS)}")
        self.version = version
        self.protocol = WorkflowProtocol()
        self.date, self.platform, self.os_version, self.model = date, platform, os_version, model
        self.auto_compact = auto_compact
        self.compaction = CompactionPolicy(output_reserve, compact_buffer, reference_window,
                                           context_window)
        self.summarizer = summarizer
        self.v2 = version == VERSION_2  # 2.x: deferred tools, its prompt and result texts
        self._tools = tool_specs(version)
        mcp.mcp_specs(mcp_server, [])  # checks the name now, not at the first product tool
        self.mcp_server = mcp_server
        self._mcp: dict[str, ToolSpec] = {}  # MCP name -> spec; see add_product_tools
        self._product_names: dict[str, str] = {}  # MCP name -> product tool name

    def __repr__(self) -> str:
        return f"ClaudeCodeHarness(version={self.version!r})"

    # ------------------------------------------------------------------ tools

    def tools(self) -> list[ToolSpec]:
        """Every tool of the release, deferred ones included (what ``harness show`` lists);
        what the model is offered at a point of an episode is :meth:`episode_tools`."""
        return [*self._tools, *self._mcp.values()]

    def episode_tools(self, state: EpisodeState) -> list[ToolSpec]:
        """The tools offered in ``state``'s next request: 1.x all of them; 2.x the ones loaded
        from the start and those ToolSearch has loaded since, in the release's order."""
        if not self.v2:
            return self.tools()
        loaded = set(INITIAL) | session_of(state).loaded
        return [*(t for t in self._tools if t.name in loaded), *self._mcp.values()]

    def deferred(self) -> list[str]:
        """The tools a session starts without (2.x; none in 1.x): ToolSearch loads them."""
        return [t.name for t in self._tools if t.name not in INITIAL] if self.v2 else []

    def anthropic_tools(self, state: EpisodeState | None = None) -> list[dict[str, Any]]:
        """The tool definitions as the Anthropic Messages API takes them (the real wire form):
        all of them, or those offered in ``state``'s next request; 2.x flags the deferred
        tools and its placeholder ``defer_loading``, as it sends them."""
        tools = self.tools() if state is None else self.episode_tools(state)
        flagged = set(self.deferred()) | ({v2.PLACEHOLDER} if self.v2 else set())
        return [t.anthropic() | ({"defer_loading": True} if t.name in flagged else {})
                for t in tools]

    def openai_tools(self) -> list[dict[str, Any]]:
        """The same tools in the chat-template / OpenAI form, for token policies."""
        return [t.openai() for t in self.tools()]

    def add_product_tools(self, tools: Sequence[ToolSpec]) -> None:
        """Present an embedding product's tools (:mod:`harnessgrid.product_tools`) as the
        tools of the MCP server ``mcp_server``, after the built-in tools (replacing any given
        before). Their names cannot clash with the built-in ones: the CLI prefixes them."""
        specs = mcp.mcp_specs(self.mcp_server, tools)
        self._mcp = specs
        self._product_names = {name: spec.name for name, spec in zip(specs, tools, strict=True)}

    # ------------------------------------------------------------------ episode start and view

    def start(self, task: Task, episode_id: str) -> EpisodeState:
        initial = initial_paths(task)
        git = _is_git_repo(initial)
        memory = initial_text(task, MEMORY_FILE)
        if self.v2:
            return self._start_v2(task, episode_id, initial, git, memory)
        env = EnvInfo(working_directory=task.mount_path, is_git_repo=git, date=self.date,
                      platform=self.platform, os_version=self.os_version, model=self.model,
                      tools=RELEASES[self.version])
        session = Session(mount_path=task.mount_path, initial_files=initial,
                          memory=context_reminder(f"{task.mount_path}/{MEMORY_FILE}", memory))
        state = EpisodeState(episode_id=episode_id, task_id=task.id)
        state.scratch[SCRATCH_KEY] = session
        first = session.memory + task.instruction  # cli.js: the context block, then the text
        state.append(
            Message(role="system", content=system_prompt(env), kind="system", pinned=True),
            Message(role="user", content=first, kind="task", pinned=True))
        return state

    def _start_v2(self, task: Task, episode_id: str, initial: frozenset[str], git: bool,
                  memory: str | None) -> EpisodeState:
        """2.x: three system blocks, the first user message, the system-role listing."""
        memory_path = f"{task.mount_path}/{MEMORY_FILE}"
        first = v2.first_message(memory_path, memory, task.instruction)
        env = v2.Env(working_directory=task.mount_path, is_git_repo=git, date=self.date,
                     platform=self.platform, os_version=self.os_version, model=self.model)
        head = v2.system_blocks()
        session = Session(mount_path=task.mount_path, initial_files=initial,
                          memory=first.removesuffix(task.instruction), head=len(head),
                          boundary=len(head), listing=v2.listing_message(env, self.deferred()))
        if memory is not None:  # 2.x counts the CLAUDE.md it sent as read (see step)
            session.read_state[MEMORY_FILE] = ""
        state = EpisodeState(episode_id=episode_id, task_id=task.id)
        state.scratch[SCRATCH_KEY] = session
        state.append(*(Message(role="system", content=text, kind="system", pinned=True)
                       for text in head),
                     Message(role="user", content=first, kind="task", pinned=True),
                     Message(role="system", content=session.listing, kind="system",
                             pinned=True))
        return state

    def view(self, state: EpisodeState, budget: ContextBudget) -> list[Message]:
        """The system prompt and everything since the last compaction."""
        session = session_of(state)
        session.budget = budget
        return [*state.history[:session.head], *state.history[session.boundary:]]

    def interrupted_messages(self, pending: Sequence[ToolCall]) -> list[Message]:
        """What a cancelled run leaves in the conversation (see :data:`NOT_STARTED`): the
        first pending call was running - a Bash command is answered as aborted (its output
        went with the killed sandbox) -, the others had not started; then the user's
        interruption marker."""
        answers = []
        for index, call in enumerate(pending):
            aborted = index == 0 and call.name == "Bash"
            answers.append(Message(role="tool", content=COMMAND_ABORTED if aborted else NOT_STARTED,
                                   tool_call_id=call.id, name=call.name, kind="tool_error"))
        marker = INTERRUPTED_FOR_TOOL_USE if pending else INTERRUPTED
        return [*answers, Message(role="user", content=marker, kind="interrupted")]

    # ------------------------------------------------------------------ one turn

    async def step(self, state: EpisodeState, turn: ModelTurn, env: Environment) -> tuple[
            TurnOutcome, Decision]:
        session = session_of(state)
        session.workspace = env.workspace
        if session.read_state.get(MEMORY_FILE) == "":  # 2.x: the CLAUDE.md it was sent
            session.remember(MEMORY_FILE)
        loaded = set(session.loaded)
        outcome = TurnOutcome(turn=turn)
        decision = Decision()
        state.append(turn.message())
        if not turn.tool_calls:
            end_or_nudge(turn, outcome, decision, EMPTY_TURN_NUDGE)
        for call in turn.tool_calls:
            await self._run(call, session, env, state, outcome)
        if session.loaded - loaded:  # 2.x: the text that follows results that loaded tools
            decision.messages.insert(0, Message(role="user", content=v2.TOOL_LOADED,
                                                kind="reminder"))
        state.append(*decision.messages)
        if not decision.finished:
            await self._maybe_compact(state, session)
        return outcome, decision

    def _problem(self, call: ToolCall) -> str | None:
        """Why the CLI refuses ``call`` before running it (see ``validation_error``)."""
        if call.name in self._product_names:
            return mcp.input_error(call)
        return v2.validation_error(call) if self.v2 else validation_error(call, self.version)

    def _action(self, call: ToolCall, session: Session) -> Action | None:
        try:
            return self._to_action(call, session)
        except ValueError:  # TodoWrite; 2.x's ToolSearch and tools outside the workspace
            return None

    async def _run(self, asked: ToolCall, session: Session, env: Environment,
                   state: EpisodeState, outcome: TurnOutcome) -> None:
        def reply(text: str, kind: str = "observation") -> None:
            state.append(observation_message(asked, text, native=True, kind=kind))

        def refuse(call: ToolCall, problem: str) -> None:
            outcome.format_error = FormatError(problem, call=call)
            reply(f"<tool_use_error>{problem}</tool_use_error>", "format_error")

        problem = self._problem(asked)
        if problem is not None:
            refuse(asked, problem)
            return

        def recheck(call: ToolCall) -> ToolCall:  # a modified call passes the input check too
            problem = self._problem(call)
            if problem is not None:
                raise FormatError(problem, call=call)
            return call

        # The permission check comes after the input check, as in cli.js's tool loop.
        checked = await approved_call(env, asked, self._action(asked, session), outcome,
                                      read=recheck)
        if isinstance(checked, Denied):
            reply(mcp.denial_text(checked), "tool_error")
            return
        if isinstance(checked, FormatError):
            refuse(checked.call or asked, checked.message)
            return
        call = checked  # the call itself, or the approval callback's modification of it
        product = self._product_names.get(call.name)
        if product is not None:
            text, result, failed = await mcp.call_product(env, product, call.arguments)
            outcome.executed.append(ExecutedCall(call, self._to_action(call, session), result))
            reply(text, "tool_error" if failed else "observation")
            return
        args = call.arguments
        ws = env.workspace
        if self.v2 and call.name not in WORKSPACE_TOOLS_V2:
            answer = v2.unavailable(call, _is_git_repo(session.initial_files), session.relative(
                str(args.get("notebook_path", ""))) in session.read_state)
            reply(f"<tool_use_error>{answer.text}</tool_use_error>" if answer.wrapped
                  else answer.text, "tool_error" if answer.is_error else "observation")
            return
        if call.name == "ToolSearch":
            found = v2.tool_search(args)
            session.loaded |= set(found) & set(self.deferred())
            reply(v2.references(found) if found else v2.NO_MATCH)
            return
        try:
            match call.name:
                case "Read":
                    text, result = files.read(session, ws, args, self.v2)
                case "Write":
                    text, result = files.write(session, ws, args, self.v2)
                case "Edit":
                    text, result = files.edit(session, ws, args, self.v2)
                case "MultiEdit":
                    text, result = files.multi_edit(session, ws, args)
                case "Glob":
                    text, result = search.glob(session, ws, args)
                case "Grep":
                    text, result = search.grep(session, ws, args)
                case "LS":
                    text, result = search.ls(session, ws, args)
                case "Bash":  # a failed command is is_error text, not a <tool_use_error>
                    text, result, failed = await shell.bash(session, ws, env.sandbox, args,
                                                            env.host_tools(), self.v2)
                    action = self._to_action(call, session)
                    outcome.executed.append(ExecutedCall(call, action, result))
                    reply(text, "tool_error" if failed else "observation")
                    return
                case _:  # TodoWrite: no workspace effect and no abstract action
                    text, _ = shell.todo_write(session, args)
                    reply(text)
                    return
        except TimeoutError:
            raise  # the episode's wall clock, not the tool's failure
        except (files.ToolError, WorkspaceError, OSError) as exc:
            message = exc.message if isinstance(exc, WorkspaceError) else (
                f"{exc.strerror}: {call.arguments.get('file_path') or call.arguments.get('path')}"
                if isinstance(exc, OSError) else str(exc))
            shown = message if isinstance(exc, files.CallError) else (
                f"<tool_use_error>{message}</tool_use_error>")
            text, result = shown, ToolResult(error=message)
        outcome.executed.append(ExecutedCall(call, self._to_action(call, session), result))
        reply(text, "observation" if result.ok else "tool_error")  # Claude Code's is_error

    # ------------------------------------------------------------------ compaction

    def threshold(self, max_tokens: int) -> int:
        """Token count of the next view above which the history is compacted (the first time;
        later compactions may wait longer, see ``CompactionPolicy.trigger``)."""
        return self.compaction.threshold(max_tokens)

    async def _maybe_compact(self, state: EpisodeState, session: Session) -> None:
        budget = session.budget
        if not self.auto_compact or budget is None:
            return
        current = [*state.history[:session.head], *state.history[session.boundary:]]
        if budget.count(current) <= self.compaction.trigger(budget.max_tokens,
                                                            session.compacted_tokens):
            return
        if not any(m.role == "assistant" for m in state.history[session.boundary:]):
            return  # nothing new since the last summary: compacting again would not help
        summary = ""
        if self.summarizer is not None:
            try:
                summary = clean_policy_summary(await self.summarizer(current,
                                                                      SUMMARY_INSTRUCTIONS))
            except Exception:  # noqa: BLE001 - a failed summary falls back to the digest
                summary = ""
            session.summary_fallbacks += not summary
        if not summary:
            summary = digest(state.history, session)
        state.append(summary_message(summary, session.memory))
        session.boundary = len(state.history) - 1
        if session.listing:  # 2.x: the system-role listing follows the summary again
            state.append(Message(role="system", content=session.listing, kind="system",
                                 pinned=True))
        session.compactions += 1
        session.compacted_tokens = budget.count([*state.history[:session.head],
                                                 *state.history[session.boundary:]])
        session.read_state.clear()  # the file contents left the context: read them again

    # ------------------------------------------------------------------ actions ↔ calls

    def to_action(self, call: ToolCall, state: EpisodeState | None = None) -> Action:
        """What a (valid) call means as an abstract action, for records and round trips.
        Paths under the mount (``state``'s episode's; without one, ``/workspace``) come back
        workspace-relative. MultiEdit is recorded as its first edit; Glob as a listing of its
        directory; a product tool's MCP call as a ``tool`` action; TodoWrite, and 2.x's
        ToolSearch and tools outside the workspace (Agent, WebFetch, ...), have no action
        (ValueError)."""
        return self._to_action(call, find_session(state))

    def _to_action(self, call: ToolCall, session: Session | None) -> Action:
        helper = session or Session(mount_path="/workspace")
        a = call.arguments
        product = self._product_names.get(call.name)
        if product is not None:
            return Action.of("tool", name=product, arguments=json.dumps(a))

        def rel(key: str, default: str = ".") -> str:
            value = a.get(key)
            return helper.relative(value) if isinstance(value, str) else default

        match call.name:
            case "Read":
                return Action.of("read", path=rel("file_path"))
            case "Write":
                return Action.of("write", path=rel("file_path"), content=a["content"])
            case "Edit":
                return Action.of("edit", path=rel("file_path"), old=a["old_string"],
                                 new=a["new_string"])
            case "MultiEdit":
                first = a["edits"][0]
                return Action.of("edit", path=rel("file_path"), old=first["old_string"],
                                 new=first["new_string"])
            case "Bash":
                return Action.of("shell", command=a["command"])
            case "LS" | "Glob":
                return Action.of("list", path=rel("path"))
            case "Grep":
                return Action.of("search", pattern=a["pattern"], path=rel("path"))
        raise ValueError(f"{call.name} calls have no abstract action")

    def parse(self, turn: ModelTurn) -> list[ToolCall]:
        """Native tool calls need no parsing: the turn's calls, as sent."""
        return list(turn.tool_calls)

    def render_action(self, action: Action, call_id: str,
                      state: EpisodeState | None = None) -> ModelTurn:
        """The turn a careful Claude Code user of the tools would write for ``action``.

        A write or edit of a file that exists and was not read since its last change gets a
        Read of it first, in the same turn (the real shell allows several calls per turn), so
        the oracle obeys the read-before-write rule exactly when the rule applies. A shell
        command starts with ``cd`` back to the workspace if an earlier command left it. A
        ``tool`` action is the call of the product tool's MCP tool. All of that is read from
        ``state``'s session; without a state, for a fresh session at ``/workspace``.
        """
        session = find_session(state) or Session(mount_path="/workspace")
        a = action.args

        def call(name: str, arguments: dict[str, Any], suffix: str = "") -> ToolCall:
            return ToolCall(id=call_id + suffix, name=name, arguments=arguments)

        path = session.absolute(a["path"]) if "path" in a else ""
        calls: list[ToolCall] = []
        if action.kind in ("write", "edit"):
            key = session.relative(path)
            unknown = session.workspace is None and key not in session.read_state
            if session.needs_read(key) or (action.kind == "edit" and unknown):
                calls.append(call("Read", {"file_path": path}, "_read"))
        match action.kind:
            case "read":
                calls.append(call("Read", {"file_path": path}))
            case "write":
                calls.append(call("Write", {"file_path": path, "content": a["content"]}))
            case "edit":
                calls.append(call("Edit", {"file_path": path, "old_string": a["old"],
                                           "new_string": a["new"]}))
            case "list" if "LS" in TOOLS_OF[self.version]:
                calls.append(call("LS", {"path": path}))
            case "list":  # no LS (1.0.98 on): ``ls`` in Bash, as its Read description advises
                listing = as_shell(Action.of("list", path=path)).args["command"]
                calls.append(call("Bash", {"command": listing}))
            case "search" if "Grep" not in TOOLS_OF[self.version]:  # 2.x: grep in Bash
                search_command = as_shell(Action.of("search", pattern=a["pattern"], path=path))
                calls.append(call("Bash", {"command": search_command.args["command"]}))
            case "search":
                calls.append(call("Grep", {"pattern": a["pattern"], "path": path,
                                           "output_mode": "content", "-n": True}))
            case "shell":
                command = a["command"]
                if session.cwd != ".":
                    command = f"cd {session.mount_path} && {command}"
                calls.append(call("Bash", {"command": command}))
            case "tool":  # a product tool: the product MCP server's tool
                calls.append(call(mcp.tool_name(self.mcp_server, a["name"]),
                                  mcp.arguments_of(a["arguments"])))
            case "finish":
                return ModelTurn(content=a["message"].strip() or "Done.")
        return ModelTurn(tool_calls=tuple(calls))


def _describe(version: str) -> str:
    return (f"Claude Code {version} emulated: {'/'.join(TOOLS_OF[version])} with the real "
            "schemas, limits and rules; "
            + ("most tools deferred until ToolSearch loads them; " if version == VERSION_2
               else "")
            + "CLAUDE.md as a system-reminder; auto-compaction into a nine-section summary.")


@hookimpl
def harnessgrid_adapters() -> Iterator[AdapterSpec]:
    # ``claude-code`` is the newest emulated release; each release is also ``claude-code@V``.
    return release_specs("claude-code", VERSIONS, ClaudeCodeHarness, _describe)
