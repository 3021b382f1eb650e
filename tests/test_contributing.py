"""CONTRIBUTING.md's worked examples run as written: the plugin block is installed through a
real entry point and the test-template block passes against it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def section_blocks(title: str) -> list[str]:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    start = text.index(f"### {title}")
    end = text.find("\n### ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end if end > 0 else None], re.S)


def test_factor_level_example_and_template(tmp_path: Path) -> None:
    plugin, template = section_blocks("Writing a factor level")
    package = tmp_path / "my_package"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "harnessgrid_plugin.py").write_text(plugin)
    info = tmp_path / "my_package-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-package\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        "[harnessgrid]\nmy_levels = my_package.harnessgrid_plugin\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_diffstat.py").write_text(template)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(tmp_path / "tests")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "10 passed" in out.stdout


def test_task_suite_template(tmp_path: Path) -> None:
    """The suite test template passes for a suite registered through a real entry point."""
    register, template = section_blocks("Writing a task suite")
    plugin = register.replace(
        "build_my_suite()",
        "__import__('harnessgrid.plugins.tasks.examples', fromlist=['load']).load()")
    (tmp_path / "my_suite.py").write_text(plugin)
    info = tmp_path / "my_suite-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-suite\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[harnessgrid]\nmy_suite = my_suite\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_mysuite.py").write_text(template)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(tmp_path / "tests")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "3 passed" in out.stdout
