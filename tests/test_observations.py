"""The built-in observation levels: total, deterministic, capped, and visibly different."""

from __future__ import annotations

import json
import re
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessgrid.levels import ObservationLevel
from harnessgrid.models import ACTION_ARGS, Action, FormatError, ToolResult
from harnessgrid.plugin_system.registry import PluginManager
from harnessgrid.plugins.factors.observation import annotated, raw, structured
from harnessgrid.plugins.factors.observation.annotated import AnnotatedObservation
from harnessgrid.plugins.factors.observation.raw import RawObservation
from harnessgrid.plugins.factors.observation.structured import StructuredObservation

MODULES = [f"harnessgrid.plugins.factors.observation.{m}"
           for m in ("raw", "structured", "annotated")]
RAW, STRUCT, ANN = RawObservation(), StructuredObservation(), AnnotatedObservation()
LEVELS: list[ObservationLevel] = [RAW, STRUCT, ANN]
SHELL = Action.of("shell", command="make test")

long_text = st.one_of(st.text(max_size=50), st.builds(
    lambda s, n: s * n, st.text(min_size=1, max_size=30), st.integers(0, 3_000)))
results = st.builds(
    ToolResult,
    output=long_text, stderr=long_text,
    exit_code=st.none() | st.integers(-(2**31), 2**31 - 1),
    error=st.none() | long_text,
    truncated=st.booleans(), timed_out=st.booleans(),
    duration_s=st.floats(allow_nan=True, allow_infinity=True))
actions = st.sampled_from(tuple(ACTION_ARGS)).flatmap(lambda kind: st.fixed_dictionaries(
    {a: st.text(max_size=200) for a in ACTION_ARGS[kind]}).map(
        lambda args: Action(kind=kind, args=args)))  # type: ignore[arg-type]


def test_each_module_registers_its_level_as_a_plugin() -> None:
    reg = PluginManager(builtins=MODULES, load_external=False).registry()
    assert reg.levels("observation") == ["annotated", "raw", "structured"]
    assert reg.level("observation", "structured") is StructuredObservation


# -- properties shared by all levels ---------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(actions, results)
def test_format_is_total_deterministic_and_bounded(action: Action, result: ToolResult) -> None:
    for level in LEVELS:
        text = level.format(action, result)
        assert isinstance(text, str)
        assert text
        assert text == level.format(action, result)
        text.encode("utf-8")  # always sendable
    assert len(RAW.format(action, result)) <= raw.CAP + 40
    assert len(ANN.format(action, result)) <= 20_000
    # structured: JSON escapes may lengthen the text, but the decoded fields are capped
    data = json.loads(STRUCT.format(action, result))
    assert sum(len(data[k] or "") for k in ("stdout", "stderr", "error")) <= 3 * 4_100


@settings(max_examples=100, deadline=None)
@given(actions, results)
def test_the_three_levels_show_a_result_differently(action: Action, result: ToolResult) -> None:
    shown = [level.format(action, result) for level in LEVELS]
    for a, b in combinations(shown, 2):
        assert a != b


@settings(max_examples=100, deadline=None)
@given(long_text)
def test_format_error_is_total_and_differs_per_level(message: str) -> None:
    error = FormatError(message)
    shown = [level.format_error(error) for level in LEVELS]
    for a, b in combinations(shown, 2):
        assert a != b
    assert shown == [level.format_error(error) for level in LEVELS]
    assert json.loads(shown[1])["ok"] is False


def test_format_error_carries_the_message() -> None:
    error = FormatError("unknown tool <read>; the tools are <view>, <create>")
    assert RAW.format_error(error) == f"Error: {error.message}"
    assert json.loads(STRUCT.format_error(error))["error"] == f"invalid tool call: {error.message}"
    shown = ANN.format_error(error)
    assert shown.startswith("[format error]")
    assert error.message in shown
    assert "hint:" in shown


# -- raw -------------------------------------------------------------------------------------

