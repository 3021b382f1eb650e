"""The episode loop: any harness, any policy, one sandboxed workspace per episode.

The loop itself is small on purpose (mini-swe-agent's lesson): ask the harness for the view,
ask the policy for a turn, let the harness execute and observe it, stop when the workflow says
so or a limit is hit. Everything else (what the prompt says, how calls are written, what the
model sees) belongs to the harness.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
import uuid
import warnings
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from harnessgrid import timing
from harnessgrid.environments import ACTIVE_ENVIRONMENT, resolve_episode_environment
from harnessgrid.episode import ContextBudget, EpisodeState, context_budget
from harnessgrid.errors import SandboxError
from harnessgrid.events import ContextRewrite, Event, ModelReply, TextDelta, TurnStarted
from harnessgrid.models import Message, ModelTurn
from harnessgrid.policies import Policy, PolicyRequest
from harnessgrid.sandbox import (
    INSTALL_HINT,
    UNSAFE_NO_SANDBOX,
    Sandbox,
    SandboxLimits,
    check_bwrap,
    finish_or_undo,
    off_loop_detached,
)
from harnessgrid.sandbox_pool import DEFAULT_REUSE, PoolKey, PoolsByKey, SandboxPool
from harnessgrid.scratch import ScratchDir
from harnessgrid.tasks import GraderError, Task, task_score, validate_scores
from harnessgrid.tools import Environment
from harnessgrid.trajectory import (
    STORED_REPLY_BYTES,
    CallRecord,
    Termination,
    Trajectory,
    TurnRecord,
    cap_replies,
    cap_reply,
    stored_size,
)
from harnessgrid.workspace import Workspace

if TYPE_CHECKING:
    from harnessgrid.harness import Harness

logger = logging.getLogger(__name__)


class EpisodeLimits(BaseModel):
    """Limits of one episode. A task's own limits apply when stricter."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_turns: int = 30
    max_context_tokens: int = 32_768
    max_total_tokens: int | None = None
    wall_s: float = 600.0
    max_format_errors: int = 5
    grader_timeout_s: float = 120.0
    sandbox: SandboxLimits = SandboxLimits()
    unsafe_no_sandbox: bool = False
    environment: str | None = None
    """``--env NAME``: the environment every episode runs in, instead of the task's own;
    ``"none"`` for none. It must be built (:mod:`harnessgrid.environments`)."""
    stored_reply_bytes: int = Field(default=STORED_REPLY_BYTES, ge=1024)
    """The most bytes a model reply takes in the stored trajectory (each copy of it: the
    turn, the history, the call records) and in ``model_reply`` events, as
    ``sandbox.output_bytes`` bounds a command's output: the strings of a longer reply are cut
    there, each with a marker giving its original size, and the turn records the reply's
    size (``original_reply_bytes``). The episode runs on the whole reply; token ids are never
    cut (:mod:`harnessgrid.trajectory`, "Stored replies")."""

    @model_serializer(mode="wrap")
    def _omit_later_defaults(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Evaluations stored before these settings existed compare their saved limits with
        # these on resume: a setting at its default must dump as it did then (absent).
        data = handler(self)
        if isinstance(data, dict):
            for name, default in _LATER_DEFAULTS.items():
                if name in data and data[name] == default:
                    del data[name]
        return data


#: Settings added to :class:`EpisodeLimits` after evaluations were stored, with the default
#: that such evaluations ran with.
_LATER_DEFAULTS: dict[str, Any] = {"environment": None,
                                   "stored_reply_bytes": STORED_REPLY_BYTES}


def require_sandbox(limits: EpisodeLimits) -> None:
    """Refuse up front, with the install hint, when episodes would need a sandbox this machine
    cannot make; better one clear error than one ``sandbox_error`` per episode."""
    if limits.unsafe_no_sandbox:
        return
    problem = check_bwrap()
    if problem is not None:
        raise SandboxError(problem, hint=INSTALL_HINT)


def effective_limits(limits: EpisodeLimits, task: Task) -> EpisodeLimits:
    """The stricter of the episode's limits and the task's own (as every episode takes them)."""
    update: dict[str, Any] = {}
    if task.limits.max_turns is not None:
        update["max_turns"] = min(limits.max_turns, task.limits.max_turns)
    if task.limits.wall_s is not None:
        update["wall_s"] = min(limits.wall_s, task.limits.wall_s)
    return limits.model_copy(update=update) if update else limits


def _continues(previous: list[Message] | None, view: list[Message]) -> bool:
    """Whether ``view`` extends the previous view + the assistant message that answered it."""
    if previous is None:
        return True
    return view[: len(previous)] == previous


async def run_episode(harness: Harness, task: Task, policy: Policy,
                      limits: EpisodeLimits | None = None, *,
                      workspace: Workspace | None = None,
                      episode_id: str | None = None,
                      pool: SandboxPool | PoolsByKey | None = None) -> Trajectory:
    """Run one episode and return its trajectory; never raises for agent or infrastructure
    failures (they become the trajectory's ``termination`` and ``error``). With ``pool`` (and
    no ``workspace``) the episode takes a pre-started sandbox from it when its key matches,
    and hands it back to be recycled or closed in the background (see
    :mod:`harnessgrid.sandbox_pool`); a :class:`PoolsByKey` gives the pool of its key.

    A task with follow-up prompts (a multi-session task) is played session by session
    (:mod:`harnessgrid.task_sessions`), so every runner - ``eval`` in-process, its workers,
    Ray, training rollouts - grades it whole; only the scripted oracle, whose plan answers one
    instruction, and a caller's own ``workspace`` get the single-instruction episode (ungraded,
    saying why)."""
    if task.followups and workspace is None and policy.spec.partition(":")[0] != "scripted":
        from harnessgrid.task_sessions import run_task_sessions

        try:
            return await run_task_sessions(harness, task, policy, limits, episode_id=episode_id)
        except Exception as exc:  # noqa: BLE001 - never raises, as every episode
            return crashed_episode(harness.name, task, policy, exc)
    limits = effective_limits(limits or EpisodeLimits(), task)
    require_sandbox(limits)
    environment, warning = resolve_episode_environment(task.environment, limits.environment)
    if warning is not None:
        _warn_once(warning)
    episode_id = episode_id or uuid.uuid4().hex[:12]
    started = time.time()
    clock = time.perf_counter()
    pooled: Sandbox | None = None
    key = PoolKey(task.mount_path, limits.sandbox, limits.unsafe_no_sandbox, environment)
    if isinstance(pool, PoolsByKey):
        pool = pool.get(key) if workspace is None else None
    if workspace is not None:
        ws = workspace
    elif pool is not None:
        ws, pooled = await pool.acquire(task.files, task.source_dir, key=key)
    else:
        ws = Workspace.create(task.files, task.source_dir, mount_path=task.mount_path)
    try:
        token = ACTIVE_ENVIRONMENT.set(environment)  # graders' sandboxes mount it too
        try:
            return await _episode(harness, task, policy, limits, ws, episode_id, started, clock,
                                  pooled)
        finally:
            ACTIVE_ENVIRONMENT.reset(token)
    finally:
        if workspace is not None:
            pass
        elif pool is not None:  # recycled or closed in the background, also on cancellation
            pool.release(ws, pooled)
        else:  # also on Ctrl-C / cancellation: no workspace left behind
            ws.cleanup()


@contextlib.asynccontextmanager
async def _episode_sandbox(ws: Workspace, limits: EpisodeLimits, pooled: Sandbox | None,
                           graded: bool) -> AsyncIterator[Sandbox]:
    """The episode's sandbox: the pooled one, or a fresh start. A pooled sandbox is left for
    the pool to recycle or close in the background; when a grader will read the workspace
    (grading needs every process of the episode gone) it is closed first unless it is idle."""
    sb = pooled or Sandbox(ws, limits.sandbox, unsafe_no_sandbox=limits.unsafe_no_sandbox,
                           environment=ACTIVE_ENVIRONMENT.get())
    async with contextlib.AsyncExitStack() as stack:
        if pooled is None:
            await stack.enter_async_context(sb)
        elif graded:
            stack.push_async_callback(_close_unless_idle, sb)
        yield sb


async def _close_unless_idle(sb: Sandbox) -> None:
    # Unsandboxed, leftovers are found only by process group and as orphans: close it (a pool
    # does not recycle those anyway).
    if not sb.idle() or sb.unsafe_no_sandbox:
        await sb.close()


async def _episode(harness: Harness, task: Task, policy: Policy, limits: EpisodeLimits,
                   ws: Workspace, episode_id: str, started: float, clock: float,
                   pooled: Sandbox | None = None) -> Trajectory:
    state = harness.start(task, episode_id)
    traj = Trajectory(episode_id=episode_id, harness=harness.name,
                      config=getattr(getattr(harness, "config", None), "levels", None),
                      task_id=task.id, suite=task.suite, policy=policy.spec,
                      mount_path=ws.mount_path, termination="max_turns", started_at=started,
                      environment=_environment_summary(task, limits))
    # The budget counts what the model reads: the view plus, for native tools, their schemas;
    # it is capped by what the model can take (the policy's ``context_limit``, if any).
    budget = context_budget(policy, harness.tools() if harness.native_tools else [],
                            limits.max_context_tokens)
    try:
        async with _episode_sandbox(ws, limits, pooled, task.grader is not None) as sb:
            await drive(harness, task, policy, limits, state, Environment(workspace=ws, sandbox=sb),
                        budget, traj, LoopCursor())
    except SandboxError as exc:
        traj.termination, traj.error = "sandbox_error", exc.message
    summarize(traj, state)
    if not traj.infra_failure and task.grader is not None:
        # An adapter that emulates a real shell writes that shell's own session transcript;
        # graders written for the shell read exactly that.
        events = getattr(harness, "session_events", None)
        transcript = events(traj) if callable(events) else traj.transcript()
        # Graders that run code follow the episode's sandbox choice.
        token = UNSAFE_NO_SANDBOX.set(limits.unsafe_no_sandbox)
        try:
            await _grade(task, ws, traj, transcript, limits.grader_timeout_s)
        finally:
            UNSAFE_NO_SANDBOX.reset(token)
    traj.wall_s = time.perf_counter() - clock
    cap_replies(traj, limits.stored_reply_bytes)  # graded on the whole replies, stored capped
    return traj


@dataclass
class LoopCursor:
    """Where the turn loop stands; a session keeps it across its runs, so turn indices,
    token segments and the token budget continue where the previous run stopped."""

    index: int = 0
    segment: int = 0
    total_tokens: int = 0
    previous: list[Message] | None = None  # the last view + the assistant message answering it


async def drive(harness: Harness, task: Task, policy: Policy, limits: EpisodeLimits,
                state: EpisodeState, env: Environment, budget: ContextBudget, traj: Trajectory,
                cursor: LoopCursor, *, wall_s: float | None = None,
                on_event: Callable[[Event], None] | None = None) -> None:
    """Run turns until the workflow finishes or a limit is hit (``limits.max_turns`` more
    turns, ``wall_s`` or ``limits.wall_s``), setting ``traj.termination`` and ``traj.error``.
    A policy failure becomes ``policy_error``; a sandbox failure raises :class:`SandboxError`.
    """
    wall_limit = limits.wall_s if wall_s is None else wall_s
    waiting = [False]  # inside policy.act: a timeout then is the backend's
    try:
        async with asyncio.timeout(wall_limit) as wall:
            # The same instant on the monotonic clock, for policies: no backend wait
            # (Retry-After, backoff, the call itself) may outlive the wall limit.
            loop = asyncio.get_running_loop()
            when = wall.when()
            deadline = None if when is None else time.monotonic() + when - loop.time()
            traj.termination = await _loop(harness, task, policy, limits, state, env, budget,
                                           traj, waiting, deadline, cursor, on_event)
    except TimeoutError:
        if not waiting[0]:
            traj.termination = "timeout"
        else:
            traj.termination, traj.error = "policy_error", (
                "the model backend did not answer within the episode's time "
                f"({wall_limit:g} s)")
    except _PolicyFailure as exc:
        traj.termination, traj.error = "policy_error", str(exc)


def summarize(traj: Trajectory, state: EpisodeState) -> None:
    """Fill the trajectory's totals (history, tokens, time split, segments) from its turns."""
    traj.history = list(state.history)
    traj.tokens_in = sum(t.tokens_in for t in traj.turns)
    traj.tokens_out = sum(t.tokens_out for t in traj.turns)
    for part in ("model_s", "tools_s", "harness_s", "wait_s"):
        setattr(traj, part, sum(getattr(t, part) for t in traj.turns))
    # Token policies may also restart a segment on their own (a chat template that is not
    # append-only for this conversation); their records are then the truth.
    token_segments = {t.tokens.segment for t in traj.turns if t.tokens is not None}
    traj.segments = len(token_segments) or 1 + sum(t.new_segment for t in traj.turns[1:])


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _environment_summary(task: Task, limits: EpisodeLimits) -> dict[str, str] | None:
    """The trajectory's record of the toolchain: the mounted environment, or the declared one
    that was missing (``missing: true``), or None."""
    env = ACTIVE_ENVIRONMENT.get()
    if env is not None:
        return env.summary()
    if not task.environment or limits.environment is not None:  # none, by --env none
        return None
    return {"name": task.environment, "missing": "true"}


class _PolicyFailure(Exception):
    """The policy raised: an infrastructure failure (API down, model crashed)."""


@timing.metered  # its own steps timed: harness CPU apart from waiting for the loop
async def _loop(harness: Harness, task: Task, policy: Policy, limits: EpisodeLimits,
                state: EpisodeState, env: Environment, budget: ContextBudget,
                traj: Trajectory, waiting: list[bool], deadline: float | None,
                cursor: LoopCursor, on_event: Callable[[Event], None] | None) -> Termination:
    emit = on_event or _ignore
    for _ in range(limits.max_turns):
        index = cursor.index
        if env.hooks is not None:
            env.hooks.turn = index
        t0, cpu0 = time.perf_counter(), timing.own_cpu()
        view = harness.view(state, budget)
        if budget.count(view) > budget.max_tokens:
            return "context_overflow"
        new_segment = not _continues(cursor.previous, view)
        cursor.segment += new_segment
        emit(TurnStarted(turn=index))
        if new_segment:
            emit(ContextRewrite(turn=index, segment=cursor.segment))
        request = PolicyRequest(messages=view, tools=harness.tools() if harness.native_tools
                                else [], native_tools=harness.native_tools, harness=harness,
                                task=task, state=state, new_segment=new_segment,
                                segment=cursor.segment, deadline=deadline,
                                on_text=None if on_event is None else _text_sink(emit, index))
        try:
            waiting[0] = True  # the wall limit expiring now is the backend's, not the agent's
            with timing.span() as model:
                turn = await policy.act(request)
        except asyncio.CancelledError as exc:
            task_ = asyncio.current_task()
            if task_ is not None and task_.cancelling():
                raise  # our own cancellation (the wall limit, Ctrl-C): not the policy's
            raise _PolicyFailure(f"the policy call was cancelled on its own: {exc!r}") from exc
        except Exception as exc:  # any policy failure (TimeoutError too) is infra
            if isinstance(exc, _Reraised):
                raise exc.original from None
            raise _PolicyFailure(f"{type(exc).__name__}: {exc}\n"
                                 f"{traceback.format_exc(limit=3)}") from exc
        waiting[0] = False  # not on cancellation: the wall limit must see that it hit the policy
        if not isinstance(turn, ModelTurn):  # a policy bug: keep the turns so far
            raise _PolicyFailure(f"the policy returned {type(turn).__name__}, "
                                 "not a ModelTurn")
        if on_event is not None:
            emit(_reply_event(index, turn, limits.stored_reply_bytes))
        before = len(state.history)
        record = TurnRecord(
            index=index, view=list(view), assistant=turn.message(), tokens=turn.tokens,
            finish_reason=turn.finish_reason, tokens_in=turn.tokens_in,
            tokens_out=turn.tokens_out, new_segment=new_segment, model_s=model.busy)
        cursor.index += 1
        cursor.total_tokens += turn.tokens_in + turn.tokens_out
        try:
            with timing.turn_clock() as tools:  # filled by each tool execution (tools.execute)
                outcome, decision = await harness.step(state, turn, env)
        except asyncio.CancelledError:
            # Cancelled mid-turn (a session's cancel()): the trajectory keeps what happened.
            record.appended = list(state.history[before + 1:])
            record.wall_s = time.perf_counter() - t0
            traj.turns.append(record)
            raise
        wall_s = time.perf_counter() - t0
        # Harness time is its own CPU: the model's and tools' own CPU are theirs, and the time
        # other episodes (or threads) ran is waiting. Clamped so that the parts add up to wall.
        spent = model.busy + tools.tools_s
        harness_s = min(max(0.0, timing.own_cpu() - cpu0 - model.own_cpu - tools.own_cpu),
                        max(0.0, wall_s - spent))
        record.calls = [CallRecord(call=e.call, action=e.action, result=e.result)
                        for e in outcome.executed]
        record.format_error = outcome.format_error.message if outcome.format_error else None
        record.appended = list(state.history[before + 1:])
        record.tools_s, record.harness_s, record.wall_s = tools.tools_s, harness_s, wall_s
        record.wait_s = max(0.0, wall_s - spent - harness_s)
        traj.turns.append(record)
        cursor.previous = [*view, state.history[before]]  # the assistant message as stored
        if decision.finished:
            return "finished"
        if state.consecutive_format_errors >= limits.max_format_errors:
            return "format_errors"
        if limits.max_total_tokens is not None and cursor.total_tokens >= limits.max_total_tokens:
            return "token_budget"
    return "max_turns"


def _ignore(event: Event) -> None:
    pass


def _reply_event(index: int, turn: ModelTurn, limit: int) -> ModelReply:
    """The ``model_reply`` event of ``turn``, capped like the stored reply."""
    whole = turn.message()
    shown = cap_reply(whole, limit)
    return ModelReply(turn=index, text=shown.content,
                      tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments}
                                  for c in shown.tool_calls],
                      original_bytes=None if shown is whole else stored_size(whole))


