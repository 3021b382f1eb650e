"""Sandbox environments (issue 14 part 1): venvs built outside the sandbox, content-addressed
and atomically published, mounted read-only at their host path with ``bin/`` first on PATH, for
the agent's commands and the graders alike; declared by suites, overridden by ``--env``,
recorded on the trajectory and shown by ``harness show``.

The fast tests build bare venvs (no requirements: no network, ~0.1 s); the slow test builds
the ClawGym list (pandas, ...) from the package index and runs a ClawGym-style task whose prompt
says ``python script.py`` and whose grader imports pandas through a composed harness and both
adapters. Everything runs for real: real ``venv``, real bubblewrap sandboxes, the real CLI."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_in_process import hg_cli

from harnessgrid.engine.api import resolve_harness
from harnessgrid.engine.limits import EpisodeLimits
from harnessgrid.engine.runtime import run_episode
from harnessgrid.errors import ConfigError, HarnessgridError
from harnessgrid.models import Action
from harnessgrid.plugins.tasks import clawgym
from harnessgrid.policies.scripted import ScriptedPolicy
from harnessgrid.sandboxing.environments import (
    BUILTIN_REQUIREMENTS,
    ENV_DIR_VARIABLE,
    MARKER,
    build_venv,
    env_root,
    get_environment,
    list_environments,
    remove_environment,
    venv_digest,
)
from harnessgrid.sandboxing.sandbox import Sandbox
from harnessgrid.sandboxing.workspace import Workspace
from harnessgrid.tasks import ContextGrader, GradingContext, Task
from harnessgrid.trajectory import Trajectory

A = Action.of
MOUNT = clawgym.DEFAULT_MOUNT




# --- building ----------------------------------------------------------------------------


def test_build_is_content_addressed_and_cached(env_dir: Path) -> None:
    first = build_venv("bare", "")
    assert Path(first.path).parent == env_dir / "store"
    assert first.digest in first.path
    assert (Path(first.path) / MARKER).is_file()
    assert first.kind == "venv"
    # Comments and blank lines are not content; another name shares the built directory.
    again = build_venv("other", "# nothing to install\n\n")
    assert (again.digest, again.path) == (first.digest, first.path)
    assert again.name == "other"
    assert venv_digest("pandas==3.1.1\n") != first.digest
    assert [r.name for r in list_environments()] == ["bare", "other"]
    # Scripts were written in the temporary build directory; none may still name it.
    for script in Path(first.path, "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            assert ".tmp-" not in script.read_text(errors="replace"), script
    remove_environment("bare")
    assert Path(first.path).is_dir()  # "other" still uses it
    remove_environment("other")
    assert not Path(first.path).exists()
    assert list_environments() == []


def test_concurrent_builds_share_one_directory(env_dir: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(3) as pool:
        records = list(pool.map(lambda n: build_venv(f"same{n}", ""), range(3)))
    assert len({r.path for r in records}) == 1
    assert [p.name for p in (env_dir / "store").iterdir()] == [records[0].digest]


def test_a_crashed_build_never_counts_as_built(env_dir: Path) -> None:
    """A wreck of a crashed build (a ``.tmp-`` folder) and a store folder without the marker
    (whatever put it there) are not environments: lookups fail, the next build replaces them."""
    digest = venv_digest("")
    store = env_dir / "store"
    (store / f".tmp-{digest}-crashed" / "bin").mkdir(parents=True)
    (store / digest / "bin").mkdir(parents=True)  # half-made, no marker
    (env_dir / "names").mkdir()
    (env_dir / "names" / "bare.json").write_text(json.dumps(
        {"name": "bare", "kind": "venv", "digest": digest, "path": str(store / digest)}))
    with pytest.raises(ConfigError) as err:
        get_environment("bare")
    assert "missing" in err.value.message
    assert "harnessgrid env build bare" in str(err.value.hint)
    record = build_venv("bare", "")
    assert (Path(record.path) / "bin" / "python").exists()
    assert [p.name for p in store.iterdir()] == [digest]
    assert get_environment("bare") == record


@pytest.mark.slow
def test_a_failed_install_leaves_nothing(env_dir: Path) -> None:
    """pip refusing the requirements (a malformed line, found without any network) is a clear
    error, and the store holds no trace of the attempt. Slow: pip alone takes 1-4 s to start."""
    with pytest.raises(HarnessgridError) as err:
        build_venv("broken", "this is not a requirement !!\n")
    assert "install failed" in str(err.value)
    store = env_dir / "store"
    assert not store.exists() or list(store.iterdir()) == []
    with pytest.raises(ConfigError, match="not built"):
        get_environment("broken")


def test_missing_and_bad_names_are_config_errors(env_dir: Path) -> None:
    with pytest.raises(ConfigError) as err:
        get_environment("clawgym")
    assert err.value.hint is not None
    assert "harnessgrid env build clawgym" in err.value.hint
    with pytest.raises(ConfigError) as err:
        get_environment("mine")
    assert "harnessgrid env build mine -r requirements.txt" in str(err.value.hint)
    with pytest.raises(ConfigError, match="not valid"):
        build_venv("../escape", "")
    with pytest.raises(ConfigError, match="does not exist"):
        remove_environment("nothing")


def test_env_dir_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(ENV_DIR_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert env_root() == tmp_path / "cache" / "harnessgrid" / "envs"
    monkeypatch.setenv(ENV_DIR_VARIABLE, str(tmp_path / "override"))
    assert env_root() == tmp_path / "override"


def test_builtin_environments_hold_what_their_suites_tasks_name() -> None:
    """ClawGym tasks name requests, flask and openpyxl besides the data stack; PinchBench tasks
    hand the agent spreadsheets (python, pandas, openpyxl) and declare an environment of their
    own. Every built-in list is pinned (the digest, and what graders see, must not drift)."""
    from harnessgrid.plugins.tasks import pinchbench
    from harnessgrid.sandboxing.environments import BUILTIN_SYSTEM_TOOLS, normalise_requirements

    def names(env: str) -> set[str]:
        lines = normalise_requirements(BUILTIN_REQUIREMENTS[env]).splitlines()
        assert all("==" in line for line in lines), lines
        return {line.split("==")[0].lower() for line in lines}

    assert {"requests", "flask", "openpyxl", "pandas", "numpy", "pyyaml"} <= names("clawgym")
    assert {"pandas", "openpyxl"} <= names("pinchbench")
    assert "ruby" in BUILTIN_SYSTEM_TOOLS["clawgym"]  # task_0199's grader calls it
    repo = Path(__file__).parent / "fixtures" / "pinchbench_repo"
    assert {t.environment for t in pinchbench.load(str(repo)).tasks()} == {"pinchbench"}


def test_build_says_which_system_tools_a_venv_cannot_carry(
        env_dir: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A built-in environment may need a program that is no Python package (ClawGym's ruby):
    ``env build`` names each one the host lacks and how to provide it, instead of building a
    venv that silently cannot run those tasks; ``env show`` lists them with their state."""
    from harnessgrid.sandboxing import environments

    monkeypatch.setitem(environments.BUILTIN_REQUIREMENTS, "toolbox", "")
    monkeypatch.setitem(environments.BUILTIN_SYSTEM_TOOLS, "toolbox", ("sh", "hg-absent-tool"))
    code, out, err = hg_cli(capsys, monkeypatch, "env", "build", "toolbox")
    assert code == 0, err
    said = " ".join(err.split())
    assert "hg-absent-tool" in said
    assert "a venv cannot carry" in said
    assert "apt-get install" in said
    assert "--rootfs" in said
    assert "sh:" not in said  # the host has sh: nothing to say about it
    code, out, _ = hg_cli(capsys, monkeypatch, "env", "show", "toolbox")
    assert "hg-absent-tool (missing on this host)" in out
    assert "sh (found)" in out
    assert get_environment("toolbox").system_tools == ("sh", "hg-absent-tool")
    code, _, err = hg_cli(capsys, monkeypatch, "env", "build", "mine", "-r", "")
    assert code == 0
    assert "cannot carry" not in err  # a list of one's own declares no tools


