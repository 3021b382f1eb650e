"""What an evaluation runs: the harnesses of each setting and the tasks of each suite.

Settings follow the paper (DESIGN §9):

- ``in-space``: configurations of the training space held out of the training design (by
  default the 18 of ``holdout(orthogonal_design(space))``), or an explicit list
  (``--harnesses``, ``all`` for the whole space); reported as the mean over configurations;
- ``out-of-space``: each adapter (emulated real shells), reported per adapter and averaged;
- ``original``: the single harness a baseline was trained with (a code or ``adapter:NAME``);
- ``train``: the training design itself (in-distribution, a diagnostic): the orthogonal array
  unless the design's configurations are given (``train_harnesses``).

Everything is resolved and validated before the first episode starts, so a typo costs no
compute.
"""

from __future__ import annotations

from collections.abc import Sequence

from harnessgrid.errors import ConfigError
from harnessgrid.space import FactorSpace
from harnessgrid.tasks import Task, TaskSuite

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


def resolve_settings(settings: Sequence[str], *, space: FactorSpace | None = None,
                     harnesses: Sequence[str] | None = None, original: str | None = None,
                     adapters: Sequence[str] = DEFAULT_ADAPTERS, holdout_seed: int = 0,
                     holdout_n: int = 18, train_harnesses: Sequence[str] | None = None,
                     ) -> dict[str, list[str]]:
    """Setting → harness ids (configuration codes or ``adapter:NAME``), in report order."""
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
            out[setting] = (_explicit(space, harnesses) if harnesses
                            else _held_out(space, holdout_n, holdout_seed))
        elif setting == "train":
            from harnessgrid.designs import orthogonal_design

            out[setting] = (_explicit(space, train_harnesses) if train_harnesses
                            else list(orthogonal_design(space).codes))
        elif setting == "original":
            if original is None:
                raise ConfigError("the original setting needs the baseline's training harness",
                                  hint="pass --original CODE, e.g. --original S0-T0-O0-C0-W0")
            out[setting] = [_one_harness(space, original)]
        else:
            out[setting] = [ADAPTER_PREFIX + name for name in check_adapters(adapters)]
    return out


def _held_out(space: FactorSpace, n: int, seed: int) -> list[str]:
    from harnessgrid.designs import holdout, orthogonal_design

    return list(holdout(orthogonal_design(space), n, seed).codes)


def _explicit(space: FactorSpace, harnesses: Sequence[str]) -> list[str]:
    if list(harnesses) == ["all"]:
        return [c.code for c in space]
    codes = [space.parse(code).code for code in harnesses]
    dupes = sorted({c for c in codes if codes.count(c) > 1})
    if dupes:
        raise ConfigError(f"--harnesses names {', '.join(dupes)} more than once")
    return codes


def _one_harness(space: FactorSpace, spec: str) -> str:
    if spec.startswith(ADAPTER_PREFIX):
        check_adapters([spec.removeprefix(ADAPTER_PREFIX)])
        return spec
    return space.parse(spec).code


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
    tasks = list(suite.tasks(split))
    ids = [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ConfigError(f"suite {suite.name!r} has duplicate task ids: {', '.join(dupes[:5])}",
                          hint="task ids key the result store; they must be unique")
    return tasks[:limit] if limit is not None else tasks
