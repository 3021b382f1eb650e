"""LLM-judge grading for rubric-graded tasks (PinchBench ``llm_judge`` / ``hybrid``).

Why its own module: the judge is the one grader that calls out (to a litellm model), so it is
opt-in (``judge=MODEL``), imports litellm only when used, and turns every failure — unreachable
server, a reply that is not JSON, a criterion left unscored, a score outside [0, 1] — into a
:class:`~harnessgrid.tasks.GraderError`, never a guessed 0. The judge sees the rubric, the task,
a digest of the transcript and a listing of the final workspace (with the start of small text
files), and answers one score in [0, 1] per criterion; the task's judge score is their mean
weighted by the rubric's weights.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessgrid.errors import ConfigError
from harnessgrid.tasks import GraderError

_TRANSCRIPT_CHARS = 24_000
_RESULT_CHARS = 400
_LISTING_ENTRIES = 200
_FILE_HEAD_CHARS = 2_000
_FILE_HEADS_TOTAL = 16_000

JUDGE_SYSTEM = (
    "You grade the work of an AI agent against a rubric. Judge only from the evidence given "
    "(the conversation and the final workspace), score each criterion from 0.0 (not met) to "
    "1.0 (fully met), and answer with one JSON object and nothing else."
)


@dataclass(frozen=True)
class Criterion:
    """One rubric criterion; ``weight`` is a fraction (``None``: an equal share of the rest)."""

    number: int
    title: str
    weight: float | None
    text: str


@dataclass(frozen=True)
class JudgeContext:
    """What the judge is told about the task besides the rubric."""

    prompt: str
    expected: str


class LiteLLMJudge:
    """Asks a litellm model (any provider, or an OpenAI-compatible server via ``api_base``)."""

    def __init__(self, model: str, *, api_base: str | None = None, api_key: str | None = None,
                 timeout_s: float = 120.0, max_retries: int = 2) -> None:
        if not model.strip():
            raise ConfigError("judge needs a model name", hint="e.g. judge=openai/gpt-4o-mini")
        if importlib.util.find_spec("litellm") is None:
            raise ConfigError("the LLM judge needs the litellm package",
                              hint="pip install 'harnessgrid[api]'")
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._placeholder_key: bool | None = None  # known once the credentials are checked

    def check_credentials(self) -> None:
        """A ConfigError now, naming the variable, when the judge has no key: found at the
        first grading it would cost every episode before it (and their retries)."""
        if self._placeholder_key is None:
            from harnessgrid.policies.api import require_litellm_key

            self._placeholder_key = require_litellm_key(
                self.model, what=f"judge {self.model}", api_key=self.api_key,
                api_base=self.api_base, key_hint="pass -o judge_api_key=...",
                base_option="-o judge_api_base")

    def ask(self, prompt: str) -> str:
        """The model's reply text; retries transient failures, then raises GraderError."""
        try:
            self.check_credentials()
        except ConfigError as exc:  # graded without run/eval's check first (library use)
            raise GraderError(exc.message + (f" ({exc.hint})" if exc.hint else "")) from None
        api_key = self.api_key or ("no-key" if self._placeholder_key else None)
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download at import
        litellm: Any = importlib.import_module("litellm")

        litellm.suppress_debug_info = True
        transient = (litellm.RateLimitError, litellm.ServiceUnavailableError,
                     litellm.InternalServerError, litellm.APIConnectionError, litellm.Timeout)
        for attempt in range(self.max_retries + 1):
            try:
                response = litellm.completion(
                    model=self.model, temperature=0.0, max_tokens=1024, timeout=self.timeout_s,
                    api_base=self.api_base, api_key=api_key, num_retries=0, max_retries=0,
                    messages=[{"role": "system", "content": JUDGE_SYSTEM},
                              {"role": "user", "content": prompt}])
                break
            except transient as exc:
                if attempt == self.max_retries:
                    raise GraderError(f"judge {self.model} failed after {attempt + 1} tries: "
                                      f"{type(exc).__name__}: {str(exc)[:300]}") from None
                time.sleep(min(8.0, 0.5 * 2 ** attempt))
            except Exception as exc:  # noqa: BLE001 - any other API error: no score
                raise GraderError(f"judge {self.model} failed: {type(exc).__name__}: "
                                  f"{str(exc)[:300]}") from None
        content = response.choices[0].message.content if response.choices else None
        if not isinstance(content, str) or not content.strip():
            raise GraderError(f"judge {self.model} returned an empty reply")
        return content


def judge_score(judge: LiteLLMJudge, criteria: list[Criterion], context: JudgeContext,
                workspace: Path, transcript: list[dict[str, Any]]) -> float:
    """The rubric's weighted mean score for this episode, as the judge sees it."""
    prompt = build_prompt(criteria, context, workspace, transcript)
    scores = parse_reply(judge.ask(prompt), criteria)
    weights = resolved_weights(criteria)
    return sum(weights[c.number] * scores[c.number] for c in criteria) / sum(weights.values())


