"""Record Gemini CLI's tool schemas, prompt structure and tool results (maintenance only).

    python scripts/gemini_recording.py [VERSION]        # default: the emulated release

``npm pack @google/gemini-cli@VERSION`` (its ``bundle/`` needs no dependencies), then
``gemini -p`` twice against a local stand-in for the Gemini API (``GOOGLE_GEMINI_BASE_URL``;
auth type ``gemini-api-key`` in the temporary HOME's ``~/.gemini/settings.json``, a dummy
key, ``GEMINI_CLI_TRUST_WORKSPACE=true``), about ten seconds in all:

1. ``--approval-mode default`` in a directory holding :data:`TREE_FILES`: the tool names of
   its first ``streamGenerateContent`` request (the read-only set a headless run gets without
   approval) and the project tree its first message draws;
2. ``--approval-mode yolo`` (every tool allowed, what the emulation offers), in a directory
   holding ``GEMINI.md``: the stand-in answers each agent turn with the next call of
   :data:`CALLS` as a ``functionCall`` part and keeps the requests. From the first one come
   the tools (``functionDeclarations``: names, order, ``parametersJsonSchema`` without
   descriptions) and the prompt's structure (headings and tags of ``systemInstruction``,
   subagent and skill names, the ``<session_context>`` lines, where GEMINI.md's text sits);
   from the one after ``enter_plan_mode``, the plan-mode tools; from the last one, the
   ``functionResponse`` of every call.

Side requests (the model router's JSON classifier, the loop check and the like, recognised by
their ``responseJsonSchema``) get a minimal object of that schema (numbers 0, so no loop is
ever "detected"); the web search's own model request (``googleSearch`` tool) gets an HTTP
400, and web_fetch finds every host blocked offline, so each web tool answers as it does when
the service is out of reach. Facts only are kept: the working directory becomes ``{cwd}``,
HOME ``{home}``, the session id ``{session}``, process ids ``{pgid}``; the first-message
sentence (prose) becomes ``{prose}``. Outputs: ``tests/fixtures/gemini_cli/tool_schemas-V.json``
and ``outputs-V.json``. Needs ``npm`` and ``node`` (>= 20). ``HG_RECORD_DUMP=PREFIX`` also
writes the raw requests and the CLI's stderr of each run next to ``PREFIX``.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from adapter_schemas import ROOT, _pack, strip_prose

PACKAGE = "@google/gemini-cli"
DEFAULT_VERSION = "0.61.0"
OUT = ROOT / "tests" / "fixtures" / "gemini_cli"
CWD = "{cwd}"
HOME = "{home}"
PROMPT = "hello there"
GEMINI_MD = "Use tabs.\n"
_LONG = "".join(f"l{i}\n" for i in range(1, 21))
#: The calls, in order, in one session whose directory holds only GEMINI.md.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("write_file", {"file_path": f"{CWD}/notes.txt", "content": "alpha\nbeta\n"}),
    ("read_file", {"file_path": f"{CWD}/notes.txt"}),
    ("replace", {"file_path": f"{CWD}/notes.txt", "instruction": "rename", "old_string": "beta",
                 "new_string": "gamma"}),
    ("replace", {"file_path": f"{CWD}/notes.txt", "instruction": "rename",
                 "old_string": "missing", "new_string": "x"}),
    ("write_file", {"file_path": "long.txt", "content": _LONG}),
    ("read_file", {"file_path": "long.txt", "start_line": 2, "end_line": 4}),
    ("read_file", {"file_path": f"{CWD}/absent.txt"}),
    ("read_file", {"path": "notes.txt"}),
    ("list_directory", {"dir_path": CWD}),
    ("glob", {"pattern": "*.txt"}),
    ("grep_search", {"pattern": "gamma"}),
    ("grep_search", {"pattern": "zzz_nothing"}),
    ("run_shell_command", {"command": "echo out; echo err >&2"}),
    ("run_shell_command", {"command": "echo out; exit 3"}),
    ("run_shell_command", {"command": "nonexistent_cmd_xyz"}),
    ("write_file", {"file_path": "/tmp/hg-outside-gemini.txt", "content": "x"}),
    ("no_such_tool", {}),
    ("google_web_search", {"query": "harnessgrid"}),
    ("web_fetch", {"prompt": "Summarize https://example.com/"}),
    ("web_fetch", {"prompt": "Summarize this page"}),
    ("read_file", {"file_path": "long.txt", "start_line": "2"}),
    ("write_file", {"file_path": "notes.txt", "content": "alpha\ngamma\ndelta\n"}),
    ("replace", {"file_path": "long.txt", "instruction": "bump", "old_string": "l1",
                 "new_string": "L1"}),
    ("replace", {"file_path": "long.txt", "instruction": "bump", "old_string": "l1",
                 "new_string": "L1", "allow_multiple": True}),
    ("replace", {"file_path": "notes.txt", "instruction": "noop", "old_string": "alpha",
                 "new_string": "alpha"}),
    ("replace", {"file_path": "fresh.txt", "instruction": "create", "old_string": "",
                 "new_string": "new\n"}),
    ("replace", {"file_path": "ghost.txt", "instruction": "edit", "old_string": "a",
                 "new_string": "b"}),
    ("read_file", {"file_path": "."}),
    ("read_file", {"file_path": "long.txt", "start_line": 30}),
    ("list_directory", {"dir_path": "nowhere"}),
    ("list_directory", {"dir_path": "notes.txt"}),
    ("glob", {"pattern": "*.zip"}),
    ("grep_search", {"pattern": "l1", "include_pattern": "*.txt", "names_only": True}),
    ("grep_search", {"pattern": "L1[0-9]", "dir_path": CWD}),
    ("run_shell_command", {"command": "pwd", "dir_path": "nowhere"}),
    ("run_shell_command", {"command": "true"}),
    ("run_shell_command", {"command": "seq 1 20000"}),
    ("update_topic", {"title": "Step", "strategic_intent": "Check the notes."}),
    ("list_background_processes", {}),
    ("read_background_output", {"pid": 4242}),
    ("invoke_agent", {"agent_name": "nobody", "prompt": "help"}),
    ("activate_skill", {"name": "no-such-skill"}),
    ("enter_plan_mode", {"reason": "look first"}),
    ("write_file", {"file_path": "after_plan.txt", "content": "x"}),
    ("run_shell_command", {"command": "echo planned"}),
    ("read_file", {"file_path": "notes.txt"}),
    ("enter_plan_mode", {}),
    ("write_file", {"file_path": f"{HOME}/.gemini/tmp/{{project}}/plans/p.md",
                    "content": "# Plan\n"}),
    ("exit_plan_mode", {"plan_filename": "missing.md"}),
    ("exit_plan_mode", {"plan_filename": "p.md"}),
    ("write_file", {"file_path": "after.txt", "content": "x"}),
]
_BIG = "x" * 79 + "\n"
#: Calls whose results add up past the masking thresholds (in a session of their own): each
#: result of the big file is about 40000 tokens.
MASK_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("write_file", {"file_path": "big.txt", "content": _BIG * 2000}),
    ("run_shell_command", {"command": "seq 1 3000"}),
    ("read_file", {"file_path": "big.txt"}),
    ("read_file", {"file_path": "big.txt"}),
    ("read_file", {"file_path": "big.txt"}),
]
#: The default run's project (no GEMINI.md): its tree is recorded.
TREE_FILES = {"b.txt": "", "a.txt": "", "src/main.py": "", "src/util/x.py": "",
              "docs/readme.md": "", "Zeta.md": "", ".hidden": ""}
_WEB_TOOLS = ("googleSearch", "urlContext", "googleSearchRetrieval")


def _minimal(schema: dict[str, Any]) -> Any:
    """The smallest value of a (Gemini-typed) JSON schema: a side request's answer."""
    kind = str(schema.get("type", "object")).lower()
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        return {key: _minimal(sub) for key, sub in schema.get("properties", {}).items()}
    return {"string": "ok", "integer": 50, "number": 0, "boolean": False, "array": []}.get(kind)


