"""The demo's stages and their records: each stage (the model, the shared warm start, a run's
GRPO, an evaluation) records the parameters that made it and how long it took
(``STAGE.stage.json`` beside its folder), so a re-run reuses a finished stage with the same
parameters, resumes an unfinished one, and redoes - saying which and why - one made with other
parameters, together with every stage built on it (see :mod:`harnessgrid.trainer.demo`).

:class:`Stages` is what the stages run (the model build, the project's trainer and its
evaluator); a test passes a fake one to check the bookkeeping without training a model.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STAGE_RECORD = ".stage.json"  # suffix of a stage's record, beside its folder


#: The default profiles' warm start, shipped in the package: trained by ``harnessgrid demo``
#: itself (``recipe.json`` says when, where, with which parameters - the stage's fingerprint -
#: and the SHA-256 of each file). The demo installs it instead of training it when its warm
#: start's parameters are those (``--train-warm-start`` trains it anyway), which saves the
#: default's longest serial stage.
SHIPPED_WARM_START = Path(__file__).with_name("demo_warm_start")


class Stages:
    """What the stages run: the micro model's build, the project's trainer and its evaluator.

    The (condition, seed) runs happen in worker processes, so an instance must pickle. A test
    passes a fake one to check the bookkeeping around the stages (records, reuse, redo, times)
    without training a model."""

    #: where the shipped warm start is (an attribute, so a test's instance can point
    #: elsewhere and the worker processes it is sent to see the same)
    warm_start_dir: Path = SHIPPED_WARM_START

    def shipped_warm_start(self, fingerprint: str) -> Path | None:
        """The shipped warm start's folder when it was made with the parameters
        ``fingerprint`` stands for (None otherwise); a shipped file that does not match its
        checksum stops the demo (a damaged install, not a reason to train silently)."""
        from harnessgrid.errors import ConfigError
        from harnessgrid.paths import files_not_as_recorded

        try:
            recipe = json.loads((self.warm_start_dir / "recipe.json").read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(recipe, dict) or recipe.get("fingerprint") != fingerprint:
            return None
        if wrong := files_not_as_recorded(self.warm_start_dir, recipe["sha256"]):
            raise ConfigError(f"the shipped warm start in {self.warm_start_dir} is damaged "
                              f"({', '.join(wrong)} missing or not as its recipe.json says)",
                              hint="reinstall harnessgrid, or pass --train-warm-start")
        return self.warm_start_dir

    def build_model(self, path: Path) -> Path:
        """The demo's model in ``path``: the shipped micro base (``tiny:micro-base``), copied
        and checked against its checksums (an existing verified copy is reused)."""
        from harnessgrid.trainer.micro_plugin import micro_plugin

        return Path(micro_plugin().micro_base(path))

    def model_parameters(self, path: Path) -> int:
        from safetensors import safe_open

        total = 0
        with safe_open(str(path / "model.safetensors"), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                n = 1
                for d in f.get_slice(name).get_shape():
                    n *= d
                total += n
        return total

    def prepare_worker(self) -> None:
        """One CPU thread per run, and no library progress bars burying the demo's lines."""
        import torch

        torch.set_num_threads(1)
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        quiet_libraries()

    def train(self, config: Any, *, resume: bool,
              on_log: Callable[[int, dict[str, float]], None] | None = None) -> None:
        from harnessgrid.trainer.run import train

        train(config, resume=resume, on_log=on_log)

    def install(self, shipped: Path, final: Path, upstream: Path) -> None:
        """A shipped model into ``final``, atomically (a folder beside it, renamed): the files
        of ``upstream`` (the model it was trained from, which the shipped folder does not
        repeat - the tokenizer, the chat template), then the shipped ones over them."""
        partial = final.with_name(final.name + ".partial")
        if partial.exists():
            shutil.rmtree(partial)
        partial.mkdir(parents=True)
        for folder in (upstream, shipped):
            for path in folder.iterdir():
                if path.is_file() and path.name != "recipe.json":
                    shutil.copyfile(path, partial / path.name)
        if final.exists():
            shutil.rmtree(final)
        partial.rename(final)

    def evaluate(self, config: Any, out: Path) -> dict[str, Any]:
        """Evaluate (or read a finished evaluation) into ``out``: per harness address, each
        task's pass (1/0) and the harness's well-formed turns (``[accepted, turns]``)."""
        from harnessgrid.evaluation.run import evaluate

        outcome = evaluate(config, out)
        passed: dict[str, dict[str, float]] = {}
        formed: dict[str, list[int]] = {}
        for r in outcome.results:
            if not r.scored:
                continue
            passed.setdefault(r.harness, {})[r.task] = 1.0 if r.passed else 0.0
            ok, turns = well_formed_turns(out, r)
            counts = formed.setdefault(r.harness, [0, 0])
            counts[0] += ok
            counts[1] += turns
        return {"passed": passed, "well_formed": formed}


