"""The facts tree: what collectors measured, and what they could not.

Facts are a plain nested dict (JSON-serialisable) so that a snapshot saved with
``hostcheck facts`` can be judged later with ``hostcheck audit --facts FILE``.
Anything a collector could not determine is an :class:`Unknown` carrying the reason;
in JSON it is written as ``{"$unknown": "reason"}``. Checks never see ``None`` for
"don't know": they see an ``Unknown`` and must report the finding as unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostcheck import safeio
from hostcheck.errors import FactsError, FileInputError, UndeclaredFact, UpgradeError
from hostcheck.fact_paths import FACTS_FORMAT, UNKNOWN_KEY, check_declared
from hostcheck.fact_validation import type_problem
from hostcheck.file_kinds import POLICY, WATCH_REPORT, kind_of, sniff
from hostcheck.upgrade import upgrade

__all__ = ["FACTS_FORMAT", "UNKNOWN_KEY", "UndeclaredFact"]



@dataclass(frozen=True)
class Unknown:
    """A fact that could not be determined, and why (never a silent pass)."""

    reason: str

    def __bool__(self) -> bool:  # an Unknown must never read as a truthy "yes"
        return False


def lookup(facts: Any, path: str) -> Any:
    """Return the value at a dotted ``path`` or an :class:`Unknown` saying where it stops.

    Integer components index lists (``gpu.devices.0.name``). An ``Unknown`` found on the
    way is returned as is, so its reason reaches the finding. A path that
    :mod:`hostcheck.fact_paths` does not declare raises :class:`UndeclaredFact` (a typo in the
    caller, not a fact that was not collected).
    """
    check_declared(path)
    node = facts
    walked: list[str] = []
    for part in path.split("."):
        if isinstance(node, Unknown):
            return node
        if isinstance(node, dict):
            if part not in node:
                where = ".".join(walked) or "facts"
                return Unknown(f"{where} has no '{part}' (not collected)")
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return Unknown(f"'{'.'.join(walked + [part])}' is not present")
        walked.append(part)
    return node


def hostname(facts: Any) -> str | None:
    """The machine's host name as the facts record it; None when they do not."""
    name = lookup(facts, "meta.hostname")
    return name if isinstance(name, str) else None


def to_jsonable(value: Any) -> Any:
    """Facts -> JSON-ready data (``Unknown`` becomes ``{"$unknown": reason}``)."""
    if isinstance(value, Unknown):
        return {UNKNOWN_KEY: value.reason}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


def from_jsonable(value: Any) -> Any:
    """JSON data -> facts (``{"$unknown": reason}`` becomes ``Unknown``)."""
    if isinstance(value, dict):
        if set(value) == {UNKNOWN_KEY}:
            return Unknown(str(value[UNKNOWN_KEY]))
        return {k: from_jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_jsonable(v) for v in value]
    return value


def _not_facts(kind: str) -> str:
    where = "`hostcheck audit --policy` takes it" if kind == POLICY else "--facts takes what `hostcheck facts` writes"
    return f"{kind}, not a facts snapshot: {where}"


def _other_kind(path: Path) -> str | None:
    """Why a file that is not JSON is not a snapshot, when it is another hostcheck file (a policy's YAML)."""
    try:
        kind = sniff(safeio.read_text(path))
    except FileInputError:
        return None
    return _not_facts(kind) if kind in (POLICY, WATCH_REPORT) else None


def load_snapshot(path: Path) -> dict[str, Any]:
    """Read a facts snapshot written by ``hostcheck facts`` (or by hand, for tests), upgraded to
    :data:`FACTS_FORMAT` when it is older (:func:`hostcheck.upgrade.upgrade`).

    Raises :class:`FactsError` with the file and the reason for anything unusable: not a facts
    file, a format this hostcheck does not know, a declared fact holding the wrong type (a
    snapshot from someone else with "false" where a boolean goes would read as true).
    """
    try:
        data = safeio.load_json(path)
    except FileInputError as exc:
        raise FactsError(f"{path}: {_other_kind(path) or exc}") from exc
    kind = kind_of(data)
    if kind in (POLICY, WATCH_REPORT):
        raise FactsError(f"{path}: {_not_facts(kind)}")
    if not isinstance(data, dict):
        raise FactsError(f"{path}: a facts snapshot is a JSON object, not {type(data).__name__}")
    # A full report (hostcheck audit --format json) carries its facts under "facts".
    if "facts" in data and isinstance(data["facts"], dict) and "report_version" in data:
        data = data["facts"]
    try:
        data = upgrade(data)
    except UpgradeError as exc:
        raise FactsError(f"{path}: {exc}") from exc
    for key, section in data.items():
        if not isinstance(section, dict):
            raise FactsError(f"{path}: section '{key}' must be an object, not {type(section).__name__}")
    wrong = type_problem(data)
    if wrong:
        raise FactsError(f"{path}: {wrong}")
    return from_jsonable(data)