def _server(calls: list[tuple[str, dict[str, Any]]], seen: list[dict[str, Any]]) -> Any:
    class StandIn(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # http.server's name
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            declared = [d for t in body.get("tools") or [] for d in t.get("functionDeclarations",
                                                                          [])]
            web = any(key in t for t in body.get("tools") or [] for key in _WEB_TOOLS)
            if web:  # the web tools' service is out of reach
                self._send(400, {"error": {"code": 400, "message": "offline",
                                           "status": "INVALID_ARGUMENT"}})
                return
            schema = (body.get("generationConfig") or {}).get("responseJsonSchema")
            if declared:
                seen.append({"path": self.path, **body})
                turn = len(seen)
                if turn <= len(calls):
                    name, args = calls[turn - 1]
                    parts: list[dict[str, Any]] = [{"functionCall": {
                        "id": f"call_{turn:03d}", "name": name, "args": args}}]
                else:
                    parts = [{"text": "done"}]
            elif schema:
                parts = [{"text": json.dumps(_minimal(schema))}]
            else:
                parts = [{"text": "ok"}]
            reply = {"candidates": [{"content": {"role": "model", "parts": parts},
                                     "finishReason": "STOP", "index": 0}],
                     "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1,
                                       "totalTokenCount": 2}}
            self._send(200, reply, sse="alt=sse" in self.path)

        def _send(self, code: int, reply: dict[str, Any], sse: bool = False) -> None:
            data = (f"data: {json.dumps(reply)}\r\n\r\n" if sse else json.dumps(reply)).encode()
            self.send_response(code)
            self.send_header("content-type", "text/event-stream" if sse else "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    return http.server.HTTPServer(("127.0.0.1", 0), StandIn)


def run_cli(package: Path, work: Path, mode: str, calls: list[tuple[str, dict[str, Any]]],
            files: dict[str, str], label: str = "") -> tuple[list[dict[str, Any]], Path, Path]:
    """The agent-loop requests of one ``gemini -p`` run in a directory holding ``files``;
    its cwd and HOME (named after ``label``, by default the mode)."""
    label = label or mode
    home, cwd = work / f"home-{label}", work / f"proj-{label}"
    (home / ".gemini").mkdir(parents=True)
    cwd.mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(
        {"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    for name, text in files.items():
        (cwd / name).parent.mkdir(parents=True, exist_ok=True)
        (cwd / name).write_text(text)
    real = json.loads(json.dumps(calls).replace(CWD, str(cwd)).replace(HOME, str(home))
                      .replace("{project}", cwd.name))
    seen: list[dict[str, Any]] = []
    server = _server(real, seen)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "GEMINI_API_KEY": "dummy",
           "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{server.server_port}",
           "GEMINI_CLI_TRUST_WORKSPACE": "true", "NO_COLOR": "1", "TERM": "dumb",
           "TMPDIR": str(work)}  # its error reports go there, and away with it
    try:
        done = subprocess.run(["node", str(package / "bundle" / "gemini.js"), "-p", PROMPT,
                               "--approval-mode", mode], cwd=cwd, env=env, timeout=900,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    finally:
        server.shutdown()
    dump = os.environ.get("HG_RECORD_DUMP")
    if dump:  # the raw requests and the CLI's complaints, to check what was cut
        Path(f"{dump}.{label}.json").write_text(json.dumps(seen))
        Path(f"{dump}.{label}.stderr").write_text(done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"gemini -p ({mode}) failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seen, cwd, home


def _declarations(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for t in request["tools"] for d in t.get("functionDeclarations", [])]


def _facts(text: str, cwd: Path, home: Path) -> str:
    """``text`` with the run's own paths, session id and process ids as placeholders."""
    text = text.replace(str(cwd), CWD).replace(str(home), HOME)
    text = text.replace(f"/.gemini/tmp/{cwd.name}", "/.gemini/tmp/{project}")
    text = re.sub(r"(_call_\d{3})_[a-z0-9]+\.txt", r"\1_{random}.txt", text)  # masked results
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "{session}",
                  text)
    return re.sub(r"PGID: \d+", "PGID: {pgid}", text)


def _names(text: str, tag: str) -> list[str]:
    """The ``<name>`` entries of the ``<tag>`` block (subagents, skills)."""
    block = text.split(f"<{tag}>", 1)[-1].split(f"</{tag}>", 1)[0]
    return re.findall(r"<name>(.*?)</name>", block)


def tree_lines(request: dict[str, Any], cwd: Path, home: Path) -> list[str]:
    """The ``Directory Structure`` lines of the first message's context block."""
    context = request["contents"][0]["parts"][0]["text"].split("\n")
    start = context.index(f"{cwd}/")
    end = context.index("", start)
    return [_facts(line, cwd, home) for line in context[start:end]]


def prompt_structure(request: dict[str, Any], cwd: Path, home: Path) -> dict[str, Any]:
    """The system prompt's and first message's layout (headings, tags, fact lines)."""
    system = "\n".join(p["text"] for p in request["systemInstruction"]["parts"])
    lines = system.split("\n")
    first = request["contents"][0]["parts"]
    context = first[0]["text"]
    return {
        "system_parts": len(request["systemInstruction"]["parts"]),
        "headings": [line for line in lines if line.startswith("#")],
        "tags": [line for line in lines if re.fullmatch(r"</?[a-z_]+>", line)],
        "memory_in_system": GEMINI_MD.strip() in system,
        "memory_in_first_message": any(GEMINI_MD.strip() in p.get("text", "") for p in first),
        "first_message_parts": len(first),
        "user_text": first[-1]["text"],
        # the block's lines; its opening sentence (prose) is a placeholder, the date and
        # OS lines vary by machine and are left out
        "context_lines": ["{prose}" if index == 1 else _facts(line, cwd, home)
                          for index, line in enumerate(context.split("\n"))
                          if not line.startswith(("Today's date", "My operating system"))],
        "subagents": _names(system, "available_subagents"),
        "skills": _names(system, "available_skills"),
        "generation_config": {k: v for k, v in request.get("generationConfig", {}).items()
                              if k != "thinkingConfig"},
    }


def record(version: str, work: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    package = _pack(PACKAGE, version, work)
    default, default_cwd, default_home = run_cli(package, work, "default", [], TREE_FILES)
    seen, cwd, home = run_cli(package, work, "yolo", CALLS, {"GEMINI.md": GEMINI_MD})
    masking, mask_cwd, mask_home = run_cli(package, work, "yolo", MASK_CALLS, {}, "mask")
    planned = next(i for i, (name, _) in enumerate(CALLS) if name == "enter_plan_mode")
    first, last = seen[0], seen[-1]
    declared = _declarations(first)
    names = {d["name"] for d in declared}
    plan_tools = _declarations(seen[planned + 1])
    header = {"package": f"{PACKAGE}@{version}", "generated_by": "scripts/gemini_recording.py"}
    schemas = {
        **header,
        "note": ("Function declarations of the first streamGenerateContent request of "
                 "`gemini -p --approval-mode yolo` (tool_order, tools) and of the default "
                 "approval mode (default_tool_order), descriptions removed; the system "
                 "prompt's structure. Regenerate with the script; do not edit by hand."),
        "tool_order": [d["name"] for d in declared],
        "default_tool_order": [d["name"] for d in _declarations(default[0])],
        "plan_mode_tool_order": [d["name"] for d in plan_tools],
        "plan_mode_tools": {d["name"]: strip_prose(d["parametersJsonSchema"])
                            for d in plan_tools if d["name"] not in names},
        "tools": {d["name"]: strip_prose(d["parametersJsonSchema"]) for d in declared},
        "prompt": prompt_structure(first, cwd, home),
        # the project tree of the default run's first message (files: TREE_FILES)
        "tree_lines": tree_lines(default[0], default_cwd, default_home),
    }
    responses = _responses(last, len(CALLS))
    # the masking run's last request: what the model is sent of each earlier result
    masked = _responses(masking[-1], len(MASK_CALLS))
    outputs = {
        **header,
        "note": ("functionResponse of each call below, in one `--approval-mode yolo` session "
                 "({cwd}: its directory, holding GEMINI.md; {home}: HOME). Regenerate with the "
                 "script; do not edit by hand."),
        "calls": [{"tool": name, "input": args, "response_name": r.get("name"),
                   "response": json.loads(_facts(json.dumps(r["response"]), cwd, home))}
                  for (name, args), r in zip(CALLS, responses, strict=True)],
        # the request after MASK_CALLS's last call, in a session of their own: the results
        # before it as sent then (old bulky ones masked); inputs with their content's size
        # a masked preview is cut at a character count: the length of the run's {cwd} matters
        "masking_cwd_chars": len(str(mask_cwd)),
        "masking": [_masking_entry(name, args, r["response"], mask_cwd, mask_home)
                    for (name, args), r in zip(MASK_CALLS, masked, strict=True)],
    }
    return schemas, outputs


def _masking_entry(name: str, args: dict[str, Any], response: dict[str, Any], cwd: Path,
                   home: Path) -> dict[str, Any]:
    """One result of the masking run as the last request sent it: the masked text, or only
    that it went unmasked (the text is the plain result, 160 KB)."""
    text = response.get("output", "")
    entry: dict[str, Any] = {
        "tool": name,
        "input": {k: f"<{len(v)} characters>" if k == "content" else v for k, v in args.items()},
        "masked": text.startswith("<tool_output_masked>")}
    if entry["masked"]:
        entry["sent"] = _facts(text, cwd, home)
    return entry


def _responses(request: dict[str, Any], expected: int) -> list[dict[str, Any]]:
    """The functionResponse parts of a request's history, in order."""
    found = [part["functionResponse"] for message in request["contents"]
             if message["role"] == "user" for part in message["parts"]
             if "functionResponse" in part]
    if len(found) != expected:
        raise SystemExit(f"expected {expected} function responses, got {len(found)}")
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Record Gemini CLI's tools and tool results.")
    parser.add_argument("version", nargs="?", default=DEFAULT_VERSION)
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hg-gemini-") as tmp:
        schemas, outputs = record(args.version, Path(tmp))
    for stem, data in (("tool_schemas", schemas), ("outputs", outputs)):
        path = OUT / f"{stem}-{args.version}.json"
        path.write_text(json.dumps(data, indent=2) + "\n")
        print(f"{path.relative_to(ROOT)}: {len(data.get('tools') or data.get('calls'))} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
