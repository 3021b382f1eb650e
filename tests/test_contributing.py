"""Every code block of CONTRIBUTING.md and every ``Example::`` of the hookspecs runs as written.

- ``toml`` blocks parse; the one with entry points is what installs the page's package (its
  modules are the page's blocks) and its harnessgrid requirement admits this version;
- ``bash`` blocks are valid bash and the scripts they name exist;
- ``python`` blocks that start with ``# PATH`` are written to PATH of a package installed
  through real entry points (a dist-info on the path, as ``pip install`` leaves it); the test
  templates among them pass in a fresh pytest process; a block without a path runs as a script;
- each hookspec example is installed the same way and what it registers works;
- every level and adapter the page and the examples define (and every built-in one) is driven
  through a real harness with hostile tool results: exit codes no process returns, lone
  surrogates, NUL bytes, empty and megabyte outputs, hostile paths (``harnessgrid.testing``'s,
  which plugin authors run through their own harnesses). The harness, its levels and the
  workspace are real; only the sandbox's answers are scripted
  (:class:`harnessgrid.testing.ScriptedSandbox`), because no real command can exit with
  2**20_000 or print a lone surrogate.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import busy_machine
import pytest
from packaging.requirements import Requirement
from plugin_dist import write_dist_info

import harnessgrid
from harnessgrid import hookspecs
from harnessgrid.testing import hostile_observations, observation_problems

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "CONTRIBUTING.md"
_FENCE = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_PATH = re.compile(r"#\s*([\w./-]+\.py)\s*$")


def blocks(lang: str) -> list[str]:
    return [code for kind, code in _FENCE.findall(PAGE.read_text()) if kind == lang]


def block_path(code: str) -> str | None:
    """``my_package/x.py`` when the block's first line is ``# my_package/x.py``."""
    first = code.split("\n", 1)[0]
    match = _PATH.fullmatch(first.strip())
    return match.group(1) if match else None


def page_entry_points() -> tuple[str, dict[str, str], list[str]]:
    """The page's distribution name, entry points and dependencies: from the toml block whose
    entry points name the page's own plugin modules (every toml block must parse)."""
    modules = {p.removesuffix(".py").replace("/", ".") for p in map(block_path, blocks("python"))
               if p and not p.startswith("tests/")}
    found = [tomllib.loads(code) for code in blocks("toml")]
    ours = [d["project"] for d in found
            if set(d.get("project", {}).get("entry-points", {}).get("harnessgrid", {}).values())
            & modules]
    assert len(ours) == 1, "one toml block declares the entry points of the page's modules"
    project = ours[0]
    return project["name"], dict(project["entry-points"]["harnessgrid"]), project["dependencies"]


def literal_blocks(doc: str) -> list[tuple[str, str]]:
    """The reST literal blocks of a docstring: (the line that ends with ``::``, the block)."""
    lines = doc.split("\n")
    out = []
    for i, line in enumerate(lines):
        if not line.rstrip().endswith("::"):
            continue
        indent = len(line) - len(line.lstrip())
        end = i + 1
        while end < len(lines) and (not lines[end].strip()
                                    or len(lines[end]) - len(lines[end].lstrip()) > indent):
            end += 1
        out.append((line.strip(), textwrap.dedent("\n".join(lines[i + 1:end])).strip() + "\n"))
    return out


def hookspec_examples() -> dict[str, str]:
    """Each hook's ``Example::`` block: hook name → module source."""
    out = {}
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if not name.startswith("harnessgrid_"):
            continue
        found = [code for intro, code in literal_blocks(inspect.getdoc(fn) or "")
                 if intro == "Example::"]
        assert len(found) == 1, f"{name} needs one Example:: block"
        out[name] = found[0]
    return out


def install_docs(root: Path) -> dict[str, list[str]]:
    """Write the page's package and the hookspec examples under ``root`` with their dist-infos;
    returns the test files and scripts to run."""
    dist, eps, _ = page_entry_points()
    tests: list[str] = []
    scripts: list[str] = []
    for code in blocks("python"):
        path = block_path(code)
        if path is None:
            scripts.append(code)
            continue
        target = root / path
        assert not target.exists(), f"two blocks write {path}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(code)
        if path.startswith("tests/"):
            tests.append(path)
        elif not (target.parent / "__init__.py").exists() and target.parent != root:
            (target.parent / "__init__.py").write_text("")
    for module in eps.values():
        assert (root / (module.replace(".", "/") + ".py")).is_file(), (
            f"entry point {module} is not one of the page's blocks")
    write_dist_info(root, dist, eps)
    examples = {}
    for hook, source in hookspec_examples().items():
        module = f"hookspec_example_{hook.removeprefix('harnessgrid_')}"
        (root / f"{module}.py").write_text(source)
        examples[module] = module
    write_dist_info(root, "hookspec-examples", examples)
    return {"tests": tests, "scripts": scripts}


