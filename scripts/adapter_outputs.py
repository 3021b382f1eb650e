"""Record what the real shells answer to a fixed set of tool calls (maintenance only).

    python scripts/adapter_outputs.py             # all
    python scripts/adapter_outputs.py --claude-code [--version V] | --openclaw

Claude Code (each version of :data:`CC_VERSIONS`, or ``--version``): the CLI of the npm package
(1.x ``cli.js``; 2.x the native binary, see ``adapter_schemas.claude_command``) runs ``-p``
against a local stand-in for the Anthropic API that answers each turn with the next call of
:data:`CC_CALLS` (streamed as the API streams) and keeps the requests, in a session allowed
only the workspace tools (:data:`ALLOWED`, ``--permission-mode acceptEdits``). Each call's
result (text or, for 2.x's ToolSearch, its blocks; ``is_error``) is taken from the first
request that carries it; 2.x also keeps the text blocks the CLI adds after a result
(``after_result``); 1.0.98 the shape of the first user message. OpenClaw: the write tool of
``@mariozechner/pi-coding-agent`` (the version OpenClaw 2026.2.26 ships) run by node on
:data:`OC_WRITES`. Facts only are kept: the working directory becomes ``{cwd}``, the
``<system-reminder>`` prose the CLI appends to results (malware and TodoWrite notes) is cut,
and of the first message only its layout. ``tests/test_adapter_outputs.py`` (1.0.98) and
``tests/test_adapter_claude_code_2.py`` (2.1.332) replay the same calls through the emulations
and compare. Needs ``npm`` and ``node`` (>= 18).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from adapter_schemas import (
    OPENCLAW,
    PI_CODING_AGENT,
    ROOT,
    _other_recorder,
    _pack,
    claude_command,
    is_main_loop,
    node_json,
    openclaw_header,
    openclaw_typebox,
    run_claude,
)

CC_VERSIONS = ("1.0.98", "2.1.332")
CC_FIXTURES = ROOT / "tests" / "fixtures" / "claude_code"
OC_OUT = ROOT / "tests" / "fixtures" / "openclaw" / f"outputs-{OPENCLAW[1]}.json"
CWD = "{cwd}"
CLAUDE_MD = "Use tabs.\n"
_LONG = "".join(f"l{i}\n" for i in range(1, 21))
#: The calls, in order, in one session whose directory holds only CLAUDE.md.
CC1_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("Write", {"file_path": f"{CWD}/notes.txt", "content": "alpha\nbeta\n"}),
    ("Read", {"file_path": f"{CWD}/notes.txt"}),
    ("Edit", {"file_path": f"{CWD}/notes.txt", "old_string": "beta", "new_string": "gamma"}),
    ("Write", {"file_path": f"{CWD}/notes.txt", "content": "one\ntwo\n"}),
    ("MultiEdit", {"file_path": f"{CWD}/notes.txt", "edits": [
        {"old_string": "one", "new_string": "uno"}, {"old_string": "two", "new_string": "dos"}]}),
    ("Write", {"file_path": f"{CWD}/rep.txt", "content": "x1\nx2\nx3\n"}),
    ("Edit", {"file_path": f"{CWD}/rep.txt", "old_string": "x", "new_string": "y",
              "replace_all": True}),
    ("Write", {"file_path": f"{CWD}/long.txt", "content": _LONG}),
    ("Edit", {"file_path": f"{CWD}/long.txt", "old_string": "l10\n", "new_string": "L10\nextra\n"}),
    ("Write", {"file_path": f"{CWD}/empty.txt", "content": ""}),
    ("Read", {"file_path": f"{CWD}/empty.txt"}),
    ("Read", {"file_path": f"{CWD}/long.txt", "offset": 40}),
    ("Read", {"file_path": f"{CWD}/long.txt", "offset": 2, "limit": 2}),
    ("Write", {"file_path": f"{CWD}/nonl.txt", "content": "a\nb"}),
    ("Read", {"file_path": f"{CWD}/nonl.txt"}),
    ("MultiEdit", {"file_path": f"{CWD}/nonl.txt", "edits": [
        {"old_string": "a", "new_string": "é😀" * 30}]}),
    ("Bash", {"command": "nonexistent_cmd_xyz"}),
    ("Bash", {"command": "echo hi\nnonexistent_two"}),
    ("Bash", {"command": "echo out; echo err >&2"}),
    ("Bash", {"command": "echo out; echo err >&2; exit 3"}),
    ("Bash", {"command": "echo $0"}),
]
_EVERY_DEFERRED = ("select:CronCreate,CronDelete,CronList,EnterWorktree,ExitWorktree,Monitor,"
                   "NotebookEdit,SendMessage,TaskStop,WebFetch,WebSearch")
#: 2.x: the workspace tools (no Glob/Grep: listing and searching go through Bash), a deferred
#: tool called before and after ToolSearch loads it, ToolSearch's answers, and each tool that
#: needs what a sandboxed task lacks (network, other agents, schedules, worktrees, skills).
CC2_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("Write", {"file_path": f"{CWD}/notes.txt", "content": "alpha\nbeta\n"}),
    ("Read", {"file_path": f"{CWD}/notes.txt"}),
    ("Edit", {"file_path": f"{CWD}/notes.txt", "old_string": "beta", "new_string": "gamma"}),
    ("Edit", {"file_path": f"{CWD}/notes.txt", "old_string": "zzz", "new_string": "y"}),
    ("Write", {"file_path": f"{CWD}/notes.txt", "content": "one\ntwo\none\n"}),
    ("Edit", {"file_path": f"{CWD}/notes.txt", "old_string": "one", "new_string": "uno"}),
    ("Edit", {"file_path": f"{CWD}/notes.txt", "old_string": "one", "new_string": "uno",
              "replace_all": True}),
    ("Edit", {"file_path": f"{CWD}/notes.txt", "old_string": "two", "new_string": "two"}),
    ("Write", {"file_path": f"{CWD}/long.txt", "content": _LONG}),
    ("Read", {"file_path": f"{CWD}/long.txt", "offset": 2, "limit": 2}),
    ("Read", {"file_path": f"{CWD}/long.txt", "offset": 40}),
    ("Write", {"file_path": f"{CWD}/empty.txt", "content": ""}),
    ("Read", {"file_path": f"{CWD}/empty.txt"}),
    ("Read", {"file_path": f"{CWD}/missing.txt"}),
    ("Read", {"file_path": CWD}),
    ("Read", {"file_path": f"{CWD}/notes.txt", "offset": 1}),
    ("Read", {"file_path": f"{CWD}/notes.txt", "pages": "1"}),
    ("Read", {"file_path": f"{CWD}/notes.txt", "bogus": 1}),
    ("Read", {"offset": "x"}),
    ("Write", {"file_path": f"{CWD}/CLAUDE.md", "content": "x"}),
    ("Edit", {"file_path": f"{CWD}/CLAUDE.md", "old_string": "tabs", "new_string": "spaces"}),
    ("Bash", {"command": "echo out; echo err >&2"}),
    ("Bash", {"command": "echo out; echo err >&2; exit 3"}),
    ("Bash", {"command": "nonexistent_cmd_xyz"}),
    ("Bash", {"command": "ls"}),
    ("Bash", {"command": "grep -rn two ."}),
    ("Bash", {"command": "grep -rn zzz ."}),
    ("WebFetch", {"url": "https://example.com/", "prompt": "Give the title."}),
    ("ToolSearch", {"query": _EVERY_DEFERRED}),
    ("ToolSearch", {"query": "web"}),
    ("ToolSearch", {"query": "select:NoSuchTool"}),
    ("WebFetch", {"url": "https://example.com/", "prompt": "Give the title."}),
    ("WebSearch", {"query": "harnessgrid"}),
    ("CronList", {}),
    ("CronCreate", {"cron": "*/5 * * * *", "prompt": "check the build"}),
    ("CronList", {}),
    ("CronDelete", {"id": "nope"}),
    ("EnterWorktree", {}),
    ("ExitWorktree", {"action": "keep"}),
    ("TaskStop", {"task_id": "nope"}),
    ("SendMessage", {"to": "nobody", "message": "hi"}),
    ("NotebookEdit", {"notebook_path": f"{CWD}/nb.ipynb", "new_source": "x = 1"}),
    ("Skill", {"skill": "nope"}),
    ("ListAgents", {}),
    ("ReportFindings", {"findings": []}),
    ("Workflow", {"name": "nope"}),
    ("DeferredToolPlaceholder", {}),
    ("Agent", {"description": "List files", "prompt": "List the files.",
               "subagent_type": "general-purpose"}),
    ("Monitor", {"description": "watch", "timeout_ms": 1000, "command": "echo hi"}),
    ("ScheduleWakeup", {"delaySeconds": 60, "reason": "wait", "prompt": "go on"}),
]
CC_CALLS = {"1.0.98": CC1_CALLS, "2.1.332": CC2_CALLS}
#: 2.x tools whose answer is advice to the model around a generated id (a launched agent, a
#: monitor, a wakeup, the session's name, a schedule): only its size and first words are kept,
#: the emulation refusing these tools instead (the prose is not ours to copy).
PROSE_RESULTS = frozenset({"Agent", "Monitor", "ScheduleWakeup", "ListAgents", "CronCreate"})
#: The tools the recording session allows without asking (``--allowedTools``).
ALLOWED = {"1.0.98": ("Bash", "Read", "Edit", "Write", "MultiEdit"),
           "2.1.332": ("Bash", "Read", "Edit", "Write")}
#: ``write`` contents (ASCII; accents, CJK and emoji); the path is ``out.txt``. Not empty:
#: OpenClaw refuses empty content before pi's tool runs (``CLAUDE_PARAM_GROUPS``).
OC_WRITES = ["hello\n", "héllo 😀\n", "日本語 🎉🎉\n"]


def strip_reminders(text: str) -> str:
    """``text`` without the ``<system-reminder>`` blocks (prose) that end it; a functional
    warning that *is* the result (``<system-reminder>Warning: ...``) stays."""
    while text.rstrip().endswith("</system-reminder>"):
        at = text.rfind("<system-reminder>\n")
        if at < 0:
            break
        text = text[:at].rstrip("\n")
    return text


def record_claude_code(version: str, work: Path) -> dict[str, Any]:
    calls = CC_CALLS[version]
    command = claude_command(version, work)
    home, cwd = work / "home", work / "proj"
    home.mkdir()
    cwd.mkdir()
    (cwd / "CLAUDE.md").write_text(CLAUDE_MD)
    real = json.loads(json.dumps(calls).replace(CWD, str(cwd)))

    def answer(body: dict[str, Any], turn: int) -> list[dict[str, Any]] | None:
        if turn > len(real):
            return None
        name, args = real[turn - 1]
        return [{"type": "tool_use", "id": f"toolu_{turn:03d}", "name": name, "input": args}]

    seen = run_claude(command, answer, cwd, home, "--permission-mode", "acceptEdits",
                      "--allowedTools", *ALLOWED[version], max_turns=len(real) + 2)
    turns = [b for b in seen if is_main_loop(b)]
    messages = turns[-1]["messages"]
    answers: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for turn in turns:  # each result as it first came back, with the message around it
        for message in turn["messages"]:
            if message["role"] == "user" and isinstance(message["content"], list):
                for block in message["content"]:
                    if block.get("type") == "tool_result":
                        answers.setdefault(block["tool_use_id"], (block, message["content"]))
    if len(answers) != len(calls):
        raise SystemExit(f"expected {len(calls)} tool results, got {len(answers)}")
    out: dict[str, Any] = {
        "package": f"@anthropic-ai/claude-code@{version}",
        "generated_by": "scripts/adapter_outputs.py --claude-code",
        "note": ("Tool results of the CLI for the calls below, in one session ({cwd}: its "
                 "directory, holding CLAUDE.md; `claude -p --permission-mode acceptEdits "
                 f"--allowedTools {' '.join(ALLOWED[version])}`); trailing <system-reminder> "
                 "prose cut. Regenerate with the script; do not edit by hand."),
    }
    if version == "1.0.98":  # 2.x's first message is in its schema fixture's ``prompt``
        first = messages[0]["content"]
        context = first[0]["text"]
        out["first_message"] = {
            "blocks": len(first), "user_text": first[-1]["text"],
            "context_opens": context.startswith("<system-reminder>\n"),
            "context_ends": context.endswith("</system-reminder>\n"),
            "sections": [line for line in context.split("\n") if line.startswith("# ")],
            "memory_line": next(line for line in context.split("\n")
                                if line.startswith("Contents of ")).replace(str(cwd), CWD)}
    out["calls"] = []
    texts_before: list[str] = []
    for turn, (name, args) in enumerate(calls, 1):
        result, message = answers[f"toolu_{turn:03d}"]
        # 2.x sends the results of a session as one growing message, text blocks after them:
        # a call's own texts are the ones its message has beyond the previous call's
        texts = [b["text"] for b in message if b.get("type") == "text"
                 and not b["text"].startswith("<system-reminder>")]
        facts = _facts(result.get("content", ""), str(cwd))
        if name in PROSE_RESULTS and version != "1.0.98" and isinstance(facts, str):
            facts = {"chars": len(facts), "opens": " ".join(facts.split()[:3])}
        entry = {"tool": name, "input": args, "result": facts,
                 "is_error": bool(result.get("is_error"))}
        if version == "1.0.98":
            # a TodoWrite reminder merged into a result trims its start (cli.js)
            entry["reminder_merged"] = "TodoWrite" in str(result["content"])
        else:  # text blocks the CLI adds after the result in the same message
            entry["after_result"] = texts[len(texts_before):]
            texts_before = texts
        out["calls"].append(entry)
    return out


def _facts(content: Any, cwd: str) -> Any:
    """A tool result's content with the directory as ``{cwd}`` and reminder prose cut; block
    lists (2.x ToolSearch) keep their blocks without cache markers."""
    if isinstance(content, list):
        if all(b.get("type") == "text" for b in content):
            return _facts("".join(b["text"] for b in content), cwd)
        return [json.loads(json.dumps({k: v for k, v in b.items() if k != "cache_control"})
                           .replace(cwd, CWD)) for b in content]
    return strip_reminders(str(content)).replace(cwd, CWD)


def record_openclaw(work: Path) -> dict[str, Any]:
    pi = _pack(*PI_CODING_AGENT, work)
    _, typebox, _ = openclaw_typebox(work)
    modules = pi / "node_modules" / "@sinclair"
    modules.mkdir(parents=True)
    (modules / "typebox").symlink_to(typebox)
    (work / "ws").mkdir()
    program = (
        f"import {{ createWriteTool }} from {json.dumps(str(pi / 'dist/core/tools/write.js'))};\n"
        f"const tool = createWriteTool({json.dumps(str(work / 'ws'))});\n"
        f"const out = [];\n"
        f"for (const content of {json.dumps(OC_WRITES)}) {{\n"
        "  const r = await tool.execute('c', { path: 'out.txt', content });\n"
        "  out.push(r.content[0].text);\n"
        "}\n"
        "process.stdout.write(JSON.stringify(out));\n")
    texts = node_json(work / "record.mjs", program)
    return {
        **openclaw_header("scripts/adapter_outputs.py --openclaw"),
        "note": ("Results of pi-coding-agent's write tool (OpenClaw's write) for these calls. "
                 "Regenerate with the script; do not edit by hand."),
        "calls": [{"tool": "write", "input": {"path": "out.txt", "content": content},
                   "result": text} for content, text in zip(OC_WRITES, texts, strict=True)],
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Record the real shells' tool results.")
    parser.add_argument("--claude-code", action="store_true")
    parser.add_argument("--openclaw", nargs="?", const=OPENCLAW[1], metavar="VERSION",
                        help=f"default {OPENCLAW[1]}; a later release through "
                        "scripts/openclaw_recording.py (tools and outputs together)")
    parser.add_argument("--gemini", nargs="?", const="0.61.0", metavar="VERSION",
                        help="a Gemini CLI release (scripts/gemini_recording.py)")
    parser.add_argument("--version", action="append",
                        help=f"Claude Code version to record (default: {' '.join(CC_VERSIONS)})")
    args = parser.parse_args(argv)
    other = _other_recorder(args.openclaw, args.gemini)
    if other is not None:
        return other
    both = not (args.claude_code or args.openclaw)
    jobs: list[tuple[Path, Callable[[Path], dict[str, Any]]]] = []
    if args.claude_code or both:
        for version in args.version or CC_VERSIONS:
            if version not in CC_CALLS:
                raise SystemExit(f"no call list for Claude Code {version}: add one to CC_CALLS")
            jobs.append((CC_FIXTURES / f"outputs-{version}.json",
                         functools.partial(record_claude_code, version)))
    if args.openclaw or both:
        jobs.append((OC_OUT, record_openclaw))
    for out, record in jobs:
        with tempfile.TemporaryDirectory(prefix="hg-outputs-") as tmp:
            data = record(Path(tmp))
        # ASCII escapes: the CLI can cut a surrogate pair in half, which UTF-8 cannot hold
        out.write_text(json.dumps(data, indent=2) + "\n")
        print(f"{out.relative_to(ROOT)}: {len(data['calls'])} calls")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
