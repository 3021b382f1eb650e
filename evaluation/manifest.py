"""The parameters of an evaluation, saved as ``DIR/manifest.json``.

Resuming must never mix incomparable episodes in one directory: a different policy, policy
options, suite-loader options (the judge that grades), episode limits, factor space or
configuration list would make the averages meaningless. Those are the *identity* of a run and must match to continue it. A run may
*grow*: more suites, settings, tasks (``--limit``) or runs are added to the manifest and
evaluated, and what is already stored is kept.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harnessgrid.errors import ConfigError
from harnessgrid.evaluation.results import ResultKey

MANIFEST = "manifest.json"
FORMAT = 1
_SECRET = re.compile(r"key|token|secret|password|auth", re.IGNORECASE)


class SuiteEntry(BaseModel):
    """A suite as evaluated: its version and the content hash of every task taken."""

    model_config = ConfigDict(extra="forbid")

    name: str
    version: str
    tasks: dict[str, str]  # task id → content hash, in suite order
    broken: dict[str, str] = {}  # task id → why its loader could not build it (not run)


class PluginRecord(BaseModel):
    """A plugin loaded through an entry point when the evaluation last ran: the entry point,
    and the distribution (package) and version that declared it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    entry_point: str
    distribution: str
    version: str


class AdapterRecord(BaseModel):
    """An adapter the evaluation ran: the version of the shell it emulates (``""``: none
    declared), the plugin that registered it, and that plugin's distribution and version
    (``harnessgrid`` for a built-in adapter)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str
    plugin: str = ""
    distribution: str = ""
    distribution_version: str = ""


class Plan(BaseModel):
    """One invocation's cross product: these suites through these settings, this many runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    suites: tuple[str, ...]
    settings: tuple[str, ...]
    runs: int


class Manifest(BaseModel):
    """What an evaluation directory holds; ``settings`` maps a setting to its harness ids."""

    model_config = ConfigDict(extra="forbid")

    format: int = FORMAT
    harnessgrid_version: str = ""
    created_at: str = ""
    updated_at: str = ""
    policy: str
    policy_options: dict[str, Any] = Field(default_factory=dict)
    #: the suite loaders' options (``-o``, ``--judge``): how tasks are graded (absent: none)
    suite_options: dict[str, Any] = Field(default_factory=dict)
    limits: dict[str, Any] = Field(default_factory=dict)
    #: ``eval --approve``'s MODULE:FUNCTION (absent: every call ran unasked)
    approver: str | None = None
    space: dict[str, list[str]] = Field(default_factory=dict)
    holdout_seed: int = 0
    settings: dict[str, list[str]] = Field(default_factory=dict)
    suites: dict[str, SuiteEntry] = Field(default_factory=dict)
    runs: int = 1
    plans: list[Plan] = Field(default_factory=list)
    #: Provenance, as of the latest invocation (:func:`harnessgrid.plugin_system.registry.
    #: provenance`): every entry-point plugin, and each adapter the settings name (absent in
    #: directories written before 0.2.0).
    plugins: list[PluginRecord] = Field(default_factory=list)
    adapters: dict[str, AdapterRecord] = Field(default_factory=dict)

    def expected_keys(self) -> set[ResultKey]:
        """Every key a complete run of this directory's invocations stores."""
        keys: set[ResultKey] = set()
        for plan in self.plans:
            for spec in plan.suites:
                for setting in plan.settings:
                    keys.update(ResultKey(setting, spec, task, harness, run)
                                for task in self.suites[spec].tasks
                                for harness in self.settings[setting]
                                for run in range(plan.runs))
        return keys


def redact(options: dict[str, Any]) -> dict[str, Any]:
    """Policy or loader options as saved: values of secret-looking keys are replaced, never
    written."""
    return {k: ("<redacted>" if _SECRET.search(k) else v) for k, v in options.items()}