def test_raw_is_verbatim_stdout_then_stderr() -> None:
    result = ToolResult(output="a\n  b\t\n", stderr="warning: x\n", exit_code=0)
    assert RAW.format(SHELL, result) == "a\n  b\t\nwarning: x\n"
    assert RAW.format(SHELL, ToolResult(output="a", stderr="b", exit_code=2)) == \
        "a\nb\n[exit code 2]"
    assert RAW.format(SHELL, ToolResult(exit_code=0)) == "(no output)"
    assert RAW.format(SHELL, ToolResult(error="'x' does not exist")) == \
        "Error: 'x' does not exist"


@settings(max_examples=50, deadline=None)
@given(st.integers(raw.CAP + 1, 3 * raw.CAP))
def test_raw_cuts_at_the_cap_without_structure(size: int) -> None:
    out = "".join(chr(97 + i % 26) for i in range(size))
    text = RAW.format(SHELL, ToolResult(output=out, exit_code=0))
    assert text == out[:raw.CAP] + "\n" + raw.CUT


def test_raw_marks_output_the_sandbox_cut() -> None:
    assert RAW.format(SHELL, ToolResult(output="abc", truncated=True)).endswith("[output cut]")
    assert RAW.format(SHELL, ToolResult(output="x", timed_out=True)) == "x\n[timed out]"


# -- structured ------------------------------------------------------------------------------

@settings(max_examples=100, deadline=None)
@given(actions, results)
def test_structured_is_json_with_fixed_keys(action: Action, result: ToolResult) -> None:
    data = json.loads(STRUCT.format(action, result))
    assert list(data) == list(structured.KEYS)
    assert data["ok"] is result.ok
    limit = structured.HEAD + structured.TAIL + 60
    assert len(data["stdout"]) <= limit
    assert len(data["stderr"]) <= limit
    if len(result.output) > structured.HEAD + structured.TAIL:
        assert data["truncated"] is True
    if result.truncated:
        assert data["truncated"] is True


def test_structured_cuts_head_and_tail_and_says_how_much() -> None:
    out = "H" * 3_000 + "M" * 5_000 + "T" * 3_000
    data = json.loads(STRUCT.format(SHELL, ToolResult(output=out, stderr="é", exit_code=1)))
    assert data["stdout"] == "H" * 2_000 + "\n[... 7,000 chars dropped ...]\n" + "T" * 2_000
    assert data == {**data, "ok": False, "exit_code": 1, "stderr": "é", "truncated": True,
                    "error": None}
    assert '"é"' in STRUCT.format(SHELL, ToolResult(stderr="é"))  # ensure_ascii=False


def test_structured_reports_errors_and_timeouts() -> None:
    data = json.loads(STRUCT.format(SHELL, ToolResult(error="'a' does not exist")))
    assert (data["ok"], data["exit_code"], data["error"]) == (False, None, "'a' does not exist")
    data = json.loads(STRUCT.format(SHELL, ToolResult(timed_out=True, exit_code=None)))
    assert data["ok"] is False
    assert data["error"].startswith("timed out")


# -- annotated -------------------------------------------------------------------------------

def header(text: str) -> str:
    return text.split("\n", 1)[0]


@settings(max_examples=100, deadline=None)
@given(actions, results)
def test_annotated_header_is_one_line_with_the_status(action: Action, result: ToolResult) -> None:
    head = header(ANN.format(action, result))
    status = re.match(r"\[(ok|failed[^\]]*|timed out)\] ", head)
    assert status is not None, head
    assert (status.group(1) == "ok") is result.ok
    assert len(head) < 400


def test_annotated_read_is_line_numbered() -> None:
    text = ANN.format(Action.of("read", path="notes.txt"),
                      ToolResult(output="alpha\nbeta\ngamma\n", duration_s=0.012))
    assert text == ("[ok] read notes.txt | 0.01s | 17 chars | lines 1-3 of 3\n"
                    "1| alpha\n2| beta\n3| gamma")


