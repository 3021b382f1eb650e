"""``design show|check|holdout`` and ``schedule preview`` through a tiny Typer app."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import typer
from plugin_dist import FOURTH_OBSERVATION_LEVEL, make_plugin_dist
from typer.testing import CliRunner, Result

from harnessgrid.cli.design_cmd import design_app, schedule_app
from harnessgrid.designs import full_design, orthogonal_design
from harnessgrid.errors import ConfigError
from harnessgrid.space import FactorSpace

SPACE = FactorSpace.default()
app = typer.Typer()
app.add_typer(design_app, name="design")
app.add_typer(schedule_app, name="schedule")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def as_json(*args: str) -> object:
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_show_prints_the_design() -> None:
    assert as_json("design", "show") == orthogonal_design(SPACE).as_dicts()
    local = as_json("design", "show", "--variant", "local")
    assert local == orthogonal_design(SPACE, variant="local").as_dicts()
    human = invoke("design", "show").output
    assert "S2-T2-O2-C1-W2" in human
    assert "18 configurations" in human
    assert "stepwise" in human
    assert as_json("design", "show", "--kind", "first-order")[2] == {  # type: ignore[index]
        "system_prompt": "stepwise", "tool_interface": "bash_only", "observation": "annotated",
        "context": "compact", "workflow": "verify_recover"}
    assert as_json("design", "show", "--kind", "full") == full_design(SPACE).as_dicts()
    assert len(as_json("design", "show", "--kind", "random", "--n", "5")) == 5  # type: ignore[arg-type]
    single = as_json("design", "show", "--kind", "single", "--config", "S1-T0-O2-C1-W0")
    assert single == [SPACE.parse("S1-T0-O2-C1-W0").levels]


@pytest.mark.parametrize(("args", "message"), [
    (["--kind", "grid"], "unknown design --kind 'grid'"),
    (["--kind", "single"], "--kind single needs --config"),
    (["--kind", "single", "--config", "S9"], "bad harness code"),
    (["--variant", "best"], "unknown --variant 'best'"),
    (["--kind", "random", "--n", "0"], "n=0"),
    (["--with", "observation"], "bad --with value 'observation'"),
    (["--with", "colour:red"], "unknown factor 'colour'"),
    (["--with", "observation:nope"], "no plugin provides level 'nope' of factor 'observation'"),
])
def test_bad_input_is_a_config_error(args: list[str], message: str) -> None:
    result = invoke("design", "show", *args)
    assert isinstance(result.exception, ConfigError)
    assert message in str(result.exception)


def test_check_reports_the_diagnostics() -> None:
    diag = as_json("design", "check")
    assert isinstance(diag, dict)
    assert diag["gwlp"] == [1.0, 0.0, 0.0, 5.0, 7.5, 0.0]
    assert diag["strength"] == 2
    assert diag["pair_balanced"] is True
    assert diag["nearest_ties"] == [10] * 18
    assert diag["hamming_histogram"] == [0, 0, 0, 90, 45, 18]
    human = invoke("design", "check").output
    for text in ("GWLP", "1, 0, 0, 5, 7.5, 0", "11 / 27", "system_prompt × tool_interface",
                 "2 2 2 / 2 2 2 / 2 2 2", "nearest neighbours"):
        assert text in human
    first = as_json("design", "check", "--kind", "first-order")
    assert first["strength"] == 1  # type: ignore[index]
    assert first["pair_balanced"] is False  # type: ignore[index]


def test_holdout_command() -> None:
    held = as_json("design", "holdout")
    assert isinstance(held, list)
    assert len(held) == 18
    assert not {json.dumps(r, sort_keys=True) for r in held} & {
        json.dumps(r, sort_keys=True) for r in orthogonal_design(SPACE).as_dicts()}
    assert as_json("design", "holdout", "--seed", "1") != held
    assert len(as_json("design", "holdout", "--n", "7", "--kind", "random",  # type: ignore[arg-type]
                       "--design-n", "30")) == 7
    bad = invoke("design", "holdout", "--n", "500")
    assert isinstance(bad.exception, ConfigError)
    assert "n=500" in str(bad.exception)


def test_schedule_preview() -> None:
    rows = as_json("schedule", "preview", "--steps", "4", "--tasks-per-step", "3",
                   "--n-tasks", "10")
    assert isinstance(rows, list)
    assert [r["step"] for r in rows] == [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3
    assert [r["distance"] for r in rows] == ([0] * 3 + [3] * 3) * 2
    assert rows[0]["task"] == rows[3]["task"]
    assert rows[0]["anchor"] == rows[3]["anchor"]
    repeat = as_json("schedule", "preview", "--k", "3", "--pairing", "repeat", "--steps", "3")
    assert {r["distance"] for r in repeat} == {0}  # type: ignore[union-attr,index]
    human = invoke("schedule", "preview", "--steps", "2", "--tasks-per-step", "2").output
    assert "k=2, pairing=hamming" in human
    assert "task-" in human
    bad = invoke("schedule", "preview", "--pairing", "nearest")
    assert isinstance(bad.exception, ConfigError)
    assert "unknown pairing" in str(bad.exception)
    assert isinstance(invoke("schedule", "preview", "--steps", "0").exception, ConfigError)


def test_with_a_third_party_level(tmp_path: Path,
                                  on_sys_path: Callable[[Path], None]) -> None:
    """An entry-point plugin's level joins the space; the OA over (3,3,4,3,3) has 36 runs."""
    make_plugin_dist(tmp_path, "hg-diffstat", "hg_diffstat", FOURTH_OBSERVATION_LEVEL)
    on_sys_path(tmp_path)
    rows = as_json("design", "show", "--with", "observation:diffstat")
    assert isinstance(rows, list)
    assert len(rows) == 36
    assert sum(r["observation"] == "diffstat" for r in rows) == 9
    assert as_json("design", "check", "--with", "observation:diffstat")["strength"] == 2  # type: ignore[index]


def test_without_a_registry_levels_are_taken_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "harnessgrid.plugin_system.registry", None)  # import fails
    rows = as_json("design", "show", "--kind", "first-order", "--with", "workflow:custom")
    assert [r["workflow"] for r in rows] == ["react", "plan_execute", "verify_recover", "custom"]  # type: ignore[index]


def test_module_import_is_light() -> None:
    script = ("import sys, harnessgrid.cli.design_cmd\n"
              "print(sorted(m for m in ('numpy', 'oapackage', 'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_a_usage_mistake_says_error_like_every_other_mistake() -> None:
    """Found: ``design show --kind single --config`` (no value) printed click's "Error:",
    where every other mistake prints "error:" with a hint."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    for args in (["--kind", "single", "--config"], ["--bogus"], ["--kind", "single"]):
        done = subprocess.run([sys.executable, "-m", "harnessgrid", "design", "show", *args],
                              capture_output=True, text=True, timeout=120, env=env,
                              check=False)
        assert done.returncode == 2, done.stderr
        assert "error:" in done.stderr, (args, done.stderr)
        assert "Error:" not in done.stderr, (args, done.stderr)