JAVA_SKIP = pytest.mark.skipif(
    __import__("shutil").which("java") is None,
    reason="java is not installed on this host (e.g. apt-get install -y default-jre-headless)")
HELLO_JAVA = ("public class Hello { public static void main(String[] a) {"
              " System.out.println(\"heap_mb=\" + Runtime.getRuntime().maxMemory() / 1048576);"
              " } }\n")


def compiled_hello(where: Path) -> dict[str, bytes]:
    """Hello.class, compiled on the host (the sandbox does not show the JDK's /etc config,
    which javac needs), or nothing without a javac."""
    import shutil

    if shutil.which("javac") is None:
        return {}
    (where / "Hello.java").write_text(HELLO_JAVA)
    subprocess.run(["javac", "-d", str(where), str(where / "Hello.java")], check=True,
                   capture_output=True, timeout=300)
    return {"Hello.class": (where / "Hello.class").read_bytes()}


@JAVA_SKIP
def test_a_jvm_starts_in_an_environment_under_the_default_limits(env_dir: Path,
                                                                 tmp_path: Path) -> None:
    """The sandbox caps each process's address space (``SandboxLimits.memory_mb``, 2 GiB);
    a JVM's default reservations (a quarter of the host's memory for the heap, 1 GiB of class
    space) exceed it and it dies at start. An environment's ``java`` starts with reservations
    that fit the cap, and flags given on the command line still win."""
    record = build_venv("bare", "")
    classes = compiled_hello(tmp_path)
    ws = Workspace.create(classes, None, mount_path=MOUNT)
    try:
        with Sandbox(ws, environment=record) as sb:
            version = sb.run_sync("java -version")
            assert version.ok, version
            assert "Error occurred" not in version.stdout, version
            if classes:
                ran = sb.run_sync("java -cp . Hello")
                assert ran.ok, ran
                assert 0 < int(ran.stdout.split("=")[1]) <= 2048 // 4, ran
                mine = sb.run_sync("java -Xmx96m -cp . Hello")
                assert mine.ok, mine
                assert int(mine.stdout.split("=")[1]) <= 96, mine
    finally:
        ws.cleanup()


