"""The redaction kind of each fact path, and the words a declared fact holds by its declaration."""

from __future__ import annotations

import re
from functools import cache

from hostcheck.fact_paths import DECLARED, KINDS, TABLE


@cache
def vocabulary(path: str) -> frozenset[str]:
    """The words a declared fact holds by its declaration (its choices and the quoted examples
    of its meaning): a value among them is the field's own word, never a learned name."""
    fact = TABLE.get(_declared_leaf(path))
    if fact is None:
        return frozenset()
    return frozenset(w.lower() for w in (*fact.choices, *re.findall(r'"([^"]+)"', fact.meaning)))


def _declared_leaf(path: str) -> str:
    parts = path.strip(".").split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in DECLARED:
            return prefix
    return ""


def kind_of(path: str) -> str:
    """The redaction kind of a fact path: the one declared on it or on its nearest declared
    parent; ``value`` under a declared fact without a kind; ``text`` for what is not declared."""
    parts = path.strip(".").split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        kind = KINDS.get(prefix)
        if kind is not None:
            return kind
        if prefix in DECLARED:
            return "value"
    return "text"
