"""Tables that fit the terminal: columns dropped by priority, long values wrapped, never cut.

rich squeezes every column of a table that is too wide and cuts values with "…", which
turns ids and error classes into guesses at 80 columns. Here each column says how
important it is and how narrow it may get: the least important columns are left out until
the rest fit, and what is kept wraps instead of being cut (``--json`` has everything).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.table import Table

# Between two columns: a space of padding on each side and the (blank) separator.
_GAP = 3


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its header, how narrow it may get, and how soon it is dropped."""

    header: str
    min_width: int = 0
    priority: int = 0  # 0 is always kept; higher numbers are dropped first
    justify: str = "left"

    def natural_width(self, values: Sequence[str]) -> int:
        """The width that shows every value on one line."""
        return max([len(self.header), *(len(value) for value in values)])

    def narrowest_width(self, values: Sequence[str]) -> int:
        """The narrowest this column may be: its header, its minimum, its longest value's
        longest word (wrapping never splits a word where a space would do)."""
        words = [len(word) for value in values for word in value.split()] or [0]
        return max(len(self.header), min(self.min_width or 10**6, max(words)))


def fitted_table(
    title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]], *, width: int
) -> Table:
    """A table no wider than ``width``: columns dropped by priority until every value fits on
    one line (or only columns of priority 0 are left); rich wraps what still does not fit."""
    keep = list(range(len(columns)))
    for index in sorted(keep, key=lambda i: -columns[i].priority):
        if _needed(columns, rows, keep) <= width or columns[index].priority == 0:
            break
        keep.remove(index)
    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for index in keep:
        column = columns[index]
        table.add_column(
            column.header,
            justify=column.justify,  # type: ignore[arg-type]
            overflow="fold",
            min_width=column.narrowest_width([row[index] for row in rows]),
        )
    for row in rows:
        table.add_row(*(row[index] for index in keep))
    return table


def _needed(columns: Sequence[Column], rows: Sequence[Sequence[str]], keep: list[int]) -> int:
    widths = [columns[i].natural_width([row[i] for row in rows]) for i in keep]
    return sum(widths) + _GAP * (len(widths) - 1)
