"""A plain-text table that keeps to the terminal's width: aligned columns where they fit, else
one wrapped line per row that names each column (a table is never cut or left overflowing)."""

from __future__ import annotations

from collections.abc import Sequence

from hostcheck.render.terminal import wrap


def columns(header: Sequence[str], rows: Sequence[Sequence[str]], width: int, *, right: Sequence[int] = (),
            rule: bool = False) -> list[str]:
    """``rows`` under ``header``, columns two spaces apart (those numbered in ``right`` aligned
    right, ``rule`` a line of dashes under the header). Wider than ``width``: each row becomes
    "- first: second column's name value; ...", wrapped."""
    table = [list(header), *(list(r) for r in rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    if sum(widths) + 2 * (len(widths) - 1) <= width:
        def line(r: Sequence[str]) -> str:
            return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                             for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
        dashes = [line(["-" * w for w in widths])] if rule else []
        return [line(header), *dashes, *(line(r) for r in rows)]
    out: list[str] = []
    for r in rows:
        named = "; ".join(f"{h}: {c}" if h else c for h, c in zip(header[1:], r[1:], strict=True) if c)
        text = f"{r[0]}: {named}" if r[0] and named else (r[0] or named)
        out += wrap(text, width, first="- ", indent="  ")
    return out
