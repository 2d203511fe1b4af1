"""Values from facts, policies and config never become Markdown or HTML markup.

A Markdown report is pasted where it is rendered (a forum post, a ticket), and Markdown
carries inline HTML: a host name or a reason holding ``<script>``, ``<img onerror=...>``,
``[a link](...)``, ``*emphasis*`` or a ``|`` that splits a table cell would become markup
there. Every string of the report is escaped once, before the layout (in the same pass as
:func:`hostcheck.render.escape.escape_tree`'s control characters): HTML's special characters become
entities (no renderer reads ``&lt;script&gt;`` as a tag), the table delimiter ``|`` an entity
(rows are split before entities are read), and what starts Markdown markup is escaped with a
backslash, which CommonMark reads as the character itself.
"""

from __future__ import annotations

import html
import re
from typing import Any

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


def markdown_text(text: str) -> str:
    """``text`` as Markdown that renders as exactly this text, and as nothing else."""
    out = html.escape(text).replace("|", "&#124;")  # HTML's specials, and the table delimiter
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
    Markdown, control characters first (:func:`hostcheck.render.escape.escape_text`)."""
    return map_strings(value, lambda text: markdown_text(escape_text(text)))
