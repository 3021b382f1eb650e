"""``harnessgrid eval``, ``harnessgrid report`` and ``report compare`` end to end in fresh
processes, with the test plugin of test_evaluation installed as a real distribution; the HTML
report is self-contained, and renders in headless Chromium (slow test)."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_evaluation import ORIGINAL, install_plugin
from test_evaluation_store import CLI, HANG_S

ROOT = Path(__file__).resolve().parents[1]


def hg(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh process; ``HANG_S`` only guards against a hang (load-proof)."""
    return subprocess.run([sys.executable, "-c", CLI, *args], env={**env, "COLUMNS": "300"},
                          capture_output=True, text=True, timeout=HANG_S, check=False)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return install_plugin(tmp_path_factory.mktemp("evalplugin"))


@pytest.fixture(scope="module")
def runs(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """BASE: the null policy; NEW: the synthetic policy; both through in-space, two test
    adapters and the original harness."""
    root = tmp_path_factory.mktemp("cli")
    common = ["--suites", "evaltest", "--settings", "in-space,out-of-space,original",
              "--original", ORIGINAL, "--adapters", "probe-fc,probe-xml", "--runs", "1",
              "--max-turns", "12", "--concurrency", "4"]
    base = hg(env, "eval", "--policy", "null", "--out", str(root / "base"), "--quiet", *common)
    assert base.returncode == 0, base.stderr
    assert base.stdout == ""  # --quiet prints nothing
    new = hg(env, "eval", "--policy", "xmlfail", "--out", str(root / "new"), *common)
    assert new.returncode == 0, new.stderr
    assert "## Pass@1 by suite and setting" in new.stdout
    assert re.search(r"\| evaltest \| 50\.0 \| 50\.0 \| 100\.0 \| 0\.0 \| 100\.0 \|", new.stdout)
    return root / "base", root / "new"


def test_report_json_and_files(env: dict[str, str], runs: tuple[Path, Path]) -> None:
    _, new = runs
    out = hg(env, "report", str(new), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["episodes"] == 42
    assert data["pass_rate"] == pytest.approx(22 / 42)
    assert data["overall"]["mean"] == pytest.approx((0.5 + 0.5 + 1.0) / 3)
    assert {"suites", "behaviours", "configurations", "factor_effects", "cost"} <= set(data)
    assert json.loads((new / "report.json").read_text())["episodes"] == 42
    markdown = (new / "report.md").read_text()
    for heading in ("by suite and setting", "by behaviour", "by configuration",
                    "Cost per harness", "Factor main effects"):
        assert heading in markdown
    header = (new / "tables" / "suites.csv").read_text().splitlines()[0]
    assert header.startswith("suite,setting,pass_mean,pass_std,pass_min,pass_max")
    for name in ("factor_grid", "configurations", "behaviours", "cost"):
        assert (new / "plots" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_html_report_is_self_contained(runs: tuple[Path, Path]) -> None:
    _, new = runs
    page = (new / "report.html").read_text()
    images = re.findall(r'<img alt="(\w+)" src="data:image/png;base64,([^"]+)"', page)
    assert [name for name, _ in images] == ["behaviours", "factor_grid", "configurations",
                                            "cost"]
    assert all(base64.b64decode(data)[:4] == b"\x89PNG" for _, data in images)
    assert "http://" not in page
    assert "https://" not in page
    assert page.count("<table>") == 8
    assert "ProbeShell-FC 1.0" in page  # + per category


def test_report_compare(env: dict[str, str], runs: tuple[Path, Path]) -> None:
    base, new = runs
    out = hg(env, "report", "compare", str(base), str(new))
    assert out.returncode == 0, out.stderr
    assert "| evaltest | in-space | 0.0 | 50.0 | +50.0 |" in out.stdout
    assert "| evaltest | original | 0.0 | 100.0 | +100.0 |" in out.stdout
    assert "| planning | in-space | 0.0 | 50.0 | +50.0 |" in out.stdout
    data = json.loads(hg(env, "report", "compare", str(base), str(new / "report.json"),
                         "--json").stdout)
    assert data["overall"]["delta"] == pytest.approx(2 / 3)
    assert {(d["row"], d["setting"]): d["delta"] for d in data["suites"]}[
        ("overall", "out-of-space:probe-fc")] == 1.0


def test_user_mistakes_get_a_message_not_a_traceback(env: dict[str, str],
                                                      tmp_path: Path) -> None:
    out = str(tmp_path / "x")
    cases = [
        (["eval", "--policy", "scripted", "--suites", "evaltest", "--out", out, "--adapters",
          "probe-fc,nosuch-shell"], "adapter(s) nosuch-shell not registered"),
        (["eval", "--policy", "scripted", "--suites", "nosuite", "--settings", "in-space",
          "--out", out], "unknown task suite 'nosuite'"),
        (["eval", "--policy", "gpt5", "--suites", "evaltest", "--settings", "in-space",
          "--out", out], "unknown policy backend 'gpt5'"),
        (["eval", "--policy", "scripted", "--suites", "evaltest", "--settings", "original",
          "--out", out], "--original CODE"),
        (["report", str(tmp_path / "nothing")], "neither an evaluation directory"),
        (["report", "compare", out], "compare takes two evaluations"),
    ]
    for args, message in cases:
        result = hg(env, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr, result.stderr
        assert "Traceback" not in result.stderr, result.stderr
    assert not (tmp_path / "x" / "manifest.json").exists()  # mistakes leave nothing behind


def test_eval_command_module_is_light() -> None:
    script = ("import sys, harnessgrid.cli.eval_cmd, harnessgrid.evaluation\n"
              "print(sorted({m.split('.')[0] for m in sys.modules} & "
              "{'matplotlib', 'numpy', 'torch', 'litellm'}))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_report_renders_in_headless_chromium(runs: tuple[Path, Path], tmp_path: Path) -> None:
    _, new = runs
    shot = tmp_path / "report.png"
    out = subprocess.run(["bash", str(ROOT / "scripts" / "screenshot_report.sh"), str(new),
                          str(shot)], capture_output=True, text=True, timeout=HANG_S,
                         check=False)
    assert out.returncode == 0, out.stderr
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (1280, 2000)
    assert len(png) > 100_000  # tables and plots, not a blank page
