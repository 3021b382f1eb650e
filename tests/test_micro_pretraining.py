"""The pretrained micro base (``tiny:micro-base``): its documents keep the held-out tasks unseen
and speak no harness, the shipped weights are checked before use, the loop trains, and the
shipped model does held-out tasks in the neutral notation (a real model, greedy decoding)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

import harnessgrid as hg
from harnessgrid.errors import ConfigError
from harnessgrid.models import FormatError, ModelTurn
from harnessgrid.plugins.micro import MICRO_LEVELS, interfaces
from harnessgrid.plugins.micro import pretraining as pt
from harnessgrid.plugins.micro.tasks import FAMILIES, generate


def _eval_tasks() -> tuple[hg.Task, ...]:
    return tuple(hg.load_suite("micro").tasks("eval"))


def test_documents_never_hold_an_eval_task_and_cover_every_family() -> None:
    docs = pt.documents(3000, drills=0.25, seed=0)
    tasks = [d for d in docs if d.startswith("Task: ")]
    drills = [d for d in docs if d.startswith("Words: ")]
    assert len(tasks) + len(drills) == 3000
    assert 0.2 < len(drills) / 3000 < 0.3
    held_out = {pt.task_document(t) for t in _eval_tasks()}
    assert not held_out & set(tasks)
    # every family is in the mix (each has its own instruction shape)
    starts = {t.split(" ")[1] for t in tasks}
    assert {"Create", "Delete", "Rename", "Copy", "Add", "In", "Write"} <= starts
    assert pt.documents(50, drills=0.25, seed=0) == docs[:50]  # deterministic
    assert pt.documents(50, drills=0.25, seed=1) != docs[:50]


def test_a_drill_repeats_its_run() -> None:
    import random

    for i in range(50):
        words, again = pt.drill(random.Random(i)).splitlines()
        assert words.removeprefix("Words: ") == again.removeprefix("Again: ")


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_neutral_notation_is_no_micro_harness(family: str) -> None:
    """Pretraining must not teach any harness's protocol: no micro tool interface finds a call
    in a document, and it holds no ChatML tool markup or JSON."""
    doc = pt.task_document(generate(family, 7))
    assert "<tool_call>" not in doc
    assert "{" not in doc
    for level in interfaces.LEVELS:
        try:
            calls = level().parse(ModelTurn(content=doc))
        except FormatError:
            calls = []
        assert calls == [], (level.name, doc)


def test_documents_show_reads_and_writes() -> None:
    doc = pt.task_document(next(t for t in _eval_tasks() if t.id.startswith("micro/copy-")))
    lines = doc.splitlines()
    assert lines[1] == "Steps:"
    assert lines[2].startswith("read ")
    assert lines[-1] == "done"
    read = [x.removeprefix("= ") for x in lines if x.startswith("= ")]
    wrote = [x.removeprefix("+ ") for x in lines if x.startswith("+ ")]
    assert read
    assert read == wrote  # a copy writes what it read


def test_the_shipped_base_is_checked_and_copied(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    assert pt.micro_base() == pt.BASE_DIR
    copy = pt.micro_base(tmp_path / "copy")
    assert sorted(p.name for p in copy.iterdir()) == sorted(pt.MODEL_FILES)
    # A damaged copy is replaced; an intact one is reused as is.
    (copy / "model.safetensors").write_bytes(b"not the weights")
    assert pt.micro_base(copy) == copy
    digest = hashlib.sha256((copy / "model.safetensors").read_bytes()).hexdigest()
    assert digest == pt.BASE_SHA256["model.safetensors"]
    # A damaged shipped base is refused, naming the file and the fix.
    broken = tmp_path / "broken"
    shutil.copytree(pt.BASE_DIR, broken)
    data = bytearray((broken / "tokenizer.json").read_bytes())
    data[-2] ^= 1
    (broken / "tokenizer.json").write_bytes(bytes(data))
    monkeypatch.setattr(pt, "BASE_DIR", broken)
    with pytest.raises(ConfigError, match=r"tokenizer\.json") as err:
        pt.micro_base(tmp_path / "other")
    assert "reinstall" in (err.value.hint or "")
    assert not (tmp_path / "other").exists()


def test_tiny_micro_base_names_the_shipped_model() -> None:
    from harnessgrid.trainer.run import resolve_model_path

    assert resolve_model_path("tiny:micro-base") == str(pt.BASE_DIR)
    with pytest.raises(ConfigError, match="micro-base"):
        resolve_model_path("tiny:micro-bse")  # the hint lists it


def test_the_trainer_reaches_the_micro_plugin_through_the_registry(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The micro plugin is installed through an entry point like a third party's, so the
    trainer uses it as the registry loaded it: disabled (HARNESSGRID_DISABLE_PLUGINS=micro),
    ``tiny:micro-base``, the demo's space and the warm start's config say so instead of
    importing it anyway."""
    from harnessgrid.plugin_system.registry import reset_registry
    from harnessgrid.trainer.micro_plugin import micro_levels, micro_space
    from harnessgrid.trainer.run import resolve_model_path
    from harnessgrid.trainer.warm_start import warm_start_config

    assert micro_levels()["observation"] == list(MICRO_LEVELS["observation"])
    assert micro_space("micro4").sizes == (4, 4, 3, 3, 3)
    monkeypatch.setenv("HARNESSGRID_DISABLE_PLUGINS", "micro")
    reset_registry()
    try:
        for attempt in (lambda: resolve_model_path("tiny:micro-base"), micro_space,
                        lambda: warm_start_config(Path("base"), Path("out"))):
            with pytest.raises(ConfigError, match=r"plugin 'micro' is disabled") as err:
                attempt()
            assert "HARNESSGRID_DISABLE_PLUGINS" in (err.value.hint or "")
    finally:
        monkeypatch.delenv("HARNESSGRID_DISABLE_PLUGINS")
        reset_registry()


