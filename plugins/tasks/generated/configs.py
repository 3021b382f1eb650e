"""Config families: JSON, INI and YAML edits whose target values must be looked up first.

Each one hides the value or the scope of the change somewhere the agent has to read (a service
table, a startup log, a tree of deploy files), and grades the requested change separately from
"everything else is unchanged", so a sloppy rewrite loses points even when the change is right.
"""

from __future__ import annotations

import configparser
import random
from pathlib import Path
from typing import Any

import yaml

from .base import Draft, family
from .common import (
    APPS,
    COMPONENTS,
    REGIONS,
    WORDS,
    dumps,
    edit,
    flag,
    load_json,
    pick,
    read,
    search,
    sh,
    text,
    write,
)


def _flatten(value: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    if isinstance(value, dict) and value:
        out: dict[tuple[str, ...], Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, (*prefix, str(k))))
        return out
    return {prefix: value}


_LEVELS = ("debug", "info", "warning", "error")


@family("json_config_fix", tags=("observation_reading", "workflow_compliance"),
        difficulty=(1, 2), category="config",
        summary="back up a JSON config, then point it at a service looked up in a table")
def json_config_fix(rng: random.Random, long: bool) -> Draft:
    app = rng.choice(APPS)
    flags = pick(rng, WORDS, 3)
    cfg: dict[str, Any] = {
        "name": app,
        "server": {"host": "0.0.0.0", "port": rng.randint(8000, 8999),
                   "workers": rng.randint(2, 16)},
        "database": {"host": f"db-{rng.choice(WORDS)}.internal", "port": 5432,
                     "name": f"{app}_{rng.choice(('prod', 'main', 'live'))}",
                     "pool_size": rng.randint(5, 40)},
        "logging": {"level": rng.choice(_LEVELS), "file": f"/var/log/{app}.log"},
        "features": {f: rng.random() < 0.5 for f in flags},
    }
    services = []
    for comp in pick(rng, COMPONENTS, rng.randint(4, 7)):
        services.append((f"{comp}-db", f"10.{rng.randint(0, 9)}.{rng.randint(0, 255)}."
                         f"{rng.randint(2, 254)}", rng.randint(5400, 5499)))
    services.append((f"{app}-db-replica", f"10.9.{rng.randint(0, 255)}.{rng.randint(2, 254)}",
                     rng.randint(5400, 5499)))
    target = (f"{app}-db", f"10.{rng.randint(0, 9)}.{rng.randint(0, 255)}.{rng.randint(2, 254)}",
              rng.randint(5400, 5499))
    services.insert(rng.randint(0, len(services)), target)
    table = "# service                 host              port\n" + "".join(
        f"{s:<25} {h:<17} {p}\n" for s, h, p in services)
    new_level = rng.choice([lv for lv in _LEVELS if lv != cfg["logging"]["level"]])
    changes: dict[tuple[str, ...], Any] = {("database", "host"): target[1],
                                           ("database", "port"): target[2],
                                           ("logging", "level"): new_level}
    removed: tuple[str, ...] | None = None
    extra = ""
    hard = rng.random() < 0.5
    if hard:
        removed = ("features", rng.choice(flags))
        workers = rng.choice([w for w in range(2, 17) if w != cfg["server"]["workers"]])
        changes[("server", "workers")] = workers
        extra = (f" Also set `server.workers` to {workers} and delete the key "
                 f"`{'.'.join(removed)}`.")
    path, backup = f"config/{app}.json", f"config/{app}.json.bak"
    original = dumps(cfg)
    want = _flatten(cfg)
    want.update(changes)
    if removed:
        del want[removed]
    instruction = (
        f"First copy {path} to {backup} (an exact copy of the current file). Then edit {path}: "
        f"set `database.host` and `database.port` to the host and port that "
        f"infra/services.txt lists for the service `{target[0]}` (the port as a JSON number), "
        f"and set `logging.level` to \"{new_level}\".{extra} Keep every other key and value as "
        f"it is; the file must stay valid JSON (indentation is up to you).")
    new_cfg = deep_copy(cfg)
    for keys, value in changes.items():
        new_cfg[keys[0]][keys[1]] = value
    if removed:
        del new_cfg[removed[0]][removed[1]]

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        data = load_json(ws, path)
        got = _flatten(data) if isinstance(data, dict) else {}
        done = sum(got.get(k) == v and type(got.get(k)) is type(v) for k, v in changes.items())
        others = {k: v for k, v in want.items() if k not in changes}
        rest = {k: v for k, v in got.items() if k not in changes}
        return {"backup": flag(text(ws, backup) == original),
                "valid_json": flag(isinstance(data, dict)),
                "changes": done / len(changes),
                "others_unchanged": flag(isinstance(data, dict) and rest == others)}

    return Draft(instruction=instruction, files={path: original, "infra/services.txt": table},
                 check=check,
                 plan=[read(path), read("infra/services.txt"), sh(f"cp {path} {backup}"),
                       write(path, dumps(new_cfg)), read(path)],
                 params={"cfg": cfg, "services": services, "level": new_level,
                         "changes": sorted([list(k), v] for k, v in changes.items()),
                         "removed": removed},
                 difficulty=2 if hard else 1)


