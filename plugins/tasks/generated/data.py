"""Data families: CSV aggregation, filtering, statistics, de-duplication and JSON merging.

They test careful reading of data the agent only sees through tool output, and exact output
formats; each instruction states the output path, header, order and number format, so there is
exactly one right file.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .base import Draft, family
from .common import (
    CATEGORIES,
    CITIES,
    DOMAINS,
    MISSING,
    PEOPLE,
    REGIONS,
    SURNAMES,
    TEAMS,
    csv_text,
    date,
    dumps,
    flag,
    head,
    lines,
    load_json,
    overlap,
    pick,
    positional,
    read,
    text,
    write,
)

_GROUPS = {"region": REGIONS, "team": TEAMS, "store": CITIES, "category": CATEGORIES}
_NUMBERS = ("units", "amount", "hours", "weight", "visits", "returns")
_TABLES = ("sales", "orders", "shipments", "invoices", "tickets", "bookings", "deliveries")


def _close(got: str, want: float, decimals: int) -> bool:
    """``got`` is written with exactly ``decimals`` decimals and is within half a unit of the
    last place of ``want`` (either rounding of an exact tie is accepted)."""
    _, dot, frac = got.partition(".")
    if decimals and (not dot or len(frac) != decimals):
        return False
    try:
        return bool(abs(float(got) - want) <= 0.5 * 10 ** -decimals + 1e-9)
    except ValueError:
        return False


@family("csv_group_agg", tags=("observation_reading", "planning"), difficulty=(1, 2),
        category="data", summary="aggregate a numeric CSV column per group into a new CSV")
def csv_group_agg(rng: random.Random, long: bool) -> Draft:
    table = rng.choice(_TABLES)
    gcol = rng.choice(sorted(_GROUPS))
    ncol = rng.choice(_NUMBERS)
    agg = rng.choice(("sum", "count", "max", "min", "mean"))
    groups = pick(rng, _GROUPS[gcol], rng.randint(3, 6))
    n = rng.randint(12, 36)
    header = ["id", *rng.sample(["date", gcol, ncol], 3)]
    rows = []
    next_id = rng.randint(1000, 5000)
    for _ in range(n):
        next_id += rng.randint(1, 5)
        rec = {"id": str(next_id), "date": date(rng),
               gcol: rng.choice(groups), ncol: str(rng.randint(1, 500))}
        rows.append([rec[c] for c in header])
    src = f"data/{table}.csv"
    out = f"reports/{ncol}_by_{gcol}.csv"
    gi, ni = header.index(gcol), header.index(ncol)
    values: dict[str, list[int]] = {}
    for r in rows:
        values.setdefault(r[gi], []).append(int(r[ni]))
    funcs: dict[str, Callable[[list[int]], float]] = {
        "sum": sum, "count": len, "max": max, "min": min, "mean": lambda v: sum(v) / len(v)}
    want = {g: funcs[agg](v) for g, v in sorted(values.items())}

    def fmt(x: float) -> str:
        return f"{x:.2f}" if agg == "mean" else str(x)

    what = {"sum": f"the sum of `{ncol}` over", "count": "the number of",
            "max": f"the largest `{ncol}` among", "min": f"the smallest `{ncol}` among",
            "mean": f"the mean of `{ncol}` over"}[agg]
    rounding = (" Write the mean rounded to 2 decimals, with exactly 2 decimals (e.g. 12.50)."
                if agg == "mean" else "")
    out_header = f"{gcol},{agg}_{ncol}"
    instruction = (
        f"{src} is a CSV file with a header row. Write {out} with the header line "
        f"`{out_header}` and then one line per distinct `{gcol}` value that occurs in the "
        f"file, sorted by `{gcol}` in ascending alphabetical order. The second column is "
        f"{what} the rows with that `{gcol}`.{rounding} No other lines, no spaces.")
    expected = [f"{g},{fmt(v)}" for g, v in want.items()]

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        got = lines(ws, out)
        body = [ln.strip() for ln in got[1:]] if got else []
        keys = [ln.split(",")[0] for ln in body]
        ok = 0
        for ln in body:
            g, _, v = ln.partition(",")
            if g in want and (_close(v, want[g], 2) if agg == "mean" else v == str(want[g])):
                ok += 1
        return {"report_exists": flag(got is not None),
                "header": flag(head(got) == out_header),
                "values": ok / max(len(want), len(body)) if got is not None else 0.0,
                "order": flag(bool(keys) and keys == sorted(want))}

    return Draft(instruction=instruction, files={src: csv_text([header, *rows])}, check=check,
                 plan=[read(src), write(out, "\n".join([out_header, *expected]) + "\n"),
                       read(out)],
                 params={"table": table, "g": gcol, "n": ncol, "agg": agg, "rows": rows,
                         "header": header},
                 difficulty=2 if agg == "mean" else 1)


@family("csv_filter_sort", tags=("observation_reading",), difficulty=(1, 2), category="data",
        summary="filter CSV rows by a threshold (and a city), project columns, sort them")
def csv_filter_sort(rng: random.Random, long: bool) -> Draft:
    entity = rng.choice(("members", "players", "students", "drivers", "tenants"))
    ncol = rng.choice(("score", "age", "points", "rating", "level"))
    n = rng.randint(12, 30)
    cities = pick(rng, CITIES, rng.randint(2, 4))
    header = ["id", "name", "city", ncol]
    rows = []
    used: set[str] = set()
    for i in range(n):
        name = rng.choice(PEOPLE) + "_" + rng.choice(SURNAMES)
        while name in used:
            name = rng.choice(PEOPLE) + "_" + rng.choice(SURNAMES)
        used.add(name)
        rows.append([str(i + 1), name, rng.choice(cities), str(rng.randint(10, 99))])
    rng.shuffle(rows)
    threshold = int(sorted(int(r[3]) for r in rows)[n // 3])
    by_city = rng.random() < 0.5
    city = rng.choice(sorted({r[2] for r in rows if int(r[3]) >= threshold}))  # never empty
    cols = rng.choice((["name", ncol], ["id", "name"], ["name", "city", ncol], [ncol, "id"]))
    keep = [r for r in rows if int(r[3]) >= threshold and (not by_city or r[2] == city)]
    keep.sort(key=lambda r: (-int(r[3]), int(r[0])))
    idx = [header.index(c) for c in cols]
    want = [",".join(r[i] for i in idx) for r in keep]
    src, out = f"data/{entity}.csv", f"out/top_{entity}.csv"
    cond = f"`{ncol}` is at least {threshold}" + (f" and `city` is `{city}`" if by_city else "")
    instruction = (
        f"From {src} (CSV with header), select the rows where {cond}. Write them to {out} "
        f"with only the columns {', '.join(f'`{c}`' for c in cols)} in that order, a header "
        f"line `{','.join(cols)}`, and the rows sorted by `{ncol}` from highest to lowest "
        f"(rows with equal `{ncol}` by `id` ascending, numerically).")

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        got = lines(ws, out)
        body = [ln.strip() for ln in got[1:]] if got else None
        return {"output_exists": flag(got is not None),
                "header": flag(head(got) == ",".join(cols)),
                "selection": overlap(body, want),
                "order": positional(body, want)}

    return Draft(instruction=instruction, files={src: csv_text([header, *rows])}, check=check,
                 plan=[read(src), write(out, "\n".join([",".join(cols), *want]) + "\n")],
                 params={"entity": entity, "rows": rows, "t": threshold,
                         "city": city if by_city else None, "cols": cols},
                 difficulty=2 if by_city else 1)


@family("column_stats", tags=("observation_reading", "planning"), difficulty=(1, 2),
        category="data", summary="count/min/max/mean/median of a CSV column into JSON")
def column_stats(rng: random.Random, long: bool) -> Draft:
    sensor = rng.choice(("boiler", "greenhouse", "freezer", "turbine", "reactor", "aquarium"))
    cols = pick(rng, ("temp_c", "humidity", "pressure_kpa", "flow_lpm", "voltage"), 2)
    target = rng.choice(cols)
    with_na = rng.random() < 0.5
    n = rng.randint(9, 25)
    header = ["time", *cols]
    rows, values = [], []
    for i in range(n):
        rec = [f"{(6 + i // 4) % 24:02d}:{(i % 4) * 15:02d}"]
        for c in cols:
            v = round(rng.uniform(1, 120), 1)
            if with_na and rng.random() < 0.2:
                rec.append("NA")
            else:
                rec.append(f"{v:.1f}")
                if c == target:
                    values.append(float(f"{v:.1f}"))
        rows.append(rec)
    if not values:
        rows[0][header.index(target)] = "42.0"
        values.append(42.0)
    want = {"count": len(values), "min": min(values), "max": max(values),
            "mean": statistics.fmean(values), "median": statistics.median(values)}
    src, out = f"data/{sensor}.csv", f"stats/{sensor}_{target}.json"
    na = (" Cells containing `NA` are missing values: leave them out (they do not count)."
          if with_na else "")
    instruction = (
        f"Compute statistics of the `{target}` column of {src} (CSV with header).{na} Write "
        f"{out} as a JSON object with exactly the keys `count` (integer), `min`, `max`, "
        f"`mean` and `median` (numbers; `mean` and `median` rounded to 2 decimals).")
    answer = {"count": want["count"], "min": want["min"], "max": want["max"],
              "mean": round(want["mean"], 2), "median": round(want["median"], 2)}

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        data = load_json(ws, out)
        ok = isinstance(data, dict)
        scores = {"valid_json": flag(ok), "keys": flag(ok and set(data) == set(want))}
        for key, value in want.items():
            got = data.get(key) if ok else None
            good = (isinstance(got, (int, float)) and not isinstance(got, bool)
                    and abs(got - value) <= (0.005 + 1e-9 if key in ("mean", "median") else 1e-9))
            scores[key] = flag(good)
        return scores

    return Draft(instruction=instruction, files={src: csv_text([header, *rows])}, check=check,
                 plan=[read(src), write(out, dumps(answer)), read(out)],
                 params={"sensor": sensor, "cols": cols, "target": target, "rows": rows},
                 difficulty=2 if with_na else 1)


@family("dedupe_lines", tags=("observation_reading", "state_tracking"), difficulty=(1, 2),
        category="files", summary="drop duplicate lines keeping first occurrences; count them")
def dedupe_lines(rng: random.Random, long: bool) -> Draft:
    subject = rng.choice(("subscribers", "attendees", "reviewers", "customers", "volunteers"))
    normalise = rng.random() < 0.5
    uniq = []
    for _ in range(rng.randint(8, 20)):
        addr = f"{rng.choice(PEOPLE)}.{rng.choice(SURNAMES)}@{rng.choice(DOMAINS)}"
        if addr not in uniq:
            uniq.append(addr)
    raw = list(uniq)
    for _ in range(rng.randint(3, 10)):
        dup = rng.choice(uniq)
        if normalise:
            style = rng.randrange(3)
            dup = dup.upper() if style == 0 else (dup.capitalize() if style == 1 else f"  {dup} ")
        raw.insert(rng.randint(1, len(raw)), dup)
    if normalise:  # some first occurrences are themselves variants
        for i in range(len(raw)):
            if rng.random() < 0.15:
                raw[i] = raw[i].title()
    def key(line: str) -> str:
        return line.strip().lower() if normalise else line

    seen: set[str] = set()
    want = []
    for line in raw:
        if key(line) not in seen:
            seen.add(key(line))
            want.append(key(line))
    removed = len(raw) - len(want)
    src = f"lists/{subject}.txt"
    out, count = f"lists/{subject}.unique.txt", f"lists/{subject}.removed.txt"
    rule = ("Two lines are duplicates when they are equal after removing surrounding "
            "whitespace and lower-casing; write every kept line in that normalised form "
            "(stripped, lower-case)." if normalise else
            "Two lines are duplicates when they are exactly equal.")
    instruction = (
        f"{src} has one e-mail address per line, with duplicates. {rule} Write {out} with "
        f"each distinct line once, keeping the first occurrence and the original order, and "
        f"write the number of lines you dropped (just the number) to {count}. Leave {src} "
        f"unchanged.")
    original = "\n".join(raw) + "\n"

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        got = lines(ws, out)
        n = (text(ws, count) or "").strip()
        return {"unique_lines": positional(got, want),
                "removed_count": flag(n == str(removed)),
                "source_unchanged": flag(text(ws, src) == original)}

    return Draft(instruction=instruction, files={src: original}, check=check,
                 plan=[read(src), write(out, "\n".join(want) + "\n"),
                       write(count, f"{removed}\n")],
                 params={"subject": subject, "raw": raw, "normalise": normalise},
                 difficulty=2 if normalise else 1)


@family("json_merge", tags=("planning", "observation_reading"), difficulty=(1, 2),
        category="data", summary="merge base records with updates (override/add/delete) by id")
def json_merge(rng: random.Random, long: bool) -> Draft:
    entity = rng.choice(("users", "accounts", "employees", "vendors", "players"))
    roles = ("admin", "editor", "viewer", "owner", "guest")
    ids = sorted(rng.sample(range(1, 200), rng.randint(4, 9)))

    def record(i: int) -> dict[str, Any]:
        first, last = rng.choice(PEOPLE), rng.choice(SURNAMES)
        return {"id": i, "name": f"{first.title()} {last.title()}",
                "email": f"{first}.{last}@{rng.choice(DOMAINS)}", "role": rng.choice(roles),
                "active": rng.random() < 0.7}

    base = [record(i) for i in ids]
    with_delete = rng.random() < 0.5
    updates: list[dict[str, Any]] = []
    for rec in rng.sample(base, rng.randint(1, max(1, len(base) // 2))):
        fields = rng.sample(["email", "role", "active"], rng.randint(1, 2))
        change: dict[str, Any] = {"id": rec["id"]}
        for f in fields:
            change[f] = ({"email": f"{rng.choice(PEOPLE)}@{rng.choice(DOMAINS)}",
                          "role": rng.choice(roles), "active": not rec["active"]}[f])
        updates.append(change)
    fresh = [i for i in rng.sample(range(200, 400), rng.randint(1, 3))]
    updates += [record(i) for i in fresh]
    deleted: list[int] = []
    if with_delete:
        touched = {u["id"] for u in updates}
        candidates = [r["id"] for r in base if r["id"] not in touched]
        deleted = rng.sample(candidates, min(len(candidates), rng.randint(1, 2)))
        updates += [{"id": i, "deleted": True} for i in deleted]
    rng.shuffle(updates)
    merged = {r["id"]: dict(r) for r in base}
    for u in updates:
        if u.get("deleted"):
            merged.pop(u["id"], None)
        else:
            merged.setdefault(u["id"], {}).update(u)
    want = [merged[i] for i in sorted(merged)]
    a, b, out = f"data/{entity}.json", f"data/{entity}_updates.json", f"out/{entity}.json"
    delete_rule = (' An update of the form `{"id": N, "deleted": true}` removes record N '
                   "instead." if with_delete else "")
    instruction = (
        f"{a} is a JSON list of records with a unique integer `id`; {b} is a JSON list of "
        f"updates. Merge them into {out}: a JSON list of records sorted by `id` ascending. An "
        f"update whose `id` exists in {a} overrides just the fields it contains (the other "
        f"fields keep their value); an update with a new `id` is a new record.{delete_rule}")

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        data = load_json(ws, out)
        ok = isinstance(data, list) and all(isinstance(r, dict) and isinstance(r.get("id"), int)
                                            for r in data)
        got_ids = [r.get("id") for r in data] if ok else None
        by_id = {r.get("id"): r for r in data} if ok else {}
        return {"valid_json": flag(data is not MISSING and ok),
                "ids": overlap(got_ids, [r["id"] for r in want]),
                "records": sum(by_id.get(r["id"]) == r for r in want) / max(len(want), len(by_id))
                if ok else 0.0,
                "sorted": flag(ok and got_ids == sorted(r["id"] for r in want))}

    return Draft(instruction=instruction, files={a: dumps(base), b: dumps(updates)},
                 check=check, plan=[read(a), read(b), write(out, dumps(want)), read(out)],
                 params={"entity": entity, "base": base, "updates": updates},
                 difficulty=2 if with_delete else 1)
