"""``pinchbench:PATH`` — task suites in PinchBench's markdown format.

Each ``task_*.md`` holds YAML front matter (``id``, ``name``, ``category``,
``grading_type: automated|llm_judge|hybrid``, ``timeout_seconds``, ``workspace_files``) and
sections ``## Prompt``, ``## Expected Behavior``, ``## Grading Criteria``, ``## Automated
Checks`` (python defining ``grade(transcript, workspace_path)``) and ``## LLM Judge Rubric``.
Real files vary, so the parser (:mod:`._pinchbench_format`) is tolerant: front matter with or
without ``---`` fences; ``---`` rules between sections and extra sections (kept in metadata);
checks as a fenced python block or bare code; rubric criteria as ``### Criterion N: title
(Weight: P%)``. ``workspace_files`` entries are a bare name (from a folder named after the
task beside the ``.md``) or ``{source, dest}`` (``source`` relative to the asset folder,
option ``assets=``; default ``PATH/assets``, or the repository's ``assets/`` when PATH is its
``tasks/``). Files are confined to the suite's folders, so a task file cannot copy host files
into a workspace (and on to a model provider).

Grading: automated checks run sandboxed (:mod:`._sandboxed_grader`); the LLM judge
(:mod:`._judge`) is opt-in (``judge=MODEL``, plus ``judge_api_base``, ``judge_api_key``,
``judge_timeout_s``). As upstream's grader does: the automated part is the mean of the
check's numeric sub-scores (a sub-score that is not a number is skipped, with a warning in the
trajectory's ``meta["grade_warnings"]``); hybrid = the automated part and the judge's weighted
score combined by the task's ``grading_weights`` (``{automated, llm_judge}``, normalised by
their sum; 0.5/0.5 when absent or when they sum to 0), with sub-scores ``automated`` and
``llm_judge``. Without a judge, ``llm_judge`` tasks are *ungraded* (a ``GraderError`` starting
with ``ungraded:``) and hybrid tasks are graded on their automated part only: their result
says ``grading: automated_only`` with the judge's share that was not assessed, and is never a
pass (the unassessed part could have failed it). ``Task.metadata["graded_as"]`` says which
before any episode, so tools can count both.

One bad task file never takes the suite down: a task that cannot be built (a missing
workspace file, malformed front matter, no prompt) is a broken task of the suite
(:attr:`TaskSuite.broken`), reported with its reason by ``tasks list``/``validate`` and
evaluation reports, and the other tasks load, show and run.

Multi-session tasks (a ``sessions`` list in the front matter, each a prompt sent as a further
user message in the same workspace) load with the first prompt as the instruction and the
others as :attr:`Task.followups`; :func:`harnessgrid.engine.runtime.run_task_episode` (what
``harnessgrid run --task`` uses) sends them one after another and grades once at the end, as
upstream's runner does. The grader scores only an episode whose transcript holds every
session's prompt, so a runner that sends the first alone gets an ``ungraded:`` grade error,
never a score for part of the task.

Tasks declare the ``pinchbench`` environment (python, pandas, openpyxl: see
:data:`harnessgrid.sandboxing.environments.BUILTIN_REQUIREMENTS`). A file named unlike the id it
declares (upstream's ``task_18_market_research.md`` declares ``task_16_market_research``) is found
by either: the id names the task in results, the file name is an alias (:attr:`TaskSuite.aliases`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harnessgrid import hookimpl
from harnessgrid.errors import ConfigError
from harnessgrid.registrations import TaskSuiteSpec
from harnessgrid.suites import load_each, suite_name, suite_path
from harnessgrid.tasks import (
    BrokenTask,
    GraderError,
    GradingContext,
    Scores,
    Task,
    TaskLimits,
    TaskSuite,
)

from ._clawgym_export import NotExportable, write_reward
from ._judge import Criterion, JudgeContext, LiteLLMJudge, judge_score
from ._pinchbench_format import (
    SessionPrompt,
    check_code,
    parse_rubric,
    parse_task_file,
    session_prompts,
)
from ._sandboxed_grader import (
    GRADING_DIR,
    GradingLimits,
    numeric_scores,
    printed_value,
    run_in_sandbox,
    runner_command,
)

__all__ = ["PinchBenchGrader", "load", "load_task", "parse_rubric", "parse_task_file"]

DEFAULT_MOUNT = "/root/.openclaw/workspace"
ENVIRONMENT = "pinchbench"
"""The environment PinchBench tasks declare: upstream runs them on a machine with python,
pandas and openpyxl (its spreadsheet tasks hand the agent ``.xlsx`` files); see
:data:`harnessgrid.sandboxing.environments.BUILTIN_REQUIREMENTS`."""
GRADING_TYPES = ("automated", "llm_judge", "hybrid")
_OPTIONS = {"assets", "judge", "judge_api_base", "judge_api_key", "judge_timeout_s",
            "mount_path", "split", "grader_timeout_s"}


class PinchBenchGrader:
    """Automated checks (sandboxed), the LLM judge, or both, per the task's grading type."""

    def __init__(self, task_id: str, grading_type: str, code: str | None, problem: str | None,
                 criteria: list[Criterion], context: JudgeContext, mount_path: str,
                 judge: LiteLLMJudge | None, limits: GradingLimits | None = None,
                 weights: tuple[float, float] = (0.5, 0.5),
                 followups: tuple[str, ...] = ()) -> None:
        self.task_id = task_id
        self.followups = followups
        self.grading_type = grading_type
        self.code = code
        self.problem = problem
        self.criteria = criteria
        self.context = context
        self.mount_path = mount_path
        self.judge = judge
        self.limits = limits or GradingLimits()
        self.weights = weights

    @property
    def graded_as(self) -> str:
        """``automated``, ``llm_judge``, ``hybrid``, ``automated_only`` (hybrid without a
        judge) or ``ungraded`` (judge-only without a judge)."""
        if self.grading_type == "automated":
            return "automated"
        if self.judge is not None:
            return self.grading_type
        return "automated_only" if self.grading_type == "hybrid" and self.code else "ungraded"

    def check_ready(self) -> None:
        """Before any episode (``run``, ``eval``): a judge this task uses must have its key."""
        if self.judge is not None and self.grading_type != "automated":
            self.judge.check_credentials()

    def grade(self, workspace: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        """Graded outside an episode: the automated checks sandboxed, with no environment."""
        return self.grade_in(workspace, transcript, GradingContext())

    def grade_in(self, workspace: Path, transcript: list[dict[str, Any]],
                 context: GradingContext) -> dict[str, float]:
        """Graded for an episode: the automated checks run in its environment, sandboxed
        unless it was not."""
        self._require_every_session(transcript)
        uses_code = self.grading_type in ("automated", "hybrid")
        if self.problem and uses_code:
            raise GraderError(f"task {self.task_id}: {self.problem}")
        if self.graded_as == "ungraded":
            raise GraderError(f"ungraded: {self.grading_type} task and no judge given "
                              "(pass --judge MODEL, or judge=MODEL to the loader)")
        auto = self._automated(workspace, transcript, context) if uses_code and self.code \
            else None
        if self.judge is None or self.grading_type == "automated":
            assert auto is not None
            auto.grading = self.graded_as
            if self.graded_as == "automated_only":
                auto.partial = self._unjudged_share()
            return auto
        if not self.criteria:
            raise GraderError(f"task {self.task_id}: no rubric criteria for the judge")
        judged = judge_score(self.judge, self.criteria, self.context, workspace, transcript)
        if auto is None:
            return Scores({"llm_judge": judged}, grading="judge")
        automated = sum(auto.values()) / len(auto)
        w_auto, w_judge = self.weights
        return Scores({"automated": automated, "llm_judge": judged},
                      total=(automated * w_auto + judged * w_judge) / (w_auto + w_judge),
                      warnings=auto.warnings, grading="hybrid")

    def _unjudged_share(self) -> str:
        """Why a hybrid graded without its judge is no pass: the share it could have lost."""
        w_auto, w_judge = self.weights
        share = round(100 * w_judge / (w_auto + w_judge))
        return (f"automated part only: no judge configured, so the judge's {share}% of the "
                "rubric was not assessed (pass --judge MODEL)")

    def _require_every_session(self, transcript: list[dict[str, Any]]) -> None:
        """A multi-session task is graded only on an episode that sent every session: a runner
        that sent the first prompt alone (plain ``run_episode``) would otherwise score a part
        of the task as the whole."""
        sent = 1 + sessions_sent(self.followups, transcript)
        total = 1 + len(self.followups)
        if sent < total:
            raise GraderError(f"ungraded: the episode sent {sent} of its {total} sessions "
                              f"(task {self.task_id} is multi-session); run it with "
                              "harnessgrid.engine.runtime.run_task_episode, which sends each "
                              "session's prompt as a follow-up")

    def _automated(self, workspace: Path, transcript: list[dict[str, Any]],
                   context: GradingContext) -> Scores:
        assert self.code is not None
        command = runner_command(f"{GRADING_DIR}/check.py", self.mount_path, context.environment)
        result = run_in_sandbox(workspace, self.mount_path, command,
                                files={"check.py": self.code}, transcript=transcript,
                                context=context, limits=self.limits)
        what = "automated checks"
        return numeric_scores(printed_value(result, what), what)

    def sources(self) -> dict[str, str]:
        """The automated checks as a file (``harnessgrid env check`` reads their imports)."""
        return {"check.py": self.code} if self.code else {}

    def export_reward(self, dest: Path) -> None:
        """Automated-only tasks become a ClawGym ``check.py``; judged ones have no such form."""
        if self.grading_type != "automated" or self.code is None:
            raise NotExportable(f"{self.grading_type} grading needs an LLM judge, which a "
                                "check.py cannot express")
        write_reward(dest, self.code)


def sessions_sent(followups: tuple[str, ...], transcript: list[dict[str, Any]]) -> int:
    """How many of ``followups`` the transcript's user messages hold, in order (a harness may
    wrap a message, e.g. with a timestamp, so each is looked for inside one)."""
    said = iter(_user_texts(transcript))
    count = 0
    for message in followups:
        wanted = " ".join(message.split())
        if not any(wanted in text for text in said):
            break
        count += 1
    return count


def _user_texts(transcript: list[dict[str, Any]]) -> list[str]:
    """The text of each user message of OpenClaw-style session events, whitespace-folded."""
    texts = []
    for event in transcript:
        message = event.get("message") if isinstance(event, dict) else None
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        parts = content if isinstance(content, list) else [{"text": content}]
        text = " ".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))
        texts.append(" ".join(text.split()))
    return texts


