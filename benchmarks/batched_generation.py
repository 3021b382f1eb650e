"""Batched generation across concurrent episodes: the ``hf:`` policy on the tiny model.

N episodes (``--episodes``, default 8) of K turns each (``--turns``, default 4), every turn
sampling up to ``--max-new-tokens`` (default 32; the random tiny model practically never stops
early, so every turn samples that many), played three ways on ONE loaded model:

- **sequential**: one episode after the other (every turn is a batch of one);
- **concurrent, batched**: all N at once, ``max_batch_size=64`` (the default): the turns pending
  when the model is free are decoded together;
- **concurrent, max_batch_size=1**: all N at once, one turn per decode (the behaviour before
  batching, without its thread-pool ceiling).

``--via act`` (default) plays the episodes directly through ``policy.act`` with a growing
history (each turn's reply plus a tool observation appended), which isolates generation.
``--via episodes`` plays them through the runtime instead: ``run_episode`` on a composed harness
(``S0-T2-O0-C0-W0``: minimal prompt, ``bash_only`` tools, react) on the ``examples/upper`` task,
without a sandbox (``unsafe_no_sandbox``: the random model's replies are format errors, so no
command runs), ``max_turns=K`` and enough allowed format errors that every episode plays K
turns; the concurrent modes run ``run_episodes(..., concurrency=N)``.

Every mode uses the same seed and (with ``--via act``) the same episode ids, so each turn's
seed is the same everywhere: the script checks that all three modes sampled exactly the same
ids (batch independence) and exits 1 otherwise. With ``--via episodes`` the runtime picks the
episode ids, so only the token counts are compared.

``--repeat R`` times every mode R times, interleaved, and reports the fastest (median in
brackets). Run: ``python benchmarks/batched_generation.py [--episodes 8] [--turns 4]``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

CONFIG_CODE = "S0-T2-O0-C0-W0"


def build_policy(model_dir: Path, args: argparse.Namespace, loaded: tuple[Any, Any],
                 max_batch_size: int) -> Any:
    from harnessgrid.policies.hf import HFPolicy

    model, tokenizer = loaded
    return HFPolicy(str(model_dir), model=model, tokenizer=tokenizer, seed=0,
                    temperature=1.0, max_new_tokens=args.max_new_tokens,
                    max_batch_size=max_batch_size)


# -- playing episodes directly through act ---------------------------------------------------


async def act_episode(policy: Any, index: int, turns: int) -> list[tuple[int, ...]]:
    from harnessgrid.models import Message
    from harnessgrid.policies import PolicyRequest

    class State:
        def __init__(self, episode_id: str) -> None:
            self.episode_id, self.finished = episode_id, False

    state = State(f"bench-{index}")
    messages = [Message(role="system", content="You are a coding agent. " * (1 + index % 3)),
                Message(role="user", content=f"Task {index}: make the failing test pass.")]
    out: list[tuple[int, ...]] = []
    for turn in range(turns):
        req = PolicyRequest(messages=list(messages), tools=[], native_tools=False,
                            state=state,  # type: ignore[arg-type]
                            new_segment=False)
        reply = await policy.act(req)
        assert reply.tokens is not None
        out.append(reply.tokens.completion_ids)
        messages += [reply.message(),
                     Message(role="user", content=f"[exit code {turn}]\nok\n" * 3)]
    state.finished = True
    return out


# -- playing episodes through the runtime ----------------------------------------------------


def episode_jobs(n: int) -> tuple[Any, list[Any]]:
    import harnessgrid as hg
    from harnessgrid.plugins.tasks.examples import UPPER_TASK

    harness = hg.compose(hg.FactorSpace.default().parse(CONFIG_CODE))
    return harness, [UPPER_TASK] * n


def limits(turns: int) -> Any:
    from harnessgrid.engine.limits import EpisodeLimits

    return EpisodeLimits(max_turns=turns, max_format_errors=turns + 1, unsafe_no_sandbox=True)


def trajectory_tokens(traj: Any) -> list[int]:
    return [t.tokens_out for t in traj.turns] if traj.turns else []


# -- modes -----------------------------------------------------------------------------------


def run_mode(policy: Any, args: argparse.Namespace, concurrent: bool) -> tuple[float, list[Any]]:
    """Play the N episodes; return the wall time and what each sampled."""
    n, turns = args.episodes, args.turns
    if args.via == "act":
        async def play() -> list[Any]:
            if concurrent:
                return list(await asyncio.gather(*(act_episode(policy, i, turns)
                                                   for i in range(n))))
            return [await act_episode(policy, i, turns) for i in range(n)]
    else:
        from harnessgrid.engine.executor import run_episodes
        from harnessgrid.engine.runtime import run_episode

        harness, tasks = episode_jobs(n)

        async def play() -> list[Any]:
            if concurrent:
                trajs = await run_episodes([(harness, t) for t in tasks], policy,
                                           limits(turns), concurrency=n)
            else:
                trajs = [await run_episode(harness, t, policy, limits(turns)) for t in tasks]
            bad = [t.termination for t in trajs if t.error or len(t.turns) != turns]
            if bad:
                raise SystemExit(f"episodes did not play {turns} turns: {bad[:3]} "
                                 f"{trajs[0].error!r}")
            return [trajectory_tokens(t) for t in trajs]

    t0 = time.perf_counter()
    result = asyncio.run(play())
    return time.perf_counter() - t0, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--size", default="tiny", help="tiny-model size (tiny or small)")
    parser.add_argument("--via", choices=("act", "episodes"), default="act")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0,
                        help="torch.set_num_threads (0: leave torch's default)")
    args = parser.parse_args()

    import torch
    import transformers

    from harnessgrid.policies.tiny_model import build_tiny_model

    if args.threads:
        torch.set_num_threads(args.threads)
    model_dir = build_tiny_model(Path(tempfile.gettempdir()) / f"hg-bench-{args.size}",
                                 size=args.size)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    loaded = (model, tokenizer)

    modes: dict[str, tuple[int, bool]] = {
        "sequential": (64, False),
        "concurrent, batched": (64, True),
        "concurrent, max_batch_size=1": (1, True),
    }
    times: dict[str, list[float]] = {name: [] for name in modes}
    samples: dict[str, Any] = {}
    stats: dict[str, dict[str, float]] = {}
    # Warm-up (untimed): first forwards allocate, the tokenizer caches, the template compiles.
    run_mode(build_policy(model_dir, args, loaded, 64), args, concurrent=True)
    for _ in range(args.repeat):
        for name, (mbs, concurrent) in modes.items():
            policy = build_policy(model_dir, args, loaded, mbs)
            wall, result = run_mode(policy, args, concurrent)
            times[name].append(wall)
            samples.setdefault(name, result)
            stats[name] = policy.stats.snapshot()

    problems = []
    reference = samples["sequential"]
    for name, result in samples.items():
        if args.via == "act" and result != reference:
            problems.append(f"{name} sampled other ids than sequential")

    n, k, m = args.episodes, args.turns, args.max_new_tokens
    print(f"batched generation, {datetime.date.today()}, {platform.python_version()}, "
          f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}")
    print(f"{n} episodes x {k} turns x <= {m} new tokens, tiny model '{args.size}', "
          f"via {args.via}; best of {args.repeat} (median)\n")
    best = {name: min(ts) for name, ts in times.items()}
    header = f"{'mode':<30} {'wall s':>14} {'turns/s':>8} {'batches':>8} {'mean batch':>10} " \
             f"{'forwards':>9}"
    print(header)
    print("-" * len(header))
    for name in modes:
        s = stats[name]
        print(f"{name:<30} {best[name]:>6.2f} ({statistics.median(times[name]):5.2f}) "
              f"{n * k / best[name]:>8.1f} {int(s['batches']):>8} {s['mean_batch']:>10.2f} "
              f"{int(s['forwards']):>9}")
    def ratio(slow: str, fast: str) -> float:
        return best[slow] / best[fast]

    print(f"\nconcurrent batched vs sequential: {ratio('sequential', 'concurrent, batched'):.2f}x "
          f"faster ({best['concurrent, batched']:.2f} s vs {best['sequential']:.2f} s)")
    print(f"batched vs max_batch_size=1 (both concurrent): "
          f"{ratio('concurrent, max_batch_size=1', 'concurrent, batched'):.2f}x faster "
          f"({best['concurrent, batched']:.2f} s vs {best['concurrent, max_batch_size=1']:.2f} s)")
    if args.via == "act":
        print("same ids in all three modes:", "yes" if not problems else "NO")
    if problems:
        print("\nPROBLEMS:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
