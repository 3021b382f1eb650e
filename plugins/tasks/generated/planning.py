"""Planning families: order jobs by their dependencies; run a small multi-stage data pipeline.

Both need the whole picture before the first output can be written (all dependency files, all
order files and the customer table), and later outputs derive from earlier ones.
"""

from __future__ import annotations

import heapq
import json
import random
from pathlib import Path
from typing import Any

from .base import Draft, family
from .common import (
    PEOPLE,
    SURNAMES,
    WORDS,
    csv_text,
    dumps,
    flag,
    lines,
    load_json,
    ls,
    pick,
    positional,
    read,
    write,
)


def _topo(jobs: list[str], deps: dict[str, set[str]]) -> list[str]:
    """Kahn's algorithm taking the alphabetically first ready job: a unique answer."""
    waiting = {j: set(deps[j]) for j in jobs}
    ready = [j for j in jobs if not waiting[j]]
    heapq.heapify(ready)
    order = []
    while ready:
        job = heapq.heappop(ready)
        order.append(job)
        for other in sorted(jobs):
            if job in waiting[other]:
                waiting[other].discard(job)
                if not waiting[other]:
                    heapq.heappush(ready, other)
    return order


@family("dependency_order", tags=("planning", "observation_reading"), difficulty=(1, 2),
        category="planning", summary="topologically order jobs from one or two dependency files "
        "(alphabetical tie-break)")
def dependency_order(rng: random.Random, long: bool) -> Draft:
    hidden = pick(rng, WORDS, rng.randint(6, 12))  # a valid order, never shown
    deps: dict[str, set[str]] = {j: set() for j in hidden}
    for i, job in enumerate(hidden[1:], 1):
        deps[job] = set(rng.sample(hidden[:i], min(i, rng.randint(0, 2))))
    hard = rng.random() < 0.5
    extra: dict[str, set[str]] = {}
    if hard:
        for job in rng.sample(hidden[2:], min(len(hidden) - 2, rng.randint(1, 3))):
            i = hidden.index(job)
            new = set(rng.sample(hidden[:i], 1)) - deps[job]
            if new:
                extra[job] = new
    listed = list(hidden)
    rng.shuffle(listed)
    main = "# job: the jobs it depends on\n" + "".join(
        f"{j}: {' '.join(sorted(deps[j]))}".rstrip() + "\n" for j in listed)
    files = {"pipeline.txt": main}
    if extra:
        files["pipeline.local.txt"] = ("# extra dependencies, in addition to pipeline.txt\n"
                                       + "".join(f"{j}: {' '.join(sorted(d))}\n"
                                                 for j, d in sorted(extra.items())))
    all_deps = {j: deps[j] | extra.get(j, set()) for j in hidden}
    want = _topo(sorted(hidden), all_deps)
    scope = ("pipeline.txt and pipeline.local.txt (which adds dependencies to the same jobs) "
             "list" if extra else "pipeline.txt lists")
    instruction = (
        f"{scope} jobs as `job: dependency dependency ...`. Write plan/order.txt with "
        f"every job exactly once, one per line, so that each job comes after all of its "
        f"dependencies; whenever several jobs could come next, take the alphabetically first "
        f"one.")

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        got = [g.strip() for g in lines(ws, "plan/order.txt") or []]
        pos = {j: i for i, j in enumerate(got)}
        valid = (sorted(got) == sorted(hidden) and
                 all(pos[d] < pos[j] for j in hidden for d in all_deps[j]))
        return {"valid_order": flag(valid), "tie_breaks": positional(got, want)}

    return Draft(instruction=instruction, files=files, check=check,
                 plan=[*(read(p) for p in sorted(files)), write("plan/order.txt",
                                                               "\n".join(want) + "\n")],
                 params={"files": sorted(files.items())}, difficulty=2 if extra else 1)


_TIERS = ("bronze", "silver", "gold", "platinum")


@family("pipeline_report", tags=("planning", "state_tracking"), difficulty=(2, 3),
        category="data", summary="combine JSONL order files with a customer table into three "
        "or four dependent reports", long_share=0.3)
