"""Orthogonal-array designs: the smallest strength-t OA over a space, found with OApackage.

The paper trains on a strength-2 orthogonal array: 18 of the 243 harnesses in which every
level pair of every factor pair occurs equally often (twice). There are exactly 10
non-isomorphic OA(18, 3^5, 2); which one is used matters for the pairing schedule:

- ``variant="min_aberration"`` (default): the smallest generalized word-length pattern,
  compared lexicographically from A_1 — for 3^5 it is GWLP (A3, A4, A5) = (5, 7.5, 0), the
  design from any 5 of the six 3-level columns of L18 that leave out the second column. Its
  runs are far apart: every run's nearest other runs are at Hamming distance 3, ten of them.
- ``variant="local"``: the smallest mean nearest-neighbour Hamming distance (ties: GWLP, then
  the sorted rows). For 3^5 it is GWLP (6.5, 4.5, 1.5): every run has exactly one other run at
  distance 2, so Hamming pairing has a unique partner.

Mapping. OApackage wants columns ordered by decreasing level count, so OA column ``j`` is
factor ``order[j]`` where ``order`` sorts the factors by (−levels, factor position) — for 3^5
column j is simply factor j (system_prompt, tool_interface, observation, context, workflow).
Symbol ``v`` of a column is level index ``v`` of its factor. Rows are sorted lexicographically
by level indices, so the design is the same in every process.

Search. Candidate run sizes N are the multiples of the lcm of the level-count products of every
t factors (a strength-t OA needs each of them to divide N), from the Rao bound up to the full
factorial, which is always an OA and is used when the search gets there. For each N a worker
process extends OApackage's root array column by column, depth first, keeping only
lexicographically minimal (LMC) arrays, i.e. one per isomorphism class: first a *complete*
search (which also proves that no array exists), then, if that is slow, a *quick* one that
caps the extensions per array. The worker is killed when the time budget runs out — a single
OApackage call can run for minutes — and the error lists the run sizes that satisfy the
divisibility conditions. Results are deterministic as long as the searches finish within the
budget; ``params["search"]`` records which search produced a design, and saved designs store
their rows, so loading one never searches again.

Table. The designs in use — the paper's 3^5 (and the micro space's, also 3^5) in both variants,
strength 3 over 3^5, the mixed 3x3x4x3x3 space, and the 3-level arrays the product construction
needs — are looked up in :data:`~harnessgrid.designs.known_arrays.KNOWN_ARRAYS` first, with no
time budget: each is what the search returns given all the time it needs (a test re-runs it).
Only spaces the table does not cover are searched, so only they can run out of time.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import time
import warnings
from collections.abc import Iterator, Sequence
from itertools import combinations
from multiprocessing.connection import Connection
from typing import Literal, cast, get_args

from pydantic import JsonValue

from harnessgrid.designs.design import (
    REBUILD,
    Design,
    gwlp,
    pair_distances,
    param_int,
    rao_bound,
)
from harnessgrid.designs.known_arrays import KNOWN_ARRAYS
from harnessgrid.errors import ConfigError
from harnessgrid.space import FactorSpace

Variant = Literal["min_aberration", "local"]
Rows = tuple[tuple[int, ...], ...]

#: Non-isomorphic arrays collected per run size before the variant picks one (3^5 has 10).
POOL = 64
#: Arrays expanded by one search before it stops without proving anything.
NODE_BUDGET = 20_000
#: Extensions kept per array by the quick search.
QUICK_WIDTH = 16
#: Seconds the complete search may take per run size before the quick search gets a turn.
COMPLETE_SLICE_S = 5.0

_cache: dict[tuple[tuple[int, ...], int, str, int | None],
             tuple[Rows, dict[str, JsonValue]]] = {}


def candidate_run_sizes(sizes: Sequence[int], strength: int = 2) -> list[int]:
    """Run sizes N, ascending, that satisfy the necessary conditions for an OA(N, sizes, t):
    N is a multiple of the product of the level counts of every t factors, at least the Rao
    bound, at most the full factorial. For (3, 3, 4, 3, 3) and t = 2: 36, 72, ..., 324."""
    t = min(strength, len(sizes))
    step = 1
    for cols in combinations(sizes, t):
        step = math.lcm(step, math.prod(cols))
    low = rao_bound(sizes, t)
    return [n for n in range(step, math.prod(sizes) + 1, step) if n >= low]


def orthogonal_design(space: FactorSpace, strength: int = 2,
                      variant: Variant = "min_aberration", *, max_runs: int | None = None,
                      time_budget_s: float = 15.0) -> Design:
    """The smallest strength-``strength`` orthogonal array over ``space`` as a design.

    ``max_runs`` caps the run size (an error lists the run sizes that would work);
    ``time_budget_s`` bounds the search, which only runs for level counts, strengths and
    variants the table of known arrays does not cover (the paper's 3^5 is in it, so it never
    times out).
    """
    if variant not in get_args(Variant):
        raise ConfigError(f"unknown orthogonal-array variant {variant!r}",
                          hint="use min_aberration (the paper's) or local")
    k = len(space.sizes)
    if not 1 <= strength <= k:
        raise ConfigError(f"strength {strength} is impossible with {k} factors",
                          hint=f"choose a strength from 1 to {k}; the paper uses 2")
    params: dict[str, JsonValue] = {"strength": strength, "variant": variant}
    if max_runs is not None:
        params["max_runs"] = max_runs
    key = (space.sizes, strength, variant, max_runs)
    if key not in _cache:
        _cache[key] = _find(space.sizes, strength, variant, max_runs, time_budget_s)
    rows, info = _cache[key]
    return Design(space=space, configs=tuple(space.config(r) for r in rows), kind="orthogonal",
                  params={**params, "runs": len(rows), **info})


def _find(sizes: tuple[int, ...], t: int, variant: Variant, max_runs: int | None,
          budget_s: float) -> tuple[Rows, dict[str, JsonValue]]:
    """Rows of the chosen OA and how it was found; ConfigError when none was found.

    Run sizes are tried in increasing order. For mixed levels the *product* of OAs of the
    equal-level factor groups (e.g. OA(9, 3^4, 2) × the 4 levels of the fifth factor = 36 runs)
    is an OA too; it bounds the search and is used when the search at its size finds nothing
    in time. A run size whose search ran out of time is *unresolved*: larger sizes are still
    tried (the design records the unresolved ones), but the full factorial is only returned
    when every smaller size is proven impossible — it is rarely what an OA request wants.
    """
    if t == 1:  # run i at level i mod s of every factor: balanced, lcm(s) runs, no repeats
        n = math.lcm(*sizes)
        if max_runs is None or n <= max_runs:
            return tuple(sorted(tuple(i % s for s in sizes) for i in range(n))), {
                "search": "cyclic"}
    known = KNOWN_ARRAYS.get((sizes, t, variant))
    if known is not None and (max_runs is None or len(known) <= max_runs):
        return known, {"search": "table"}
    candidates = candidate_run_sizes(sizes, t)
    full = math.prod(sizes)
    order = sorted(range(len(sizes)), key=lambda f: (-sizes[f], f))
    sorted_sizes = tuple(sizes[f] for f in order)
    deadline = time.monotonic() + budget_s
    product = _product_array(sizes, t, deadline) if len(set(sizes)) > 1 else None
    none_exist: list[int] = []
    unresolved: list[int] = []
    for n in candidates:
        if max_runs is not None and n > max_runs:
            break
        if n == full:
            if unresolved:
                break
            return _full_factorial(sizes), {"search": "full_factorial"}
        arrays, search, proven = _search(sorted_sizes, n, t, deadline,
                                         quick=product is None or n < len(product))
        info: dict[str, JsonValue] = {"search": search}
        if unresolved:
            info["unresolved_run_sizes"] = list(unresolved)
        if arrays:
            rows = min((_to_space_rows(a, order) for a in arrays),
                       key=lambda r: _rank(r, sizes, variant))
            return rows, info
        if product is not None and n == len(product):
            return product, {**info, "search": "product"}
        (none_exist if proven else unresolved).append(n)
    raise _not_found(sizes, t, candidates, none_exist, max_runs, budget_s)


def _product_array(sizes: tuple[int, ...], t: int, deadline: float) -> Rows | None:
    """All combinations of the runs of one OA per group of equal-level factors (a group of at
    most t factors is its full factorial). A t-column projection then spreads over independent
    balanced groups, so the product has strength t. ``None`` if a group's OA was not found."""
    from itertools import product

    groups: dict[int, list[int]] = {}
    for f, s in enumerate(sizes):
        groups.setdefault(s, []).append(f)
    parts: list[tuple[list[int], Rows]] = []
    for s, factors in sorted(groups.items()):
        if len(factors) <= t:
            parts.append((factors, _full_factorial((s,) * len(factors))))
            continue
        try:
            rows, _ = _find((s,) * len(factors), t, "min_aberration", None,
                            max(deadline - time.monotonic(), 0.0))
        except ConfigError:
            return None
        parts.append((factors, rows))
    out = []
    for combo in product(*(rows for _, rows in parts)):
        row = [0] * len(sizes)
        for (factors, _), group_row in zip(parts, combo, strict=True):
            for f, level in zip(factors, group_row, strict=True):
                row[f] = level
        out.append(tuple(row))
    return tuple(sorted(out))