# --- inside the sandbox --------------------------------------------------------------------


def test_sandbox_puts_the_environment_first_and_read_only(env_dir: Path) -> None:
    record = build_venv("bare", "")
    ws = Workspace.create({"where.py": "import sys\nprint(sys.prefix)\n"}, None,
                          mount_path=MOUNT)
    try:
        with Sandbox(ws, environment=record) as sb:
            for python in ("python", "python3"):
                result = sb.run_sync(f"{python} where.py")
                assert result.ok, result
                assert result.stdout.strip() == record.path, result
            assert sb.run_sync("command -v python").stdout.strip() == f"{record.path}/bin/python"
            touched = sb.run_sync(f"touch {record.path}/bin/intruder")
            assert not touched.ok
            assert "Read-only" in touched.stderr
        with Sandbox(ws) as sb:  # without one: no python on PATH from the environment
            assert record.path not in sb.run_sync("echo $PATH").stdout
    finally:
        ws.cleanup()


def test_graders_sandboxes_follow_the_environment_they_are_told(env_dir: Path,
                                                                 tmp_path: Path) -> None:
    """A ClawGym check runs in the environment of the grading context it is given (the
    graded episode's), and without one when graded outside an episode."""
    record = build_venv("bare", "")
    task = clawgym_task(tmp_path, CHECK_PREFIX % record.path, PLAIN_SCRIPT)
    assert isinstance(task.grader, ContextGrader)
    ws = Workspace.create({"out.txt": "total=6\n"}, None, mount_path=MOUNT)
    try:
        told = task.grader.grade_in(ws.root, [], GradingContext(environment=record))
        assert told == {"ran_script": 1.0, "env_python": 1.0}
        assert task.grader.grade(ws.root, []) == {"ran_script": 1.0, "env_python": 0.0}
    finally:
        ws.cleanup()


