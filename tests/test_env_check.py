"""What a suite's tasks call that their environment lacks (``harnessgrid env check`` and
``env build --check``): the static scan of graders, workspace scripts, instructions and file
kinds, and the check of what is found inside a real sandbox with the environment mounted.

The environments here are bare venvs (no requirements: no network): what they lack is known
(no third-party module), so the report must name exactly what each task uses beyond them."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from cli_in_process import hg_cli

from harnessgrid.plugins.tasks import clawgym, pinchbench
from harnessgrid.sandboxing.env_needs import python_needs, shell_commands, task_needs
from harnessgrid.sandboxing.environments import build_venv

# --- the scan --------------------------------------------------------------------------------


def test_shell_commands_are_the_programs_a_script_runs() -> None:
    script = textwrap.dedent("""\
        #!/usr/bin/env bash
        set -euo pipefail
        helper() { echo hi; }
        LANG=C ruby check.rb "$1" | tail -n 1 > out.txt   # a comment: git
        if jq -e .ok out.json; then exec node run.js; fi
        total=$(awk '{s+=$1} END {print s}' numbers.txt) && helper
        cat <<EOF > notes.txt
        perl is only text here
        EOF
        ./local.sh; "$PYTHON" x.py; xargs -n1 gzip < list.txt
        python3 -c 'import json; print(1)' 2>/dev/null || true
        """)
    assert shell_commands(script) == {"ruby", "tail", "jq", "node", "awk", "cat", "gzip",
                                      "python3"}


def test_python_needs_are_required_imports_and_started_programs() -> None:
    code = textwrap.dedent("""\
        import os, json, subprocess
        import pandas as pd
        from openpyxl.utils import get_column_letter
        from . import sibling
        try:
            import yaml
        except ImportError:
            yaml = None
        def grade(transcript, workspace_path):
            import requests
            subprocess.run(["ruby", "check.rb"], check=True)
            subprocess.run("java -version | head -1", shell=True)
            os.system("pdftotext in.pdf -")
            subprocess.run([sys.executable, "x.py"])
            subprocess.check_output(f"convert {workspace_path}/a.png b.jpg", shell=True)
            os.popen("ffprobe " + workspace_path)
        """)
    needs = python_needs(code)
    assert needs.modules == {"pandas", "openpyxl", "requests"}  # yaml is optional
    assert needs.executables == {"ruby", "java", "head", "pdftotext", "convert", "ffprobe"}
    assert python_needs("print 'python 2'").modules == set()


def clawgym_task(root: Path, name: str, *, check: str = "", reward_sh: str = "",
                 inputs: dict[str, str] | None = None, query: str = "Do it.") -> Path:
    folder = root / name
    (folder / "reward").mkdir(parents=True)
    if check:
        (folder / "reward" / "check.py").write_text(textwrap.dedent(check))
    if reward_sh:
        (folder / "reward" / "reward.sh").write_text(textwrap.dedent(reward_sh))
    for rel, text in (inputs or {}).items():
        path = folder / "input_files" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (folder / "data_entry.json").write_text(json.dumps({"task_id": name, "user_query": query}))
    return folder


def test_a_tasks_needs_come_from_grader_scripts_instruction_and_files(tmp_path: Path) -> None:
    clawgym_task(tmp_path, "t1",
                 check="import helpers\nimport flask\n"
                       "def grade(transcript, workspace_path):\n    return {'x': 1.0}\n",
                 reward_sh="#!/bin/bash\nruby /root/.openclaw/workspace/reward/score.rb\n",
                 inputs={"app/server.py": "import requests\nfrom app import models\n",
                         "app/models.py": "", "run": "#!/bin/sh\nconvert a.png b.jpg\n",
                         "data/report.xlsx": "not really a workbook"},
                 query="Fix the app.\n```bash\n$ make test\n```\n")
    (tmp_path / "t1" / "reward" / "helpers.py").write_text("")
    task = clawgym.load(str(tmp_path)).get("t1")
    needs = task_needs(task)
    # helpers (the grader's own) and app (the workspace's own) are no needs
    assert needs.modules == {"flask", "requests", "openpyxl"}
    assert needs.executables == {"ruby", "convert", "make", "python3"}


# --- the check, in a real sandbox with the environment -------------------------------------


def suite_with_gaps(root: Path) -> Path:
    """A ClawGym suite whose graders need a program no host has and a module no bare venv
    holds, next to a task that needs only the standard library."""
    clawgym_task(root, "needs_tools",
                 check="""\
                     import subprocess
                     import yaml
                     import hg_absent_module
                     def grade(transcript, workspace_path):
                         subprocess.run(["hg-absent-tool", "--check"])
                         return {"x": 1.0}
                     """,
                 reward_sh="#!/bin/bash\nruby score.rb | sh -c 'cat'\n")
    clawgym_task(root, "plain", check="import json\ndef grade(t, w):\n    return {'x': 1.0}\n")
    return root


def test_env_check_names_what_each_task_calls_that_the_environment_lacks(
        env_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    suite = suite_with_gaps(tmp_path / "suite")
    build_venv("bare", "")
    code, out, err = hg_cli(capsys, monkeypatch, "env", "check", f"clawgym:{suite}",
                            "--env", "bare", "--json")
    assert code == 1, err  # something is missing
    [gap] = json.loads(out)
    assert gap["environment"] == "bare"
    assert gap["built"]
    assert gap["tasks"] == 2
    assert gap["missing_modules"] == {
        "yaml": {"package": "pyyaml", "tasks": ["needs_tools"]},  # a venv sees no system site
        "hg_absent_module": {"package": "hg_absent_module", "tasks": ["needs_tools"]}}
    missing = gap["missing_executables"]
    assert missing["hg-absent-tool"] == ["needs_tools"]
    assert ("ruby" in missing) == (shutil.which("ruby") is None)
    assert "sh" not in missing
    assert "cat" not in missing
    assert "python3" not in missing
    # The tasks' own environment (clawgym) is not built here: they would run bare, and the
    # report says so instead of checking an environment that is not there.
    code, out, _ = hg_cli(capsys, monkeypatch, "env", "check", f"clawgym:{suite}")
    text = " ".join(out.split())
    assert code == 1
    assert "clawgym: 2 task(s) - not built" in text
    assert "missing python module hg_absent_module (package hg_absent_module): needs_tools" \
        in text
    assert "missing program hg-absent-tool: needs_tools; provide it with `apt-get install" in text


def test_env_build_check_reports_the_suites_gaps_in_what_it_built(
        env_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    suite = suite_with_gaps(tmp_path / "suite")
    code, out, _ = hg_cli(capsys, monkeypatch, "env", "build", "bare", "-r", "", "--check",
                          f"clawgym:{suite}")
    assert code == 1
    assert "bare: venv" in out
    assert "missing program hg-absent-tool" in out
    assert "missing python module yaml" in out
    clawgym_task(tmp_path / "fine", "plain", check="def grade(t, w):\n    return {'x': 1.0}\n")
    code, out, _ = hg_cli(capsys, monkeypatch, "env", "build", "bare", "-r", "", "--check",
                          f"clawgym:{tmp_path / 'fine'}")
    assert code == 0
    assert "nothing missing" in out


def test_a_spreadsheet_task_needs_python_with_openpyxl(
        env_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """PinchBench's spreadsheet task hands the agent an ``.xlsx``: reading it takes openpyxl
    (pandas reads it through openpyxl), which the bare sandbox and a bare venv lack."""
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "company_expenses.xlsx").write_bytes(b"PK\x03\x04 not a workbook")
    (tmp_path / "task_19_spreadsheet_summary.md").write_text(textwrap.dedent("""\
        ---
        id: task_18_spreadsheet_summary
        grading_type: automated
        workspace_files:
          - source: company_expenses.xlsx
            dest: company_expenses.xlsx
        ---
        ## Prompt
        Summarise `company_expenses.xlsx` in `data_summary.md`.
        ## Automated Checks
        ```python
        def grade(transcript, workspace_path):
            return {"x": 1.0}
        ```
        """))
    task = pinchbench.load(str(tmp_path)).tasks()[0]
    assert task_needs(task).modules == {"openpyxl"}
    build_venv("bare", "")
    code, out, _ = hg_cli(capsys, monkeypatch, "env", "check", f"pinchbench:{tmp_path}",
                          "--env", "bare", "--json")
    assert code == 1
    assert json.loads(out)[0]["missing_modules"] == {
        "openpyxl": {"package": "openpyxl", "tasks": ["task_18_spreadsheet_summary"]}}