@pytest.fixture
def docs_installed(tmp_path: Path, on_sys_path: Callable[[Path], None]
                   ) -> tuple[Path, dict[str, list[str]]]:
    """The page's package and the hookspec examples, installed (for this test) through real
    entry points."""
    found = install_docs(tmp_path)
    on_sys_path(tmp_path)
    return tmp_path, found


# ----------------------------------------------------------------------------- non-Python blocks

def test_toml_blocks_parse_and_the_dependency_admits_this_version() -> None:
    _, eps, deps = page_entry_points()
    assert eps, "the page declares entry points"
    ours = [Requirement(d) for d in deps if Requirement(d).name == "harnessgrid"]
    assert ours, deps
    assert ours[0].specifier.contains(harnessgrid.__version__), deps
    (_, module_toml), = literal_blocks(inspect.getdoc(hookspecs) or "")
    declared = tomllib.loads(module_toml)["project"]
    assert Requirement(declared["dependencies"][0]).specifier.contains(harnessgrid.__version__)
    assert declared["entry-points"]["harnessgrid"]


def test_bash_blocks_are_valid_and_name_existing_scripts() -> None:
    assert blocks("bash")
    for code in blocks("bash"):
        check = subprocess.run(["bash", "-n"], input=code, capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
        for script in re.findall(r"\bscripts/[\w./-]+\.sh\b", code):
            assert (ROOT / script).is_file(), script


def test_every_python_block_is_a_file_or_a_script() -> None:
    """The page's python blocks say where they go (or run as scripts); the page declares one
    entry point per plugin module it defines."""
    _, eps, _ = page_entry_points()
    paths = [block_path(code) for code in blocks("python")]
    modules = {p.removesuffix(".py").replace("/", ".") for p in paths
               if p and not p.startswith("tests/")}
    assert modules == set(eps.values())
    assert any(p and p.startswith("tests/") for p in paths)


# ----------------------------------------------------------------------------- the page's package

def test_page_templates_pass_against_the_installed_package(
        docs_installed: tuple[Path, dict[str, list[str]]]) -> None:
    """The test templates on the page pass, in a fresh process that finds the plugins through
    their entry points; blocks without a path run as scripts there."""
    root, found = docs_installed
    env = {**os.environ, "PYTHONPATH": str(root)}
    for code in found["scripts"]:
        out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          *busy_machine.PYTEST_ARGS, *found["tests"]], cwd=root,
                         env={**env, "PYTHONPATH": busy_machine.pythonpath(str(root))},
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " passed" in out.stdout, out.stdout[-1000:]
    assert "skipped" not in out.stdout, out.stdout[-1000:]


def test_page_and_examples_register_through_entry_points(
        docs_installed: tuple[Path, dict[str, list[str]]]) -> None:
    from harnessgrid.plugin_system.registry import get_registry

    reg = get_registry()
    assert not reg.problems, reg.problems
    origins = {key: plugin for key, plugin in reg.origin.items()
               if "my-package" in plugin or "hookspec-examples" in plugin}
    assert set(origins) == {
        ("factor level", "observation:diffstat"), ("factor level", "workflow:reflective"),
        ("factor level", "observation:last_lines"), ("adapter", "sh"),
        ("adapter", "plain-bash"), ("task suite", "mysuite"), ("task suite", "hello-suite"),
        ("policy backend", "echo"), ("space", "text-tools")}, origins


def test_hookspec_space_example_names_codes(
        docs_installed: tuple[Path, dict[str, list[str]]]) -> None:
    """The example's named space reads ``text-tools:CODE`` in its own numbering, and its
    harnesses run; the paper's codes are unchanged by it."""
    import harnessgrid as hg
    from harnessgrid.plugins.tasks.examples import UPPER_TASK
    from harnessgrid.policies.scripted import ScriptedPolicy

    harness = hg.resolve_harness("text-tools:S1-T0-O1-C0-W1")
    assert harness.config.levels == {  # type: ignore[attr-defined]
        "system_prompt": "stepwise", "tool_interface": "xml_tags", "observation": "annotated",
        "context": "full", "workflow": "verify_recover"}
    assert harness.name == "text-tools:S1-T0-O1-C0-W1"
    assert asyncio.run(hg.run_episode(harness, UPPER_TASK, ScriptedPolicy())).passed
    assert hg.resolve_config("S1-T0-O1-C0-W1").level("tool_interface") == "function_calling"