def test_the_shipped_base_copies_held_out_tasks_into_its_reply() -> None:
    """The point of the base: given an eval task it never saw, as a conversation, it writes the
    steps with the task's file names and words copied from the instruction. The reply's first
    two tokens are given (they fix which of the four syntaxes and verbs the reply uses, which
    the base cannot know); the randomly initialised micro model copies none (0/72 in the plain
    notation), the shipped base 15 of the first 28 tasks without a read (base/recipe.json)."""
    import random

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(pt.BASE_DIR))
    model = AutoModelForCausalLM.from_pretrained(str(pt.BASE_DIR)).eval()
    picked = [t for t in _eval_tasks() if all(a.kind != "read" for a in t.plan)][:10]
    copied = 0
    for task in picked:
        doc = pt.chat_document(task, random.Random(task.id))
        marker = "<|im_start|>assistant\n"
        head = doc[:doc.index(marker) + len(marker)]
        reply_start = tok(doc[len(head):], return_tensors="pt").input_ids[:, :2]
        ids = torch.cat([tok(head, return_tensors="pt").input_ids, reply_start], 1)
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=80, do_sample=False)
        reply = tok.decode(out[0, ids.shape[1] - 2:], skip_special_tokens=True)
        words = [w for a in task.plan for v in a.args.values() for w in str(v).split()]
        copied += all(w in reply for w in words)
    assert copied >= 3, f"{copied}/10 held-out plans copied"


def test_a_chat_document_puts_the_steps_in_the_assistant_turn() -> None:
    import random

    rng = random.Random(0)
    task = generate("join_delete", 3)
    seen = set()
    for _ in range(60):
        doc = pt.chat_document(task, rng)
        system, user, assistant = doc.split("<|im_start|>")[1:]
        assert set(system.removeprefix("system\n").removesuffix("<|im_end|>\n").split()) <= \
            set(pt.FILLER)
        assert user == f"user\n{task.instruction}<|im_end|>\n"
        steps = assistant.removeprefix("assistant\n").splitlines()
        # every name the plan uses is copied into the reply, whatever the syntax
        for action in task.plan:
            for value in action.args.values():
                for word in str(value).split():
                    assert word in assistant
        seen.add(next(s for s in pt.SYNTAXES if _looks_like(s, steps[0])))
    assert seen == set(pt.SYNTAXES)
    tokens = pt.documents(40, drills=0.0, seed=2, chat=True)
    assert all(d.startswith("<|im_start|>system\n") for d in tokens)


def _looks_like(syntax: str, line: str) -> bool:
    return {"call": line.endswith(")"), "json": line.startswith("{"),
            "tag": line.startswith("<"),
            "lines": line[:1].isalpha() and not line.endswith(")")}[syntax]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_chat_documents_use_no_micro_tool_name(family: str) -> None:
    """The chat notations teach copying, not a micro harness's protocol: no verb is a micro
    tool's name and no micro interface finds a call in the reply."""
    import random

    micro_names = {t.name for level in interfaces.LEVELS for t in level().tools()}
    assert not micro_names & {v for verbs in pt.VERBS.values() for v in verbs}
    rng = random.Random(family)
    for _ in range(12):
        doc = pt.chat_document(generate(family, rng.randrange(100)), rng)
        reply = doc.split("<|im_start|>assistant\n")[1]
        for level in interfaces.LEVELS:
            try:
                calls = level().parse(ModelTurn(content=reply))
            except FormatError:
                calls = []
            assert calls == [], (level.name, reply)


def test_tiny_micro_is_the_demo_models_build(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``tiny:micro`` and the demo's builder once disagreed on the pre-tokenizer and rebuilt
    each other's cache folder in turn."""
    import json

    from harnessgrid.plugins.micro import build_micro_model
    from harnessgrid.trainer.run import resolve_model_path

    monkeypatch.setenv("HARNESSGRID_CACHE", str(tmp_path))
    path = Path(resolve_model_path("tiny:micro"))
    info = (path / "harnessgrid_tiny_model.json").read_text()
    assert json.loads(info)["pretokenizer"] == "words"
    assert build_micro_model(path) == path
    assert (path / "harnessgrid_tiny_model.json").read_text() == info


def test_the_loop_trains_and_writes_the_model_atomically(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import load_file

    tokens = tmp_path / "tokens.pt"
    pt.write_token_file(pt.BASE_DIR, tokens, n=16, drills=0.25, seed=3)
    data = torch.load(tokens)
    assert len(data["ids"]) == 16
    assert all(0 < s < len(i) for s, i in
                                          zip(data["starts"], data["ids"], strict=True))
    out = tmp_path / "trained"
    figures = pt.pretrain(pt.BASE_DIR, tokens, out, steps=2, batch_size=4,
                          learning_rate=1e-3, warmup=1, seed=0, log_every=1)
    assert figures["step"] == 2
    assert figures["loss"] > 0
    before = load_file(str(pt.BASE_DIR / "model.safetensors"))
    after = load_file(str(out / "model.safetensors"))
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert (out / "tokenizer.json").read_bytes() == (pt.BASE_DIR / "tokenizer.json").read_bytes()
    assert not out.with_name("trained.tmp").exists()
