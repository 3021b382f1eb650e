"""Which API key a policy sends, and to whom.

A provider's key variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``) holds the user's key for
that provider. It goes to the provider's own API, or to the server the provider's base-URL
variable names (``OPENAI_BASE_URL``: the two are set together, for a proxy or a compatible
service). It never goes to a ``base_url`` passed as an option: that is a local model server,
a test server or a third party, and each would receive the user's key. A key for such a
server is passed as ``api_key=...`` or, to keep it off the command line, ``api_key_env=NAME``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from harnessgrid.errors import ConfigError


@dataclass(frozen=True)
class Key:
    """The key to send (None: none), where it came from (for hints), which of the provider's
    variables was set but withheld from this server, and whether the provider's variables may
    go to it at all (``paired``: its own API or its base-URL variable's server)."""

    value: str | None
    source: str
    withheld: str | None = None
    paired: bool = True


def at_host(base_url: str | None, host: str) -> bool:
    """Whether ``base_url`` points at ``host`` (a provider's own API)."""
    return base_url is not None and (urlsplit(base_url).hostname or "").lower() == host


def same_server(a: str | None, b: str | None) -> bool:
    """Whether two API roots name the same server and path (case of scheme and host, and a
    trailing slash, aside)."""
    if not a or not b:
        return False
    x, y = urlsplit(a.strip()), urlsplit(b.strip())
    return ((x.scheme.lower(), (x.netloc or "").lower(), x.path.rstrip("/"))
            == (y.scheme.lower(), (y.netloc or "").lower(), y.path.rstrip("/")))


def resolve_key(spec: str, *, api_key: str | None, api_key_env: str | None, variable: str,
                base_url: str | None, own_api: bool, base_variable: str) -> Key:
    """The key for a policy talking to ``base_url`` (None: the provider's default address,
    its own API or ``base_variable``'s server); ``own_api``: ``base_url`` is the provider's."""
    if api_key and api_key_env:
        raise ConfigError(f"{spec}: pass api_key or api_key_env, not both",
                          hint="api_key_env=NAME reads the key from the variable NAME")
    if api_key:
        return Key(api_key, "api_key")
    if api_key_env is not None:
        value = os.environ.get(api_key_env) if isinstance(api_key_env, str) else None
        if not api_key_env or not value:
            raise ConfigError(f"{spec}: api_key_env={api_key_env!r} names no variable that is "
                              "set", hint=f"export {api_key_env or 'NAME'}=<the server's key>, "
                                          "or pass the name of the variable that holds it")
        return Key(value, api_key_env)
    env = os.environ.get(variable) or None
    if base_url is None or own_api or same_server(base_url, os.environ.get(base_variable)):
        return Key(env, variable if env else "")
    return Key(None, "", withheld=variable if env else None, paired=False)


def withheld_hint(key: Key, base_url: str | None) -> str | None:
    """What to tell a user whose server refused the request without a key we held back."""
    if key.withheld is None:
        return None
    return (f"the server at {base_url} wants a key; {key.withheld} is not sent to a base_url "
            f"given as an option (only to the provider's API or its base-URL variable's "
            "server): " + pass_option("api_key_env=NAME (the variable holding this server's "
                                     "key)", "api_key=..."))


def pass_option(*options: str) -> str:
    """"pass OPTION": worded for the command line and for Python alike (a product calling
    ``run_agent`` or ``Session`` has no ``--policy-opt``)."""
    return (f"pass the policy option {' or '.join(options)} (--policy-opt on the command line, "
            "policy_options={...} from Python)")
