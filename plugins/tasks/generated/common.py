"""Shared pieces of the generated families: word lists, plan shortcuts and grader helpers.

Grader helpers never raise on an agent's mistake (missing file, bad JSON, a FIFO where a file
should be): they return ``None`` and the sub-score becomes 0. Only a check that *cannot* run
(no sandbox for a command-running grader) raises :class:`GraderError`, so the episode is
recorded as ungraded instead of failed.
"""

from __future__ import annotations

import json
import random
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessgrid.models import Action
from harnessgrid.sandboxing.grading_io import read_text
from harnessgrid.tasks import GraderError

if TYPE_CHECKING:
    from harnessgrid.tasks import GradingContext

# ---------------------------------------------------------------------------- word lists
# Plain [a-z0-9_] words only: they are safe in file names, shell commands and regexes.

PEOPLE = ("alice", "bruno", "chen", "dana", "elif", "farid", "greta", "hiro", "ines", "jonas",
          "kemal", "lena", "malik", "nora", "oscar", "priya", "quinn", "rosa", "sven", "tara",
          "umar", "vera", "wei", "xenia", "yusuf", "zoe", "amara", "bilal", "carla", "dmitri")
SURNAMES = ("adams", "baker", "costa", "dubois", "evans", "fischer", "garcia", "horvat", "ito",
            "jensen", "kowalski", "lopez", "moreau", "novak", "okafor", "petrov", "quist",
            "rossi", "schmidt", "tanaka", "usman", "virtanen", "weber", "yilmaz", "zhang")
REGIONS = ("north", "south", "east", "west", "central", "coastal", "alpine", "metro", "valley",
           "harbor", "plains", "delta")
CITIES = ("lisbon", "oslo", "quito", "lagos", "hanoi", "perth", "denver", "kyoto", "porto",
          "dakar", "lima", "turin", "bergen", "cusco", "tunis", "austin", "leeds", "malmo")
TEAMS = ("platform", "payments", "search", "mobile", "growth", "infra", "data", "security",
         "support", "design", "identity", "billing")
CATEGORIES = ("books", "garden", "toys", "kitchen", "audio", "sports", "office", "pets",
              "beauty", "tools", "music", "games")
PRODUCTS = ("bolts", "nuts", "washers", "gears", "springs", "hinges", "rivets", "valves",
            "pulleys", "brackets", "clamps", "bearings", "gaskets", "screws", "pins", "cables")
COMPONENTS = ("auth", "billing", "cache", "db", "gateway", "indexer", "mailer", "metrics",
              "queue", "scheduler", "search", "storage", "uploader", "webhooks", "worker")
APPS = ("atlas", "beacon", "comet", "delta", "ember", "falcon", "garnet", "harbor", "iris",
        "juniper", "kestrel", "lumen", "meridian", "nimbus", "orion", "pylon", "quartz",
        "raven", "sable", "tundra", "umbra", "vertex", "willow", "zephyr")
WORDS = ("amber", "birch", "cobalt", "dune", "ember", "fjord", "glacier", "hazel", "indigo",
         "jasper", "kelp", "lotus", "maple", "nectar", "onyx", "pebble", "quill", "reef",
         "saffron", "thistle", "umber", "velvet", "willow", "yarrow", "zinnia", "acorn",
         "basalt", "cedar", "dahlia", "elm", "fern", "garnet", "heron", "iris", "juniper",
         "lichen", "moss", "nutmeg", "orchid", "poplar", "quartz", "rowan", "sorrel", "tansy")
DOMAINS = ("example.com", "mail.test", "corp.example", "acme.test", "lab.example")


def pick(rng: random.Random, pool: Sequence[str], k: int) -> list[str]:
    """``k`` distinct items of ``pool`` in a random order."""
    return rng.sample(list(pool), k)


def date(rng: random.Random, year: int = 2024) -> str:
    return f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def timestamp(base_s: int) -> str:
    """``2024-MM-DDTHH:MM:SS`` for seconds after 2024-03-01 00:00:00 (no time zones)."""
    day, rest = divmod(base_s, 86_400)
    hh, rest = divmod(rest, 3600)
    mm, ss = divmod(rest, 60)
    return f"2024-03-{1 + day:02d}T{hh:02d}:{mm:02d}:{ss:02d}"


def csv_text(rows: Sequence[Sequence[object]]) -> str:
    """Rows (header first) as CSV; generated values never contain commas or quotes."""
    return "".join(",".join(str(v) for v in row) + "\n" for row in rows)


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2) + "\n"


def q(text: str) -> str:
    return shlex.quote(text)


# ---------------------------------------------------------------------------- plan shortcuts

def read(path: str) -> Action:
    return Action.of("read", path=path)


def write(path: str, content: str) -> Action:
    return Action.of("write", path=path, content=content)


def edit(path: str, old: str, new: str) -> Action:
    return Action.of("edit", path=path, old=old, new=new)


def ls(path: str = ".") -> Action:
    return Action.of("list", path=path)