def _not_found(sizes: tuple[int, ...], t: int, candidates: list[int], none_exist: list[int],
               max_runs: int | None, budget_s: float) -> ConfigError:
    open_sizes = [n for n in candidates if n not in none_exist]
    capped = max_runs is not None and all(n > max_runs for n in open_sizes)
    limit = f"with at most {max_runs} runs" if capped else f"within {budget_s:g}s"
    proven = f"; none exists with {none_exist} runs" if none_exist else ""
    more = ("allow more runs (max_runs)" if capped else
            "the table of known arrays does not hold these level counts with this strength and "
            "variant, so they were searched, and the search is slower on a busy machine: allow "
            "it more time (time_budget_s) or more runs (max_runs)")
    return ConfigError(
        f"no strength-{t} orthogonal array over level counts {sizes} was found {limit}{proven}",
        hint=f"run sizes that satisfy the divisibility conditions: {open_sizes[:12]}"
             f"{' ...' if len(open_sizes) > 12 else ''} (full factorial {math.prod(sizes)}); "
             f"{more}, or use `--kind nearly-orthogonal --runs N`, `--kind random --n N` or "
             "`--kind full`")


def _full_factorial(sizes: tuple[int, ...]) -> Rows:
    from itertools import product

    return tuple(product(*(range(s) for s in sizes)))


