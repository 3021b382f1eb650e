"""Many concurrent episodes against a model server with a fixed 50 ms latency: turns per second
and host CPU per turn, for the ``litellm:`` and ``openai:`` schemes, in one process and spread
over worker processes (``--workers``). ``openai`` is ``openai:`` through the official SDK
(``transport=sdk``, pinned: ``openai:``'s default ``transport=auto`` would pick the lean client
for this loopback server); ``openai-http`` is ``openai:`` with ``transport=http``, the lean
built-in client, which is what ``transport=auto`` picks here.

The server (this script with ``--serve``) runs in its own process, so its CPU is not counted as
host CPU: an OpenAI-compatible ``/v1/chat/completions`` that answers every request after
``--latency`` seconds with the same reply, one ```` ```bash ```` block running ``echo ok``. Each
turn is therefore one model call plus one command in the episode's sandbox; each episode runs
``--turns`` of them (harness S0-T2-O0-C0-W0: minimal prompt, bash_only, raw observations, full
context, react) and ends at its turn limit. With latency L and C episodes at once the ideal is
C / L turns per second.

Each measured run starts with a warm-up batch (one one-turn episode per concurrency slot: the
client's imports and connection pool, the workers' start-up), then 2 x concurrency (at least 8)
measured episodes; the clock and the CPU counters run from the C-th completion (every slot
busy with a measured episode) to the completion that lets the last episode start - exactly C
episodes run throughout - and the turns counted are those that ended inside that window. Host CPU is the CPU time of the harness
processes (this one, and the workers with ``--workers``), read from ``/proc``; the sandboxes'
own CPU (bwrap, the command server, the command) is shown apart. Every configuration runs once
per round, rounds interleave the configurations, and the figures are medians over rounds;
ratios (openai vs litellm, openai-http vs openai, N workers vs 1) are medians of the per-round
ratios.

``--profile`` adds one cProfile run per scheme in this process at the highest concurrency and
splits its CPU by where the time went: the model client (litellm / openai / httpx / aiohttp),
the sandbox (harnessgrid's sandbox and tools, subprocess), the harness (the rest of
harnessgrid), pydantic, the event loop (asyncio, selectors) and other.

Run from the repository root::

    python benchmarks/concurrency.py [--rounds 3] [--concurrency 1,8,32,64] [--workers 1,2]
        [--schemes litellm,openai,openai-http] [--turns 10] [--latency 0.05] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HARNESS = "S0-T2-O0-C0-W0"
REPLY = "Checking.\n```bash\necho ok\n```"
TICKS = os.sysconf("SC_CLK_TCK")


# -- the model server (its own process) ---------------------------------------------------------


def serve(latency: float) -> None:
    """A minimal HTTP/1.1 keep-alive server answering every POST with the canned completion
    after ``latency`` seconds; prints its port, then serves until killed."""
    counter = iter(range(1, 1 << 62))

    def body() -> bytes:
        n = next(counter)
        return json.dumps({
            "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1_700_000_000,
            "model": "bench", "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                           "message": {"role": "assistant", "content": REPLY}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
        }).encode()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                await reader.readexactly(length)
                await asyncio.sleep(latency)
                data = body()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"connection: keep-alive\r\ncontent-length: "
                             + str(len(data)).encode() + b"\r\n\r\n" + data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
        print(server.sockets[0].getsockname()[1], flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, __file__, "--serve", "--latency", str(latency)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    return proc, f"http://127.0.0.1:{port}/v1"


# -- CPU of the harness processes ---------------------------------------------------------------


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, own CPU s, reaped children's CPU s) of a process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    own = (int(fields[11]) + int(fields[12])) / TICKS
    children = (int(fields[13]) + int(fields[14])) / TICKS
    return int(fields[1]), own, children


def _processes() -> dict[int, tuple[int, float, float]]:
    """Every process's (parent pid, own CPU s, reaped children's CPU s)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                found[int(entry.name)] = stat
    return found


def _is_worker(pid: int) -> bool:
    try:
        return b"multiprocessing" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


#: The model server's pid: a child of this process whose CPU is neither harness nor sandbox.
MODEL_SERVER: list[int] = []


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy (all cores, /proc/stat: not idle or
    iowait): with the per-process figures it shows what no process was charged for."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / TICKS