def _text_sink(emit: Callable[[Event], None], index: int) -> Callable[[str], None]:
    def on_text(text: str) -> None:
        try:
            emit(TextDelta(turn=index, text=text))
        except Exception as exc:  # the embedder's, kept apart from the policy's
            raise _Reraised(exc) from exc

    return on_text


class _Reraised(Exception):
    """An exception from the embedder's own code (a streaming callback) raised inside a
    policy call: it is the embedder's, not a policy failure, and propagates as itself."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


async def _grade(task: Task, ws: Workspace, traj: Trajectory, transcript: list[dict[str, Any]],
                 timeout_s: float) -> None:
    """Grade on a copy of the final workspace, off the event loop, with a timeout."""
    assert task.grader is not None
    t0 = time.perf_counter()
    # Making the scratch directory, copying (up to the workspace quota), walking and removing
    # it are disk work: off the event loop, where the other episodes run.
    made = off_loop_detached(lambda: ScratchDir("hg-grade-"))
    await finish_or_undo(made, lambda scratch: scratch.remove())
    scratch = made.result()
    try:
        copy = await asyncio.to_thread(_grading_copy, ws, scratch.path / "ws")
        try:
            scores = await asyncio.wait_for(
                asyncio.to_thread(task.grader.grade, copy.root, transcript), timeout_s)
            checked = validate_scores(scores)
            traj.subscores = dict(checked)
            traj.score = task_score(checked)  # the grader's own total (weights), else the mean
            traj.grading = checked.grading or "automated"
            # Part of the rubric was never assessed (a hybrid without its judge): the score
            # stays, but it cannot say the task passed.
            traj.grading_note = checked.partial
            traj.passed = None if checked.partial else traj.score == 1.0
            if checked.warnings:
                traj.meta["grade_warnings"] = list(checked.warnings)
        except TimeoutError:
            traj.grade_error = f"grader timed out after {timeout_s:g}s"
        except GraderError as exc:
            traj.grade_error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a grader bug must not crash the run
            traj.grade_error = f"grader raised {type(exc).__name__}: {exc}"
    finally:  # removed in its thread even when this episode is cancelled meanwhile
        await asyncio.shield(off_loop_detached(scratch.remove))
    traj.grade_s = time.perf_counter() - t0


def _grading_copy(ws: Workspace, dest: Path) -> Workspace:
    """The copy graders read: links out of it lead nowhere."""
    from harnessgrid.grading_io import neutralize_links

    copy = ws.copy_to(dest)
    neutralize_links(copy.root)
    return copy


def crashed_episode(harness_name: str, task: Task, policy: Policy,
                    exc: BaseException) -> Trajectory:
    """The trajectory of an episode that raised out of :func:`run_episode` (a bug in a harness,
    an adapter or a plugin): ``internal_error``, with the traceback, never a score."""
    logger.error("episode of %s through %s crashed", task.id, harness_name, exc_info=exc)
    trace = "".join(traceback.format_exception(exc, limit=-4))
    return Trajectory(episode_id=uuid.uuid4().hex[:12], harness=harness_name, task_id=task.id,
                      suite=task.suite, policy=policy.spec, termination="internal_error",
                      error=f"{type(exc).__name__}: {exc}\n{trace}", started_at=time.time())


async def run_episodes(jobs: Iterable[tuple[Harness, Task]], policy: Policy,
                       limits: EpisodeLimits | None = None, *, concurrency: int = 4,
                       on_done: Callable[[Trajectory], None] | None = None) -> list[Trajectory]:
    """Run many episodes concurrently (at most ``concurrency`` at once). One failing episode
    never takes the others down: an unexpected exception becomes that episode's
    ``internal_error`` trajectory (see :func:`crashed_episode`)."""
    require_sandbox(limits or EpisodeLimits())
    sem = asyncio.Semaphore(concurrency)
    jobs = list(jobs)

    async def one(harness: Harness, task: Task, pool: SandboxPool) -> Trajectory:
        async with sem:
            try:
                traj = await run_episode(harness, task, policy, limits, pool=pool)
            except Exception as exc:  # noqa: BLE001 - reported, and the others go on
                traj = crashed_episode(harness.name, task, policy, exc)
            if on_done is not None:
                on_done(traj)
            return traj

    # Sandboxes start ahead of the episodes that need them (see harnessgrid.sandbox_pool).
    async with episode_pool(limits, [t for _, t in jobs], concurrency) as pool:
        return list(await asyncio.gather(*(one(h, t, pool) for h, t in jobs)))


def episode_pool(limits: EpisodeLimits | None, tasks: Iterable[Task],
                 concurrency: int, *, reuse: int = DEFAULT_REUSE) -> SandboxPool:
    """A sandbox pool for running ``tasks`` at ``concurrency`` (use it with ``async with``):
    keyed like most of them (the others start their own sandbox), starting no more sandboxes
    than there are tasks, each serving up to ``reuse`` episodes (1: closed after one).
    Evaluation and the trainer's rollouts use it too."""
    limits = limits or EpisodeLimits()
    keys: list[PoolKey] = []
    environments: dict[str | None, Any] = {}
    for task in tasks:
        if task.environment not in environments:
            try:
                environments[task.environment] = resolve_episode_environment(
                    task.environment, limits.environment)[0]
            except Exception:  # noqa: BLE001 - the episode itself reports it; just not pooled
                environments[task.environment] = None
        keys.append(PoolKey(task.mount_path, limits.sandbox, limits.unsafe_no_sandbox,
                            environments[task.environment]))
    key = max(set(keys), key=keys.count) if keys else PoolKey(
        limits=limits.sandbox, unsafe_no_sandbox=limits.unsafe_no_sandbox)
    wanted = keys.count(key)
    return SandboxPool(min(concurrency, wanted), key, expected=wanted, reuse=reuse)
