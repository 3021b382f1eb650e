"""The micro plugin (issue 17): a compact 3^5 harness space, the ``micro`` task suite and the
tokenizer corpus of the CPU demo.

What is pinned here: the plugin arrives through its entry point (not the built-in list); every
one of the 243 micro configurations runs and the scripted oracle scores 1.0 through it while the
null policy fails; the levels of each factor really differ; parse∘render, totality and the
context levels' invariants; the suite's splits are disjoint; and a tiny model built on
``micro_corpus()`` keeps prompts short while the default build is unchanged. Episodes run in
real bubblewrap sandboxes.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harnessgrid as hg
from harnessgrid.engine.executor import run_episodes
from harnessgrid.episode import ContextBudget, estimate_tokens
from harnessgrid.harness import offered_tools
from harnessgrid.levels import FACTOR_BASES
from harnessgrid.models import (
    ACTION_ARGS,
    Action,
    FormatError,
    Message,
    ModelTurn,
    ToolCall,
    ToolResult,
)
from harnessgrid.plugin_system.composition import compose
from harnessgrid.plugin_system.registry import get_registry
from harnessgrid.plugins import BUILTIN_PLUGINS
from harnessgrid.plugins.micro import (
    MICRO_LEVELS,
    MICRO_SPACE,
    build_micro_model,
    micro_address,
    micro_config,
    micro_corpus,
    micro_harness,
)
from harnessgrid.plugins.micro.contexts import MicroDigest, MicroWindow
from harnessgrid.plugins.micro.corpus import ADAPTERS
from harnessgrid.plugins.micro.tasks import EVAL_SIZE, TRAIN_PER_FAMILY, WORDS, micro_suite
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.tasks import Task
from harnessgrid.trajectory import Trajectory

SUITE = micro_suite()
FAMILIES = sorted({str(t.metadata["family"]) for t in SUITE.tasks()})
CONFIGS = list(MICRO_SPACE)


def _by_family(tasks: Any) -> dict[str, list[Task]]:
    out: dict[str, list[Task]] = defaultdict(list)
    for t in tasks:
        out[str(t.metadata["family"])].append(t)
    return out


TRAIN = _by_family(SUITE.tasks("train"))
EVAL = _by_family(SUITE.tasks("eval"))


def _level(factor: str, index: int) -> Any:
    return get_registry().level(factor, MICRO_LEVELS[factor][index])()


# -- registration ------------------------------------------------------------------------------

def test_registered_through_its_entry_point_not_the_builtin_list() -> None:
    eps = {ep.name: ep.value for ep in entry_points(group="harnessgrid")}
    assert eps.get("micro") == "harnessgrid.plugins.micro"
    assert "harnessgrid.plugins.micro" not in BUILTIN_PLUGINS
    registry = get_registry()
    plugin = registry.origin[("factor level", "tool_interface:micro_json")]
    assert registry.origin[("task suite", "micro")] == plugin
    (info,) = [p for p in registry.plugins if p.name == plugin]
    assert info.source != "builtin"
    assert info.source.startswith("harnessgrid ")
    out = subprocess.run([sys.executable, "-m", "harnessgrid", "plugins", "list", "--json"],
                         capture_output=True, text=True, check=True)
    listed = json.loads(out.stdout)
    assert {"name": plugin, "source": info.source} in listed["plugins"]
    assert listed["problems"] == []


def test_fifteen_levels_proper_subclasses_prefixed_and_a_space_of_243() -> None:
    registry = get_registry()
    for factor, names in MICRO_LEVELS.items():
        assert len(names) == 3
        for name in names:
            cls = registry.level(factor, name)
            assert name.startswith("micro_")
            assert issubclass(cls, FACTOR_BASES[factor])
            assert cls is not FACTOR_BASES[factor]
    assert MICRO_SPACE.size == 243
    assert len(CONFIGS) == 243
    config = micro_config("S1-T2-O0-C2-W1")
    assert config.levels == {"system_prompt": "micro_persona", "tool_interface": "micro_cmd",
                             "observation": "micro_plain", "context": "micro_digest",
                             "workflow": "micro_plan"}
    # the address (the named space micro) resolves to the same harness anywhere a harness is
    # accepted, and is the name a micro harness records
    assert micro_address(config) == "micro:S1-T2-O0-C2-W1"
    harness = hg.resolve_harness(micro_address(config))
    assert harness.config.levels == config.levels  # type: ignore[attr-defined]
    assert micro_harness("S1-T2-O0-C2-W1").name == "micro:S1-T2-O0-C2-W1"
    assert micro_config("micro:S1-T2-O0-C2-W1") == config
    assert len(hg.orthogonal_design(MICRO_SPACE).configs) == 18


# -- every configuration runs --------------------------------------------------------------------

def _oracle_jobs(per_config: int) -> list[tuple[Any, Task]]:
    """Each configuration with ``per_config`` train tasks, dealt so that every configuration
    sees different families and every family meets every level of every factor."""
    jobs = []
    for i, config in enumerate(CONFIGS):
        harness = compose(config)
        for j in range(per_config):
            family = FAMILIES[(i * per_config + j) % len(FAMILIES)]
            jobs.append((harness, TRAIN[family][(i * per_config + j) // len(FAMILIES)]))
    return jobs


def _failures(trajs: list[Trajectory]) -> list[tuple[Any, ...]]:
    return [(t.harness, t.task_id, t.termination, t.subscores, t.error, t.grade_error)
            for t in trajs if not t.passed]


def test_oracle_scores_one_through_all_243_configurations() -> None:
    trajs = asyncio.run(run_episodes(_oracle_jobs(3), ScriptedPolicy(), concurrency=4))
    assert len({t.harness for t in trajs}) == 243
    assert len(trajs) == 729
    assert _failures(trajs) == []
    assert {t.task_id.split("-")[0] for t in trajs} == {f"micro/{f}" for f in FAMILIES}


def test_null_policy_fails_through_all_243_configurations() -> None:
    trajs = asyncio.run(run_episodes(_oracle_jobs(1), ScriptedPolicy(empty=True),
                                     concurrency=4))
    assert all(t.score is not None and t.score < 1.0 for t in trajs)
    assert {t.termination for t in trajs} == {"format_errors"}  # null sends nothing


def test_oracle_passes_and_null_fails_through_the_adapters() -> None:
    """Out-of-space evaluation runs micro tasks through the emulated shells."""
    registry = get_registry()
    jobs = [(registry.adapter(name).create(), EVAL[f][0])
            for name in ("claude-code", "openclaw", "gemini-cli") for f in FAMILIES]
    assert _failures(asyncio.run(run_episodes(jobs, ScriptedPolicy(), concurrency=4))) == []
    idle = asyncio.run(run_episodes(jobs, ScriptedPolicy(empty=True), concurrency=4))
    assert all(t.score is not None and t.score < 1.0 for t in idle)


@pytest.mark.slow
def test_oracle_scores_one_on_every_family_through_every_configuration() -> None:
    """Exhaustive: 243 configurations x one eval task of each of the 12 families."""
    jobs = [(compose(c), EVAL[f][0]) for c in CONFIGS for f in FAMILIES]
    trajs = asyncio.run(run_episodes(jobs, ScriptedPolicy(), concurrency=4))
    assert _failures(trajs) == []


# -- the levels differ and keep their contracts -------------------------------------------------

def test_levels_of_a_factor_render_differently() -> None:
    codes = {f: [MICRO_SPACE.config([i if g == f else 0 for g in range(5)]) for i in range(3)]
             for f in range(5)}
    prompts = {compose(c).system_prompt_text("/workspace") for c in codes[0]}
    assert len(prompts) == 3
    interfaces = [compose(c) for c in codes[1]]
    assert len({tuple(t.name for t in h.tools()) for h in interfaces}) == 3
    action = Action.of("write", path="a.txt", content="hi\n")
    assert len({h.render_action(action, "c1").model_dump_json() for h in interfaces}) == 3
    result = ToolResult(output="one\ntwo\n", exit_code=0)
    read = Action.of("read", path="a.txt")
    assert len({_level("observation", i).format(read, result) for i in range(3)}) == 3
    assert len({_level("observation", i).format_error(FormatError("x")) for i in range(3)}) == 3
    workflows = [compose(c) for c in codes[4]]
    assert len({h.protocol for h in workflows}) == 3
    assert len({h.system_prompt_text("/workspace") for h in workflows}) == 3


def test_prompts_are_compact() -> None:
    for config in CONFIGS:
        text = compose(config).system_prompt_text("/workspace")
        assert len(text) < 700, (config.code, len(text))


_TEXT = st.text(max_size=40)


def _actions(kinds: list[str]) -> st.SearchStrategy[Action]:
    return st.sampled_from(kinds).flatmap(lambda kind: st.fixed_dictionaries(
        {arg: _TEXT for arg in ACTION_ARGS[kind]}).map(
            lambda args, kind=kind: Action(kind=kind, args=args)))


_KINDS = ["read", "write", "edit", "list", "shell", "finish"]


@pytest.mark.parametrize("index", [0, 1, 2])
@settings(max_examples=300, deadline=None)
@given(action=_actions(_KINDS))
def test_parse_inverts_render(index: int, action: Action) -> None:
    level = _level("tool_interface", index)
    assert level.supports(action.kind)
    turn = level.render(action, "call_1")
    calls = level.parse(turn)
    assert len(calls) == 1
    assert level.to_action(calls[0]) == action
    if level.name == "micro_cmd":
        assert "\n" not in turn.content  # one line per call


def _parsed_actions(level: Any, content: str) -> list[Action]:
    """What the harness does with a text reply: parse it, then turn each call into an action."""
    return [level.to_action(call) for call in level.parse(ModelTurn(content=content))]


@pytest.mark.parametrize("index", [0, 1, 2])
def test_bad_calls_are_format_errors(index: int) -> None:
    level = _level("tool_interface", index)
    if level.native_tools:
        for call in (ToolCall(id="1", name="cat", arguments={"p": "a"}),
                     ToolCall(id="1", name="rd", arguments={"path": "a"}),
                     ToolCall(id="1", name="wr", arguments={"p": "a", "t": 3}),
                     ToolCall(id="1", name="rd", raw_arguments="{", parse_error="bad json")):
            with pytest.raises(FormatError):
                level.to_action(call)
        return
    assert level.parse(ModelTurn(content="I will look at the files first.")) == []
    bad = {"micro_tags": ['<w p="a.txt">x</r>', "<e p='a'><a>x</a></e>", "<r>a.txt"],
           "micro_cmd": ["/cp a b", '/put "a.txt', "/sub a.txt x", '/bye "a" b']}[level.name]
    for content in bad:
        with pytest.raises(FormatError):
            _parsed_actions(level, content)


def test_several_calls_in_one_text_reply() -> None:
    tags, cmd = _level("tool_interface", 1), _level("tool_interface", 2)
    got = [tags.to_action(c) for c in tags.parse(ModelTurn(
        content='First <r>a.txt</r> then\n<w p="b.txt">x &lt; y &amp; z</w>'))]
    assert got == [Action.of("read", path="a.txt"),
                   Action.of("write", path="b.txt", content="x < y & z")]
    got = [cmd.to_action(c) for c in cmd.parse(ModelTurn(
        content='ok:\n/cat a.txt\n/sub b.txt "big cat" small dog\n/dir\n/bye'))]
    assert got == [Action.of("read", path="a.txt"),
                   Action.of("edit", path="b.txt", old="big cat", new="small dog"),
                   Action.of("list", path="."), Action.of("finish", message="")]


@pytest.mark.parametrize("index", [0, 1, 2])
@settings(max_examples=200, deadline=None)
@given(action=_actions([*_KINDS, "search"]),
       result=st.builds(ToolResult, output=st.text(max_size=600), stderr=st.text(max_size=50),
                        exit_code=st.none() | st.integers(), error=st.none() | st.text(),
                        timed_out=st.booleans()))
def test_observations_total_deterministic_and_short(index: int, action: Action,
                                                    result: ToolResult) -> None:
    level = _level("observation", index)
    text = level.format(action, result)
    assert text == level.format(action, result)
    text.encode("utf-8")
    assert len(text) < 2_000


def _history(turns: int) -> list[Message]:
    """System, task, then ``turns`` native call turns; the first answered by a pinned note."""
    msgs = [Message(role="system", content="sys", kind="system", pinned=True),
            Message(role="user", content="task", kind="task", pinned=True)]
    for i in range(turns):
        call = ToolCall(id=f"c{i}", name="rd", arguments={"p": f"f{i}.txt"})
        msgs.append(Message(role="assistant", tool_calls=(call,)))
        msgs.append(Message(role="tool", content=f"content {i}", tool_call_id=f"c{i}",
                            name="rd", kind="observation"))
        if i == 0:
            msgs.append(Message(role="user", content="plan", kind="plan", pinned=True))
    return msgs


@pytest.mark.parametrize("level", [MicroWindow(), MicroDigest()])
def test_sliding_contexts_append_between_blocks_and_keep_pinned(level: Any) -> None:
    budget = ContextBudget(max_tokens=100_000)
    rewrites = []
    previous: list[Message] | None = None
    for n in range(1, 12):
        history = _history(n)
        frozen = list(history)
        view = level.view(history, budget)
        assert history == frozen  # never mutated
        assert all(m in view for m in history if m.pinned)
        tool_ids = {c.id for m in view for c in m.tool_calls}
        assert all(m.tool_call_id in tool_ids for m in view if m.role == "tool")
        if previous is not None and view[:len(previous)] != previous:
            rewrites.append(n)
        previous = [*view, _history(n + 1)[len(history)]]
    step = level.keep - level.low + 1
    assert rewrites == list(range(level.keep + 1, 12, step))
    small = ContextBudget(max_tokens=estimate_tokens(_history(0)) + 60)
    assert small.count(level.view(_history(11), small)) <= small.max_tokens


# -- the suite -----------------------------------------------------------------------------------

def test_suite_sizes_plans_and_determinism() -> None:
    assert hg.load_suite("micro") is SUITE
    assert len(SUITE.tasks("train")) == TRAIN_PER_FAMILY * len(FAMILIES) >= 2000
    assert len(SUITE.tasks("eval")) == EVAL_SIZE
    assert len(FAMILIES) == 12
    for task in SUITE.tasks():
        assert 1 <= len(task.plan) <= 4
        assert len(task.instruction) < 120
    ids = [t.id for t in SUITE.tasks()]
    assert len(set(ids)) == len(ids)
    from harnessgrid.plugins.micro.tasks import generate

    again = generate("join_delete", 7)
    first = next(t for t in TRAIN["join_delete"] if t.metadata["seed"] == 7)
    assert again.content_hash() == first.content_hash()
    assert again.plan == first.plan
    with pytest.raises(hg.ConfigError):
        hg.load_suite("micro", families="copy")


def test_train_and_eval_are_disjoint_by_content() -> None:
    train, evals = SUITE.tasks("train"), SUITE.tasks("eval")
    assert not {t.content_hash() for t in train} & {t.content_hash() for t in evals}
    assert not ({t.metadata["params_key"] for t in train}
                & {t.metadata["params_key"] for t in evals})
    assert len({t.content_hash() for t in train}) == len(train)
    assert set(EVAL) == set(FAMILIES)


def test_grader_scores_named_subscores_and_is_deterministic(tmp_path: Path) -> None:
    task = TRAIN["rename_replace"][0]
    for path, content in task.files.items():
        (tmp_path / path).write_text(str(content))
    assert task.grader is not None
    before = task.grader.grade(tmp_path, [])
    assert before == task.grader.grade(tmp_path, [])
    assert set(before.values()) == {0.0}
    assert all(name.startswith(("right ", "gone ")) for name in before)


# -- the tokenizer corpus and the micro model ---------------------------------------------------

def test_corpus_covers_levels_adapters_and_tasks() -> None:
    corpus = micro_corpus()
    assert corpus == micro_corpus()  # deterministic, so the tokenizer is reproducible
    text = "\n".join(corpus)
    for needle in ('"name": "rd"', "<w p=", "/put ", '{"ok":true', "# read ", "(empty)",
                   "earlier turns hidden]", "Earlier steps:", "Plan kept:", "Not yet: check",
                   "You are Kit", "Claude Code", "OpenClaw", '"name": "TodoWrite"', "→",
                   '"name": "exec"', '"name": "ToolSearch"', '"name": "apply_patch"',
                   '"name": "run_shell_command"'):
        assert needle in text, needle
    wrapped = {c.removeprefix("<|im_start|>user\n").removesuffix("<|im_end|>\n")
               for c in corpus}
    assert {t.instruction for t in (*SUITE.tasks("train"), *SUITE.tasks("eval"))} <= wrapped
    # the held-out splits stay out of the tokenizer's corpus
    held_out = {t.instruction for t in (*SUITE.tasks("validation"), *SUITE.tasks("test"))}
    assert not held_out & wrapped
    assert not any(i in text for i in held_out)


def _first_prompt_len(tokenizer: Any, harness: Any, task: Task) -> int:
    state = harness.start(task, "probe")
    tools = ([t.openai() for t in offered_tools(harness, state)] if harness.native_tools
             else None)
    ids = tokenizer.apply_chat_template([m.openai() for m in state.history], tools=tools,
                                        add_generation_prompt=True, tokenize=True,
                                        return_dict=False)
    return len(ids)


def test_micro_model_on_the_corpus_keeps_prompts_short(tmp_path: Path) -> None:
    """Measured (vocabulary 3072, 599,856 parameters, 4096 positions, ``words``
    pre-tokenizer): the first prompt of a micro configuration, for the longest eval task, is
    119-545 tokens (median 182); adapter:claude-code@1.0.98 2618, adapter:openclaw@2026.2.26
    1879 (its real exec/process schemas: 12 properties each); today's releases
    (2026-12-06): claude-code 2.1.332 3105 (its 12 tools offered before ToolSearch), gemini-cli
    0.61.0 3286, openclaw 2026.9.6 19173 (54 tool schemas: more than the model's positions).
    (With Qwen's pre-tokenizer, before the schemas were completed: 110-523, median 153; 2364
    and 1289.)"""
    transformers = pytest.importorskip("transformers")
    from typer.testing import CliRunner

    from harnessgrid.cli import app

    path = tmp_path / "micro"  # built as a user would, then as the demo does (a cache hit)
    built = CliRunner().invoke(app, ["model", "tiny", str(path), "--size", "micro"])
    assert built.exit_code == 0, built.output
    assert build_micro_model(path) == path
    assert "micro" in built.output
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForCausalLM.from_pretrained(path)
    params = sum(p.numel() for p in model.parameters())
    assert 300_000 <= params <= 800_000
    positions = model.config.max_position_embeddings
    longest = max((t for ts in EVAL.values() for t in ts[:1]), key=lambda t: len(t.instruction))
    lengths = [_first_prompt_len(tokenizer, compose(c), longest) for c in CONFIGS]
    assert max(lengths) <= 600
    assert statistics.median(lengths) <= 200
    registry = get_registry()
    shells = {name: _first_prompt_len(tokenizer, registry.adapter(name).create(), longest)
              for name in ADAPTERS}
    assert shells["claude-code@1.0.98"] <= 2_700
    assert shells["openclaw@2026.2.26"] <= 1_900
    # the previous releases leave room for the turns that follow
    assert max(shells["claude-code@1.0.98"], shells["openclaw@2026.2.26"]) + 1_000 <= positions
    # today's Claude Code and Gemini CLI fit with less room; today's OpenClaw does not fit
    assert shells["claude-code"] <= 3_200
    assert shells["gemini-cli"] <= 3_400
    assert shells["openclaw"] > positions
    # the cache key holds the corpus: the same call reuses the build, a default build does not
    info = json.loads((path / "harnessgrid_tiny_model.json").read_text())
    assert info["size"] == "micro"
    assert len(info["corpus_sha256"]) == 64
    assert info["pretokenizer"] == "words"
    # every file name stem is one token, the same one wherever the name stands: copying a name
    # from the instruction into a call is copying a token
    for word in WORDS:
        ids = {tuple(tokenizer(text.format(w=word))["input_ids"][1:2])
               for text in ("a {w}.txt", "'{w}.md'", "\n{w}.log", '="{w}.txt"', "/{w}.md")}
        assert len(ids) == 1, (word, ids)


def test_default_build_is_unchanged(tiny_model_dir: Path, tmp_path: Path) -> None:
    """No corpus, no vocab_size: the same vocabulary and merges as before these parameters
    existed (digests pinned from the earlier builder), and the same cache key."""
    import hashlib

    from harnessgrid.policies.tiny_model import VOCAB_SIZE, build_tiny_model

    data = json.loads((tiny_model_dir / "tokenizer.json").read_text())
    vocab, merges = data["model"]["vocab"], data["model"]["merges"]
    digest = hashlib.sha256(json.dumps(sorted(vocab.items())).encode()).hexdigest()[:16]
    assert (len(vocab), len(merges), digest) == (2075, 1819, "d2a8b55f424eeb3f")
    info = json.loads((tiny_model_dir / "harnessgrid_tiny_model.json").read_text())
    assert info == {"builder_version": 1, "size": "tiny", "seed": 0}
    explicit = build_tiny_model(tmp_path / "explicit", corpus=[], vocab_size=VOCAB_SIZE)
    for name in ("tokenizer.json", "config.json", "model.safetensors"):
        assert (explicit / name).read_bytes() == (tiny_model_dir / name).read_bytes(), name
    other = build_tiny_model(tmp_path / "other", vocab_size=1024)
    assert len(json.loads((other / "tokenizer.json").read_text())["model"]["vocab"]) < 1024
    with pytest.raises(ValueError, match="vocab_size"):
        build_tiny_model(tmp_path / "bad", vocab_size=100)