def search(pattern: str, path: str = ".") -> Action:
    """``pattern`` must mean the same to Python ``re`` and ``grep -E`` (bash-only interfaces
    run searches through grep): families only use words and escaped dots."""
    return Action.of("search", pattern=pattern, path=path)


def sh(command: str) -> Action:
    return Action.of("shell", command=command)


# ---------------------------------------------------------------------------- grader helpers

def text(ws: Path, rel: str) -> str | None:
    """Content of a regular file inside ``ws`` as UTF-8, else None: a link (in any component of
    ``rel``), FIFO, directory, file over 5 MB or invalid UTF-8 reads as missing. Graders read
    through this (:func:`harnessgrid.sandboxing.grading_io.read_text`), never ``Path.read_text``."""
    return read_text(ws, rel)


def lines(ws: Path, rel: str) -> list[str] | None:
    """Lines of a text file, CRLF normalised, trailing spaces and trailing blank lines dropped."""
    content = text(ws, rel)
    return None if content is None else norm_lines(content)


def head(got: Sequence[str] | None) -> str | None:
    """The first line, stripped (a CSV header), or None for a missing or empty file."""
    return got[0].strip() if got else None


def norm_lines(content: str) -> list[str]:
    out = [line.rstrip() for line in content.replace("\r\n", "\n").split("\n")]
    while out and not out[-1]:
        out.pop()
    return out


def norm(content: str | None) -> str | None:
    """Text compared leniently: trailing spaces and trailing blank lines do not matter."""
    return None if content is None else "\n".join(norm_lines(content))


_MISSING = object()


def load_json(ws: Path, rel: str) -> Any:
    """Parsed JSON, or the sentinel :data:`MISSING` when absent or invalid."""
    content = text(ws, rel)
    if content is None:
        return MISSING
    try:
        return json.loads(content)
    except ValueError:
        return MISSING


MISSING: Any = _MISSING


def positional(got: Sequence[object] | None, want: Sequence[object]) -> float:
    """Fraction of positions that match, over the longer of the two (extra rows cost)."""
    if got is None:
        return 0.0
    if not got and not want:
        return 1.0
    hits = sum(g == w for g, w in zip(got, want, strict=False))
    return hits / max(len(got), len(want))


def overlap(got: Sequence[object] | None, want: Sequence[object]) -> float:
    """Order-free match: |got ∩ want| / max(|got|, |want|) on distinct items."""
    if got is None:
        return 0.0
    g, w = set(map(repr, got)), set(map(repr, want))
    if not g and not w:
        return 1.0
    return len(g & w) / max(len(g), len(w))


def flag(ok: bool) -> float:
    return 1.0 if ok else 0.0


def tool_calls(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every ``toolCall`` part of the assistant messages, in order."""
    calls = []
    for event in transcript:
        message = event.get("message") if isinstance(event, dict) else None
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        for part in message.get("content") or []:
            if isinstance(part, dict) and part.get("type") == "toolCall":
                calls.append(part)
    return calls


def mentioned(transcript: list[dict[str, Any]], needle: str) -> bool:
    """Whether some tool call's arguments mention ``needle`` (a path read by any tool: a read
    tool's ``path`` or a ``cat`` in a shell command), whatever the tool interface calls it."""
    return any(needle in json.dumps(c.get("arguments"), ensure_ascii=False)
               for c in tool_calls(transcript))


def run_sandboxed(ws: Path, command: str, context: GradingContext, timeout_s: float = 30.0,
                  collect: Sequence[str] = ()) -> tuple[int | None, str, dict[str, str | None]]:
    """Run ``command`` in a bubblewrap sandbox over a *copy* of ``ws`` (so grading twice gives
    the same answer); returns ``(exit_code, stdout + stderr, {path: text})`` with the files of
    ``collect`` read back from the copy afterwards. Used by graders that must execute the
    agent's code (:class:`~.base.SandboxedFunctionGrader`): never in-process, and unsandboxed
    only when ``context`` (the graded episode's) says the episode ran so; its environment is
    mounted."""
    from harnessgrid.errors import HarnessgridError
    from harnessgrid.sandboxing.sandbox import Sandbox, SandboxLimits
    from harnessgrid.sandboxing.workspace import Workspace

    try:
        copy = Workspace.open(ws)
    except HarnessgridError as exc:
        raise GraderError(f"cannot copy the workspace to run {command!r}: {exc}") from exc
    try:
        limits = SandboxLimits(wall_s=timeout_s, cpu_s=max(1, int(timeout_s)),
                               output_bytes=200_000)
        with Sandbox(copy, limits, environment=context.environment,
                     unsafe_no_sandbox=context.unsafe_no_sandbox) as sandbox:
            result = sandbox.run_sync(command)
        return (result.exit_code, result.stdout + result.stderr,
                {rel: text(copy.root, rel) for rel in collect})
    except HarnessgridError as exc:  # SandboxError included: no bwrap, server died
        raise GraderError(f"this grader runs {command!r} in a sandbox and could not: "
                          f"{exc}") from exc
    finally:
        copy.cleanup()
