"""Log families: triage errors into a report, extract fields to CSV, count matches in a tree.

Logs are long enough that skimming is error-prone and carry near-miss lines (other levels,
other cases, rotated files), so the agent has to read what the tools return precisely.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from .base import Draft, family
from .common import (
    COMPONENTS,
    PEOPLE,
    REGIONS,
    WORDS,
    csv_text,
    dumps,
    flag,
    head,
    lines,
    load_json,
    ls,
    overlap,
    pick,
    positional,
    read,
    search,
    timestamp,
    write,
)

_MESSAGES = {
    "ERROR": ("connection refused by {w}", "timeout after {n}ms talking to {w}",
              "failed to write {w}.dat: disk full", "unhandled exception in {w} handler",
              "lost lease on {w} shard {n}"),
    "WARN": ("slow response from {w} ({n}ms)", "retrying {w} request ({n} left)",
             "cache miss storm on {w}"),
    "INFO": ("served {n} requests", "job {w} finished in {n}ms", "reloaded {w} settings",
             "user {p} logged in"),
    "DEBUG": ("state of {w}: {n}", "heartbeat {n}"),
}


def _message(rng: random.Random, level: str) -> str:
    return rng.choice(_MESSAGES[level]).format(w=rng.choice(WORDS), n=rng.randint(2, 9999),
                                               p=rng.choice(PEOPLE))


@family("log_triage", tags=("observation_reading", "planning"), difficulty=(1, 2),
        category="logs", summary="count ERROR lines per component (over rotated logs) and "
        "report the earliest error")
def log_triage(rng: random.Random, long: bool) -> Draft:
    comps = pick(rng, COMPONENTS, rng.randint(3, 6))
    rotated = rng.random() < 0.5
    n = rng.randint(25, 60)
    clock = rng.randint(0, 20_000)
    entries = []
    for _ in range(n):
        clock += rng.randint(1, 400)
        level = rng.choices(("INFO", "WARN", "ERROR", "DEBUG"), (5, 2, 2, 1))[0]
        entries.append(f"{timestamp(clock)} {level:<5} {rng.choice(comps)}: "
                       f"{_message(rng, level)}")
    if not any(" ERROR " in e for e in entries):
        at = rng.randrange(len(entries))
        ts = entries[at].split(" ")[0]
        entries[at] = f"{ts} ERROR {rng.choice(comps)}: {_message(rng, 'ERROR')}"
    cut = rng.randint(len(entries) // 3, 2 * len(entries) // 3) if rotated else 0
    files = {"logs/app.log": "\n".join(entries[cut:]) + "\n"}
    if rotated:
        files["logs/app.log.1"] = "\n".join(entries[:cut]) + "\n"
    counts: dict[str, int] = {}
    first = None
    for e in entries:
        parts = e.split()
        if parts[1] == "ERROR":
            counts[parts[2].rstrip(":")] = counts.get(parts[2].rstrip(":"), 0) + 1
            first = first or e
    scope = ("logs/app.log and logs/app.log.1 (the older, rotated part of the same log)"
             if rotated else "logs/app.log")
    instruction = (
        f"Triage {scope}. Each line is `TIMESTAMP LEVEL COMPONENT: message`. Write "
        f"reports/errors.json: a JSON object mapping every component that has at least one "
        f"ERROR line to its number of ERROR lines (integers; components without errors are "
        f"left out). Write reports/first_error.txt containing the complete earliest ERROR line "
        f"(by timestamp), exactly as it appears in the log.")

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        data = load_json(ws, "reports/errors.json")
        ok = isinstance(data, dict)
        got = lines(ws, "reports/first_error.txt")
        return {"valid_json": flag(ok),
                "counts": sum(data.get(c) == k for c, k in counts.items()) / max(
                    len(counts), len(data)) if ok and data else 0.0,
                "first_error": flag(head(got) == first)}

    plan = [ls("logs"), *(read(p) for p in sorted(files, reverse=True)),
            write("reports/errors.json", dumps(dict(sorted(counts.items())))),
            write("reports/first_error.txt", f"{first}\n")]
    return Draft(instruction=instruction, files=files, check=check, plan=plan,
                 params={"entries": entries, "cut": cut}, difficulty=2 if rotated else 1)


_PATHS = ("/api/users/{n}", "/api/orders/{n}", "/login", "/static/app.{w}.js", "/search",
          "/api/carts/{n}/items", "/health", "/api/{w}/export")


@family("log_to_csv", tags=("observation_reading",), difficulty=(1, 2), category="logs",
        summary="extract selected access-log requests into a CSV with typed fields")
def log_to_csv(rng: random.Random, long: bool) -> Draft:
    n = rng.randint(20, 45)
    clock = rng.randint(0, 50_000)
    hard = rng.random() < 0.5
    method = rng.choice(("POST", "DELETE", "PUT"))
    records = []
    for _ in range(n):
        clock += rng.randint(1, 90)
        status = rng.choices((200, 201, 204, 301, 404, 500, 502, 503), (9, 2, 1, 1, 2, 2, 1, 1))[0]
        path = rng.choice(_PATHS).format(n=rng.randint(1, 999), w=rng.choice(WORDS))
        m = rng.choices(("GET", "POST", "DELETE", "PUT"), (6, 3, 1, 1))[0]
        records.append((f"{timestamp(clock)}Z", m, path, status, rng.randint(3, 2500),
                        rng.choice(PEOPLE), rng.choice(REGIONS)))
    if not any(r[3] >= 500 for r in records):
        r = records[0]
        records[0] = (r[0], method, r[2], 503, r[4], r[5], r[6])
    log = "".join(f"{t} {m} {p} {s} {ms}ms user={u} region={g}\n"
                  for t, m, p, s, ms, u, g in records)
    if hard:
        keep = [r for r in records if r[3] >= 500 or r[1] == method]
        cond = f"whose status is 500 or higher, or whose method is {method}"
    else:
        keep = [r for r in records if r[3] >= 500]
        cond = "whose status is 500 or higher"
    cols = ("timestamp", "method", "path", "status", "latency_ms", "user")
    want = [f"{t},{m},{p},{s},{ms},{u}" for t, m, p, s, ms, u, _g in keep]
    out = "out/failed_requests.csv" if not hard else f"out/requests_{method.lower()}.csv"
    instruction = (
        f"logs/access.log has one request per line: `TIMESTAMP METHOD PATH STATUS LATENCYms "
        f"user=USER region=REGION`. Write {out} with the header `{','.join(cols)}` and one row "
        f"per request {cond}, in log order. `latency_ms` is the number without the `ms` "
        f"suffix; `user` is the value after `user=`. No other columns.")

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        got = lines(ws, out)
        body = [ln.strip() for ln in got[1:]] if got else None
        return {"header": flag(head(got) == ",".join(cols)),
                "selection": overlap(body, want), "rows": positional(body, want)}

    return Draft(instruction=instruction, files={"logs/access.log": log}, check=check,
                 plan=[read("logs/access.log"), write(out, csv_text([cols]) + "".join(
                     w + "\n" for w in want)), read(out)],
                 params={"records": records, "hard": hard, "method": method},
                 difficulty=2 if hard else 1)


_PHRASES = ("connection reset", "quota exceeded", "checksum mismatch", "lock timeout",
            "handshake failed", "stale cursor", "replica lag")


@family("count_matches", tags=("tool_selection", "observation_reading"), difficulty=(1, 2),
        category="logs", summary="count case-sensitive phrase matches per file in a log tree")
def count_matches(rng: random.Random, long: bool) -> Draft:
    phrase = rng.choice(_PHRASES)
    services = pick(rng, COMPONENTS, rng.randint(3, 5))
    files: dict[str, str] = {}
    counts: dict[str, int] = {}
    for svc in services:
        for day in sorted(rng.sample(range(1, 29), rng.randint(1, 3))):
            path = f"logs/{svc}/2024-04-{day:02d}.log"
            body = []
            for i in range(rng.randint(8, 30)):
                r = rng.random()
                if r < 0.12:
                    body.append(f"{i:04d} ERROR {svc}: {phrase} on {rng.choice(WORDS)}")
                    counts[path] = counts.get(path, 0) + 1
                elif r < 0.2:  # near misses: other case, words split
                    body.append(f"{i:04d} WARN {svc}: {phrase.upper()} (recovered)"
                                if rng.random() < 0.5 else
                                f"{i:04d} INFO {svc}: {phrase.split()[0]} ok; "
                                f"{phrase.split()[1]} later")
                else:
                    body.append(f"{i:04d} INFO {svc}: {_message(rng, 'INFO')}")
            files[path] = "\n".join(body) + "\n"
    if not counts:
        path = sorted(files)[0]
        files[path] += f"9999 ERROR x: {phrase} at shutdown\n"
        counts[path] = 1
    total = sum(counts.values())
    want = [f"{p},{k}" for p, k in sorted(counts.items())] + [f"total,{total}"]
    out = f"out/{phrase.replace(' ', '_')}.csv"
    instruction = (
        f"Count the lines containing the exact text `{phrase}` (case-sensitive) in every file "
        f"under logs/. Write {out} with the header `file,count`, then one row per file with at "
        f"least one such line (path relative to the workspace root, like logs/x/y.log, rows "
        f"sorted by path), then a last row `total,N` with the sum.")

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        got = lines(ws, out)
        body = [ln.strip() for ln in got[1:]] if got else None
        return {"header": flag(head(got) == "file,count"),
                "per_file": overlap(body[:-1] if body else body, want[:-1]),
                "total": flag(body is not None and body[-1:] == want[-1:]),
                "exact": flag(body == want)}

    return Draft(instruction=instruction, files=files, check=check,
                 plan=[search(phrase, "logs"), write(out, "file,count\n" + "\n".join(want)
                                                     + "\n")],
                 params={"phrase": phrase, "files": sorted(files.items())},
                 difficulty=2 if len(files) > 6 else 1)
