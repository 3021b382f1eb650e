"""Scripted-episode throughput: harnessgrid vs mini-swe-agent, side by side, in one run.

Both sides play the same N tasks; each episode issues the same K shell commands (``ls``,
``cat``, ``python3 -c``, ``grep``, ``wc -l``, ...) and then finishes. No model is involved:

- mini-swe-agent: ``DefaultAgent`` + ``LocalEnvironment`` + ``DeterministicModel``, configured
  from its own ``mini_textbased.yaml`` (system/instance templates, observation template,
  environment variables). Every canned response is a THOUGHT plus one ```mswea_bash_command``
  block, parsed with the package's own ``parse_regex_actions`` and the ``action_regex`` of
  ``LitellmTextbasedModel``; the episode ends with the package's finish sentinel
  ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``. Concurrency uses a thread pool, as
  mini-swe-agent's own batch runners do.
- harnessgrid: ``run_episode`` / ``run_episodes`` with the scripted oracle playing
  ``Task.plan`` (K ``shell`` actions) through ``S0-T2-O0-C0-W0`` (minimal prompt, ``bash_only``
  tools, raw observations, full context, react workflow), once in the bubblewrap sandbox and
  once with ``EpisodeLimits(unsafe_no_sandbox=True)`` (plain subprocesses, like
  ``LocalEnvironment``). Sandboxes come from a ``SandboxPool`` (as in ``run_episodes``,
  evaluation and training: started ahead, and recycled - reset between episodes - rather
  than closed and started again); ``--no-recycle`` adds rows whose pool closes each sandbox
  after its episode (``episode_pool(..., reuse=1)``, a start per episode, off the critical path),
  ``--fresh`` rows that start and close one on each episode's critical path instead.

Timing is in paired rounds: each round runs every mode once, interleaved, so load from other
processes hits them alike; each row's ratio is computed within a round (against mini-swe-agent
at the same concurrency) and the MEDIAN over rounds is printed, with the range. The fixed cost
per episode (what an episode costs beyond its commands) is the intercept of the sequential
episode time between 1 and K commands, again per round, median printed.

Every episode of every mode is checked: it must have finished, run exactly the K commands in
order, each exiting 0, and each command's stdout must match what the other framework printed
for the same task. Any difference fails the run (exit status 1).

Run: ``python benchmarks/episode_throughput.py [--episodes 20] [--commands 6] [--rounds 5]
[--no-recycle]``
(``--help`` for the rest). Needs ``pip install mini-swe-agent`` (benchmark-only dependency).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")  # no banner from `import minisweagent`
# mini-swe-agent's text-based model module imports litellm, which otherwise fetches a price
# table from the network at import time (and retries for seconds when offline).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

#: The PATH every mode runs commands with (harnessgrid's sandbox uses this one inside bwrap).
#: Without it, mini-swe-agent and the unsandboxed harnessgrid mode would inherit the caller's
#: PATH and start the virtual environment's python3, whose start-up (editable-install finders,
#: site-packages .pth files) costs several ms more than the system python3 the sandbox runs.
COMMAND_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CONFIG_CODE = "S0-T2-O0-C0-W0"  # minimal, bash_only, raw, full, react
FINISH_SENTINEL = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
BUILTIN_LEVEL_MODULES = (
    "harnessgrid.plugins.policies",
    "harnessgrid.plugins.factors.system_prompt.minimal",
    "harnessgrid.plugins.factors.tool_interface.bash_only",
    "harnessgrid.plugins.factors.observation.raw",
    "harnessgrid.plugins.factors.context.full",
    "harnessgrid.plugins.factors.workflow.react",
)

#: The command pool; an episode runs the first K (cycled when K is larger). All relative to the
#: workspace, all exit 0, none writes to stderr, none prints anything host-specific, so both
#: frameworks must print byte-identical output for the same task.
COMMANDS: tuple[str, ...] = (
    "ls",
    "cat README.md",
    "python3 -c \"import json; print(json.dumps({'total': sum(range(1000))}))\"",
    "grep -n needle data.txt",
    "wc -l data.txt",
    "python3 app.py",
    "head -n 5 src/util.py",
    "sort data.txt | tail -n 3",
    "grep -rn def src",
    "tail -n 2 data.txt",
)


# --------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class BenchTask:
    id: str
    instruction: str
    files: dict[str, str]
    commands: tuple[str, ...]


def make_tasks(n: int, k: int) -> list[BenchTask]:
    commands = tuple(COMMANDS[i % len(COMMANDS)] for i in range(k))
    tasks = []
    for i in range(n):
        lines = [f"row {j:03d} value={(j * 7 + i) % 13}" + (" needle" if (j + i) % 17 == 0 else "")
                 for j in range(120)]
        files = {
            "README.md": f"# Task {i}\n\nInspect the data files and report what they contain.\n",
            "data.txt": "\n".join(lines) + "\n",
            "app.py": ("from src.util import mean\n\n"
                       f"print('mean:', mean([{i}, {i + 3}, {i + 8}]))\n"),
            "src/__init__.py": "",
            "src/util.py": ('"""Helpers."""\n\n\ndef mean(xs):\n    return sum(xs) / len(xs)\n\n\n'
                            "def spread(xs):\n    return max(xs) - min(xs)\n"),
        }
        tasks.append(BenchTask(
            id=f"bench-{i:03d}",
            instruction=(f"Task {i}: look around the workspace, read README.md, count the rows "
                         "of data.txt and run app.py; then finish."),
            files=files, commands=commands))
    return tasks


# --------------------------------------------------------------------------- results


@dataclass
class EpisodeRun:
    """What one episode ran, normalised across frameworks for the checks."""

    task_id: str
    finished: bool
    status: str
    commands: list[str]
    outputs: list[str]
    exit_codes: list[int | None]
    problems: list[str] = field(default_factory=list)
    split: dict[str, float] = field(default_factory=dict)  # harnessgrid wall-clock split


@dataclass
class ModeResult:
    name: str
    framework: str
    concurrency: int
    wall_s: float
    runs: list[EpisodeRun]

    def eps(self) -> float:
        return len(self.runs) / self.wall_s


# --------------------------------------------------------------------------- mini-swe-agent


class MiniSide:
    """mini-swe-agent driven by its deterministic test model."""

    def __init__(self, bubblewrap: bool = False) -> None:
        try:
            from minisweagent.agents.default import DefaultAgent
            from minisweagent.config import get_config_from_spec
            from minisweagent.environments.local import LocalEnvironment
            from minisweagent.models.litellm_textbased_model import LitellmTextbasedModelConfig
            from minisweagent.models.test_models import DeterministicModel, make_output
            from minisweagent.models.utils.actions_text import parse_regex_actions
        except ImportError as exc:
            raise SystemExit(f"mini-swe-agent is not installed ({exc}); it is a benchmark-only "
                             "dependency: pip install mini-swe-agent") from None
        import minisweagent

        self.version = minisweagent.__version__
        config = get_config_from_spec("mini_textbased.yaml")
        self.agent_config: dict[str, Any] = dict(config["agent"])
        self.env_vars: dict[str, str] = dict(config.get("environment", {}).get("env", {}))
        self.observation_template: str = config["model"]["observation_template"]
        self.format_error_template: str = config["model"]["format_error_template"]
        self.action_regex: str = LitellmTextbasedModelConfig.model_fields["action_regex"].default
        self.Agent, self.Model, self.make_output = DefaultAgent, DeterministicModel, make_output
        self.parse = parse_regex_actions
        if bubblewrap:
            from minisweagent.environments.extra.bubblewrap import BubblewrapEnvironment
            self.Env: Any = BubblewrapEnvironment
        else:
            self.Env = LocalEnvironment

    def _response(self, n: int, command: str) -> dict[str, Any]:
        """One canned model response, parsed the way LitellmTextbasedModel parses real ones."""
        content = (f"THOUGHT: step {n} of the scripted plan.\n\n"
                   f"```mswea_bash_command\n{command}\n```")
        actions = self.parse(content, action_regex=self.action_regex,
                             format_error_template=self.format_error_template)
        return self.make_output(content, actions, cost=0.0)

    def episode(self, task: BenchTask) -> EpisodeRun:
        workdir = Path(tempfile.mkdtemp(prefix="mswea-bench-"))
        try:
            for rel, text in task.files.items():
                path = workdir / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            outputs = [self._response(n, c) for n, c in enumerate(task.commands, 1)]
            outputs.append(self._response(len(task.commands) + 1, FINISH_SENTINEL))
            model = self.Model(outputs=outputs, observation_template=self.observation_template)
            env = self.Env(cwd=str(workdir), env=self.env_vars, timeout=60)
            agent_kwargs = {**self.agent_config, "step_limit": len(outputs) + 2}
            agent = self.Agent(model, env, **agent_kwargs)
            info = agent.run(task.instruction)
            return self._collect(task, agent.messages, info)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    @staticmethod
    def _collect(task: BenchTask, messages: list[dict[str, Any]], info: dict[str, Any]
                 ) -> EpisodeRun:
        issued = [a["command"] for m in messages if m.get("role") == "assistant"
                  for a in m.get("extra", {}).get("actions", [])]
        observations = [m for m in messages if m.get("role") == "user"
                        and "returncode" in m.get("extra", {})]
        status = str(info.get("exit_status", ""))
        run = EpisodeRun(task_id=task.id, finished=status == "Submitted", status=status,
                         commands=[], outputs=[], exit_codes=[])
        if not issued or issued[-1] != FINISH_SENTINEL:
            run.problems.append(f"last action is not the finish sentinel: {issued[-1:]}")
        else:
            issued = issued[:-1]
        run.commands = issued
        run.outputs = [o["extra"]["raw_output"] for o in observations]
        run.exit_codes = [o["extra"]["returncode"] for o in observations]
        if messages[-1].get("role") != "exit":
            run.problems.append("trajectory does not end with an exit message")
        return run


def run_mini(side: MiniSide, tasks: Sequence[BenchTask], concurrency: int) -> tuple[
        float, list[EpisodeRun]]:
    t0 = time.perf_counter()
    if concurrency <= 1:
        runs = [side.episode(t) for t in tasks]
    else:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            runs = list(pool.map(side.episode, tasks))
    return time.perf_counter() - t0, runs


# --------------------------------------------------------------------------- harnessgrid


class HarnessgridSide:
    """harnessgrid's runtime with the scripted oracle through the bash_only harness."""

    def __init__(self, max_turns: int) -> None:
        from harnessgrid.errors import ConfigError
        from harnessgrid.models import Action
        from harnessgrid.plugin_system.composition import compose
        from harnessgrid.plugin_system.registry import PluginManager
        from harnessgrid.policies.scripted import ScriptedPolicy
        from harnessgrid.space import FactorSpace
        from harnessgrid.tasks import Task

        config = FactorSpace.default().parse(CONFIG_CODE)
        try:
            self.harness = compose(config)
            self.registry_note = "default registry"
        except ConfigError as exc:  # built-in levels not registered (yet): name them explicitly
            reg = PluginManager(builtins=list(BUILTIN_LEVEL_MODULES), load_external=False).registry()
            self.harness = compose(config, reg)
            first = str(exc.args[0] if exc.args else exc).splitlines()[0]
            self.registry_note = f"explicit built-in registry; default registry said: {first}"
        self.policy = ScriptedPolicy()
        self.Task, self.Action = Task, Action
        self.max_turns = max_turns

    def task(self, t: BenchTask) -> Any:
        plan = tuple(self.Action.of("shell", command=c) for c in t.commands)
        return self.Task(id=t.id, instruction=t.instruction, files=dict(t.files), plan=plan,
                         suite="episode-throughput")

    def limits(self, sandbox: bool) -> Any:
        from harnessgrid.engine.limits import EpisodeLimits

        return EpisodeLimits(max_turns=self.max_turns, unsafe_no_sandbox=not sandbox)

    @staticmethod
    def collect(traj: Any) -> EpisodeRun:
        calls = [c for turn in traj.turns for c in turn.calls]
        shell = [c for c in calls if c.action.kind == "shell"]
        run = EpisodeRun(task_id=traj.task_id, finished=traj.termination == "finished",
                         status=traj.termination + (f" ({traj.error})" if traj.error else ""),
                         commands=[c.action.args["command"] for c in shell],
                         outputs=[c.result.output for c in shell],
                         exit_codes=[c.result.exit_code for c in shell])
        if not calls or calls[-1].action.kind != "finish":
            run.problems.append("the episode did not end with a finish call")
        others = [c.action.kind for c in calls if c.action.kind != "shell"]
        if others not in ([], ["finish"]):
            run.problems.append(f"unexpected calls besides the shell commands: {others}")
        for c in shell:
            if c.result.stderr or c.result.error:
                run.problems.append(f"{c.action.args['command']!r} wrote stderr/error: "
                                    f"{(c.result.stderr or c.result.error)!r:.200}")
        for turn in traj.turns:
            if turn.format_error:
                run.problems.append(f"format error on turn {turn.index}: {turn.format_error}")
        run.split = {"model_s": traj.model_s, "tools_s": traj.tools_s,
                     "harness_s": traj.harness_s, "wall_s": traj.wall_s}
        return run


