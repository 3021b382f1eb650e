"""Harnesses of a space extended by plugins, named from the command line: a plugin level is
written by name in a code (``S0-T0-O=diffstat-C0-W=checklist``), level lists are accepted
wherever a harness is, and designs over the extension print the same codes. (That a code means
the same harness whatever other plugins are installed is pinned in test_stable_codes.py.)

The plugin is a real installed-looking distribution (``plugin_dist.write_dist_info``): a fourth
observation level, ``diffstat``, a fifth, ``tally``, and a fourth workflow level,
``checklist``. The subprocess tests run the CLI with it on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from plugin_dist import write_dist_info

import harnessgrid as hg
from harnessgrid.errors import ConfigError
from harnessgrid.evaluation.plan import resolve_settings, split_harnesses
from harnessgrid.plugin_system.composition import (
    config_in,
    harness_address,
    level_order,
    parse_level_list,
    registry_space,
    resolve_config,
)
from harnessgrid.space import DEFAULT_LEVELS, FACTORS, FactorSpace, stable_code

TESTS = Path(__file__).parent
MODULE = "hg_extended_levels"
PLUGIN = '''
from harnessgrid import hookimpl
from harnessgrid.levels import ObservationLevel
from harnessgrid.models import Action, FormatError, ToolResult
from harnessgrid.plugins.factors.workflow.react import ReactWorkflow


class Diffstat(ObservationLevel):
    name = "diffstat"
    description = "Shows only whether a call worked and how much it printed."

    def format(self, action: Action, result: ToolResult) -> str:
        if result.error:
            return f"{action.kind} failed: {result.error}"
        text = result.output + result.stderr
        status = "ok" if result.ok else f"failed (exit {result.exit_code})"
        first = text.splitlines()[0][:200] if text else ""
        return f"{action.kind} {status}: {text.count(chr(10))} lines; first: {first}"

    def format_error(self, error: FormatError) -> str:
        return f"call rejected: {error.message}"


class Tally(Diffstat):
    name = "tally"
    description = "Only the number of characters a call printed."

    def format(self, action: Action, result: ToolResult) -> str:
        if result.error:
            return f"error: {result.error}"
        return f"{len(result.output)} characters" + (result.output if action.kind == "read"
                                                     else "")


class Checklist(ReactWorkflow):
    name = "checklist"
    description = "React, with the instruction to tick off the task's requirements."

    def prompt_section(self) -> str:
        return ("Before finishing, go through the task's requirements one by one. "
                + super().prompt_section())


@hookimpl
def harnessgrid_factor_levels():
    yield Diffstat
    yield Tally
    yield Checklist
'''
EXTRA = ["observation:diffstat", "workflow:checklist"]
LEVEL_LIST = ("system_prompt=minimal,tool_interface=xml_tags,observation=diffstat,"
              "context=full,workflow=checklist")


def install(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{MODULE}.py").write_text(textwrap.dedent(PLUGIN))
    return write_dist_info(root, "hg-extended-levels", {"extended_levels": MODULE})


@pytest.fixture
def installed(tmp_path: Path, on_sys_path: Callable[[Path], None]) -> FactorSpace:
    """The plugin installed in this process; returns the space of every registered level."""
    on_sys_path(install(tmp_path / "plugin"))
    return registry_space(all_levels=True)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = install(tmp_path_factory.mktemp("extended"))
    return {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{TESTS}", "COLUMNS": "200"}


def hg_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harnessgrid", *args], env=env,
                          capture_output=True, text=True, timeout=300)


def ok(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 0, out.stderr
    return out.stdout


def index_of(space: FactorSpace, factor: str, level: str) -> int:
    return space.factor(factor).levels.index(level)


def code_of(**levels: str) -> str:
    """The code of the built-in level 0 everywhere except ``levels`` (plugin levels by name)."""
    return stable_code({f: DEFAULT_LEVELS[f][0] for f in FACTORS} | levels)


# -- spaces of registered levels and the one resolution function ------------------------------

def test_builtins_first_then_every_other_level_by_name(installed: FactorSpace) -> None:
    for factor in installed.factors:
        assert factor.levels[:3] == DEFAULT_LEVELS[factor.name]
        rest = factor.levels[3:]
        assert list(rest) == sorted(rest)
        assert sorted(factor.levels, key=lambda n, f=factor.name: level_order(f, n)) == list(
            factor.levels)
    # the registry's own listing (what `plugins list` prints) has the same order per factor
    registered = [key for key in hg.get_registry().factor_levels]
    for factor in FACTORS:
        names = [n for f, n in registered if f == factor]
        assert sorted(names, key=lambda n, f=factor: level_order(f, n)) == list(
            installed.factor(factor).levels)
    obs = installed.factor("observation").levels
    assert obs.index("diffstat") < obs.index("tally")
    # the paper's codes name the same built-ins whether or not plugins are installed
    for code in ("S0-T0-O0-C0-W0", "S1-T2-O2-C1-W0", "S2-T1-O1-C2-W2"):
        assert resolve_config(code).levels == FactorSpace.default().parse(code).levels
    # and a space of every registered level writes a plugin level by name
    config = installed.from_mapping(parse_level_list(LEVEL_LIST))
    assert config.code == "S0-T1-O=diffstat-C0-W=checklist"


def test_codes_and_level_lists_resolve_alike(installed: FactorSpace) -> None:
    code = code_of(tool_interface="xml_tags", observation="diffstat", workflow="checklist")
    config = resolve_config(code)
    assert config.levels == parse_level_list(LEVEL_LIST)
    assert resolve_config(LEVEL_LIST).code == code  # a level list is named by its code
    assert resolve_config(f"  {code.lower()} ").code == code
    harness = hg.resolve_harness(LEVEL_LIST)
    assert harness.name == code
    assert hg.resolve_harness(code).name == code
    # an explicit space reads codes positionally, as before
    default = FactorSpace.default()
    assert resolve_config("S0-T1-O2-C0-W0", default).space == default
    with pytest.raises(ConfigError, match=r"factor observation has levels 0\.\.2, got 3"):
        resolve_config("S0-T0-O3-C0-W0", default)
    # a level list outside an explicit space lies in the harness space
    assert resolve_config(LEVEL_LIST, default).code == code


def test_with_levels_order_does_not_change_codes(installed: FactorSpace) -> None:
    a = registry_space(["workflow:checklist", "observation:tally", "observation:diffstat"])
    b = registry_space(["observation:diffstat", "observation:tally", "workflow:checklist"])
    assert a == b
    assert a.factor("observation").levels[3:] == ("diffstat", "tally")
    # a design space that skips a registered level prints codes every command reads back
    skip = registry_space(["observation:tally"])
    config = skip.from_mapping({**{f: DEFAULT_LEVELS[f][0] for f in FACTORS},
                                "observation": "tally"})
    assert skip.parse("S0-T0-O3-C0-W0") == config  # numbered within its own space ...
    assert config.code == code_of(observation="tally") == "S0-T0-O=tally-C0-W0"  # ... named
    assert harness_address(config) == config.code
    assert resolve_config(config.code).levels == config.levels
    assert config_in(resolve_config(config.code), skip) == config
    with pytest.raises(ConfigError, match="observation:diffstat, which this space does not "
                                          "hold") as exc:
        config_in(resolve_config(code_of(observation="diffstat")), skip)
    assert "--with observation:diffstat" in (exc.value.hint or "")


@pytest.mark.parametrize(("spec", "message"), [
    ("system_prompt=minimal,tool_interface=xml_tags", "no level for observation, context"),
    ("system_prompt=minimal,system_prompt=stepwise", "factor 'system_prompt' is given twice"),
    ("colour=red,system_prompt=minimal", "unknown factor 'colour'"),
    ("system_prompt=minimal,xml_tags", "'xml_tags' is not FACTOR=LEVEL"),
    ("system_prompt=nope,tool_interface=xml_tags,observation=raw,context=full,workflow=react",
     "no plugin provides level 'nope' of factor 'system_prompt'"),
    ("adapter:claude-code", "is an adapter, not a configuration"),
    ("S0-T0-O0-C0", "expected 5 parts"),
])
def test_bad_names_are_config_errors(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_config(spec)


def test_split_harnesses_keeps_level_lists_whole() -> None:
    text = f"S0-T0-O0-C0-W0,{LEVEL_LIST}, S1-T1-O1-C1-W1"
    assert split_harnesses(text) == ["S0-T0-O0-C0-W0", LEVEL_LIST, "S1-T1-O1-C1-W1"]
    assert split_harnesses(f"{LEVEL_LIST};{LEVEL_LIST}") == [LEVEL_LIST, LEVEL_LIST]
    assert split_harnesses(f"{LEVEL_LIST},{LEVEL_LIST}") == [LEVEL_LIST, LEVEL_LIST]
    assert split_harnesses(None) == []
    assert split_harnesses(["a,b", "c"]) == ["a", "b", "c"]


def test_eval_settings_read_plugin_levels_by_name(installed: FactorSpace) -> None:
    code = code_of(observation="diffstat", workflow="checklist")
    settings = resolve_settings(["in-space", "original"], harnesses=[code, LEVEL_LIST],
                                original=LEVEL_LIST)
    listed = resolve_config(LEVEL_LIST).code
    assert settings == {"in-space": [code, listed], "original": [listed]}
    default = resolve_settings(["in-space"])["in-space"]  # the paper's held-out 18, unchanged
    assert len(default) == 18
    assert all(FactorSpace.default().parse(c) for c in default)
    with pytest.raises(ConfigError, match="more than once"):
        resolve_settings(["in-space"], harnesses=[code, code.lower()])


# -- the command line, in fresh processes with the plugin installed ---------------------------

def extended_code(env: dict[str, str], **levels: str) -> str:
    """The code of ``levels`` put together from the code parts `plugins list` shows."""
    data = json.loads(ok(hg_cli(env, "plugins", "list", "--json")))
    parts = {item["name"]: item["code"] for item in data["registrations"]
             if item["kind"] == "factor level"}
    mapping = {f: DEFAULT_LEVELS[f][0] for f in FACTORS} | levels
    return "-".join(parts[f"{f}:{mapping[f]}"] for f in FACTORS)


def test_eval_and_harness_show_with_named_plugin_levels(env: dict[str, str],
                                                        tmp_path: Path) -> None:
    code = extended_code(env, observation="diffstat", workflow="checklist")
    assert code.split("-")[2:] == ["O=diffstat", "C0", "W=checklist"]
    out = tmp_path / "eval"
    ok(hg_cli(env, "eval", "--policy", "scripted", "--suites", "examples", "--settings",
              "in-space", "--harnesses", f"{code},{LEVEL_LIST}", "--runs", "1", "--out",
              str(out), "--quiet", "--no-plots"))
    report = json.loads((out / "report.json").read_text())
    listed = extended_code(env, tool_interface="xml_tags", observation="diffstat",
                           workflow="checklist")
    assert report["episodes"] == 4
    assert report["pass_rate"] == 1.0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["in-space"] == [code, listed]

    shown = json.loads(ok(hg_cli(env, "harness", "show", code, "--json")))
    assert shown["harness"] == code
    assert shown["config"]["observation"] == "diffstat"
    assert shown["config"]["workflow"] == "checklist"
    assert "go through the task's requirements" in shown["system_prompt"]
    cases = {o["case"]: o["content"] for o in shown["sample_observations"]}
    assert cases["success"].startswith("read ok: 3 lines")
    assert cases["failure"].startswith("shell failed (exit 1)")
    assert cases["long output"].startswith("shell ok: 600 lines")
    human = ok(hg_cli(env, "harness", "show", code))
    assert code in human
    assert "observation · failure" in human
    # the code `harness show` printed for a level list is read back by every command
    again = json.loads(ok(hg_cli(env, "harness", "show", LEVEL_LIST, "--json")))
    assert again["harness"] == listed
    assert json.loads(ok(hg_cli(env, "harness", "show", listed, "--json")))["config"] == \
        again["config"]


def test_run_and_tasks_validate_take_extended_codes(env: dict[str, str]) -> None:
    code = extended_code(env, observation="tally", workflow="checklist")
    data = json.loads(ok(hg_cli(env, "run", "--task", "examples/upper", "--harness", code,
                                "--policy", "scripted", "--json")))
    assert data["harness"] == code
    assert data["passed"] is True
    bad = hg_cli(env, "run", "--task", "examples/upper", "--harness",
                 "system_prompt=minimal,observation=diffstat", "--policy", "scripted")
    assert bad.returncode == 2
    assert "no level for tool_interface, context, workflow" in bad.stderr
    validated = hg_cli(env, "tasks", "validate", "examples", "--harness", LEVEL_LIST, "--json")
    assert validated.returncode == 0, validated.stderr
    assert json.loads(validated.stdout)["harness"] == extended_code(
        env, tool_interface="xml_tags", observation="diffstat", workflow="checklist")


def test_harness_diff_shows_observation_levels_differ(env: dict[str, str]) -> None:
    base = "S0-T0-O0-C0-W0"
    other = extended_code(env, observation="diffstat")
    text = ok(hg_cli(env, "harness", "diff", base, other))
    assert "observation: raw -> diffstat" in text
    assert "system_prompt: identical" in text  # the observation level adds no prompt text
    for case in ("success", "failure", "long output"):
        assert f"observation ({case}): identical" not in text
        assert f"{other} observation ({case})" in text
    assert "+shell failed (exit 1): 5 lines" in text
    same = ok(hg_cli(env, "harness", "diff", base, base))
    assert "observation (long output): identical" in same


def test_design_nearly_orthogonal_over_the_extension(env: dict[str, str]) -> None:
    extra = [arg for spec in EXTRA for arg in ("--with", spec)]
    rows = json.loads(ok(hg_cli(env, "design", "show", *extra, "--kind", "nearly-orthogonal",
                                "--runs", "18", "--json")))
    assert len(rows) == 18
    assert len({json.dumps(r, sort_keys=True) for r in rows}) == 18
    for factor, size in zip(FACTORS, (3, 3, 4, 3, 4), strict=True):
        counts = [sum(r[factor] == lv for r in rows) for lv in {r[factor] for r in rows}]
        assert len(counts) == size
        assert max(counts) - min(counts) <= 1
    diag = json.loads(ok(hg_cli(env, "design", "check", *extra, "--kind", "nearly-orthogonal",
                                "--runs", "18", "--json")))
    assert diag["n_runs"] == 18
    assert diag["levels_balanced"] is False
    assert all(lv["even"] for lv in diag["level_balance"])
    imbalance = diag["pair_imbalance"]
    assert 0 < imbalance["max_abs_deviation"] < 1
    assert imbalance["chi_square"] > 0
    human = hg_cli(env, "design", "check", *extra, "--kind", "nearly-orthogonal", "--runs", "18")
    for text in ("pair imbalance: max / mean |count - expected|", "Cramer's V",
                 "level counts per factor", "5 5 4 4", "within one",
                 "24 runs balance every factor"):
        assert text in ok(human)
    shown = hg_cli(env, "design", "show", *extra, "--kind", "nearly-orthogonal", "--runs", "18")
    assert "24 runs balance every factor" in shown.stderr
    printed = re.findall(r"\bS\d+-T\d+-O(?:\d+|=\w+)-C\d+-W(?:\d+|=\w+)", ok(shown))
    assert len(printed) == 18
    assert len(set(printed)) == 18
    code = extended_code(env, observation="diffstat", workflow="checklist")
    held = json.loads(ok(hg_cli(env, "design", "holdout", *extra, "--kind", "nearly-orthogonal",
                                "--runs", "18", "--n", "12", "--json")))
    assert len(held) == 12
    assert not {json.dumps(r, sort_keys=True) for r in held} & {
        json.dumps(r, sort_keys=True) for r in rows}
    single = json.loads(ok(hg_cli(env, "design", "show", *extra, "--kind", "single",
                                  "--config", code, "--json")))
    assert single == [{**{f: DEFAULT_LEVELS[f][0] for f in FACTORS},
                       "observation": "diffstat", "workflow": "checklist"}]
    assert json.loads(ok(hg_cli(env, "design", "show", *extra, "--kind", "single", "--config",
                                LEVEL_LIST, "--json")))[0]["tool_interface"] == "xml_tags"
    for args, message in [(["--kind", "nearly-orthogonal"], "needs --runs N"),
                          (["--kind", "nearly-orthogonal", "--runs", "3"], "at least 4 runs"),
                          (["--kind", "oa", "--runs", "18"], "--runs 18 sets the size")]:
        bad = hg_cli(env, "design", "show", *extra, *args)
        assert bad.returncode == 2, bad.stderr
        assert message in bad.stderr, bad.stderr


def test_designs_print_codes_every_command_reads(env: dict[str, str]) -> None:
    """``--with observation:tally`` alone makes tally the design's fourth observation level;
    the printed code names it (``O=tally``), so the code can be pasted into `harness show`."""
    code = extended_code(env, observation="tally")
    shown = ok(hg_cli(env, "design", "show", "--with", "observation:tally", "--kind",
                      "single", "--config", code))
    assert code in shown
    assert "tally" in shown
    data = json.loads(ok(hg_cli(env, "harness", "show", code, "--json")))
    assert data["config"]["observation"] == "tally"
    preview = json.loads(ok(hg_cli(env, "schedule", "preview", "--with", "observation:tally",
                                   "--kind", "single", "--config", code, "--steps", "1",
                                   "--k", "1", "--pairing", "repeat",
                                   "--n-tasks", "2", "--tasks-per-step", "2", "--json")))
    assert {r["config"] for r in preview} == {code}


def test_trainer_config_names_designs_alike(installed: FactorSpace) -> None:
    from harnessgrid.trainer.config import config_from_mapping
    from harnessgrid.trainer.plan import build_design, build_space

    config = config_from_mapping({"model": "tiny:test", "design": "nearly-orthogonal",
                                  "design_size": 18, "with_levels": EXTRA})
    design = build_design(config, build_space(config))
    assert design.kind == "nearly_orthogonal"
    assert len(design) == 18
    for spec in (LEVEL_LIST, resolve_config(LEVEL_LIST).code):
        single: dict[str, Any] = {"model": "tiny:test", "design": "single", "harness": spec,
                                  "with_levels": EXTRA}
        config = config_from_mapping(single)
        (only,) = build_design(config, build_space(config)).configs
        assert only.levels == parse_level_list(LEVEL_LIST)


def test_plugins_list_shows_the_code_of_each_level(env: dict[str, str]) -> None:
    """The code part ``plugins list`` shows for a level is what a harness code reads back."""
    listed = json.loads(ok(hg_cli(env, "plugins", "list", "--json")))["registrations"]
    codes = {r["name"]: r["code"] for r in listed if r["kind"] == "factor level"}
    assert codes["observation:raw"] == "O0"
    assert codes["workflow:react"] == "W0"
    assert codes["observation:diffstat"] == "O=diffstat"
    code = "-".join([codes["system_prompt:minimal"], codes["tool_interface:function_calling"],
                     codes["observation:diffstat"], codes["context:full"],
                     codes["workflow:checklist"]])
    assert code == extended_code(env, observation="diffstat", workflow="checklist")
    table = ok(hg_cli(env, "plugins", "list"))
    assert any(line.split()[:2] == [codes["observation:diffstat"], "observation:diffstat"]
               for line in table.splitlines())
