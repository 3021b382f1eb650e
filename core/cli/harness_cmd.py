"""``harnessgrid harness``: what a configuration (or adapter) shows the model."""

from __future__ import annotations

import difflib
import json
from typing import Any

import typer

harness_app = typer.Typer(help="Inspect harnesses: prompts, tools, call syntax.",
                          no_args_is_help=True)

TASK = typer.Option(None, "--task", help="SUITE/ID: show the harness around this task.")


#: The file the sample turn reads, and what the sample observations show.
SAMPLE_FILE = "notes.txt"
SAMPLE_NOTES = "Release notes draft\n- ship v1.2 on Friday\n- ask Dana about the CI cache\n"
SAMPLE_FAILING = "python3 check.py"
SAMPLE_LONG = "cat server.log"
#: Observation text shown in a panel or diff: longer ones keep their head and tail.
SHOWN_HEAD, SHOWN_TAIL = 14, 4


def sample_results() -> list[tuple[str, Any, Any]]:
    """(case, action, result) for the sample observations: the sample turn's read succeeding, a
    command failing with a traceback, and a command printing more than any level shows."""
    from harnessgrid.models import Action, ToolResult

    log = "".join(f"2026-03-0{1 + i // 400} 12:{i // 60 % 60:02d}:{i % 60:02d} INFO request {i} "
                  f"served in {3 + i % 17} ms\n" for i in range(600))
    failing = ("Traceback (most recent call last):\n  File \"check.py\", line 4, in <module>\n"
               "    assert total == 42, total\nAssertionError: 41\n")
    return [
        ("success", Action.of("read", path=SAMPLE_FILE), ToolResult(output=SAMPLE_NOTES,
                                                                     duration_s=0.001)),
        ("failure", Action.of("shell", command=SAMPLE_FAILING),
         ToolResult(output="checking totals\n", stderr=failing, exit_code=1, duration_s=0.2)),
        ("long output", Action.of("shell", command=SAMPLE_LONG),
         ToolResult(output=log, exit_code=0, duration_s=0.01)),
    ]


def sample_observations(harness: Any) -> list[dict[str, Any]] | None:
    """Each sample result as the harness's observation level renders it, and the message it
    goes back in (a ``tool`` message for native tools, else ``user``). ``None`` for an adapter,
    whose shell builds observations inside its own step."""
    from harnessgrid.plugin_system.composed_harness import ComposedHarness
    from harnessgrid.sandboxing.tools import as_shell

    if not isinstance(harness, ComposedHarness):
        return None
    ti, obs = harness.tool_interface, harness.observation
    out = []
    for case, action, result in sample_results():
        if not ti.supports(action.kind):  # what the interface really runs (bash_only: cat)
            action = as_shell(action)
        calls = ti.parse(harness.render_action(action, "call_1"))
        text = obs.format(action, result)
        message = ti.observation_message(calls[0], text) if calls else None
        out.append({"case": case, "action": action.model_dump(mode="json"),
                    "role": message.role if message else "user", "content": text})
    return out


def describe(spec: str, task_ref: str | None) -> dict[str, Any]:
    """The system prompt, first messages, tools, a rendered sample turn and sample
    observations of a harness."""
    from harnessgrid.cli.run_cmd import find_task
    from harnessgrid.engine.api import resolve_harness
    from harnessgrid.harness import EpisodeToolsHarness, factor_levels, offered_tools, provides
    from harnessgrid.models import Action
    from harnessgrid.tasks import Task

    harness = resolve_harness(spec)
    task = find_task(task_ref) if task_ref else Task(
        id="example", instruction="(the task statement goes here)")
    state = harness.start(task, "show")
    system = "\n\n".join(m.content for m in state.history if m.role == "system")
    sample = harness.render_action(Action.of("read", path=SAMPLE_FILE), "call_1")
    return {
        "harness": harness.name,
        "config": factor_levels(harness),
        "native_tools": harness.native_tools,
        "system_prompt": system,
        "first_messages": [{"role": m.role, "kind": m.kind, "content": m.content}
                           for m in state.history if m.role != "system"],
        "tools": _tools(harness, offered_tools(harness, state)
                        if provides(harness, EpisodeToolsHarness) else None),
        "sample_turn": {"content": sample.content,
                        "tool_calls": [{"name": c.name, "arguments": c.arguments}
                                       for c in sample.tool_calls]},
        "sample_observations": sample_observations(harness),
        "environment": environment_info(task.environment),
    }


def _tools(harness: Any, offered: list[Any] | None) -> list[dict[str, Any]]:
    """Every tool of ``harness``; where it offers a new episode only some of them
    (:class:`~harnessgrid.harness.EpisodeToolsHarness`), each says whether it is ``deferred``
    (loaded later, e.g. by Claude Code 2.x's ToolSearch)."""
    names = None if offered is None else {t.name for t in offered}
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters}
            | ({} if names is None else {"deferred": t.name not in names})
            for t in harness.tools()]


def environment_info(name: str | None) -> dict[str, Any] | None:
    """The task's declared environment as episodes will mount it, or why they cannot."""
    if not name:
        return None
    from harnessgrid.errors import ConfigError
    from harnessgrid.sandboxing.environments import get_environment

    try:
        record = get_environment(name)
    except ConfigError as exc:
        return {"name": name, "missing": True, "problem": exc.message, "hint": exc.hint}
    return {**record.summary(), "path": record.path, "missing": False}


def _environment_line(env: dict[str, Any] | None) -> str:
    if env is None:
        return "environment: none (the host's /usr only)"
    if env["missing"]:
        return f"environment: {env['name']} - NOT BUILT; episodes run without it. {env['hint']}"
    return f"environment: {env['name']} ({env['kind']} {env['digest']}, {env['path']})"