def load(argument: str | None = None, **options: Any) -> TaskSuite:
    """The suite at ``argument``: a folder of ``task_*.md`` (or its ``tasks/``), or one file."""
    root = suite_path("pinchbench", argument, options, _OPTIONS)
    if root.is_file():
        files, base = [root], root.parent
    elif root.is_dir():
        base = root / "tasks" if not any(root.glob("task_*.md")) and (root / "tasks").is_dir() \
            else root
        files = sorted(base.glob("task_*.md"))
    else:
        raise ConfigError(f"pinchbench path {argument!r} does not exist",
                          hint="point pinchbench:PATH at a folder of task_*.md files")
    if not files:
        raise ConfigError(f"no task_*.md files in {argument!r}",
                          hint="PinchBench tasks are markdown files named task_*.md")
    split = str(options.pop("split", "eval"))
    if split not in ("train", "eval"):
        raise ConfigError(f"split {split!r} is not train or eval", hint="pass split=train|eval")
    suite_root = base.parent if base.name == "tasks" else base
    assets = _assets_dir(options.pop("assets", None), suite_root, base)
    judge = None
    if options.get("judge"):
        judge = LiteLLMJudge(str(options["judge"]), api_base=options.get("judge_api_base"),
                             api_key=options.get("judge_api_key"),
                             timeout_s=float(options.get("judge_timeout_s", 60.0)))
    name = suite_name("pinchbench", str(argument))
    mount_path = str(options.get("mount_path", DEFAULT_MOUNT))
    grader_timeout_s = float(options.get("grader_timeout_s", 60.0))
    tasks, broken = load_each(
        files, lambda f: load_task(f, assets=assets, root=suite_root, judge=judge, suite=name,
                                   mount_path=mount_path, grader_timeout_s=grader_timeout_s),
        _task_id)
    ids = [t.id for t in tasks] + [b.id for b in broken]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ConfigError(f"task ids used by more than one file: {', '.join(dupes)}")
    return TaskSuite(name=name, splits={split: tuple(tasks)}, broken=tuple(broken),
                     aliases=_file_aliases(tasks, broken))