def resolved_weights(criteria: list[Criterion]) -> dict[int, float]:
    """Given weights as they are; unweighted criteria share what is left (or 1 each)."""
    weighted = [c.weight for c in criteria if c.weight is not None]
    missing = len(criteria) - len(weighted)
    given = sum(weighted)
    if not weighted:
        share = 1.0
    elif given < 1.0:
        share = (1.0 - given) / missing if missing else 0.0
    else:
        share = given / len(weighted)  # weights over 100%: the unweighted get an average one
    out = {c.number: (c.weight if c.weight is not None else share) for c in criteria}
    if sum(out.values()) <= 0:
        out = {c.number: 1.0 for c in criteria}
    return out


def build_prompt(criteria: list[Criterion], context: JudgeContext, workspace: Path,
                 transcript: list[dict[str, Any]]) -> str:
    rubric = "\n\n".join(f"Criterion {c.number}: {c.title}\n{c.text}".strip() for c in criteria)
    keys = ", ".join(f'"{c.number}": <score>' for c in criteria)
    return (f"# Task given to the agent\n{context.prompt}\n\n"
            f"# Expected behaviour\n{context.expected or '(not stated)'}\n\n"
            f"# Conversation (digest)\n{transcript_digest(transcript)}\n\n"
            f"# Final workspace\n{workspace_listing(workspace)}\n\n"
            f"# Rubric\n{rubric}\n\n"
            "Answer with exactly this JSON shape, a score in [0, 1] for every criterion number:\n"
            f'{{"scores": {{{keys}}}, "notes": "<one sentence>"}}')


def parse_reply(text: str, criteria: list[Criterion]) -> dict[int, float]:
    """Per-criterion scores from the judge's reply; keys may be the number, ``criterion N``
    or the title; values a number or ``{"score": x}``."""
    data = _json_object(text)
    raw = data.get("scores", data.get("criteria_scores"))
    if not isinstance(raw, dict):
        raise GraderError(f"judge reply has no 'scores' object: {text[:200]!r}")
    by_key: dict[str, int] = {}
    for c in criteria:
        for key in (str(c.number), f"criterion {c.number}", c.title.lower()):
            by_key[key] = c.number
    scores: dict[int, float] = {}
    for key, value in raw.items():
        number = by_key.get(str(key).strip().lower())
        if number is None:
            continue
        if isinstance(value, dict):
            value = value.get("score")
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not 0.0 <= float(value) <= 1.0:
            raise GraderError(f"judge gave criterion {number} the score {value!r:.40}, "
                              "not a number in [0, 1]")
        scores[number] = float(value)
    missing = [c.number for c in criteria if c.number not in scores]
    if missing:
        raise GraderError(f"judge gave no score for criteria {missing}: {text[:200]!r}")
    return scores


def _json_object(text: str) -> dict[str, Any]:
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.DOTALL)
    candidates = [fenced.group(1)] if fenced else []
    start = text.find("{")
    end = text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise GraderError(f"judge reply is not a JSON object: {text[:200]!r}")


def transcript_digest(transcript: list[dict[str, Any]]) -> str:
    """One line per message: user/assistant text, tool calls with arguments, cut results."""
    lines: list[str] = []
    for event in transcript:
        message = event.get("message") if event.get("type") == "message" else None
        if not isinstance(message, dict):
            continue
        role = message.get("role", "?")
        for part in message.get("content") or []:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "toolCall":
                args = json.dumps(part.get("arguments"), ensure_ascii=False)
                lines.append(f"[{role}] CALL {part.get('name')}({args[:_RESULT_CHARS]})")
            elif part.get("type") == "text":
                text = str(part.get("text", ""))
                if role == "toolResult" and len(text) > _RESULT_CHARS:
                    text = text[:_RESULT_CHARS] + " …"
                lines.append(f"[{role}] {text}")
    digest = "\n".join(lines) or "(no messages)"
    if len(digest) > _TRANSCRIPT_CHARS:
        half = _TRANSCRIPT_CHARS // 2
        digest = digest[:half] + "\n[… middle of the conversation cut …]\n" + digest[-half:]
    return digest


def workspace_listing(root: Path) -> str:
    """Files of the final workspace with sizes, then the start of small text files. Links are
    listed, never followed (the workspace is the agent's, not trusted)."""
    entries: list[tuple[str, Path, int]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(filenames):
            path = Path(dirpath) / name
            size = path.lstat().st_size
            entries.append((str(path.relative_to(root)), path, size))
    if not entries:
        return "(empty)"
    lines = [f"- {rel} ({size} bytes)" + (" -> link" if path.is_symlink() else "")
             for rel, path, size in entries[:_LISTING_ENTRIES]]
    if len(entries) > _LISTING_ENTRIES:
        lines.append(f"- … {len(entries) - _LISTING_ENTRIES} more files")
    budget = _FILE_HEADS_TOTAL
    for rel, path, size in entries:
        if budget <= 0 or path.is_symlink() or not path.is_file() or size > 4 * _FILE_HEAD_CHARS:
            continue
        try:
            text = path.read_bytes()[:_FILE_HEAD_CHARS].decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        lines.append(f"\n## {rel}\n{text[:budget]}")
        budget -= len(text)
    return "\n".join(lines)
