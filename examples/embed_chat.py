"""A terminal chat with an agent working on a directory: what embedding harnessgrid in a
product looks like (README, "Embed it"; docs/embedding.md).

The reply streams as it is written; every tool call is shown, and calls that change
something (writes, edits, commands) wait for your y/N; the agent can save notes for you with a
product tool that runs here, outside the sandbox. Ctrl-C stops the agent's current run (the
conversation goes on); an empty line or Ctrl-D ends the chat.

    python examples/embed_chat.py ./my-project --policy openai:gpt-4o-mini
    python examples/embed_chat.py ./my-project --policy openai:qwen3 \\
        --policy-opt base_url=http://127.0.0.1:8000/v1 --harness adapter:claude-code

Without an API key, try it with the tiny offline model (built in seconds; it writes nonsense,
but the whole loop runs on CPU)::

    harnessgrid model tiny ./tiny-model
    python examples/embed_chat.py ./my-project --policy hf:./tiny-model \\
        --policy-opt max_new_tokens=32

``--policy-opt`` values are read as ``harnessgrid run`` reads them: JSON when they are JSON
(numbers, booleans), else text.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

import harnessgrid as hg
from harnessgrid.cli.episode_options import parse_options

NOTES: list[str] = []
CHANGES = {"write", "edit", "shell"}  # abstract actions that change the workspace


def save_note(note: str) -> str:
    """Save a short note for the user (a decision, a follow-up); the notes are shown after
    each reply."""
    NOTES.append(note)
    return f"saved note {len(NOTES)}"


def show(text: str) -> None:
    print(text, end="", flush=True)


async def approve(request: hg.ToolCallRequest) -> hg.Approval:
    """Ask before anything that changes the workspace; a call the harness cannot map to an
    abstract action (a shell's own tool) is asked about too."""
    action = request.action
    if action is not None and action.kind not in CHANGES:
        return hg.allow()
    arguments = json.dumps(request.arguments)[:200]
    answer = await asyncio.to_thread(input, f"\n  allow {request.name} {arguments}? [y/N] ")
    return hg.allow() if answer.strip().lower() in ("y", "yes") else hg.deny(
        "the user said no; ask them what to do instead")


def chat(session: hg.Session) -> None:
    while True:
        try:
            text = input("\nyou> ")
        except EOFError:
            return
        if not text.strip():
            return
        show("agent> ")
        streamed = False  # whether this turn's text arrived in pieces (a streaming policy)
        try:
            for event in session.stream(text):
                if event.type == "turn_started":
                    streamed = False
                elif event.type == "text_delta":
                    streamed = True
                    show(event.text)
                elif event.type == "tool_call":
                    show(f"\n  [{event.name} {json.dumps(event.arguments)[:120]}]")
                elif event.type == "tool_denied":
                    show(f"\n  [{event.name} denied: {event.reason}]")
                elif event.type == "tool_result":
                    first = event.text.strip().splitlines()[:1]
                    show(f"\n  -> {first[0][:120] if first else '(no output)'}\n")
                elif event.type == "model_reply" and event.text and not streamed:
                    show(event.text)
                elif event.type == "finished":
                    show(f"\n[{event.termination}; {event.turns} turns, "
                         f"{event.tokens_in + event.tokens_out} tokens]\n")
        except KeyboardInterrupt:
            show("\n[cancelled]\n")
        for i, note in enumerate(NOTES, 1):
            print(f"  note {i}: {note}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory")
    parser.add_argument("--policy", required=True, help="any policy spec, e.g. openai:MODEL")
    parser.add_argument("--policy-opt", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--harness", default="S1-T0-O2-C1-W0",
                        help="a configuration code or adapter:NAME")
    parser.add_argument("--in-place", action="store_true",
                        help="work on the directory itself, not a copy")
    args = parser.parse_args()
    try:
        options = parse_options(args.policy_opt)
        session = hg.Session(args.directory, harness=args.harness, policy=args.policy,
                             policy_options=options, tools=[save_note], on_tool_call=approve,
                             in_place=args.in_place)
    except hg.HarnessgridError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with session:
        chat(session)
    return 0


if __name__ == "__main__":
    sys.exit(main())
