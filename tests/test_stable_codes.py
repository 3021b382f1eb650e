"""Harness codes that mean the same harness on every machine.

A code's numbers name the paper's 15 built-in levels and nothing else; a plugin level is
written by name (``S0-T0-O0-C0-W=checklist``), so its code does not depend on which other
plugins a machine has; a plugin's own grid is a named space (``micro:S0-T1-O2-C0-W1``); results
record harnesses in these forms, and a results file written with the old positional codes for
plugin levels is refused instead of being read as another harness.

Two third-party plugins are installed through real entry points: ``checklist`` (a workflow
level) and ``audit`` (a workflow level whose name sorts before it, and an observation level).
The micro plugin ships with harnessgrid. "Machines" with fewer plugins are this process with
``HARNESSGRID_DISABLE_PLUGINS`` naming the entry points it lacks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_dist import make_plugin_dist

import harnessgrid as hg
from harnessgrid.errors import ConfigError
from harnessgrid.evaluation.manifest import Manifest, write_manifest
from harnessgrid.evaluation.plan import resolve_settings, split_harnesses
from harnessgrid.evaluation.report import load_report
from harnessgrid.evaluation.results import EvalResult
from harnessgrid.evaluation.run import EvalConfig, evaluate
from harnessgrid.evaluation.store import EvalStore
from harnessgrid.plugin_system.composition import harness_address, registry_space, resolve_config
from harnessgrid.plugin_system.registry import (
    DISABLE_ENV,
    PluginWarning,
    get_registry,
    reset_registry,
)
from harnessgrid.plugins.micro import MICRO_LEVELS, MICRO_SPACE, micro_address
from harnessgrid.space import DEFAULT_LEVELS, FACTORS, FactorSpace

TESTS = Path(__file__).parent

CHECKLIST = '''
from harnessgrid import hookimpl
from harnessgrid.plugins.factors.workflow.react import ReactWorkflow


class Checklist(ReactWorkflow):
    name = "checklist"
    description = "React, with the instruction to tick off the task's requirements."


@hookimpl
def harnessgrid_factor_levels():
    yield Checklist
'''

AUDIT = '''
from harnessgrid import hookimpl
from harnessgrid.plugins.factors.observation.raw import RawObservation
from harnessgrid.plugins.factors.workflow.react import ReactWorkflow


class Audit(ReactWorkflow):
    name = "audit"
    description = "React under another name, sorting before checklist."


class Diffstat(RawObservation):
    name = "diffstat"
    description = "Raw output under another name (a plugin's observation level)."


@hookimpl
def harnessgrid_factor_levels():
    yield Audit
    yield Diffstat
'''

CHECKLIST_CODE = "S0-T0-O0-C0-W=checklist"
CHECKLIST_LEVELS = ("system_prompt=minimal,tool_interface=function_calling,observation=raw,"
                    "context=full,workflow=checklist")
#: The entry points a machine may lack: another plugin's, the micro plugin's, or both.
MACHINES = [(), ("audit",), ("micro",), ("audit", "micro")]


def install(root: Path) -> list[Path]:
    return [make_plugin_dist(root / "checklist", "hg-checklist", "hg_checklist", CHECKLIST,
                             entry_point="checklist"),
            make_plugin_dist(root / "audit", "hg-audit", "hg_audit", AUDIT, entry_point="audit")]


@pytest.fixture
def installed(tmp_path: Path, on_sys_path: Callable[[Path], None]) -> None:
    for root in install(tmp_path):
        on_sys_path(root)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    roots = install(tmp_path_factory.mktemp("stable"))
    inherited = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
    return {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, [*roots, TESTS, *inherited])),
            "COLUMNS": "250"}


def machine(monkeypatch: pytest.MonkeyPatch, lacking: tuple[str, ...]) -> None:
    """This process as a machine without the plugins of entry points ``lacking``."""
    monkeypatch.setenv(DISABLE_ENV, ",".join(lacking))
    reset_registry()


def hg_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harnessgrid", *args], env=env,
                          capture_output=True, text=True, timeout=300)


# -- codes in the paper's space, plugin levels by name -----------------------------------------

@pytest.mark.parametrize("lacking", MACHINES, ids=lambda m: "without " + "+".join(m or ["-"]))
@pytest.mark.usefixtures("installed")
def test_a_plugin_level_has_one_code_on_every_machine(monkeypatch: pytest.MonkeyPatch,
                                                      lacking: tuple[str, ...]) -> None:
    machine(monkeypatch, lacking)
    registered = get_registry().factor_levels
    assert (("workflow", "micro_check") in registered) == ("micro" not in lacking)
    assert (("workflow", "audit") in registered) == ("audit" not in lacking)
    assert resolve_config(CHECKLIST_LEVELS).code == CHECKLIST_CODE
    config = resolve_config(CHECKLIST_CODE)
    assert config.level("workflow") == "checklist"
    assert config.code == CHECKLIST_CODE
    assert resolve_config("s0-t0-o0-c0-w=checklist").code == CHECKLIST_CODE  # letters: any case
    assert hg.resolve_harness(CHECKLIST_CODE).name == CHECKLIST_CODE
    assert hg.resolve_harness(CHECKLIST_LEVELS).name == CHECKLIST_CODE
    # a space holding every registered level codes it the same way
    everything = registry_space(all_levels=True)
    assert everything.from_mapping(config.levels).code == CHECKLIST_CODE


@pytest.mark.usefixtures("installed")
def test_the_papers_243_codes_never_change() -> None:
    assert get_registry().spaces["micro"].space == MICRO_SPACE  # plugins are installed
    for config in FactorSpace.default():
        read = resolve_config(config.code)
        assert read.levels == config.levels
        assert read.code == config.code
        assert read.space == FactorSpace.default()
    assert hg.harness_space() == FactorSpace.default()
    assert hg.resolve_harness("S1-T0-O2-C1-W0").name == "S1-T0-O2-C1-W0"


@pytest.mark.parametrize(("code", "part"), [("S0-T0-O0-C0-W6", "W6"), ("S0-T0-O3-C0-W0", "O3"),
                                            ("S3-T0-O0-C0-W0", "S3")])
@pytest.mark.usefixtures("installed")
def test_numbers_beyond_the_built_ins_are_refused_naming_the_plugin_levels(
        code: str, part: str) -> None:
    with pytest.raises(ConfigError, match=f"{part} is not a level") as exc:
        resolve_config(code)
    message, hint = str(exc.value), exc.value.hint or ""
    assert "built-in levels" in message
    assert "write a plugin level by name" in hint
    assert "micro:CODE" in hint
    assert "plugins list" in hint
    if part == "W6":
        assert "W=audit, W=checklist, W=micro_check" in hint
        assert "S0-T0-O0-C0-W=audit" in hint  # the code rewritten with a level's name
    if part == "O3":
        assert "O=diffstat" in hint
    for resolve in (hg.resolve_harness, lambda c: resolve_settings(["in-space"], harnesses=[c]),
                    lambda c: resolve_settings(["original"], original=c)):
        with pytest.raises(ConfigError, match=f"{part} is not a level"):
            resolve(code)


def test_codes_of_spaces_over_the_papers_levels_are_stable() -> None:
    extended = FactorSpace.default().extend("observation", "diffstat")
    positional = extended.parse("S1-T0-O3-C1-W0")  # numbers are positions in an explicit space
    assert positional == extended.parse("S1-T0-O=diffstat-C1-W0")
    assert positional.code == "S1-T0-O=diffstat-C1-W0"
    assert str(positional) == positional.code
    other = FactorSpace.default().extend("observation", "aaa").extend("observation", "diffstat")
    assert other.parse("S1-T0-O4-C1-W0").code == positional.code
    assert FactorSpace.default().parse("S2-T1-O0-C2-W1").code == "S2-T1-O0-C2-W1"
    # a space that does not start with the paper's levels numbers its own
    assert MICRO_SPACE.parse("S0-T1-O2-C0-W1").code == "S0-T1-O2-C0-W1"
    with pytest.raises(ConfigError, match="level 'diffstat' is not in factor observation"):
        FactorSpace.default().parse("S0-T0-O=diffstat-C0-W0")
    with pytest.raises(ConfigError, match="should be O<level> or O=<level name>"):
        FactorSpace.default().parse("S0-T0-X=diffstat-C0-W0")


@pytest.mark.parametrize("name", ["diff-stat", "a=b", "micro:lines", "a,b", "two words", ""])
def test_level_names_cannot_hold_what_separates_a_code(name: str) -> None:
    levels = {f: list(DEFAULT_LEVELS[f]) for f in FACTORS}
    levels["observation"].append(name)
    with pytest.raises(ConfigError, match="invalid space definition"):
        FactorSpace.from_levels(levels)


# -- named spaces ------------------------------------------------------------------------------

def test_the_micro_plugin_registers_a_named_space_not_paper_levels() -> None:
    registry = get_registry()
    assert registry.space("micro").space == MICRO_SPACE
    config = resolve_config("micro:S1-T2-O0-C2-W1")
    assert config.space == MICRO_SPACE
    assert config.levels == {f: MICRO_LEVELS[f][i]
                             for f, i in zip(FACTORS, (1, 2, 0, 2, 1), strict=True)}
    assert harness_address(config) == "micro:S1-T2-O0-C2-W1" == micro_address("S1-T2-O0-C2-W1")
    harness = hg.resolve_harness("micro:S1-T2-O0-C2-W1")
    assert harness.name == "micro:S1-T2-O0-C2-W1"
    # the same plain code is the paper's harness, micro installed or not
    assert resolve_config("S1-T2-O0-C2-W1").levels == FactorSpace.default().parse(
        "S1-T2-O0-C2-W1").levels
    # micro levels stay registered: a level list or a named part may use them
    assert resolve_config("S0-T0-O=micro_lines-C0-W0").code == "S0-T0-O=micro_lines-C0-W0"
    with pytest.raises(ConfigError, match="no plugin registers a space named 'nano'") as exc:
        resolve_config("nano:S0-T0-O0-C0-W0")
    assert "micro:CODE" in (exc.value.hint or "")
    with pytest.raises(ConfigError, match=r"factor workflow has levels 0\.\.2, got 3"):
        resolve_config("micro:S0-T0-O0-C0-W3")


def test_named_spaces_and_level_names_are_checked_at_registration(tmp_path: Path,
                                                   on_sys_path: Callable[[Path], None]) -> None:
    source = '''
from harnessgrid import hookimpl
from harnessgrid.plugins.factors.observation.raw import RawObservation
from harnessgrid.registrations import SpaceSpec
from harnessgrid.space import FactorSpace

BROKEN = FactorSpace.default().extend("observation", "nowhere")


class Dashed(RawObservation):
    name = "diff-stat"  # a code could not tell this name from the next part
    description = "Raw output under a name with a dash."


@hookimpl
def harnessgrid_factor_levels():
    yield Dashed


@hookimpl
def harnessgrid_spaces():
    yield SpaceSpec(name="broken", space=BROKEN, description="Names an unregistered level.")
    yield SpaceSpec(name="adapter", space=FactorSpace.default(), description="Reserved.")
    yield SpaceSpec(name="paper", space=FactorSpace.default(), description="The paper's.")
'''
    on_sys_path(make_plugin_dist(tmp_path, "hg-spaces", "hg_spaces", source))
    with pytest.warns(PluginWarning, match="harnessgrid plugin 'hg_spaces "):
        registry = get_registry()
    assert set(registry.spaces) == {"micro", "micro4", "paper"}
    errors = {p.contribution: p.error for p in registry.problems}
    assert "observation:nowhere" in errors["space broken"]
    assert "reserved" in errors["space adapter"]
    assert "lower_snake_case" in errors["factor level observation:diff-stat"]
    with pytest.raises(ConfigError, match="space 'broken' of plugin"):
        resolve_config("broken:S0-T0-O0-C0-W0")
    paper = resolve_config("paper:S1-T1-O1-C1-W1")
    assert harness_address(paper) == "S1-T1-O1-C1-W1"  # a space over the paper's levels


# -- results record stable addresses -----------------------------------------------------------

@pytest.mark.usefixtures("installed")
def test_eval_settings_record_stable_addresses() -> None:
    named = f"{CHECKLIST_CODE},{CHECKLIST_LEVELS},micro:S0-T1-O2-C0-W1;S=micro_terse-T0-O0-C0-W0"
    assert split_harnesses(named) == [CHECKLIST_CODE, CHECKLIST_LEVELS, "micro:S0-T1-O2-C0-W1",
                                      "S=micro_terse-T0-O0-C0-W0"]
    listed = CHECKLIST_LEVELS.replace("observation=raw", "observation=diffstat")
    settings = resolve_settings(["in-space", "original"],
                                harnesses=[CHECKLIST_CODE, listed, "S1-T1-O1-C1-W1"],
                                original=CHECKLIST_LEVELS)
    assert settings == {"in-space": [CHECKLIST_CODE, "S0-T0-O=diffstat-C0-W=checklist",
                                     "S1-T1-O1-C1-W1"],
                        "original": [CHECKLIST_CODE]}
    micro = resolve_settings(["in-space", "original"], space=MICRO_SPACE, original="oa")
    assert len(micro["in-space"]) == 18
    assert len(micro["original"]) == 18
    assert all(h.startswith("micro:") for h in micro["in-space"] + micro["original"])
    assert resolve_settings(["in-space"], space=MICRO_SPACE, harnesses=["S0-T1-O0-C0-W0"]) == {
        "in-space": ["micro:S0-T1-O0-C0-W0"]}


@pytest.mark.usefixtures("installed")
def test_results_and_reports_name_plugin_levels_by_name(tmp_path: Path) -> None:
    config = EvalConfig(policy="scripted", suites=("examples",), settings=("in-space",),
                        harnesses=(CHECKLIST_LEVELS,), runs=1, limit=1)
    outcome = evaluate(config, tmp_path / "eval")
    (result,) = outcome.results
    assert result.harness == CHECKLIST_CODE
    assert result.harness_name == CHECKLIST_CODE
    assert result.levels is not None
    assert result.levels["workflow"] == "checklist"
    manifest = json.loads((tmp_path / "eval" / "manifest.json").read_text())
    assert manifest["settings"] == {"in-space": [CHECKLIST_CODE]}
    report = load_report(tmp_path / "eval")
    assert {c.harness for c in report.configurations} == {CHECKLIST_CODE}
    assert evaluate(config, tmp_path / "eval").skipped == 1  # resumes: the same address


def _old_store(out: Path, harness: str, levels: dict[str, str]) -> None:
    """An evaluation directory as an older harnessgrid wrote it."""
    with EvalStore(out) as store:
        store.extend([EvalResult(setting="in-space", suite="examples", task="upper",
                                 harness=harness, run=0, levels=levels,
                                 termination="finished", passed=True, score=1.0)])
    write_manifest(out, Manifest(policy="scripted", settings={"in-space": [harness]}))


@pytest.mark.usefixtures("installed")
def test_results_written_with_positional_plugin_codes_are_refused(tmp_path: Path) -> None:
    paper = {f: DEFAULT_LEVELS[f][0] for f in FACTORS}
    old = tmp_path / "old"  # W3 was checklist on the machine that wrote it
    _old_store(old, "S0-T0-O0-C0-W3", {**paper, "workflow": "checklist"})
    with pytest.raises(ConfigError, match="older harnessgrid") as exc:
        load_report(old)
    assert "S0-T0-O0-C0-W3 (numbers a plugin level by position; it ran "\
           "S0-T0-O0-C0-W=checklist)" in str(exc.value)
    assert "fresh --out DIR" in (exc.value.hint or "")
    config = EvalConfig(policy="scripted", suites=("examples",), settings=("in-space",),
                        harnesses=(CHECKLIST_CODE,), runs=1, limit=1)
    with pytest.raises(ConfigError, match="older harnessgrid"):
        evaluate(config, old)  # resuming it would mix in another harness's results
    # a micro code written without its space name reads today as the paper's harness
    micro = tmp_path / "micro"
    _old_store(micro, "S0-T1-O0-C0-W0", MICRO_SPACE.parse("S0-T1-O0-C0-W0").levels)
    with pytest.raises(ConfigError, match="but reads today as S0-T1-O0-C0-W0"):
        load_report(micro)


# -- what users see ------------------------------------------------------------------------------

def test_plugins_list_shows_the_papers_levels_plugin_levels_and_named_spaces(
        env: dict[str, str]) -> None:
    out = hg_cli(env, "plugins", "list", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["registrations"]
    codes = {r["name"]: r["code"] for r in rows if r["kind"] == "factor level"}
    for factor, names in DEFAULT_LEVELS.items():
        letter = factor[0].upper()
        assert [codes[f"{factor}:{n}"] for n in names] == [f"{letter}{i}" for i in range(3)]
    assert codes["workflow:checklist"] == "W=checklist"
    assert codes["workflow:audit"] == "W=audit"
    assert codes["observation:micro_lines"] == "O=micro_lines"
    spaces = {r["name"]: r for r in rows if r["kind"] == "space"}
    assert set(spaces) == {"micro", "micro4"}  # micro4: the demo's unseen fourth levels
    assert spaces["micro"]["levels"] == {f: list(v) for f, v in MICRO_LEVELS.items()}
    assert spaces["micro4"]["levels"]["tool_interface"] == [
        *MICRO_LEVELS["tool_interface"], "micro_calls"]
    text = hg_cli(env, "plugins", "list")
    assert text.returncode == 0, text.stderr
    table = text.stdout
    assert "factor levels of the paper's space (15;" in table
    assert "plugin levels (20;" in table  # the micro plugin's 15 + 2 unseen, and 3 others
    assert "named spaces (2;" in table
    lines = table.splitlines()
    assert any(line.split()[:2] == ["W2", "workflow:verify_recover"] for line in lines)
    assert any(line.split()[:2] == ["W=checklist", "workflow:checklist"] for line in lines)
    assert any(line.split()[:1] == ["micro:"] for line in lines)
    assert table.index("W2 ") < table.index("W=audit") < table.index("named spaces")


def test_the_command_line_reads_and_writes_stable_codes(env: dict[str, str]) -> None:
    run = hg_cli(env, "run", "--task", "examples/upper", "--harness", CHECKLIST_CODE,
                 "--policy", "scripted", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["harness"] == CHECKLIST_CODE
    shown = json.loads(hg_cli(env, "harness", "show", "micro:S0-T1-O2-C0-W1", "--json").stdout)
    assert shown["harness"] == "micro:S0-T1-O2-C0-W1"
    assert shown["config"]["tool_interface"] == MICRO_LEVELS["tool_interface"][1]
    refused = hg_cli(env, "run", "--task", "examples/upper", "--harness", "S0-T0-O0-C0-W6",
                     "--policy", "scripted")
    assert refused.returncode == 2
    assert "Traceback" not in refused.stderr
    assert "W6 is not a level of workflow" in refused.stderr
    assert "W=checklist" in refused.stderr


def test_rollouts_name_a_named_space_configuration_by_its_address() -> None:
    """A training step's jobs (and so its step log and episode ids) name a micro
    configuration ``micro:S0-T1-...``: a bare ``S0-T1-...`` reads as the paper's levels. A
    paper configuration keeps its code; each name resolves back to the same harness."""
    from harnessgrid.designs import orthogonal_design
    from harnessgrid.designs.schedule import Schedule
    from harnessgrid.engine.api import resolve_harness
    from harnessgrid.plugins.micro import MICRO_SPACE
    from harnessgrid.trainer.rollout import plan_step

    tasks = [f"t{i}" for i in range(4)]
    micro = plan_step(Schedule(orthogonal_design(MICRO_SPACE), tasks, k=2, seed=0), 0, 2, 0)
    assert micro
    assert all(job.harness.startswith("micro:") for job in micro)
    assert all(job.anchor.startswith("micro:") for job in micro)
    job = micro[0]
    levels = MICRO_SPACE.parse(job.harness.partition(":")[2]).levels
    assert resolve_harness(job.harness, MICRO_SPACE).factor_levels() == levels
    paper = plan_step(Schedule(orthogonal_design(hg.FactorSpace.default()), tasks, k=2, seed=0),
                      0, 2, 0)
    assert all(":" not in job.harness for job in paper)
