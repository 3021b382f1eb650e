"""Output paths that cannot be written (issue 28, item 4): one check,
``harnessgrid.paths.require_output_dir``, run by every command that writes before it does any
work, and a one-line error with a hint (exit 2) instead of a traceback.

Found: ``eval --out`` on a read-only file system died with ``OSError: [Errno 30]`` (on ``.lock``
when the directory existed), ``eval --out /proc/x`` with ``FileNotFoundError`` and
``train --set output_dir=/sys/x`` with ``PermissionError`` after a minute of imports.

A read-only file system is made with bubblewrap (``--ro-bind``, a read-only bind mount in a
private mount namespace): as root, permission bits (``chmod 0o555``) stop nothing, so they
would not test what a read-only mount does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harnessgrid.errors import ConfigError
from harnessgrid.paths import require_output_dir, require_output_file

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
EVAL = ["eval", "--policy", "scripted", "--suites", "examples", "--settings", "in-space",
        "--harnesses", "S0-T0-O0-C0-W0", "--runs", "1", "--limit", "1", "--no-report", "-q"]


def _read_only_mounts_work() -> bool:
    if shutil.which("bwrap") is None:
        return False
    done = subprocess.run(["bwrap", "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                           "true"], capture_output=True, timeout=60, check=False)
    return done.returncode == 0


needs_ro_mount = pytest.mark.skipif(not _read_only_mounts_work(),
                                    reason="bwrap cannot make a mount namespace here")


def read_only(directory: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """``command`` run with ``directory`` mounted read-only (everything else as it is)."""
    return subprocess.run(["bwrap", "--bind", "/", "/", "--ro-bind", str(directory),
                           str(directory), "--dev", "/dev", "--proc", "/proc", *command],
                          capture_output=True, text=True, timeout=300, env=ENV, check=False)


def hg(*args: str) -> list[str]:
    return [sys.executable, "-m", "harnessgrid", *args]


def assert_one_error(done: subprocess.CompletedProcess[str], *named: str) -> None:
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    for text in named:
        assert text in errors[0], output
    assert "hint:" in output, output


# -- the check itself ----------------------------------------------------------------------------


@needs_ro_mount
def test_a_read_only_file_system_is_refused_for_a_new_or_existing_directory(
        tmp_path: Path) -> None:
    script = ("import sys\n"
              "from harnessgrid.paths import require_output_dir\n"
              "from harnessgrid.errors import ConfigError\n"
              "for p in sys.argv[1:]:\n"
              "    try:\n"
              "        require_output_dir(p, '--out')\n"
              "        print('ok', p)\n"
              "    except ConfigError as e:\n"
              "        print('refused', e.message, '|', e.hint)\n")
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    done = read_only(frozen, sys.executable, "-c", script, str(frozen), str(frozen / "a" / "b"))
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(lines) == 2, done.stdout + done.stderr
    assert lines[0].startswith(f"refused --out {frozen} cannot be written: the file system "
                               "is read-only"), lines
    assert lines[1].startswith(f"refused --out {frozen / 'a' / 'b'} cannot be created in "
                               f"{frozen}: the file system is read-only"), lines
    assert all("writable file system" in line for line in lines)


@pytest.mark.parametrize("path", ["/proc/x", "/sys/x", "/proc", "/sys/kernel/x"])
def test_kernel_file_systems_are_refused(path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        require_output_dir(path, "--out")
    assert caught.value.message.startswith(f"--out {path} is under /")
    assert "file system of the kernel" in caught.value.message


def test_a_link_into_proc_is_refused_too(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to("/proc/self")
    with pytest.raises(ConfigError, match="under /proc"):
        require_output_dir(tmp_path / "link" / "out", "--out")


def test_files_and_broken_links_in_the_way_are_named(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    cases = {blocker: f"{blocker} is a file, not a directory",
             blocker / "sub": f"is under {blocker}, a file, not a directory",
             tmp_path / "dangling" / "x": "a broken symbolic link, not a directory"}
    for path, expected in cases.items():
        with pytest.raises(ConfigError) as caught:
            require_output_dir(path, "output_dir")
        assert expected in caught.value.message
        assert caught.value.hint


def test_a_writable_path_passes_and_nothing_is_left_behind(tmp_path: Path) -> None:
    (tmp_path / "exists").mkdir()
    assert require_output_dir(tmp_path / "exists", "--out") == tmp_path / "exists"
    assert require_output_dir(tmp_path / "new" / "deeper", "--out") == tmp_path / "new" / "deeper"
    assert require_output_dir(str(tmp_path / "as-text"), "--out") == tmp_path / "as-text"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["exists"]


def test_an_output_file_must_not_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory, not a file"):
        require_output_file(tmp_path, "--save")
    assert require_output_file(tmp_path / "a" / "t.jsonl", "--save") == tmp_path / "a" / "t.jsonl"
    assert not (tmp_path / "a").exists()


# -- every command that writes -------------------------------------------------------------------


@needs_ro_mount
def test_eval_on_a_read_only_file_system_is_one_error(tmp_path: Path) -> None:
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    assert_one_error(read_only(frozen, *hg(*EVAL, "--out", str(frozen / "ev"))),
                     f"{frozen / 'ev'}", "read-only")
    # An existing directory: it used to fail on .lock.
    assert_one_error(read_only(frozen, *hg(*EVAL, "--out", str(frozen))), str(frozen),
                     "cannot be written")


@pytest.mark.parametrize("out", ["/proc/x", "/sys/x"])
def test_eval_into_a_kernel_file_system_is_one_error(out: str) -> None:
    done = subprocess.run(hg(*EVAL, "--out", out), capture_output=True, text=True, timeout=300,
                          env=ENV, check=False)
    assert_one_error(done, out, "file system of the kernel")


def test_train_checks_output_dir_before_importing_torch(tmp_path: Path) -> None:
    """The check runs right after the config is read: no torch, transformers or TRL import
    first (they took a minute on a slow disk before the PermissionError)."""
    config = tmp_path / "train.yaml"
    config.write_text("model: tiny:tiny\nalgorithm: sft\ndesign: adapter:openclaw\n")
    script = ("import sys\n"
              "from harnessgrid.cli import main\n"
              f"sys.argv = ['harnessgrid', 'train', {str(config)!r}, "
              "'--set', 'output_dir=/sys/x']\n"
              "try:\n"
              "    main()\n"
              "except SystemExit as exc:\n"
              "    heavy = [m for m in ('torch', 'transformers', 'trl') if m in sys.modules]\n"
              "    print('exit', exc.code, 'heavy', heavy)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env=ENV, check=False)
    assert "exit 2 heavy []" in done.stdout, done.stdout + done.stderr
    assert "error: output_dir /sys/x is under /sys" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@needs_ro_mount
def test_train_on_a_read_only_file_system_is_one_error(tmp_path: Path) -> None:
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    config = tmp_path / "train.yaml"
    config.write_text(f"model: tiny:tiny\noutput_dir: {frozen / 'run'}\n")
    assert_one_error(read_only(frozen, *hg("train", str(config))), "output_dir",
                     str(frozen / "run"), "read-only")


@needs_ro_mount
def test_other_writing_commands_check_their_paths_first(tmp_path: Path) -> None:
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    commands = {
        "tasks export": (["tasks", "export", "examples", str(frozen / "x")], "OUT_DIR"),
        "plugins new": (["plugins", "new", "my_levels", "--dir", str(frozen / "p")], "--dir"),
        "run --save": (["run", "--task", "examples/upper", "--harness", "S0-T0-O0-C0-W0",
                        "--policy", "scripted", "--save", str(frozen / "t.jsonl")], "--save"),
        "report": (["report", str(frozen)], "DIR"),
        "model tiny": (["model", "tiny", str(frozen / "m")], "OUT_DIR"),
    }
    for name, (args, what) in commands.items():
        done = read_only(frozen, *hg(*args))
        assert_one_error(done, what, "read-only")
        assert "1.0" not in done.stdout, name  # run --save: refused before the episode ran
    assert list(frozen.iterdir()) == []


@needs_ro_mount
def test_the_eval_store_refuses_a_read_only_directory_from_python(tmp_path: Path) -> None:
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    script = ("from harnessgrid.evaluation.store import EvalStore\n"
              "from harnessgrid.errors import ConfigError\n"
              f"try:\n    EvalStore({str(frozen)!r}).open()\n"
              "except ConfigError as e:\n    print('refused:', e.message)\n")
    done = read_only(frozen, sys.executable, "-c", script)
    assert f"refused: the evaluation directory {frozen} cannot be written" in done.stdout, (
        done.stdout + done.stderr)


def test_run_save_into_a_directory_is_refused_before_the_episode(tmp_path: Path) -> None:
    done = subprocess.run(hg("run", "--task", "examples/upper", "--harness", "S0-T0-O0-C0-W0",
                             "--policy", "scripted", "--save", str(tmp_path)),
                          capture_output=True, text=True, timeout=300, env=ENV, check=False)
    assert_one_error(done, f"--save {tmp_path} is a directory")
