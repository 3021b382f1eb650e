"""The plugin manager, with real entry-point discovery of third-party plugin distributions."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import busy_machine
import pytest
from plugin_dist import FOURTH_OBSERVATION_LEVEL, make_plugin_dist

import harnessgrid
from harnessgrid.errors import ConfigError, PluginError
from harnessgrid.plugin_system.composition import registry_space, resolve_levels
from harnessgrid.plugin_system.plugin_template import check_plugin_name
from harnessgrid.plugin_system.registry import PluginManager, PluginWarning, get_registry
from harnessgrid.space import FACTORS, FactorSpace

AddPath = Callable[[Path], None]


def test_entry_point_plugin_adds_fourth_observation_level(tmp_path: Path,
                                                          on_sys_path: AddPath) -> None:
    """A third-party distribution's entry point is discovered and its level registered."""
    on_sys_path(make_plugin_dist(tmp_path, "hg-diffstat", "hg_diffstat", FOURTH_OBSERVATION_LEVEL))
    reg = get_registry()
    cls = reg.level("observation", "diffstat")
    assert cls.__module__ == "hg_diffstat"
    assert reg.origin[("factor level", "observation:diffstat")] == "hg_diffstat (hg-diffstat 0.1.0)"
    assert any(p.source == "hg-diffstat 0.1.0" for p in reg.plugins)
    assert "diffstat" in reg.levels("observation")


def test_space_can_include_a_third_party_level(tmp_path: Path, on_sys_path: AddPath) -> None:
    """``registry_space`` extends the default grid with a registered level, by name."""
    on_sys_path(make_plugin_dist(tmp_path, "hg-diffstat", "hg_diffstat", FOURTH_OBSERVATION_LEVEL))
    space = registry_space(["observation:diffstat"])
    assert space.sizes == (3, 3, 4, 3, 3)
    assert space.factor("observation").levels[-1] == "diffstat"
    cfg = space.parse("S0-T0-O3-C0-W0")
    assert cfg.level("observation") == "diffstat"
    assert get_registry().level("observation", cfg.level("observation")).name == "diffstat"


def test_space_rejects_unregistered_level() -> None:
    with pytest.raises(ConfigError, match="no plugin provides level 'nope' of factor 'observation'"):
        registry_space(["observation:nope"])
    with pytest.raises(ConfigError, match="FACTOR:LEVEL"):
        registry_space(["observation"])


