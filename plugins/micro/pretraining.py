"""``tiny:micro-base``: the micro model pretrained to read a file task and copy what it names.

Why: a GPU user starts harness scaling from a pretrained model (Qwen3-4B) that can already do
file tasks in *some* form; harness scaling teaches it to do them through *any* harness. A
randomly initialised 0.6M-parameter model does not learn, within a CPU budget, to copy a word
it has not seen from a position it cannot predict: the demo's SFT on oracle demonstrations
teaches it the harnesses' protocols (well-formed turns) but never a right file name (Pass@1 0).
This module is the CPU-scale stand-in for pretraining: the micro model trained on file tasks in
a *neutral notation* that is none of the micro harnesses (no system prompt of theirs, no tool
schema, no harness's call syntax or observation layout)::

    Task: Copy saffron.txt to lichen.md.
    Steps:
    read saffron.txt
    = thistle reef
    = tiger lichen velvet
    write lichen.md
    + thistle reef
    + tiger lichen velvet
    done

plus copy drills (a random run of words, then ``Again:`` and the same run) that make the
model's attention copy by content; then the same tasks as ChatML conversations
(:func:`chat_document`: generic system filler, the instruction as the user's turn, the steps as
the assistant's reply in one of four call syntaxes with verbs that no micro tool has), so that
copying works where a harness puts the instruction and does not hang on one notation. The
tasks are drawn from the micro families with seeds of their own (:data:`SEED_BASE` onwards),
skipping any task or document equal to an ``eval`` task's. Equality is not enough: many eval
tasks sit inside a longer pretraining task (a ``create`` inside a ``create_two``), which is why
the demo scores on the ``test`` split, checked against these documents' tasks after
normalisation (:mod:`harnessgrid.plugins.micro.leaks`).

The training loop needs only torch and transformers (no harnessgrid): the documents are
tokenized once into a file (:func:`write_token_file`), and :func:`pretrain` reads that file, so
the loop runs on a machine with a GPU and nothing else installed. ``base/recipe.json`` gives the
two commands of each stage, where they ran, and what the result scored on held-out tasks; the
result is shipped in the package (``base/``, 2.5 MB; the SHA-256 of its weights and tokenizer
in :data:`BASE_SHA256`, checked before every use) and named ``tiny:micro-base``
(:func:`micro_base`).

The demo's shared warm start is trained from this base (``harnessgrid demo``); docs/demo.md has
what it scores. Earlier figures measured from it on the ``eval`` split
(benchmarks/README.md, "A base that copies") count tasks the base had seen inside longer ones.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: The shipped base and the SHA-256 of the files that make it (checked before every use).
BASE_DIR = Path(__file__).with_name("base")
BASE_SHA256 = {
    "model.safetensors": "2038e696007b526c3f35b3335ac6b393e0b57e9d7e648e333ecd19ea37b8d624",
    "tokenizer.json": "96ac910ebcb5e9e7f340f61f6877a608584d2debf7aaeb8d6aa24a3df10c6d3f",
}
MODEL_FILES = ("config.json", "generation_config.json", "tokenizer.json",
               "tokenizer_config.json", "chat_template.jinja", "model.safetensors")

#: Seeds of the pretraining tasks (the train split uses 0.., eval 100,000..).
SEED_BASE = 1_000_000
#: The defaults of the command line: the shipped base's first stage (see base/recipe.json).
RECIPE: dict[str, Any] = {"documents": 60_000, "drills": 0.25, "steps": 8_000,
                          "batch_size": 64, "learning_rate": 3e-3, "warmup": 500, "seed": 0}


def micro_base(copy_to: Path | None = None) -> Path:
    """The shipped pretrained micro model (its checksums verified), or a copy of it in
    ``copy_to`` (made atomically; an existing verified copy is reused)."""
    from harnessgrid.errors import ConfigError
    from harnessgrid.paths import files_not_as_recorded

    def bad(folder: Path) -> list[str]:
        return (files_not_as_recorded(folder, BASE_SHA256)
                + [n for n in MODEL_FILES if not (folder / n).is_file()])

    if copy_to is not None and copy_to.is_dir() and not bad(copy_to):
        return copy_to
    if wrong := bad(BASE_DIR):
        raise ConfigError(f"the shipped micro base in {BASE_DIR} is damaged "
                          f"({', '.join(sorted(set(wrong)))} missing or not as shipped)",
                          hint="reinstall harnessgrid, or rebuild it with "
                               "python -m harnessgrid.plugins.micro.pretraining")
    if copy_to is None:
        return BASE_DIR
    import shutil

    tmp = copy_to.with_name(copy_to.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in MODEL_FILES:
        shutil.copyfile(BASE_DIR / name, tmp / name)
    shutil.rmtree(copy_to, ignore_errors=True)
    tmp.rename(copy_to)
    return copy_to


# -- documents (needs harnessgrid) -------------------------------------------------------------

def task_document(task: Any) -> str:
    """One micro task in the neutral notation: instruction, then the oracle's steps with what
    each read returned (``= line``) and each write's text (``+ line``)."""
    lines = [f"Task: {task.instruction}", "Steps:"]
    files = dict(task.files)
    for action in task.plan:
        args = action.args
        if action.kind == "read":
            lines.append(f"read {args['path']}")
            lines += [f"= {line}" for line in files.get(args["path"], "").splitlines()]
        elif action.kind == "write":
            lines.append(f"write {args['path']}")
            lines += [f"+ {line}" for line in str(args["content"]).splitlines()]
            files[args["path"]] = args["content"]
        elif action.kind == "edit":
            lines.append(f"change {args['path']} {args['old']} -> {args['new']}")
        elif action.kind == "shell":
            lines.append(f"run {args['command']}")
        else:  # the micro families use only the four above
            raise ValueError(f"no neutral notation for a {action.kind} step")
    lines.append("done")
    return "\n".join(lines) + "\n"


