"""Script families: a Python bug behind a failing check, a broken build script, a command that
fails until its environment is fixed, and a value that only a command's output reveals.

These are the error-recovery tasks: the first run fails on purpose and the error message is
the only good guide to the fix. Graders that must execute the agent's code run it in a
bubblewrap sandbox on a copy of the workspace (:func:`common.run_sandboxed`), never in-process.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessgrid.tasks import GradingContext

from .base import Draft, SandboxedFunctionGrader, family
from .common import (
    CATEGORIES,
    PEOPLE,
    PRODUCTS,
    REGIONS,
    WORDS,
    csv_text,
    edit,
    flag,
    norm,
    pick,
    q,
    read,
    run_sandboxed,
    sh,
    text,
    write,
)


@dataclass(frozen=True)
class _Bug:
    """A function (``good`` source), the line fragment that the bug changes, and how to draw
    arguments. Both versions are compiled once; a task's cases are chosen so that at least one
    tells them apart."""

    fn: str
    good: str
    old: str
    bad: str
    args: Callable[[random.Random], tuple[Any, ...]]


def _ints(r: random.Random, lo: int, hi: int, n: tuple[int, int]) -> list[int]:
    return [r.randint(lo, hi) for _ in range(r.randint(*n))]


_BUGS: tuple[_Bug, ...] = (
    _Bug("discounted_total",
         'def discounted_total(prices, pct):\n    """Sum of prices after a pct% discount, '
         'rounded to cents."""\n    return round(sum(prices) * (100 - pct) / 100, 2)\n',
         "(100 - pct)", "(100 + pct)",
         lambda r: (_ints(r, 1, 99, (2, 5)), r.randint(5, 50))),
    _Bug("clamp",
         'def clamp(x, lo, hi):\n    """x limited to the range [lo, hi]."""\n'
         "    return max(lo, min(x, hi))\n",
         "min(x, hi)", "min(x, lo)",
         lambda r: (r.randint(-50, 150), r.randint(0, 20), r.randint(50, 100))),
    _Bug("mean",
         'def mean(xs):\n    """Arithmetic mean of a non-empty list."""\n'
         "    return sum(xs) / len(xs)\n",
         "/ len(xs)", "/ (len(xs) - 1)", lambda r: (_ints(r, 0, 50, (2, 6)),)),
    _Bug("count_vowels",
         'def count_vowels(text):\n    """Number of vowels (a, e, i, o, u) in text, any case."""\n'
         '    return sum(1 for c in text.lower() if c in "aeiou")\n',
         '"aeiou"', '"aeio"',
         lambda r: (" ".join(r.sample((*WORDS, "unit", "usual", "tulip", "humus"), 3)),)),
    _Bug("to_fahrenheit",
         'def to_fahrenheit(celsius):\n    """Degrees Celsius to degrees Fahrenheit."""\n'
         "    return celsius * 9 / 5 + 32\n",
         "+ 32", "- 32", lambda r: (r.randint(-40, 100),)),
    _Bug("last_n",
         'def last_n(xs, n):\n    """The last n items of xs (none when n <= 0)."""\n'
         "    return xs[-n:] if n > 0 else []\n",
         "xs[-n:]", "xs[-n:-1]", lambda r: (_ints(r, 0, 9, (3, 7)), r.randint(1, 3))),
    _Bug("is_leap",
         'def is_leap(year):\n    """Whether year is a Gregorian leap year."""\n'
         "    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n",
         "year % 100 != 0", "year % 100 == 0",
         lambda r: (r.choice((1900, 2000, 2024, 2023, 1996, 2100, 2400, 2016)),)),
    _Bug("word_count",
         'def word_count(text):\n    """Number of whitespace-separated words."""\n'
         "    return len(text.split())\n",
         "text.split()", 'text.split(" ")',
         lambda r: ("  ".join(r.sample(WORDS, r.randint(2, 4))) + " " * r.randint(0, 2),)),
    _Bug("percent",
         'def percent(part, whole):\n    """part as a percentage of whole, one decimal."""\n'
         "    return round(100 * part / whole, 1)\n",
         "100 * part", "10 * part", lambda r: (r.randint(1, 40), r.randint(41, 90))),
    _Bug("initials",
         'def initials(name):\n    """Upper-case initials of a name: "ada lovelace" -> "AL"."""\n'
         '    return "".join(w[0].upper() for w in name.split())\n',
         "w[0].upper()", "w[0]",
         lambda r: (f"{r.choice(PEOPLE)} {r.choice(PEOPLE)}",)),
    _Bug("median",
         'def median(xs):\n    """Median of a non-empty list."""\n    s = sorted(xs)\n'
         "    m = len(s) // 2\n    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2\n",
         "s = sorted(xs)", "s = list(xs)", lambda r: (_ints(r, 0, 99, (3, 6)),)),
)


