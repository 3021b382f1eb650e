"""Workflow-compliance families: a release checklist and a contribution guide.

The instruction only points at a procedure written in the workspace; the grader checks every
step's effect, including ones that prove the order (a backup that must equal the *original*
file, a log of the step numbers), so skipping, reordering or improvising costs points.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harnessgrid.models import Action

from .base import Draft, family
from .common import (
    APPS,
    COMPONENTS,
    PEOPLE,
    SURNAMES,
    WORDS,
    csv_text,
    dumps,
    edit,
    flag,
    head,
    lines,
    norm_lines,
    positional,
    q,
    read,
    sh,
    text,
    write,
)


def _squash(content: str | None) -> str | None:
    """Normalised text with runs of blank lines collapsed to one (Markdown-equivalent)."""
    if content is None:
        return None
    out: list[str] = []
    for line in norm_lines(content):
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out)


_CHANGES = ("Fix crash when {w} is empty", "Add --{w} option", "Speed up {c} start-up",
            "Document the {w} setting", "Drop support for legacy {w} files",
            "Retry {c} requests on timeout", "Show {w} in the status page")


def _bump(version: tuple[int, int, int], kind: str) -> tuple[int, int, int]:
    major, minor, patch = version
    if kind == "major":
        return (major + 1, 0, 0)
    if kind == "minor":
        return (major, minor + 1, 0)
    return (major, minor, patch + 1)


@family("release_checklist", tags=("workflow_compliance", "planning"), difficulty=(2, 3),
        category="workflow", summary="follow a release checklist step by step (backup, bump, "
        "changelog, notes...) and log each step number", long_share=0.3)
def release_checklist(rng: random.Random, long: bool) -> Draft:
    app = rng.choice(APPS)
    old_v = (rng.randint(0, 4), rng.randint(0, 15), rng.randint(0, 20))
    kind = rng.choice(("major", "minor", "patch"))
    old, new = ".".join(map(str, old_v)), ".".join(map(str, _bump(old_v, kind)))
    month = rng.randint(2, 12)
    day = f"2024-{month:02d}-{rng.randint(1, 28):02d}"
    prev_day = f"2024-{month - 1:02d}-{rng.randint(1, 28):02d}"
    entries = [rng.choice(_CHANGES).format(w=w, c=rng.choice(COMPONENTS))
               for w in rng.sample(WORDS, rng.randint(2, 5))]
    older = [rng.choice(_CHANGES).format(w=w, c=rng.choice(COMPONENTS))
             for w in rng.sample(WORDS, rng.randint(1, 3))]
    config = {"name": app, "version": old, "debug": rng.random() < 0.3,
              "port": rng.randint(3000, 9000)}
    changelog = ("# Changelog\n\n## Unreleased\n" + "".join(f"- {e}\n" for e in entries)
                 + f"\n## {old} - {prev_day}\n" + "".join(f"- {e}\n" for e in older))
    history = "".join(f"{v} 2023-{m:02d}-01\n" for v, m in
                      ((f"{old_v[0]}.{max(0, old_v[1] - 1)}.0", 6), (old, 11)))
    files = {"VERSION": old + "\n", "config/app.json": dumps(config),
             "CHANGELOG.md": changelog, "release/history.log": history}
    catalog: list[tuple[str, str]] = [
        ("backup", "Copy config/app.json to backup/app.json before changing anything."),
        ("bump", f"Bump the {kind} version in VERSION (MAJOR.MINOR.PATCH; a minor bump resets "
                 "PATCH to 0, a major bump resets MINOR and PATCH to 0)."),
        ("config", 'Set "version" in config/app.json to the new version; leave the other keys '
                   "alone."),
        ("package", f"Set `__version__` in src/{app}/__init__.py to the new version (keep the "
                    "quotes)."),
        ("changelog", "In CHANGELOG.md, rename the heading `## Unreleased` to `## NEW - DATE` "
                      "(NEW is the new version, DATE the release date, YYYY-MM-DD) and insert "
                      "a new `## Unreleased` heading, followed by one blank line, directly "
                      "above it."),
        ("notes", "Write release/notes-NEW.txt with the bullet points of the section you just "
                  "released, one per line, without the leading `- `."),
        ("history", "Append the line `NEW DATE` to release/history.log."),
        ("readme", "In README.md, change the badge text `version-OLD-blue` (OLD is the version "
                   "before this release) to `version-NEW-blue`."),
    ]
    if long:
        steps = catalog
    else:
        optional = rng.sample(["notes", "history", "package", "readme"], rng.randint(1, 2))
        steps = [s for s in catalog if s[0] in ("backup", "bump", "config", "changelog")
                 or s[0] in optional]
    names = [s[0] for s in steps]
    if "package" in names:
        files[f"src/{app}/__init__.py"] = (f'"""{app} package."""\n\n__version__ = "{old}"\n')
    if "readme" in names:
        files["README.md"] = (f"# {app}\n\n![version](https://img.example/badge/"
                              f"version-{old}-blue)\n\nA small {rng.choice(WORDS)} service.\n")
    checklist = ("# Release checklist\n\nWork through the steps in order. After finishing a "
                 "step, append its number to release/steps.done (one number per line).\n\n"
                 + "".join(f"{k}. {t}\n" for k, (_, t) in enumerate(steps, 1)))
    files["RELEASE_CHECKLIST.md"] = checklist
    instruction = (f"Release {app} today, {day}: follow RELEASE_CHECKLIST.md exactly, step by "
                   f"step and in order.")
    want: dict[str, str] = {"backup/app.json": files["config/app.json"],
                            "VERSION": new + "\n",
                            "config/app.json": dumps({**config, "version": new}),
                            "release/steps.done": "".join(f"{k}\n" for k in
                                                          range(1, len(steps) + 1))}
    released = (f"## Unreleased\n\n## {new} - {day}\n" + "".join(f"- {e}\n" for e in entries)
                + f"\n## {old} - {prev_day}\n" + "".join(f"- {e}\n" for e in older))
    if "changelog" in names:
        want["CHANGELOG.md"] = "# Changelog\n\n" + released
    if "notes" in names:
        want[f"release/notes-{new}.txt"] = "".join(f"{e}\n" for e in entries)
    if "history" in names:
        want["release/history.log"] = history + f"{new} {day}\n"
    if "package" in names:
        want[f"src/{app}/__init__.py"] = f'"""{app} package."""\n\n__version__ = "{new}"\n'
    if "readme" in names:
        want["README.md"] = files["README.md"].replace(f"version-{old}-", f"version-{new}-")
    labels = {"backup/app.json": "backup", "VERSION": "version", "config/app.json": "config",
              "release/steps.done": "steps_log", "CHANGELOG.md": "changelog",
              f"release/notes-{new}.txt": "notes", "release/history.log": "history",
              f"src/{app}/__init__.py": "package", "README.md": "readme"}

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        scores = {}
        for path, content in want.items():
            got = text(ws, path)
            same = (got == content if path == "backup/app.json" else
                    _squash(got) == _squash(content))
            if path == "config/app.json":
                try:
                    same = json.loads(got or "") == {**config, "version": new}
                except ValueError:
                    same = False
            scores[labels[path]] = flag(same)
        return scores

    do: dict[str, Action] = {
        "backup": sh("mkdir -p backup && cp config/app.json backup/app.json"),
        "bump": write("VERSION", new + "\n"),
        "config": edit("config/app.json", f'"version": "{old}"', f'"version": "{new}"'),
        "package": edit(f"src/{app}/__init__.py", f'__version__ = "{old}"',
                        f'__version__ = "{new}"'),
        "changelog": edit("CHANGELOG.md", "## Unreleased\n", f"## Unreleased\n\n## {new} - {day}\n"),
        "notes": write(f"release/notes-{new}.txt", want.get(f"release/notes-{new}.txt", "")),
        "history": sh(f"printf '%s\\n' {q(f'{new} {day}')} >> release/history.log"),
        "readme": edit("README.md", f"version-{old}-blue", f"version-{new}-blue"),
    }
    plan = [read("RELEASE_CHECKLIST.md"), read("VERSION"), read("CHANGELOG.md")]
    for k, name in enumerate(names, 1):
        plan += [do[name], sh(f"echo {k} >> release/steps.done")]
    return Draft(instruction=instruction, files=files, check=check, plan=plan,
                 params={"files": sorted(files.items()), "day": day},
                 difficulty=3 if long else 2)


_PREFIXES = ("PKG", "REG", "LIB", "MOD", "SVC", "CMP")
_DATE_RULES: dict[str, tuple[str, Callable[[int, int, int], str]]] = {
    "iso": ("YYYY-MM-DD, e.g. 2024-03-09", lambda y, m, d: f"{y}-{m:02d}-{d:02d}"),
    "dmy": ("DD.MM.YYYY, e.g. 09.03.2024", lambda y, m, d: f"{d:02d}.{m:02d}.{y}"),
    "compact": ("YYYYMMDD, e.g. 20240309", lambda y, m, d: f"{y}{m:02d}{d:02d}"),
}


@family("contributing_rules", tags=("workflow_compliance", "observation_reading"),
        difficulty=(1, 2), category="workflow", summary="register an entry following the "
        "randomised rules of CONTRIBUTING.md (id, slug, owner, date format, order, log)")
def contributing_rules(rng: random.Random, long: bool) -> Draft:
    prefix = rng.choice(_PREFIXES)
    sep = rng.choice(("-", "_"))
    date_rule = rng.choice(sorted(_DATE_RULES))
    date_text, fmt = _DATE_RULES[date_rule]
    by_slug = rng.random() < 0.5
    owner_rule = rng.choice(("initial", "dotted"))
    log_rule = rng.choice(("added", "dated"))

    def slug(words: list[str]) -> str:
        return sep.join(w.lower() for w in words)

    def owner(first: str, last: str) -> str:
        return f"{first[0]}{last}" if owner_rule == "initial" else f"{first}.{last}"

    rows: list[list[str]] = []
    next_id = rng.randint(1, 400)
    slugs: set[str] = set()
    while len(rows) < 4 or (len(rows) < 9 and rng.random() < 0.6):
        words = rng.sample(WORDS, rng.randint(1, 3))
        if slug(words) in slugs:
            continue
        slugs.add(slug(words))
        next_id += rng.randint(1, 12)
        y, m, d = 2023, rng.randint(1, 12), rng.randint(1, 28)
        rows.append([f"{prefix}-{next_id:04d}", slug(words),
                     owner(rng.choice(PEOPLE), rng.choice(SURNAMES)), fmt(y, m, d)])
    if by_slug:
        rows.sort(key=lambda r: r[1])
    name_words = [w.title() for w in rng.sample(WORDS, rng.randint(2, 3))]
    while slug(name_words) in slugs:
        name_words = [w.title() for w in rng.sample(WORDS, rng.randint(2, 3))]
    first, last = rng.choice(PEOPLE), rng.choice(SURNAMES)
    y, m, d = 2024, rng.randint(1, 12), rng.randint(1, 28)
    new_row = [f"{prefix}-{next_id + 1:04d}", slug(name_words), owner(first, last), fmt(y, m, d)]
    table = sorted([*rows, new_row], key=lambda r: r[1]) if by_slug else [*rows, new_row]
    log_line = (f"added {new_row[0]} {new_row[1]}" if log_rule == "added"
                else f"{fmt(y, m, d)} {new_row[0]}")
    guide = (
        "# Contributing to the registry\n\n"
        "Every entry is a row of data/registry.csv (`id,slug,owner,added`).\n\n"
        f"- **id**: `{prefix}-NNNN`, four digits, one more than the highest id in the file.\n"
        f"- **slug**: the entry's name in lower case, words joined with `{sep}`.\n"
        f"- **owner**: " + ("the first letter of the first name followed by the surname, all "
                           "lower case (Ada Lovelace -> alovelace)." if owner_rule == "initial"
                           else "first name and surname in lower case joined by a dot (Ada "
                                "Lovelace -> ada.lovelace).") + "\n"
        f"- **added**: the date the entry was added, written {date_text}.\n"
        f"- Rows are kept sorted by " + ("slug (alphabetically)." if by_slug
                                         else "id (new rows go at the end).") + "\n"
        "- After adding a row, append one line to CHANGES.log: " +
        ("`added ID SLUG`." if log_rule == "added" else "`ADDED ID` (the date as in the row, "
                                                          "then the id).") + "\n")
    changes = "".join(f"added {r[0]} {r[1]}\n" if log_rule == "added" else f"{r[3]} {r[0]}\n"
                      for r in rows[-2:])
    files = {"CONTRIBUTING.md": guide, "data/registry.csv": csv_text([
        ["id", "slug", "owner", "added"], *rows]), "CHANGES.log": changes}
    instruction = (
        f"Add the entry \"{' '.join(name_words)}\" to the registry. Its owner is "
        f"{first.title()} {last.title()} and it is added on {y}-{m:02d}-{d:02d}. Follow every "
        f"rule in CONTRIBUTING.md.")
    want_rows = [",".join(r) for r in table]

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        got = lines(ws, "data/registry.csv")
        body = [ln.strip() for ln in got[1:]] if got else None
        log = lines(ws, "CHANGES.log")
        return {"new_row": flag(body is not None and ",".join(new_row) in body),
                "registry": positional(body, want_rows),
                "header": flag(head(got) == "id,slug,owner,added"),
                "log": flag(log == norm_lines(changes + log_line + "\n"))}

    return Draft(instruction=instruction, files=files, check=check,
                 plan=[read("CONTRIBUTING.md"), read("data/registry.csv"),
                       write("data/registry.csv", csv_text([["id", "slug", "owner", "added"],
                                                            *table])),
                       sh(f"printf '%s\\n' {q(log_line)} >> CHANGES.log")],
                 params={"files": sorted(files.items()), "name": name_words,
                         "owner": [first, last], "date": [m, d]},
                 difficulty=2 if by_slug or date_rule != "iso" else 1)