def run_harnessgrid(side: HarnessgridSide, tasks: Sequence[BenchTask], concurrency: int,
                    sandbox: bool, pooled: bool = True, recycle: bool = True
                    ) -> tuple[float, list[EpisodeRun]]:
    from harnessgrid.engine.executor import run_episodes
    from harnessgrid.engine.runtime import episode_pool, run_episode

    hg_tasks = [side.task(t) for t in tasks]  # building Task values is not timed (nor is mini's)
    limits = side.limits(sandbox)

    async def main() -> list[Any]:
        if not recycle:  # as run_episodes, with a pool that closes each sandbox after use
            gate = asyncio.Semaphore(concurrency)
            async with episode_pool(limits, hg_tasks, concurrency, reuse=1) as closing_pool:
                async def one_closing(task: Any) -> Any:
                    async with gate:
                        return await run_episode(side.harness, task, side.policy, limits,
                                                 pool=closing_pool)

                return list(await asyncio.gather(*(one_closing(t) for t in hg_tasks)))
        if not pooled:  # every episode starts and closes its own sandbox
            gate = asyncio.Semaphore(concurrency)

            async def one(task: Any) -> Any:
                async with gate:
                    return await run_episode(side.harness, task, side.policy, limits)

            return list(await asyncio.gather(*(one(t) for t in hg_tasks)))
        if concurrency <= 1:
            async with episode_pool(limits, hg_tasks, 1) as pool:
                return [await run_episode(side.harness, t, side.policy, limits, pool=pool)
                        for t in hg_tasks]
        return await run_episodes(((side.harness, t) for t in hg_tasks), side.policy, limits,
                                  concurrency=concurrency)

    t0 = time.perf_counter()
    trajs = asyncio.run(main())  # includes closing the pool: no sandbox is left running
    wall = time.perf_counter() - t0
    return wall, [side.collect(t) for t in trajs]