def test_disable_switch_keeps_builtins_only(tmp_path: Path, on_sys_path: AddPath,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    on_sys_path(make_plugin_dist(tmp_path, "hg-diffstat", "hg_diffstat", FOURTH_OBSERVATION_LEVEL))
    monkeypatch.setenv("HARNESSGRID_DISABLE_PLUGINS", "1")
    reg = PluginManager().registry()
    assert ("observation", "diffstat") not in reg.factor_levels
    assert all(p.source == "builtin" for p in reg.plugins)
    monkeypatch.setenv("HARNESSGRID_DISABLE_PLUGINS", "hg_diffstat")
    assert ("observation", "diffstat") not in PluginManager().registry().factor_levels
    monkeypatch.setenv("HARNESSGRID_DISABLE_PLUGINS", "something_else")
    assert ("observation", "diffstat") in PluginManager().registry().factor_levels


def test_plugin_object_is_what_the_registry_loaded_or_says_why_not(
        tmp_path: Path, on_sys_path: AddPath, monkeypatch: pytest.MonkeyPatch) -> None:
    """Code that needs more of a plugin than its registrations (the trainer, the micro plugin's
    models) gets the module the registry loaded; a disabled, broken or absent plugin is a
    ConfigError naming which, never an import around the registry."""
    make_plugin_dist(tmp_path, "hg-diffstat", "hg_diffstat", FOURTH_OBSERVATION_LEVEL)
    make_plugin_dist(tmp_path, "hg-import-error", "hg_import_error", "raise RuntimeError('boom')\n")
    on_sys_path(tmp_path)
    with pytest.warns(PluginWarning):
        reg = PluginManager().registry()
    module = reg.plugin_object("hg_diffstat")
    assert module.__name__ == "hg_diffstat"
    assert reg.level("observation", "diffstat").__module__ == module.__name__
    with pytest.raises(ConfigError, match=r"plugin 'hg_import_error' failed to load: .*boom"):
        reg.plugin_object("hg_import_error")
    with pytest.raises(ConfigError, match="no plugin is installed as entry point 'hg_nowhere'"):
        reg.plugin_object("hg_nowhere")
    monkeypatch.setenv("HARNESSGRID_DISABLE_PLUGINS", "hg_diffstat,hg_import_error")
    reg = PluginManager().registry()
    with pytest.raises(ConfigError, match=r"'hg_diffstat' is disabled \(HARNESSGRID_DISABLE_PLUGINS"):
        reg.plugin_object("hg_diffstat")
    monkeypatch.setenv("HARNESSGRID_DISABLE_PLUGINS", "all")
    with pytest.raises(ConfigError, match="'hg_diffstat' is disabled"):
        PluginManager().registry().plugin_object("hg_diffstat")


def test_broken_plugins_are_reported_by_name_and_skipped(tmp_path: Path,
                                                         on_sys_path: AddPath) -> None:
    """Import failure, a raising hook and an invalid registration each skip only that plugin."""
    make_plugin_dist(tmp_path, "hg-import-error", "hg_import_error", "raise RuntimeError('boom')\n")
    make_plugin_dist(tmp_path, "hg-raising", "hg_raising", """
        from harnessgrid import hookimpl

        @hookimpl
        def harnessgrid_factor_levels():
            raise ValueError("cannot build levels")
        """)
    make_plugin_dist(tmp_path, "hg-invalid", "hg_invalid", """
        from harnessgrid import hookimpl

        @hookimpl
        def harnessgrid_factor_levels():
            yield "not a class"
        """)
    make_plugin_dist(tmp_path, "hg-diffstat", "hg_diffstat", FOURTH_OBSERVATION_LEVEL)
    on_sys_path(tmp_path)
    with pytest.warns(PluginWarning) as record:
        reg = PluginManager().registry()
    problems = {p.plugin: p.error for p in reg.problems}
    assert "RuntimeError: boom" in problems["hg_import_error (hg-import-error 0.1.0)"]
    assert "cannot build levels" in problems["hg_raising (hg-raising 0.1.0)"]
    assert "expected a FactorLevel subclass" in problems["hg_invalid (hg-invalid 0.1.0)"]
    assert len(record) == 3
    assert ("observation", "diffstat") in reg.factor_levels  # the healthy plugin still loads


def test_duplicate_level_names_first_wins_and_naming_it_names_both(
        tmp_path: Path, on_sys_path: AddPath) -> None:
    """Two plugins registering one name: the first (entry points sorted by name) is kept, the
    other skipped and reported, and only naming the contested level is an error, naming both
    (tests/test_plugin_mistakes.py pins the rest)."""
    make_plugin_dist(tmp_path, "hg-diffstat", "hg_diffstat", FOURTH_OBSERVATION_LEVEL)
    make_plugin_dist(tmp_path, "hg-diffstat-fork", "hg_diffstat_fork", FOURTH_OBSERVATION_LEVEL)
    on_sys_path(tmp_path)
    with pytest.warns(PluginWarning, match="already registered by hg_diffstat"):
        reg = PluginManager().registry()
    assert reg.origin[("factor level", "observation:diffstat")] == "hg_diffstat (hg-diffstat 0.1.0)"
    (problem,) = reg.problems
    assert problem.plugin == "hg_diffstat_fork (hg-diffstat-fork 0.1.0)"
    assert problem.kind == "clash"
    assert problem.kept == "hg_diffstat (hg-diffstat 0.1.0)"
    with pytest.raises(PluginError) as exc:
        reg.level("observation", "diffstat")
    msg = str(exc.value)
    assert "'observation:diffstat'" in msg
    assert "hg_diffstat (hg-diffstat 0.1.0)" in msg
    assert "hg_diffstat_fork" in msg
    assert reg.level("observation", "raw").name == "raw"  # the rest works


def test_level_validation_messages(tmp_path: Path, on_sys_path: AddPath) -> None:
    """A level with a bad name or no description is rejected with a message saying why."""
    make_plugin_dist(tmp_path, "hg-badname", "hg_badname", """
        from harnessgrid import hookimpl
        from harnessgrid.levels import ContextLevel

        class Bad(ContextLevel):
            name = "Bad Name"
            description = "x"

        @hookimpl
        def harnessgrid_factor_levels():
            yield Bad
        """)
    on_sys_path(tmp_path)
    with pytest.warns(PluginWarning):
        reg = PluginManager().registry()
    assert "lower_snake_case" in reg.problems[0].error


def test_registrations_are_sorted(tmp_path: Path, on_sys_path: AddPath) -> None:
    make_plugin_dist(tmp_path, "hg-multi", "hg_multi", """
        from harnessgrid import hookimpl
        from harnessgrid.levels import WorkflowLevel

        def level(n):
            methods = {m: lambda self, *args: None for m in WorkflowLevel.__abstractmethods__}
            return type(n, (WorkflowLevel,), {"name": n, "description": n, **methods})

        @hookimpl
        def harnessgrid_factor_levels():
            return [level("zeta"), level("alpha"), level("mid")]
        """)
    on_sys_path(tmp_path)
    keys = [k for k in PluginManager().registry().factor_levels if k[1] in {"zeta", "alpha", "mid"}]
    assert keys == [("workflow", "alpha"), ("workflow", "mid"), ("workflow", "zeta")]


PROBE_LEVELS = """
    from harnessgrid import hookimpl
    from harnessgrid.levels import FACTOR_BASES

    @hookimpl
    def harnessgrid_factor_levels():
        for factor, base in FACTOR_BASES.items():
            methods = {m: lambda self, *args: None for m in base.__abstractmethods__}
            yield type("Probe", (base,), {"name": "probe", "description": "probe " + factor,
                                          **methods})
    """


def test_resolving_a_config_names_the_missing_level(tmp_path: Path, on_sys_path: AddPath) -> None:
    """Composing resolves names through the registry: a name nobody provides is a clear error."""
    on_sys_path(make_plugin_dist(tmp_path, "hg-probe", "hg_probe", PROBE_LEVELS))
    space = FactorSpace.from_levels({"system_prompt": ["probe"], "tool_interface": ["probe"],
                                     "observation": ["probe"], "context": ["probe", "nowhere"],
                                     "workflow": ["probe"]})
    levels = resolve_levels(space.parse("S0-T0-O0-C0-W0"))
    assert {f: cls.description for f, cls in levels.items()} == {
        f: f"probe {f}" for f in FACTORS}
    with pytest.raises(ConfigError, match="no plugin provides level 'nowhere' of factor 'context'"):
        resolve_levels(space.parse("S0-T0-O0-C1-W0"))


def test_plugins_list_cli_shows_entry_point_plugin(tmp_path: Path) -> None:
    """End to end in a fresh process: `harnessgrid plugins list --json` sees the plugin."""
    make_plugin_dist(tmp_path, "hg-diffstat", "hg_diffstat", FOURTH_OBSERVATION_LEVEL)
    make_plugin_dist(tmp_path / "broken", "hg-broken", "hg_broken", "import does_not_exist\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{tmp_path / 'broken'}"}
    out = subprocess.run([sys.executable, "-m", "harnessgrid", "plugins", "list", "--json"],
                         env=env, capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    names = {r["name"]: r["plugin"] for r in data["registrations"]}
    assert names["observation:diffstat"] == "hg_diffstat (hg-diffstat 0.1.0)"
    assert [p["plugin"] for p in data["problems"]] == ["hg_broken (hg-broken 0.1.0)"]
    human = subprocess.run([sys.executable, "-m", "harnessgrid", "plugins", "list"],
                           env=env, capture_output=True, text=True, check=True)
    assert "observation:diffstat" in human.stdout
    assert re.search(r"hg_broken \(hg-broken 0.1.0\) +the whole plugin", human.stdout)
    assert "hg_broken (hg-broken 0.1.0): registered nothing" in human.stdout


# -- `harnessgrid plugins new`: a plugin package to start from ---------------------------------

def test_plugins_new_makes_a_package_whose_test_passes(tmp_path: Path) -> None:
    """The generated package installs (pip, into a folder of its own: the venv is untouched),
    its own test passes against the installed entry point, `plugins list` shows its level,
    and its code is clean under the ruff rules it declares."""
    env = {k: v for k, v in os.environ.items() if k != "HARNESSGRID_DISABLE_PLUGINS"}
    root = tmp_path / "pkg"
    made = subprocess.run([sys.executable, "-m", "harnessgrid", "plugins", "new", "hg_tail",
                           "--dir", str(root)], env=env, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) == [
        "README.md", "pyproject.toml", "src/hg_tail/__init__.py", "src/hg_tail/observation.py",
        "tests/test_observation.py"]
    pyproject = (root / "pyproject.toml").read_text()
    assert '[project.entry-points.harnessgrid]\nhg_tail = "hg_tail.observation"' in pyproject
    major, minor = (int(part) for part in harnessgrid.__version__.split(".")[:2])
    assert f'"harnessgrid>={major}.{minor},<{major}.{minor + 1}"' in pyproject  # this minor only
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                    "--no-index", "-q", "--target", str(site), str(root)], check=True, env=env)
    env["PYTHONPATH"] = str(site)
    tested = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             *busy_machine.PYTEST_ARGS], cwd=root,
                            env={**env, "PYTHONPATH": busy_machine.pythonpath(str(site))},
                            capture_output=True, text=True, timeout=300)
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-2000:]
    assert re.search(r"\b16 passed\b", tested.stdout), tested.stdout[-2000:]
    listed = subprocess.run([sys.executable, "-m", "harnessgrid", "plugins", "list", "--json"],
                            env=env, capture_output=True, text=True, check=True)
    data = json.loads(listed.stdout)
    rows = {r["name"]: r["plugin"] for r in data["registrations"]}
    assert rows["observation:hg_tail"] == "hg_tail (hg-tail 0.1.0)"
    assert data["problems"] == []
    ruff = shutil.which("ruff", path=os.path.dirname(sys.executable)) or shutil.which("ruff")
    if ruff:
        linted = subprocess.run([ruff, "check", "--no-cache", "src", "tests"], cwd=root,
                                capture_output=True, text=True)
        assert linted.returncode == 0, linted.stdout


