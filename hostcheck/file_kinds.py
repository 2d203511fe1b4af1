"""What kind of hostcheck file a document is, so that a file given to the wrong option is named
in one line ("a facts snapshot, not a policy") instead of a list of every key that does not fit.

Foundation: the facts and policy loaders both ask it, after their own reading failed or before
their own validation lists problems.
"""

from __future__ import annotations

import json
from typing import Any

FACTS = "a facts snapshot (what `hostcheck facts` writes)"
REPORT = "a hostcheck report (what `hostcheck audit --format json` writes)"
POLICY = "a policy"
WATCH_REPORT = "a watch report (what `hostcheck watch report --format json` writes)"


def kind_of(data: Any) -> str | None:
    """FACTS, REPORT, POLICY or WATCH_REPORT by the keys only that kind has; None for anything else."""
    if not isinstance(data, dict):
        return None
    if "report_version" in data:
        return REPORT
    meta = data.get("meta")
    if isinstance(meta, dict) and "facts_format" in meta:
        return FACTS
    if "requirements" in data and ("platform" in data or "sources" in data):
        return POLICY
    if "uptime" in data and "window" in data and "platforms" in data:
        return WATCH_REPORT
    return None


def sniff(text: str) -> str | None:
    """:func:`kind_of` a JSON or YAML text (already read within its size bound); None when it
    does not parse."""
    try:
        if text.lstrip().startswith(("{", "[")):
            data = json.loads(text)
        else:
            from hostcheck.yaml_loader import safe_load

            data = safe_load(text)
    except Exception:
        return None
    return kind_of(data)
