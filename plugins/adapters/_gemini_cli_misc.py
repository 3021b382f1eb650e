"""Gemini CLI's tools without a workspace effect: the web tools (offline in a sandbox),
update_topic, the background-process tools, invoke_agent, activate_skill and plan mode.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from harnessgrid.plugins.adapters._gemini_cli_files import snippet, written
from harnessgrid.plugins.adapters._gemini_cli_session import Answer, Session, fail, ok
from harnessgrid.plugins.adapters._gemini_cli_tools import SUBAGENTS

PLAN_MODE_DENIAL = (
    "Tool execution denied by policy. You are in Plan Mode and cannot modify source code. "
    "You may ONLY use write_file or replace to save plans to the designated plans directory "
    "as .md files.")


#: Why the web search fails in a sandbox: node's fetch without a network.
OFFLINE_REASON = "fetch failed"


def google_web_search(args: dict[str, Any]) -> Answer:
    return fail(f'Error during web search for query "{args["query"]}": Failed to generate '
                f"content with model gemini-3-flash-preview: {OFFLINE_REASON}")


def _prompt_urls(prompt: str) -> tuple[list[str], list[str]]:
    """``parsePrompt``: the http(s) URLs among the prompt's words (any word with ``://``),
    and what is wrong with the others."""
    from urllib.parse import urlsplit

    urls, errors = [], []
    for word in prompt.split():
        if "://" not in word:
            continue
        try:
            parts = urlsplit(word)
        except ValueError:
            errors.append(f'Malformed URL detected: "{word}".')
            continue
        if parts.scheme.lower() not in ("http", "https"):
            errors.append(f'Unsupported protocol in URL: "{word}". Only http and https are '
                          "supported.")
        elif not parts.hostname:
            errors.append(f'Malformed URL detected: "{word}".')
        else:
            urls.append(_normalized(parts))
    return urls, errors


def _normalized(parts: Any) -> str:
    """``normalizeUrl``: host lower-cased, default port and a trailing ``/`` dropped."""
    path = parts.path or "/"
    if path.endswith("/") and len(path) > 1:
        path = path[:-1]
    default = {"http": 80, "https": 443}[parts.scheme.lower()]
    port = f":{parts.port}" if parts.port not in (None, default) else ""
    query = f"?{parts.query}" if parts.query else ""
    fragment = f"#{parts.fragment}" if parts.fragment else ""
    return f"{parts.scheme.lower()}://{parts.hostname}{port}{path}{query}{fragment}"


def web_fetch(args: dict[str, Any]) -> Answer:
    """Offline, every host fails its address lookup, which the CLI counts as a blocked one."""
    if not args["prompt"].strip():
        return fail("The 'prompt' parameter cannot be empty and must contain URL(s) and "
                    "instructions.")
    urls, errors = _prompt_urls(args["prompt"])
    if errors:
        return fail("Error(s) in prompt URLs:\n- " + "\n- ".join(errors))
    if not urls:
        return fail("The 'prompt' must contain at least one valid URL (starting with http:// "
                    "or https://).")
    return fail("All requested URLs were skipped: "
                + ", ".join(f"[Blocked Host] {url}" for url in dict.fromkeys(urls)))


def update_topic(args: dict[str, Any]) -> Answer:
    text = (f'Current topic: "{args.get("title", "")}"\nTopic summary: '
            f'{args.get("summary") or "..."}\n\nStrategic Intent: {args["strategic_intent"]}')
    return ok(text)


def background(name: str, args: dict[str, Any]) -> Answer:
    """The sandbox keeps no process past its command: there is never a background one."""
    if name == "list_background_processes":
        return ok("No background processes found.")
    return fail(f"Background process history lookup failed for PID {args['pid']}")


def invoke_agent(session: Session, args: dict[str, Any]) -> Answer:
    name = args["agent_name"]
    if session.plan_mode and name not in PLAN_AGENTS:
        return fail(PLAN_MODE_READ_ONLY)
    if name not in SUBAGENTS:
        return fail(f"Subagent '{name}' not found.")
    return fail(f"Subagent '{name}' is not available in this emulation: its run needs its own "
                "model session.")


def activate_skill(args: dict[str, Any]) -> Answer:
    return fail(f"Skill '{args['name']}' is not available in this emulation: its files are not "
                "in the sandbox.")


def enter_plan_mode(session: Session) -> Answer:
    session.plan_mode = True
    return ok("Switching to Plan mode.")


#: plan.toml's ``argsPattern``s that let write_file/replace through in plan mode: a plan
#: ``.md`` under ``.gemini/tmp/<project>[/<session>]/plans/``, or a bare name (``plans/``
#: and ``./`` allowed before it). Anything else is the policy's denial.
_PLAN_PATH = re.compile(r"(?:.*/\.gemini/tmp/[\w-]+/(?:[\w-]+/)?plans/[\w-]+\.md"
                        r"|(?:\./)?\.gemini/tmp/[\w-]+/(?:[\w-]+/)?plans/[\w-]+\.md"
                        r"|(?:\./)?(?:plans/)?[\w-]+\.md)")
PLAN_MODE_READ_ONLY = ("Tool execution denied by policy. You are in Plan Mode with access to "
                       "read-only tools. Execution of scripts (including those from skills) is "
                       "blocked.")
PLAN_AGENTS = ("codebase_investigator", "cli_help")  # plan.toml lets these two run


def plan_edit(session: Session, name: str, args: dict[str, Any]) -> Answer:
    """write_file / replace in plan mode: only plan files, kept in the session."""
    path = args["file_path"]
    if not _PLAN_PATH.fullmatch(path):
        return fail(PLAN_MODE_DENIAL)
    plan = path if path.startswith("/") else f"{session.plans_dir}/{posixpath.basename(path)}"
    if posixpath.dirname(plan) != session.plans_dir:
        return fail(f"Access denied: plan path ({plan}) must be within the designated plans "
                    f"directory ({session.plans_dir}).")
    old = session.plans.get(plan)
    if name == "write_file":
        session.plans[plan] = args["content"]
        return ok(written(plan, old, args["content"]))
    if old is None or args["old_string"] not in old:
        return fail(f"File not found: {plan}" if old is None else
                    f"Could not find an exact match for 'old_string' in '{plan}'.")
    session.plans[plan] = old.replace(args["old_string"], args["new_string"], 1)
    text = (f"Successfully modified file: {plan} (1 replacements). Here is the updated code:"
            f"\n{snippet(old, session.plans[plan])}")
    return ok(text)


def exit_plan_mode(session: Session, args: dict[str, Any]) -> Answer:
    """Non-interactive runs approve the plan at once (plan.toml) and go back to yolo."""
    session.plan_mode = False
    text = ("Plan approved. Switching to YOLO mode (all tool calls auto-approved).\n\n"
            f"The approved implementation plan is stored at: {session.plans_dir}/"
            f"{args['plan_filename']}\nRead and follow the plan strictly during "
            "implementation.")
    return ok(text)
