"""``harnessgrid harness show/diff``: what a configuration shows the model."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def hg_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harnessgrid", *args], capture_output=True,
                          text=True, timeout=120)


def show(code: str, *extra: str) -> dict[str, Any]:
    out = hg_cli("harness", "show", code, "--json", *extra)
    assert out.returncode == 0, out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def test_show_json_native_and_text_interfaces() -> None:
    native = show("S0-T0-O0-C0-W0")
    assert native["native_tools"] is True
    assert {t["name"] for t in native["tools"]} >= {"read_file", "run_command", "finish"}
    assert all(set(t) == {"name", "description", "input_schema"} for t in native["tools"])
    assert native["sample_turn"]["tool_calls"] == [{"name": "read_file",
                                                   "arguments": {"path": "notes.txt"}}]
    xml = show("S1-T1-O0-C0-W1")
    assert xml["native_tools"] is False
    assert '<view path="notes.txt"/>' in xml["sample_turn"]["content"]
    assert "<view" in xml["system_prompt"]  # tools described in the prompt
    bash = show("S0-T2-O0-C0-W0")
    assert "cat notes.txt" in bash["sample_turn"]["content"]  # read lowered to a shell command


def test_show_with_task_puts_the_task_first() -> None:
    data = show("S2-T0-O0-C0-W2", "--task", "examples/config")
    assert data["first_messages"][0]["kind"] == "task"
    assert "conf/app.ini" in data["first_messages"][0]["content"]
    assert data["config"]["workflow"] == "verify_recover"


def test_diff_names_changed_factors_and_prompt_lines() -> None:
    out = hg_cli("harness", "diff", "S0-T0-O0-C0-W0", "S0-T1-O0-C0-W0")
    assert out.returncode == 0, out.stderr
    assert "tool_interface: function_calling -> xml_tags" in out.stdout
    assert "+- show the text of a file" in out.stdout or "+<view" in out.stdout
    same = hg_cli("harness", "diff", "S0-T0-O0-C0-W0", "S0-T0-O0-C0-W0")
    assert "factors that differ: none" in same.stdout
    assert "system_prompt: identical" in same.stdout


def test_show_bad_code_is_a_clear_error() -> None:
    # numbers name the paper's three built-ins only, micro installed or not; a plugin's
    # levels are named (T=micro_tags), which the hint says
    for code, part in [("S0-T99-O0-C0-W0", "T99"), ("S0-T3-O0-C0-W0", "T3")]:
        out = hg_cli("harness", "show", code)
        assert out.returncode == 2
        assert f"{part} is not a level of tool_interface" in out.stderr
        assert "T=micro_tags" in out.stderr
        assert "Traceback" not in out.stderr


def test_show_titles_the_harness_and_lists_its_levels_whole() -> None:
    """Found: the title was the code followed by a Python dict cut off at the terminal's
    width ("{'system_prompt': 'minimal', 'tool_interface': 'function_ca…"). Now the rule is
    the code and the levels follow in full, as the level list --harness takes."""
    import os

    out = subprocess.run([sys.executable, "-m", "harnessgrid", "harness", "show",
                          "S0-T0-O0-C0-W0"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    assert "{'" not in out.stdout
    assert "…" not in out.stdout.splitlines()[0]
    levels = ("system_prompt=minimal,tool_interface=function_calling,observation=raw,"
              "context=full,workflow=react")
    assert f"levels: {levels}" in out.stdout
    assert hg_cli("harness", "show", levels, "--json").returncode == 0  # it reads back
