"""CONTRIBUTING.md's worked examples run as written: the plugin block is installed through a
real entry point and the test-template block passes against it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from plugin_dist import write_dist_info

ROOT = Path(__file__).resolve().parents[1]


def section_blocks(title: str) -> list[str]:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    start = text.index(f"### {title}")
    end = text.find("\n### ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end if end > 0 else None], re.S)


def run_template(root: Path, name: str, template: str) -> str:
    """Run a test template with pytest in a fresh process that sees the plugin in ``root``."""
    (root / "tests").mkdir()
    (root / "tests" / name).write_text(template)
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(root / "tests")], cwd=root, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    return out.stdout


def test_factor_level_example_and_template(tmp_path: Path) -> None:
    plugin, template = section_blocks("Writing a factor level")
    package = tmp_path / "my_package"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "harnessgrid_plugin.py").write_text(plugin)
    write_dist_info(tmp_path, "my-package", {"my_levels": "my_package.harnessgrid_plugin"})
    assert "10 passed" in run_template(tmp_path, "test_diffstat.py", template)


def test_task_suite_template(tmp_path: Path) -> None:
    """The suite test template passes for a suite registered through a real entry point."""
    register, template = section_blocks("Writing a task suite")
    plugin = register.replace(
        "build_my_suite()",
        "__import__('harnessgrid.plugins.tasks.examples', fromlist=['load']).load()")
    (tmp_path / "my_suite.py").write_text(plugin)
    write_dist_info(tmp_path, "my-suite", {"my_suite": "my_suite"})
    assert "3 passed" in run_template(tmp_path, "test_mysuite.py", template)