def _compile(source: str, fn: str) -> Callable[..., Any]:
    scope: dict[str, Any] = {}
    exec(compile(source, f"<grid:{fn}>", "exec"), scope)  # our own constant source
    return scope[fn]  # type: ignore[no-any-return]


_GOOD = {b.fn: _compile(b.good, b.fn) for b in _BUGS}
_BAD = {b.fn: _compile(b.good.replace(b.old, b.bad), b.fn) for b in _BUGS}
_MODULES = ("pricing", "mathutil", "textutil", "metrics", "helpers", "calc", "report_lib",
            "units", "stats_lib", "formatting")
_CHECK_HEAD = ('"""Checks for src/. Run from the workspace root: python3 checks/run_checks.py"""\n'
               "import sys\n\nsys.dont_write_bytecode = True  # edits within a second must count\n"
               "sys.path.insert(0, \"src\")\n\n")


@family("fix_python_bug", tags=("error_recovery", "observation_reading"), difficulty=(2, 3),
        category="code", summary="make a failing check script pass by fixing the bug(s) it "
        "reveals in src/, without touching the checks", long_share=0.2)
def fix_python_bug(rng: random.Random, long: bool) -> Draft:
    mods = pick(rng, _MODULES, 3 if long else 1)
    bugs = rng.sample(_BUGS, len(mods) * 3)
    files: dict[str, str] = {}
    imports, cases, broken = [], [], []
    for k, mod in enumerate(mods):
        chosen = bugs[3 * k: 3 * k + rng.randint(2, 3)]
        bug = chosen[rng.randrange(len(chosen))]
        broken.append((mod, bug))
        srcs = [b.good.replace(b.old, b.bad) if b is bug else b.good for b in chosen]
        files[f"src/{mod}.py"] = f'"""{mod} helpers."""\n\n\n' + "\n\n".join(srcs)
        imports.append(f"from {mod} import {', '.join(b.fn for b in chosen)}  # noqa: E402")
        for b in chosen:
            found = b is not bug
            draws = [b.args(rng) for _ in range(rng.randint(2, 3))]
            while not found:
                if any(_BAD[b.fn](*a) != _GOOD[b.fn](*a) for a in draws):
                    found = True
                else:
                    draws[rng.randrange(len(draws))] = b.args(rng)
            cases += [(b.fn, a, _GOOD[b.fn](*a)) for a in draws]
    case_src = "CASES = [\n" + "".join(f"    ({fn!r}, {fn}, {a!r}, {w!r}),\n"
                                        for fn, a, w in cases) + "]\n"
    check_src = (_CHECK_HEAD + "\n".join(imports) + "\n\n" + case_src +
                 "\nfor name, fn, args, want in CASES:\n    got = fn(*args)\n"
                 "    assert got == want, f\"{name}{args!r} returned {got!r}, "
                 "expected {want!r}\"\nprint(\"all checks passed\")\n")
    files["checks/run_checks.py"] = check_src
    probe = (_CHECK_HEAD.replace("import sys", "import json, sys") + "\n".join(
        f"try:\n    {imp.split('  #')[0]}\nexcept Exception:\n    pass" for imp in imports)
        + "\n\nresults = []\n" + "".join(
        f"try:\n    results.append({fn}(*{a!r}) == {w!r})\nexcept Exception:\n"
        f"    results.append(False)\n" for fn, a, w in cases)
        + "print('RESULTS ' + json.dumps(results))\n")
    scope = "src/" + (f"{mods[0]}.py" if len(mods) == 1 else "")
    instruction = (
        f"`python3 checks/run_checks.py` fails. Fix the bug{'s' if long else ''} in {scope} so "
        f"that it prints `all checks passed` and exits with status 0"
        f"{' (there is one bug in each module it imports)' if long else ''}. Do not modify "
        f"anything under checks/.")

    def check(ws: Path, transcript: list[dict[str, Any]],
              context: GradingContext) -> dict[str, float]:
        # The pristine checks (not the workspace's copy), then the per-case probe; one sandbox.
        # Stale bytecode must not stand in for the sources: drop it (this is a copy).
        _, out, _ = run_sandboxed(ws, "find . -name __pycache__ -prune -exec rm -rf {} +; "
                                      f"python3 -B -c {q(check_src)}; echo \"CHECK_EXIT=$?\"; "
                                      f"python3 -B -c {q(probe)}", context)
        results: list[bool] = []
        passed = False
        for line in out.splitlines():
            if line.startswith("RESULTS "):
                results = json.loads(line[8:])
            elif line.startswith("CHECK_EXIT="):
                passed = line == "CHECK_EXIT=0"
        return {"check_passes": flag(passed and "all checks passed" in out),
                "cases": sum(results) / len(cases) if results else 0.0,
                "checks_unchanged": flag(text(ws, "checks/run_checks.py") == check_src)}

    plan = []
    for mod, bug in broken:
        plan += [sh("python3 checks/run_checks.py"), read(f"src/{mod}.py"),
                 edit(f"src/{mod}.py", bug.good.split(bug.old)[0].rsplit("\n", 1)[1] + bug.bad,
                      bug.good.split(bug.old)[0].rsplit("\n", 1)[1] + bug.old)]
    plan.append(sh("python3 checks/run_checks.py"))
    return Draft(instruction=instruction, files=files, check=SandboxedFunctionGrader(check),
                 plan=plan, params={"files": sorted(files.items())}, difficulty=3 if long else 2)


