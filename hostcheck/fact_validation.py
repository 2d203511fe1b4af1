"""A facts document checked against the facts table (:mod:`hostcheck.fact_paths`): a value of
the wrong type for its declared fact, and keys that are not declared or declared and missing."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from hostcheck.fact_paths import SECTIONS, TABLE, UNKNOWN_KEY, Fact, FactType, children

MAX_INT = 2**63
"""Integers past this are not a measurement (and would not survive other JSON readers)."""


def _is_unknown(node: Any) -> bool:
    return isinstance(node, dict) and set(node) == {UNKNOWN_KEY} or type(node).__name__ == "Unknown"


def _value_problem(fact: Fact, value: Any) -> str | None:
    kind = fact.type
    if kind is FactType.BOOL and not isinstance(value, bool):
        return "must be true or false"
    if kind is FactType.INT and (type(value) is not int or abs(value) >= MAX_INT):
        return "must be a whole number"
    if kind is FactType.NUMBER and (isinstance(value, bool) or not isinstance(value, (int, float))
                                    or (isinstance(value, float) and not math.isfinite(value))
                                    or (isinstance(value, int) and abs(value) >= MAX_INT)):
        return "must be a number"
    if kind in (FactType.TEXT, FactType.TIME) and not isinstance(value, str):
        return "must be text"
    if kind is FactType.TIME and not _is_time(value):
        return "must be a time (ISO 8601, with its zone)"
    if kind in (FactType.INT, FactType.NUMBER) and fact.unit and fact.unit != "°C" and value < 0:
        return f"must not be negative ({fact.unit})"
    if kind is FactType.TEXTS and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        return "must be a list of text"
    if kind is FactType.SETTING and not (isinstance(value, str)
                                         or isinstance(value, list) and all(isinstance(v, str) for v in value)):
        return "must be text or a list of text"
    if kind in (FactType.OBJECT, FactType.MAP, FactType.COUNTER, FactType.WINDOW) and not isinstance(value, dict):
        return "must be an object"
    if kind is FactType.LIST and not isinstance(value, list):
        return "must be a list"
    return None


def _is_time(text: str) -> bool:
    try:
        return datetime.fromisoformat(text).tzinfo is not None
    except ValueError:
        return False


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


def _child_fact(fact: Fact | None, key: str) -> Fact | None:
    """The declared fact of ``key`` under ``fact`` (None: the root; the result None: undeclared)."""
    if fact is None:
        return TABLE.get(key) if key in {s.name for s in SECTIONS} else None
    if fact.type in (FactType.LIST, FactType.MAP):
        return TABLE.get(f"{fact.path}.*")
    return TABLE.get(f"{fact.path}.{key}")


def _walk(node: Any, fact: Fact | None, where: str) -> Any:
    """(value, fact, shown path) of every declared value under ``node``, parents first; keys
    with dots in them (``sleep.target``) stay one key."""
    yield node, fact, where
    if node is None or _is_unknown(node) or fact is not None and fact.type in _OPAQUE:
        return
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        child = _child_fact(fact, str(key))
        if child is not None:
            yield from _walk(value, child, f"{where}.{key}" if where else str(key))


_OPAQUE = (FactType.RAW, FactType.TEXTS, FactType.SETTING)
_RECORDS = (FactType.OBJECT, FactType.COUNTER, FactType.WINDOW)


def type_problem(data: Any) -> str | None:
    """The first declared fact in JSON facts ``data`` holding a value of the wrong type, as
    'path: what it must be, not VALUE'; None when every value fits. Null and unknown fit any
    fact; undeclared keys are not judged here (:func:`shape_problems` finds them)."""
    for node, fact, where in _walk(data, None, ""):
        if fact is None or node is None or _is_unknown(node):
            continue
        problem = _value_problem(fact, node)
        if problem:
            return f"{where}: {problem}, not {type(node).__name__} {_shown(node)}"
    return None


def shape_problems(facts: Any, path: str = "") -> list[str]:
    """What differs from the declared layout in a facts tree (JSON or Python facts) under the
    declared ``path`` ("" for the whole tree): keys that are not declared, and declared keys
    missing from an object that is there (a key declared with ``when`` may be missing). A
    collector's output and an upgraded file come out empty; a file written before a fact was
    added lacks that fact."""
    problems: list[str] = []
    for node, fact, where in _walk(facts, TABLE.get(path) if path else None, path):
        if not isinstance(node, dict) or _is_unknown(node) or fact is not None and fact.type not in _RECORDS:
            continue
        declared = children(fact.path) if fact else {s.name: TABLE[s.name] for s in SECTIONS}
        prefix = f"{where}." if where else ""
        problems += [f"{prefix}{key}: not declared" for key in node if key not in declared]
        problems += [f"{prefix}{key}: declared, not written" for key, child in declared.items()
                     if key not in node and not child.when]
    return problems
