"""Environments: named, reproducible, read-only toolchains mounted into every sandbox of an
episode (issue 14).

Why: the sandbox shows only the host's ``/usr``; suites written for a prepared image (ClawGym
prompts say ``python script.py``, its graders import pandas) cannot be solved without one. An
environment is built once, outside the sandbox, and mounted read-only into the episode's
sandbox and its graders' sandboxes.

Two kinds:

- ``venv`` - a Python virtual environment built from a requirements list (uv when installed,
  else pip). It is content-addressed: its digest covers the requirements text, the base
  interpreter (path and version) and the platform, so the same inputs give the same directory
  and a second build is a cache hit. It is mounted at the *same absolute path* inside the
  sandbox as on the host: venv scripts carry absolute shebangs and ``pyvenv.cfg`` names the base
  interpreter, which the sandbox already shows read-only (it runs the command server). Its
  ``bin/`` comes first on PATH, so ``python`` and ``python3`` both work.
- ``rootfs`` - a directory holding a root file system (e.g. an exported OCI image): its
  ``/usr``, ``/bin``, ``/lib*`` and allowed ``/etc`` entries replace the host's in the sandbox.

Layout under :func:`env_root` (``$HARNESSGRID_ENV_DIR``, else
``$XDG_CACHE_HOME/harnessgrid/envs``, else ``~/.cache/harnessgrid/envs``)::

    store/<digest>/         a built venv, complete (its MARKER file is written before the
                            rename that makes it appear; nothing half-built ever has the name)
    store/.tmp-<digest>-*   a build in progress, or the wreck of a crashed one (swept later)
    names/<name>.json       the name -> record binding (written atomically)
    .lock                   serialises builds (flock)
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harnessgrid.environment_record import EnvironmentRecord as EnvironmentRecord
from harnessgrid.errors import ConfigError, HarnessgridError

__all__ = ["BUILTIN_REQUIREMENTS", "BUILTIN_SYSTEM_TOOLS", "ENV_DIR_VARIABLE", "MARKER",
           "EnvironmentRecord", "add_rootfs", "build_venv",
           "builtin_system_tools", "env_root", "get_environment", "list_environments",
           "missing_system_tools", "remove_environment", "resolve_episode_environment",
           "venv_digest"]

ENV_DIR_VARIABLE = "HARNESSGRID_ENV_DIR"
MARKER = ".harnessgrid-env.json"
"""Written into a venv before it is renamed into place: its presence means "built"."""

#: Requirements lists addressable by name: ``harnessgrid env build clawgym`` needs no file.
#: Pinned, so that the digest (and what graders see) is the same wherever it is built. Each is
#: what its suite's tasks name (``harnessgrid env check SUITE`` lists what they call): ClawGym's
#: graders and scripts use the data stack, and some tasks requests, flask or openpyxl;
#: PinchBench hands the agent spreadsheets (``.xlsx``) and PDFs to read.
BUILTIN_REQUIREMENTS: dict[str, str] = {
    "clawgym": ("flask==3.1.3\nnumpy==2.4.6\nopenpyxl==3.1.5\npandas==3.1.1\npytest==9.2.0\n"
                "pyyaml==6.0.4\nrequests==2.34.2\n"),
    "pinchbench": "numpy==2.4.6\nopenpyxl==3.1.5\npandas==3.1.1\npypdf==7.1.1\n",
}
#: Programs a built-in environment's tasks call that are no Python package, so a venv cannot
#: carry them (ClawGym task_0199's grader runs ruby). Sandboxes show the host's ``/usr``: the
#: host provides them (or a rootfs environment does); ``env build`` says which are missing.
BUILTIN_SYSTEM_TOOLS: dict[str, tuple[str, ...]] = {
    "clawgym": ("ruby",),
}
#: The Debian package of a system tool, for the hint (``apt-get install -y ...``).
SYSTEM_TOOL_PACKAGES: dict[str, str] = {"ruby": "ruby", "java": "default-jre-headless",
                                        "node": "nodejs", "Rscript": "r-base-core"}
#: Where a sandbox's commands find system programs: its PATH after the environment's ``bin/``
#: (``harnessgrid.sandboxing.sandbox``), over the host's ``/usr`` for a venv environment.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: JVM programs an environment's ``bin/`` wraps when the host has them (see
#: :func:`_write_jvm_launchers`), and the version of that wrapper (part of the digest).
JVM_TOOLS = ("java", "javac", "jar", "jarsigner", "javadoc", "javap", "jdeps", "jlink",
             "jshell", "keytool")
_JVM_LAUNCHER_VERSION = 1

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_BUILD_TIMEOUT_S = 1800.0


# ---------------------------------------------------------------------------- locations


def env_root() -> Path:
    """Where environments live (see the module doc for the order of precedence)."""
    override = os.environ.get(ENV_DIR_VARIABLE)
    if override:
        return Path(override).expanduser().absolute()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser().absolute() / "harnessgrid" / "envs"


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"environment name {name!r} is not valid",
                          hint="use 1-64 letters, digits, '.', '_' or '-', starting with a "
                               "letter or digit")
    return name


def _record_path(root: Path, name: str) -> Path:
    return root / "names" / f"{name}.json"


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def _build_lock(root: Path) -> Iterator[None]:
    """One build at a time per store: a second build of the same digest then finds it built."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------- venv builds