def _sample_text(info: dict[str, Any]) -> str:
    turn = info["sample_turn"]
    calls = "".join(f"\n[tool call] {c['name']}({json.dumps(c['arguments'])})"
                    for c in turn["tool_calls"])
    return (str(turn["content"]) + calls).strip()


def _action_text(action: dict[str, Any]) -> str:
    args = action.get("args", {})
    return str(args.get("command") or f"{action['kind']} {args.get('path', '')}".strip())


def _shown(text: str) -> str:
    """``text`` with its middle lines left out when long (the JSON output has all of it)."""
    lines = text.splitlines()
    if len(lines) <= SHOWN_HEAD + SHOWN_TAIL + 1:
        return text
    hidden = len(lines) - SHOWN_HEAD - SHOWN_TAIL
    return "\n".join([*lines[:SHOWN_HEAD],
                      f"[... {hidden} more lines here; --json shows the whole observation]",
                      *lines[-SHOWN_TAIL:]])


def _observation_title(obs: dict[str, Any]) -> str:
    content = obs["content"]
    return (f"observation · {obs['case']}: {_action_text(obs['action'])} "
            f"({obs['role']} message, {len(content):,} chars, {len(content.splitlines())} lines)")


@harness_app.command("show")
def show(harness: str = typer.Argument(..., help="CODE (a plugin level by name, O=NAME; "
                                        "codes as `harnessgrid plugins list` shows them), "
                                        "SPACE:CODE, level list, or adapter:NAME."),
         task: str | None = TASK,
         as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Print the system prompt, tool specs, a rendered sample turn (reading notes.txt) and
    sample tool results as the observation level renders them (success, failure, long)."""
    info = describe(harness, task)
    if as_json:
        typer.echo(json.dumps(info, indent=2, ensure_ascii=False))
        return
    from rich.console import Console
    from rich.panel import Panel

    console = Console()
    console.rule(info["harness"])
    if info["config"]:  # in full (a rule truncates), as the level list --harness takes
        console.print("levels: " + ",".join(f"{f}={lv}" for f, lv in info["config"].items()),
                      markup=False, highlight=False, soft_wrap=True)
    console.print(_environment_line(info["environment"]), markup=False, highlight=False)
    console.print(Panel(info["system_prompt"], title="system prompt", title_align="left"),
                  markup=False, highlight=False)
    for m in info["first_messages"]:
        console.print(Panel(m["content"], title=f"{m['role']} · {m['kind']}",
                            title_align="left"), markup=False, highlight=False)
    tools = "\n".join(f"{t['name']}: {t['description'].splitlines()[0] if t['description'] else ''}"
                      for t in info["tools"])
    where = "native tool specs" if info["native_tools"] else "described in the prompt"
    console.print(Panel(tools or "(none)", title=f"tools ({where})", title_align="left"),
                  markup=False, highlight=False)
    console.print(Panel(_sample_text(info), title="sample turn: read notes.txt",
                        title_align="left"), markup=False, highlight=False)
    observations = info["sample_observations"]
    if observations is None:
        console.print("observations: built by the adapter's shell; `harnessgrid run --show` "
                      "prints them", highlight=False, markup=False)
    for obs in observations or []:
        console.print(Panel(_shown(obs["content"]) or "(empty)", title=_observation_title(obs),
                            title_align="left"), markup=False, highlight=False)


@harness_app.command("diff")
def diff(a: str = typer.Argument(..., help="First harness."),
         b: str = typer.Argument(..., help="Second harness."), task: str | None = TASK) -> None:
    """What changes between two harnesses: factors, system prompt, tools, call syntax and the
    sample observations (a success, a failure, a long output)."""
    left, right = describe(a, task), describe(b, task)
    lines = []
    if left["config"] and right["config"]:
        changed = [f"{f}: {left['config'][f]} -> {right['config'][f]}"
                   for f in left["config"] if left["config"][f] != right["config"].get(f)]
        lines.append("factors that differ: " + (", ".join(changed) or "none"))
    for key, render in (("system_prompt", lambda i: i["system_prompt"]),
                        ("tools", lambda i: "\n".join(t["name"] for t in i["tools"])),
                        ("sample_turn", _sample_text)):
        delta = list(difflib.unified_diff(render(left).splitlines(), render(right).splitlines(),
                                          f"{left['harness']} {key}",
                                          f"{right['harness']} {key}", lineterm=""))
        lines.extend(delta or [f"{key}: identical"])
    lines.extend(_observation_diff(left, right))
    typer.echo("\n".join(lines))


def _observation_diff(left: dict[str, Any], right: dict[str, Any]) -> list[str]:
    """Per sample observation: a unified diff of the rendered text (long ones cut alike on both
    sides), with their sizes when those differ."""
    ours, theirs = left["sample_observations"], right["sample_observations"]
    if ours is None or theirs is None:
        return ["observations: not compared (an adapter builds them inside its shell)"]
    lines = []
    for a, b in zip(ours, theirs, strict=True):
        key = f"observation ({a['case']})"
        delta = list(difflib.unified_diff(
            [f"[{a['role']} message]", *_shown(a["content"]).splitlines()],
            [f"[{b['role']} message]", *_shown(b["content"]).splitlines()],
            f"{left['harness']} {key}", f"{right['harness']} {key}", lineterm=""))
        if not delta:
            lines.append(f"{key}: identical")
            continue
        sizes = [len(a["content"]), len(b["content"])]
        if sizes[0] != sizes[1]:
            lines.append(f"{key}: {sizes[0]:,} -> {sizes[1]:,} chars")
        lines.extend(delta)
    return lines