def _file_aliases(tasks: list[Task], broken: list[BrokenTask]) -> dict[str, str]:
    """File name -> declared id, where they differ. Upstream files do (task_18_market_research.md
    declares task_16_market_research): the id names the task in results, and the name people
    see in the folder still finds it. A file name that is another task's id stays that id."""
    sources = [(str(t.metadata["source"]), t.id) for t in tasks]
    sources += [(b.source, b.id) for b in broken]
    ids = {task_id for _, task_id in sources}
    aliases = {Path(source).stem: task_id for source, task_id in sources}
    return {stem: task_id for stem, task_id in aliases.items()
            if stem != task_id and stem not in ids}


def _task_id(path: Path) -> str:
    """The id a task file declares, for naming it when it is broken (its stem if even the
    front matter does not read)."""
    try:
        return str(parse_task_file(path).front.get("id") or path.stem)
    except (ConfigError, OSError, UnicodeDecodeError):
        return path.stem


def _assets_dir(option: Any, suite_root: Path, base: Path) -> Path:
    if option:
        path = Path(str(option)).expanduser().resolve()
        if not path.is_dir():
            raise ConfigError(f"assets folder {str(option)!r} does not exist",
                              hint="pass assets=DIR, the folder workspace_files sources are in")
        return path
    for candidate in (base / "assets", suite_root / "assets"):
        if candidate.is_dir():
            return candidate
    return suite_root


