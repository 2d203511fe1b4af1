"""Renderers: the same report as a terminal table, Markdown or JSON."""

from __future__ import annotations

from hostcheck import safeio
from hostcheck.models import Report
from hostcheck.render.escape import escape_tree


def render(report: Report, fmt: str, *, verbose: bool = False, color: bool = False) -> str:
    if fmt == "json":
        return safeio.dumps(report.as_dict(), indent=2, sort_keys=False) + "\n"
    if fmt == "markdown":
        from hostcheck.render.markdown import render_markdown
        from hostcheck.render.markdown_escape import markdown_tree

        return render_markdown(markdown_tree(report), verbose=verbose)
    report = escape_tree(report)
    from hostcheck.render.table import render_table

    return render_table(report, verbose=verbose, color=color)