def minimal_rootfs(top: Path, release: str) -> Path:
    """A real, tiny root file system: /bin/sh and the libraries the sandbox's interpreter
    loads (copied from this host), and an os-release of its own."""
    import shutil

    from harnessgrid.sandboxing.environments import base_interpreter

    libs = subprocess.run(["ldd", base_interpreter(), "/bin/sh"], capture_output=True,
                          text=True, check=True).stdout
    ctypes_ext = next(Path(sys.base_prefix, "lib").glob("python3*/lib-dynload/_ctypes*.so"))
    libs += subprocess.run(["ldd", str(ctypes_ext)], capture_output=True, text=True,
                           check=True).stdout
    needed = {part for line in libs.splitlines() for part in line.split()
              if part.startswith("/") and not part.endswith(":")
              and not part.startswith(sys.base_prefix)}
    for lib in needed | {"/bin/sh"}:
        dest = top / "usr" / os.path.realpath(lib).lstrip("/").removeprefix("usr/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(lib), dest)
        alias = top / "usr" / lib.lstrip("/").removeprefix("usr/")  # the name it is asked by
        if not alias.exists():
            alias.parent.mkdir(parents=True, exist_ok=True)
            alias.symlink_to(os.path.relpath(dest, alias.parent))  # valid inside, too
    for link in ("bin", "lib", "lib64", "sbin"):
        if not (top / link).exists():
            (top / link).symlink_to(f"usr/{link}")
    (top / "usr" / "bin").mkdir(parents=True, exist_ok=True)
    (top / "etc").mkdir()
    (top / "etc" / "os-release").write_text(release)
    return top


def test_rootfs_replaces_the_host_system(env_dir: Path, tmp_path: Path) -> None:
    from harnessgrid.sandboxing.environments import add_rootfs

    record = add_rootfs("mini", minimal_rootfs(tmp_path / "fs", "ID=hgtest\n"))
    assert get_environment("mini") == record
    assert record.kind == "rootfs"
    ws = Workspace.create({}, None)
    try:
        with Sandbox(ws, environment=record) as sb:
            listing = sb.run_sync("echo /usr/bin/*; read line < /etc/os-release; echo $line")
            assert listing.ok, listing
            *binaries, release = listing.stdout.split()
            assert release == "ID=hgtest"
            assert "/usr/bin/sh" in binaries
            assert set(binaries) <= {"/usr/bin/sh", "/usr/bin/dash", "/usr/bin/bash"}  # no host
    finally:
        ws.cleanup()
    empty = tmp_path / "empty"
    (empty / "usr").mkdir(parents=True)
    with pytest.raises(ConfigError, match="cannot host the sandbox"):
        add_rootfs("broken", empty)
    with pytest.raises(ConfigError, match="no usr/"):
        add_rootfs("nothing", tmp_path / "nowhere")
    remove_environment("mini")
    assert (tmp_path / "fs" / "usr").is_dir()  # a rootfs is the user's: never deleted


# --- episodes ------------------------------------------------------------------------------

CHECK_PREFIX = textwrap.dedent("""\
    import json, sys
    def grade(transcript, workspace_path):
        out = open(workspace_path + "/out.txt").read().strip()
        return {"ran_script": float(out == "total=6"),
                "env_python": float(sys.prefix.startswith(%r))}
    """)


def clawgym_task(root: Path, check: str, script: str) -> Task:
    """A task in ClawGym's layout, written by us: the prompt says ``python script.py``."""
    folder = root / "run_script"
    (folder / "input_files").mkdir(parents=True)
    (folder / "reward").mkdir()
    (folder / "input_files" / "script.py").write_text(textwrap.dedent(script))
    (folder / "input_files" / "numbers.csv").write_text("n\n1\n2\n3\n")
    (folder / "reward" / "check.py").write_text(check)
    plan = [A("shell", command="python script.py"),
            A("finish", message="ran the script")]
    (folder / "data_entry.json").write_text(json.dumps({
        "task_id": "run_script", "input_mount_dir": MOUNT,
        "user_query": f"Run `python script.py` in {MOUNT}; it writes out.txt.",
        "metadata": {"category": "scripting", "grading_type": "automated",
                     "harnessgrid": {"plan": [a.model_dump(mode="json") for a in plan]}}}))
    task: Task = clawgym.load(str(folder)).tasks()[0]
    return task


PLAIN_SCRIPT = """\
    rows = open("numbers.csv").read().split()[1:]
    open("out.txt", "w").write("total=%d\\n" % sum(int(r) for r in rows))
    """


def play(harness: str, task: Task, limits: EpisodeLimits | None = None) -> Trajectory:
    return asyncio.run(run_episode(resolve_harness(harness), task, ScriptedPolicy(), limits))


def test_episode_mounts_the_declared_environment_and_records_it(env_dir: Path,
                                                                tmp_path: Path) -> None:
    """ClawGym tasks declare ``clawgym``; ``--env`` (``EpisodeLimits.environment``) overrides.
    The agent's ``python script.py`` and the grader both run on the environment's python."""
    record = build_venv("bare", "")
    check = CHECK_PREFIX % record.path
    task = clawgym_task(tmp_path, check, PLAIN_SCRIPT)
    assert task.environment == "clawgym"
    traj = play("S0-T0-O0-C0-W0", task, EpisodeLimits(environment="bare"))
    assert traj.passed, (traj.termination, traj.error, traj.grade_error, traj.subscores)
    assert traj.environment == record.summary()
    stored = Trajectory.model_validate_json(traj.model_dump_json())
    assert stored.environment == {"name": "bare", "kind": "venv", "digest": record.digest}


def test_missing_declared_environment_runs_bare_and_says_so(env_dir: Path,
                                                            tmp_path: Path) -> None:
    task = clawgym_task(tmp_path, CHECK_PREFIX % "/nowhere", PLAIN_SCRIPT)
    with pytest.warns(RuntimeWarning, match="harnessgrid env build clawgym"):
        traj = play("S0-T0-O0-C0-W0", task)
    assert traj.environment == {"name": "clawgym", "missing": "true"}
    assert not traj.passed  # the grader ran on the sandbox's own python, not an environment's
    # An evaluation says so where its scores are read, not only in a warning scrolled away.
    from harnessgrid.evaluation.report import build_report
    from harnessgrid.evaluation.results import EvalResult, ResultKey, tag_trajectory
    from harnessgrid.evaluation.tables import summary_lines

    tag_trajectory(traj, ResultKey("in-space", "clawgym", task.id, "S0-T0-O0-C0-W0", 0), (),
                   "unknown")
    report = build_report([EvalResult.from_trajectory(traj)])
    assert report.missing_environments == {"clawgym": 1}
    assert any("without their task's environment `clawgym`" in line
               and "harnessgrid env build clawgym" in line for line in summary_lines(report))
    with pytest.raises(ConfigError, match="'nope' is not built"):
        play("S0-T0-O0-C0-W0", task, EpisodeLimits(environment="nope"))
    traj = play("S0-T0-O0-C0-W0", task, EpisodeLimits(environment="none"))
    assert traj.environment is None


# --- CLI -----------------------------------------------------------------------------------


def test_cli_build_list_show_remove(env_dir: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def cli(*args: str) -> tuple[int, str, str]:
        return hg_cli(capsys, monkeypatch, *args)

    req = tmp_path / "requirements.txt"
    req.write_text("# a bare venv\n")
    code, out, err = cli("env", "build", "tiny", "-r", str(req), "--quiet")
    assert code == 0, err
    path = out.strip()
    assert Path(path, "bin", "python").exists()
    code, out, _ = cli("env", "list", "--json")
    assert [(e["name"], e["path"], e["usable"]) for e in json.loads(out)] == [
        ("tiny", path, True)]
    code, out, _ = cli("env", "show", "tiny", "--json")
    assert json.loads(out)["kind"] == "venv"
    code, _, err = cli("env", "show", "clawgym")
    assert code == 2
    assert "harnessgrid env build clawgym" in err
    assert "Traceback" not in err
    code, _, err = cli("run", "--task", "examples/config", "--harness", "S0-T0-O0-C0-W0",
                       "--policy", "scripted", "--env", "absent", "--json")
    assert code == 2
    assert "env build absent -r requirements.txt" in " ".join(err.split())
    code, out, _ = cli("env", "remove", "tiny")
    assert code == 0
    assert not Path(path).exists()


def test_harness_show_names_the_task_environment(env_dir: Path, tmp_path: Path) -> None:
    from harnessgrid.cli.harness_cmd import environment_info

    assert environment_info(None) is None
    missing = environment_info("clawgym")
    assert missing is not None
    assert missing["missing"]
    assert "env build clawgym" in missing["hint"]
    record = build_venv("clawgym", "")  # a stand-in under the declared name
    shown = environment_info("clawgym")
    assert shown == {**record.summary(), "path": record.path, "missing": False}


# --- end to end, with pandas ----------------------------------------------------------------

PANDAS_SCRIPT = """\
    import pandas as pd
    total = int(pd.read_csv("numbers.csv")["n"].sum())
    open("out.txt", "w").write(f"total={total}\\n")
    """

PANDAS_CHECK = textwrap.dedent("""\
    import pandas as pd
    def grade(transcript, workspace_path):
        frame = pd.read_csv(workspace_path + "/numbers.csv")
        out = open(workspace_path + "/out.txt").read().strip()
        return {"total": float(out == f"total={int(frame['n'].sum())}")}
    """)


@pytest.fixture(scope="module")
def clawgym_env() -> None:
    """The real ``clawgym`` environment, built (once per machine: content-addressed and
    cached) in the user's store with the CLI, from the package index."""
    out = subprocess.run([sys.executable, "-m", "harnessgrid", "env", "build", "clawgym"],
                         capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("harness", ["S1-T1-O2-C1-W2", "adapter:claude-code",
                                     "adapter:openclaw"])
def test_clawgym_style_pandas_task_passes_in_its_environment(clawgym_env: None,
                                                             tmp_path: Path,
                                                             harness: str) -> None:
    task = clawgym_task(tmp_path, PANDAS_CHECK, PANDAS_SCRIPT)
    assert get_environment("clawgym").requirements == BUILTIN_REQUIREMENTS["clawgym"]
    traj = play(harness, task)
    assert traj.passed, (traj.termination, traj.error, traj.grade_error, traj.subscores)
    assert traj.environment is not None
    assert traj.environment["name"] == "clawgym"
    bare = play(harness, task, EpisodeLimits(environment="none"))
    assert not bare.passed  # without the environment neither the script nor the check runs


@pytest.mark.slow
def test_clawgym_environment_holds_the_modules_its_tasks_name(clawgym_env: None) -> None:
    """requests, flask and openpyxl import in the sandbox, on the environment's python."""
    ws = Workspace.create({}, None, mount_path=MOUNT)
    try:
        with Sandbox(ws, environment=get_environment("clawgym")) as sb:
            result = sb.run_sync("python -c 'import flask, openpyxl, pandas, requests, yaml'")
            assert result.ok, result
    finally:
        ws.cleanup()


SPREADSHEET = textwrap.dedent("""\
    import openpyxl, pandas
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Q1_Expenses"
    sheet.append(["Employee", "Amount"])
    for row in (["Alice Chen", 5400], ["Bo", 30]):
        sheet.append(row)
    book.save("company_expenses.xlsx")
    frame = pandas.read_excel("company_expenses.xlsx", sheet_name="Q1_Expenses")
    print("total", int(frame["Amount"].sum()))
    """)


@pytest.mark.slow
def test_pinchbench_environment_reads_spreadsheets(tmp_path: Path) -> None:
    """The environment PinchBench tasks declare, built with the CLI from its built-in list:
    ``python`` in the sandbox reads an ``.xlsx`` with pandas (through openpyxl), which the
    bare sandbox cannot (it has no ``python`` at all, only ``python3`` without pandas)."""
    out = subprocess.run([sys.executable, "-m", "harnessgrid", "env", "build", "pinchbench"],
                         capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr
    ws = Workspace.create({"summary.py": SPREADSHEET}, None, mount_path=MOUNT)
    try:
        with Sandbox(ws, environment=get_environment("pinchbench")) as sb:
            result = sb.run_sync("python summary.py")
            assert result.ok, result
            assert result.stdout.strip() == "total 5430", result
        with Sandbox(ws) as sb:
            assert not sb.run_sync("python summary.py").ok
    finally:
        ws.cleanup()