#: Filler for a chat document's system turn: generic words, none a micro prompt's.
FILLER = ("you", "are", "a", "helpful", "assistant", "work", "with", "care", "and", "answer",
          "in", "short", "steps", "please", "the", "user", "asks", "for", "help", "keep", "it",
          "simple", "be", "brief", "clear")


#: Verbs of the chat documents' notations per step kind; none is a micro tool's name.
VERBS = {"read": ("read", "open", "show", "view"), "write": ("write", "save", "store", "make"),
         "edit": ("change", "swap", "fix"), "shell": ("exec", "do", "shell"),
         "finish": ("done", "stop", "finish", "over")}
#: Call syntaxes of the chat documents (none is a micro interface's): one per document.
SYNTAXES = ("lines", "call", "json", "tag")


def _step(syntax: str, verb: str, args: dict[str, str], body: str | None) -> str:
    """One step in ``syntax``: ``args`` named file/from/to/command, ``body`` a write's text."""
    if syntax == "lines":
        head = " ".join([verb, *(args.get(k, "") for k in ("file", "command") if k in args)])
        if "from" in args:
            head += f" {args['from']} -> {args['to']}"
        return head + "".join(f"\n+ {line}" for line in (body or "").splitlines())
    values = [*args.values(), *([body] if body is not None else [])]
    if syntax == "call":
        return f"{verb}({', '.join(json.dumps(v) for v in values)})"
    if syntax == "json":
        fields = {"do": verb, **args, **({"body": body} if body is not None else {})}
        return json.dumps(fields)
    attrs = "".join(f' {k}="{v}"' for k, v in args.items() if k != "command")
    inner = args.get("command", body)
    return f"<{verb}{attrs}>{inner}</{verb}>" if inner is not None else f"<{verb}{attrs}/>"