def load_task(path: Path, *, assets: Path, root: Path | None = None,
              judge: LiteLLMJudge | None = None, suite: str = "",
              mount_path: str = DEFAULT_MOUNT, grader_timeout_s: float = 60.0) -> Task:
    """One ``task_*.md`` as a :class:`Task`; its workspace files must lie in ``root`` (the
    suite's folder, default the file's) or ``assets``."""
    parsed = parse_task_file(path)
    front, sections = parsed.front, parsed.sections
    task_id = str(front.get("id") or path.stem)
    sessions = session_prompts(front, path)
    prompt = sessions[0].prompt if sessions else sections.get("prompt", "").strip()
    if not prompt:
        raise ConfigError(f"{path}: no '## Prompt' section (or it is empty)",
                          hint="the prompt is what the agent is asked to do")
    followups = tuple(s.prompt for s in sessions[1:])
    checks = sections.get("checks", "")
    code = check_code(checks) if checks.strip() else None
    grading_type = str(front.get("grading_type") or ("automated" if code else "llm_judge"))
    grading_type = grading_type.strip().lower()
    if grading_type not in GRADING_TYPES:
        raise ConfigError(f"{path}: grading_type {grading_type!r} is not one of "
                          f"{', '.join(GRADING_TYPES)}")
    problem = None
    if grading_type in ("automated", "hybrid") and code is None:
        problem = ("its '## Automated Checks' define no grade(transcript, workspace_path)"
                   if checks.strip() else "it has no '## Automated Checks' section")
    criteria = parse_rubric(sections.get("rubric", ""), sections.get("criteria", ""))
    grader = PinchBenchGrader(
        task_id, grading_type, code, problem, criteria,
        JudgeContext(prompt=_judged_prompt(prompt, sessions),
                     expected=sections.get("expected", "")), mount_path, judge,
        GradingLimits(timeout_s=grader_timeout_s), _weights(front.get("grading_weights"), path),
        followups)
    return Task(
        id=task_id, instruction=prompt, files=_workspace_files(front, path, task_id, assets,
                                                                      root or path.parent),
        grader=grader, category=str(front.get("category") or "general"),
        limits=TaskLimits(wall_s=_timeout(front.get("timeout_seconds"), path)),
        mount_path=mount_path, suite=suite, followups=followups, environment=ENVIRONMENT,
        metadata={"name": str(front.get("name") or task_id), "grading_type": grading_type,
                  "sessions": [{"id": s.id, "new_session": s.new_session} for s in sessions],
                  "graded_as": grader.graded_as, "judge": judge.model if judge else None,
                  "grading_weights": {"automated": grader.weights[0],
                                      "llm_judge": grader.weights[1]},
                  "expected_behavior": sections.get("expected", ""),
                  "criteria": [{"number": c.number, "title": c.title, "weight": c.weight}
                               for c in criteria],
                  "extra_sections": parsed.extra, "source": str(path)})