def cpu_now() -> tuple[float, float, float]:
    """(harness CPU s, sandbox CPU s, model server CPU s) so far. Harness: this process and
    its worker processes. Sandbox: what they reaped (closed sandboxes) plus the live sandboxes
    below them - pooled ones stay up across episodes, so their bwrap, command server and the
    commands it reaped are read from /proc while they run. The model server shares the
    machine's cores, so its CPU is shown too, apart."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = usage.ru_utime + usage.ru_stime
    sandbox = children.ru_utime + children.ru_stime
    me, table = os.getpid(), _processes()
    server = sum(table[pid][1] for pid in MODEL_SERVER if pid in table)
    for pid, (_parent, cpu, reaped) in table.items():
        chain, p, path = 0, pid, [pid]
        while p in table and p != me and chain < 8:
            p, chain = table[p][0], chain + 1
            path.append(p)
        if p != me or pid == me or set(path) & set(MODEL_SERVER):
            continue
        if _is_worker(pid):
            own += cpu
            sandbox += reaped
        else:  # a live sandbox process: its own CPU and its reaped commands'
            sandbox += cpu + reaped
    return own, sandbox, server


# -- one measured run ---------------------------------------------------------------------------


@dataclass
class Run:
    scheme: str
    concurrency: int
    workers: int
    turns: int = 0
    seconds: float = 0.0
    host_cpu: float = 0.0
    sandbox_cpu: float = 0.0
    server_cpu: float = 0.0
    machine_cpu: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.turns / self.seconds

    def ideal(self, latency: float) -> float:
        return self.concurrency / latency


#: ``--schemes`` names: the policy spec and its options (besides the server's URL).
SCHEMES: dict[str, tuple[str, dict[str, Any]]] = {
    "litellm": ("litellm:openai/bench", {}),
    # The official SDK; pinned, as transport=auto picks the lean client for this local server.
    "openai": ("openai:bench", {"transport": "sdk"}),
    "openai-http": ("openai:bench", {"transport": "http"}),  # the lean built-in HTTP client
}


def policy(scheme: str, url: str) -> tuple[str, dict[str, Any]]:
    if scheme not in SCHEMES:
        raise SystemExit(f"unknown scheme {scheme!r}: choose from {', '.join(SCHEMES)}")
    spec, options = SCHEMES[scheme]
    where = {"api_base": url} if scheme == "litellm" else {"base_url": url}
    return spec, {**where, "api_key": "none", "max_retries": 0, **options}


def jobs(scheme: str, url: str, n: int, turns: int) -> list[Any]:
    from harnessgrid.engine.limits import EpisodeLimits
    from harnessgrid.engine.ray_episodes import EpisodeJob

    spec, options = policy(scheme, url)
    limits = EpisodeLimits(max_turns=turns, wall_s=300)
    return [EpisodeJob(harness=HARNESS, suite="examples", task_id="upper", policy=spec,
                       policy_options=options, limits=limits) for _ in range(n)]


def in_process(batch: list[Any], concurrency: int,
               done: Callable[[int, Any], None]) -> None:
    """Run ``batch``, ``concurrency`` at once on one event loop, the way ``run_episodes`` and
    ``eval`` do (:class:`~harnessgrid.engine.executor.LocalExecutor`, pooled sandboxes);
    ``done(index, trajectory)`` is called on the loop as each episode ends."""
    from harnessgrid.engine.executor import LocalExecutor, collect

    _LOOP.run_until_complete(collect(LocalExecutor(concurrency), batch, on_done=done))


#: One event loop for every in-process run, as in a long evaluation: the policies' pooled
#: clients (one per loop) stay open across runs.
_LOOP = asyncio.new_event_loop()


def measure(scheme: str, concurrency: int, workers: int, url: str, turns: int) -> Run:
    from harnessgrid.engine.workers import worker_episodes

    warm = jobs(scheme, url, concurrency, 1)
    real = jobs(scheme, url, max(8, 2 * concurrency), turns)
    batch = warm + real
    run = Run(scheme, concurrency, workers)
    # The window: from the C-th completion (the warm-up done, every slot running a measured
    # episode) to the one that lets the last episode start; throughout it exactly C episodes
    # run. Turns are counted by when they ended (the trajectory's start plus its turns' wall
    # times), not by whole episodes when they complete: episodes started together finish
    # together, and counting all their turns at the end would overstate the rate.
    first, last = concurrency, len(batch) - concurrency
    count = [0]
    marks: list[tuple[float, ...]] = []  # (time, harness, sandbox, server, machine CPU)
    ends: list[tuple[float, Any]] = []  # (when each measured turn ended, the turn)

    def done(index: int, traj: Any) -> None:
        if traj.infra_failure:
            raise SystemExit(f"{scheme} episode failed: {traj.termination}: {traj.error}")
        count[0] += 1
        if count[0] in (first, last):  # read the CPU right here, before the workers stop
            marks.append((time.time(), *cpu_now(), machine_busy()))
        if index >= len(warm):
            clock = traj.started_at
            for turn in traj.turns:
                clock += turn.wall_s
                ends.append((clock, turn))

    if workers == 1:
        in_process(batch, concurrency, done)
    else:
        for index, traj in worker_episodes(batch, workers=workers, concurrency=concurrency):
            done(index, traj)
    (t0, cpu0, sandbox0, server0, all0), (t1, cpu1, sandbox1, server1, all1) = marks
    inside = [turn for when, turn in ends if t0 <= when <= t1]
    run.turns, run.seconds = len(inside), t1 - t0
    run.host_cpu, run.sandbox_cpu = cpu1 - cpu0, sandbox1 - sandbox0
    run.server_cpu, run.machine_cpu = server1 - server0, all1 - all0
    run.parts = {part: sum(getattr(t, part) for t in inside) / max(1, len(inside))
                 for part in ("model_s", "tools_s", "harness_s", "wait_s")}
    return run


# -- the CPU profile split ----------------------------------------------------------------------

BUCKETS = (
    ("model client", ("litellm", "openai", "raw_http", "httpx", "httpcore", "aiohttp", "h11", "anyio",
                      "/ssl.py", "tiktoken", "tokenizers", "yarl", "multidict", "aiohappyeyeballs",
                      "/http/")),
    ("sandbox", ("harnessgrid/sandboxing/", "core/sandboxing/", "/subprocess.py",
                 "/shutil.py", "/tempfile.py")),
    ("pydantic", ("pydantic",)),
    ("event loop", ("/asyncio/", "/selectors.py", "concurrent/futures", "/threading.py",
                    "select.epoll")),
    ("harness", ("harnessgrid", "/work/main/core/", "/work/main/plugins/",
                 "/work/main/evaluation/")),
)


def bucket(filename: str, name: str) -> str | None:
    """The bucket of a function by where it lives; None for generic code (C built-ins, json,
    re, ...), which belongs to whoever called it."""
    for label, needles in BUCKETS:
        if any(n in filename or n in name for n in needles):
            return label
    return None


def profile(scheme: str, concurrency: int, url: str, turns: int) -> dict[str, float]:
    """CPU of the main thread (cProfile with a thread CPU clock), by bucket; generic code is
    charged to the bucket of its callers, in proportion to the time each call site took."""
    batch = jobs(scheme, url, concurrency, 1) + jobs(scheme, url, 2 * concurrency, turns)
    profiler = cProfile.Profile(time.thread_time)
    profiler.enable()
    in_process(batch, concurrency, lambda index, traj: None)
    profiler.disable()
    stats: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    owners: dict[Any, str] = {}

    def owner(func: Any, depth: int = 0) -> str:
        if func in owners:
            return owners[func]
        found = bucket(func[0], func[2])
        if found is None:
            callers = stats.get(func, (0, 0, 0, 0, {}))[4]
            if depth > 8 or not callers:
                found = "other"
            else:  # the caller that spent the most time in it
                top = max(callers.items(), key=lambda kv: kv[1][2])[0]
                found = owner(top, depth + 1)
        owners[func] = found
        return found

    split: dict[str, float] = defaultdict(float)
    for func, (_, _, tottime, _, callers) in stats.items():
        if bucket(func[0], func[2]) is not None or not callers:
            split[owner(func)] += tottime
        else:  # generic code: split over its call sites
            for caller, (_, _, spent, _) in callers.items():
                split[owner(caller)] += spent
    total = sum(split.values()) or 1.0
    return {k: v / total for k, v in sorted(split.items(), key=lambda kv: -kv[1])}


# -- main ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", default="1,8,32,64")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--schemes", default="litellm,openai")
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if args.serve:
        serve(args.latency)
        return
    levels = [int(c) for c in args.concurrency.split(",")]
    workers = [int(w) for w in args.workers.split(",")]
    schemes = args.schemes.split(",")
    server, url = start_server(args.latency)
    MODEL_SERVER.append(server.pid)
    print(f"server {url}, latency {args.latency * 1000:.0f} ms, {args.turns} turns per episode, "
          f"{os.cpu_count()} CPUs, {args.rounds} round(s)", flush=True)
    results: dict[tuple[str, int, int], list[Run]] = defaultdict(list)
    try:
        for r in range(args.rounds):
            for c in levels:
                for w in workers:
                    if w > c:
                        continue
                    for s in schemes:
                        run = measure(s, c, w, url, args.turns)
                        results[s, c, w].append(run)
                        print(f"  round {r + 1}: {s:<11} c={c:<3} workers={w}  "
                              f"{run.rate:7.1f} turns/s  host "
                              f"{1000 * run.host_cpu / run.turns:5.2f} ms/turn  (load average "
                              f"{os.getloadavg()[0]:.1f})", flush=True)
        if results:
            report(results, args.latency, schemes, workers)
        if args.profile:
            for s in schemes:
                split = profile(s, max(levels), url, args.turns)
                print(f"\nCPU profile split, {s}, c={max(levels)}, one process (cProfile "
                      "self time): " + ", ".join(f"{k} {100 * v:.0f} %"
                                                 for k, v in split.items()))
    finally:
        server.kill()
        server.wait()


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(results: dict[tuple[str, int, int], list[Run]], latency: float,
           schemes: list[str], workers: list[int]) -> None:
    print("\nmedians over rounds; host = CPU of the harness processes per turn, sandbox = the "
          "sandboxes' own CPU per turn, server = the model server's (same cores), machine = all "
          "CPU the machine spent per turn, charged to a process or not; split = means per turn "
          "of the trajectories' parts (ms)")
    print(f"{'scheme':<12}{'c':>4}{'workers':>8}{'turns/s':>9}{'ideal':>7}{'% ideal':>9}"
          f"{'host ms':>9}{'sandbox ms':>11}{'server ms':>10}{'machine ms':>11}"
          "   model / tools / harness / wait ms")
    for (s, c, w), runs in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        rate = med([r.rate for r in runs])
        parts = {k: med([r.parts[k] for r in runs]) * 1000 for k in runs[0].parts}
        print(f"{s:<12}{c:>4}{w:>8}{rate:>9.1f}{c / latency:>7.0f}"
              f"{100 * rate * latency / c:>8.1f}%"
              f"{med([1000 * r.host_cpu / r.turns for r in runs]):>9.2f}"
              f"{med([1000 * r.sandbox_cpu / r.turns for r in runs]):>11.2f}"
              f"{med([1000 * r.server_cpu / r.turns for r in runs]):>10.2f}"
              f"{med([1000 * r.machine_cpu / r.turns for r in runs]):>11.2f}   "
              + " / ".join(f"{parts[k]:.1f}" for k in ("model_s", "tools_s", "harness_s",
                                                        "wait_s")))
    print("\npaired ratios (median of per-round ratios of turns/s):")
    levels = sorted({c for _, c, _ in results})
    for c in levels:
        line = []
        for new, old in (("openai", "litellm"), ("openai-http", "openai")):
            for w in workers:
                a, b = results.get((new, c, w)), results.get((old, c, w))
                if a and b:
                    cpu = med([(x.host_cpu / x.turns) / (y.host_cpu / y.turns)
                               for x, y in zip(a, b, strict=True)])
                    rate = med([x.rate / y.rate for x, y in zip(a, b, strict=True)])
                    line.append(f"{new}/{old} (workers={w}) {rate:.2f}x turns/s, "
                                f"{cpu:.2f}x host CPU/turn")
        for s in schemes:
            for w in workers[1:]:
                a, b = results.get((s, c, w)), results.get((s, c, workers[0]))
                if a and b:
                    line.append(f"{s} workers={w}/{workers[0]} "
                                f"{med([x.rate / y.rate for x, y in zip(a, b, strict=True)]):.2f}x")
        if line:
            print(f"  c={c}: " + "; ".join(line))


if __name__ == "__main__":
    main()