# --------------------------------------------------------------------------- checks


def check(result: ModeResult, tasks: Sequence[BenchTask]) -> list[str]:
    """Every episode finished and ran exactly the task's commands, each exiting 0."""
    problems = []
    by_id = {t.id: t for t in tasks}
    if len(result.runs) != len(tasks):
        problems.append(f"{len(result.runs)} episodes ran, {len(tasks)} expected")
    for run in result.runs:
        where = f"{result.name} / {run.task_id}"
        want = list(by_id[run.task_id].commands)
        if not run.finished:
            problems.append(f"{where}: did not finish: {run.status}")
        if run.commands != want:
            problems.append(f"{where}: ran {len(run.commands)} commands {run.commands!r:.300}, "
                            f"expected {len(want)}")
        if len(run.outputs) != len(want):
            problems.append(f"{where}: {len(run.outputs)} observations for {len(want)} commands")
        if any(code != 0 for code in run.exit_codes):
            problems.append(f"{where}: exit codes {run.exit_codes}")
        problems.extend(f"{where}: {p}" for p in run.problems)
    return problems


def cross_check(reference: ModeResult, other: ModeResult) -> list[str]:
    """The same task printed the same output for the same command on both sides."""
    problems = []
    ref = {r.task_id: r for r in reference.runs}
    for run in other.runs:
        base = ref.get(run.task_id)
        if base is None:
            problems.append(f"{other.name}: task {run.task_id} missing from {reference.name}")
            continue
        for cmd, a, b in zip(run.commands, base.outputs, run.outputs, strict=False):
            if a != b:
                problems.append(f"{other.name} / {run.task_id}: {cmd!r} printed {b!r:.120}, "
                                f"{reference.name} printed {a!r:.120}")
    return problems


