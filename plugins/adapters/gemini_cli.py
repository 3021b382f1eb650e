"""``adapter:gemini-cli``: an emulation of Gemini CLI **0.61.0** (``@google/gemini-cli`` on
npm) as a black-box harness: the shell of a headless run, ``gemini -p ... --approval-mode yolo``.

Recorded from the package by ``scripts/gemini_recording.py``, which runs the CLI itself against
a local stand-in for the Gemini API: ``tests/fixtures/gemini_cli/tool_schemas-0.61.0.json``
(the function declarations of a yolo run, of a default-mode run and of plan mode; the system
prompt's structure; the first message's layout; a project tree) and ``outputs-0.61.0.json``
(the functionResponse of 51 fixed calls, and what the CLI sent of five bulky results after
masking them). Facts not recorded come from the package's
``bundle/chunk-*.js`` (readable, not minified), named where used.

Emulated: the fifteen tools a yolo run declares, in its order, with its parameter schemas
(descriptions ours): ``update_topic``, ``list_directory``, ``read_file``, ``grep_search``,
``glob``, ``replace``, ``write_file``, ``web_fetch``, ``run_shell_command``,
``list_background_processes``, ``read_background_output``, ``google_web_search``,
``enter_plan_mode``, ``invoke_agent``, ``activate_skill``. Results are worded as the CLI's
functionResponses (``{"output": ...}``, or ``{"error": ...}`` as a ``tool_error`` message;
:func:`gemini_response` gives the wire form): read_file's raw text and its truncation note
(2000 lines of 2000 characters); write_file/replace with the changed region and five lines
around it; list_directory's ``[DIR]``/size listing; glob newest first, case-insensitive by
default; grep_search as the CLI's own ``GrepTool`` answers (case-insensitive; three matches or
fewer come with the lines around them); run_shell_command's ``Output:`` / ``Exit Code:`` /
``Process Group PGID:`` lines in ``<untrusted_context>``, stdout and stderr merged, from the
project root each time, ``/usr/bin/bash`` in bash's messages, an answer over 40000 characters
cut to its first 8000 and last 32000 with the CLI's note, a command past the sandbox's time
limit reported as the CLI reports its inactivity timeout. Argument checks answer in ajv's words
(``params must have required property 'file_path'``), an unknown tool with the three closest
declared names; both, and an empty reply (nudged), count as format errors. The system
instruction has the release's headings and tagged blocks in order (with the subagent and skill
names); the first user message is the ``<session_context>`` block (date, OS, temp folder,
workspace, the project's tree as the CLI draws it, then ``GEMINI.md`` inside
``<loaded_context>``/``<project_context>``), then the task. The run ends when the model replies
with text and no calls. Plan mode: ``enter_plan_mode`` switches to the plan-mode tool set
(ten tools, ``exit_plan_mode`` among them; the others are then "not found"); write_file and
replace are denied with the policy's words except for plan files, which are kept in the session
(the plans folder is outside the workspace); ``exit_plan_mode`` approves at once, as a headless
run does, and goes back to yolo; each request declares the set of the mode the episode is in
(:meth:`GeminiCliHarness.episode_tools`). Context management: before each request old bulky tool
results are masked as the CLI masks them (``_gemini_cli_masking``: past 50000 protected
tokens, when 30000 or more are prunable, into ``<tool_output_masked>`` previews, checked
against a recorded run); the CLI's chat compression has nothing to cut in a one-prompt
headless run (it cuts only at a user message that is not a tool result, and the prompt is the
only one), so the history is otherwise whole.

Unavailable in a sandbox, answered as the CLI answers when it is (never a silent success):
google_web_search (its model request fails: "Error during web search for query ...", with
node's offline reason where the recording has the stand-in's refusal), web_fetch (every URL
skipped as ``[Blocked Host]``, as the recorded run answered, or the no-URL error), background
processes (the sandbox keeps none: "No background processes found." and the PID lookup error),
invoke_agent (an unknown name as the CLI words it; a listed subagent is refused in our words),
activate_skill (refused in our words: the skill files are not in the sandbox).

Known differences: the PGID is a per-episode
counter (the sandbox reports no process ids); ``is_background`` runs the command to completion;
a truncated shell answer names a saved file that does not exist; the timeout is the sandbox's
wall limit, not an inactivity timeout; the context block and the task are one message (the CLI
sends two parts of one message); grep uses Python regular expressions, not ``grep -E``; with a
trusted system ``rg`` the real CLI would use its ripgrep tool instead (the package ships none);
replace's fuzzy matching and its LLM self-correction of a failed match, .gitignore/.geminiignore
filtering, the GEMINI.md files of subfolders the CLI appends to a tool's result as it reaches
them (``discoverJitContext``), and file types beyond text and binary (images, PDFs, SVG) are not
emulated; arguments that cannot be read (not JSON, lone surrogates, too deep: impossible on
the Gemini wire, whose arguments are an object) are refused in our words, after ``params``;
the workspace-escape error names an emulated
temp folder (``~/.gemini/tmp/<project>`` under ``home``), and plan files, kept in the session,
cannot be read back with read_file (the CLI allows reading its temp folder).

Not emulated: the default approval mode (a headless run without yolo declares only eight
read-only tools; recorded as ``default_tool_order``, useless for tasks that write), the model
router and other side requests, loop detection (an LLM check of its own), the overflow stop
(the CLI ends a turn whose request would overflow the model's window; here the engine's
budget rules), the CLI's wording of a cancelled run (an embedding session's cancel is
recorded in harnessgrid's generic words), product tools (the CLI would serve them over MCP),
checkpointing, hooks, MCP servers, extensions, user-level memory
(``~/.gemini/GEMINI.md``; this release declares no memory tool headless). All prompt and
description text is ours; tool results keep the CLI's wording, as the model reads it.
"""

