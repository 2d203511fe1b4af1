"""HTML built from elements, never from strings: what a report shows cannot become markup.

Every tag and attribute name is written in hostcheck's code; every value (text or attribute)
goes through :func:`hostcheck.render.markdown_escape.html_text`, and an address becomes a link
only when :func:`~hostcheck.render.markdown_escape.https_url` accepts it. Only :class:`Markup`,
made here from escaped parts, is inserted as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TypeAlias

from hostcheck.render.markdown_escape import html_text, https_url

_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9-]*")


class Markup(str):
    """HTML this module built: inserted as it is."""

    __slots__ = ()


Child: TypeAlias = "Markup | str | int | float | None | Iterable[Child]"


def _children(children: Iterable[Child]) -> str:
    out = []
    for child in children:
        if child is None:
            continue
        if isinstance(child, Markup):
            out.append(str(child))
        elif isinstance(child, str):
            out.append(html_text(child))
        elif isinstance(child, (int, float)):
            out.append(html_text(f"{child:g}" if isinstance(child, float) else str(child)))
        else:
            out.append(_children(child))
    return "".join(out)


def el(tag: str, *children: Child, **attrs: str | int | float | bool | None) -> Markup:
    """``<tag attrs>children</tag>``; attribute names as Python names (``class_`` is ``class``,
    ``aria_label`` is ``aria-label``); an attribute that is None or False is left out."""
    if not _NAME.fullmatch(tag):
        raise ValueError(f"not a tag name: {tag!r}")
    parts = [tag]
    for name, value in attrs.items():
        if value is None or value is False:
            continue
        name = name.rstrip("_").replace("_", "-")
        if not _NAME.fullmatch(name) or name.startswith("on") or name in ("href", "src", "style", "xlink-href"):
            raise ValueError(f"attribute {name!r} is not set through el() (links: link())")
        parts.append(name if value is True else f'{name}="{html_text(_number(value))}"')
    if tag in VOID:
        return Markup(f"<{' '.join(parts)}>")
    return Markup(f"<{' '.join(parts)}>{_children(children)}</{tag}>")


def _number(value: str | int | float) -> str:
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(value)


VOID = frozenset({"meta", "br", "hr", "col"})


def link(url: str, text: Child = None) -> Markup:
    """A link to an ``https:`` address, or the address as text when it is anything else."""
    safe = https_url(url)
    shown = url if text is None else text
    if safe is None:
        return Markup(_children([shown]))
    return Markup(f'<a href="{html_text(safe)}" rel="noreferrer noopener">{_children([shown])}</a>')


def join(parts: Iterable[Child], sep: str = "") -> Markup:
    """The parts (escaped as children are) with ``sep`` between them."""
    return Markup(html_text(sep).join(_children([p]) for p in parts))