def base_interpreter() -> str:
    """The interpreter environments are built on: the one the sandbox's command server runs,
    whose install prefix every sandbox already mounts read-only."""
    return os.path.realpath(sys.executable)


def normalise_requirements(text: str) -> str:
    """The requirements as hashed and installed: comments, blank lines and stray spaces do not
    change an environment; order and content do."""
    lines = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if line:
            lines.append(line)
    return "".join(f"{line}\n" for line in lines)


def venv_digest(requirements: str, python: str | None = None) -> str:
    """Content address of a venv: requirements + base interpreter (path, version) + platform,
    and the JVM launchers its ``bin/`` gets (which JVM programs the host has, and where)."""
    python = python or base_interpreter()
    key: dict[str, object] = {
        "kind": "venv", "requirements": normalise_requirements(requirements), "python": python,
        "version": _python_version(python), "platform": sysconfig.get_platform()}
    jvm = _host_jvm_tools()
    if jvm:  # absent without a JVM: the digests of such hosts stay what they were
        key["jvm_launchers"] = {"version": _JVM_LAUNCHER_VERSION, "tools": jvm}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]


def _python_version(python: str) -> str:
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return ".".join(str(p) for p in sys.version_info[:3])
    out = subprocess.run([python, "-c", "import sys;print('%d.%d.%d' % sys.version_info[:3])"],
                         capture_output=True, text=True, timeout=60, check=False)
    return out.stdout.strip()


def read_requirements(spec: str | Path | None, name: str) -> str:
    """The requirements text of a build: a file, or for no file the built-in list called
    ``name`` (``clawgym``), or an empty list for a bare venv when ``spec`` is ``""``."""
    if spec is None:
        if name in BUILTIN_REQUIREMENTS:
            return BUILTIN_REQUIREMENTS[name]
        raise ConfigError(f"environment {name!r} has no built-in requirements list",
                          hint=f"pass -r requirements.txt (built-in lists: "
                               f"{', '.join(sorted(BUILTIN_REQUIREMENTS))})")
    if str(spec) == "":
        return ""
    path = Path(spec)
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read requirements file {str(path)!r}: {exc}",
                          hint="pass a readable requirements.txt (one requirement a line)") from None


def builtin_system_tools(spec: str | Path | None, name: str) -> tuple[str, ...]:
    """The system tools a build declares: those of the built-in list it installs (none for a
    requirements file of one's own)."""
    return BUILTIN_SYSTEM_TOOLS.get(name, ()) if spec is None else ()


def missing_system_tools(record: EnvironmentRecord) -> list[str]:
    """The record's system tools that its sandboxes will not find: for a venv, those missing
    from the host's system PATH; for a rootfs, from the rootfs's."""
    if record.kind == "rootfs":
        dirs = [f"{record.path}{d}" for d in SYSTEM_PATH.split(":")]
        return [t for t in record.system_tools if shutil.which(t, path=":".join(dirs)) is None]
    return [t for t in record.system_tools if shutil.which(t, path=SYSTEM_PATH) is None]


def system_tool_hint(tool: str) -> str:
    """How to provide a system tool a venv cannot carry."""
    package = SYSTEM_TOOL_PACKAGES.get(tool, tool)
    return (f"`apt-get install -y {package}` on the host (sandboxes show its /usr), or an "
            "environment whose rootfs has it (`harnessgrid env add NAME --rootfs DIR`)")


