"""Running an evaluation: every (setting, suite, task, harness, run) once, concurrently,
persisted as each episode ends, resumable.

Example::

    from harnessgrid.evaluation import EvalConfig, evaluate

    cfg = EvalConfig(policy="scripted", suites=("examples",), settings=("in-space",), runs=3)
    outcome = evaluate(cfg, "runs/eval-scripted")     # re-run the same call to resume

Jobs are ordered run by run, so an interrupted evaluation holds whole runs first. A fresh
harness is built for every episode (adapters may keep per-session state); the policy is shared,
as every built-in policy keeps its per-episode state in the episode.

Where the episodes run is an executor (:mod:`harnessgrid.engine.executor`), and only that differs:
this event loop (``concurrency`` at once), N local processes with ``EvalConfig(workers=N)``
(:mod:`harnessgrid.engine.workers`), or a Ray cluster with ``EvalConfig(ray="HOST:PORT")``
(:mod:`harnessgrid.engine.ray_episodes`), whose workers rebuild harness, task and policy from their
specs. This process commits every trajectory through the same store as it comes back, so the
stored results are the same whichever ran them, and resume the same way.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack, aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.errors import ConfigError
from harnessgrid.evaluation.manifest import (
    AdapterRecord,
    Manifest,
    Plan,
    PluginRecord,
    SuiteEntry,
    now,
    read_manifest,
    reconcile,
    redact,
    write_manifest,
)
from harnessgrid.evaluation.plan import (
    DEFAULT_ADAPTERS,
    DEFAULT_SETTINGS,
    check_recorded_harnesses,
    resolve_settings,
    select_tasks,
    stored_setting_names,
)
from harnessgrid.evaluation.results import EvalResult, ResultKey, tag_trajectory
from harnessgrid.evaluation.store import EvalStore
from harnessgrid.paths import require_output_dir
from harnessgrid.policies.scripted import check_policy_fits
from harnessgrid.space import FactorSpace
from harnessgrid.tasks import Task, TaskSuite, check_graders_ready

if TYPE_CHECKING:
    from harnessgrid.engine.executor import EpisodeJob, Executor
    from harnessgrid.policies import Policy


class EvalConfig(BaseModel):
    """The parameters of ``harnessgrid eval`` (see :mod:`harnessgrid.evaluation.plan`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: str
    policy_options: dict[str, Any] = Field(default_factory=dict)
    suites: tuple[str, ...]
    #: Options for every suite's loader (``eval -o KEY=VALUE``; ``--judge MODEL`` is
    #: ``judge``). Part of a run's identity: results graded with another judge (or none) are
    #: not comparable, so a resume with other options is refused.
    suite_options: dict[str, Any] = Field(default_factory=dict)
    settings: tuple[str, ...] = DEFAULT_SETTINGS
    runs: int = Field(default=3, ge=1)
    harnesses: tuple[str, ...] | None = None  # in-space override; ("all",) = the whole space
    #: the `original` setting: what the policy trained through (harnesses, or ``oa``)
    original: str | tuple[str, ...] | None = None
    #: Deprecated since 0.2.3 (removed in 0.3.0) with the setting `train`: pass the training
    #: harnesses as ``original`` with the setting ``original``.
    train_harnesses: tuple[str, ...] | None = None
    adapters: tuple[str, ...] = DEFAULT_ADAPTERS
    holdout_seed: int = 0
    holdout_n: int = Field(default=18, ge=1)
    limit: int | None = Field(default=None, ge=1)
    split: str | None = None
    #: ``MODULE:FUNCTION``: a product's approval callback (``on_tool_call``) every episode's
    #: tool calls pass, imported where the episodes run (worker processes and Ray nodes too)
    approver: str | None = None
    concurrency: int = Field(default=4, ge=1)  # local episodes at once (not with ``ray``)
    #: Local worker processes sharing ``concurrency`` (:mod:`harnessgrid.engine.workers`),
    #: for when one process's CPU is the limit; 1 runs every episode in this process. Not part
    #: of a run's identity.
    workers: int = 1
    limits: EpisodeLimits = EpisodeLimits()
    #: A Ray cluster's address (HOST:PORT of ``ray start --head``, or ``auto``): run the
    #: episodes there, one per cluster CPU. Not part of a run's identity: a run started locally
    #: may be resumed on a cluster and back.
    ray: str | None = None
    #: On resume, keep stored infrastructure failures instead of running those episodes again
    #: (by default they are retried; the failed records stay in the files either way). Not
    #: part of a run's identity.
    keep_failures: bool = False


@dataclass
class EvalOutcome:
    """What one invocation did: ``skipped`` were already stored, ``recovered`` were rebuilt
    from trajectories a killed run wrote without their result, ``retried`` is how many of the
    episodes to run were stored as infrastructure failures (run again unless
    ``keep_failures``). ``results`` are the effective results of every episode of the plan
    (the stored ones included)."""

    out_dir: Path
    total: int
    skipped: int
    ran: int
    recovered: int
    seconds: float
    results: list[EvalResult]
    retried: int = 0

    @property
    def infra_failures(self) -> list[EvalResult]:
        """The plan's episodes whose (effective) result is an infrastructure failure."""
        return [r for r in self.results if r.infra_failure]


OnResult = Callable[[EvalResult], None]


Planned = tuple[ResultKey, Task]
"""One episode of the plan: where its result is stored, and its task."""


def plan_jobs(settings: dict[str, list[str]], tasks: dict[str, list[Task]],
              runs: int) -> list[Planned]:
    """Every episode of the evaluation, run-major (run 0 of everything first)."""
    return [(ResultKey(setting, spec, task.id, harness, run), task)
            for run in range(runs)
            for setting, harnesses in settings.items()
            for spec, suite_tasks in tasks.items()
            for task in suite_tasks
            for harness in harnesses]


def build_manifest(config: EvalConfig, policy_spec: str, space: FactorSpace,
                   settings: dict[str, list[str]], suites: dict[str, tuple[str, str, list[Task]]],
                   broken: dict[str, dict[str, str]] | None = None) -> Manifest:
    from harnessgrid.plugin_system.registry import provenance

    stamp = now()
    adapters = [h for harnesses in settings.values() for h in harnesses
                if h.startswith("adapter:")]
    made = provenance(adapters)
    return Manifest(
        harnessgrid_version=made["harnessgrid_version"], created_at=stamp, updated_at=stamp,
        plugins=[PluginRecord(**p) for p in made["plugins"]],
        adapters={name: AdapterRecord(**a) for name, a in made["adapters"].items()},
        policy=policy_spec, policy_options=redact(config.policy_options),
        suite_options=redact(config.suite_options),
        limits=config.limits.model_dump(mode="json"), approver=config.approver,
        space={f.name: list(f.levels) for f in space.factors}, holdout_seed=config.holdout_seed,
        settings=settings, runs=config.runs,
        suites={spec: SuiteEntry(name=name, version=version,
                                 tasks={t.id: t.content_hash() for t in tasks},
                                 broken=(broken or {}).get(spec, {}))
                for spec, (name, version, tasks) in suites.items()},
        plans=[Plan(suites=tuple(suites), settings=tuple(settings), runs=config.runs)])


def evaluate(config: EvalConfig, out_dir: str | Path, *, policy: Policy | None = None,
             space: FactorSpace | None = None, progress: bool = False,
             on_result: OnResult | None = None) -> EvalOutcome:
    """Run (or resume) an evaluation into ``out_dir``; see :func:`aevaluate`."""
    return asyncio.run(aevaluate(config, out_dir, policy=policy, space=space,
                                 progress=progress, on_result=on_result))


async def aevaluate(config: EvalConfig, out_dir: str | Path, *, policy: Policy | None = None,
                    space: FactorSpace | None = None, progress: bool = False,
                    on_result: OnResult | None = None) -> EvalOutcome:
    """Resolve and validate everything, open the store, then run what is not stored yet.

    ``policy`` overrides ``config.policy`` with an object (its ``spec`` is recorded; not with
    ``config.ray``, whose workers build the policy from its spec); ``progress`` shows a rich
    progress bar with an ETA on stderr.
    """
    from harnessgrid.engine.api import resolve_harness, resolve_policy
    from harnessgrid.engine.limits import require_sandbox
    from harnessgrid.plugin_system.registry import get_registry

    started = time.perf_counter()
    _check_workers(config, policy)
    out = require_output_dir(out_dir, "the evaluation directory (--out)")
    # Designs are over ``space`` (default: the paper's 3^5 grid); explicit codes are read in
    # ``space`` when one is given. Every harness id is a harness address, which names the same
    # harness on every machine: jobs, workers and Ray nodes resolve it as it stands.
    if config.approver:  # a bad path fails here, once, not in every episode
        from harnessgrid.engine.executor import load_approver

        load_approver(config.approver)
    settings = resolve_settings(config.settings, space=space, harnesses=config.harnesses,
                                original=config.original, adapters=config.adapters,
                                holdout_seed=config.holdout_seed, holdout_n=config.holdout_n,
                                train_harnesses=config.train_harnesses)
    settings = stored_setting_names(settings, read_manifest(out))
    space = space or FactorSpace.default()
    for harnesses in settings.values():  # build each once: a broken harness fails here
        for hid in harnesses:
            resolve_harness(hid)
    suites: dict[str, tuple[str, str, list[Task]]] = {}
    broken: dict[str, dict[str, str]] = {}  # tasks the loader could not build: reported, not run
    for spec in dict.fromkeys(config.suites):
        suite = _load_suite(spec, config.suite_options)
        suites[spec] = (suite.name, suite.version, select_tasks(suite, config.split, config.limit))
        broken[spec] = {b.id: b.reason for b in suite.broken}
    every_task = [t for _, _, ts in suites.values() for t in ts]
    check_policy_fits(config.policy if policy is None else policy.spec, every_task)
    # a judge without credentials: before any episode
    check_graders_ready(every_task, config.suite_options.get("judge"))
    if policy is None:
        get_registry().policy(config.policy.partition(":")[0])  # unknown scheme: fail early
    elif config.ray is not None:
        raise ConfigError(f"a policy object ({policy.spec}) cannot be sent to a Ray cluster: "
                          "its workers build the policy from its spec",
                          hint="pass the spec as EvalConfig.policy (options in policy_options) "
                               "and no policy= object")
    spec = policy.spec if policy is not None else config.policy
    manifest = build_manifest(config, spec, space, settings, suites, broken)
    tasks = {s: t for s, (_, _, t) in suites.items()}
    jobs = plan_jobs(settings, tasks, config.runs)
    if policy is None and config.ray is None and (not out.exists() or not any(out.iterdir())):
        # A new evaluation has everything to run: a missing key fails before a file is written.
        policy = resolve_policy(config.policy, config.policy_options)
    with ExitStack() as stack:
        if config.ray is None:
            require_sandbox(config.limits)
        else:  # connect before touching the directory: a wrong address leaves nothing behind
            from harnessgrid.engine.ray_episodes import ray_cluster

            resources = stack.enter_context(ray_cluster(config.ray))
            if progress:
                _say(f"Ray cluster at {config.ray}: {resources.get('CPU', 0):g} CPUs")
        store = stack.enter_context(EvalStore(out))
        check_recorded_harnesses(out, store.results.values(), read_manifest(out))
        merged = reconcile(out, manifest)
        done, failed = store.done, set() if config.keep_failures else store.failed
        todo = [(key, task) for key, task in jobs if key not in done or key in failed]
        retried = sum(key in failed for key, _ in todo)
        kept = sum(key in store.failed for key, _ in jobs) if config.keep_failures else 0
        skipped = len(jobs) - len(todo)
        if todo and config.ray is None:
            policy = policy or resolve_policy(config.policy, config.policy_options)
        write_manifest(out, merged)
        report = _reporter(progress, len(todo), skipped, on_result, retried, kept)
        jobs_todo = _episode_jobs(todo, config, policy, retries=set(store.results))
        ran = await _run_planned(_executor(config), todo, jobs_todo, store, report)
        results = [store.results[key] for key, _ in jobs]
        recovered = store.recovered
    return EvalOutcome(out_dir=out, total=len(jobs), skipped=skipped, ran=ran,
                       recovered=recovered, seconds=time.perf_counter() - started,
                       results=results, retried=retried)


def _load_suite(spec: str, options: dict[str, Any]) -> TaskSuite:
    """A suite with the evaluation's loader options; every suite gets them all, so an option
    one of them does not take is said in the evaluation's terms."""
    from harnessgrid.plugin_system.registry import load_suite

    try:
        return load_suite(spec, **options)
    except ConfigError as exc:
        if not options or "option" not in exc.message:
            raise
        raise ConfigError(f"suite {spec}: {exc.message}", hint=(
            f"{exc.hint}; " if exc.hint else "") + "loader options (-o KEY=VALUE, --judge) go "
            "to every suite of --suites: evaluate suites that take other options into another "
            "--out DIR") from None


def _check_workers(config: EvalConfig, policy: Policy | None) -> None:
    from harnessgrid.engine.workers import check_workers

    check_workers(config.workers, config.concurrency)
    if config.workers > 1 and config.ray is not None:
        raise ConfigError(f"--workers {config.workers} and --ray both say where episodes run",
                          hint="use --workers for processes on this machine, or --ray for a "
                               "cluster (it runs one episode per cluster CPU)")
    if config.workers > 1 and policy is not None:
        raise ConfigError(f"a policy object ({policy.spec}) cannot be sent to worker "
                          "processes: each builds the policy from its spec",
                          hint="pass the spec as EvalConfig.policy (options in policy_options) "
                               "and no policy= object, or use workers=1")


def _executor(config: EvalConfig) -> Executor:
    """Where the episodes run: the one thing ``ray`` and ``workers`` change."""
    from harnessgrid.engine.executor import LocalExecutor, ProcessExecutor, RayExecutor

    if config.ray is not None:
        return RayExecutor(config.ray)
    if config.workers > 1:
        return ProcessExecutor(config.workers, config.concurrency)
    return LocalExecutor(config.concurrency)


def _episode_jobs(planned: Sequence[Planned], config: EvalConfig, policy: Policy | None,
                  retries: set[ResultKey] | frozenset[ResultKey] = frozenset(),
                  ) -> list[EpisodeJob]:
    """The planned episodes as jobs any executor runs: specs that another process rebuilds
    (a worker process, a Ray node; a harness id is an address that needs no space to
    resolve), bound to the task and policy objects for a run in this process. A key's first
    attempt gets :func:`planned_episode_id`; a retry (a key in ``retries``, already stored)
    gets a fresh random id, so no two stored episodes share one."""
    from harnessgrid.engine.executor import EpisodeJob

    tasks = {(key.suite, task.id): task for key, task in planned}
    hashes = {where: task.content_hash() for where, task in tasks.items()}  # once per task
    return [EpisodeJob(harness=key.harness, suite=key.suite, task_id=task.id,
                       task_hash=hashes[key.suite, task.id], policy=config.policy,
                       policy_options=config.policy_options, limits=config.limits,
                       suite_options=config.suite_options, approver=config.approver,
                       episode_id=None if key in retries else planned_episode_id(key),
                       ).bind(task=task, policy=policy)
            for key, task in planned]


def planned_episode_id(key: ResultKey) -> str:
    """The episode id of a key's first attempt, derived from the key. Token policies seed each
    turn from ``(seed, episode id, turn)``, so an evaluation repeated with the policy's same
    ``seed`` samples the same turns (README, "What repeats"); without a seed it does not."""
    return hashlib.sha256(json.dumps(list(key)).encode()).hexdigest()[:12]


async def _run_planned(executor: Executor, planned: Sequence[Planned],
                       jobs: Sequence[EpisodeJob], store: EvalStore, report: _Reporter) -> int:
    """Run ``jobs`` (one per planned episode) on ``executor``; tag and commit each trajectory
    as it arrives, so that an interrupted evaluation keeps every finished episode."""
    done = 0
    try:
        if not jobs:
            return 0
        async with aclosing(executor.run(jobs)) as finished:
            async for index, traj in finished:
                key, task = planned[index]
                tag_trajectory(traj, key, task.tags, task.category)
                report.update(store.commit(traj))
                done += 1
    finally:
        report.close()
    return done


def _say(text: str) -> None:
    from rich.console import Console

    Console(stderr=True).print(text, highlight=False)


class _Reporter:
    """Progress of the running jobs; the no-op base is used in quiet mode."""

    def __init__(self, on_result: OnResult | None) -> None:
        self.on_result = on_result

    def update(self, result: EvalResult) -> None:
        if self.on_result is not None:
            self.on_result(result)

    def close(self) -> None:
        pass


class _RichReporter(_Reporter):
    """A rich progress bar on stderr: done/total, passes so far, elapsed time and ETA."""

    def __init__(self, total: int, skipped: int, on_result: OnResult | None,
                 retried: int = 0) -> None:
        super().__init__(on_result)
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        console = Console(stderr=True)
        if skipped or retried:
            again = (f" ({retried} of them stored as infrastructure failures, run again; "
                     "--keep-failures keeps them)") if retried else ""
            console.print(f"resuming: {skipped} episode(s) already stored, {total} to run"
                          + again, highlight=False, soft_wrap=True)
        self.passed = self.scored = self.failed = 0
        self.progress = Progress(
            SpinnerColumn(), TextColumn("[bold]eval[/]"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), TextColumn("ETA"),
            TimeRemainingColumn(), console=console)
        self.task = self.progress.add_task("eval", total=total, stats=self._stats())
        self.progress.start()

    def _stats(self) -> str:
        text = f"pass {self.passed}/{self.scored}"
        return text + (f" · [red]{self.failed} infra/ungraded[/]" if self.failed else "")

    def update(self, result: EvalResult) -> None:
        self.scored += result.scored
        self.passed += bool(result.scored and result.passed)
        self.failed += not result.scored
        self.progress.update(self.task, advance=1, stats=self._stats())
        super().update(result)

    def close(self) -> None:
        self.progress.stop()


def _reporter(progress: bool, total: int, skipped: int, on_result: OnResult | None,
              retried: int = 0, kept: int = 0) -> _Reporter:
    if progress and total:
        return _RichReporter(total, skipped, on_result, retried)
    if progress:
        from rich.console import Console

        failures = (f" ({kept} of them infrastructure failures, kept by --keep-failures)"
                    if kept else "")
        Console(stderr=True).print(f"nothing to run: all {skipped} episode(s) already stored"
                                   + failures, highlight=False, soft_wrap=True)
    return _Reporter(on_result)
