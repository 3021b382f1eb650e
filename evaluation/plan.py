"""What an evaluation runs: the harnesses of each setting and the tasks of each suite.

Settings follow the paper:

- ``in-space``: configurations of the training space held out of the training design (by
  default the 18 of ``holdout(orthogonal_design(space))``), or an explicit list
  (``--harnesses``: codes or level lists, ``all`` for the whole space); reported as the mean over configurations;
- ``out-of-space``: each adapter (emulated real shells), reported per adapter and averaged;
- ``original``: the single harness a baseline was trained with (a code or ``adapter:NAME``);
- ``train``: the training design itself (in-distribution, a diagnostic): the orthogonal array
  unless the design's configurations are given (``train_harnesses``).

Harnesses are named as everywhere else (:func:`harnessgrid.composition.resolve_config`): a
code in the harness space of every registered level (``S0-T0-O3-C0-W3`` for a plugin's fourth
observation and workflow levels) or a level list, and stored under their code. Without an
explicit ``space`` the designs (held-out, ``train``, ``all``) stay over the paper's 3^5 grid,
whose codes are the same in the harness space.

Everything is resolved and validated before the first episode starts, so a typo costs no
compute.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from harnessgrid.errors import ConfigError
from harnessgrid.space import FactorSpace
from harnessgrid.tasks import Task, TaskSuite, task_ids

SETTINGS: tuple[str, ...] = ("in-space", "out-of-space", "original", "train")
DEFAULT_SETTINGS: tuple[str, ...] = ("in-space", "out-of-space")
#: The out-of-space shells of the paper, resolved through the plugin registry at run time.
DEFAULT_ADAPTERS: tuple[str, ...] = ("claude-code", "openclaw")
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
    harnesses. A level list ends after its fifth factor, at an item without ``=``, or where a
    factor repeats; ``;`` also separates harnesses."""
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
        if "=" not in item:
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
                     harnesses: Sequence[str] | None = None, original: str | None = None,
                     adapters: Sequence[str] = DEFAULT_ADAPTERS, holdout_seed: int = 0,
                     holdout_n: int = 18, train_harnesses: Sequence[str] | None = None,
                     ) -> dict[str, list[str]]:
    """Setting → harness ids (configuration codes or ``adapter:NAME``), in report order.

    ``space`` is the space of the designs and of explicit codes; without one, designs are over
    the paper's 3^5 grid and explicit harnesses are read in the harness space (every
    registered level).
    """
    from harnessgrid.composition import harness_space

    names = space or harness_space()  # where explicit codes and level lists are read
    space = space or FactorSpace.default()
    unknown = [s for s in settings if s not in SETTINGS]
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
    for setting in SETTINGS:  # report order, whatever order the user wrote
        if setting not in settings:
            continue
        if setting == "in-space":
            out[setting] = (_explicit(space, names, harnesses) if harnesses
                            else _held_out(space, holdout_n, holdout_seed))
        elif setting == "train":
            from harnessgrid.designs import orthogonal_design

            out[setting] = (_explicit(space, names, train_harnesses) if train_harnesses
                            else list(orthogonal_design(space).codes))
        elif setting == "original":
            if original is None:
                raise ConfigError("the original setting needs the baseline's training harness",
                                  hint="pass --original CODE, e.g. --original S0-T0-O0-C0-W0")
            out[setting] = [_one_harness(names, original)]
        else:
            out[setting] = [ADAPTER_PREFIX + name for name in check_adapters(adapters)]
    return out


def _held_out(space: FactorSpace, n: int, seed: int) -> list[str]:
    from harnessgrid.designs import holdout, orthogonal_design

    return list(holdout(orthogonal_design(space), n, seed).codes)


def _explicit(space: FactorSpace, names: FactorSpace, harnesses: Sequence[str]) -> list[str]:
    """Explicit configurations as their codes in ``names``; ``all``: every one of ``space``."""
    from harnessgrid.composition import resolve_config

    if list(harnesses) == ["all"]:
        return [c.code for c in space]
    codes = [resolve_config(spec, names).code for spec in harnesses]
    dupes = sorted({c for c in codes if codes.count(c) > 1})
    if dupes:
        raise ConfigError(f"--harnesses names {', '.join(dupes)} more than once")
    return codes


def _one_harness(names: FactorSpace, spec: str) -> str:
    from harnessgrid.composition import resolve_config

    if spec.startswith(ADAPTER_PREFIX):
        check_adapters([spec.removeprefix(ADAPTER_PREFIX)])
        return spec
    return resolve_config(spec, names).code


def check_adapters(names: Sequence[str]) -> list[str]:
    """The adapter names, each checked against the registry (one error lists all missing)."""
    from harnessgrid.registry import get_registry

    registered = get_registry().adapters
    names = [n.removeprefix(ADAPTER_PREFIX) for n in names]
    if not names:
        raise ConfigError("out-of-space needs at least one adapter",
                          hint="pass --adapters NAME[,NAME]")
    missing = [n for n in names if n not in registered]
    if missing:
        raise ConfigError(
            f"adapter(s) {', '.join(missing)} not registered (out-of-space evaluates through "
            f"{', '.join(names)})",
            hint=f"registered adapters: {', '.join(registered) or 'none'}; choose with "
                 "--adapters NAME,NAME, install the plugin that provides them, or drop "
                 "out-of-space from --settings")
    return names


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
