"""OpenClaw's system prompt, assembled in its sections, with the workspace bootstrap files.

Structure (facts of OpenClaw v2026.2.26; the sentences are harnessgrid's own): identity,
``## Tooling`` (``- name: summary``), ``## Tool Call Style``, ``## Safety``, ``## Workspace``,
``# Project Context`` (one ``## <path>`` block per bootstrap file), ``## Current Date & Time``
and ``## Runtime``.

Bootstrap files are read from what the workspace starts with (the task's files and source
folder), in OpenClaw's order: AGENTS.md, SOUL.md, TOOLS.md, IDENTITY.md, USER.md. A missing file
becomes a ``[MISSING] Expected at: PATH`` line; an empty one is left out; a long one keeps its
first 70% and last 20% of ``max_chars`` (20,000) around a truncation marker; all together stop
at ``total_max_chars`` (150,000). When SOUL.md has content the model is asked to adopt it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harnessgrid.plugins.adapters._task_start import initial_text
from harnessgrid.tasks import Task

BOOTSTRAP_FILES = ("AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md")
BOOTSTRAP_MAX_CHARS = 20_000
BOOTSTRAP_TOTAL_MAX_CHARS = 150_000
_HEAD_RATIO, _TAIL_RATIO = 0.7, 0.2
_MIN_FILE_BUDGET = 64  # below this, a present file is not worth a partial injection


@dataclass(frozen=True)
class BootstrapFile:
    name: str
    path: str  # where the agent finds it (sandbox path)
    content: str | None  # None: missing


def load_bootstrap(task: Task) -> list[BootstrapFile]:
    return [BootstrapFile(name, f"{task.mount_path}/{name}", initial_text(task, name))
            for name in BOOTSTRAP_FILES]


def _trim(content: str, name: str, max_chars: int) -> str:
    text = content.rstrip()
    if len(text) <= max_chars:
        return text
    head, tail = int(max_chars * _HEAD_RATIO), int(max_chars * _TAIL_RATIO)
    marker = (f"\n[...truncated, read {name} for full content...]\n"
              f"…(truncated {name}: kept {head}+{tail} chars of {len(text)})…\n")
    return "\n".join([text[:head], marker, text[-tail:] if tail else ""])


def _clamp(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    return text[:max(0, budget - 1)] + "…" if budget > 0 else ""


def project_context(files: Sequence[BootstrapFile], max_chars: int = BOOTSTRAP_MAX_CHARS,
                    total_max_chars: int = BOOTSTRAP_TOTAL_MAX_CHARS) -> list[tuple[str, str]]:
    """``(path, injected text)`` per file, after the per-file cap and the total budget."""
    remaining = total_max_chars
    out: list[tuple[str, str]] = []
    for f in files:
        if remaining <= 0:
            break
        if f.content is None:
            text = _clamp(f"[MISSING] Expected at: {f.path}", remaining)
        elif not f.content.strip():
            continue
        elif remaining < _MIN_FILE_BUDGET:
            break
        else:
            text = _clamp(_trim(f.content, f.name, min(max_chars, remaining)), remaining)
        if text:
            out.append((f.path, text))
            remaining -= len(text)
    return out


_STYLE = ("Just call tools for routine, low-risk steps; there is no need to announce them. Add "
          "a short explanation only when a step is involved or risky (deleting things, say) or "
          "when the user asks for one, and keep it plain.\n"
          "Your turn ends as soon as you reply without calling a tool, so reply in plain text "
          "only once the request is handled.")
_SAFETY = ("Your only aim is the user's request: do not seek to preserve yourself, gain "
           "resources, widen your access or plan beyond the task. Human oversight comes before "
           "finishing: when instructions conflict, stop and ask; honour requests to stop or "
           "pause. Never disable or talk anyone into disabling safeguards, and do not change "
           "your own instructions, safety rules or tool policy unless explicitly asked.")


def system_prompt(*, mount_path: str, tools: Sequence[tuple[str, str]],
                  context: Sequence[tuple[str, str]], has_soul: bool, now: str,
                  model: str) -> str:
    """The whole prompt; ``tools`` are ``(name, summary)`` pairs, ``context`` comes from
    :func:`project_context`."""
    parts = [
        "You are a personal assistant running inside OpenClaw.",
        "## Tooling\nThese tools are available (names are case-sensitive; call them exactly as "
        "written):\n" + "\n".join(f"- {name}: {summary}" for name, summary in tools),
        "## Tool Call Style\n" + _STYLE,
        "## Safety\n" + _SAFETY,
        (f"## Workspace\nYour working directory is {mount_path}. Relative paths given to the "
         "file tools and to exec start there; keep your file work inside it unless told "
         "otherwise."),
    ]
    intro = "The workspace files below were loaded at the start of this session."
    if has_soul:
        intro += (" SOUL.md describes who you are: take on its persona and tone in every "
                  "reply, unless higher-priority instructions say otherwise.")
    parts.append("# Project Context\n" + intro)
    parts.extend(f"## {path}\n{text}" for path, text in context)
    parts.append(f"## Current Date & Time\n{now}\nTime zone: UTC")
    parts.append(f"## Runtime\nRuntime: agent=main | host=harnessgrid-sandbox | os=Linux | "
                 f"model={model} | channel=harnessgrid | thinking=off")
    return "\n\n".join(parts)