def _to_space_rows(array: list[list[int]], order: list[int]) -> Rows:
    """OA columns (oapackage order) back to factor order; rows sorted."""
    back = [order.index(f) for f in range(len(order))]
    return tuple(sorted(tuple(row[c] for c in back) for row in array))


def _rank(rows: Rows, sizes: tuple[int, ...], variant: Variant) -> tuple[object, ...]:
    """Smaller is better. Repeated runs waste rollouts, so arrays without them come first;
    the rows themselves end every tie, so the choice never depends on enumeration order."""
    repeated = len(set(rows)) < len(rows)
    pattern = tuple(gwlp(rows, sizes)[1:])
    if variant == "local":
        return (repeated, pair_distances(rows, sizes).mean_nearest, pattern, rows)
    return (repeated, pattern, rows)


# -- the search, in a worker process that can be killed ----------------------------------------
def _search(sizes: tuple[int, ...], n: int, t: int, deadline: float,
            quick: bool) -> tuple[list[list[list[int]]], str, bool]:
    """(arrays found, which search found them, whether no array of ``n`` runs can exist).
    The quick search runs only when ``quick`` (no fallback array of this size is at hand)."""
    complete_until = min(deadline, time.monotonic() + COMPLETE_SLICE_S)
    arrays, status = _run_worker(sizes, n, t, 0, complete_until)
    if arrays or status == "exhausted" or not quick:
        return arrays, "complete", status == "exhausted"
    arrays, status = _run_worker(sizes, n, t, QUICK_WIDTH, deadline)
    return arrays, "quick", False


