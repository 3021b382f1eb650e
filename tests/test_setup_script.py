"""``scripts/setup.sh`` on a machine without bubblewrap.

The script runs for real, with a PATH holding only the tools it needs; ``apt-get`` and ``id``
there are stand-ins (a locked package database cannot be produced safely on a shared machine,
and the script must not install anything from a test)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SETUP = Path(__file__).parents[1] / "scripts" / "setup.sh"
TOOLS = ("bash", "cat", "cut", "dirname", "mktemp", "rm", "sed", "sha256sum", "tail")


def fake_path(tmp_path: Path, apt_get: str | None) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    (bin_dir / "id").write_text("#!/bin/bash\necho 0\n")
    if apt_get is not None:
        (bin_dir / "apt-get").write_text(f"#!/bin/bash\n{apt_get}\n")
    for script in bin_dir.iterdir():
        if not script.is_symlink():
            script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESSGRID_")}
    return {**env, "PATH": str(bin_dir)}


@pytest.mark.parametrize("apt_get", [
    'echo "E: Could not get lock /var/lib/dpkg/lock-frontend" >&2; exit 100',
    None,  # no apt-get at all
])
def test_setup_fails_with_the_reason_when_bubblewrap_cannot_be_installed(
        tmp_path: Path, apt_get: str | None) -> None:
    out = subprocess.run(["bash", str(SETUP)], env=fake_path(tmp_path, apt_get),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stderr
    assert "bubblewrap (bwrap), the episode sandbox, is missing" in out.stderr
    assert "HARNESSGRID_ALLOW_NO_SANDBOX=1" in out.stderr
    assert "Traceback" not in out.stderr
    if apt_get is not None:
        assert "Could not get lock /var/lib/dpkg/lock-frontend" in out.stderr


def test_demo_without_bubblewrap_prints_the_install_hint(tmp_path: Path) -> None:
    """The demo fails before any work, with the hint, when ``bwrap`` is not on PATH."""
    import sys

    exe = Path(sys.executable)
    env = {**os.environ, "PATH": str(exe.parent)}
    out = subprocess.run([str(exe), "-m", "harnessgrid", "demo", "--quick", "--out",
                          str(tmp_path / "demo")], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode != 0, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert "bubblewrap (bwrap) is not installed" in out.stderr
    assert "apt-get install -y bubblewrap" in out.stderr