_OUTS = ("dist", "build", "out", "release", "public")
_SRCS = ("parts", "chunks", "sections", "pieces", "pages")
_BUNDLES = ("bundle.txt", "all.txt", "combined.txt", "book.txt", "merged.txt")


@family("fix_shell_script", tags=("error_recovery",), difficulty=(1, 2), category="code",
        summary="repair a broken POSIX build script from its error messages; the grader "
        "rebuilds from scratch in a sandbox")
def fix_shell_script(rng: random.Random, long: bool) -> Draft:
    out, src, bundle = rng.choice(_OUTS), rng.choice(_SRCS), rng.choice(_BUNDLES)
    version = rng.choice(("VERSION", "version.txt", "RELEASE"))
    wrong_src = rng.choice([s for s in _SRCS if s != src])
    good = (f"#!/bin/sh\n# Builds {out}/ from the text parts in {src}/.\nset -e\nOUT={out}\n"
            f"mkdir -p \"$OUT\"\ncat {src}/*.txt > \"$OUT/{bundle}\"\n"
            f"wc -l < \"$OUT/{bundle}\" | tr -d ' ' > \"$OUT/lines.txt\"\n"
            f"cp {version} \"$OUT/{version}\"\n"
            f"echo \"built $(cat \"$OUT/lines.txt\") lines into $OUT/{bundle}\"\n")
    # Each bug: (broken text, correct text); applied in script order, discovered in that order.
    catalog = {
        "var": (f"OUTDIR={out}\n", f"OUT={out}\n"),
        "mkdir": (f"OUT={out}\n", f"OUT={out}\nmkdir -p \"$OUT\"\n"),
        "src": (f"cat {wrong_src}/*.txt", f"cat {src}/*.txt"),
        "copy": (f"cp {version}.bak", f"cp {version}"),
    }
    hard = rng.random() < 0.5
    kinds = rng.sample(sorted(catalog), 2 if hard else 1)
    if set(kinds) == {"var", "mkdir"}:
        kinds = ["mkdir", "src"]
    kinds.sort(key=["var", "mkdir", "src", "copy"].index)
    script = good
    for kind in kinds:
        broken, correct = catalog[kind]
        script = script.replace(correct, broken, 1)
    parts = {f"{src}/{i:02d}_{rng.choice(WORDS)}.txt":
             "".join(f"{rng.choice(WORDS)} {rng.choice(WORDS)} {rng.randint(0, 999)}\n"
                     for _ in range(rng.randint(1, 5)))
             for i in range(rng.randint(2, 5))}
    files = {"build.sh": script, version: f"{rng.randint(0, 9)}.{rng.randint(0, 20)}."
                                          f"{rng.randint(0, 20)}\n", **parts}
    joined = "".join(parts[p] for p in sorted(parts))
    outputs = {f"{out}/{bundle}": joined, f"{out}/lines.txt": f"{joined.count(chr(10))}\n",
               f"{out}/{version}": files[version]}
    instruction = (
        f"`sh build.sh` fails. Fix build.sh (change no other file) so that `sh build.sh` exits "
        f"with status 0 and produces {out}/{bundle} (all {src}/*.txt files concatenated in name "
        f"order), {out}/lines.txt (the number of lines of {out}/{bundle}) and {out}/{version} "
        f"(a copy of {version}). Then run it so that these files exist.")

    def outputs_ok(found: dict[str, str | None]) -> float:
        return sum(norm(found.get(p)) == norm(c) for p, c in outputs.items()) / len(outputs)

    def check(ws: Path, transcript: list[dict[str, Any]],
              context: GradingContext) -> dict[str, float]:
        now = outputs_ok({p: text(ws, p) for p in outputs})
        code, _, rebuilt = run_sandboxed(ws, f"rm -rf {out} && sh build.sh", context,
                                         collect=list(outputs))
        return {"outputs": now,
                "rebuilds": flag(code == 0 and outputs_ok(rebuilt) == 1.0),
                "inputs_unchanged": flag(all(text(ws, p) == c for p, c in files.items()
                                             if p != "build.sh"))}

    plan = [sh("sh build.sh"), read("build.sh")]
    for kind in kinds:
        broken, correct = catalog[kind]
        plan.append(edit("build.sh", broken, correct))
        plan.append(sh("sh build.sh"))
    plan.append(read(f"{out}/lines.txt"))
    return Draft(instruction=instruction, files=files, check=SandboxedFunctionGrader(check),
                 plan=plan, params={"files": sorted(files.items())}, difficulty=2 if hard else 1)