def _run_worker(sizes: tuple[int, ...], n: int, t: int, width: int,
                deadline: float) -> tuple[list[list[list[int]]], str]:
    """Arrays streamed back by a worker until it finishes or ``deadline`` passes (then killed).
    Status: ``exhausted`` (all found), ``budget`` (pool or node budget hit), ``timeout``,
    ``error``."""
    if time.monotonic() >= deadline:
        return [], "timeout"
    forking = "fork" in mp.get_all_start_methods()  # fast: OApackage is already imported
    ctx = mp.get_context("fork") if forking else mp.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker, args=(sender, sizes, n, t, width), daemon=True)
    try:
        with warnings.catch_warnings():  # Python 3.12+ warns about fork with threads running
            warnings.simplefilter("ignore", DeprecationWarning)
            proc.start()
    except AssertionError:  # we are a daemonic process ourselves: no children allowed
        sender.close()
        receiver.close()
        return _run_here(sizes, n, t, width, deadline)
    sender.close()
    arrays: list[list[list[int]]] = []
    status = "timeout"
    try:
        while (left := deadline - time.monotonic()) > 0 and receiver.poll(left):
            kind, payload = receiver.recv()
            if kind != "array":
                status = kind
                break
            arrays.append(payload)
    except EOFError:
        status = "error"
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        receiver.close()
    return arrays, status


def _run_here(sizes: tuple[int, ...], n: int, t: int, width: int,
              deadline: float) -> tuple[list[list[list[int]]], str]:
    """In-process fallback of :func:`_run_worker`; the deadline is checked between arrays
    only, so one slow OApackage call can overrun it."""
    arrays: list[list[list[int]]] = []
    for kind, payload in _depth_first(sizes, n, t, width):
        if kind != "array":
            return arrays, kind
        arrays.append(cast("list[list[int]]", payload))
        if time.monotonic() > deadline:
            return arrays, "timeout"
    return arrays, "error"


def _worker(conn: Connection, sizes: tuple[int, ...], n: int, t: int, width: int) -> None:
    """Entry point of the worker: OApackage prints to the C streams, so silence them."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        for message in _depth_first(sizes, n, t, width):
            conn.send(message)
    except Exception as exc:  # noqa: BLE001 - any failure (e.g. "number of extensions too
        # large") must reach the parent as a status, never as a hung pipe
        conn.send(("error", repr(exc)))
    finally:
        conn.close()


def _depth_first(sizes: tuple[int, ...], n: int, t: int,
                 width: int) -> Iterator[tuple[str, object]]:
    """LMC arrays with all columns, in depth-first order. ``width`` > 0 caps the extensions
    generated per array (quick, incomplete); 0 generates them all (complete). Every column
    prefix of an LMC array is LMC, so the complete search finds every isomorphism class."""
    import numpy as np
    import oapackage

    k = len(sizes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arrayclass = oapackage.arraydata_t(list(sizes), n, t, k)
    options = oapackage.OAextend(arrayclass)
    options.checkarrays = 1
    options.check_maximal = width
    stack = [arrayclass.create_root()]
    found = expanded = 0
    while stack:
        array = stack.pop()
        if array.n_columns == k:
            yield "array", np.array(array).tolist()
            found += 1
            if found >= POOL:
                yield "budget", None
                return
            continue
        if expanded >= NODE_BUDGET:
            yield "budget", None
            return
        expanded += 1
        extensions = oapackage.arraylist_t()
        oapackage.extend_array(array, arrayclass, array.n_columns, extensions, options)
        stack.extend(reversed(list(extensions)))
    yield ("exhausted" if width == 0 else "budget"), None


def _rebuild(space: FactorSpace, p: dict[str, JsonValue]) -> Design:
    max_runs = p.get("max_runs")
    return orthogonal_design(space, param_int(p["strength"]), variant=cast(Variant, p["variant"]),
                             max_runs=None if max_runs is None else param_int(max_runs))


REBUILD["orthogonal"] = _rebuild
