"""The terminal as it is: its width, and text wrapped to it.

Every plain-text command (audit, explain, policies, earnings, offer, fleet, watch report) lays
its lines out with these two functions, so none pads to a fixed width, leaves trailing spaces
or cuts a word where a wrap would do.
"""

from __future__ import annotations

import re
import shutil
import textwrap

DEFAULT_WIDTH = 80  # when the width cannot be known (a pipe, a file, no COLUMNS)
MIN_WIDTH = 40  # narrower than this, no layout reads; wrap as if it were this wide
MAX_WIDTH = 160  # wider than this, lines are too long to read


def terminal_width() -> int:
    """COLUMNS when set, else the terminal's own width, else 80; held to 40-160."""
    columns = shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    if columns <= 0:
        columns = DEFAULT_WIDTH
    return max(MIN_WIDTH, min(MAX_WIDTH, columns))


def wrap(text: str, width: int, *, indent: str = "", first: str | None = None, whole_urls: bool = False) -> list[str]:
    """``text`` as lines of at most ``width`` characters: words wrapped, a word longer than a
    line broken, no trailing spaces. ``first`` prefixes the first line (``indent`` the rest);
    an empty text is one line holding the prefix alone. With ``whole_urls`` a web address longer
    than a line stands whole on a line of its own (a cut address can be neither clicked nor
    copied): for hostcheck's own citations, never for text from facts."""
    head = indent if first is None else first
    room = max(width, len(head) + 10, len(indent) + 10) - max(len(head), len(indent))
    # A command in backticks stays on one line when it fits one: a copied command must run.
    if _KEEP not in text:
        text = _CODE.sub(lambda m: m.group().replace(" ", _KEEP) if len(m.group()) <= room else m.group(), text)
    wrapper = textwrap.TextWrapper(
        width=max(width, len(head) + 10, len(indent) + 10),
        initial_indent=head,
        subsequent_indent=indent,
        break_long_words=True,
        break_on_hyphens=False,
    )
    if whole_urls and "://" in text:
        wrapper.break_long_words = False
        lines = []
        for line in wrapper.wrap(text):
            if len(line) > wrapper.width and "://" not in line:  # a long word that is no address
                line_wrapper = textwrap.TextWrapper(width=wrapper.width, subsequent_indent=indent,
                                                    break_on_hyphens=False)
                lines += line_wrapper.wrap(line)
            else:
                lines.append(line)
    else:
        lines = wrapper.wrap(text)
    return [line.replace(_KEEP, " ").rstrip() for line in lines] or [head.rstrip()]


_CODE = re.compile(r"`[^`\n]+`")
_KEEP = "\x00"  # a space textwrap does not break at (its whitespace is ASCII only); never in escaped text