def test_annotated_header_leaves_out_a_time_that_is_not_known() -> None:
    """An episode that hides durations (``EpisodeLimits.durations``, the default) hands the
    level NaN: the header has no time field rather than a placeholder; a clock's nonsense
    (negative, infinite) shows as ``?s``."""
    read = Action.of("read", path="notes.txt")
    hidden = ANN.format(read, ToolResult(output="alpha\n", duration_s=float("nan")))
    assert header(hidden) == "[ok] read notes.txt | 6 chars | lines 1-1 of 1"
    failed = ANN.format(read, ToolResult(error="no such file", duration_s=float("nan")))
    assert header(failed) == "[failed] read notes.txt"
    for nonsense in (float("inf"), -1.0):
        text = ANN.format(read, ToolResult(output="alpha\n", duration_s=nonsense))
        assert header(text) == "[ok] read notes.txt | ?s | 6 chars | lines 1-1 of 1"


def test_annotated_long_read_shows_head_and_tail_and_how_to_see_more() -> None:
    out = "".join(f"row {i}\n" for i in range(1, 1001))
    text = ANN.format(Action.of("read", path="big.csv"), ToolResult(output=out))
    head = header(text)
    shown = re.search(r"lines 1-(\d+) and (\d+)-1000 of 1000", head)
    assert shown is not None, head
    first, last = int(shown.group(1)), int(shown.group(2))
    assert f"\n{first:>4}| row {first}\n" in text
    assert f"{first + 1:>4}| row" not in text
    assert f"{last:>4}| row {last}\n" in text
    assert text.rstrip().endswith("sed -n 'FROM,TOp' big.csv]")
    assert f"{last - first - 1:,} lines not shown" in text
    assert len(text) < annotated.MAIN_BUDGET + 2_000


def test_annotated_shell_output_with_stderr() -> None:
    text = ANN.format(SHELL, ToolResult(output="ok 1\nok 2\n", stderr="FAILED x\n",
                                        exit_code=1, duration_s=2.5))
    assert text.split("\n") == [
        ("[failed, exit 1] shell make test | 2.50s | 19 chars | lines 1-2 of 2; "
         "stderr lines 1-1 of 1"),
        "ok 1", "ok 2", "--- stderr ---", "FAILED x"]


@pytest.mark.parametrize(("action", "result", "hint"), [
    (Action.of("read", path="nope.txt"), ToolResult(error="'nope.txt' does not exist"),
     "list the directory"),
    (SHELL, ToolResult(stderr="bash: line 1: mak: command not found\n", exit_code=127),
     "command not found"),
    (SHELL, ToolResult(exit_code=127), "command not found"),
    (SHELL, ToolResult(stderr="touch: /etc/x: Permission denied\n", exit_code=1),
     "only the workspace is writable"),
    (SHELL, ToolResult(timed_out=True, duration_s=30.0), "ran out of time"),
    (Action.of("edit", path="a.py", old="x", new="y"),
     ToolResult(error="the text to replace was not found in 'a.py' (0 occurrences)"),
     "read the file again"),
    (SHELL, ToolResult(stderr="old text found 0 times, expected 1", exit_code=1),
     "read the file again"),
])
def test_annotated_hints_on_common_errors(action: Action, result: ToolResult, hint: str) -> None:
    text = ANN.format(action, result)
    assert header(text).startswith("[failed" if not result.timed_out else "[timed out]")
    hints = [line for line in text.split("\n") if line.startswith("hint: ")]
    assert any(hint in line for line in hints), text


def test_annotated_success_has_no_hint() -> None:
    assert "hint:" not in ANN.format(SHELL, ToolResult(output="no such file: fine", exit_code=0))


def test_annotated_lists_and_searches_count_their_items() -> None:
    listing = ANN.format(Action.of("list"), ToolResult(output="a.txt\nsrc/\n"))
    assert header(listing).endswith("| entries 1-2 of 2")
    none = ANN.format(Action.of("search", pattern="x"), ToolResult(output="no matches"))
    assert header(none).endswith("| 0 matches")
    assert "search x in ." in header(none)