def stage_fingerprint(params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]


def stage_record(directory: Path) -> dict[str, Any] | None:
    """What ``directory``'s stage recorded (``None``: nothing readable)."""
    try:
        data = json.loads(directory.with_name(directory.name + STAGE_RECORD).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_record(directory: Path, record: dict[str, Any]) -> None:
    directory.parent.mkdir(parents=True, exist_ok=True)
    _write(directory.with_name(directory.name + STAGE_RECORD),
           json.dumps(record, indent=2) + "\n")


def _wipe(directory: Path) -> None:
    if directory.is_dir() and not directory.is_symlink():
        shutil.rmtree(directory)
    else:
        directory.unlink(missing_ok=True)
    directory.with_name(directory.name + STAGE_RECORD).unlink(missing_ok=True)


@dataclass
class StageRun:
    """One stage of one run and what this invocation does with it: ``reuse`` (finished with
    the same parameters), ``resume`` (unfinished, same parameters) or ``run`` (from scratch;
    ``reason`` says why an existing one was thrown away)."""

    directory: Path
    label: str
    params: dict[str, Any]
    fingerprint: str
    action: str
    reason: str | None = None
    seconds: float | None = None


#: How a stage's parameters name the stage it is built on (``from``: its fingerprint).
UPSTREAM = {"warm start": "the model", "GRPO": "the warm start it starts from",
            "evaluation": "the model it evaluates"}


def open_stage(directory: Path, label: str, params: dict[str, Any], done: Path,
               upstream_redone: bool, who: str) -> StageRun:
    """Decide what to do with the stage in ``directory``; a stage that cannot be reused or
    resumed is deleted (with a line saying why) before it is redone. ``done``: the file a
    finished stage has; ``upstream_redone``: the stage it is built on ran in this invocation,
    so whatever this one built on before is gone."""
    fingerprint = stage_fingerprint(params)
    record = stage_record(directory)
    reason = None
    if record is None:
        if directory.exists():
            reason = "no record of the parameters it was made with"
    elif record.get("fingerprint") != fingerprint:
        reason = "its parameters changed: " + describe_changes(record.get("params"), params,
                                                               UPSTREAM.get(label, "its input"))
    elif upstream_redone:
        reason = f"{UPSTREAM.get(label, 'its input')} was redone"
    elif record.get("finished") and not done.exists():
        reason = f"its output ({done.name}) is missing"
    if reason is not None:
        _say(f"  {who}: redoing {label}: {reason}")
        _wipe(directory)
        record = None
    if record is not None and record.get("finished"):
        seconds = record.get("seconds")
        return StageRun(directory, label, params, fingerprint, "reuse",
                        seconds=float(seconds) if isinstance(seconds, int | float) else None)
    action = "resume" if record is not None and directory.exists() else "run"
    return StageRun(directory, label, params, fingerprint, action, reason)


def describe_changes(old: Any, new: dict[str, Any], upstream: str) -> str:
    """The parameters that differ, e.g. ``steps 20 → 300, max_turns 4 → 8``."""
    if not isinstance(old, dict):
        return "its record is unreadable"
    before, after = _flat(old), _flat(new)
    changed = [k for k in sorted(before.keys() | after.keys())
               if before.get(k, _MISSING) != after.get(k, _MISSING)]
    parts = [f"{upstream} changed" if key == "from" else
             f"{key} {_short(before.get(key, '(none)'))} → {_short(after.get(key, '(none)'))}"
             for key in changed[:4]]
    if len(changed) > 4:
        parts.append(f"and {len(changed) - 4} more")
    return ", ".join(parts) or "its record differs"


_MISSING = object()


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def run_stage(stage: StageRun, work: Callable[[bool], Any], who: str,
              note: dict[str, Any] | None = None) -> Any:
    """``work(resume)`` for the stage: its parameters are recorded before it starts and its
    time (and ``note``) when it ends. A finished stage's ``work`` only reads what is there, and its recorded
    time is kept. A mismatch the stage's own store finds (which the record did not catch)
    redoes the stage once from scratch instead of stopping the demo."""
    from harnessgrid.errors import ConfigError

    if stage.action != "reuse":
        _start(stage)
    started = time.perf_counter()
    try:
        value = work(stage.action != "run")
    except ConfigError as exc:
        if stage.action == "run":
            raise
        stage.reason = str(exc).splitlines()[0]
        _say(f"  {who}: redoing {stage.label}: {stage.reason}")
        _wipe(stage.directory)
        stage.action = "run"
        _start(stage)
        started = time.perf_counter()
        value = work(False)
    if stage.action != "reuse":
        stage.seconds = time.perf_counter() - started
        _write_record(stage.directory, {
            "stage": stage.label, "fingerprint": stage.fingerprint, "params": stage.params,
            "finished": True, "seconds": stage.seconds, "resumed": stage.action == "resume",
            "finished_at": _now(), **(note or {})})
    return value


def _start(stage: StageRun) -> None:
    _write_record(stage.directory, {"stage": stage.label, "fingerprint": stage.fingerprint,
                                    "params": stage.params, "finished": False,
                                    "started_at": _now()})


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _training_params(config: Any, upstream: str) -> dict[str, Any]:
    """What decides a training stage's result: its config without paths or parallelism (the
    same run in a moved ``--out`` is the same run), and the stage it starts from."""
    data: dict[str, Any] = config.identity({
        "model", "init_from", "output_dir", "concurrency", "save_trajectories",
        "rollout_backend", "ray_address"})
    return {"from": upstream, **data}



def well_formed_turns(eval_dir: Path, result: Any) -> tuple[int, int]:
    """(turns that spoke the harness's protocol, turns) of one evaluated episode
    (:meth:`~harnessgrid.trajectory.Trajectory.well_formed_turns`)."""
    from harnessgrid.evaluation.store import load_trajectory

    trajectory = load_trajectory(eval_dir, result)
    return trajectory.well_formed_turns(), len(trajectory.turns)


def _say(text: str) -> None:
    import sys

    print(text, file=sys.stderr, flush=True)


def quiet_libraries() -> None:
    """The demo prints its own progress; library progress bars and notices would bury it."""
    import datasets
    from transformers.utils import logging

    hf_logging: Any = logging  # partially typed upstream
    datasets.disable_progress_bars()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def model_stage(directory: Path, stages: Stages) -> StageRun:
    """Build (or find built) the profile's model; its fingerprint is a hash of the files the
    build wrote, so whatever changes the model (the builder, the micro plugin's texts) redoes
    every stage trained from it."""
    record = stage_record(directory)
    started = time.perf_counter()
    stages.build_model(directory)
    fingerprint = _tree_hash(directory)
    params = {"files_sha256": fingerprint}
    if record is not None and record.get("finished") and record.get("fingerprint") == fingerprint:
        seconds = record.get("seconds")
        return StageRun(directory, "model", params, fingerprint, "reuse",
                        seconds=float(seconds) if isinstance(seconds, int | float) else None)
    reason = None
    if record is not None:
        reason = "its build changed (the micro plugin's texts or the model builder)"
        _say(f"  model: rebuilt: {reason}")
    stage = StageRun(directory, "model", params, fingerprint, "run", reason,
                     seconds=time.perf_counter() - started)
    _write_record(directory, {"stage": "model", "fingerprint": fingerprint, "params": params,
                              "finished": True, "seconds": stage.seconds,
                              "finished_at": _now()})
    return stage


def _tree_hash(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]



TIMING_KEYS = ("seconds", "measured_at", "stages_run", "stages", "workers", "cpus")


def _earlier_timing(results_json: Path, fingerprints: dict[str, str]) -> dict[str, Any]:
    """A re-run that only read finished stages keeps the wall time of the run that computed
    them (in ``results.json`` when it describes the same stages); otherwise that time is
    unknown (``seconds`` None) and only the per-stage times stand."""
    try:
        earlier = json.loads(results_json.read_text())
    except (OSError, ValueError):
        earlier = None
    if isinstance(earlier, dict) and earlier.get("stage_fingerprints") == fingerprints:
        return {key: earlier.get(key) for key in TIMING_KEYS}
    return {"seconds": None, "measured_at": None, "stages_run": 0,
            "stages": len(fingerprints), "workers": None, "cpus": os.cpu_count()}


def _stage_seconds(stages: Sequence[StageRun | None]) -> float | None:
    """The recorded seconds of ``stages`` summed (None where one has no record)."""
    times = [s.seconds for s in stages if s is not None]
    return None if any(t is None for t in times) else sum(t for t in times if t is not None)


def _die_with_parent() -> None:
    """A worker ends when the demo's process does (killed, not only interrupted): otherwise an
    orphaned worker would go on training and holding a core. Linux only; elsewhere a no-op."""
    import ctypes
    import signal
    import sys

    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)



def _write(path: Path, data: str | bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    if isinstance(data, bytes):
        tmp.write_bytes(data)
    else:
        tmp.write_text(data)
    os.replace(tmp, path)