def _installer() -> tuple[str, list[str]]:
    """uv when installed (fast), else the pip of this interpreter, driving the target venv."""
    uv = shutil.which("uv")
    if uv:
        return "uv", [uv, "pip", "install", "--python"]
    return "pip", [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python"]


def build_venv(name: str, requirements: str, *, force: bool = False,
               log: Callable[[str], None] | None = None,
               system_tools: tuple[str, ...] = ()) -> EnvironmentRecord:
    """Build (or find built) the venv for ``requirements`` and bind ``name`` to it.

    The build happens in ``store/.tmp-<digest>-*``; the marker is written last and a rename
    publishes the directory, so a crash leaves only a ``.tmp-`` wreck that no lookup counts and
    the next build sweeps. ``force`` rebuilds even when the digest is already built.
    ``system_tools`` are recorded (:func:`missing_system_tools` says which the host lacks).
    """
    _check_name(name)
    root = env_root()
    python = base_interpreter()
    text = normalise_requirements(requirements)
    digest = venv_digest(text, python)
    store = root / "store"
    final = store / digest
    say = log or (lambda _msg: None)
    with _build_lock(root):
        _sweep_wrecks(store)
        if force and final.exists():
            _remove_tree(final)
        if _complete(final, digest):
            say(f"environment {name}: {digest} is already built ({final})")
            marker = EnvironmentRecord.model_validate_json((final / MARKER).read_text())
        else:
            if final.exists():  # no marker: not ours to trust (never published by us)
                _remove_tree(final)
            marker = _build_into(store, final, digest, text, python, say)
        record = marker.model_copy(update={"name": name, "system_tools": system_tools})
        _write_atomically(_record_path(root, name), record.model_dump_json(indent=2))
    return record


def _build_into(store: Path, final: Path, digest: str, text: str, python: str,
                say: Callable[[str], None]) -> EnvironmentRecord:
    store.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=store, prefix=f".tmp-{digest}-"))
    try:
        say(f"creating a venv on {python}")
        _run([python, "-m", "venv", "--without-pip", "--prompt", f"hg-{digest[:12]}", str(work)],
             "python -m venv")
        installer = ""
        if text:
            installer, command = _installer()
            req = work / "requirements.txt"
            req.write_text(text, encoding="utf-8")
            say(f"installing {len(text.splitlines())} requirement(s) with {installer}")
            _run([*command, str(work / "bin" / "python"), *([] if installer == "uv" else
                                                             ["install"]), "-r", str(req)],
                 f"{installer} install")
        _write_jvm_launchers(work / "bin", say)
        _relocate(work, final)
        record = EnvironmentRecord(
            name="", kind="venv", digest=digest, path=str(final),
            python=_python_version(python), platform=sysconfig.get_platform(),
            installer=installer, requirements=text, created_at=time.time())
        (work / MARKER).write_text(record.model_dump_json(indent=2), encoding="utf-8")
        _open_up(work)
        os.rename(work, final)
    except BaseException:
        _remove_tree(work)
        raise
    say(f"built {final}")
    return record


