"""Evaluation: the paper's protocol, a resumable result store, reports and plots.

- :mod:`~harnessgrid.evaluation.plan`: settings (in-space, out-of-space, original, train) →
  harnesses, suites → tasks;
- :mod:`~harnessgrid.evaluation.run`: :func:`evaluate` runs every episode once, concurrently,
  and commits each as it ends;
- :mod:`~harnessgrid.evaluation.store` and :mod:`~harnessgrid.evaluation.manifest`: the
  evaluation directory (JSONL, crash-safe, resumable, refuses incompatible runs);
- :mod:`~harnessgrid.evaluation.aggregate` and :mod:`~harnessgrid.evaluation.report`: Pass@1
  per run, averaged over runs with their spread, in the paper's table shapes, plus behaviours
  and cost; :mod:`~harnessgrid.evaluation.tables`, :mod:`~harnessgrid.evaluation.plots` and
  :mod:`~harnessgrid.evaluation.html` render it; :mod:`~harnessgrid.evaluation.compare` puts
  two runs side by side.

Names are imported on first use, so importing this package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harnessgrid._lazy import lazy_exports

_LAZY: dict[str, str] = {
    "EvalConfig": "harnessgrid.evaluation.run",
    "EvalOutcome": "harnessgrid.evaluation.run",
    "evaluate": "harnessgrid.evaluation.run",
    "aevaluate": "harnessgrid.evaluation.run",
    "EvalResult": "harnessgrid.evaluation.results",
    "ResultKey": "harnessgrid.evaluation.results",
    "EvalStore": "harnessgrid.evaluation.store",
    "read_results": "harnessgrid.evaluation.store",
    "load_trajectory": "harnessgrid.evaluation.store",
    "Manifest": "harnessgrid.evaluation.manifest",
    "read_manifest": "harnessgrid.evaluation.manifest",
    "Report": "harnessgrid.evaluation.report",
    "build_report": "harnessgrid.evaluation.report",
    "load_report": "harnessgrid.evaluation.report",
    "write_report": "harnessgrid.evaluation.report",
    "render_markdown": "harnessgrid.evaluation.tables",
    "compare_reports": "harnessgrid.evaluation.compare",
    "render_comparison": "harnessgrid.evaluation.compare",
    "SETTINGS": "harnessgrid.evaluation.plan",
    "resolve_settings": "harnessgrid.evaluation.plan",
}

__all__ = ["SETTINGS", "EvalConfig", "EvalOutcome", "EvalResult", "EvalStore", "Manifest",
           "Report", "ResultKey", "aevaluate", "build_report", "compare_reports", "evaluate",
           "load_report", "load_trajectory", "read_manifest", "read_results",
           "render_comparison", "render_markdown", "resolve_settings", "write_report"]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from harnessgrid.evaluation.compare import compare_reports, render_comparison
    from harnessgrid.evaluation.manifest import Manifest, read_manifest
    from harnessgrid.evaluation.plan import SETTINGS, resolve_settings
    from harnessgrid.evaluation.report import Report, build_report, load_report, write_report
    from harnessgrid.evaluation.results import EvalResult, ResultKey
    from harnessgrid.evaluation.run import EvalConfig, EvalOutcome, aevaluate, evaluate
    from harnessgrid.evaluation.store import EvalStore, load_trajectory, read_results
    from harnessgrid.evaluation.tables import render_markdown
