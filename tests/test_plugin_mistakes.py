"""Plugin mistakes are contained and named (issue 15, items 4-6).

Every plugin here is a real distribution (a dist-info declaring entry-point group
``harnessgrid``, written by ``plugin_dist``) discovered by ``importlib.metadata``; the command
line is run in a fresh process. What is pinned: a plugin's mistake skips only the contribution
that is wrong, ``plugins list`` (table and ``--json``) says what was skipped and why, every
other command keeps working, and using what is broken or contested is an error naming the
plugin(s), the contribution and what to do — never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_dist import make_plugin_dist

import harnessgrid as hg
from harnessgrid.errors import ConfigError, PluginError
from harnessgrid.plugin_system.registry import (
    PluginConflictError,
    PluginContributionError,
    PluginManager,
    PluginWarning,
    get_registry,
)
from harnessgrid.policies import make_policy
from harnessgrid.space import FactorSpace

AddPath = Callable[[Path], None]

RAW = "harnessgrid.plugins.factors.observation.raw"
CLASH = "hg_clash (hg-clash 0.1.0)"
LEVELS = "system_prompt=minimal,tool_interface=function_calling,observation={},context=full," \
    "workflow=react"

# Registers one name of each kind that a built-in already registers, and one level of its own.
CLASHING_PLUGIN = """
    from harnessgrid import hookimpl
    from harnessgrid.levels import ObservationLevel
    from harnessgrid.plugins.adapters import mini_bash
    from harnessgrid.plugins.tasks.examples import load as load_examples
    from harnessgrid.registrations import AdapterSpec, PolicyBackend, TaskSuiteSpec


    class MyRaw(ObservationLevel):
        name = "raw"
        description = "Another level called raw."

        def format(self, action, result):
            return result.output

        def format_error(self, error):
            return error.message


    class Mine(MyRaw):
        name = "mine"
        description = "A level no one else registers."


    @hookimpl
    def harnessgrid_factor_levels():
        yield MyRaw
        yield Mine


    @hookimpl
    def harnessgrid_adapters():
        yield AdapterSpec(name="mini-bash", description="another", create=mini_bash.create)


    @hookimpl
    def harnessgrid_task_suites():
        yield TaskSuiteSpec(name="examples", description="another", load=load_examples)


    @hookimpl
    def harnessgrid_policies():
        yield PolicyBackend(scheme="scripted", description="another",
                            create=lambda rest, options: None)
    """


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harnessgrid", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def _env(*paths: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HARNESSGRID_DISABLE_PLUGINS"}
    return {**env, "PYTHONPATH": os.pathsep.join(map(str, paths)), **extra}


def _assert_named_error(out: subprocess.CompletedProcess[str], *names: str) -> None:
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    for name in names:
        assert name in out.stderr, (name, out.stderr)


# -- item 4: a name registered twice -----------------------------------------------------------

def test_clash_with_builtins_skips_only_the_clashing_contributions(
        tmp_path: Path, on_sys_path: AddPath) -> None:
    """The built-in keeps each name; the plugin's own level registers; naming a contested name
    (a level in a harness, an adapter, a suite, a policy scheme) is an error naming both."""
    on_sys_path(make_plugin_dist(tmp_path, "hg-clash", "hg_clash", CLASHING_PLUGIN))
    with pytest.warns(PluginWarning, match="already registered by built-in"):
        reg = get_registry()
    assert reg.level("observation", "mine").__module__ == "hg_clash"
    assert reg.origin[("factor level", "observation:raw")] == RAW
    assert reg.origin[("adapter", "mini-bash")] == "harnessgrid.plugins.adapters.mini_bash"
    assert reg.clashes == {
        ("factor level", "observation:raw"): [RAW, CLASH],
        ("adapter", "mini-bash"): ["harnessgrid.plugins.adapters.mini_bash", CLASH],
        ("task suite", "examples"): ["harnessgrid.plugins.tasks.examples", CLASH],
        ("policy backend", "scripted"): ["harnessgrid.plugins.policies", CLASH],
    }
    clashes = [p for p in reg.problems if p.kind == "clash"]
    assert {p.contribution for p in clashes} == {
        "factor level observation:raw", "adapter mini-bash", "task suite examples",
        "policy backend scripted"}
    assert all(p.plugin == CLASH and p.kept != CLASH for p in clashes)

    named: list[Callable[[], object]] = [
        lambda: hg.compose(FactorSpace.default().parse("S0-T0-O0-C0-W0")),
        lambda: hg.resolve_harness(LEVELS.format("raw")),
        lambda: hg.resolve_harness("adapter:mini-bash"),
        lambda: hg.load_suite("examples"),
        lambda: make_policy("scripted"),
    ]
    for use in named:
        with pytest.raises(PluginConflictError) as exc:
            use()
        text = str(exc.value)
        assert CLASH in text, text
        assert "built-in harnessgrid.plugins." in text, text
        assert "HARNESSGRID_DISABLE_PLUGINS=hg_clash" in text, text
        assert isinstance(exc.value, ConfigError)
        assert isinstance(exc.value, PluginError)
    # Everything not contested works, the plugin's own level included.
    assert hg.compose(FactorSpace.default().parse("S0-T0-O1-C0-W0")).name == "S0-T0-O1-C0-W0"
    assert hg.resolve_harness(LEVELS.format("mine")).observation.name == "mine"
    assert hg.resolve_harness("adapter:openclaw").name.startswith("adapter:")
    assert hg.load_suite("grid-bench").name == "grid-bench"


def test_clash_with_builtins_on_the_command_line(tmp_path: Path) -> None:
    """`plugins list` (table and --json) shows both owners and exits 0; other commands work;
    a command naming the contested level, suite or adapter exits 2 naming both plugins."""
    make_plugin_dist(tmp_path, "hg-clash", "hg_clash", CLASHING_PLUGIN)
    env = _env(tmp_path)
    listed = _cli(env, "plugins", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert {"kind": "factor level", "name": "observation:raw", "used": RAW,
            "skipped": [CLASH]} in data["clashes"]
    assert len(data["clashes"]) == 4
    rows = {r["name"]: r for r in data["registrations"]}
    assert rows["observation:raw"]["plugin"] == RAW
    assert rows["observation:raw"]["also_registered_by"] == [CLASH]
    assert rows["observation:mine"]["plugin"] == CLASH
    problem = next(p for p in data["problems"] if p["contribution"] == "adapter mini-bash")
    assert problem["kind"] == "clash"
    assert problem["plugin"] == CLASH
    assert problem["kept"] == "harnessgrid.plugins.adapters.mini_bash"

    table = _cli(env, "plugins", "list")
    assert table.returncode == 0, table.stderr
    assert "built-in (also hg_clash (hg-clash 0.1.0): skipped)" in table.stdout
    assert "factor level observation:raw" in table.stdout
    assert f"{CLASH}: registered factor level observation:mine" in table.stdout

    shown = _cli(env, "harness", "show", "S0-T0-O1-C0-W0")
    assert shown.returncode == 0, shown.stderr
    assert "already registered by built-in" in shown.stderr  # a one-line warning, not a failure
    _assert_named_error(_cli(env, "harness", "show", "S0-T0-O0-C0-W0"), RAW, CLASH,
                        "HARNESSGRID_DISABLE_PLUGINS=hg_clash")
    _assert_named_error(_cli(env, "run", "--task", "examples/upper", "--harness",
                             "S0-T0-O1-C0-W0", "--policy", "null"),
                        "harnessgrid.plugins.tasks.examples", CLASH)
    _assert_named_error(_cli(env, "run", "--task", "grid-bench/" + "x", "--harness",
                             "adapter:mini-bash", "--policy", "null"),
                        "harnessgrid.plugins.adapters.mini_bash", CLASH)
    # The hint works: with the plugin disabled, the contested name is the built-in again.
    fixed = _cli({**env, "HARNESSGRID_DISABLE_PLUGINS": "hg_clash"},
                 "harness", "show", "S0-T0-O0-C0-W0")
    assert fixed.returncode == 0, fixed.stderr
    assert not fixed.stderr, fixed.stderr


PAIR_LEVEL = """
    from harnessgrid import hookimpl
    from harnessgrid.levels import ObservationLevel

    class Diffstat(ObservationLevel):
        name = "diffstat"
        description = "{who}'s diffstat."

        def format(self, action, result):
            return "{who}"

        def format_error(self, error):
            return "{who}"

    @hookimpl
    def harnessgrid_factor_levels():
        yield Diffstat
    """


@pytest.mark.parametrize("order", ["alpha first", "beta first"])
def test_two_third_party_plugins_clash_deterministically(
        tmp_path: Path, on_sys_path: AddPath, monkeypatch: pytest.MonkeyPatch,
        order: str) -> None:
    """Entry points load sorted by name, so the same one wins whatever the install (sys.path)
    order; naming the level names both plugins and both ways out."""
    alpha = make_plugin_dist(tmp_path / "a", "hg-alpha", "alpha_levels",
                             PAIR_LEVEL.replace("{who}", "alpha"))
    beta = make_plugin_dist(tmp_path / "b", "hg-beta", "beta_levels",
                            PAIR_LEVEL.replace("{who}", "beta"))
    for path in ([alpha, beta] if order == "alpha first" else [beta, alpha]):
        on_sys_path(path)
    with pytest.warns(PluginWarning):
        reg = PluginManager().registry()
    first, second = "alpha_levels (hg-alpha 0.1.0)", "beta_levels (hg-beta 0.1.0)"
    assert reg.origin[("factor level", "observation:diffstat")] == first
    assert reg.clashes[("factor level", "observation:diffstat")] == [first, second]
    assert reg.factor_levels[("observation", "diffstat")].description == "alpha's diffstat."
    with pytest.raises(PluginConflictError) as exc:
        reg.level("observation", "diffstat")
    text = str(exc.value)
    assert first in text
    assert second in text
    assert "HARNESSGRID_DISABLE_PLUGINS=alpha_levels" in text
    assert "HARNESSGRID_DISABLE_PLUGINS=beta_levels" in text
    monkeypatch.setenv("HARNESSGRID_DISABLE_PLUGINS", "alpha_levels")
    reg = PluginManager().registry()
    assert reg.level("observation", "diffstat").description == "beta's diffstat."
    assert not reg.problems


# -- item 5: per contribution, what was registered and what was skipped -------------------------

MIXED_PLUGIN = """
    from harnessgrid import hookimpl
    from harnessgrid.levels import ObservationLevel
    from harnessgrid.plugins.tasks.examples import load as load_examples
    from harnessgrid.registrations import TaskSuiteSpec


    class Fine(ObservationLevel):
        name = "fine"
        description = "Registers."

        def format(self, action, result):
            return result.output

        def format_error(self, error):
            return error.message


    class BadName(Fine):
        name = "Bad Name"


    @hookimpl
    def harnessgrid_factor_levels():
        yield Fine
        yield "not a class"
        yield BadName


    @hookimpl
    def harnessgrid_adapters():
        raise ValueError("no adapters today")


    @hookimpl
    def harnessgrid_task_suites():
        yield TaskSuiteSpec(name="mixed-suite", description="Registers.", load=load_examples)


    @hookimpl
    def harnessgrid_policy():  # misspelt: pluggy would never call it
        return []
    """
MIXED = "hg_mixed (hg-mixed 0.1.0)"


def test_each_contribution_is_registered_or_skipped_on_its_own(
        tmp_path: Path, on_sys_path: AddPath) -> None:
    """A raising hook skips what that hook returns, an invalid item skips itself; the rest of
    the plugin registers, and each problem names the contribution and why."""
    on_sys_path(make_plugin_dist(tmp_path, "hg-mixed", "hg_mixed", MIXED_PLUGIN))
    with pytest.warns(PluginWarning) as record:
        reg = PluginManager().registry()
    assert reg.origin[("factor level", "observation:fine")] == MIXED
    assert reg.origin[("task suite", "mixed-suite")] == MIXED
    problems = {p.contribution: p for p in reg.problems}
    assert set(problems) == {"harnessgrid_policy()", "harnessgrid_adapters()",
                             "factor level 'not a class'", "factor level observation:Bad Name"}
    hook = problems["harnessgrid_adapters()"]
    assert hook.kind == "hook"
    assert hook.plugin == MIXED
    assert "raised ValueError: no adapters today" in hook.error
    assert "other hooks are unaffected" in hook.error
    assert "did you mean harnessgrid_policies()" in problems["harnessgrid_policy()"].error
    assert "expected a FactorLevel subclass" in problems["factor level 'not a class'"].error
    assert "lower_snake_case" in problems["factor level observation:Bad Name"].error
    assert len(record) == 4
    assert all(MIXED in str(w.message) for w in record)
    assert "whole plugin" not in " ".join(str(w.message) for w in record)
    fate = {(c.label, c.registered) for c in reg.contributions if c.plugin == MIXED}
    assert fate == {("factor level observation:fine", True), ("task suite mixed-suite", True),
                    ("factor level 'not a class'", False),
                    ("factor level observation:Bad Name", False)}


def test_plugins_list_reports_per_contribution(tmp_path: Path) -> None:
    make_plugin_dist(tmp_path, "hg-mixed", "hg_mixed", MIXED_PLUGIN)
    make_plugin_dist(tmp_path, "hg-broken", "hg_broken", "import does_not_exist\n")
    make_plugin_dist(tmp_path, "hg-empty", "hg_empty", "def harnessgrid_adapters():\n    return []\n")
    env = _env(tmp_path)
    listed = _cli(env, "plugins", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    mine = [c for c in data["contributions"] if c["plugin"] == MIXED]
    assert {(c["kind"], c["name"], c["registered"]) for c in mine} >= {
        ("factor level", "observation:fine", True), ("task suite", "mixed-suite", True),
        ("factor level", "observation:Bad Name", False)}
    kinds = {(p["plugin"], p["contribution"]): p["kind"] for p in data["problems"]}
    assert kinds[(MIXED, "harnessgrid_adapters()")] == "hook"
    assert kinds[("hg_broken (hg-broken 0.1.0)", "")] == "load"
    empty = next(p for p in data["problems"] if p["plugin"] == "hg_empty (hg-empty 0.1.0)")
    assert "has no @hookimpl functions" in empty["error"]  # the decorator was forgotten
    table = _cli(env, "plugins", "list")
    assert table.returncode == 0, table.stderr
    assert "harnessgrid_adapters()" in table.stdout
    assert "no adapters today" in table.stdout
    assert f"{MIXED}: registered factor level observation:fine, task suite mixed-suite" \
        in table.stdout
    assert "hg_broken (hg-broken 0.1.0): registered nothing" in table.stdout
    assert "the whole plugin" in table.stdout  # the import failure skipped all of hg_broken


# -- item 6: levels and adapters validated, named when broken ----------------------------------

HALF_LEVELS = """
    from harnessgrid import hookimpl
    from harnessgrid.levels import ObservationLevel
    from harnessgrid.plugins.factors.workflow.react import ReactWorkflow


    class Half(ObservationLevel):
        name = "half"
        description = "Forgot format_error."

        def format(self, action, result):
            return result.output


    class NeedsArgs(ReactWorkflow):
        name = "needs_args"
        description = "Wants a constructor argument."

        def __init__(self, turns):
            self.turns = turns


    class NoProtocol(ReactWorkflow):
        name = "no_protocol"
        description = "Tells the oracle nothing."
        protocol = None


    class Whole(Half):
        name = "whole"
        description = "Complete."

        def format_error(self, error):
            return error.message


    @hookimpl
    def harnessgrid_factor_levels():
        yield Half
        yield NeedsArgs
        yield NoProtocol
        yield Whole
    """
HALF = "hg_half (hg-half 0.1.0)"


def test_incomplete_level_classes_are_skipped_at_registration(
        tmp_path: Path, on_sys_path: AddPath) -> None:
    on_sys_path(make_plugin_dist(tmp_path, "hg-half", "hg_half", HALF_LEVELS))
    with pytest.warns(PluginWarning):
        reg = get_registry()
    assert reg.level("observation", "whole").__module__ == "hg_half"
    problems = {p.contribution: p.error for p in reg.problems if p.plugin == HALF}
    assert "does not implement format_error() of ObservationLevel" in \
        problems["factor level observation:half"]
    assert "needs constructor arguments" in problems["factor level workflow:needs_args"]
    assert "not a WorkflowProtocol" in problems["factor level workflow:no_protocol"]
    with pytest.raises(PluginContributionError) as exc:
        hg.resolve_harness(LEVELS.format("half"))
    text = str(exc.value)
    assert HALF in text
    assert "observation:half" in text
    assert "format_error()" in text
    assert "HARNESSGRID_DISABLE_PLUGINS=hg_half" in text
    assert hg.resolve_harness(LEVELS.format("whole")).observation.name == "whole"


def test_incomplete_level_on_the_command_line(tmp_path: Path) -> None:
    make_plugin_dist(tmp_path, "hg-half", "hg_half", HALF_LEVELS)
    env = _env(tmp_path)
    listed = _cli(env, "plugins", "list")
    assert listed.returncode == 0, listed.stderr
    assert "factor level observation:half" in listed.stdout
    assert "does not implement format_error()" in listed.stdout
    assert _cli(env, "harness", "show", LEVELS.format("whole")).returncode == 0
    _assert_named_error(_cli(env, "harness", "show", LEVELS.format("half")),
                        HALF, "observation:half", "format_error()")


BAD_ADAPTERS = """
    from harnessgrid import hookimpl
    from harnessgrid.errors import ConfigError
    from harnessgrid.plugins.adapters.mini_bash import MiniBashHarness
    from harnessgrid.registrations import AdapterSpec


    class SyncStep(MiniBashHarness):
        name = "adapter:sync-step"

        def step(self, state, turn, env):  # not async
            return None


    class Good(MiniBashHarness):
        name = "adapter:good"


    def good(**options):
        if options:
            raise ConfigError(f"adapter:good takes no options, got {sorted(options)}")
        return Good()


    def explode(**options):
        raise RuntimeError("no shell here")


    @hookimpl
    def harnessgrid_adapters():
        yield AdapterSpec(name="not-a-harness", description="Returns a dict.",
                          create=lambda **options: {"name": "adapter:not-a-harness"})
        yield AdapterSpec(name="sync-step", description="A sync step.", create=SyncStep)
        yield AdapterSpec(name="explodes", description="create() raises.", create=explode)
        yield AdapterSpec(name="good", description="Fine.", create=good)
    """
BAD = "hg_bad (hg-bad 0.1.0)"


def test_adapters_are_checked_when_registered_and_when_created(
        tmp_path: Path, on_sys_path: AddPath) -> None:
    """A create that says what it makes (a class) is checked at registration; any create is
    checked on first use: an error naming the plugin, the adapter and what is wrong."""
    on_sys_path(make_plugin_dist(tmp_path, "hg-bad", "hg_bad", BAD_ADAPTERS))
    with pytest.warns(PluginWarning, match="step\\(\\) is not async"):
        reg = get_registry()
    assert "sync-step" not in reg.adapters
    with pytest.raises(PluginContributionError, match="step\\(\\) is not async"):
        hg.resolve_harness("adapter:sync-step")
    with pytest.raises(PluginContributionError) as exc:
        hg.resolve_harness("adapter:not-a-harness")
    text = str(exc.value)
    assert BAD in text
    assert "adapter:not-a-harness" in text
    assert "returned dict, which is not a harness" in text
    assert "no step() method" in text
    assert "HARNESSGRID_DISABLE_PLUGINS=hg_bad" in text
    with pytest.raises(PluginContributionError, match="RuntimeError: no shell here") as raised:
        hg.resolve_harness("adapter:explodes")
    assert BAD in str(raised.value)
    assert isinstance(raised.value.__cause__, RuntimeError)
    # A well-behaved adapter works, and its own ConfigError reaches the user unchanged.
    harness = hg.resolve_harness("adapter:good")
    task = hg.load_suite("examples").tasks()[0]
    from harnessgrid.policies.scripted import ScriptedPolicy

    assert asyncio.run(hg.run_episode(harness, task, ScriptedPolicy())).passed
    with pytest.raises(ConfigError, match="takes no options") as own:
        reg.adapter("good").create(colour="blue")
    assert not isinstance(own.value, PluginError)
    # What was found on use is listed with the rest.
    broken = {p.contribution for p in reg.problems if p.kind == "broken"}
    assert broken == {"adapter not-a-harness", "adapter explodes"}


def test_broken_adapters_on_the_command_line(tmp_path: Path) -> None:
    make_plugin_dist(tmp_path, "hg-bad", "hg_bad", BAD_ADAPTERS)
    env = _env(tmp_path)
    assert _cli(env, "plugins", "list").returncode == 0
    checked = _cli(env, "plugins", "list", "--check", "--json")
    assert checked.returncode == 1, checked.stderr  # --check fails when anything is wrong
    problems = {p["contribution"]: p for p in json.loads(checked.stdout)["problems"]}
    assert problems["adapter sync-step"]["kind"] == "invalid"
    assert problems["adapter not-a-harness"]["kind"] == "broken"
    assert "no step() method" in problems["adapter not-a-harness"]["error"]
    assert "RuntimeError: no shell here" in problems["adapter explodes"]["error"]
    assert "adapter good" not in problems
    _assert_named_error(_cli(env, "run", "--task", "examples/upper", "--harness",
                             "adapter:not-a-harness", "--policy", "scripted"),
                        BAD, "adapter:not-a-harness", "no step() method")
    clean = _cli(_env(), "plugins", "list", "--check")
    assert clean.returncode == 0, clean.stdout + clean.stderr  # the built-ins pass the check


def test_the_harness_check_is_read_from_the_protocol() -> None:
    """Found: the registry checked adapters against its own hand-written list of Harness
    methods, which would not follow a change to the protocol. Each member the protocol
    declares is now checked: an object missing any one of them is told which."""
    import typing

    from harnessgrid.harness import Harness
    from harnessgrid.plugin_system.composition import compose
    from harnessgrid.plugin_system.registry import harness_contract, harness_problems

    methods, awaited, attributes = harness_contract()
    assert {"tools", "start", "view", "step", "render_action"} <= set(methods)
    assert "step" in awaited
    assert attributes == typing.get_type_hints(Harness)
    whole = compose(hg.FactorSpace.default().parse("S0-T0-O0-C0-W0"))
    assert harness_problems(whole) == []

    class Without:
        def __init__(self, missing: str) -> None:
            self.missing = missing

        def __getattr__(self, name: str) -> object:
            if name == self.missing:
                raise AttributeError(name)
            return getattr(whole, name)

    for member in (*methods, *attributes):
        problems = harness_problems(Without(member))
        assert [p for p in problems if p.startswith(f"no {member}")], (member, problems)
