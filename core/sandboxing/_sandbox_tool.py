"""A host tool as a command inside the sandbox (see ``HostTools`` in
:mod:`harnessgrid.sandboxing.sandbox`).

Not imported by harnessgrid: for a command run with host tools, the command server writes
this source, after a ``#!<its interpreter> -IS`` line and before a call of :func:`main`, as
one executable file per tool in a private directory it puts first on the command's PATH; so
the tool runs from pipelines, subshells, ``sh -c``, ``timeout``, ``xargs`` and programs the
command starts alike. A call connects to the server's socket in that directory, sends the
tool's name, a newline and the arguments as a JSON object, and gets back ``0``/``1`` (ok or
not) followed by the text the host answered.

    NAME '{"key": "value"}'          one JSON object
    NAME --key value --other=value   flags: values are strings, the host converts them
    NAME --help                      the tool's description (no call)

Exit status: 0 with the answer on stdout; 1 when the tool failed (the reason on stderr);
2 for bad usage, which never reaches the host.
"""

from __future__ import annotations

import _json  # C modules: `json` and `socket` import re and enum, twice a call's start-up
import _socket
import sys

MAX_REQUEST = 1 << 20
"""Bytes of one call's arguments; the server refuses more."""


class Usage(Exception):
    """The command line is not a call of the tool."""


class Plain:
    """What ``_json``'s scanner reads off a ``json.JSONDecoder``: standard JSON, no hooks."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int = float, int
    parse_constant = {"-Infinity": -1e999, "Infinity": 1e999, "NaN": 1e999 - 1e999}.__getitem__

    def __init__(self) -> None:
        self.memo: dict[str, str] = {}


def json_object(text: str) -> str:
    """``text`` if it is one JSON object (which the host parses again), else :class:`Usage`."""
    start = len(text) - len(text.lstrip())
    try:
        value, end = _json.make_scanner(Plain())(text, start)  # type: ignore[arg-type]
    except StopIteration:
        raise Usage("the argument is not valid JSON") from None
    # Not only JSONDecodeError and RecursionError: without json.decoder imported, the C
    # scanner reports bad JSON as a SystemError.
    except Exception as exc:  # noqa: BLE001 - whatever the scanner raises is a usage error
        raise Usage(f"the argument is not valid JSON ({exc})") from None
    if text[end:].strip():
        raise Usage("the argument is not valid JSON: extra text after the object")
    if not isinstance(value, dict):
        raise Usage(f"the argument must be a JSON object, got {type(value).__name__}")
    return text.strip()


def parse(argv: list[str]) -> str:
    """The call's arguments, as a JSON object, from its command line (or :class:`Usage`)."""
    if len(argv) == 1 and not argv[0].startswith("--"):
        return json_object(argv[0])
    arguments: dict[str, str] = {}
    rest = list(argv)
    while rest:
        flag = rest.pop(0)
        if not flag.startswith("--") or len(flag) == 2:
            raise Usage(f"unexpected argument {flag!r}")
        key, eq, value = flag[2:].partition("=")
        if not eq:
            if not rest:
                raise Usage(f"--{key} needs a value: --{key} VALUE or --{key}=VALUE")
            value = rest.pop(0)
        key = key.replace("-", "_")  # --order-id names the parameter order_id
        if key in arguments:
            raise Usage(f"--{key} is given twice")
        arguments[key] = value
    text = _json.encode_basestring_ascii
    return "{" + ", ".join(f"{text(k)}: {text(v)}" for k, v in arguments.items()) + "}"


def usage(name: str, description: str) -> str:
    return (
        f"{name}: {description}\n"
        f"usage: {name} '{{\"key\": \"value\", ...}}'   (one JSON object)\n"
        f"   or: {name} --key value [--key=value ...]   (values are converted by the tool)\n"
    )


def call(path: str, request: bytes) -> bytes:
    """Send ``request`` to the server's socket at ``path``; its answer (empty when none)."""
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.connect(path)
        try:
            conn.sendall(request)
            conn.shutdown(_socket.SHUT_WR)
        except OSError:  # refused before we finished (too many calls): its reason may follow
            pass
        chunks: list[bytes] = []
        while True:
            try:
                chunk = conn.recv(1 << 16)
            except ConnectionResetError:  # refused with our request unread: its answer came
                chunk = b""
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        conn.close()


def main(name: str, description: str, path: str, argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv in (["--help"], ["-h"]):
        sys.stdout.buffer.write(usage(name, description).encode("utf-8", "replace"))
        return 0
    try:
        arguments = parse(argv)
    except Usage as exc:
        sys.stderr.write(f"{name}: {exc}\n{usage(name, description)}")
        return 2
    request = (name + "\n" + arguments).encode("utf-8", "surrogateescape")
    if len(request) > MAX_REQUEST:
        sys.stderr.write(f"{name}: the arguments are {len(request)} bytes, more than the "
                         f"{MAX_REQUEST} a call may send\n")
        return 2
    try:
        answer = call(path, request)
    except OSError as exc:
        sys.stderr.write(f"{name}: cannot reach the host: {exc}\n")
        return 1
    if not answer:
        sys.stderr.write(f"{name}: the host did not answer\n")
        return 1
    ok, text = answer[:1] == b"0", answer[1:]
    if text and not text.endswith(b"\n"):
        text += b"\n"
    stream = sys.stdout if ok else sys.stderr
    stream.flush()
    stream.buffer.write(text)
    stream.flush()
    return 0 if ok else 1