from __future__ import annotations

import posixpath
import uuid
from collections.abc import Iterator
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
from harnessgrid.models import Action, FormatError, Message, ModelTurn, ToolCall, ToolSpec
from harnessgrid.observations import observation_message
from harnessgrid.plugins.adapters import _gemini_cli_files as files
from harnessgrid.plugins.adapters import _gemini_cli_misc as misc
from harnessgrid.plugins.adapters._gemini_cli_masking import gemini_response, mask, masked_view
from harnessgrid.plugins.adapters._gemini_cli_prompt import (
    DEFAULT_DATE,
    DEFAULT_PLATFORM,
    MEMORY_FILE,
    session_context,
    system_prompt,
)
from harnessgrid.plugins.adapters._gemini_cli_session import Answer, Session, fail
from harnessgrid.plugins.adapters._gemini_cli_shell import run_shell_command
from harnessgrid.plugins.adapters._gemini_cli_tools import (
    RELEASES,
    tool_specs,
    validation_error,
)
from harnessgrid.plugins.adapters._releases import release_specs
from harnessgrid.plugins.adapters._reply import end_or_nudge
from harnessgrid.plugins.adapters._task_start import initial_paths, initial_text
from harnessgrid.registrations import AdapterSpec
from harnessgrid.sandboxing.tool_hooks import Denied, approved_call, note_result
from harnessgrid.sandboxing.tools import Environment
from harnessgrid.sandboxing.workspace import WorkspaceError

if TYPE_CHECKING:
    from harnessgrid.tasks import Task

VERSIONS: tuple[str, ...] = tuple(RELEASES)
VERSION = VERSIONS[0]
SCRATCH_KEY = "gemini_cli.session"
EMPTY_REPLY_NUDGE = "Your reply was empty. Continue the task with a tool call, or answer."


def _session(state: EpisodeState | None, mount_path: str = "/workspace") -> Session:
    found = state.scratch.get(SCRATCH_KEY) if state is not None else None
    if isinstance(found, Session):
        return found
    return Session(mount_path=mount_path, temp_dir="")


