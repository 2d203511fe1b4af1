"""Renderers: the same report as a terminal table, Markdown or JSON."""

from __future__ import annotations

import json
from typing import Any


def render(report: dict[str, Any], fmt: str, *, verbose: bool = False, color: bool = False) -> str:
    if fmt == "json":
        return json.dumps(report, indent=2, sort_keys=False, default=str) + "\n"
    if fmt == "markdown":
        from hostcheck.render.markdown import render_markdown

        return render_markdown(report, verbose=verbose)
    from hostcheck.render.table import render_table

    return render_table(report, verbose=verbose, color=color)
