"""``harnessgrid harness``: what a configuration (or adapter) shows the model."""

from __future__ import annotations

import difflib
import json
from typing import Any

import typer

harness_app = typer.Typer(help="Inspect harnesses: prompts, tools, call syntax.",
                          no_args_is_help=True)

TASK = typer.Option(None, "--task", help="SUITE/ID: show the harness around this task.")


def describe(spec: str, task_ref: str | None) -> dict[str, Any]:
    """The system prompt, first messages, tools and a rendered sample turn of a harness."""
    from harnessgrid.api import resolve_harness
    from harnessgrid.cli.run_cmd import find_task
    from harnessgrid.models import Action
    from harnessgrid.tasks import Task

    harness = resolve_harness(spec)
    task = find_task(task_ref) if task_ref else Task(
        id="example", instruction="(the task statement goes here)")
    state = harness.start(task, "show")
    system = "\n\n".join(m.content for m in state.history if m.role == "system")
    sample = harness.render_action(Action.of("read", path="notes.txt"), "call_1")
    return {
        "harness": harness.name,
        "config": getattr(getattr(harness, "config", None), "levels", None),
        "native_tools": harness.native_tools,
        "system_prompt": system,
        "first_messages": [{"role": m.role, "kind": m.kind, "content": m.content}
                           for m in state.history if m.role != "system"],
        "tools": [{"name": t.name, "description": t.description,
                   "input_schema": t.parameters} for t in harness.tools()],
        "sample_turn": {"content": sample.content,
                        "tool_calls": [{"name": c.name, "arguments": c.arguments}
                                       for c in sample.tool_calls]},
    }


def _sample_text(info: dict[str, Any]) -> str:
    turn = info["sample_turn"]
    calls = "".join(f"\n[tool call] {c['name']}({json.dumps(c['arguments'])})"
                    for c in turn["tool_calls"])
    return (str(turn["content"]) + calls).strip()


@harness_app.command("show")
def show(harness: str = typer.Argument(..., help="CODE, level list, or adapter:NAME."),
         task: str | None = TASK,
         as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Print the system prompt, tool specs and a rendered sample turn (reading notes.txt)."""
    info = describe(harness, task)
    if as_json:
        typer.echo(json.dumps(info, indent=2, ensure_ascii=False))
        return
    from rich.console import Console
    from rich.panel import Panel

    console = Console()
    title = info["harness"] + (f"  {info['config']}" if info["config"] else "")
    console.rule(title)
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


@harness_app.command("diff")
def diff(a: str = typer.Argument(..., help="First harness."),
         b: str = typer.Argument(..., help="Second harness."), task: str | None = TASK) -> None:
    """What changes between two harnesses: factors, system prompt, tools and call syntax."""
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
    typer.echo("\n".join(lines))