def _judged_prompt(prompt: str, sessions: list[SessionPrompt]) -> str:
    """What the judge is told the user asked: the prompt, or every session's in order (the
    ``## Prompt`` of a multi-session task is only a pointer to them)."""
    if not sessions:
        return prompt
    return "\n\n".join(f"Session {n} ({s.id}):\n{s.prompt}" for n, s in enumerate(sessions, 1))


def _weights(value: Any, path: Path) -> tuple[float, float]:
    """``grading_weights`` as upstream reads them: ``automated`` and ``llm_judge``, each 0.5
    when missing, both 0.5 when they sum to 0 or less."""
    if value is None:
        return 0.5, 0.5
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: grading_weights must map automated/llm_judge to numbers, "
                          f"got {value!r:.80}")
    try:
        auto, judge = float(value.get("automated", 0.5)), float(value.get("llm_judge", 0.5))
    except (TypeError, ValueError):
        raise ConfigError(f"{path}: grading_weights {value!r:.80} are not numbers") from None
    if auto < 0 or judge < 0:
        raise ConfigError(f"{path}: grading_weights {value!r:.80} must not be negative")
    return (0.5, 0.5) if auto + judge <= 0 else (auto, judge)


def _timeout(value: Any, path: Path) -> float | None:
    if value is None or value == "":
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{path}: timeout_seconds {value!r} is not a number") from None
    if seconds <= 0:
        raise ConfigError(f"{path}: timeout_seconds {value!r} must be positive")
    return seconds


def _workspace_files(front: dict[str, Any], path: Path, task_id: str, assets: Path,
                     root: Path) -> dict[str, str | bytes]:
    entries = front.get("workspace_files") or []
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: workspace_files must be a list, got {entries!r:.80}")
    task_dirs = [path.parent / path.stem, path.parent / task_id]
    files: dict[str, str | bytes] = {}
    for entry in entries:
        if isinstance(entry, str):
            dest, places = entry, [d / entry for d in task_dirs] + [assets / entry]
        elif isinstance(entry, dict) and "content" in entry:
            dest = str(entry.get("dest") or entry.get("path") or "")
            files[_dest(dest, path)] = str(entry["content"])
            continue
        elif isinstance(entry, dict) and entry.get("source"):
            source = str(entry["source"])
            dest = str(entry.get("dest") or os.path.basename(source))
            places = [assets / source, root / source, path.parent / source]
        else:
            raise ConfigError(f"{path}: workspace_files entry {entry!r:.80} is neither a file "
                              "name nor {source, dest}")
        found = next((p for p in places if p.is_file()), None)
        if found is None:
            raise ConfigError(f"{path}: workspace file {entry!r:.80} not found",
                              hint="looked in " + ", ".join(str(p) for p in places)
                              + "; pass assets=DIR for {source, dest} entries")
        if not (_inside(found, root) or _inside(found, assets)):
            raise ConfigError(f"{path}: workspace file {entry!r:.80} resolves outside the "
                              f"suite's folders ({found.resolve()})")
        files[_dest(dest, path)] = found.read_bytes()
    return files


def _dest(dest: str, path: Path) -> str:
    parts = [p for p in dest.split("/") if p not in ("", ".")]
    if not parts or dest.startswith("/") or ".." in parts:
        raise ConfigError(f"{path}: workspace file destination {dest!r} must be a relative "
                          "path inside the workspace")
    return "/".join(parts)


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


@hookimpl
def harnessgrid_task_suites() -> Iterator[TaskSuiteSpec]:
    yield TaskSuiteSpec(
        name="pinchbench", load=load, takes_argument=True,
        description="Tasks in PinchBench's markdown format (task_*.md); automated checks run "
                    "sandboxed, LLM-judge grading with judge=MODEL. Address: pinchbench:PATH.")