# --------------------------------------------------------------------------- main


@dataclass
class Mode:
    name: str
    framework: str
    concurrency: int
    run: Callable[[Sequence[BenchTask]], tuple[float, list[EpisodeRun]]]


def build_modes(args: argparse.Namespace, mini: MiniSide, mini_bwrap: MiniSide | None,
                hg: HarnessgridSide, sandbox_ok: bool) -> list[Mode]:
    modes: list[Mode] = []
    for c in (1, args.concurrency):
        label = "sequential" if c == 1 else f"concurrent x{c}"
        modes.append(Mode(f"mini-swe-agent local, {label}", "mini", c,
                          lambda ts, c=c: run_mini(mini, ts, c)))
        if mini_bwrap is not None:
            modes.append(Mode(f"mini-swe-agent bwrap, {label}", "mini-bwrap", c,
                              lambda ts, c=c: run_mini(mini_bwrap, ts, c)))
        if sandbox_ok:
            modes.append(Mode(f"harnessgrid bwrap, {label}", "hg", c,
                              lambda ts, c=c: run_harnessgrid(hg, ts, c, sandbox=True)))
            if args.no_recycle:
                modes.append(Mode(f"harnessgrid bwrap no recycling, {label}", "hg", c,
                                  lambda ts, c=c: run_harnessgrid(hg, ts, c, sandbox=True,
                                                                  recycle=False)))
            if args.fresh:
                modes.append(Mode(f"harnessgrid bwrap fresh, {label}", "hg", c,
                                  lambda ts, c=c: run_harnessgrid(hg, ts, c, sandbox=True,
                                                                  pooled=False)))
        modes.append(Mode(f"harnessgrid no sandbox, {label}", "hg", c,
                          lambda ts, c=c: run_harnessgrid(hg, ts, c, sandbox=False)))
    return modes


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=20, help="episodes per mode (default 20)")
    ap.add_argument("--commands", type=int, default=6,
                    help=f"shell commands per episode, cycled from a pool of {len(COMMANDS)} "
                    "(default 6)")
    ap.add_argument("--concurrency", type=int, default=4,
                    help="episodes at once in the concurrent modes (default 4)")
    ap.add_argument("--rounds", "--repeat", type=int, default=5, dest="rounds",
                    help="paired rounds: every mode once per round, interleaved; medians of "
                    "the per-round ratios are printed (default 5)")
    ap.add_argument("--fresh", action="store_true",
                    help="also time harnessgrid with a sandbox started and closed on each "
                    "episode's critical path (no pool)")
    ap.add_argument("--no-recycle", action="store_true",
                    help="also time harnessgrid with a pool that closes each sandbox after its "
                    "episode instead of recycling it (a start per episode)")
    ap.add_argument("--warmup", type=int, default=2,
                    help="untimed episodes per mode before timing (default 2)")
    ap.add_argument("--mini-bwrap", action="store_true",
                    help="also time mini-swe-agent's experimental BubblewrapEnvironment "
                    "(one bwrap process per command)")
    args = ap.parse_args(argv)
    if args.episodes < 1 or args.commands < 2 or args.concurrency < 2 or args.rounds < 1:
        ap.error("--episodes and --rounds must be >= 1, --commands and --concurrency >= 2")

    if shutil.which("python3", path=COMMAND_PATH) and shutil.which("sh", path=COMMAND_PATH):
        os.environ["PATH"] = COMMAND_PATH  # one python3 for every mode (see COMMAND_PATH)
    else:
        print(f"!! no python3 on {COMMAND_PATH}; commands use the caller's PATH, so the "
              "unsandboxed modes may start a different python3 than the sandbox",
              file=sys.stderr)
    from harnessgrid.sandboxing.sandbox import check_bwrap

    warnings.filterwarnings("ignore", message="harnessgrid: running shell commands WITHOUT",
                            category=RuntimeWarning)
    import logging
    logging.getLogger("harnessgrid").setLevel(logging.ERROR)  # the same unsafe-mode notice

    tasks = make_tasks(args.episodes, args.commands)
    mini = MiniSide()
    mini_bwrap = MiniSide(bubblewrap=True) if args.mini_bwrap else None
    hg = HarnessgridSide(max_turns=args.commands + 5)
    bwrap_problem = check_bwrap()
    if bwrap_problem:
        print(f"!! harnessgrid sandbox unavailable, bwrap rows skipped: {bwrap_problem}",
              file=sys.stderr)
    modes = build_modes(args, mini, mini_bwrap, hg, sandbox_ok=bwrap_problem is None)

    import harnessgrid
    print(f"episode throughput: {args.episodes} episodes x {args.commands} commands "
          f"(+ finish), concurrency {args.concurrency}, medians of {args.rounds} paired "
          "rounds")
    print(f"host: {platform.node() or '?'}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, {datetime.date.today().isoformat()}")
    print(f"mini-swe-agent {mini.version} (DefaultAgent + LocalEnvironment + DeterministicModel, "
          f"mini_textbased.yaml); harnessgrid {getattr(harnessgrid, '__version__', '?')} "
          f"({hg.harness.name}, {hg.registry_note}, scripted oracle)")
    print("commands:", "; ".join(tasks[0].commands))
    print(f"python3 for unsandboxed commands: {shutil.which('python3')}; load average before "
          f"start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()

    if args.warmup:
        warm = make_tasks(min(args.warmup, args.episodes), args.commands)
        for mode in modes:
            mode.run(warm)

    # Sequential episodes with one command, to split episode time into fixed + per command.
    short_tasks = make_tasks(args.episodes, 1)
    short = [m for m in modes if m.concurrency == 1 and "fresh" not in m.name]
    rounds: list[dict[str, ModeResult]] = []
    short_walls: list[dict[str, float]] = []
    problems: list[str] = []
    for _ in range(args.rounds):
        round_: dict[str, ModeResult] = {}
        for mode in modes:
            wall, runs = mode.run(tasks)
            round_[mode.name] = ModeResult(mode.name, mode.framework, mode.concurrency, wall, runs)
        walls_1: dict[str, float] = {}
        for mode in short:
            wall, runs = mode.run(short_tasks)
            walls_1[mode.name] = wall
            problems += check(ModeResult(mode.name, mode.framework, 1, wall, runs), short_tasks)
        rounds.append(round_)
        short_walls.append(walls_1)

    results = [rounds[-1][m.name] for m in modes]
    for round_ in rounds:
        for r in round_.values():
            problems += check(r, tasks)
        reference = round_[modes[0].name]  # mini-swe-agent local, sequential
        for m in modes[1:]:
            problems += cross_check(reference, round_[m.name])
    report(rounds, [m.name for m in modes], args)
    report_fixed(rounds, short_walls, [m.name for m in short], args)
    if problems:
        print(f"\nFAILED: {len(problems)} problem(s); the numbers above are not comparable:",
              file=sys.stderr)
        for p in problems[:40]:
            print(f"  - {p}", file=sys.stderr)
        if len(problems) > 40:
            print(f"  ... {len(problems) - 40} more", file=sys.stderr)
        return 1
    total = sum(len(r.runs) for round_ in rounds for r in round_.values())
    print(f"\nverified: {total} episodes in {len(results)} modes x {args.rounds} rounds all "
          f"finished and ran the same {args.commands} commands per task with identical stdout "
          "on both sides")
    return 0


def _median_range(values: Sequence[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def report(rounds: Sequence[dict[str, ModeResult]], names: Sequence[str],
           args: argparse.Namespace) -> None:
    k = args.commands
    mini_name = {r.concurrency: r.name for r in rounds[0].values() if r.framework == "mini"}
    header = (f"{'mode':<42} {'wall s':>7} {'episodes/s':>11} {'ms/command':>11} "
              f"{'vs mini (same conc.), median [range]':>37}")
    print(header)
    print("-" * len(header))
    for name in names:
        rows = [round_[name] for round_ in rounds]
        wall = statistics.median(r.wall_s for r in rows)
        eps = statistics.median(r.eps() for r in rows)
        ms_cmd = wall * 1000 / (len(rows[0].runs) * k)
        base = mini_name[rows[0].concurrency]
        if name == base:
            ratio = "1.00x (reference)"
        else:
            med, low, high = _median_range([round_[base].wall_s / round_[name].wall_s
                                            for round_ in rounds])
            ratio = f"{med:.2f}x [{low:.2f}-{high:.2f}]"
        print(f"{name:<42} {wall:>7.2f} {eps:>11.1f} {ms_cmd:>11.1f} {ratio:>37}")
    print("\nwall and episodes/s: medians over rounds; ratio = episodes/s of the row / episodes/s "
          "of mini-swe-agent local at the same concurrency in the same round (>1: faster), "
          "median over rounds. ms/command = wall time / (episodes x commands), so it includes "
          "per-episode setup and teardown; mini-swe-agent also runs its finish sentinel as a "
          "command, harnessgrid's finish runs nothing.")
    hg_rows = [n for n in names if rounds[0][n].framework == "hg" and rounds[0][n].concurrency == 1]
    if hg_rows:
        print("\nharnessgrid per-episode split, sequential (ms, mean of the last round): "
              "tools = command time as measured by the sandbox, harness = loop + harness "
              "code, other = workspace + sandbox acquisition/start and release/close")
        for name in hg_rows:
            r = rounds[-1][name]
            n = len(r.runs)
            mean = {key: 1000 * sum(x.split.get(key, 0.0) for x in r.runs) / n
                    for key in ("wall_s", "tools_s", "harness_s", "model_s")}
            other = mean["wall_s"] - mean["tools_s"] - mean["harness_s"] - mean["model_s"]
            print(f"  {r.name:<40} episode {mean['wall_s']:7.1f}  tools {mean['tools_s']:7.1f}"
                  f"  harness {mean['harness_s']:6.1f}  policy {mean['model_s']:5.1f}"
                  f"  other {other:7.1f}")


def report_fixed(rounds: Sequence[dict[str, ModeResult]], short_walls: Sequence[dict[str, float]],
                 names: Sequence[str], args: argparse.Namespace) -> None:
    """Fixed cost per episode = intercept of episode time over commands (1 and K), per round."""
    k, n = args.commands, args.episodes
    per_round: list[dict[str, tuple[float, float]]] = []
    for round_, walls_1 in zip(rounds, short_walls, strict=True):
        split = {}
        for name in names:
            e1, ek = walls_1[name] / n, round_[name].wall_s / n
            per_command = (ek - e1) / (k - 1)
            split[name] = (e1 - per_command, per_command)
        per_round.append(split)
    mini = names[0]
    print(f"\nfixed cost per episode and cost per command, sequential, from 1 vs {k} commands "
          "(ms; medians over rounds; ratio vs mini-swe-agent local within each round):")
    for name in names:
        fixed = _median_range([r[name][0] * 1e3 for r in per_round])
        command = statistics.median(r[name][1] * 1e3 for r in per_round)
        line = f"  {name:<40} fixed {fixed[0]:7.2f} [{fixed[1]:.2f}, {fixed[2]:.2f}]"
        line += f"  per command {command:6.2f}"
        if name != mini:
            ratios = [r[name][0] / r[mini][0] for r in per_round if r[mini][0] > 0]
            fixed_ratio = f"{statistics.median(ratios):.2f}x" if ratios else "n/a"
            command_ratio = statistics.median(r[name][1] / r[mini][1] for r in per_round)
            line += f"  fixed {fixed_ratio}, per command {command_ratio:.2f}x"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
