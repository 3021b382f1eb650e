"""Build real installed-looking plugin distributions for tests.

A folder holding ``<name>.dist-info/{METADATA,entry_points.txt}`` next to the plugin module is
exactly what ``pip install`` leaves in site-packages; putting that folder on ``sys.path`` (or
``PYTHONPATH`` for a subprocess) makes ``importlib.metadata`` discover the entry point for real.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

FOURTH_OBSERVATION_LEVEL = '''
from harnessgrid import hookimpl
from harnessgrid.levels import ObservationLevel


class Diffstat(ObservationLevel):
    name = "diffstat"
    description = "Shows only how many lines a command printed (a third-party level)."

    def format(self, action, result):
        return f"[{len(result.output.splitlines())} lines]"

    def format_error(self, error):
        return "[rejected]"


@hookimpl
def harnessgrid_factor_levels():
    yield Diffstat
'''


def write_dist_info(root: Path, dist: str, entry_points: dict[str, str],
                    version: str = "0.1.0") -> Path:
    """A dist-info in ``root`` declaring ``{name: module}`` in entry-point group harnessgrid."""
    root.mkdir(parents=True, exist_ok=True)
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = "".join(f"{name} = {module}\n" for name, module in entry_points.items())
    (info / "entry_points.txt").write_text(f"[harnessgrid]\n{lines}")
    return root


def make_plugin_dist(root: Path, dist: str, module: str, source: str,
                     entry_point: str | None = None, version: str = "0.1.0") -> Path:
    """Write module ``module`` and a dist-info declaring it in group ``harnessgrid``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    return write_dist_info(root, dist, {entry_point or module: module}, version)
