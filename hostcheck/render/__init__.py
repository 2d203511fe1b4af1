"""Renderers: each kind of report as terminal text, Markdown, HTML or JSON.

The formats and the one entry point are :mod:`hostcheck.render.formats`; the modules here lay out
each kind of report. :func:`render` is the audit's, for callers that hold a report alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the models load pydantic: every command imports this package, `hostcheck --help` too
    from hostcheck.models import Report


def render(report: Report, fmt: str, *, verbose: bool = False, color: bool = False) -> str:
    """The audit ``report`` in the format named ``fmt``."""
    from hostcheck.render import formats
    from hostcheck.render.views import AuditView

    return formats.render(formats.Kind.AUDIT, AuditView(report), fmt, formats.Options(details=verbose, color=color))
