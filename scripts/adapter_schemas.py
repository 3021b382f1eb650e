"""Regenerate the adapters' schema fixtures from the published npm packages (maintenance only).

    python scripts/adapter_schemas.py [VERSION ...]      # default: the versions emulated
    python scripts/adapter_schemas.py --openclaw         # OpenClaw's five coding tools

For each Claude Code version: ``npm pack @anthropic-ai/claude-code@VERSION`` into a temporary
folder, run its CLI once in print mode against a local HTTP server that stands in for the
Anthropic API, and keep the ``tools`` of the first ``/v1/messages`` request: the tool
definitions exactly as that release sends them to the model. Descriptions (prose, not ours to
copy) are dropped; names, types, enums, bounds, defaults and required lists stay. The result goes
to ``tests/fixtures/claude_code/tool_schemas-VERSION.json``, which the adapter tests compare the
emulated schemas with, field by field.

OpenClaw (``--openclaw``): ``npm pack`` of ``openclaw@2026.2.26``, its
``@mariozechner/pi-coding-agent@0.55.1`` and ``@sinclair/typebox`` at the version OpenClaw
pins; node evaluates the TypeBox schema definitions found in the packages' code (``readSchema``,
``writeSchema``, ``editSchema`` in pi-coding-agent's ``dist/core/tools``; ``execSchema`` and
``processSchema`` in OpenClaw's ``dist/pi-embedded-*.js``) and applies OpenClaw's own
``patchToolSchemaForClaudeCompatibility`` (taken from the same file) to read, write and edit, as
OpenClaw does before the model sees them. Output: ``tests/fixtures/openclaw/tool_schemas-2026.2.26.json``,
with ``described``: the properties that carry a description. The real outputs of a fixed set of
calls are recorded by the sibling ``scripts/adapter_outputs.py``.

Needs ``npm`` and ``node`` (>= 18) and the npm registry; nothing else is contacted. The
stand-in server (:func:`scripted_server`, shared with ``adapter_outputs.py``) streams replies
as the API does; the CLI runs with only ``PATH``, ``HOME`` (a fresh folder), a dummy
``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL`` (the server), ``DISABLE_AUTOUPDATER=1`` and
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``, which is all it needs to run unattended.

Claude Code 2.x packages ship no ``cli.js``: the CLI is a native binary in a platform package
(``@anthropic-ai/claude-code-linux-x64``), so for those the script packs that one and runs its
``claude`` binary the same way (about 190 MB to download; Linux x86-64 hosts only). 2.x loads
most tools on demand: its first request carries some tools and a ``system``-role message
naming the deferred ones, so the server answers the first turn with a ToolSearch call
``select:<every deferred name>`` (the query syntax that message gives) and keeps the next
request too, whose ``tools`` hold every tool. The 2.x fixture adds ``deferred``,
``loaded_order``, ``defer_loading``, ``tool_search`` (the query, the result's blocks, the text
after it) and ``prompt``: the first request's layout with its prose replaced by facts (the
``system`` blocks' kinds, the header's fields, the main prompt's headings; the first user
message's blocks; the system-role message's paragraphs with the names they list).
Any published 2.x version records the same way: ``python scripts/adapter_schemas.py 2.1.332``.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "claude_code"
PACKAGE = "@anthropic-ai/claude-code"
DEFAULT_VERSIONS = ("1.0.96", "1.0.98", "2.1.332")
OPENCLAW = ("openclaw", "2026.2.26")
PI_CODING_AGENT = ("@mariozechner/pi-coding-agent", "0.55.1")


def strip_prose(schema: Any) -> Any:
    """A JSON schema without its ``description`` texts and ``$schema`` tag (property *names*
    called ``description``, like Bash's, are kept)."""
    if isinstance(schema, list):
        return [strip_prose(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("description", "$schema"):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: strip_prose(sub) for name, sub in value.items()}
        else:
            out[key] = strip_prose(value)
    return out


PROMPT = "hello there"
#: What the stand-in server answers when the script has no call for a request: the end.
DONE: list[dict[str, Any]] = [{"type": "text", "text": "done"}]


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


def is_main_loop(body: dict[str, Any]) -> bool:
    """Whether ``body`` is a turn of the session's own agent loop: it carries the tools and
    its first message ends with :data:`PROMPT` (side requests - titles, command prefixes -
    carry no tools; a subagent's loop starts from its own prompt)."""
    messages = body.get("messages") or []
    if len(body.get("tools") or []) <= 5 or not messages:
        return False
    first = messages[0]["content"]
    last = first if isinstance(first, str) else (first[-1].get("text") if first else None)
    return last == PROMPT


Answer = Callable[[dict[str, Any], int], "list[dict[str, Any]] | None"]


def scripted_server(answer: Answer, seen: list[dict[str, Any]]) -> http.server.HTTPServer:
    """A stand-in for the Messages API that keeps every request body in ``seen`` and answers
    the ``n``-th turn of the agent loop with ``answer(body, n)`` (tool_use blocks; None ends
    the turn with a text reply); any other request gets the text reply."""

    class Script(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # http.server's name
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            seen.append(body)
            content = None
            if is_main_loop(body):
                content = answer(body, sum(1 for b in seen if is_main_loop(b)))
            message = {"id": f"msg_{len(seen):04d}", "type": "message", "role": "assistant",
                       "model": body.get("model", "m"), "content": content or DONE,
                       "stop_reason": "tool_use" if content else "end_turn",
                       "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
            data = _sse(message) if body.get("stream") else json.dumps(message).encode()
            self.send_response(200)
            self.send_header("content-type", "text/event-stream" if body.get("stream")
                             else "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # quiet server
            pass

    return http.server.HTTPServer(("127.0.0.1", 0), Script)


def claude_command(version: str, work: Path) -> list[str]:
    """The command that runs ``claude-code@version``, packed under ``work``: ``node cli.js``
    (1.x) or the native binary of the platform package (2.x)."""
    package = _pack(PACKAGE, version, work)
    cli = package / "cli.js"
    if cli.is_file():
        return ["node", str(cli)]
    binary = _pack(f"{PACKAGE}-linux-x64", version, work) / "claude"
    binary.chmod(0o755)
    return [str(binary)]


def run_claude(command: list[str], answer: Answer, cwd: Path, home: Path, *args: str,
               max_turns: int = 3) -> list[dict[str, Any]]:
    """Run ``command -p PROMPT`` in ``cwd`` against :func:`scripted_server`; every request it
    sent. The environment holds only what the CLI needs to run unattended against the fake
    base URL (a dummy key, no updater, no telemetry)."""
    seen: list[dict[str, Any]] = []
    server = scripted_server(answer, seen)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home),
           "ANTHROPIC_API_KEY": "sk-capture-only",
           "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{server.server_port}",
           "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    try:
        subprocess.run([*command, "-p", PROMPT, "--max-turns", str(max_turns), *args], cwd=cwd,
                       env=env, timeout=600, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    finally:
        server.shutdown()
    if os.environ.get("HG_RECORD_DUMP"):  # the raw requests, to check what was cut
        Path(os.environ["HG_RECORD_DUMP"]).write_text(json.dumps(seen))
    return seen


def deferred_names(body: dict[str, Any]) -> list[str]:
    """The tools a 2.x request names as loadable through ToolSearch (the lines after the
    system-role message's deferred-tools paragraph opener), in its order."""
    for paragraph in _system_message(body).split("\n\n"):
        lines = paragraph.split("\n")
        if "ToolSearch" in lines[0] and "deferred" in lines[0]:
            return lines[1:]
    return []


def _system_message(body: dict[str, Any]) -> str:
    for message in body["messages"]:
        if message["role"] == "system":
            content = message["content"]
            return content if isinstance(content, str) else "".join(
                b.get("text", "") for b in content)
    return ""


def capture_session(version: str, work: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The first agent-loop request of ``claude-code@version`` and, for a release that defers
    tools (2.x), the request after a ToolSearch that loads every deferred tool."""
    command = claude_command(version, work)
    home, cwd = work / "home", work / "proj"
    home.mkdir()
    cwd.mkdir()
    (cwd / "CLAUDE.md").write_text("Use tabs.\n")

    def answer(body: dict[str, Any], turn: int) -> list[dict[str, Any]] | None:
        names = deferred_names(body)
        if turn > 1 or not names:
            return None
        return [{"type": "tool_use", "id": "toolu_search", "name": "ToolSearch",
                 "input": {"query": "select:" + ",".join(names)}}]

    turns = [b for b in run_claude(command, answer, cwd, home) if is_main_loop(b)]
    if not turns:
        raise SystemExit(f"{PACKAGE}@{version} sent no request with tools")
    loaded = turns[1] if deferred_names(turns[0]) and len(turns) > 1 else None
    return json.loads(json.dumps(turns[0]).replace(str(cwd), "{cwd}")), loaded


def fixture(version: str, first: dict[str, Any],
            loaded: dict[str, Any] | None) -> dict[str, Any]:
    tools = first["tools"]
    out: dict[str, Any] = {
        "package": f"{PACKAGE}@{version}",
        "release": f"Claude Code {version}",
        "generated_by": "scripts/adapter_schemas.py",
        "note": ("Input schemas of every tool this release sends to the model (first "
                 f"/v1/messages request of `{'cli.js' if version.startswith('1.') else 'claude'} -p`), "
                 "descriptions removed. Regenerate with the script; do not edit by hand."),
        "tool_order": [t["name"] for t in tools],
        "tools": {t["name"]: strip_prose(t["input_schema"]) for t in tools},
    }
    if loaded is None:
        return out
    every = loaded["tools"]
    return out | {
        "note": ("Input schemas of every tool this release offers in `claude -p`, descriptions "
                 "removed: tool_order is the first request's tools (the ones loaded from the "
                 "start), deferred the tools its system-role message names for ToolSearch, "
                 "loaded_order the tools of the request after a ToolSearch that loaded them "
                 "all, defer_loading the tools sent with that flag. prompt is the structure "
                 "of the first request, its prose replaced by facts (kinds, headings, names, "
                 "line counts). Regenerate with the script; do not edit by hand."),
        "tools": {t["name"]: strip_prose(t["input_schema"]) for t in every},
        "deferred": deferred_names(first),
        "loaded_order": [t["name"] for t in every],
        "defer_loading": [t["name"] for t in every if t.get("defer_loading")],
        "tool_search": tool_search_shape(loaded),
        "prompt": prompt_structure(first),
    }


def tool_search_shape(loaded: dict[str, Any]) -> dict[str, Any]:
    """How the ToolSearch result comes back: the query sent, the block types of its
    tool_result, and the text blocks of the same user message."""
    call = next(b for m in loaded["messages"] if m["role"] == "assistant"
                for b in m["content"] if b.get("type") == "tool_use")
    answer = loaded["messages"][-1]["content"]
    result = next(b for b in answer if b.get("type") == "tool_result")
    return {"query": call["input"]["query"],
            "result_blocks": [{k: v for k, v in b.items() if k != "cache_control"}
                              for b in result["content"]],
            "is_error": bool(result.get("is_error")),
            "after_result": [b["text"] for b in answer if b.get("type") == "text"]}


_PARAGRAPH_KINDS = (("# Environment", "environment"), ("powered by the model", "model"),
                    ("deferred tools", "deferred_tools"), ("agent types", "agent_types"),
                    ("skills are available", "skills_intro"), ("Today's date", "date"))


def _paragraph(text: str) -> dict[str, Any]:
    """One paragraph of the system-role message as facts: its kind, line count, and the names
    it lists (environment keys, tools, agent types, skills); prose is dropped."""
    lines = text.split("\n")
    kind = next((k for marker, k in _PARAGRAPH_KINDS if marker in lines[0]),
                "list" if lines[0].startswith("- ") else "prose")
    out: dict[str, Any] = {"kind": kind, "lines": len(lines)}
    if kind == "environment":
        out["heading"] = lines[0]
        # "key: value" items; an item that is advice (a long first clause) is only counted
        items = [line for line in lines if line.startswith(" - ")]
        out["keys"] = [line.split(":")[0].strip(" -") for line in items
                       if ":" in line and len(line.split(":")[0]) < 40]
        out["advice_items"] = len(items) - len(out["keys"])
    elif kind == "deferred_tools":
        out["names"] = lines[1:]
        out["query_syntax"] = lines[0].split('"')[1]
    elif kind in ("agent_types", "list"):
        out["names"] = [line[2:].split(":")[0] for line in lines if line.startswith("- ")]
    return out


def prompt_structure(first: dict[str, Any]) -> dict[str, Any]:
    """The layout of a 2.x first request without its prose: the ``system`` blocks, the first
    user message's blocks and the system-role message's paragraphs."""
    system = first["system"]
    header = system[0]["text"]
    name, _, fields = header.partition(": ")
    blocks = [{"kind": "header", "name": name, "fields": {
        key: value for key, _, value in (f.strip().partition("=")
                                         for f in fields.split(";") if f.strip())}},
        {"kind": "identity", "lines": system[1]["text"].count("\n") + 1},
        {"kind": "main", "headings": [line for line in system[2]["text"].split("\n")
                                      if line.startswith("# ")]}]
    for block, raw in zip(blocks, system, strict=True):
        block["cache_control"] = "cache_control" in raw
    user = first["messages"][0]["content"]
    roles = [m["role"] for m in first["messages"]]
    return {
        "system_blocks": blocks,
        "messages": roles,
        "first_user_blocks": [_user_block(b["text"]) for b in user],
        "system_message": [_paragraph(p) for p in _system_message(first).split("\n\n")],
    }


def _user_block(text: str) -> dict[str, Any]:
    if text == PROMPT:
        return {"kind": "prompt"}
    kind = "claude_md" if "\nContents of " in text else "attribution"
    out: dict[str, Any] = {"kind": kind, "opens": text.split("\n")[0],
                           "ends": text.rstrip("\n").split("\n")[-1],
                           "ends_with_newline": text.endswith("\n")}
    if kind == "claude_md":
        out["memory_line"] = next(line for line in text.split("\n")
                                  if line.startswith("Contents of "))
        out["memory_follows"] = text.split(out["memory_line"] + "\n", 1)[1].split(
            "</system-reminder>")[0]
    else:  # the trailer lines, which are facts; the instructions around them are prose
        out["trailers"] = [line for line in text.split("\n")
                           if line.startswith(("Co-Authored-By:", "🤖"))]
    return out


def _pack(name: str, version: str, work: Path) -> Path:
    """``npm pack name@version`` unpacked under ``work``; the package folder."""
    out = subprocess.run(["npm", "pack", f"{name}@{version}", "--silent"], cwd=work, check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    folder = work / out.removesuffix(".tgz")
    with tarfile.open(work / out) as tar:
        tar.extractall(folder, filter="data")
    return folder / "package"


def _balanced(source: str, start: int) -> str:
    """The text from ``start`` (an opening parenthesis) to its matching close."""
    depth = 0
    quote = ""
    i = start
    while i < len(source):
        ch = source[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'`":
            quote = ch
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
            if depth == 0:
                return source[start:i + 1]
        i += 1
    raise SystemExit("unbalanced source")


def _definition(source: str, head: str) -> str:
    """The call expression after ``head`` (``const readSchema = Type.Object``)."""
    at = source.find(head)
    if at < 0:
        raise SystemExit(f"{head!r} not found in the package")
    return head.split("=", 1)[1].strip() + _balanced(source, at + len(head))


def _function(source: str, name: str) -> str:
    at = source.find(f"function {name}(")
    if at < 0:
        raise SystemExit(f"function {name} not found in the package")
    body = source.index("{", source.index(")", at))
    return source[at:body] + _balanced(source, body)


def openclaw_typebox(work: Path) -> tuple[Path, Path, str]:
    """OpenClaw's unpacked package, and the typebox version it pins, unpacked."""
    openclaw = _pack(*OPENCLAW, work)
    version = json.loads((openclaw / "package.json").read_text())["dependencies"][
        "@sinclair/typebox"]
    return openclaw, _pack("@sinclair/typebox", version, work), version


def node_json(script: Path, program: str) -> Any:
    """Run ``program`` with node from ``script`` and read what it writes as JSON."""
    script.write_text(program)
    return json.loads(subprocess.run(["node", str(script)], check=True, capture_output=True,
                                     text=True).stdout)


def openclaw_header(generated_by: str) -> dict[str, str]:
    """The packages an OpenClaw fixture was recorded from."""
    return {"package": f"{OPENCLAW[0]}@{OPENCLAW[1]}",
            "pi_coding_agent": f"{PI_CODING_AGENT[0]}@{PI_CODING_AGENT[1]}",
            "generated_by": generated_by}


def capture_openclaw(work: Path) -> dict[str, Any]:
    openclaw, typebox, typebox_version = openclaw_typebox(work)
    pi = _pack(*PI_CODING_AGENT, work)
    chunk = next(p for p in sorted((openclaw / "dist").glob("pi-embedded-*.js"))
                 if "const processSchema = Type.Object" in p.read_text())
    oc_source = chunk.read_text()
    expressions = {name: _definition((pi / "dist/core/tools" / f"{name}.js").read_text(),
                                     f"const {name}Schema = Type.Object")
                   for name in ("read", "write", "edit")}
    expressions |= {"exec": _definition(oc_source, "const execSchema = Type.Object"),
                    "process": _definition(oc_source, "const processSchema = Type.Object")}
    program = (
        f"const {{ Type }} = require({json.dumps(str(typebox / 'build/cjs/index.js'))});\n"
        f"{_function(oc_source, 'patchToolSchemaForClaudeCompatibility')}\n"
        f"const expressions = {json.dumps(expressions)};\n"
        "const out = {};\n"
        "for (const [name, expr] of Object.entries(expressions)) {\n"
        "  let schema = new Function('Type', 'return ' + expr)(Type);\n"
        "  if (['read', 'write', 'edit'].includes(name))\n"
        "    schema = patchToolSchemaForClaudeCompatibility({ parameters: schema }).parameters;\n"
        "  out[name] = JSON.parse(JSON.stringify(schema));\n"
        "}\n"
        "process.stdout.write(JSON.stringify(out));\n")
    found = node_json(work / "capture.cjs", program)
    return {
        **openclaw_header("scripts/adapter_schemas.py --openclaw"),
        "typebox": f"@sinclair/typebox@{typebox_version}",
        "note": ("Parameter schemas of OpenClaw's coding tools as the model sees them (after "
                 "OpenClaw's Claude-compatibility patch of read/write/edit), descriptions "
                 "removed. Regenerate with the script; do not edit by hand."),
        "tool_order": list(found),
        "tools": {name: strip_prose(schema) for name, schema in found.items()},
        # which properties carry a description (the text is prose; that there is one is a
        # fact: the aliases copy their original's, ``env`` has none)
        "described": {name: [key for key, sub in schema["properties"].items()
                             if "description" in sub] for name, schema in found.items()},
    }


def _other_recorder(openclaw: str | None, gemini: str | None) -> int | None:
    """Run the recorder of a shell whose tools and outputs are recorded together (OpenClaw
    after 2026.2.26, Gemini CLI): one run writes both fixtures. None: not such a request."""
    if openclaw and openclaw != OPENCLAW[1]:
        from openclaw_recording import main as record_openclaw  # scripts/ is on sys.path

        return record_openclaw([openclaw])
    if gemini:
        from gemini_recording import main as record_gemini

        return record_gemini([gemini])
    return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description="Regenerate the adapters' schema fixtures from the published npm packages.")
    parser.add_argument("versions", nargs="*", metavar="VERSION",
                        help=f"Claude Code versions (default: {' '.join(DEFAULT_VERSIONS)})")
    parser.add_argument("--openclaw", nargs="?", const=OPENCLAW[1], metavar="VERSION",
                        help=f"an OpenClaw release's tools instead (default {OPENCLAW[1]}; a "
                        "later one through scripts/openclaw_recording.py)")
    parser.add_argument("--gemini", nargs="?", const="0.61.0", metavar="VERSION",
                        help="a Gemini CLI release's tools instead (default 0.61.0; "
                        "scripts/gemini_recording.py)")
    args = parser.parse_args(argv)
    other = _other_recorder(args.openclaw, args.gemini)
    if other is not None:
        return other
    with tempfile.TemporaryDirectory(prefix="hg-schemas-") as tmp:
        if args.openclaw:
            out = ROOT / "tests" / "fixtures" / "openclaw" / f"tool_schemas-{OPENCLAW[1]}.json"
            data = capture_openclaw(Path(tmp))
            out.write_text(json.dumps(data, indent=2) + "\n")
            print(f"{out.relative_to(ROOT)}: {len(data['tools'])} tools")
            return 0
        FIXTURES.mkdir(parents=True, exist_ok=True)
        for version in args.versions or list(DEFAULT_VERSIONS):
            work = Path(tmp) / version
            work.mkdir()
            data = fixture(version, *capture_session(version, work))
            path = FIXTURES / f"tool_schemas-{version}.json"
            path.write_text(json.dumps(data, indent=2) + "\n")
            print(f"{path.relative_to(ROOT)}: {len(data['tools'])} tools")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
