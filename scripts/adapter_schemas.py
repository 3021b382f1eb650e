"""Regenerate the adapters' schema fixtures from the published npm packages (maintenance only).

    python scripts/adapter_schemas.py [VERSION ...]      # default: the versions emulated
    python scripts/adapter_schemas.py --openclaw         # OpenClaw's five coding tools

For each Claude Code version: ``npm pack @anthropic-ai/claude-code@VERSION`` into a temporary
folder, run its ``cli.js`` once in print mode against a local HTTP server that stands in for the
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

Needs ``npm`` and ``node`` (>= 18) and the npm registry; nothing else is contacted (the API key
is a dummy, the fake server answers every request with an error so the CLI exits).
Claude Code 2.x packages ship no ``cli.js``: the CLI is a native binary in a platform package
(``@anthropic-ai/claude-code-linux-x64``), so for those the script packs that one and runs its
``claude`` binary the same way (about 190 MB to download; Linux x86-64 hosts only). 2.x loads
most tools on demand (``ToolSearch``), so its fixture holds only what the first request carried.
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
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "claude_code"
PACKAGE = "@anthropic-ai/claude-code"
DEFAULT_VERSIONS = ("1.0.96", "1.0.98")
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


class _Capture(http.server.BaseHTTPRequestHandler):
    """Keeps the first request body that carries tools; answers every request with a 400."""

    found: ClassVar[dict[str, Any]] = {}  # shared: a handler is made per request

    def do_POST(self) -> None:  # http.server's name
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            data = json.loads(body)
        except ValueError:
            data = {}
        if isinstance(data, dict) and data.get("tools") and not _Capture.found:
            _Capture.found = data
        reply = b'{"type":"error","error":{"type":"invalid_request_error","message":"capture"}}'
        self.send_response(400)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:  # quiet server
        pass


def capture_tools(version: str, work: Path) -> list[dict[str, Any]]:
    """The tool definitions ``claude-code@version`` sends in its first model request."""
    subprocess.run(["npm", "pack", f"{PACKAGE}@{version}", "--silent"], cwd=work, check=True,
                   stdout=subprocess.DEVNULL)
    tarball = next(work.glob(f"*claude-code-{version}.tgz"))
    with tarfile.open(tarball) as tar:
        tar.extractall(work / version, filter="data")
    cli = work / version / "package" / "cli.js"
    command = ["node", str(cli)]
    if not cli.is_file():  # 2.x: the CLI is the platform package's native binary
        native = f"{PACKAGE}-linux-x64"
        subprocess.run(["npm", "pack", f"{native}@{version}", "--silent"], cwd=work, check=True,
                       stdout=subprocess.DEVNULL)
        with tarfile.open(next(work.glob(f"*claude-code-linux-x64-{version}.tgz"))) as tar:
            tar.extractall(work / "native", filter="data")
        binary = work / "native" / "package" / "claude"
        binary.chmod(0o755)
        command = [str(binary)]
    _Capture.found = {}
    server = http.server.HTTPServer(("127.0.0.1", 0), _Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    home = work / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home),
           "ANTHROPIC_API_KEY": "sk-capture-only",
           "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{server.server_port}",
           "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    try:
        subprocess.run([*command, "-p", "hello", "--max-turns", "1"], cwd=home, env=env,
                       timeout=120, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        server.shutdown()
    if not _Capture.found:
        raise SystemExit(f"{PACKAGE}@{version} sent no request with tools")
    tools: list[dict[str, Any]] = _Capture.found["tools"]
    return tools


def fixture(version: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "package": f"{PACKAGE}@{version}",
        "release": f"Claude Code {version}",
        "generated_by": "scripts/adapter_schemas.py",
        "note": ("Input schemas of every tool this release sends to the model (first "
                 "/v1/messages request of `claude -p`), descriptions removed. Regenerate with "
                 "the script; do not edit by hand."),
        "tool_order": [t["name"] for t in tools],
        "tools": {t["name"]: strip_prose(t["input_schema"]) for t in tools},
    }


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


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description="Regenerate the adapters' schema fixtures from the published npm packages.")
    parser.add_argument("versions", nargs="*", metavar="VERSION",
                        help=f"Claude Code versions (default: {' '.join(DEFAULT_VERSIONS)})")
    parser.add_argument("--openclaw", action="store_true",
                        help=f"OpenClaw {OPENCLAW[1]}'s coding tools instead")
    args = parser.parse_args(argv)
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
            data = fixture(version, capture_tools(version, work))
            path = FIXTURES / f"tool_schemas-{version}.json"
            path.write_text(json.dumps(data, indent=2) + "\n")
            print(f"{path.relative_to(ROOT)}: {len(data['tools'])} tools")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