def _run(argv: list[str], what: str) -> None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=_BUILD_TIMEOUT_S,
                              check=False, env={**os.environ, "PIP_NO_INPUT": "1"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HarnessgridError(f"{what} failed: {exc}",
                               hint="check the interpreter and the network to the package "
                                    "index") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise HarnessgridError(f"{what} failed with exit code {proc.returncode}:\n{tail}",
                               hint="fix the requirements (are the pins installable for this "
                                    "Python?) or the network to the package index, then "
                                    "build again")


def _host_jvm_tools() -> dict[str, str]:
    """The JVM programs on the host's system PATH (what a venv environment's sandbox shows),
    by name: where each launcher points."""
    found = {tool: shutil.which(tool, path=SYSTEM_PATH) for tool in JVM_TOOLS}
    return {tool: path for tool, path in found.items() if path}


#: A JVM reserves address space by the host's size: a heap of a quarter of its memory, 1 GiB of
#: class space, 240 MiB of code cache, GC and compiler threads (each with a malloc arena) by its
#: CPUs. Under the sandbox's per-process cap (RLIMIT_AS, ``SandboxLimits.memory_mb``) it then
#: fails to start ("Error occurred during initialization of VM"). This launcher sizes those
#: reservations to the cap it finds (heap: a quarter of it), so JVM programs start under the
#: default limits; flags on the command line come after these and win. Without a cap it adds
#: nothing. Measured with OpenJDK 17: starts and compiles under caps of 1-8 GiB on 2-256 CPUs.
_JVM_LAUNCHER = """\
#!/bin/sh
# Written by harnessgrid's environment build: runs {real} with JVM reservations sized to
# the sandbox's address-space cap (see _JVM_LAUNCHER in harnessgrid/environments.py).
cap_kb=$(ulimit -v)
case $cap_kb in
    unlimited|"") exec {real} "$@" ;;
esac
heap_mb=$((cap_kb / 4096))
[ "$heap_mb" -ge 64 ] || heap_mb=64
MALLOC_ARENA_MAX=${{MALLOC_ARENA_MAX:-2}}
export MALLOC_ARENA_MAX
exec {real} {j}-Xmx${{heap_mb}}m {j}-XX:ReservedCodeCacheSize=64m \\
    {j}-XX:CompressedClassSpaceSize=128m {j}-XX:MaxMetaspaceSize=256m \\
    {j}-XX:ParallelGCThreads=2 {j}-XX:ConcGCThreads=1 {j}-XX:CICompilerCount=2 "$@"
"""


def _write_jvm_launchers(bin_dir: Path, say: Callable[[str], None]) -> None:
    """A launcher in ``bin/`` (first on the sandbox's PATH) for each JVM program the host has;
    ``java`` takes JVM flags as they are, the other tools (javac, jar, ...) with ``-J``."""
    tools = _host_jvm_tools()
    for tool, real in tools.items():
        launcher = bin_dir / tool
        launcher.write_text(_JVM_LAUNCHER.format(real=shlex.quote(real),
                                                 j="" if tool == "java" else "-J"))
        launcher.chmod(0o755)
    if tools:
        say(f"JVM launchers sized to the sandbox's memory cap: {', '.join(tools)}")


def _relocate(work: Path, final: Path) -> None:
    """Scripts written during the build name the temporary directory (shebangs, activate):
    point them at the final one before it is published."""
    old, new = str(work).encode(), str(final).encode()
    for path in [*sorted((work / "bin").iterdir()), work / "pyvenv.cfg"]:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 1 << 20:
            continue
        data = path.read_bytes()
        if old in data:
            path.write_bytes(data.replace(old, new))


def _open_up(top: Path) -> None:
    """Readable (and traversable) by the sandbox's unprivileged uid: mkdtemp made it 0700."""
    os.chmod(top, 0o755)
    for root, dirs, _files in os.walk(top):
        for d in dirs:
            path = Path(root) / d
            if not path.is_symlink():
                os.chmod(path, path.stat().st_mode | 0o555)


def _complete(path: Path, digest: str) -> bool:
    try:
        marker = json.loads((path / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("digest") == digest


def _sweep_wrecks(store: Path) -> None:
    """Remove the leftovers of crashed builds (only called under the build lock)."""
    if store.is_dir():
        for wreck in store.glob(".tmp-*"):
            _remove_tree(wreck)


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------- rootfs


def add_rootfs(name: str, directory: str | Path) -> EnvironmentRecord:
    """Bind ``name`` to a root file system directory (used in place, never copied).

    Its digest identifies the directory (path, ``etc/os-release``, top-level entries), not
    every file: it changes when the image is replaced, not when a file inside it is edited.
    """
    _check_name(name)
    top = Path(directory).expanduser().absolute()
    if not (top / "usr").is_dir():
        raise ConfigError(f"rootfs {str(top)!r} has no usr/ directory",
                          hint="pass the root of an unpacked image (e.g. `docker export` "
                               "extracted with tar), holding usr/, etc/, ...")
    release = top / "etc" / "os-release"
    key = {"kind": "rootfs", "path": str(top),
           "os_release": release.read_text(errors="replace") if release.is_file() else "",
           "entries": sorted(p.name for p in top.iterdir())}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    record = EnvironmentRecord(name=name, kind="rootfs", digest=digest, path=str(top),
                               platform=sysconfig.get_platform(), created_at=time.time())
    _check_rootfs(record)
    root = env_root()
    with _build_lock(root):
        _write_atomically(_record_path(root, name), record.model_dump_json(indent=2))
    return record


def _check_rootfs(record: EnvironmentRecord) -> None:
    """Start a sandbox on it once: the command server runs on the host's interpreter, which
    then loads its shared libraries (glibc, libffi) from the rootfs - say so now, not at the
    first episode. Skipped where no sandbox can run at all (that is reported there)."""
    from harnessgrid.errors import SandboxError
    from harnessgrid.sandboxing.sandbox import Sandbox, sandbox_available
    from harnessgrid.sandboxing.workspace import Workspace

    if not sandbox_available():
        return
    ws = Workspace.create({}, None)
    try:
        with Sandbox(ws, environment=record, unsafe_no_sandbox=False) as sandbox:
            result = sandbox.run_sync("exit 0")
        problem = None if result.ok else f"a command failed: {result.stderr.strip()[-300:]}"
    except SandboxError as exc:
        problem = exc.message[-600:]
    finally:
        ws.cleanup()
    if problem is not None:
        raise ConfigError(f"rootfs {record.path} cannot host the sandbox: {problem}",
                          hint=f"the sandbox's command server runs {base_interpreter()} inside "
                               "the rootfs, which must provide the libraries it loads (glibc, "
                               "libffi) and /bin/sh")


# ---------------------------------------------------------------------------- lookups


def _build_hint(name: str) -> str:
    if name in BUILTIN_REQUIREMENTS:
        return f"build it: `harnessgrid env build {name}` (store: {env_root()})"
    return (f"build it: `harnessgrid env build {name} -r requirements.txt` (or `harnessgrid "
            f"env add {name} --rootfs DIR`); `harnessgrid env list` shows what is built")


def get_environment(name: str) -> EnvironmentRecord:
    """The built environment called ``name``; a :class:`ConfigError` naming the command that
    builds it when there is none (or its files are gone)."""
    _check_name(name)
    path = _record_path(env_root(), name)
    try:
        record = EnvironmentRecord.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"environment {name!r} is not built", hint=_build_hint(name)) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"environment {name!r}: its record {path} is unreadable: {exc}",
                          hint=f"remove it (`harnessgrid env remove {name}`) and build again"
                          ) from exc
    if record.kind == "venv" and not _complete(Path(record.path), record.digest):
        raise ConfigError(f"environment {name!r}: its files at {record.path} are missing",
                          hint=_build_hint(name))
    if record.kind == "rootfs" and not Path(record.path, "usr").is_dir():
        raise ConfigError(f"environment {name!r}: rootfs {record.path} is gone",
                          hint=f"`harnessgrid env add {name} --rootfs DIR` again")
    return record


def list_environments() -> list[EnvironmentRecord]:
    """Every named environment whose record reads, sorted by name (broken ones included: a
    lookup says what is wrong with them)."""
    names = env_root() / "names"
    out = []
    for path in sorted(names.glob("*.json")) if names.is_dir() else []:
        try:
            out.append(EnvironmentRecord.model_validate_json(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return out


def remove_environment(name: str) -> EnvironmentRecord:
    """Unbind ``name``; a venv no other name uses is deleted (a rootfs never is: not ours)."""
    _check_name(name)
    root = env_root()
    path = _record_path(root, name)
    with _build_lock(root):
        try:
            record = EnvironmentRecord.model_validate_json(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"environment {name!r} does not exist",
                              hint="`harnessgrid env list` shows the environments") from None
        except (OSError, ValueError) as exc:
            path.unlink(missing_ok=True)
            raise ConfigError(f"environment {name!r} had an unreadable record; it was removed"
                              ) from exc
        path.unlink()
        shared = any(r.digest == record.digest for r in list_environments())
        if record.kind == "venv" and not shared:
            store = root / "store"
            target = store / record.digest
            if target.is_dir() and target.parent == store:
                # Unpublish first (a rename is atomic), then delete at leisure.
                doomed = Path(tempfile.mkdtemp(dir=store, prefix=f".tmp-{record.digest}-rm-"))
                os.rename(target, doomed / "env")
                _remove_tree(doomed)
    return record


def is_built(name: str) -> bool:
    try:
        get_environment(name)
    except ConfigError:
        return False
    return True


def resolve_episode_environment(declared: str | None, override: str | None) -> tuple[
        EnvironmentRecord | None, str | None]:
    """The environment an episode runs in, and a warning when there is one to give.

    ``override`` (``--env NAME``, ``EpisodeLimits.environment``) wins and must exist; ``none``
    means explicitly no environment. A task's ``declared`` environment that is not built does
    not stop the episode: it runs on the bare sandbox and the warning says what to build (so
    suites declaring one still run where nobody built it; the trajectory records which).
    """
    if override is not None:
        if override.lower() == "none":
            return None, None
        return get_environment(override), None
    if not declared:
        return None, None
    try:
        return get_environment(declared), None
    except ConfigError as exc:
        return None, (f"the task declares environment {declared!r}, which is not usable "
                      f"({exc.message}); running on the bare sandbox. {exc.hint}")
