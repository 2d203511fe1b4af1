"""Control characters from the data never reach a terminal or a document.

Host names, GPU names, reasons and file names come from the audited machine or from shared
files; an escape sequence in one of them could rewrite the user's terminal or hide a line.
Every string of a report is escaped once, at the output boundary, before any renderer lays
it out (JSON needs nothing: json.dumps escapes control characters itself).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from enum import Enum
from typing import Any

from pydantic import BaseModel

# C0 and C1 controls, DEL, and the bidirectional overrides that reorder what is displayed.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _one(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_text(text: str) -> str:
    """``text`` with every control character written as a visible escape (``\\x1b``)."""
    return _CONTROL.sub(_one, text)


def map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """A copy of a model, dataclass or JSON-like tree with ``change`` applied to every string (keys too);
    enum members are hostcheck's own words and stay members."""
    if isinstance(value, Enum):
        return value
    if isinstance(value, BaseModel):
        return value.model_copy(update={name: map_strings(item, change) for name, item in value})
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: map_strings(getattr(value, f.name), change)
                                             for f in dataclasses.fields(value) if f.init})
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {map_strings(k, change): map_strings(v, change) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [map_strings(v, change) for v in value]
    return value


def escape_tree(value: Any) -> Any:
    """A copy of a model or JSON-like tree with every string (keys too) escaped."""
    return map_strings(value, escape_text)