_VARS = ("EXPORT_REGION", "REPORT_REGION", "SYNC_REGION", "TARGET_REGION")
_STEPS = {
    "lock": ('    if os.path.exists(LOCK):\n        sys.exit(f"error: {LOCK} exists: another '
             'export may be running. If none is, delete {LOCK} and retry.")\n'),
    "env": ('    region = os.environ.get("{var}")\n    if not region:\n        sys.exit("error: '
            'environment variable {var} is not set; set it to the `region` value of '
            'config/export.ini")\n'),
    "dir": ('    if not os.path.isdir(OUT_DIR):\n        sys.exit(f"error: output directory '
            '{OUT_DIR}/ does not exist; create it first")\n'),
}
_EXPORT = '''"""Export the records of one region (see config/export.ini)."""
import csv
import os
import sys

OUT_DIR = "{out_dir}"
LOCK = "run/export.lock"


def main():
{steps}    with open("data/records.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["region"] == region]
    rows.sort(key=lambda r: int(r["id"]))
    with open(os.path.join(OUT_DIR, "export.csv"), "w") as out:
        out.write("id,item,qty\\n")
        for r in rows:
            out.write(r["id"] + "," + r["item"] + "," + r["qty"] + "\\n")
    print("exported", len(rows), "rows for", region, "to", OUT_DIR + "/export.csv")


if __name__ == "__main__":
    main()
'''


@family("script_recovery", tags=("error_recovery", "observation_reading"), difficulty=(1, 3),
        category="scripts", summary="run an export that fails on a missing directory, env var "
        "or stale lock until each reported cause is fixed", long_share=0.2)