def pipeline_report(rng: random.Random, long: bool) -> Draft:
    n_customers = rng.randint(4, 8)
    names: list[str] = []
    while len(names) < n_customers:
        name = f"{rng.choice(PEOPLE).title()} {rng.choice(SURNAMES).title()}"
        if name not in names:
            names.append(name)
    ids = rng.sample(range(100, 999), n_customers)
    customers = [[str(i), n, rng.choice(_TIERS)] for i, n in zip(ids, names, strict=True)]
    files = {"customers.csv": csv_text([["id", "name", "tier"], *customers])}
    n_files = rng.randint(5, 7) if long else rng.randint(2, 3)
    order_ids = iter(sorted(rng.sample(range(1000, 9999), n_files * 6)))
    orders: list[dict[str, Any]] = []
    bodies: dict[str, list[dict[str, Any]]] = {}
    for k in range(n_files):
        body = bodies[f"raw/orders-{k + 1:02d}.jsonl"] = []
        for _ in range(rng.randint(3, 6)):
            rec = {"order": next(order_ids), "customer": rng.choice(ids),
                   "qty": rng.randint(1, 9), "price": rng.randint(2, 120),
                   "status": rng.choices(("paid", "cancelled"), (5, 1))[0]}
            body.append(rec)
            orders.append(rec)
        rng.shuffle(body)
    if all(o["status"] == "cancelled" for o in orders):  # at least one real order
        orders[0]["status"] = "paid"
    for path, body in bodies.items():
        files[path] = "".join(json.dumps(r) + "\n" for r in body)
    by_id = {int(c[0]): c for c in customers}
    paid = sorted((o for o in orders if o["status"] == "paid"), key=lambda o: o["order"])
    totals: dict[str, list[int]] = {}
    for o in paid:
        entry = totals.setdefault(by_id[o["customer"]][1], [0, 0])
        entry[0] += 1
        entry[1] += o["qty"] * o["price"]
    ranking = sorted(totals.items(), key=lambda kv: (-kv[1][1], kv[0]))
    want = {
        "out/orders.csv": ["order,customer,total", *(
            f"{o['order']},{by_id[o['customer']][1]},{o['qty'] * o['price']}" for o in paid)],
        "out/customers.csv": ["customer,orders,total",
                              *(f"{n},{k},{t}" for n, (k, t) in ranking)],
    }
    summary = {"orders": len(paid), "revenue": sum(o["qty"] * o["price"] for o in paid),
               "top_customer": ranking[0][0]}
    tiers: dict[str, int] = {}
    for o in paid:
        tier = by_id[o["customer"]][2]
        tiers[tier] = tiers.get(tier, 0) + o["qty"] * o["price"]
    if long:
        want["out/tiers.csv"] = ["tier,total", *(f"{t},{v}" for t, v in sorted(tiers.items()))]
    tier_text = (" 4) out/tiers.csv: header `tier,total`, one row per tier that has paid "
                 "orders (the customer's tier from customers.csv), sorted by tier name." if long
                 else "")
    instruction = (
        "raw/ holds order files in JSON Lines (one JSON object per line: order, customer id, "
        "qty, price, status); customers.csv maps customer ids to names and tiers. Only orders "
        "with status `paid` count; an order's total is qty * price. Write: 1) out/orders.csv: "
        "header `order,customer,total`, one row per paid order from all files, with the "
        "customer's name, sorted by order number; 2) out/customers.csv: header "
        "`customer,orders,total`, one row per customer with at least one paid order (name, "
        "number of paid orders, sum of their totals), sorted by total, highest first (equal "
        "totals by name); 3) out/summary.json: a JSON object with `orders` (number of paid "
        "orders), `revenue` (sum of all totals) and `top_customer` (the name in the first row "
        f"of out/customers.csv).{tier_text}")

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        scores = {}
        for path, rows in want.items():
            got = [g.strip() for g in lines(ws, path) or []]
            scores[path.split("/")[1].split(".")[0]] = positional(got, rows) if got else 0.0
        data = load_json(ws, "out/summary.json")
        scores["summary"] = flag(data == summary)
        return scores

    raw = sorted(p for p in files if p.startswith("raw/"))
    plan = [ls("raw"), *(read(p) for p in raw), read("customers.csv"),
            *(write(p, "\n".join(rows) + "\n") for p, rows in want.items()),
            write("out/summary.json", dumps(summary)), read("out/summary.json")]
    return Draft(instruction=instruction, files=files, check=check, plan=plan,
                 params={"files": sorted(files.items())}, difficulty=3 if long else 2)
