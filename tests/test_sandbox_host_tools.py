"""Host tools: commands inside the real sandbox that call back to a handler on the host over
the command channel (``Sandbox.run(..., host_tools=HostTools(...))``)."""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_sandbox import FAST, IS_ROOT, _gone, processes_of

from harnessgrid.errors import HarnessgridError
from harnessgrid.sandboxing.sandbox import (
    HostTools,
    Sandbox,
    SandboxLimits,
    _answer_call,
    _frame,
    check_bwrap,
    sandbox_available,
)
from harnessgrid.sandboxing.workspace import Workspace

pytestmark = pytest.mark.skipif(not sandbox_available(), reason=f"no sandbox: {check_bwrap()}")

Handler = Callable[[str, dict[str, Any]], Awaitable[tuple[bool, str]]]


class Recorder:
    """A handler that records its calls and answers with them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        self.calls.append((name, arguments))
        if arguments.get("fail"):
            return False, f"no order {arguments.get('order_id')}"
        return True, f"{name}: {json.dumps(arguments, sort_keys=True)}"


def tools(handler: Handler) -> HostTools:
    return HostTools({"lookup_order": "Look up an order by its id.",
                      "cancel-order": "Cancel an order."}, handler)


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    with Workspace.create({"hello.txt": "hi\n"}, base_dir=tmp_path) as ws:
        yield ws


def slow_handler(started: asyncio.Event, cancelled: asyncio.Event) -> Handler:
    """A host tool that answers only after a minute; it sets ``started`` when called and
    ``cancelled`` when it is cancelled meanwhile."""
    async def handler(name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return True, "never"

    return handler


def run(ws: Workspace, episode: Callable[[Sandbox], Awaitable[None]], *,
        limits: SandboxLimits = FAST, unsafe: bool = False) -> None:
    async def main() -> None:
        async with Sandbox(ws, limits, unsafe_no_sandbox=unsafe) as sb:
            await episode(sb)

    asyncio.run(main())


# ---------------------------------------------------------------- calling forms


@pytest.mark.filterwarnings("ignore:harnessgrid. running shell commands WITHOUT")
@pytest.mark.parametrize("unsafe", [False, True], ids=["sandboxed", "unsafe"])
def test_json_and_flag_forms_reach_the_handler(ws: Workspace, unsafe: bool) -> None:
    handler = Recorder()

    async def episode(sb: Sandbox) -> None:
        got = await sb.run("lookup_order '{\"order_id\": \"A1\", \"n\": 3}'; "
                           "echo \"${PATH%%:*}\"", host_tools=tools(handler))
        assert got.exit_code == 0, got
        reply, tools_dir = got.stdout.splitlines()
        assert reply == 'lookup_order: {"n": 3, "order_id": "A1"}'
        flags = await sb.run("cancel-order --order-id A1 --include_items true --note='a b=c'",
                             host_tools=tools(handler))
        assert flags.exit_code == 0, flags
        # a tool's directory is gone with its command
        after = await sb.run(f"lookup_order; ls {tools_dir}")
        assert "lookup_order: command not found" in after.stderr
        assert "No such file or directory" in after.stderr

    run(ws, episode, unsafe=unsafe)
    assert handler.calls == [
        ("lookup_order", {"order_id": "A1", "n": 3}),
        ("cancel-order", {"order_id": "A1", "include_items": "true", "note": "a b=c"}),
    ]


def test_help_and_bad_usage_never_call_the_host(ws: Workspace) -> None:
    handler = Recorder()

    async def episode(sb: Sandbox) -> None:
        helped = await sb.run("lookup_order --help", host_tools=tools(handler))
        assert helped.exit_code == 0
        assert helped.stdout.startswith("lookup_order: Look up an order by its id.\nusage:")
        for bad, why in [("'[1, 2]'", "must be a JSON object, got list"),
                         ("'{\"a\": }'", "not valid JSON"),
                         ("'{\"a\": 1} trailing'", "extra text"),
                         ("--order_id A1 stray", "unexpected argument 'stray'"),
                         ("--order_id", "--order_id needs a value"),
                         ("--a 1 --a 2", "--a is given twice")]:
            result = await sb.run(f"lookup_order {bad}", host_tools=tools(handler))
            assert result.exit_code == 2, (bad, result)
            assert why in result.stderr, result
            assert "usage: lookup_order" in result.stderr, result

    run(ws, episode)
    assert handler.calls == []


def test_pipelines_subshells_and_child_processes(ws: Workspace) -> None:
    handler = Recorder()
    script = ("import subprocess; print(subprocess.run(['lookup_order', '--k', 'py'], "
              "capture_output=True, text=True).stdout, end='')")
    command = "\n".join([
        "x=$(lookup_order --k subst); echo \"[$x]\"",
        "lookup_order --k pipe | tr a-z A-Z",
        "bash -c 'lookup_order --k bash'",
        "sh -c 'lookup_order --k sh'",  # plain sh (dash here) too: the tools are files on PATH
        "timeout 5 lookup_order --k timeout",
        f"python3 -c {shlex.quote(script)}",
        "echo '{\"k\": \"xargs\"}' | xargs -0 lookup_order",
        "# a command this long reaches the shell as a file (fd 9): the tools are there too",
        "#" + "-" * 120_000,
    ])

    async def episode(sb: Sandbox) -> None:
        result = await sb.run(command, host_tools=tools(handler))
        assert result.exit_code == 0, result
        assert result.stdout.splitlines() == [
            '[lookup_order: {"k": "subst"}]',
            'LOOKUP_ORDER: {"K": "PIPE"}',
            'lookup_order: {"k": "bash"}',
            'lookup_order: {"k": "sh"}',
            'lookup_order: {"k": "timeout"}',
            'lookup_order: {"k": "py"}',
            'lookup_order: {"k": "xargs"}',
        ]

    run(ws, episode)


# ---------------------------------------------------------------- failures


def test_a_failing_or_raising_handler_is_exit_1_and_the_sandbox_lives_on(ws: Workspace) -> None:
    async def handler(name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        if "raise" in arguments:
            raise LookupError("database down")
        if "bad" in arguments:
            return "not a pair"  # type: ignore[return-value]
        return False, "no such order"

    async def episode(sb: Sandbox) -> None:
        refused = await sb.run("lookup_order --id 7; echo rc=$?", host_tools=tools(handler))
        assert refused.stdout == "rc=1\n"
        assert refused.stderr == "no such order\n"
        raised = await sb.run("lookup_order --raise 1", host_tools=tools(handler))
        assert raised.exit_code == 1
        assert "lookup_order failed on the host: LookupError: database down" in raised.stderr
        odd = await sb.run("lookup_order --bad 1", host_tools=tools(handler))
        assert odd.exit_code == 1
        assert "no (ok, text) pair" in odd.stderr
        assert (await sb.run("echo alive")).stdout == "alive\n"

    run(ws, episode)


def test_run_sync_and_bad_names_are_refused(ws: Workspace) -> None:
    handler = Recorder()
    with Sandbox(ws, FAST) as sb:
        with pytest.raises(HarnessgridError, match="run_sync"):
            sb.run_sync("true", host_tools=tools(handler))
        for name in ["-rf", "a b", "x/y", "", "é"]:
            bad = HostTools({name: "x"}, handler)
            with pytest.raises(HarnessgridError, match="cannot be a command"):
                asyncio.run(sb.run("true", host_tools=bad))
        assert sb.run_sync("echo ok").stdout == "ok\n"


# A hostile command skips the client: it talks to the tool socket itself.
RAW_CALL = """
import socket, sys, glob
path = glob.glob('/tmp/.hg-tools-*/.socket')[0]
def call(data, keep=False):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    if keep:
        return s
    out = b''
    try:
        while chunk := s.recv(65536):
            out += chunk
    except ConnectionResetError:
        pass
    return out
