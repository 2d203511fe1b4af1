"""Values from facts, policies and config never become Markdown or HTML markup: the one
escaping layer of the Markdown and HTML reports.

A Markdown report is pasted where it is rendered (a forum post, a ticket), and Markdown
carries inline HTML: a host name or a reason holding ``<script>``, ``<img onerror=...>``,
``[a link](...)``, ``*emphasis*`` or a ``|`` that splits a table cell would become markup
there. Every string of the report is escaped once, before the layout (in the same pass as
:func:`hostcheck.render.escape.escape_tree`'s control characters): HTML's special characters become
entities (no renderer reads ``&lt;script&gt;`` as a tag), the table delimiter ``|`` an entity
(rows are split before entities are read), and what starts Markdown markup is escaped with a
backslash, which CommonMark reads as the character itself. The HTML report
(:mod:`hostcheck.render.html`) takes the same first step, :func:`html_text`, for text and quoted
attribute values, and lets a value become a link only through :func:`https_url`.
"""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import urlsplit

from hostcheck.render.escape import escape_text, map_strings

# Emphasis, code spans, links and images, strikethrough, and the backslash itself. An
# underscore between letters or digits starts no emphasis (CommonMark), so check ids such
# as gpu_memory stay readable.
_INLINE = re.compile(r"[\\`*\[\]~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# What makes a whole line markup when a value starts one: a heading, a list, a block quote
# (">" is an entity already), a setext underline, an indented code block.
_LINE_START = re.compile(r"^(?:[#+=-]|\d{1,9}(?=[.)]))")
# Bare web addresses a GFM renderer turns into links by itself.
_AUTOLINK = re.compile(r"(?i)(?<=[a-z0-9])://|\bwww\.")


# What a link's address may hold: printable ASCII but the characters that end an attribute or
# a Markdown link destination, or start markup.
_URL_CHARS = re.compile(r"[!#$%&()*+,\-./0-9:;=?@A-Z_a-z~]+")


def html_text(text: str) -> str:
    """``text`` as HTML character data or a quoted attribute value that shows exactly this text:
    control characters and bidirectional marks written visibly first
    (:func:`hostcheck.render.escape.escape_text`), then ``& < > " '`` as entities."""
    return html.escape(escape_text(text), quote=True)


def https_url(url: str) -> str | None:
    """``url`` when a report may make it a link: an ``https:`` address with a host, of plain
    characters only (no ``javascript:``, ``data:``, relative or protocol-relative address, no
    quote, space or angle bracket); None otherwise, and the caller shows it as text."""
    if len(url) > 2000 or not _URL_CHARS.fullmatch(url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme != "https" or not parts.hostname or parts.username or parts.password:
        return None
    return url


def markdown_text(text: str) -> str:
    """``text`` as Markdown that renders as exactly this text, and as nothing else."""
    out = html_text(text).replace("|", "&#124;")  # HTML's specials, and the table delimiter
    out = _INLINE.sub(lambda m: "\\" + m.group(), out)
    out = _AUTOLINK.sub(lambda m: m.group().replace(":", "&#58;").replace(".", "&#46;"), out)
    stripped = out.lstrip(" ")
    out = "&#32;" * (len(out) - len(stripped)) + stripped
    match = _LINE_START.match(out)
    if match:
        lead = match.group()
        out = (f"{lead}\\{out[len(lead)]}" + out[len(lead) + 1:]) if lead.isdigit() else "\\" + out
    return out


def markdown_tree(value: Any) -> Any:
    """A copy of a model, dataclass or JSON-like tree with every string (keys too) escaped for
    Markdown (control characters first, in :func:`html_text`)."""
    return map_strings(value, markdown_text)