def script_recovery(rng: random.Random, long: bool) -> Draft:
    kinds = (rng.sample(sorted(_STEPS), 3) if long else
             rng.sample(sorted(_STEPS), rng.choice((1, 2))))
    var = rng.choice(_VARS)
    regions = pick(rng, REGIONS, 3)
    region, fallback = regions[0], regions[1]
    out_dir = f"out/{rng.choice(('exports', 'reports', 'snapshots'))}/{rng.randint(2020, 2026)}"
    steps = "".join(_STEPS[k].replace("{var}", var) for k in kinds)
    if "env" not in kinds:
        steps = f'    region = "{region}"\n' + steps
    script = _EXPORT.replace("{out_dir}", out_dir).replace("{steps}", steps)
    rows = [[str(i), rng.choice(regions), rng.choice(PRODUCTS), str(rng.randint(1, 90))]
            for i in rng.sample(range(1, 500), rng.randint(8, 20))]
    if not any(r[1] == region for r in rows):
        rows[0][1] = region
    records = csv_text([["id", "region", "item", "qty"], *rows])
    ini = f"[export]\nregion = {region}\nfallback_region = {fallback}\nformat = csv\n"
    files = {"tools/export.py": script, "data/records.csv": records, "config/export.ini": ini}
    if "dir" not in kinds:
        files[f"{out_dir}/.keep"] = ""
    if "lock" in kinds:
        files["run/export.lock"] = f"pid {rng.randint(100, 30000)}\n"
    want = csv_text([["id", "item", "qty"],
                     *sorted(([r[0], r[2], r[3]] for r in rows if r[1] == region),
                             key=lambda r: int(r[0]))])
    target = f"{out_dir}/export.csv"
    instruction = (
        f"Produce {target} by running `python3 tools/export.py` from the workspace root. Do "
        f"not edit tools/, data/ or config/. If the script stops with an error, fix the cause "
        f"it reports and run it again, until it succeeds.")

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        scores = {"export": flag(norm(text(ws, target)) == norm(want)),
                  "inputs_unchanged": flag(all(text(ws, p) == files[p] for p in
                                               ("tools/export.py", "data/records.csv",
                                                "config/export.ini")))}
        if "lock" in kinds:
            scores["lock_removed"] = flag(not (ws / "run/export.lock").exists())
        return scores

    run = "python3 tools/export.py"
    plan = []
    for kind in kinds:
        plan.append(sh(run))
        if kind == "lock":
            plan.append(sh("rm run/export.lock"))
        elif kind == "dir":
            plan.append(sh(f"mkdir -p {out_dir}"))
        else:
            plan.append(read("config/export.ini"))
            run = f"{var}={region} python3 tools/export.py"
    plan += [sh(run), read(target)]
    return Draft(instruction=instruction, files=files, check=check, plan=plan,
                 params={"kinds": kinds, "var": var, "regions": regions, "out": out_dir,
                         "rows": rows},
                 difficulty=3 if long else len(kinds))


_INSPECT = '''"""Print a summary of every file in datasets/ (run from the workspace root)."""
import hashlib
import os

SALT = b"{salt}"
print("dataset summary")
print("=" * 48)
for name in sorted(os.listdir("datasets")):
    with open(os.path.join("datasets", name), "rb") as fh:
        data = fh.read()
    digest = hashlib.sha256(SALT + data).hexdigest()[:12]
    print(name.ljust(24), "lines=" + str(data.count(b"\\n")).ljust(6), "checksum=" + digest)
print("=" * 48)
'''


@family("command_output", tags=("observation_reading",), difficulty=(1, 2), category="scripts",
        summary="report a checksum that only a script's output shows (for a named dataset or "
        "the largest one)")
def command_output(rng: random.Random, long: bool) -> Draft:
    salt = "".join(rng.choice("abcdefghjkmnpqrstuvwxyz23456789") for _ in range(10))
    names = [f"{w}.{rng.choice(('csv', 'txt', 'tsv'))}" for w in pick(rng, CATEGORIES, 5)]
    files: dict[str, str] = {}
    for name in names[: rng.randint(3, 5)]:
        files[f"datasets/{name}"] = "".join(f"{rng.choice(WORDS)},{rng.randint(0, 999)}\n"
                                            for _ in range(rng.randint(2, 40)))
    sizes = {p: c.count("\n") for p, c in files.items()}
    hard = rng.random() < 0.5 and list(sizes.values()).count(max(sizes.values())) == 1
    target = max(sizes, key=lambda p: sizes[p]) if hard else rng.choice(sorted(files))
    answer = hashlib.sha256(salt.encode() + files[target].encode()).hexdigest()[:12]
    files["tools/inspect.py"] = _INSPECT.replace("{salt}", salt)
    which = ("the dataset with the most lines" if hard else target)
    instruction = (
        f"Run `python3 tools/inspect.py` (from the workspace root) and write the checksum it "
        f"prints for {which} to answer.txt: only the 12-character value, nothing else.")

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        return {"answer": flag((text(ws, "answer.txt") or "").strip() == answer)}

    return Draft(instruction=instruction, files=files, check=check,
                 plan=[sh("python3 tools/inspect.py"), write("answer.txt", answer + "\n")],
                 params={"files": sorted(files.items()), "hard": hard, "target": target},
                 difficulty=2 if hard else 1)
