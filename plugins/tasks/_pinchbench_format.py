"""Parsing PinchBench task files: front matter, sections, check code and rubric criteria.

Kept apart from the loader because this is where the format's variations live (fenced or bare
front matter, ``---`` rules, extra sections, fenced or bare check code, several ways of
writing criteria), and each has a pure function that tests can pin without a sandbox.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harnessgrid.errors import ConfigError

from ._judge import Criterion

_FENCE = re.compile(r"^\s*(```|~~~)")
_SECTION = re.compile(r"^##(?!#)\s*(.+?)\s*#*\s*$")
_RULE = re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$")
_FRONT_LINE = re.compile(r"^(\s*$|[A-Za-z_][\w.-]*\s*:|\s+\S|-\s|#(?!#))")
_CODE_BLOCK = re.compile(r"^[ \t]*(```|~~~)[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$",
                         re.DOTALL | re.MULTILINE)
_CRITERION = re.compile(
    r"^###(?!#)\s*(?:criterion\s*(\d+)\s*[:.)\-–—]?\s*)?(.*?)\s*"
    r"(?:\(\s*weight\s*:?\s*([\d.]+)\s*(%?)\s*\))?\s*$", re.IGNORECASE)
_SECTION_NAMES = {
    "prompt": "prompt", "task prompt": "prompt", "user prompt": "prompt",
    "expected behavior": "expected", "expected behaviour": "expected",
    "grading criteria": "criteria", "success criteria": "criteria",
    "automated checks": "checks", "automated check": "checks", "automated grading": "checks",
    "llm judge rubric": "rubric", "llm judge": "rubric", "judge rubric": "rubric",
    "rubric": "rubric",
}


@dataclass
class ParsedTask:
    """A task file split into front matter and named sections (canonical keys where known)."""

    path: Path
    front: dict[str, Any]
    sections: dict[str, str] = field(default_factory=dict)
    extra: list[str] = field(default_factory=list)


def parse_task_file(path: Path) -> ParsedTask:
    """Split ``path`` into front matter and ``## `` sections (headings inside code fences are
    code, not sections)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    front_lines, body = _front_matter(lines, path)
    try:
        front = yaml.safe_load("\n".join(front_lines)) if front_lines else {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: the front matter is not valid YAML: {exc}") from None
    if front is None:
        front = {}
    if not isinstance(front, dict):
        raise ConfigError(f"{path}: the front matter is not a mapping of keys",
                          hint="start the file with lines like 'id: task_01_x'")
    parsed = ParsedTask(path=path, front=front)
    name: str | None = None
    buffer: list[str] = []
    in_fence = False
    for line in [*body, "## end-of-file"]:
        if _FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else _SECTION.match(line)
        if heading is None:
            buffer.append(line)
            continue
        if name is not None:
            key = _SECTION_NAMES.get(name.lower().rstrip(":").strip())
            if key is None:
                parsed.extra.append(name)
            else:
                parsed.sections.setdefault(key, _strip_rules(buffer))
        name, buffer = heading.group(1), []
    return parsed


@dataclass(frozen=True)
class SessionPrompt:
    """One session of a multi-session task: a user message sent after the previous one."""

    id: str
    prompt: str
    new_session: bool = False
    """Upstream's "the user comes back later"; its runner still sends the prompt in the same
    conversation and workspace, and so do we (kept in metadata for graders and readers)."""


def session_prompts(front: dict[str, Any], path: Path) -> list[SessionPrompt]:
    """The ``sessions`` of the front matter, in order: each a string (the prompt) or a mapping
    with ``prompt`` (or upstream's other spelling, ``message``) and optional ``id`` and
    ``new_session``. Empty when there are none (``multi_session: true`` alone is then a plain
    task, as upstream's runner treats it). A session without a prompt is an error: upstream
    would send an empty message, which no conversation here accepts."""
    raw = front.get("sessions") or []
    if not isinstance(raw, list):
        raise ConfigError(f"{path}: sessions must be a list of prompts, got {raw!r:.80}")
    sessions = []
    for number, entry in enumerate(raw, 1):
        if isinstance(entry, str):
            entry = {"prompt": entry}
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: session {number} is {entry!r:.80}, neither a prompt "
                              "nor a mapping with one")
        text = entry.get("prompt") or entry.get("message")
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"{path}: session {number} has no prompt",
                              hint="give each session a non-empty 'prompt'")
        sessions.append(SessionPrompt(id=str(entry.get("id") or f"session_{number}"),
                                      prompt=text.strip(),
                                      new_session=bool(entry.get("new_session"))))
    return sessions


def _front_matter(lines: list[str], path: Path) -> tuple[list[str], list[str]]:
    start = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    if start < len(lines) and lines[start].strip() == "---":
        for end in range(start + 1, len(lines)):
            if lines[end].strip() in ("---", "..."):
                return lines[start + 1:end], lines[end + 1:]
        raise ConfigError(f"{path}: the front matter opened by '---' is never closed",
                          hint="end it with a line holding just '---'")
    end = start
    while end < len(lines) and _FRONT_LINE.match(lines[end]):
        end += 1
    return lines[start:end], lines[end:]


def _strip_rules(lines: list[str]) -> str:
    while lines and (not lines[0].strip() or _RULE.match(lines[0])):
        lines = lines[1:]
    while lines and (not lines[-1].strip() or _RULE.match(lines[-1])):
        lines = lines[:-1]
    return "\n".join(lines)


def check_code(section: str) -> str | None:
    """The python of an ``## Automated Checks`` section: its python (or untagged) fenced
    blocks, else the section itself as bare code; None when it defines no ``grade``."""
    blocks = [(m.group(2).lower(), m.group(3)) for m in _CODE_BLOCK.finditer(section)]
    code = ("\n\n".join(body for tag, body in blocks if tag in ("python", "py", "python3"))
            or "\n\n".join(body for tag, body in blocks if not tag)
            or (section if not blocks else ""))
    return code if re.search(r"^\s*def\s+grade\s*\(", code, re.MULTILINE) else None


def parse_rubric(rubric: str, criteria_section: str = "") -> list[Criterion]:
    """``### Criterion N: title (Weight: P%)`` blocks; without them the whole rubric is one
    criterion, and without a rubric the ``- [ ]`` items of Grading Criteria, equally weighted."""
    found: list[Criterion] = []
    title = ""
    number = 0
    weight: float | None = None
    text: list[str] = []

    def close() -> None:
        if number:
            found.append(Criterion(number, title or f"criterion {number}", weight,
                                   _strip_rules(text)))

    for line in rubric.splitlines():
        match = _CRITERION.match(line)
        if match is None:
            text.append(line)
            continue
        close()
        number = int(match.group(1)) if match.group(1) else len(found) + 1
        title, text = match.group(2).strip(), []
        weight = _weight(match.group(3), match.group(4))
    close()
    if found:
        return found
    if rubric.strip():
        return [Criterion(1, "overall", None, rubric.strip())]
    items = [re.sub(r"^\s*[-*]\s*(\[[ xX]?\]\s*)?", "", line).strip()
             for line in criteria_section.splitlines() if re.match(r"^\s*[-*]\s", line)]
    return [Criterion(i, item, None, "") for i, item in enumerate(items, 1) if item]


def _weight(value: str | None, percent: str | None) -> float | None:
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number / 100 if percent or number > 1 else number
