"""State-tracking families: a TODO list of dependent file operations, a ledger applied file by
file, an inventory updated by a list of moves.

In each one the right result depends on the *order* and on values carried from earlier steps
(a copy taken before a later append, "the same quantity as before", a balance that decides
whether a withdrawal is rejected), so an agent that loses track of the state gets it wrong.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from harnessgrid.models import Action

from .base import Draft, family
from .common import (
    CITIES,
    PRODUCTS,
    WORDS,
    dumps,
    edit,
    flag,
    head,
    lines,
    load_json,
    ls,
    norm,
    pick,
    positional,
    q,
    read,
    sh,
    text,
    write,
)


@family("todo_checklist", tags=("state_tracking", "workflow_compliance"), difficulty=(1, 3),
        category="workflow", summary="carry out a TODO list of dependent file operations in "
        "order, ticking each item", long_share=0.25)
def todo_checklist(rng: random.Random, long: bool) -> Draft:
    words = list(WORDS)
    rng.shuffle(words)
    fresh = iter(words)
    state: dict[str, list[str]] = {}
    files: dict[str, str] = {}
    for _ in range(rng.randint(1, 2)):
        path = f"notes/{next(fresh)}.txt"
        state[path] = [f"{rng.choice(WORDS)} {rng.choice(WORDS)}" for _ in range(rng.randint(1, 3))]
        files[path] = "\n".join(state[path]) + "\n"
    seen = set(state)
    items: list[str] = []
    actions: list[Action] = []
    n_items = rng.randint(7, 8) if long else rng.randint(3, 5)
    while len(items) < n_items:
        existing = sorted(state)
        op = rng.choice(("create", "append", "append", "copy", "count", "replace", "delete",
                         "move") if existing else ("create",))
        line = f"{rng.choice(WORDS)} {rng.randint(10, 99)}"
        if op == "create":
            path = f"notes/{next(fresh)}.txt"
            state[path] = [line]
            items.append(f"Create {path} containing the single line `{line}`.")
            actions.append(write(path, line + "\n"))
        elif op == "append":
            path = rng.choice(existing)
            state[path].append(line)
            items.append(f"Append the line `{line}` to {path}.")
            actions.append(sh(f"printf '%s\\n' {q(line)} >> {path}"))
        elif op in ("copy", "move"):
            src = rng.choice(existing)
            dst = f"{'archive' if op == 'copy' else 'done'}/{next(fresh)}.txt"
            state[dst] = list(state[src])
            if op == "move":
                del state[src]
            verb = "Copy" if op == "copy" else "Move"
            items.append(f"{verb} {src} to {dst}.")
            actions.append(sh(f"mkdir -p {dst.split('/')[0]} && "
                              f"{'cp' if op == 'copy' else 'mv'} {src} {dst}"))
        elif op == "count":
            src = rng.choice(existing)
            dst = f"counts/{next(fresh)}.txt"
            state[dst] = [str(len(state[src]))]
            items.append(f"Write the number of lines {src} has at this point (just the number) "
                         f"to {dst}.")
            actions.append(write(dst, f"{len(state[src])}\n"))
        elif op == "replace":
            path = rng.choice(existing)
            tokens = sorted({t for ln in state[path] for t in ln.split() if t.isalpha()})
            if not tokens:
                continue
            old = rng.choice(tokens)
            new = next(fresh)
            state[path] = [ln.replace(old, new) for ln in state[path]]
            items.append(f"In {path}, replace every occurrence of `{old}` with `{new}`.")
            actions.append(sh(f"sed -i 's/{old}/{new}/g' {path}"))
        else:  # delete
            if len(existing) < 2:
                continue
            path = rng.choice(existing)
            del state[path]
            items.append(f"Delete {path}.")
            actions.append(sh(f"rm {path}"))
        seen.update(state)
    head = ("# TODO\n\nWork through the items in order. When an item is done, tick it (change "
            "its `- [ ]` to `- [x]`) before you start the next one.\n\n")
    files["TODO.md"] = head + "".join(f"- [ ] {k}. {t}\n" for k, t in enumerate(items, 1))
    done_todo = head + "".join(f"- [x] {k}. {t}\n" for k, t in enumerate(items, 1))
    instruction = ("Carry out TODO.md: do its items in the order listed, exactly as written, and "
                   "tick each one in TODO.md as soon as it is done. Do not change anything else "
                   "in TODO.md and create no files the items do not ask for.")
    expected = {p: "\n".join(state[p]) if p in state else None for p in sorted(seen)}

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        ok = sum((norm(text(ws, p)) == want) if want is not None else not (ws / p).exists()
                 for p, want in expected.items())
        return {"files": ok / len(expected), "todo_ticked": flag(norm(text(ws, "TODO.md"))
                                                                == norm(done_todo))}

    plan = [read("TODO.md")]
    for k, action in enumerate(actions, 1):
        plan += [action, edit("TODO.md", f"- [ ] {k}. ", f"- [x] {k}. ")]
    return Draft(instruction=instruction, files=files, check=check, plan=plan,
                 params={"files": sorted(files.items())},
                 difficulty=3 if long else (2 if n_items > 3 else 1))


@family("running_ledger", tags=("state_tracking", "observation_reading"), difficulty=(1, 3),
        category="data", summary="apply transaction files in date order to a balance with a "
        "rejection rule; record the balance after each file", long_share=0.25)
def running_ledger(rng: random.Random, long: bool) -> Draft:
    balance = rng.randint(50, 400)
    files = {"account.txt": f"opening balance: {balance}\n"}
    n_files = rng.randint(8, 10) if long else rng.randint(3, 5)
    days = sorted(rng.sample(range(1, 29), n_files))
    month = rng.randint(1, 12)
    rows, rejected = [], 0
    for day in days:
        path = f"tx/2024-{month:02d}-{day:02d}.txt"
        body = []
        for _ in range(rng.randint(2, 5)):
            kind = rng.choices(("deposit", "withdraw", "fee"), (3, 4, 1))[0]
            amount = (rng.randint(1, 15) if kind == "fee" else
                      rng.randint(10, max(20, int(balance * 1.5))) if kind == "withdraw"
                      else rng.randint(10, 300))
            body.append(f"{kind} {amount}")
            if kind == "deposit":
                balance += amount
            elif kind == "fee":
                balance -= amount
            elif amount > balance:
                rejected += 1
            else:
                balance -= amount
        files[path] = "\n".join(body) + "\n"
        rows.append(f"{path.split('/')[1]},{balance}")
    instruction = (
        "account.txt holds an opening balance; each file in tx/ holds transactions, one per "
        "line: `deposit N` adds N, `fee N` subtracts N (always, even if the balance goes below "
        "zero), `withdraw N` subtracts N unless N is larger than the current balance, in which "
        "case it is rejected and has no effect. Apply the files in order of their names (they "
        "are dates) and their lines top to bottom. Write ledger.csv with the header "
        "`file,balance` and one row per file (file name without the tx/ folder, e.g. "
        "2024-01-05.txt) giving the balance after that file; write the number of rejected "
        "withdrawals (just the number) to rejected.txt.")

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        got = lines(ws, "ledger.csv")
        return {"header": flag(head(got) == "file,balance"),
                "balances": positional([g.strip() for g in got[1:]] if got else None, rows),
                "rejected": flag((text(ws, "rejected.txt") or "").strip() == str(rejected))}

    tx = sorted(p for p in files if p.startswith("tx/"))
    plan = [read("account.txt"), ls("tx"), *(read(p) for p in tx),
            write("ledger.csv", "file,balance\n" + "".join(r + "\n" for r in rows)),
            write("rejected.txt", f"{rejected}\n")]
    return Draft(instruction=instruction, files=files, check=check, plan=plan,
                 params={"files": sorted(files.items())},
                 difficulty=3 if long else (2 if rejected else 1))


@family("inventory_moves", tags=("state_tracking",), difficulty=(1, 2), category="data",
        summary="apply receive/move/ship lines (incl. 'same quantity', 'all') to a JSON "
        "inventory in place")
def inventory_moves(rng: random.Random, long: bool) -> Draft:
    sites = pick(rng, CITIES, rng.randint(2, 4))
    items = pick(rng, PRODUCTS, rng.randint(3, 5))
    inv = {s: {i: rng.randint(1, 40) for i in rng.sample(items, rng.randint(1, len(items)))}
           for s in sites}
    start = {s: dict(v) for s, v in inv.items()}
    hard = rng.random() < 0.5
    moves: list[str] = []
    last_qty = 0
    n_moves = rng.randint(6, 12 if hard else 8)
    while len(moves) < n_moves:
        stocked = [(s, i) for s in sites for i, n in sorted(inv[s].items()) if n > 0]
        op = rng.choice(("receive", "move", "move", "ship", "same", "all") if hard
                        else ("receive", "move", "move", "ship"))
        if op == "receive" or not stocked:
            site, item, qty = rng.choice(sites), rng.choice(items), rng.randint(1, 30)
            inv[site][item] = inv[site].get(item, 0) + qty
            moves.append(f"receive {qty} {item} at {site}")
        elif op in ("move", "same"):
            site, item = rng.choice(stocked)
            dest = rng.choice([s for s in sites if s != site])
            if op == "same":
                if not 0 < last_qty <= inv[site][item]:
                    continue
                qty = last_qty
                moves.append(f"move the same quantity of {item} from {site} to {dest}")
            else:
                qty = rng.randint(1, inv[site][item])
                moves.append(f"move {qty} {item} from {site} to {dest}")
            inv[site][item] -= qty
            inv[dest][item] = inv[dest].get(item, 0) + qty
        elif op == "ship":
            site, item = rng.choice(stocked)
            qty = rng.randint(1, inv[site][item])
            inv[site][item] -= qty
            moves.append(f"ship {qty} {item} from {site}")
        else:
            site, item = rng.choice(stocked)
            qty = inv[site][item]
            inv[site][item] = 0
            moves.append(f"ship all {item} from {site}")
        last_qty = qty
    want = {s: {i: n for i, n in sorted(v.items()) if n > 0} for s, v in inv.items()}
    same_rule = (" `move the same quantity of ITEM from A to B` moves as many units as the "
                 "line before it did (received, moved or shipped); `ship all ITEM from A` "
                 "ships every unit A has." if hard else "")
    instruction = (
        "inventory.json maps each site (under `sites`) to its stock: item -> quantity. Apply "
        "moves.txt line by line, top to bottom: `receive N ITEM at A` adds N at A, `move N "
        "ITEM from A to B` takes N from A and adds them at B, `ship N ITEM from A` removes N "
        f"from A.{same_rule} Then rewrite inventory.json with the resulting stock in the same "
        "structure, leaving out items whose quantity is 0 (keep every site, even an empty "
        "one). Leave moves.txt unchanged.")
    original_moves = "\n".join(moves) + "\n"

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        data = load_json(ws, "inventory.json")
        got = data.get("sites") if isinstance(data, dict) else None
        if not isinstance(got, dict):
            got = None
        return {"valid_json": flag(got is not None),
                "sites": sum(got.get(s) == v for s, v in want.items()) / len(want)
                if got is not None else 0.0,
                "no_extra_sites": flag(got is not None and set(got) == set(want)),
                "moves_unchanged": flag(text(ws, "moves.txt") == original_moves)}

    return Draft(instruction=instruction,
                 files={"inventory.json": dumps({"sites": start}), "moves.txt": original_moves},
                 check=check,
                 plan=[read("inventory.json"), read("moves.txt"),
                       write("inventory.json", dumps({"sites": want})), read("inventory.json")],
                 params={"start": start, "moves": moves}, difficulty=2 if hard else 1)
