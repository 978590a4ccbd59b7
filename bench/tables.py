"""Plain-text tables shared by the benchmarks' reports."""

from __future__ import annotations


def table(header: list[str], rows: list[list[str]]) -> str:
    """A left-aligned first column, right-aligned others, a rule under the header."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).rjust(w) if i else str(x).ljust(w)
                               for i, (x, w) in enumerate(zip(r, widths)))
    return "\n".join([line(header), line(["-" * w for w in widths])] +
                     [line(r) for r in rows])
