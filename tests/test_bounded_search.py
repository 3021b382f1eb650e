"""Issue 11, item 5: tool work a model drives runs in the host process, where the episode's wall
limit cannot interrupt it, so its cost must be bounded by construction: regexes (search, Grep)
and globs match under a time budget with the ``regex`` engine, brace patterns expand to at most
:data:`~harnessgrid.sandboxing.safe_search.MAX_BRACE_PATTERNS` patterns, and mini-bash finds its
blocks in one linear pass.

Each pathological case runs in a child process killed after a generous time: ``re`` holds the
GIL while it backtracks, so a thread could not be abandoned, and the old code ran for hours (or
ran out of memory) on these inputs. The tests assert outcomes, not timings: the matching budget
is a wall-clock limit, so a call that must run into it gets a small budget and an input that
exceeds any budget (exponential backtracking: hours), and every call that must *not* run into
it gets an hour, which no load makes an innocent call use up (issue 28)."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from harnessgrid.plugins.adapters.mini_bash import bash_blocks
from harnessgrid.sandboxing import safe_search
from harnessgrid.sandboxing.workspace import Workspace, WorkspaceError

_PRELUDE = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from harnessgrid.sandboxing import safe_search
from harnessgrid.sandboxing.workspace import Workspace, WorkspaceError
safe_search.MATCH_BUDGET_S = 3600.0  # calls that must finish; a hang is the child's timeout
def tiny_budget(call, *args, **kwargs):  # for inputs no machine matches in hours
    safe_search.MATCH_BUDGET_S = 0.5
    try:
        return call(*args, **kwargs)
    finally:
        safe_search.MATCH_BUDGET_S = 3600.0
def report(value):
    print(json.dumps(value))
"""


def bounded(code: str, timeout_s: float = 180.0) -> Any:
    """Run ``code`` in a child that ``report``s a JSON value; fail if it does not end in time."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    try:
        done = subprocess.run([sys.executable, "-c", _PRELUDE + textwrap.dedent(code)],
                              capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {timeout_s:g}s: the cost is not bounded")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- search_files (the workspace's search, every interface's `search` tool) --------------------

def test_nested_quantifier_search_finishes() -> None:
    """``(a+)+$`` on a long 'aaa…!' line: 2**40 steps (days) for ``re``; a result now."""
    got = bounded("""
        ws = Workspace.create({"f.txt": "a" * 40 + "!\\n", "g.txt": "xaaa\\n"})
        report(ws.search("(a+)+$") + ws.search("a+$"))
    """)
    assert got == [["g.txt", 1, "xaaa"], ["g.txt", 1, "xaaa"]]


def test_search_past_its_budget_is_a_tool_error_naming_the_limit() -> None:
    got = bounded("""
        import asyncio
        from harnessgrid.models import Action
        from harnessgrid.sandboxing.sandbox import Sandbox
        from harnessgrid.sandboxing.tools import Environment, execute
        ws = Workspace.create({"f.txt": ("a" * 64 + "!\\n") * 50})
        env = Environment(workspace=ws, sandbox=Sandbox(ws))
        result = tiny_budget(asyncio.run,
                             execute(Action.of("search", pattern="(a|aa)+$", path="."), env))
        report([result.error, result.output])
    """)
    error, output = got
    assert error, got
    assert "took more than 0.5s of matching" in error, got
    assert not output


def test_glob_with_many_stars_is_bounded() -> None:
    got = bounded("""
        ws = Workspace.create({"a" * 200: "x", "b.txt": "y"})
        try:
            report(tiny_budget(ws.glob, "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b"))
        except WorkspaceError as exc:
            report(exc.message)
    """)
    assert got == [] or "took more than" in got


def test_bounded_pattern_keeps_re_semantics() -> None:
    p = safe_search.compile_bounded(r"(?P<k>\w+)=(\d+)", re.IGNORECASE)
    m = p.search("  KEY=42 ")
    assert m is not None
    assert m.group("k") == "KEY"
    assert m.group(2) == "42"
    assert m.start() == 2
    assert p.fullmatch("a=1") is not None
    assert p.fullmatch("a=1 ") is None
    assert [m.group(0) for m in p.finditer("a=1 b=2")] == ["a=1", "b=2"]
    with pytest.raises(re.error):
        safe_search.compile_bounded("(")
    ws = Workspace.create({"a.txt": "port = 80\nPORT\n"})
    try:
        assert ws.search("port", ignore_case=True) == [("a.txt", 1, "port = 80"),
                                                      ("a.txt", 2, "PORT")]
        assert ws.search("a.b", regex=False) == []
        with pytest.raises(WorkspaceError, match="not a valid regular expression"):
            ws.search("(")
    finally:
        ws.cleanup()


# -- Claude Code's Glob and Grep -----------------------------------------------------------------

_CLAUDE = """
from harnessgrid.plugins.adapters import _claude_code_search as search
from harnessgrid.plugins.adapters._claude_code_files import ToolError
from harnessgrid.plugins.adapters._claude_code_session import Session
def call(tool, files, **args):
    ws = Workspace.create(files)
    try:
        return getattr(search, tool)(Session(mount_path="/workspace"), ws, args)[0]
    except ToolError as exc:
        return "ToolError: " + str(exc)