def test_hookspec_suite_and_policy_examples_work(
        docs_installed: tuple[Path, dict[str, list[str]]]) -> None:
    import harnessgrid as hg
    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.policies.scripted import ScriptedPolicy

    harness = hg.resolve_harness("S1-T1-O1-C1-W2")
    for task in hg.load_suite("hello-suite").tasks():
        solved = asyncio.run(hg.run_episode(harness, task, ScriptedPolicy()))
        idle = asyncio.run(hg.run_episode(harness, task, ScriptedPolicy(empty=True)))
        assert solved.passed, (solved.termination, solved.error)
        assert not idle.passed, (solved.termination, solved.error)
    echo = hg.make_policy("echo")
    traj = asyncio.run(hg.run_episode(harness, task, echo, EpisodeLimits(max_turns=2)))
    assert traj.error is None, traj.termination
    assert not traj.passed, traj.termination
    said = [m.content for m in traj.history if m.role == "assistant"]
    assert said
    assert said[0] == task.instruction


def test_hookspec_adapter_example_rejects_options(
        docs_installed: tuple[Path, dict[str, list[str]]]) -> None:
    from harnessgrid.errors import ConfigError
    from harnessgrid.plugin_system.registry import get_registry

    spec = get_registry().adapter("plain-bash")
    assert spec.create().name == "adapter:plain-bash"
    assert spec.version == "1"
    with pytest.raises(ConfigError, match="takes no options"):
        spec.create(colour="blue")


# ----------------------------------------------------------------------------- hostile results

# The hostile results and the stand-in sandbox answering with them are harnessgrid.testing's,
# the copy plugin authors check their own harnesses with (check_adapter).
async def _drive(harness: Any, workspace: Any) -> list[str]:
    """Every message a harness adds while answering the hostile results and actions."""
    return await hostile_observations(harness, workspace)


def _harnesses() -> Iterator[tuple[str, Callable[[], Any]]]:
    """Every registered level, each composed with built-in levels for the other factors, in
    each tool interface; and every registered adapter."""
    import harnessgrid as hg
    from harnessgrid.plugin_system.registry import get_registry

    reg = get_registry()
    base = {"system_prompt": "minimal", "tool_interface": "function_calling",
            "observation": "raw", "context": "full", "workflow": "verify_recover"}
    space = hg.registry_space(all_levels=True)
    seen = set()
    for (factor, name) in reg.factor_levels:
        interfaces = [name] if factor == "tool_interface" else [
            "function_calling", "xml_tags", "bash_only"]
        for tools in interfaces:
            levels = {**base, "tool_interface": tools, factor: name}
            code = ",".join(f"{k}={v}" for k, v in levels.items())
            if code not in seen:
                seen.add(code)
                config = space.from_mapping(levels)
                yield code, lambda config=config: hg.compose(config)
    for name, spec in reg.adapters.items():
        yield f"adapter:{name}", spec.create


def test_levels_and_adapters_survive_hostile_tool_results(
        docs_installed: tuple[Path, dict[str, list[str]]], tmp_path: Path) -> None:
    """Totality through real harnesses: whatever a tool returns, every harness answers with
    observations that encode as UTF-8, stay bounded and (for composed harnesses) repeat
    exactly; nothing raises."""
    from harnessgrid.sandboxing.workspace import Workspace

    problems: list[str] = []
    names: list[str] = []
    for name, make in _harnesses():
        names.append(name)
        runs = []
        for _ in range(1 if name.startswith("adapter:") else 2):
            ws = Workspace.create({"a.txt": "a\n"}, None, mount_path="/workspace")
            try:
                runs.append(asyncio.run(_drive(make(), ws)))
            except Exception as exc:  # noqa: BLE001 - collected, reported together below
                problems.append(f"{name}: {type(exc).__name__}: {str(exc)[:300]}")
                break
            finally:
                ws.cleanup()
        if runs:
            problems += observation_problems(name, runs[0],
                                             runs[1] if len(runs) > 1 else None)
    assert {"observation=diffstat", "workflow=reflective", "observation=last_lines"} <= {
        part for n in names for part in n.split(",")}
    assert {"adapter:sh", "adapter:plain-bash", "adapter:mini-bash"} <= set(names)
    assert not problems, "\n".join(problems)
