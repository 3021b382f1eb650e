"""Gemini CLI's context management in a headless run: tool output masking.

Before each model request the CLI masks bulky old tool results (``ToolOutputMaskingService``
in the 0.61.0 bundle, on by default): scanning the function responses from the newest back (the
current turn's, not yet in the history, are spared), the first 50000 estimated tokens are
protected; the response that crosses that line and every older one are prunable, and when they
add up to 30000 tokens or more each is replaced, for good, by ``{"output":
"<tool_output_masked>\\n<preview>\\n\\nOutput too large. Full output available at: <file>\\n
</tool_output_masked>"}`` where that is smaller. The preview of a shell result keeps its
sections, the output cut to its first and last ten lines; any other result's preview is the
first and last 250 characters of its pretty-printed JSON. Results of activate_skill, ask_user
and the plan-mode tools are never masked.

The CLI's chat compression does nothing in a one-prompt headless run: it cuts the history
only at a user message that is not a function response, and the prompt is the only one (its
``findCompressSplitPoint`` returns 0: nothing to summarise); so it is not emulated. (A user
message the CLI adds itself, such as a "Please continue." after its next-speaker check, would
give it a place to cut; the emulation adds none.)

Differences: the saved file does not exist (it would be outside the workspace) and its name
ends with a suffix derived from the call id where the CLI's is random.
"""

from __future__ import annotations

import hashlib
import json
import re

from harnessgrid.models import Message
from harnessgrid.plugins.adapters._gemini_cli_session import Session, saved_output_name
from harnessgrid.plugins.adapters._js import js_len, js_prefix, js_suffix

PROTECTED_TOKENS = 50_000  # DEFAULT_TOOL_PROTECTION_THRESHOLD
MIN_PRUNABLE_TOKENS = 30_000  # DEFAULT_MIN_PRUNABLE_TOKENS_THRESHOLD
EXEMPT = frozenset({"activate_skill", "ask_user", "enter_plan_mode", "exit_plan_mode"})
TAG = "tool_output_masked"
_SECTION = re.compile(r"^(Output|Error|Exit Code|Signal|Background PIDs|Process Group PGID): ",
                      re.MULTILINE)


def gemini_response(message: Message) -> dict[str, str]:
    """A tool message as the functionResponse ``response`` the real CLI sends."""
    key = "error" if message.kind in ("tool_error", "format_error") else "output"
    return {key: message.content}


def _tokens(name: str, response: dict[str, str]) -> int:
    """``estimateTokenCountSync`` of one functionResponse part: four characters a token."""
    compact = json.dumps(response, ensure_ascii=False, separators=(",", ":"))
    return int((js_len(name) + js_len(compact)) / 4)


def _lines_preview(text: str) -> str:
    """``formatSimplePreview``: over 20 lines, the first and last ten."""
    lines = text.split("\n")
    if len(lines) <= 20:
        return text
    return "\n".join([*lines[:10], "", f"... [{len(lines) - 20} lines omitted] ...", "",
                      *lines[-10:]])


def _shell_preview(response: dict[str, str]) -> str:
    """``formatShellPreview``: each section of the shell answer, its output shortened."""
    content = response.get("output", "")
    parts = _SECTION.split(content)
    if len(parts) < 3:
        preview = _lines_preview(content)
    else:
        shown = [_lines_preview(parts[0].strip())] if parts[0].strip() else []
        for index in range(1, len(parts), 2):
            body = parts[index + 1].strip()
            shown.append(f"{parts[index]}: {_lines_preview(body) if parts[index] == 'Output' else body}")
        preview = "\n".join(shown)
    error = response.get("error")
    if error and f"Error: {error}" not in content:
        preview += f"\n[Error: {error}]"
    return preview


def _masked(name: str, call_id: str, response: dict[str, str], session: Session) -> str:
    if name == "run_shell_command":
        preview = _shell_preview(response)
    else:
        pretty = json.dumps(response, ensure_ascii=False, indent=2)
        preview = pretty if js_len(pretty) <= 500 else (
            f"{js_prefix(pretty, 250)}\n... [TRUNCATED] ...\n{js_suffix(pretty, 250)}")
    stem = f"{name.lower()}_{saved_output_name(name, call_id)}"
    suffix = hashlib.sha256(call_id.encode()).hexdigest()[:5]  # the CLI's is random
    saved = f"{session.temp_dir}/tool-outputs/session-{session.session_id}/{stem}_{suffix}.txt"
    return f"<{TAG}>\n{preview}\n\nOutput too large. Full output available at: {saved}\n</{TAG}>"


def mask(history: list[Message], session: Session) -> None:
    """Mask what the CLI would mask before the next request (into ``session.masked``, by
    history index: a masked result stays masked)."""
    last_call = max((i for i, m in enumerate(history) if m.role == "assistant"), default=0)
    cumulative = prunable_tokens = 0
    prunable: list[tuple[int, int]] = []
    for index in range(last_call - 1, -1, -1):
        message = history[index]
        name = message.name or ""
        if message.role != "tool" or name in EXEMPT or index in session.masked:
            continue
        tokens = _tokens(name, gemini_response(message))
        if cumulative <= PROTECTED_TOKENS:
            cumulative += tokens
            if cumulative <= PROTECTED_TOKENS:
                continue
        prunable_tokens += tokens
        prunable.append((index, tokens))
    if prunable_tokens < MIN_PRUNABLE_TOKENS:
        return
    for index, tokens in prunable:
        message = history[index]
        name = message.name or ""
        text = _masked(name, message.tool_call_id or "", gemini_response(message), session)
        if tokens - _tokens(name, {"output": text}) > 0:
            session.masked[index] = text


def masked_view(history: list[Message], session: Session) -> list[Message]:
    """``history`` as the model is sent it: masked results in place of the originals."""
    return [message.model_copy(update={"content": session.masked[index], "kind": "observation"})
            if index in session.masked else message for index, message in enumerate(history)]