@pytest.mark.parametrize(("name", "says", "fix"), [
    ("My-Levels", "not a valid Python package name", "my_levels"),
    ("2fast", "not a valid Python package name", "my_2fast"),
    ("", "not a valid Python package name", "my_levels"),
    ("class", "is a Python keyword", "my_class"),
    ("json", "would shadow the module 'json'", "my_json"),
    ("harnessgrid", "would shadow", "my_harnessgrid"),
    ("raw", "observation:raw is already registered by harnessgrid.plugins", "my_raw"),
])
def test_plugins_new_rejects_bad_names(name: str, says: str, fix: str) -> None:
    with pytest.raises(ConfigError) as exc:
        check_plugin_name(name)
    assert repr(name) in exc.value.message
    assert says in exc.value.message
    assert fix in (exc.value.hint or "")


def test_plugins_new_on_the_command_line_names_the_mistake(tmp_path: Path) -> None:
    bad = subprocess.run([sys.executable, "-m", "harnessgrid", "plugins", "new", "my-levels",
                          "--dir", str(tmp_path / "x")], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr
    assert "'my-levels' is not a valid Python package name" in bad.stderr
    assert "my_levels" in bad.stderr
    assert not (tmp_path / "x").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    taken = subprocess.run([sys.executable, "-m", "harnessgrid", "plugins", "new", "my_levels",
                            "--dir", str(tmp_path / "full")], capture_output=True, text=True)
    assert taken.returncode == 2
    assert "already exists and is not an empty folder" in taken.stderr
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"
    default = subprocess.run([sys.executable, "-m", "harnessgrid", "plugins", "new", "my_levels"],
                             cwd=tmp_path, capture_output=True, text=True)
    assert default.returncode == 0, default.stderr
    assert (tmp_path / "my_levels" / "src" / "my_levels" / "observation.py").is_file()


def test_plugins_list_shows_the_version_an_adapter_emulates() -> None:
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-m", "harnessgrid", "plugins", "list", "--json"],
                          capture_output=True, text=True, timeout=120, env=env, check=True)
    from harnessgrid.plugins.adapters.claude_code import VERSION

    rows = {r["name"]: r for r in json.loads(done.stdout)["registrations"]}
    assert rows["adapter:claude-code"]["version"] == VERSION
    assert rows["observation:raw"]["version"] is None