class GeminiCliHarness:
    """Gemini CLI as a :class:`~harnessgrid.harness.Harness`.

    Options: ``version`` (one of :data:`VERSIONS`); ``date`` and ``platform`` (the session
    context); ``home``, the HOME whose ``.gemini/tmp/<project>`` is the project's temp folder.
    """

    name = "adapter:gemini-cli"
    version = VERSION
    native_tools = True

    def __init__(self, *, version: str = VERSION, date: str = DEFAULT_DATE,
                 platform: str = DEFAULT_PLATFORM, home: str = "/home/user") -> None:
        if version not in RELEASES:
            from harnessgrid.errors import ConfigError

            raise ConfigError(f"Gemini CLI version {version!r} is not emulated",
                              hint=f"emulated versions: {', '.join(VERSIONS)}")
        self.version, self.date, self.platform, self.home = version, date, platform, home
        self.protocol = WorkflowProtocol()
        self._tools = tool_specs(version)

    def __repr__(self) -> str:
        return f"GeminiCliHarness(version={self.version!r})"

    def tools(self) -> list[ToolSpec]:
        """Every tool: the yolo set, then those only plan mode declares (``exit_plan_mode``)."""
        declared = {t.name for t in self._tools}
        plan_only = [t for t in tool_specs(self.version, plan_mode=True)
                     if t.name not in declared]
        return [*self._tools, *plan_only]

    def episode_tools(self, state: EpisodeState) -> list[ToolSpec]:
        """What the next request declares: the plan-mode set while the episode is in plan mode
        (``enter_plan_mode`` until ``exit_plan_mode``), the yolo set otherwise."""
        if _session(state).plan_mode:
            return tool_specs(self.version, plan_mode=True)
        return list(self._tools)

    def gemini_tools(self, state: EpisodeState | None = None) -> list[dict[str, Any]]:
        """The ``tools`` field as the CLI sends it: one entry of function declarations (of
        ``state``'s next request; without one, a new episode's)."""
        offered = self._tools if state is None else self.episode_tools(state)
        return [{"functionDeclarations": [
            {"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}
            for t in offered]}]

    def openai_tools(self, state: EpisodeState | None = None) -> list[dict[str, Any]]:
        offered = self._tools if state is None else self.episode_tools(state)
        return [t.openai() for t in offered]

    # ------------------------------------------------------------------ episode

    def start(self, task: Task, episode_id: str) -> EpisodeState:
        project = posixpath.basename(task.mount_path.rstrip("/")) or "root"
        session = Session(mount_path=task.mount_path,
                          temp_dir=f"{self.home}/.gemini/tmp/{project}",
                          session_id=str(uuid.uuid5(uuid.NAMESPACE_URL, episode_id)))
        state = EpisodeState(episode_id=episode_id, task_id=task.id)
        state.scratch[SCRATCH_KEY] = session
        context = session_context(mount_path=task.mount_path, temp_dir=session.temp_dir,
                                  date=self.date, platform=self.platform,
                                  files=sorted(initial_paths(task)),
                                  memory=initial_text(task, MEMORY_FILE))
        state.append(
            Message(role="system", content=system_prompt(), kind="system", pinned=True),
            Message(role="user", content=f"{context}\n{task.instruction}", kind="task",
                    pinned=True))
        return state

    def view(self, state: EpisodeState, budget: ContextBudget) -> list[Message]:
        """The whole history, old bulky tool results masked as the CLI masks them before
        each request (:mod:`._gemini_cli_masking`)."""
        session = _session(state)
        mask(state.history, session)
        return masked_view(state.history, session)

    async def step(self, state: EpisodeState, turn: ModelTurn, env: Environment) -> tuple[
            TurnOutcome, Decision]:
        session = _session(state)
        outcome = TurnOutcome(turn=turn)
        decision = Decision()
        state.append(turn.message())
        if not turn.tool_calls:
            end_or_nudge(turn, outcome, decision, EMPTY_REPLY_NUDGE)
        for call in turn.tool_calls:
            await self._run(call, session, env, state, outcome)
        state.append(*decision.messages)
        return outcome, decision

    def _action(self, call: ToolCall, session: Session) -> Action | None:
        try:
            return self._to_action(call, session)
        except (ValueError, KeyError):
            return None

    async def _run(self, asked: ToolCall, session: Session, env: Environment,
                   state: EpisodeState, outcome: TurnOutcome) -> None:
        def reply(answer: Answer, kind: str | None = None) -> None:
            state.append(observation_message(asked, answer.text, native=True,
                                             kind=kind or ("observation" if answer.ok
                                                           else "tool_error")))

        def recheck(call: ToolCall) -> ToolCall:
            problem = validation_error(call, self.version, session.plan_mode)
            if problem is not None:
                raise FormatError(problem, call=call)
            return call

        problem = validation_error(asked, self.version, session.plan_mode)
        if problem is None:
            checked = await approved_call(env, asked, self._action(asked, session), outcome,
                                          read=recheck)
            if isinstance(checked, Denied):
                reply(fail(f"Tool execution denied by policy. {checked.reason}".strip()))
                return
            if isinstance(checked, FormatError):
                problem, asked = checked.message, checked.call or asked
            else:
                asked = checked
        if problem is not None:
            outcome.format_error = FormatError(problem, call=asked)
            reply(fail(problem), "format_error")
            return
        try:
            answer = await self._execute(asked, session, env)
        except (WorkspaceError, OSError) as exc:  # the file system refused: the tool fails
            answer = fail(exc.message if isinstance(exc, WorkspaceError) else str(exc))
        # a session's tool_result says whether the call went well: a failed command too, which
        # the CLI answers as an output but marks as an error (its ``isError``)
        note_result(env, answer.result)
        action = self._action(asked, session)
        if action is not None:
            outcome.executed.append(ExecutedCall(asked, action, answer.result))
        reply(answer)

    async def _execute(self, call: ToolCall, session: Session,
                       env: Environment) -> Answer:
        args, ws = call.arguments, env.workspace
        if session.plan_mode and call.name in ("write_file", "replace"):
            return misc.plan_edit(session, call.name, args)
        match call.name:
            case "read_file":
                return files.read_file(session, ws, args)
            case "write_file":
                return files.write_file(session, ws, args)
            case "replace":
                return files.replace(session, ws, args)
            case "list_directory":
                return files.list_directory(session, ws, args)
            case "glob":
                return files.glob(session, ws, args)
            case "grep_search":
                return files.grep_search(session, ws, args)
            case "run_shell_command":
                return await run_shell_command(session, ws, env.sandbox, args, call.id)
            case "google_web_search":
                return misc.google_web_search(args)
            case "web_fetch":
                return misc.web_fetch(args)
            case "update_topic":
                return misc.update_topic(args)
            case "list_background_processes" | "read_background_output":
                return misc.background(call.name, args)
            case "invoke_agent":
                return misc.invoke_agent(session, args)
            case "exit_plan_mode":
                return misc.exit_plan_mode(session, args)
            case "activate_skill":
                return misc.activate_skill(args)
        return misc.enter_plan_mode(session)

    # ------------------------------------------------------------------ actions <-> calls

    def to_action(self, call: ToolCall, state: EpisodeState | None = None) -> Action:
        """What a valid call means as an abstract action (paths workspace-relative); tools
        without a workspace effect (topics, web, agents, skills, plan mode) raise ValueError."""
        return self._to_action(call, _session(state))

    def _to_action(self, call: ToolCall, session: Session) -> Action:
        a = call.arguments

        def rel(key: str) -> str:
            value = a.get(key)
            return session.relative(value) if isinstance(value, str) and value else "."

        match call.name:
            case "read_file":
                return Action.of("read", path=rel("file_path"))
            case "write_file":
                return Action.of("write", path=rel("file_path"), content=a["content"])
            case "replace":
                return Action.of("edit", path=rel("file_path"), old=a["old_string"],
                                 new=a["new_string"])
            case "list_directory" | "glob":
                return Action.of("list", path=rel("dir_path"))
            case "grep_search":
                return Action.of("search", pattern=a["pattern"], path=rel("dir_path"))
            case "run_shell_command":
                return Action.of("shell", command=a["command"])
        raise ValueError(f"{call.name} calls have no abstract action")

    def parse(self, turn: ModelTurn) -> list[ToolCall]:
        return list(turn.tool_calls)

    def render_action(self, action: Action, call_id: str,
                      state: EpisodeState | None = None) -> ModelTurn:
        """The turn a careful Gemini CLI user of the tools would write for ``action``."""
        session = _session(state)
        a = action.args
        path = session.absolute(a["path"]) if "path" in a else session.mount_path

        def call(name: str, arguments: dict[str, Any]) -> ModelTurn:
            return ModelTurn(tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),))

        match action.kind:
            case "read":
                return call("read_file", {"file_path": path})
            case "write":
                return call("write_file", {"file_path": path, "content": a["content"]})
            case "edit":
                return call("replace", {"file_path": path, "instruction": "Apply the edit.",
                                        "old_string": a["old"], "new_string": a["new"]})
            case "list":
                return call("list_directory", {"dir_path": path})
            case "search":
                return call("grep_search", {"pattern": a["pattern"], "dir_path": path})
            case "shell":
                return call("run_shell_command", {"command": a["command"]})
            case "tool":
                raise ValueError("Gemini CLI emulation has no product tools")
        return ModelTurn(content=a["message"].strip() or "Done.")


def _describe(version: str) -> str:
    return (f"Gemini CLI {version} emulated (headless, --approval-mode yolo): "
            f"{len(RELEASES[version])} tools with the real schemas and result texts; GEMINI.md "
            "in the session context; web tools answer offline.")


@hookimpl
def harnessgrid_adapters() -> Iterator[AdapterSpec]:
    # ``gemini-cli`` is the newest emulated release; each release is also ``gemini-cli@V``.
    return release_specs("gemini-cli", VERSIONS, GeminiCliHarness, _describe)


__all__ = ["VERSION", "VERSIONS", "GeminiCliHarness", "gemini_response"]
