"""Running untrusted task graders (ClawGym ``check.py`` / ``reward.sh``, PinchBench automated
checks) inside the bubblewrap sandbox.

Why a sandbox: external suites ship grading *code*; running it in-process would hand a
downloaded file the host's files, network and credentials. Here each grading run gets a fresh
:class:`~harnessgrid.sandboxing.sandbox.Sandbox` over the runtime's *copy* of the final workspace
(mounted where the agent saw it), a private read-only folder at :data:`GRADING_DIR` holding the
runner script, the transcript and the check code, and — for ClawGym — the task's ``reward/`` folder
read-only at ``<mount>/reward`` (only while grading: the agent never saw it). Whatever goes
wrong (crash, hang, garbage or huge output, a score outside [0, 1], no sandbox at all) becomes
a :class:`~harnessgrid.tasks.GraderError` with a message saying what, never a crash and never a
silent 0. The runtime calls graders synchronously in a worker thread, so this uses the
sandbox's sync API.

The grading sandbox makes the choices of the episode it grades, which the grader is told
(:class:`~harnessgrid.tasks.GradingContext`, through ``grade_in``): the episode's
environment is mounted (its python runs the checks), and it runs unsandboxed only when the
episode did. Graded outside an episode (``grade``), it is sandboxed, with no environment.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessgrid.errors import HarnessgridError
from harnessgrid.sandboxing.scratch import scratch_dir
from harnessgrid.tasks import GraderError, GradingContext, Scores, validate_scores

if TYPE_CHECKING:  # imported where used: loading the suite plugins must stay cheap
    from harnessgrid.sandboxing.environments import EnvironmentRecord
    from harnessgrid.sandboxing.sandbox import CommandResult, SandboxLimits

GRADING_DIR = "/tmp/.harnessgrid-grading"
"""Where the runner, transcript and check code appear inside the grading sandbox (read-only)."""
TRANSCRIPT_ENV = "HARNESSGRID_TRANSCRIPT"
"""Environment variable naming the transcript (JSONL session events) for ``reward.sh``."""
_ERROR_TAIL = 600

RUNNER_SOURCE = r'''"""harnessgrid grading runner: import CHECK, call grade(transcript, workspace_path), print
the result as one JSON line. Anything the check prints goes to stderr, so stdout holds only the
result. A check without grade() is run as a script (python3 check.py WORKSPACE) instead."""
import importlib.util, json, os, runpy, sys

check, transcript_path, workspace = sys.argv[1:4]
with open(transcript_path, encoding="utf-8") as fh:
    transcript = [json.loads(line) for line in fh if line.strip()]
sys.path.insert(0, os.path.dirname(check))
result_fd = os.dup(1)
os.dup2(2, 1)
spec = importlib.util.spec_from_file_location("check", check)
module = importlib.util.module_from_spec(spec)
sys.modules["check"] = module
spec.loader.exec_module(module)
grade = getattr(module, "grade", None)
if not callable(grade):
    os.dup2(result_fd, 1)
    sys.argv = [check, workspace]
    runpy.run_path(check, run_name="__main__")
    sys.exit(0)


def number(value):
    try:
        return float(value)
    except Exception:
        return repr(value)[:200]


line = json.dumps(grade(transcript, workspace), default=number)
os.write(result_fd, (line + "\n").encode())
'''


@dataclass(frozen=True)
class GradingLimits:
    """What one grading run may use. ``timeout_s`` bounds the whole run (the runtime's own
    grader timeout, default 120 s, should be larger); output over ``output_bytes`` is an error."""

    timeout_s: float = 60.0
    memory_mb: int = 2048
    output_bytes: int = 256_000

    def sandbox(self) -> SandboxLimits:
        from harnessgrid.sandboxing.sandbox import SandboxLimits

        return SandboxLimits(wall_s=self.timeout_s, cpu_s=max(1, math.ceil(self.timeout_s)),
                             memory_mb=self.memory_mb, max_procs=128,
                             output_bytes=self.output_bytes, tmp_mb=128)


def run_in_sandbox(workspace_root: Path, mount_path: str, command: str, *,
                   files: Mapping[str, str], transcript: list[dict[str, Any]],
                   context: GradingContext,
                   reward_dir: Path | None = None,
                   limits: GradingLimits | None = None) -> CommandResult:
    """Run ``command`` (cwd = the workspace) in a fresh sandbox over ``workspace_root``, with
    the environment and sandbox choice of ``context`` (the graded episode's).

    ``runner.py``, ``files`` (name → text) and ``transcript.jsonl`` are placed in
    :data:`GRADING_DIR`; ``reward_dir`` is copied (links kept as links, never followed) and mounted read-only at
    ``<mount_path>/reward``, replacing whatever the agent left there (the workspace is a copy).
    """
    from harnessgrid.sandboxing.sandbox import Sandbox
    from harnessgrid.sandboxing.workspace import Workspace
    from harnessgrid.trajectory import dumps_transcript

    limits = limits or GradingLimits()
    with scratch_dir("hg-grading-") as tmp:
        host = tmp / "grading"
        host.mkdir()
        payload = {"runner.py": RUNNER_SOURCE, **files,
                   "transcript.jsonl": dumps_transcript(transcript)}
        for name, text in payload.items():
            (host / name).write_text(text, encoding="utf-8")
        binds = {host: GRADING_DIR}
        if reward_dir is not None:
            reward_copy = Path(tmp) / "reward"
            shutil.copytree(reward_dir, reward_copy, symlinks=True)
            binds[reward_copy] = f"{mount_path.rstrip('/')}/reward"
            _remove(workspace_root / "reward")
        _open_up(Path(tmp))
        env = {TRANSCRIPT_ENV: f"{GRADING_DIR}/transcript.jsonl"}
        try:
            ws = Workspace(workspace_root, mount_path=mount_path, owned=False)
            with Sandbox(ws, limits.sandbox(), extra_ro_binds=binds,
                         environment=context.environment,
                         unsafe_no_sandbox=context.unsafe_no_sandbox) as sandbox:
                return sandbox.run_sync(command, timeout_s=limits.timeout_s, env=env)
        except HarnessgridError as exc:  # no bwrap, bad mount path, sandbox died
            raise GraderError(f"cannot run the grader in the sandbox: {exc.message}"
                              + (f" ({exc.hint})" if exc.hint else "")) from exc


def runner_command(check_path: str, mount_path: str,
                   environment: EnvironmentRecord | None) -> str:
    """Shell command running the grading runner on ``check_path`` with the server's own
    interpreter (always present in the sandbox, read-only): ``-I`` ignores PYTHON* variables
    and the user site, ``-B`` writes no bytecode. With a venv ``environment`` (the graded
    episode's), that environment's python, so checks can import what it holds (pandas for
    ClawGym)."""
    python = (environment.python_executable if environment is not None else None) \
        or os.path.realpath(sys.executable)
    return " ".join(shlex.quote(p) for p in (python, "-I", "-B", f"{GRADING_DIR}/runner.py",
                                        check_path, f"{GRADING_DIR}/transcript.jsonl",
                                        mount_path))


def scores_from(result: CommandResult, what: str) -> dict[str, float]:
    """The sub-scores a check printed as its last stdout line (a JSON object)."""
    line = _last_line(_checked(result, what), what)
    try:
        value = json.loads(line)
    except ValueError:
        raise GraderError(f"{what} printed no JSON scores: last stdout line is "
                          f"{line[:200]!r}") from None
    try:
        return validate_scores(value)
    except GraderError as exc:
        raise GraderError(f"{what}: {exc}") from None


def numeric_scores(value: Any, what: str) -> Scores:
    """PinchBench's rule for a check's dict: sub-scores that are not numbers (a string, a
    list, null) are skipped, each with a warning, as upstream's average skips them; numbers
    must still lie in [0, 1]. A dict with no number left is a :class:`GraderError` (upstream
    scores it 0; here it is ungraded, never a silent 0)."""
    if not isinstance(value, dict) or not value:
        raise GraderError(f"{what} must return a non-empty dict of sub-scores, got "
                          f"{value!r:.200}")
    kept = {str(k): v for k, v in value.items() if _is_number(v)}
    warnings = [f"{what}: sub-score {k!r} = {v!r:.80} is not a number; skipped"
                for k, v in value.items() if not _is_number(v)]
    if not kept:
        raise GraderError(f"{what}: no sub-score is a number ({', '.join(map(str, value))})")
    try:
        return validate_scores(Scores(kept, warnings=warnings))
    except GraderError as exc:
        raise GraderError(f"{what}: {exc}") from None


def check_output_scores(result: CommandResult, what: str) -> Scores:
    """The scores a ClawGym ``check.py`` reports (through ``grade()`` or as a script).

    The output is the last JSON value on stdout (a one-line dict, an indented dict printed
    last, or a bare number). A number is the reward. A dict whose ``reward`` is a number in
    [0, 1] is scored by that reward — the check's own weighting — and its other entries that
    are numbers in [0, 1] are kept as sub-scores, the rest (counts, notes, nested details)
    skipped with a warning. A dict without ``reward`` is scored by the mean of its entries,
    which must all be numbers in [0, 1] (what ClawGym's ``reward.sh`` computes)."""
    value = _last_json(_checked(result, what), what)
    if _is_number(value):
        return validate_scores(Scores({"reward": value}))
    if isinstance(value, dict) and _is_number(value.get("reward")) \
            and 0.0 <= float(value["reward"]) <= 1.0:
        kept = {str(k): float(v) for k, v in value.items()
                if _is_number(v) and 0.0 <= float(v) <= 1.0}
        warnings = [f"{what}: {k!r} = {v!r:.80} is not a sub-score in [0, 1]; kept out "
                    "(the check's own reward scores the task)"
                    for k, v in value.items() if str(k) not in kept]
        return validate_scores(Scores(kept, total=float(value["reward"]), warnings=warnings))
    try:
        return validate_scores(value)
    except GraderError as exc:
        raise GraderError(f"{what}: {exc}") from None


def printed_value(result: CommandResult, what: str) -> Any:
    """The JSON value a check printed last (a :class:`GraderError` for a failed run)."""
    return _last_json(_checked(result, what), what)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(float(value))


def _last_json(stdout: str, what: str) -> Any:
    """The JSON value that ends ``stdout``: the shortest tail of whole lines that parses
    (a one-line value, or an indented dict printed last after other output)."""
    text = stdout.strip()
    if not text:
        raise GraderError(f"{what} printed nothing on stdout")
    lines = text.splitlines()
    for start in range(len(lines) - 1, -1, -1):
        head = lines[start].lstrip()[:1]
        if head and (head in '{["-tfnN' or head.isdigit()):
            try:
                return json.loads("\n".join(lines[start:]))
            except ValueError:
                continue
    raise GraderError(f"{what} printed no JSON scores: last stdout line is "
                      f"{lines[-1].strip()[:200]!r}")


def reward_from(result: CommandResult, what: str) -> float:
    """The score a ``reward.sh`` printed as its last stdout line (a float in [0, 1])."""
    line = _last_line(_checked(result, what), what)
    try:
        value = float(line)
    except ValueError:
        raise GraderError(f"{what}: last stdout line {line[:200]!r} is not a number") from None
    if not 0.0 <= value <= 1.0:  # NaN fails this too
        raise GraderError(f"{what}: reward {value!r} is outside [0, 1]")
    return value


def _checked(result: CommandResult, what: str) -> str:
    """stdout of a run that completed normally; otherwise a GraderError saying what happened:
    the sandbox's own note for a kill, the last stderr line (the exception) for a failure."""
    notes = [line for line in result.stderr.splitlines() if line.startswith("[sandbox]")]
    said = f": {' '.join(notes)}" if notes else ""
    if result.timed_out:
        raise GraderError(f"{what} timed out{said}")
    if result.killed is not None:
        raise GraderError(f"{what} was killed by the sandbox ({result.killed}){said}")
    if result.truncated:
        raise GraderError(f"{what} printed more than the grading cap of output{said}")
    if result.exit_code != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        last = f": {lines[-1].strip()[:300]}" if lines else ""
        raise GraderError(f"{what} failed with exit code {result.exit_code}{last}"
                          + _tail(result.stderr))
    return result.stdout


def _last_line(stdout: str, what: str) -> str:
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise GraderError(f"{what} printed nothing on stdout")
    return lines[-1]


def _tail(stderr: str) -> str:
    text = stderr.strip()
    if "\n" not in text:
        return ""
    cut = "…" + text[-_ERROR_TAIL:] if len(text) > _ERROR_TAIL else text
    return f"\n--- stderr (end) ---\n{cut}"


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _open_up(top: Path) -> None:
    """Make the grading files readable to the sandbox's unprivileged uid (temp dirs are 0700).
    ``os.walk`` does not descend into linked directories, and links themselves are skipped."""
    for root, _dirs, names in os.walk(top):
        os.chmod(root, 0o755)
        for name in names:
            path = Path(root) / name
            if not path.is_symlink():
                os.chmod(path, 0o755 if os.access(path, os.X_OK) else 0o644)
