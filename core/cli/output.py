"""Tables that stay readable wherever they are printed.

On a terminal a table is drawn by rich, and a cell too wide for the terminal is folded onto
more lines, never cut with an ellipsis (an id cut to ``task-00…`` is useless). Piped or
redirected, the same table is plain text: a title line, a header and one line per row with
columns aligned by spaces, nothing wrapped or cut, so ``grep``, ``awk`` and ``cut`` work on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

#: A column is its header, or (header, "right") for numbers.
ColumnSpec = str | tuple[str, str]


def _name(column: ColumnSpec) -> str:
    return column if isinstance(column, str) else column[0]


def _one_line(value: object) -> str:
    return " ".join(str(value).split("\n"))


def plain_table(title: str | None, columns: Sequence[ColumnSpec],
                rows: Sequence[Sequence[object]], *, header: bool = True) -> str:
    """The table as aligned plain text (what :func:`print_table` writes when piped)."""
    cells = [[_one_line(v) for v in row] for row in rows]
    names = [_name(c) for c in columns]
    lines = [names] if header else []
    lines += cells
    widths = [max((len(line[i]) for line in lines if i < len(line)), default=0)
              for i in range(len(columns))]
    right = [not isinstance(c, str) and c[1] == "right" for c in columns]
    out = [title] if title else []
    for line in lines:
        # strict=False: a row may have fewer cells than there are columns
        parts = [(v.rjust(w) if r else v.ljust(w))
                 for v, w, r in zip(line, widths, right, strict=False)]
        out.append("  ".join(parts).rstrip())
    return "\n".join(out)


def print_table(title: str | None, columns: Sequence[ColumnSpec],
                rows: Iterable[Sequence[object]], *, header: bool = True,
                console: Console | None = None) -> None:
    """Print ``rows`` under ``columns``: rich on a terminal, plain text otherwise."""
    from rich.console import Console

    console = console or Console()
    rows = list(rows)
    if not console.is_terminal:
        console.print(plain_table(title, columns, rows, header=header), highlight=False,
                      markup=False, soft_wrap=True)
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, show_header=header)
    for column in columns:
        justify = "left" if isinstance(column, str) else column[1]
        table.add_column(_name(column), overflow="fold", justify=justify)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*(Text(str(v)) for v in row))  # values are data, not rich markup
    console.print(table, highlight=False)