"""


def test_hostile_calls_get_errors_and_the_server_survives(ws: Workspace) -> None:
    handler = Recorder()
    probe = RAW_CALL + """
print(call(b'other\\n{}'))                      # a name not among the command's tools
print(call(b'no newline at all'))
print(call(b'lookup_order\\n[1, 2]'))          # a valid name, arguments no object
print(call(b'lookup_order\\n' + b'[' * 100000))  # nesting the host's parser cannot follow
print(call(b'lookup_order\\n\\xff\\xfe'))
print(call(b'lookup_order\\n' + b'x' * (3 << 20))[:80])  # over the 1 MiB cap
held = [call(b'lookup_order\\n{"held": 1}', keep=True) for _ in range(8)]
print(call(b'lookup_order\\n{"one": "too many"}')[:60])
print(held[0].recv(100))
"""

    async def handler_slow(name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        if "held" in arguments:
            await asyncio.sleep(1)  # the eight held calls fill every slot meanwhile
        return await handler(name, arguments)

    async def episode(sb: Sandbox) -> None:
        result = await sb.run(f"python3 -c {shlex.quote(probe)}",
                              host_tools=tools(handler_slow))
        lines = result.stdout.splitlines()
        assert result.exit_code == 0, result
        assert len(lines) == 8, result
        assert lines[0].startswith("b\"1'other' is not a host tool of this command; it has: "
                                   "cancel-order, lookup_order")
        assert lines[1].startswith("b\"1'no newline at all' is not a host tool")
        assert "must be a JSON object, not list" in lines[2]
        assert "not valid JSON" in lines[3]
        assert "not valid JSON" in lines[4]
        assert lines[5] == "b'1the call is larger than 1048832 bytes'"
        assert lines[6].startswith("b'1too many host tool calls at once (at most 8)")
        assert lines[7] == "b'0" + 'lookup_order: {"held": 1}' + "'"
        again = await sb.run("lookup_order --k v", host_tools=tools(handler))
        assert again.stdout == 'lookup_order: {"k": "v"}\n'
        assert sb.alive()

    run(ws, episode)
    assert [args for _, args in handler.calls].count({"held": 1}) == 8
    assert ("other", {}) not in handler.calls


def test_the_host_checks_the_name_again() -> None:
    handler = Recorder()
    answer = asyncio.run(_answer_call(tools(handler), "rm", b"{}"))
    assert answer == (False, "'rm' is not a host tool of this command")
    assert handler.calls == []


def test_a_late_reply_to_an_ended_call_is_ignored(ws: Workspace) -> None:
    """A reply the host sent just as its command ended reaches the server between commands."""

    async def episode(sb: Sandbox) -> None:
        assert sb._channel is not None
        sb._channel.send(_frame({"reply": 0, "ok": True, "text": "late"}))
        assert (await sb.run("echo next")).stdout == "next\n"

    run(ws, episode)


# ---------------------------------------------------------------- concurrency, size, time


def test_concurrent_calls_each_get_their_own_reply(ws: Workspace) -> None:
    """Six calls in flight at once (the handler holds each until all have arrived), with
    replies big enough to fill the pipes both ways while the server sends more calls."""
    arrived = 0
    all_in = asyncio.Event()

    async def handler(name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        nonlocal arrived
        arrived += 1
        if arrived == 6:
            all_in.set()
        await asyncio.wait_for(all_in.wait(), 20)
        return True, f"reply {arguments['i']} " + arguments["i"] * 200_000

    command = ("for i in 1 2 3 4 5 6; do lookup_order --i $i --pad \"$(head -c 100000 "
               "/dev/zero | tr '\\0' p)\" | cut -d' ' -f1,2 > out$i & done; wait; cat out*")

    async def episode(sb: Sandbox) -> None:
        result = await sb.run(command, host_tools=tools(handler), timeout_s=30)
        assert result.exit_code == 0, result
        assert result.stdout.splitlines() == [f"reply {i}" for i in range(1, 7)]

    # output_bytes below a call's size: a call's frame is not held to the output cap
    run(ws, episode, limits=SandboxLimits(wall_s=30, output_bytes=10_000))


def test_the_wall_limit_runs_on_while_the_host_answers(ws: Workspace) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()
    handler = slow_handler(started, cancelled)

    async def episode(sb: Sandbox) -> None:
        result = await sb.run("lookup_order", host_tools=tools(handler), timeout_s=1)
        assert result.timed_out
        assert result.killed == "timeout"  # the host never answered
        await asyncio.wait_for(cancelled.wait(), 5)  # nobody waits for it any more
        assert (await sb.run("echo next")).stdout == "next\n"

    run(ws, episode)


@pytest.mark.skipif(not IS_ROOT, reason="the private uid exists only when run as root")
def test_cancelled_while_the_handler_runs_leaves_no_process(ws: Workspace) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()
    handler = slow_handler(started, cancelled)

    async def episode() -> int:
        sb = Sandbox(ws, FAST)
        await sb.start()
        uid = int((await sb.run("id -u")).stdout)
        running = asyncio.create_task(
            sb.run("lookup_order --k v; sleep 30", host_tools=tools(handler)))
        await asyncio.wait_for(started.wait(), 10)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert cancelled.is_set()
        assert sb._interrupted
        await sb.close()
        assert _gone(uid)
        return uid

    uid = asyncio.run(episode())
    assert processes_of(uid) == []