def incompatibilities(old: Manifest, new: Manifest) -> list[str]:
    """Why ``new`` cannot continue ``old`` (empty when it can)."""
    problems: list[str] = []
    for field in ("policy", "policy_options", "suite_options", "limits", "approver", "space"):
        a, b = getattr(old, field), getattr(new, field)
        if a != b:
            problems.append(f"{field}: stored {_short(a)}, now {_short(b)}"
                            + (_judge_note(a, b) if field == "suite_options" else ""))
    for name in sorted(set(old.adapters) & set(new.adapters)):
        was, now_ = old.adapters[name].version, new.adapters[name].version
        if was != now_:
            # The stored results are keyed by the name they ran under, so a pinned name
            # (``NAME@VERSION``) is a different column, not a continuation of this one.
            problems.append(f"adapter {name}: the stored episodes ran it emulating version "
                            f"{was or '(none)'}, it now emulates {now_ or '(none)'}"
                            + (f" (finish this directory with the harnessgrid release that "
                               f"emulated {was} as {name}; to measure {was} again, start a "
                               f"fresh --out with --adapters {name}@{was}, if it is still "
                               "emulated)" if was and "@" not in name else ""))
    for setting in sorted(set(old.settings) & set(new.settings)):
        if old.settings[setting] != new.settings[setting]:
            problems.append(f"{setting} harnesses: stored {_short(old.settings[setting])}, "
                            f"now {_short(new.settings[setting])} (a different --harnesses, "
                            "--holdout-seed, --original or --adapters?)")
    for spec in sorted(set(old.suites) & set(new.suites)):
        a_suite, b_suite = old.suites[spec], new.suites[spec]
        if a_suite.version != b_suite.version:
            problems.append(f"suite {spec}: stored version {a_suite.version}, now "
                            f"{b_suite.version}")
            continue
        changed = [t for t in a_suite.tasks.keys() & b_suite.tasks.keys()
                   if a_suite.tasks[t] != b_suite.tasks[t]]
        if changed:
            problems.append(f"suite {spec}: tasks changed content: {', '.join(sorted(changed)[:5])}")
    return problems


def _judge_note(old: dict[str, Any], new: dict[str, Any]) -> str:
    """Say so when the judge differs: its episodes were graded another way."""
    a, b = old.get("judge"), new.get("judge")
    if a == b:
        return ""
    return (f" (the stored episodes were graded {'by ' + str(a) if a else 'without a judge'}, "
            f"these would be {'by ' + str(b) if b else 'without one'})")


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 160 else text[:157] + "..."


def merge(old: Manifest, new: Manifest) -> Manifest:
    """``old`` grown by what ``new`` adds (suites, tasks, settings, runs)."""
    suites = dict(old.suites)
    for spec, entry in new.suites.items():
        if spec in suites:
            tasks = {**suites[spec].tasks, **entry.tasks}
            broken = {k: v for k, v in {**suites[spec].broken, **entry.broken}.items()
                      if k not in tasks}  # a task fixed since is no longer broken
            suites[spec] = suites[spec].model_copy(update={"tasks": tasks, "broken": broken})
        else:
            suites[spec] = entry
    return old.model_copy(update={
        "suites": suites, "settings": {**old.settings, **new.settings},
        "runs": max(old.runs, new.runs),
        "plans": old.plans + [p for p in new.plans if p not in old.plans],
        "harnessgrid_version": new.harnessgrid_version,
        "plugins": new.plugins, "adapters": {**old.adapters, **new.adapters},
        "updated_at": new.updated_at})


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def read_manifest(out_dir: str | Path) -> Manifest | None:
    path = Path(out_dir) / MANIFEST
    if not path.exists():
        return None
    try:
        return Manifest.model_validate_json(path.read_text())
    except ValueError as exc:
        raise ConfigError(f"{path} is not an evaluation manifest: {str(exc).splitlines()[0]}",
                          hint="restore it, or evaluate into a fresh --out DIR") from None


def write_manifest(out_dir: str | Path, manifest: Manifest) -> None:
    """Write atomically (temp file + rename): a crash leaves the old or the new manifest."""
    path = Path(out_dir) / MANIFEST
    tmp = path.with_name(f".{MANIFEST}.{os.getpid()}.tmp")
    tmp.write_text(manifest.model_dump_json(indent=2) + "\n")
    os.replace(tmp, path)


def reconcile(out_dir: str | Path, new: Manifest) -> Manifest:
    """The manifest to continue ``out_dir`` with ``new``'s parameters, or a ConfigError that
    names every parameter that differs. Does not write."""
    old = read_manifest(out_dir)
    if old is None:
        results = Path(out_dir) / "results.jsonl"
        if results.exists() and results.stat().st_size:
            raise ConfigError(f"{out_dir} holds results but no {MANIFEST}, so their parameters "
                              "are unknown", hint="restore the manifest, or evaluate into a "
                              "fresh --out DIR")
        return new
    problems = incompatibilities(old, new)
    if problems:
        listed = "\n  - ".join(problems)
        raise ConfigError(
            f"{out_dir} holds an evaluation with different parameters:\n  - {listed}",
            hint="choose a fresh --out DIR, or repeat the stored parameters to resume it "
                 "(suites, settings, tasks and runs may be added)")
    return merge(old, new)