def chat_document(task: Any, rng: random.Random) -> str:
    """The task as a ChatML conversation (the micro model's chat template, which every micro
    harness shares): a system turn of generic filler of random length, the instruction as the
    user's turn, and the steps as the assistant's reply in one of :data:`SYNTAXES` with verbs
    drawn from :data:`VERBS` -- so the copying a base learns does not hang on one notation."""
    syntax = rng.choice(SYNTAXES)
    verbs = {kind: rng.choice(names) for kind, names in VERBS.items()}
    mark = rng.choice(("= ", "> ", "| "))
    files = dict(task.files)
    steps = []
    for action in task.plan:
        a = action.args
        if action.kind == "read":
            steps.append(_step(syntax, verbs["read"], {"file": a["path"]}, None))
            steps += [mark + line for line in files.get(a["path"], "").splitlines()]
        elif action.kind == "write":
            steps.append(_step(syntax, verbs["write"], {"file": a["path"]}, a["content"]))
            files[a["path"]] = a["content"]
        elif action.kind == "edit":
            steps.append(_step(syntax, verbs["edit"],
                               {"file": a["path"], "from": a["old"], "to": a["new"]}, None))
        else:
            steps.append(_step(syntax, verbs["shell"], {"command": a["command"]}, None))
    steps.append(_step(syntax, verbs["finish"], {}, None))
    system = " ".join(rng.choice(FILLER) for _ in range(rng.randint(0, 40)))
    return (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{task.instruction}"
            f"<|im_end|>\n<|im_start|>assistant\n" + "\n".join(steps) + "\n")


def drill(rng: random.Random) -> str:
    """A copy drill: a random run of words and file names, then the same run again."""
    from harnessgrid.plugins.micro.tasks import EXTS, WORDS

    run = [rng.choice(WORDS) + (f".{rng.choice(EXTS)}" if rng.random() < 0.3 else "")
           for _ in range(rng.randint(3, 12))]
    return f"Words: {' '.join(run)}\nAgain: {' '.join(run)}\n"


#: The two pretraining stages' corpora as ``base/recipe.json`` made them (``tokens`` arguments).
STAGES: tuple[dict[str, Any], ...] = (
    {"documents": 60_000, "drills": 0.25, "seed": 0, "chat": False},
    {"documents": 30_000, "drills": 0.25, "seed": 1, "chat": True},
)


