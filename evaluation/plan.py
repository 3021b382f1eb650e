"""What an evaluation runs: the harnesses of each setting and the tasks of each suite.

Settings follow the paper:

- ``in-space``: configurations of the training space held out of the training design (by
  default the 18 of ``holdout(orthogonal_design(space))``), or an explicit list
  (``--harnesses``: codes or level lists, ``all`` for the whole space); reported as the mean over configurations;
- ``out-of-space``: each adapter (emulated real shells), reported per adapter and averaged:
  by default the paper's two (:data:`DEFAULT_ADAPTERS`), ``all`` for every registered one;
- ``original``: the harnesses the policy was trained through (in distribution): a single
  baseline's one harness (a code, a level list or ``adapter:NAME``), a list, or ``oa`` for the
  orthogonal array, ``harnessgrid train``'s default design. It is the paper's "original" column
  whether the policy saw one harness or eighteen. (Before 0.2.3 the training design was a
  setting of its own, ``train``; that name still runs as it did, under its own name, with a
  ``DeprecationWarning``, and a directory that stored results under it resumes them when
  ``original`` names the same harnesses.)

Harnesses are named as everywhere else
(:func:`harnessgrid.plugin_system.composition.resolve_config`): a code (numbers name the paper's
built-in levels, a plugin level is named: ``S0-T0-O=diffstat-C0-W=checklist``), ``NAME:CODE``
for a plugin's named space, or a level list. Each is stored under its harness address
(:func:`harnessgrid.plugin_system.composition.harness_address`), which names the same harness on
every machine, so a results file reads the same whatever plugins are installed later. Without an
explicit ``space`` the designs (held-out, ``oa``, ``all``) are over the paper's 3^5 grid; with
one (the micro demo's), its configurations are recorded by address too (``micro:S0-T1-O2-C0-W1``).

Everything is resolved and validated before the first episode starts, so a typo costs no
compute.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harnessgrid.errors import ConfigError
from harnessgrid.space import FactorSpace, HarnessConfig
from harnessgrid.tasks import Task, TaskSuite, task_ids

if TYPE_CHECKING:
    from harnessgrid.evaluation.manifest import Manifest
    from harnessgrid.evaluation.results import EvalResult

SETTINGS: tuple[str, ...] = ("in-space", "out-of-space", "original")
#: The name the training design's setting had before 0.2.3 (now ``original``, ``--original
#: oa``): it runs as it did, under its own name, with a warning, until 0.3.0.
LEGACY_TRAIN = "train"
#: ``--original oa``: the orthogonal array over the space, ``harnessgrid train``'s default design.
TRAINING_DESIGN = "oa"
DEFAULT_SETTINGS: tuple[str, ...] = ("in-space", "out-of-space")
#: The out-of-space shells of the paper, resolved through the plugin registry at run time.
DEFAULT_ADAPTERS: tuple[str, ...] = ("claude-code", "openclaw")
#: ``--adapters all``: every registered adapter (:func:`every_adapter`).
ALL_ADAPTERS = "all"
ADAPTER_PREFIX = "adapter:"


def split_list(text: str | Sequence[str] | None) -> list[str]:
    """``"a,b, c"`` (or a list of such strings) → ``["a", "b", "c"]``."""
    if text is None:
        return []
    parts = [text] if isinstance(text, str) else list(text)
    return [p.strip() for part in parts for p in part.split(",") if p.strip()]


def split_harnesses(text: str | Sequence[str] | None) -> list[str]:
    """Like :func:`split_list`, but a level list stays one item although it holds commas:
    ``"S0-T0-O0-C0-W0,system_prompt=minimal,...,workflow=react,S1-T1-O1-C1-W1"`` → three
    harnesses. A level list ends after its fifth factor, at an item that is no ``factor=level``
    (a code, even one naming a level: ``S0-T0-O=diffstat-C0-W0``), or where a factor repeats;
    ``;`` also separates harnesses."""
    from harnessgrid.plugin_system.composition import LEVEL_LIST_START
    from harnessgrid.space import FACTORS

    if text is None:
        return []
    parts = [text] if isinstance(text, str) else list(text)
    items = [p.strip() for part in parts for chunk in part.split(";")
             for p in chunk.split(",") if p.strip()]
    out: list[str] = []
    group: list[str] = []
    seen: set[str] = set()

    def flush() -> None:
        if group:
            out.append(",".join(group))
            group.clear()
            seen.clear()

    for item in items:
        if not LEVEL_LIST_START.match(item):
            flush()
            out.append(item)
            continue
        factor = item.partition("=")[0].strip()
        if factor in seen:
            flush()
        group.append(item)
        seen.add(factor)
        if seen >= set(FACTORS):
            flush()
    flush()
    return out


def resolve_settings(settings: Sequence[str], *, space: FactorSpace | None = None,
                     harnesses: Sequence[str] | None = None,
                     original: str | Sequence[str] | None = None,
                     adapters: Sequence[str] = DEFAULT_ADAPTERS, holdout_seed: int = 0,
                     holdout_n: int = 18, train_harnesses: Sequence[str] | None = None,
                     ) -> dict[str, list[str]]:
    """Setting → harness ids (harness addresses or ``adapter:NAME``), in report order.

    ``space`` is the space of the designs and of explicit codes (numbers by position in it);
    without one, designs are over the paper's 3^5 grid and explicit harnesses are read as
    every command reads them. ``original`` is what the policy trained through: harnesses (a
    string is split as ``--original`` is) or ``oa``. ``train_harnesses`` and the setting
    ``train`` are the names before 0.2.3 (deprecated).
    """
    names = space  # where explicit codes are read: None reads them as every command does
    space = space or FactorSpace.default()
    _warn_legacy_train(settings, train_harnesses)
    unknown = [s for s in settings if s not in (*SETTINGS, LEGACY_TRAIN)]
    if unknown or not settings:
        raise ConfigError(f"unknown setting(s) {unknown or settings!r}",
                          hint=f"settings are {', '.join(SETTINGS)}")
    if harnesses and "in-space" not in settings:
        raise ConfigError("--harnesses sets the in-space configurations, but in-space is not "
                          "in --settings", hint="add in-space to --settings")
    if original is not None and "original" not in settings:
        raise ConfigError("--original is given but original is not in --settings",
                          hint="add original to --settings")
    out: dict[str, list[str]] = {}
    for setting in (*SETTINGS, LEGACY_TRAIN):  # report order, whatever order the user wrote
        if setting not in settings:
            continue
        if setting == "in-space":
            out[setting] = (_explicit(space, names, harnesses) if harnesses
                            else _held_out(space, holdout_n, holdout_seed))
        elif setting == "original":
            out[setting] = _original(space, names, original)
        elif setting == LEGACY_TRAIN:  # exactly as before 0.2.3
            out[setting] = (_explicit(space, names, train_harnesses) if train_harnesses
                            else _original(space, names, TRAINING_DESIGN))
        else:
            out[setting] = [ADAPTER_PREFIX + name for name in check_adapters(adapters)]
    return out


def _warn_legacy_train(settings: Sequence[str], train_harnesses: Sequence[str] | None) -> None:
    """The pre-0.2.3 ``train`` setting still runs as it did (the training design under its own
    name, ``train_harnesses`` or the orthogonal array), with the warning naming what replaces
    it; ``train_harnesses`` without it was ignored then, and is now, but said."""
    if LEGACY_TRAIN in settings:
        warnings.warn("the evaluation setting `train` is deprecated since 0.2.3 and will be "
                      "removed in 0.3.0; use --settings original --original oa (Python: "
                      "settings=('original',), original='oa', or the design's harnesses "
                      "instead of train_harnesses)", DeprecationWarning, stacklevel=4)
    elif train_harnesses is not None:
        warnings.warn("train_harnesses is read only with the deprecated setting `train`, "
                      "which is not in settings: it is ignored; pass the training harnesses "
                      "as original= with the setting original", DeprecationWarning,
                      stacklevel=4)


def _original(space: FactorSpace, names: FactorSpace | None,
              original: str | Sequence[str] | None) -> list[str]:
    """The harnesses the policy trained through: ``oa`` (the orthogonal array over
    ``space``), one harness, or several (codes, level lists, ``adapter:NAME``)."""
    from harnessgrid.designs import orthogonal_design

    specs = split_harnesses(original)
    if not specs:
        raise ConfigError("the original setting needs the harnesses the policy trained "
                          "through", hint="pass --original CODE for a single-harness policy "
                          "(e.g. --original S0-T0-O0-C0-W0), --original oa for one trained "
                          "through the orthogonal array (harnessgrid train's default design), "
                          "or CODE,CODE,... for a list")
    if TRAINING_DESIGN in specs:
        if specs != [TRAINING_DESIGN]:
            raise ConfigError(f"--original {','.join(specs)}: {TRAINING_DESIGN} already names "
                              "the whole orthogonal array", hint="pass --original oa alone")
        return _addresses(orthogonal_design(space).configs)
    ids = [_one_harness(names, spec) for spec in specs]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ConfigError(f"--original names {', '.join(dupes)} more than once")
    return ids


def stored_setting_names(settings: dict[str, list[str]], manifest: Manifest | None,
                         ) -> dict[str, list[str]]:
    """``settings`` with the names ``manifest`` stored them under: a directory written before
    0.2.3 holds the training design as ``train``; resuming it with ``original`` and the same
    harnesses continues those results instead of running every episode again."""
    stored = manifest.settings if manifest is not None else {}
    mine = settings.get("original")
    if (mine is None or LEGACY_TRAIN in settings or stored.get(LEGACY_TRAIN) != mine
            or stored.get("original") == mine):
        return settings
    return {(LEGACY_TRAIN if s == "original" else s): ids for s, ids in settings.items()}


def _addresses(configs: Iterable[HarnessConfig]) -> list[str]:
    """How results record configurations: by harness address, the same on every machine."""
    from harnessgrid.plugin_system.composition import harness_address

    return [harness_address(c) for c in configs]


def _held_out(space: FactorSpace, n: int, seed: int) -> list[str]:
    from harnessgrid.designs import holdout, orthogonal_design

    return _addresses(holdout(orthogonal_design(space), n, seed).configs)


def _explicit(space: FactorSpace, names: FactorSpace | None,
              harnesses: Sequence[str]) -> list[str]:
    """Explicit configurations (read in ``names`` when given) as their addresses; ``all``:
    every configuration of ``space``."""
    from harnessgrid.plugin_system.composition import resolve_config

    if list(harnesses) == ["all"]:
        return _addresses(space)
    codes = _addresses(resolve_config(spec, names) for spec in harnesses)
    dupes = sorted({c for c in codes if codes.count(c) > 1})
    if dupes:
        raise ConfigError(f"--harnesses names {', '.join(dupes)} more than once")
    return codes


def _one_harness(names: FactorSpace | None, spec: str) -> str:
    from harnessgrid.plugin_system.composition import resolve_config

    if spec.startswith(ADAPTER_PREFIX):
        check_adapters([spec.removeprefix(ADAPTER_PREFIX)])
        return spec
    return _addresses([resolve_config(spec, names)])[0]


def check_recorded_harnesses(out_dir: str | Path, results: Iterable[EvalResult],
                             manifest: Manifest | None = None) -> None:
    """Refuse an evaluation directory whose harness ids no longer name what they recorded.

    Before stable codes, a code numbered plugin levels by position among whatever plugins the
    writing machine had (``S0-T0-O3-C0-W3``); read today, such an id names no level, or other
    levels than the results say they ran (their ``levels``). Mixing or reporting them would
    silently attribute results to another harness, so this raises, naming each such id and
    how the same harness is written now."""
    from harnessgrid.plugin_system.composition import address_levels

    recorded: dict[str, dict[str, str] | None] = {r.harness: r.levels for r in results}
    for ids in (manifest.settings.values() if manifest is not None else ()):
        for hid in ids:
            recorded.setdefault(hid, None)
    wrong: list[str] = []
    for hid, levels in recorded.items():
        try:
            now = address_levels(hid)
        except ConfigError:
            wrong.append(f"{hid} (numbers a plugin level by position" + (
                f"; it ran {_written(levels)}" if levels else "") + ")")
            continue
        if levels and now is not None and now != levels:
            wrong.append(f"{hid} (it ran {_written(levels)}, but reads today as "
                         f"{_written(now)})")
    if wrong:
        raise ConfigError(
            f"{out_dir} records {len(wrong)} harness(es) under codes written by an older "
            f"harnessgrid, which numbered levels by position: {'; '.join(wrong[:3])}"
            + (f"; and {len(wrong) - 3} more" if len(wrong) > 3 else ""),
            hint="these ids meant different harnesses on machines with different plugins, so "
                 "their results are neither reported nor resumed; evaluate into a fresh --out "
                 "DIR (a plugin level is now written by name, e.g. S0-T0-O=diffstat-C0-W0; a "
                 "named space as micro:CODE)")


def _written(levels: dict[str, str]) -> str:
    """``levels`` as the stable code a user would type today."""
    from harnessgrid.space import FACTORS, stable_code

    return stable_code(levels) if set(levels) == set(FACTORS) else str(levels)


def check_adapters(names: Sequence[str]) -> list[str]:
    """The adapter names, each checked against the registry (one error lists all missing).

    ``all`` is every registered adapter under its own name (a pinned release another name
    registers, ``claude-code@1.0.96``, is named explicitly); ``NAME@VERSION`` is the adapter
    pinned to the version of the shell it emulates (:meth:`Registry.adapter
    <harnessgrid.plugin_system.registry.Registry.adapter>`)."""
    from harnessgrid.plugin_system.registry import get_registry

    reg = get_registry()
    registered = reg.adapters
    names = [n.removeprefix(ADAPTER_PREFIX) for n in names]
    if not names:
        raise ConfigError("out-of-space needs at least one adapter",
                          hint="pass --adapters NAME[,NAME] (or all)")
    if ALL_ADAPTERS in names:
        if names != [ALL_ADAPTERS]:
            raise ConfigError(f"--adapters {','.join(names)}: `all` already names every "
                              "registered adapter", hint="pass --adapters all alone")
        names = every_adapter()
        if not names:
            raise ConfigError("--adapters all: no adapter is registered",
                              hint="install a plugin that provides one (`harnessgrid plugins "
                                   "list`), or drop out-of-space from --settings")
        return names
    missing = [n for n in names if n not in registered and n.partition("@")[0] not in registered]
    if missing:
        raise ConfigError(
            f"adapter(s) {', '.join(missing)} not registered (out-of-space evaluates through "
            f"{', '.join(names)})",
            hint=f"registered adapters: {', '.join(registered) or 'none'}; choose with "
                 "--adapters NAME,NAME (or all), install the plugin that provides them, or drop "
                 "out-of-space from --settings")
    for name in names:
        reg.adapter(name)  # NAME@VERSION: a version the adapter does not emulate fails here
    return names


def every_adapter() -> list[str]:
    """What ``--adapters all`` evaluates: every registered adapter under its own name, sorted
    (an adapter registered only as ``NAME@VERSION`` under that name)."""
    from harnessgrid.plugin_system.registry import get_registry

    registered = get_registry().adapters
    return [n for n in registered if "@" not in n or n.partition("@")[0] not in registered]


def select_tasks(suite: TaskSuite, split: str | None = None,
                 limit: int | None = None) -> list[Task]:
    """The tasks of a suite to evaluate: the ``eval`` split when there is one (else every
    task, or the named split), the first ``limit`` of them."""
    if split is None and "eval" in suite.splits:
        split = "eval"
    tasks = suite.tasks(split)
    counts = Counter(task_ids(tasks))  # ids only: a lazy split builds just the tasks returned
    dupes = sorted(i for i, n in counts.items() if n > 1)
    if dupes:
        raise ConfigError(f"suite {suite.name!r} has duplicate task ids: {', '.join(dupes[:5])}",
                          hint="task ids key the result store; they must be unique")
    return list(tasks[:limit] if limit is not None else tasks)
