"""File-tree families: reorganise by extension, locate a definition, rename a symbol.

These reward choosing the right tool: a listing plus one shell command beats per-file actions,
a search beats opening forty files (and the lookup task caps the number of tool calls), and a
whole-word substitution beats hand edits that also hit longer identifiers.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

from .base import Draft, family
from .common import (
    COMPONENTS,
    PRODUCTS,
    WORDS,
    flag,
    ls,
    pick,
    q,
    search,
    sh,
    text,
    tool_calls,
    write,
)

_EXTS = ("txt", "csv", "json", "md", "log", "py", "yaml")


def _files_under(ws: Path, rel: str) -> list[str]:
    root = ws / rel
    if not root.is_dir() or root.is_symlink():
        return []
    return sorted(str(p.relative_to(ws)) for p in root.rglob("*") if p.is_file()
                  or p.is_symlink())


@family("organize_by_extension", tags=("planning", "tool_selection"), difficulty=(1, 2),
        category="files", summary="move inbox files into sorted/<ext>/ (case-folded, other/), "
        "leaving nothing behind")
def organize_by_extension(rng: random.Random, long: bool) -> Draft:
    hard = rng.random() < 0.5
    names: list[str] = []
    moves: dict[str, str] = {}
    files: dict[str, str] = {}
    for _ in range(rng.randint(6, 16)):
        stem = f"{rng.choice(WORDS)}_{rng.randint(1, 99)}"
        ext = rng.choice(_EXTS)
        roll = rng.random() if hard else 1.0
        if roll < 0.2:
            name, folder = f"{stem}.{ext.upper()}", ext
        elif roll < 0.3:
            name, folder = stem, "other"
        elif roll < 0.4:
            name, folder = f"{stem}.v{rng.randint(2, 9)}.{ext}", ext
        else:
            name, folder = f"{stem}.{ext}", ext
        if name.lower() in {n.lower() for n in names}:
            continue
        names.append(name)
        files[f"inbox/{name}"] = f"{rng.choice(WORDS)} {rng.randint(0, 10**6)}\n"
        moves[f"inbox/{name}"] = f"sorted/{folder}/{name}"
    rule = (", in lower case (a.CSV goes to sorted/csv/a.CSV; the extension is what follows "
            "the last dot); files without an extension go to sorted/other/" if hard else "")
    instruction = (
        f"Move every file in inbox/ into sorted/<ext>/, where <ext> is the file's extension "
        f"without the dot{rule}. Keep each file's name and content. Afterwards inbox/ must "
        f"contain no files (the folder itself may stay) and sorted/ must contain exactly the "
        f"moved files.")
    folders = sorted({dest.split("/")[1] for dest in moves.values()})
    command = " && ".join([f"mkdir -p {' '.join('sorted/' + f for f in folders)}",
                           *(f"mv {q(src)} {q(dest)}" for src, dest in sorted(moves.items()))])

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        moved = sum(text(ws, dest) == files[src] for src, dest in moves.items())
        return {"moved": moved / len(moves),
                "inbox_empty": flag(not _files_under(ws, "inbox")),
                "nothing_else": flag(_files_under(ws, "sorted") == sorted(moves.values()))}

    return Draft(instruction=instruction, files=files, check=check,
                 plan=[ls("inbox"), sh(command), ls("sorted")],
                 params={"files": sorted(files.items()), "hard": hard},
                 difficulty=2 if hard else 1)


_ADJ = ("max", "min", "default", "retry", "batch", "idle", "burst", "grace", "sync", "flush")
_NOUNS = ("budget", "window", "limit", "interval", "quota", "depth", "timeout", "size")
MAX_CALLS = 8


@family("find_definition", tags=("tool_selection", "observation_reading"), difficulty=(1, 2),
        category="files", summary="find the one file that defines a setting in a large tree, "
        "within a tool-call budget")
def find_definition(rng: random.Random, long: bool) -> Draft:
    name = f"{rng.choice(_ADJ)}_{rng.choice(WORDS)}_{rng.choice(_NOUNS)}".upper()
    value = str(rng.randint(2, 5000))
    hard = rng.random() < 0.5
    dirs = [f"src/{a}/{b}" for a in pick(rng, COMPONENTS, 3) for b in pick(rng, WORDS, 2)]
    paths: list[str] = []
    size = rng.randint(25, 45)
    while len(paths) < size:
        path = f"{rng.choice(dirs)}/{rng.choice(WORDS)}_{rng.choice(PRODUCTS)}." \
               f"{rng.choice(('py', 'cfg', 'txt'))}"
        if path not in paths:
            paths.append(path)
    home = rng.choice([p for p in paths if not p.endswith(".txt")])
    mentions = rng.sample([p for p in paths if p != home], rng.randint(2, 4))
    files: dict[str, str] = {}
    for path in paths:
        body = []
        for _ in range(rng.randint(3, 9)):
            other = f"{rng.choice(_ADJ)}_{rng.choice(WORDS)}_{rng.choice(_NOUNS)}".upper()
            if other != name:
                body.append(f"{other} = {rng.randint(2, 5000)}")
        if path in mentions:
            body.insert(rng.randint(0, len(body)), rng.choice(
                (f"limit = settings.{name}", f"# {name} is defined elsewhere",
                 f"print({name} + 1)", f"assert {name} > 0")))
        if path == home:
            body.insert(rng.randint(0, len(body)), f"{name} = {value}")
        files[path] = "\n".join(body) + "\n"
    if hard:  # near misses: a longer name ending in NAME, an indented (non-top-level) line
        decoy = rng.choice([p for p in paths if p != home])
        files[decoy] += f"LEGACY_{name} = {rng.randint(2, 5000)}\n"
        decoy2 = rng.choice([p for p in paths if p != home])
        files[decoy2] += f"if False:\n    {name} = {rng.randint(2, 5000)}\n"
    answer = f"{home}:{value}"
    instruction = (
        f"Exactly one file under src/ defines the setting `{name}` on a line that starts with "
        f"`{name} = ` (at the very beginning of the line). Write `PATH:VALUE` to answer.txt, "
        f"where PATH is that file's path relative to the workspace root (e.g. src/a/b/c.py) "
        f"and VALUE is the assigned value, e.g. `src/a/b/c.py:17`. You may use at most "
        f"{MAX_CALLS} tool calls in total (finishing included).")

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        got = (text(ws, "answer.txt") or "").strip()
        return {"answer": flag(got == answer),
                "within_budget": flag(len(tool_calls(transcript)) <= MAX_CALLS)}

    return Draft(instruction=instruction, files=files, check=check,
                 plan=[search(f"^{name} = ", "src"), write("answer.txt", answer + "\n")],
                 params={"files": sorted(files.items()), "name": name},
                 difficulty=2 if hard else 1)


_VERBS = ("load", "parse", "fetch", "build", "render", "resolve", "encode", "score")
_NEW_VERBS = ("read", "decode", "get", "make", "draw", "lookup", "pack", "rank")


@family("rename_symbol", tags=("tool_selection", "planning"), difficulty=(1, 2),
        category="code", summary="rename a function across a package, whole words only, "
        "leaving longer identifiers and non-package files alone")
def rename_symbol(rng: random.Random, long: bool) -> Draft:
    noun = rng.choice(("record", "token", "order", "invoice", "profile", "batch", "entry"))
    i = rng.randrange(len(_VERBS))
    old, new = f"{_VERBS[i]}_{noun}", f"{_NEW_VERBS[rng.randrange(len(_NEW_VERBS))]}_{noun}"
    mods = pick(rng, ("store", "api", "cli", "jobs", "views", "report", "sync", "audit"),
                rng.randint(3, 6))
    home = mods[0]
    files: dict[str, str] = {"pkg/__init__.py": f'"""{rng.choice(WORDS).title()} package."""\n'}
    files[f"pkg/{home}.py"] = (
        f'"""{home.title()} helpers."""\n\n{old}_cache = {{}}\n\n\n'
        f"def {old}(key):\n    \"\"\"Return the {noun} stored under key.\"\"\"\n"
        f"    if key in {old}_cache:\n        return {old}_cache[key]\n"
        f"    value = {{\"key\": key, \"size\": {rng.randint(1, 99)}}}\n"
        f"    {old}_cache[key] = value\n    return value\n\n\n"
        f"def {old}s(keys):\n    return [{old}(k) for k in keys]\n\n\n"
        f"def _{old}(key):\n    return None\n")
    for mod in mods[1:]:
        fn = f"{rng.choice(('handle', 'show', 'sync', 'check'))}_{rng.choice(WORDS)}"
        if rng.random() < 0.75:
            files[f"pkg/{mod}.py"] = (
                f"from .{home} import {old}, {old}s\n\n\n"
                f"def {fn}(x):\n    # look the {noun} up with {old} first\n"
                f"    first = {old}(x)\n    rest = {old}s([x, x + 1])\n"
                f"    return first, rest\n")
        else:
            files[f"pkg/{mod}.py"] = f"def {fn}(x):\n    return x * {rng.randint(2, 9)}\n"
    files["README.md"] = f"# pkg\n\nCall `{old}(key)` to get a {noun}.\n"
    pattern = re.compile(rf"\b{old}\b")
    want = {p: (pattern.sub(new, c) if p.endswith(".py") else c) for p, c in files.items()}
    touched = sorted(p for p in files if p.endswith(".py") and want[p] != files[p])
    instruction = (
        f"Rename the function `{old}` to `{new}` in every .py file under pkg/: replace each "
        f"whole-word occurrence of `{old}` (definition, imports, calls and comments). Longer "
        f"identifiers that merely contain it, such as `{old}s`, `{old}_cache` or `_{old}`, "
        f"must not change, and neither may files outside pkg/. Change nothing else.")

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        got = {p: text(ws, p) for p in files}
        py = [p for p in files if p.endswith(".py")]
        return {"files_exact": sum(got[p] == want[p] for p in py) / len(py),
                "no_old_left": flag(all(got[p] is not None and not pattern.search(got[p] or "")
                                        for p in py)),
                "others_unchanged": flag(got["README.md"] == files["README.md"])}

    sed = f"sed -i 's/\\b{old}\\b/{new}/g' {' '.join(touched)}"
    return Draft(instruction=instruction, files=files, check=check,
                 plan=[search(old, "pkg"), sh(sed), search(new, "pkg")],
                 params={"files": sorted(files.items()), "new": new},
                 difficulty=2 if len(touched) > 3 else 1)
