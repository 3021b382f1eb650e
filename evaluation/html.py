"""``report.html``: the report's tables and plots in one self-contained page.

Plots are inlined as base64 PNG data URIs and the style sheet is inline, so the page opens from
a file (``file://``), from an e-mail attachment or in a headless browser without any server or
sibling files.
"""

from __future__ import annotations

import base64
from html import escape
from typing import TYPE_CHECKING

from harnessgrid.evaluation import tables

if TYPE_CHECKING:
    from harnessgrid.evaluation.report import Report

STYLE = """
body { font-family: -apple-system, 'DejaVu Sans', Arial, sans-serif; margin: 24px; color: #222;
       max-width: 1200px; }
h1 { margin-bottom: 4px; } h2 { margin-top: 28px; border-bottom: 1px solid #ddd; }
p.summary { margin: 2px 0; color: #444; }
p.warn { color: #a33; font-weight: bold; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right;
         white-space: nowrap; }
th { background: #f2f2f2; } td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; border: 1px solid #eee; margin: 8px 0; }
"""

PLOT_TITLES = {"factor_grid": "Pass rate per configuration, factor by factor",
               "configurations": "Pass rate per configuration",
               "behaviours": "Pass rate per behaviour",
               "cost": "Cost vs pass rate per harness"}


def markdown_table_to_html(md: str) -> str:
    """Convert one table written by :func:`harnessgrid.evaluation.tables.table`."""
    lines = [ln for ln in md.splitlines() if ln.startswith("|")]
    if len(lines) < 2:
        return ""

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]

    def fmt(text: str) -> str:
        text = escape(text)
        if text.startswith("**") and text.endswith("**"):
            text = f"<strong>{text[2:-2]}</strong>"
        return text

    head = "".join(f"<th>{fmt(c)}</th>" for c in cells(lines[0]))
    body = "\n".join("<tr>" + "".join(f"<td>{fmt(c)}</td>" for c in cells(ln)) + "</tr>"
                     for ln in lines[2:])
    return f"<table>\n<tr>{head}</tr>\n{body}\n</table>"


def _img(name: str, png: bytes) -> str:
    data = base64.b64encode(png).decode()
    return (f'<h3>{escape(PLOT_TITLES.get(name, name))}</h3>\n'
            f'<img alt="{escape(name)}" src="data:image/png;base64,{data}">')


def _paragraph(line: str) -> str:
    """A text line of the markdown; a leading ``**`` marks a warning (shown in red)."""
    kind = "warn" if line.startswith("**") else "summary"
    return f'<p class="{kind}">{escape(line.replace("**", ""))}</p>'


def blocks_to_html(md: str) -> str:
    """Markdown of tables and paragraphs separated by blank lines (what :mod:`tables` writes);
    each table is converted on its own, so two tables never merge into one."""
    return "\n".join(markdown_table_to_html(block) if block.startswith("|")
                     else _paragraph(block)
                     for block in (b.strip() for b in md.split("\n\n")) if block)


def render_html(report: Report, images: dict[str, bytes]) -> str:
    summary = "\n".join(_paragraph(line) for line in tables.summary_lines(report))
    sections = [
        ("Pass@1 by suite and setting (%, mean ± std over runs)", tables.suites_markdown(report),
         []),
        ("Episodes by setting", tables.counts_markdown(report), []),
        (tables.UNSCORED_TITLE, tables.unscored_markdown(report), []),
        (tables.PARTIAL_TITLE, tables.partial_markdown(report), []),
        ("Pass@1 by behaviour (%)", tables.behaviours_markdown(report), ["behaviours"]),
        ("Score by behaviour (%, mean of sub-scores)",
         tables.behaviours_markdown(report, "score"), []),
        ("Pass@1 by task category (%)", tables.categories_markdown(report), []),
        ("Tasks skipped (their suite could not load them)", tables.skipped_markdown(report), []),
        ("Pass@1 by configuration (%)", tables.configurations_markdown(report),
         ["factor_grid", "configurations"]),
        (tables.EFFECTS_TITLE,
         f"{tables.effects_caption(report)}\n\n{tables.effects_markdown(report)}", []),
        ("Cost per harness (means per episode)", tables.cost_markdown(report), ["cost"]),
    ]
    body = []
    for title, md, plots in sections:
        if not md:
            continue  # a section with nothing to say (no unscored episodes)
        body.append(f"<h2>{escape(title)}</h2>")
        body.extend(_img(p, images[p]) for p in plots if p in images)
        body.append(blocks_to_html(md))
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>harnessgrid evaluation report</title>\n<style>{STYLE}</style>\n</head>\n"
            f"<body>\n<h1>Evaluation report</h1>\n{summary}\n" + "\n".join(body)
            + "\n</body>\n</html>\n")