"""


def test_claude_code_glob_brace_explosion_is_a_tool_error() -> None:
    """``{a,b}`` thirty times: 2**30 patterns before; a tool error naming the limit now."""
    got = bounded(_CLAUDE + textwrap.dedent("""
        report([call("glob", {"a.py": "", "b.ts": ""}, pattern="{a,b}" * 30),
                call("glob", {"a.py": "", "b.ts": "", "c.md": ""}, pattern="*.{py,ts}")])
    """))
    exploded, normal = got
    assert exploded.startswith("ToolError"), exploded
    assert "more than 1000 patterns" in exploded, exploded
    assert sorted(normal.split("\n")) == ["/workspace/a.py", "/workspace/b.ts"]


def test_claude_code_grep_backtracking_is_a_tool_error() -> None:
    got = bounded(_CLAUDE + textwrap.dedent("""
        files = {"f.txt": ("a" * 64 + "!\\n") * 50, "g.txt": "hello\\n"}
        report([tiny_budget(call, "grep", files, pattern="(a|aa)+$", output_mode="content"),
                tiny_budget(call, "grep", files, pattern="(a|aa)+$", multiline=True),
                call("grep", files, pattern="(a+)+$", glob="{f,g}.txt"),
                call("grep", files, pattern="hel+o", output_mode="content"),
                call("grep", files, pattern="l", glob="{x,y}{1,2}{3,4}*.{txt,md}"),
                call("grep", files, pattern="l", glob="*.{txt,md}"),
                call("grep", files, pattern="l", glob="[")])
    """))
    content, multiline, nested, plain, braced, globbed, bad_glob = got
    for out in (content, multiline):
        assert out.startswith("ToolError"), out
        assert "took more than 0.5s" in out, out
    assert nested == "No files found"
    assert plain == "/workspace/g.txt:hello"
    assert braced == "No files found"
    assert globbed == "Found 1 file\n/workspace/g.txt"
    assert bad_glob == "No files found", bad_glob  # fnmatch reads a lone '[' literally


def test_expand_braces_order_and_cap() -> None:
    assert safe_search.expand_braces("a.{ts,tsx}") == ["a.ts", "a.tsx"]
    assert safe_search.expand_braces("{x,y}{1,2}") == ["x1", "x2", "y1", "y2"]
    assert safe_search.expand_braces("{a,{b,c}}") == ["a", "b", "a", "c"]  # innermost first
    assert safe_search.expand_braces("no braces") == ["no braces"]
    assert len(safe_search.expand_braces("{a,b}" * 9)) == 512
    for pattern in ("{a,b}" * 10, "{a}" * 100_000 + "{a,b}"):
        with pytest.raises(WorkspaceError, match="more than"):
            safe_search.expand_braces(pattern, limit=1000)


# -- mini-bash block parsing --------------------------------------------------------------------

_OLD_BLOCK = re.compile(r"^(`{3,})bash[ \t]*\n(.*?)\n\1[ \t]*$", re.DOTALL | re.MULTILINE)


def test_mini_bash_parsing_is_linear() -> None:
    """2 MB of unclosed openings: an hour of (quadratic) backtracking before (256 KB took about
    a minute), one pass now."""
    got = bounded("""
        from harnessgrid.plugins.adapters.mini_bash import bash_blocks
        reply = "```bash\\n" * (8 * 32768)
        closed = "```bash\\necho hi\\n```\\n" * 10000
        report([len(bash_blocks(reply)), len(bash_blocks(closed))])
    """)
    assert got == [0, 10000]


def test_mini_bash_blocks_are_those_of_the_old_pattern() -> None:
    rng = random.Random(11)
    pieces = ["```bash", "````bash", "```", "````", "```bash \t", "``` ", "ls -l", "", " ",
              "`", "bash", "```\r", "x```", "```bashx", "  ```"]
    for _ in range(20_000):
        reply = "\n".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        reply = rng.choice(["", "\n", "Thought.\n"]) + reply + rng.choice(["", "\n"])
        assert bash_blocks(reply) == [b for _f, b in _OLD_BLOCK.findall(reply)], reply