def _stream(n: int, drills: float, seed: int) -> Iterator[tuple[random.Random, Any]]:
    """``n`` draws of the corpus, each the stream's ``random`` and a task (``None``: a drill).
    No task equal to an eval task is used, nor one whose document equals an eval task's (a
    document does not show every file: two deletions of the same file read alike)."""
    from harnessgrid.plugins.micro.tasks import FAMILIES, _keys, generate, micro_suite

    evals = micro_suite().tasks("eval")
    held_out = {k for t in evals for k in _keys(t)} | {task_document(t) for t in evals}
    rng = random.Random(f"micro-pretraining:{seed}")
    names = sorted(FAMILIES)
    made = 0
    next_seed = SEED_BASE
    while made < n:
        if rng.random() < drills:
            made += 1
            yield rng, None
            continue
        task = generate(names[next_seed % len(names)], next_seed // len(names))
        next_seed += 1
        if not (_keys(task) | {task_document(task)}) & held_out:
            made += 1
            yield rng, task


def documents(n: int, *, drills: float, seed: int, chat: bool = False) -> list[str]:
    """``n`` pretraining documents: micro tasks of every family and, a share ``drills`` of
    them, copy drills; never an eval task (see :func:`_stream`)."""
    return [drill(rng) if task is None else chat_document(task, rng) if chat
            else task_document(task) for rng, task in _stream(n, drills, seed)]


def pretraining_tasks(documents: int, drills: float, seed: int, chat: bool = False) -> list[Any]:
    """The tasks among the ``documents`` of one stage (the leak check's corpus,
    :mod:`harnessgrid.plugins.micro.leaks`); ``chat`` changes how they are written, not
    which they are (but it changes the draws, hence which tasks follow)."""
    out = []
    for rng, task in _stream(documents, drills, seed):
        # each document's own draws, so that the stream goes on as documents() sees it
        if task is None:
            drill(rng)
        else:
            if chat:
                chat_document(task, rng)
            out.append(task)
    return out


def write_token_file(model_dir: Path, out: Path, *, n: int, drills: float, seed: int,
                     chat: bool = False) -> None:
    """Tokenize :func:`documents` with ``model_dir``'s tokenizer into ``out`` (a torch file of
    token id lists, and where each document's steps begin: only those tokens carry loss)."""
    import torch
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    ids, starts = [], []
    for text in documents(n, drills=drills, seed=seed, chat=chat):
        marker = ("Steps:\n" if text.startswith("Task:") else
                  "<|im_start|>assistant\n" if text.startswith("<|im_start|>") else "Again:")
        head, sep, _ = text.partition(marker)
        ids.append(tok(text)["input_ids"] + [tok.eos_token_id])
        starts.append(len(tok(head + sep)["input_ids"]))
    torch.save({"ids": ids, "starts": starts}, out)


# -- the training loop (torch and transformers only) -------------------------------------------

def pretrain(model_dir: Path, tokens: Path, out: Path, *, steps: int, batch_size: int,
             learning_rate: float, warmup: int, seed: int, device: str = "cpu",
             log_every: int = 500) -> dict[str, float]:
    """Train ``model_dir``'s weights on the token file for ``steps`` steps (AdamW, cosine
    schedule) and save the model to ``out``; returns the last logged figures."""
    import math
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    data = torch.load(tokens)
    ids, starts = data["ids"], data["starts"]
    hf: Any = AutoModelForCausalLM  # partially typed upstream
    model = hf.from_pretrained(str(model_dir), dtype=torch.float32).to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (
        1 + math.cos(math.pi * min(1.0, s / steps))))
    gen = torch.Generator().manual_seed(seed)
    pad = model.config.pad_token_id or 0
    figures: dict[str, float] = {}
    for step in range(steps):
        pick = torch.randint(len(ids), (batch_size,), generator=gen).tolist()
        width = max(len(ids[i]) for i in pick)
        x = torch.full((batch_size, width), pad, dtype=torch.long)
        labels = torch.full((batch_size, width), -100, dtype=torch.long)
        mask = torch.zeros((batch_size, width), dtype=torch.long)
        for row, i in enumerate(pick):
            seq = torch.tensor(ids[i])
            x[row, :len(seq)] = seq
            mask[row, :len(seq)] = 1
            labels[row, starts[i]:len(seq)] = seq[starts[i]:]
        x, labels, mask = x.to(device), labels.to(device), mask.to(device)
        logits = model(input_ids=x, attention_mask=mask).logits[:, :-1]
        target = labels[:, 1:]
        loss: Any = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                                 target.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if (step + 1) % log_every == 0 or step + 1 == steps:
            with torch.no_grad():
                keep = target != -100
                acc = (logits.argmax(-1)[keep] == target[keep]).float().mean().item()
            figures = {"step": step + 1, "loss": loss.item(), "token_accuracy": acc}
            print(json.dumps(figures), flush=True)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(model_dir, tmp)
    model.to("cpu").save_pretrained(str(tmp))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return figures


def main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="pretraining", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tokens", help="write the token file (needs harnessgrid)")
    t.add_argument("model_dir", type=Path)
    t.add_argument("out", type=Path)
    t.add_argument("--documents", type=int, default=RECIPE["documents"])
    t.add_argument("--drills", type=float, default=RECIPE["drills"])
    t.add_argument("--seed", type=int, default=RECIPE["seed"])
    t.add_argument("--chat", action="store_true", help="tasks as ChatML conversations")
    r = sub.add_parser("train", help="train on a token file (torch and transformers only)")
    r.add_argument("model_dir", type=Path)
    r.add_argument("tokens", type=Path)
    r.add_argument("out", type=Path)
    for name in ("steps", "batch_size", "warmup", "seed"):
        r.add_argument(f"--{name.replace('_', '-')}", type=int, default=RECIPE[name])
    r.add_argument("--learning-rate", type=float, default=RECIPE["learning_rate"])
    r.add_argument("--device", default="cpu")
    r.add_argument("--log-every", type=int, default=500)
    a = p.parse_args(argv)
    if a.command == "tokens":
        write_token_file(a.model_dir, a.out, n=a.documents, drills=a.drills, seed=a.seed,
                         chat=a.chat)
    else:
        pretrain(a.model_dir, a.tokens, a.out, steps=a.steps, batch_size=a.batch_size,
                 learning_rate=a.learning_rate, warmup=a.warmup, seed=a.seed,
                 device=a.device, log_every=a.log_every)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
