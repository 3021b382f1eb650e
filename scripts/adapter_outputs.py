"""Record what the real shells answer to a fixed set of tool calls (maintenance only).

    python scripts/adapter_outputs.py             # both
    python scripts/adapter_outputs.py --claude-code | --openclaw

Claude Code: ``npm pack @anthropic-ai/claude-code@1.0.98``, then ``cli.js -p`` against a local
stand-in for the Anthropic API that answers each turn with the next call of :data:`CC_CALLS`
(streamed as the API streams) and keeps the requests. From the last request come the
tool results (text and ``is_error``) and the shape of the first user message. OpenClaw: the
write tool of ``@mariozechner/pi-coding-agent`` (the version OpenClaw 2026.2.26 ships) run by
node on :data:`OC_WRITES`. Facts only are kept: the working directory becomes ``{cwd}``, the
``<system-reminder>`` prose the CLI appends to results (malware and TodoWrite notes) is cut,
and of the first message only its layout. ``tests/test_adapter_outputs.py`` replays the
same calls through the emulations and compares. Needs ``npm`` and ``node`` (>= 18).
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from adapter_schemas import (
    OPENCLAW,
    PI_CODING_AGENT,
    ROOT,
    _pack,
    node_json,
    openclaw_header,
    openclaw_typebox,
)

CC_VERSION = "1.0.98"
CC_OUT = ROOT / "tests" / "fixtures" / "claude_code" / f"outputs-{CC_VERSION}.json"
OC_OUT = ROOT / "tests" / "fixtures" / "openclaw" / f"outputs-{OPENCLAW[1]}.json"
PROMPT = "hello there"
CWD = "{cwd}"
CLAUDE_MD = "Use tabs.\n"
_LONG = "".join(f"l{i}\n" for i in range(1, 21))
#: The calls, in order, in one session whose directory holds only CLAUDE.md.
CC_CALLS: list[tuple[str, dict[str, Any]]] = [
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


def _sse(message: dict[str, Any]) -> bytes:
    """``message`` as the Messages API streams it."""
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}}]
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta",
                                                          "text": block["text"]}
        events += [{"type": "content_block_start", "index": index, "content_block": start},
                   {"type": "content_block_delta", "index": index, "delta": delta},
                   {"type": "content_block_stop", "index": index}]
    events += [{"type": "message_delta", "delta": {"stop_reason": message["stop_reason"],
                                                   "stop_sequence": None},
                "usage": {"output_tokens": 1}}, {"type": "message_stop"}]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _server(calls: list[tuple[str, dict[str, Any]]], seen: list[dict[str, Any]]) -> Any:
    class Script(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # http.server's name
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            seen.append(body)
            turn = sum(1 for b in seen if len(b.get("tools") or []) > 5)
            if len(body.get("tools") or []) > 5 and turn <= len(calls):  # the agent loop
                name, args = calls[turn - 1]
                content = [{"type": "tool_use", "id": f"toolu_{turn:03d}", "name": name,
                            "input": args}]
                stop = "tool_use"
            else:  # the last turn, and side requests (command prefixes, titles)
                content, stop = [{"type": "text", "text": "done"}], "end_turn"
            message = {"id": "msg_rec", "type": "message", "role": "assistant",
                       "model": body.get("model", "m"), "content": content,
                       "stop_reason": stop, "stop_sequence": None,
                       "usage": {"input_tokens": 1, "output_tokens": 1}}
            data = _sse(message) if body.get("stream") else json.dumps(message).encode()
            self.send_response(200)
            self.send_header("content-type", "text/event-stream" if body.get("stream")
                             else "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    return http.server.HTTPServer(("127.0.0.1", 0), Script)


def record_claude_code(work: Path) -> dict[str, Any]:
    cli = _pack("@anthropic-ai/claude-code", CC_VERSION, work) / "cli.js"
    home, cwd = work / "home", work / "proj"
    home.mkdir()
    cwd.mkdir()
    (cwd / "CLAUDE.md").write_text(CLAUDE_MD)
    real = json.loads(json.dumps(CC_CALLS).replace(CWD, str(cwd)))
    seen: list[dict[str, Any]] = []
    server = _server(real, seen)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "ANTHROPIC_API_KEY": "sk-rec",
           "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{server.server_port}",
           "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    try:
        subprocess.run(["node", str(cli), "-p", PROMPT, "--max-turns", str(len(real) + 2),
                        "--permission-mode", "acceptEdits", "--allowedTools", "Bash", "Read",
                        "Edit", "Write", "MultiEdit"], cwd=cwd, env=env, timeout=600,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    finally:
        server.shutdown()
    if os.environ.get("HG_RECORD_DUMP"):  # the raw requests, to check what was cut
        Path(os.environ["HG_RECORD_DUMP"]).write_text(json.dumps(seen))
    messages = [b for b in seen if len(b.get("tools") or []) > 5][-1]["messages"]
    results = [block for m in messages if m["role"] == "user" and isinstance(m["content"], list)
               for block in m["content"] if block.get("type") == "tool_result"]
    if len(results) != len(CC_CALLS):
        raise SystemExit(f"expected {len(CC_CALLS)} tool results, got {len(results)}")
    first = messages[0]["content"]
    context = first[0]["text"]
    return {
        "package": f"@anthropic-ai/claude-code@{CC_VERSION}",
        "generated_by": "scripts/adapter_outputs.py --claude-code",
        "note": ("Tool results of cli.js for the calls below, in one session ({cwd}: its "
                 "directory, holding CLAUDE.md); trailing <system-reminder> prose cut. "
                 "Regenerate with the script; do not edit by hand."),
        "first_message": {
            "blocks": len(first), "user_text": first[-1]["text"],
            "context_opens": context.startswith("<system-reminder>\n"),
            "context_ends": context.endswith("</system-reminder>\n"),
            "sections": [line for line in context.split("\n") if line.startswith("# ")],
            "memory_line": next(line for line in context.split("\n")
                                if line.startswith("Contents of ")).replace(str(cwd), CWD)},
        "calls": [{"tool": name, "input": args,
                   "result": strip_reminders(str(r["content"])).replace(str(cwd), CWD),
                   "is_error": bool(r.get("is_error")),
                   # a TodoWrite reminder merged into a result trims its start (cli.js)
                   "reminder_merged": "TodoWrite" in str(r["content"])}
                  for (name, args), r in zip(CC_CALLS, results, strict=True)],
    }


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
    parser.add_argument("--openclaw", action="store_true")
    args = parser.parse_args(argv)
    both = not (args.claude_code or args.openclaw)
    for wanted, out, record in ((args.claude_code or both, CC_OUT, record_claude_code),
                                (args.openclaw or both, OC_OUT, record_openclaw)):
        if wanted:
            with tempfile.TemporaryDirectory(prefix="hg-outputs-") as tmp:
                data = record(Path(tmp))
            # ASCII escapes: the CLI can cut a surrogate pair in half, which UTF-8 cannot hold
            out.write_text(json.dumps(data, indent=2) + "\n")
            print(f"{out.relative_to(ROOT)}: {len(data['calls'])} calls")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