def deep_copy(value: Any) -> Any:
    """Deep copy of plain JSON-like data (dicts, lists, scalars)."""
    if isinstance(value, dict):
        return {k: deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [deep_copy(v) for v in value]
    return value


#: INI keys and how to draw a valid value, an invalid value and the log's complaint.
_INI_KEYS: dict[str, tuple[str, ...]] = {
    "server": ("host", "port", "workers", "timeout_s", "debug"),
    "database": ("host", "port", "pool_size", "retries", "ssl"),
    "cache": ("backend", "ttl_s", "max_items", "enabled"),
    "logging": ("level", "file", "rotate", "keep_days"),
    "worker": ("concurrency", "queue", "retries", "verbose"),
}
_INTS = {"port", "workers", "timeout_s", "pool_size", "retries", "ttl_s", "max_items",
         "keep_days", "concurrency"}
_BOOLS = {"debug", "ssl", "enabled", "rotate", "verbose"}


def _valid(rng: random.Random, key: str, app: str) -> str:
    if key in _INTS:
        return str(rng.randint(2, 9000) if key == "port" else rng.randint(2, 90))
    if key in _BOOLS:
        return rng.choice(("true", "false"))
    return {"host": f"{rng.choice(WORDS)}.internal", "backend": rng.choice(("redis", "memory")),
            "level": rng.choice(_LEVELS), "file": f"/var/log/{app}.log",
            "queue": f"{app}-{rng.choice(WORDS)}"}[key]


_BAD_INT = ("twenty", "30s", "ten", "5k", "many", "12.5.1", "none", "x8", "eight")
_BAD_BOOL = ("yes please", "maybe", "on-ish", "truthy", "nope", "2")
_BAD_LEVEL = ("LOUD", "verbose-ish", "quiet", "all", "chatty")


@family("ini_config_fix", tags=("error_recovery", "observation_reading"), difficulty=(1, 2),
        category="config", summary="fix the INI keys a startup log reports as invalid (only "
        "ERROR lines), keeping comments and other keys")
def ini_config_fix(rng: random.Random, long: bool) -> Draft:
    app = rng.choice(APPS)
    sections = pick(rng, sorted(_INI_KEYS), rng.randint(3, 4))
    values: dict[tuple[str, str], str] = {}
    body = [f"; {app} service settings", ""]
    for sec in sections:
        body.append(f"[{sec}]")
        if rng.random() < 0.4:
            body.append(f"; {rng.choice(WORDS)} {rng.choice(WORDS)} settings")
        for key in rng.sample(_INI_KEYS[sec], rng.randint(3, len(_INI_KEYS[sec]))):
            values[(sec, key)] = _valid(rng, key, app)
        body.extend(f"{k} = {v}" for (s, k), v in values.items() if s == sec)
        body.append("")
    fixable = [sk for sk in values if sk[1] in _INTS | _BOOLS or sk[1] == "level"]
    hard = rng.random() < 0.5
    broken = rng.sample(fixable, 2 if hard and len(fixable) > 1 else 1)
    used_bad: set[str] = set()
    fixes: dict[tuple[str, str], str] = {}
    bad_of: dict[tuple[str, str], str] = {}
    log = [f"INFO {app}: starting (pid {rng.randint(100, 9999)})",
           f"INFO {app}: reading config/settings.ini"]
    for sec, key in broken:
        pool = _BAD_INT if key in _INTS else _BAD_BOOL if key in _BOOLS else _BAD_LEVEL
        bad = rng.choice([b for b in pool if b not in used_bad])
        used_bad.add(bad)
        good = values[(sec, key)]
        kind = ("an integer" if key in _INTS else "a boolean" if key in _BOOLS
                else "a log level")
        body[body.index(f"{key} = {good}", body.index(f"[{sec}]"))] = f"{key} = {bad}"
        fixes[(sec, key)] = good
        bad_of[(sec, key)] = bad
        log.append(f"ERROR config: [{sec}] {key} = '{bad}' is not {kind}; "
                   f"use {good}")
    others = [sk for sk in values if sk not in fixes and sk[1] in _INTS]
    if others:
        sec, key = rng.choice(others)
        log.insert(rng.randint(2, len(log)), f"WARN config: [{sec}] {key} = "
                   f"{values[(sec, key)]} looks unusual; consider {rng.randint(2, 90)}")
    log.append(f"ERROR {app}: startup aborted: invalid configuration")
    second = rng.randint(0, 30)
    log = [f"2024-03-04T10:00:{second + 2 * i + rng.randint(0, 1):02d} {line}"
           for i, line in enumerate(log)]
    ini = "\n".join(body).rstrip("\n") + "\n"
    comments = [ln for ln in body if ln.startswith(";")]
    path = "config/settings.ini"
    instruction = (
        f"The {app} service did not start. logs/startup.log explains why: every `ERROR "
        f"config:` line names a section and key of {path} that has an invalid value and, "
        f"after `use`, the value it must have. Set each of those keys to exactly that value. "
        f"`WARN` lines are not errors: do not act on them. Change nothing else in {path} (keep "
        f"its comments, sections and the other keys).")

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        content = text(ws, path)
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(content or "")
            got = {(s, k): v for s in parser.sections() for k, v in parser[s].items()}
            parsed = content is not None
        except configparser.Error:
            got, parsed = {}, False
        done = sum(got.get(sk) == v for sk, v in fixes.items())
        rest = {sk: v for sk, v in values.items() if sk not in fixes}
        return {"parses": flag(parsed), "fixed": done / len(fixes),
                "others_unchanged": flag(parsed and {sk: v for sk, v in got.items()
                                                     if sk not in fixes} == rest),
                "comments_kept": flag(content is not None
                                      and all(c in content.splitlines() for c in comments))}

    plan = [read("logs/startup.log"), read(path)]
    for (sec, key), good in fixes.items():
        plan.append(edit(path, f"{key} = {bad_of[(sec, key)]}", f"{key} = {good}"))
    plan.append(read(path))
    return Draft(instruction=instruction, files={path: ini,
                                                 "logs/startup.log": "\n".join(log) + "\n"},
                 check=check, plan=plan,
                 params={"ini": ini, "log": log}, difficulty=2 if len(fixes) > 1 else 1)


_ENVS = ("dev", "staging", "prod", "qa", "canary", "perf", "demo", "eu", "us", "sandbox")


@family("yaml_config_fix", tags=("tool_selection", "planning"), difficulty=(1, 2),
        category="config", summary="retag the image in exactly the YAML deploy files that use "
        "an old tag, and set replicas in one of them")
def yaml_config_fix(rng: random.Random, long: bool) -> Draft:
    app = rng.choice(APPS)
    major, minor, patch = rng.randint(1, 4), rng.randint(0, 12), rng.randint(0, 9)
    old = f"{major}.{minor}.{patch}"
    new = f"{major}.{minor}.{patch + 1}"
    others = [f"{major}.{minor - 1 if minor else minor + 2}.{rng.randint(0, 9)}",
              f"{major}.{minor}.{patch}-rc{rng.randint(1, 3)}", f"{major + 1}.0.0"]
    envs = pick(rng, _ENVS, rng.randint(3, 7))
    n_old = rng.randint(1, max(1, len(envs) - 1))
    tags = [old] * n_old + [rng.choice(others) for _ in envs[n_old:]]
    rng.shuffle(tags)
    files: dict[str, str] = {}
    docs: dict[str, dict[str, Any]] = {}
    for env, tag in zip(envs, tags, strict=True):
        doc = {"service": {"name": app, "image": f"registry.local/{app}:{tag}",
                           "replicas": rng.randint(1, 6)},
               "resources": {"cpu": f"{rng.choice((100, 250, 500, 1000))}m",
                             "memory": f"{rng.choice((256, 512, 1024))}Mi"},
               "env": {"LOG_LEVEL": rng.choice(_LEVELS), "REGION": rng.choice(REGIONS)}}
        docs[f"deploy/{env}.yaml"] = doc
        files[f"deploy/{env}.yaml"] = _yaml(doc)
    files["deploy/README.md"] = (f"# {app} deploys\n\nThe last release notes mention "
                                 f"registry.local/{app}:{old}; keep this file as it is.\n")
    scale_env = rng.choice(envs)
    scale_file = f"deploy/{scale_env}.yaml"
    replicas = rng.choice([r for r in range(2, 13)
                           if r != docs[scale_file]["service"]["replicas"]])
    targets = [p for p, d in docs.items() if d["service"]["image"].endswith(f":{old}")]
    want = {p: deep_copy(d) for p, d in docs.items()}
    for p in targets:
        want[p]["service"]["image"] = f"registry.local/{app}:{new}"
    want[scale_file]["service"]["replicas"] = replicas
    untouched = [p for p in files if p not in targets and p != scale_file]
    instruction = (
        f"Release {new} of {app} replaces {old}. In every deploy/*.yaml file whose "
        f"`service.image` has the tag `{old}` (the part after the last `:`), change that tag to "
        f"`{new}`; files whose image has any other tag must stay exactly as they are, and so "
        f"must the other files in deploy/. Also set `service.replicas` to {replicas} in "
        f"{scale_file}. Keep all other keys and values.")

    def check(ws: Path, transcript: list[dict[str, Any]]) -> dict[str, float]:
        got: dict[str, Any] = {}
        for p in docs:
            try:
                got[p] = yaml.safe_load(text(ws, p) or "")
            except yaml.YAMLError:
                got[p] = None
        return {"parses": sum(isinstance(g, dict) for g in got.values()) / len(docs),
                "retagged": sum(_get(got[p], "image") == want[p]["service"]["image"]
                                for p in targets) / len(targets),
                "replicas": flag(_get(got[scale_file], "replicas") == replicas),
                "others_unchanged": flag(all(text(ws, p) == files[p] for p in untouched)
                                         and all(_masked(got[p], want[p]) == want[p]
                                                 for p in docs))}

    plan = [search(f":{old.replace('.', chr(92) + '.')}$", "deploy")]
    for p in targets:
        plan.append(edit(p, f"image: registry.local/{app}:{old}",
                         f"image: registry.local/{app}:{new}"))
    plan.append(read(scale_file))
    plan.append(edit(scale_file, f"replicas: {docs[scale_file]['service']['replicas']}",
                     f"replicas: {replicas}"))
    return Draft(instruction=instruction, files=files, check=check, plan=plan,
                 params={"docs": docs, "old": old, "new": new, "scale": [scale_env, replicas]},
                 difficulty=2 if len(envs) > 4 else 1)


def _masked(got: Any, want: dict[str, Any]) -> Any:
    """``got`` with the separately graded fields (image, replicas) taken from ``want``."""
    if not isinstance(got, dict) or not isinstance(got.get("service"), dict):
        return got
    service = dict(got["service"])
    for key in ("image", "replicas"):
        if key in service:
            service[key] = want["service"][key]
    return {**got, "service": service}


def _get(doc: Any, key: str) -> Any:
    service = doc.get("service") if isinstance(doc, dict) else None
    return service.get(key) if isinstance(service, dict) else None


def _yaml(doc: dict[str, Any]) -> str:
    """Block-style YAML of two-level mappings, written by hand so the file layout is fixed."""
    out = []
    for section, body in doc.items():
        out.append(f"{section}:")
        out.extend(f"  {k}: {v}" for k, v in body.items())
    return "\n".join(out) + "\n"
