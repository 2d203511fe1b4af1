"""Renderers: the same report as a terminal table, Markdown or JSON."""

from __future__ import annotations

from typing import Any

from hostcheck import safeio
from hostcheck.render.escape import escape_tree


def render(report: dict[str, Any], fmt: str, *, verbose: bool = False, color: bool = False) -> str:
    if fmt == "json":
        return safeio.dumps(report, indent=2, sort_keys=False, default=str) + "\n"
    report = escape_tree(report)
    if fmt == "markdown":
        from hostcheck.render.markdown import render_markdown

        return render_markdown(report, verbose=verbose)
    from hostcheck.render.table import render_table

    return render_table(report, verbose=verbose, color=color)
