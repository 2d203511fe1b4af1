"""Policies: one YAML file per platform, validated strictly, errors with file and line."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from hostcheck import safeio
from hostcheck.checks import load_registry

POLICY_FORMAT = 1
SEVERITIES = ("blocker", "risk", "advice")
LEVELS = ("low", "medium", "high")
KINDS = ("platform", "hygiene", "owner-risk")
# The owner-risk set is judged like any policy but rates the owner's exposure instead of a
# platform's verdict, so it is not among the policies an audit runs by default.
OWNER_RISK_POLICY = "owner-risk"
TOP_KEYS = {"format", "id", "title", "platform", "kind", "summary", "follows", "sources", "requirements"}
REQUIRED_TOP = {"format", "id", "title", "platform", "kind", "summary", "sources", "requirements"}
SOURCE_KEYS = {"url", "title", "checked", "note"}
REQUIREMENT_KEYS = {"check", "severity", "level", "threshold", "source", "note"}
MAX_POLICY_BYTES = 1 << 20


class PolicyError(ValueError):
    """A policy that cannot be used; the message names file, line or field, and the reason."""


@dataclass(frozen=True)
class Source:
    key: str
    url: str
    title: str
    checked: str
    note: str = ""


@dataclass(frozen=True)
class Requirement:
    check: str
    severity: str
    threshold: Any
    source: Source
    note: str = ""
    level: str = ""  # owner-risk policies only: low | medium | high


@dataclass(frozen=True)
class Policy:
    id: str
    title: str
    platform: str
    kind: str
    summary: str
    follows: str
    requirements: tuple[Requirement, ...]
    path: str


class _Mapping(dict):
    lines: dict[str, int]
    line: int


class _Sequence(list):
    lines: list[int]
    line: int


MAX_ALIASES = 16
"""Aliases a policy may use: enough for sharing a list, too few for a "billion laughs" bomb
(each alias can at most double what it refers to)."""


class _LineLoader(yaml.SafeLoader):
    """A safe loader that remembers the line of every key and list item, and refuses
    alias bombs and nesting deeper than the validator (or Python's stack) can take."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                line = event.start_mark.line + 1 if event.start_mark is not None else "?"
                raise PolicyError(f"line {line}: more than {MAX_ALIASES} YAML aliases")
        self._depth += 1
        try:
            if self._depth > safeio.MAX_DEPTH:
                raise PolicyError(f"line {event.start_mark.line + 1}: nested deeper than {safeio.MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> _Mapping:
    result = _Mapping()
    result.lines = {}
    result.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            raise PolicyError(f"line {key_node.start_mark.line + 1}: keys must be strings, not {key!r}")
        if key in result:
            raise PolicyError(f"line {key_node.start_mark.line + 1}: duplicate key '{key}'")
        result[key] = loader.construct_object(value_node, deep=True)
        result.lines[key] = key_node.start_mark.line + 1
    return result


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> _Sequence:
    result = _Sequence(loader.construct_object(child, deep=True) for child in node.value)
    result.lines = [child.start_mark.line + 1 for child in node.value]
    result.line = node.start_mark.line + 1
    return result


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def _line(container: Any, key: Any) -> str:
    lines = getattr(container, "lines", None)
    if isinstance(container, _Mapping) and lines and key in lines:
        return f"line {lines[key]}"
    if isinstance(container, _Sequence) and isinstance(key, int) and key < len(container.lines):
        return f"line {container.lines[key]}"
    return f"line {getattr(container, 'line', '?')}"


def _fail(path: str, container: Any, key: Any, field: str, reason: str) -> PolicyError:
    return PolicyError(f"{path}: {_line(container, key)}: {field}: {reason}")


def _string(path: str, data: Any, key: str, field: str) -> str:
    value = data[key]
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, data, key, field, f"must be a non-empty string, not {type(value).__name__}")
    return value


def _date(path: str, data: Any, key: str, field: str) -> str:
    value = data[key]
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value).isoformat()
        except ValueError:
            pass
    raise _fail(path, data, key, field, f"must be a date YYYY-MM-DD, not {value!r}")


def _keys(path: str, data: Any, allowed: set[str], required: set[str], where: str) -> None:
    if not isinstance(data, dict):
        raise PolicyError(f"{path}: {_line(data, None)}: {where}: must be a mapping, not {type(data).__name__}")
    for key in data:
        if key not in allowed:
            raise _fail(path, data, key, f"{where}.{key}" if where else key,
                        f"unknown key (allowed: {', '.join(sorted(allowed))})")
    missing = sorted(required - set(data))
    if missing:
        raise PolicyError(f"{path}: {_line(data, None)}: {where or 'policy'}: missing required key '{missing[0]}'")


def _threshold(path: str, req: Any, index: int, kind: str) -> Any:
    field = f"requirements[{index}].threshold"
    present = "threshold" in req
    if kind == "none":
        if present:
            raise _fail(path, req, "threshold", field, "this check takes no threshold")
        return None
    if not present:
        raise _fail(path, req, "check", field, f"missing: check {req['check']} needs a {kind} threshold")
    value = req["threshold"]
    ok = {
        "number": isinstance(value, (int, float)) and not isinstance(value, bool),
        "string": isinstance(value, str) and bool(value.strip()),
        "list": isinstance(value, list) and len(value) > 0,
        "bool": isinstance(value, bool),
    }[kind]
    if not ok:
        raise _fail(path, req, "threshold", field, f"must be a {kind}, not {type(value).__name__} {value!r}")
    return list(value) if isinstance(value, list) else value


def parse_policy(text: str, path: str) -> Policy:
    """Validate policy text; raise PolicyError naming the file, line, field and reason."""
    try:
        data = yaml.load(text, Loader=_LineLoader)  # _LineLoader is a SafeLoader
    except PolicyError as exc:
        raise PolicyError(f"{path}: {exc}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else "?"
        raise PolicyError(f"{path}: {where}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from exc
    except RecursionError as exc:
        raise PolicyError(f"{path}: nested too deeply") from exc
    if data is None:
        raise PolicyError(f"{path}: empty policy file")
    _keys(path, data, TOP_KEYS, REQUIRED_TOP, "")
    if data["format"] != POLICY_FORMAT:
        raise _fail(path, data, "format", "format", f"must be {POLICY_FORMAT}, not {data['format']!r}")
    policy_id = _string(path, data, "id", "id")
    if data["kind"] not in KINDS:
        raise _fail(path, data, "kind", "kind", f"must be one of {', '.join(KINDS)}, not {data['kind']!r}")

    sources_data = data["sources"]
    if not isinstance(sources_data, dict) or not sources_data:
        raise _fail(path, data, "sources", "sources", "must be a non-empty mapping of source keys")
    sources: dict[str, Source] = {}
    for key, entry in sources_data.items():
        where = f"sources.{key}"
        _keys(path, entry, SOURCE_KEYS, {"url", "checked"}, where)
        sources[key] = Source(
            key=key,
            url=_string(path, entry, "url", f"{where}.url"),
            title=_string(path, entry, "title", f"{where}.title") if "title" in entry else key,
            checked=_date(path, entry, "checked", f"{where}.checked"),
            note=_string(path, entry, "note", f"{where}.note") if "note" in entry else "",
        )

    registry = load_registry()
    reqs_data = data["requirements"]
    if not isinstance(reqs_data, list) or not reqs_data:
        raise _fail(path, data, "requirements", "requirements", "must be a non-empty list")
    requirements = []
    seen: set[str] = set()
    for index, req in enumerate(reqs_data):
        where = f"requirements[{index}]"
        if not isinstance(req, dict):
            raise _fail(path, reqs_data, index, where, "must be a mapping")
        owner_risk = data["kind"] == "owner-risk"
        _keys(path, req, REQUIREMENT_KEYS, {"check", "level"} if owner_risk else {"check", "severity"}, where)
        check_id = req["check"]
        if check_id not in registry:
            raise _fail(path, req, "check", f"{where}.check", f"unknown check id {check_id!r}")
        if check_id in seen:
            raise _fail(path, req, "check", f"{where}.check", f"{check_id} listed twice")
        seen.add(check_id)
        level = ""
        if owner_risk:
            if "severity" in req:
                raise _fail(path, req, "severity", f"{where}.severity",
                            "an owner-risk item has a level (low, medium, high), not a severity")
            level = req["level"]
            if level not in LEVELS:
                raise _fail(path, req, "level", f"{where}.level",
                            f"must be one of {', '.join(LEVELS)}, not {level!r}")
            severity = "risk"
        else:
            if "level" in req:
                raise _fail(path, req, "level", f"{where}.level", "only owner-risk policies give a level")
            severity = req["severity"]
            if severity not in SEVERITIES:
                raise _fail(path, req, "severity", f"{where}.severity",
                            f"must be one of {', '.join(SEVERITIES)}, not {severity!r}")
        threshold = _threshold(path, req, index, registry[check_id].threshold_kind)
        if "source" not in req:
            raise _fail(path, req, "check", f"{where}.source",
                        "missing: every requirement cites its source (a key of 'sources')")
        source_key = req["source"]
        if source_key not in sources:
            raise _fail(path, req, "source", f"{where}.source", f"{source_key!r} is not a key of 'sources'")
        requirements.append(
            Requirement(
                check=check_id,
                severity=severity,
                threshold=threshold,
                source=sources[source_key],
                note=_string(path, req, "note", f"{where}.note") if "note" in req else "",
                level=level,
            )
        )
    return Policy(
        id=policy_id,
        title=_string(path, data, "title", "title"),
        platform=_string(path, data, "platform", "platform"),
        kind=data["kind"],
        summary=_string(path, data, "summary", "summary").strip(),
        follows=_string(path, data, "follows", "follows").strip() if "follows" in data else "",
        requirements=tuple(requirements),
        path=path,
    )


def load_policy_file(path: Path) -> Policy:
    try:
        text = safeio.read_text(path, limit=MAX_POLICY_BYTES)
    except safeio.InputError as exc:
        raise PolicyError(f"{path}: {exc}") from exc
    return parse_policy(text, str(path))


def shipped_policy_names() -> list[str]:
    folder = resources.files("hostcheck") / "policies"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_shipped(name: str) -> Policy:
    folder = resources.files("hostcheck") / "policies"
    entry = folder / f"{name}.yaml"
    if not entry.is_file():
        raise PolicyError(f"no policy named {name!r} (shipped: {', '.join(shipped_policy_names())})")
    return parse_policy(entry.read_text(encoding="utf-8"), f"policies/{name}.yaml")


def audit_policy_names() -> list[str]:
    """The shipped policies an audit judges by default (every one but the owner-risk set)."""
    return [name for name in shipped_policy_names() if name != OWNER_RISK_POLICY]


def load_owner_risk() -> Policy:
    policy = load_shipped(OWNER_RISK_POLICY)
    if policy.kind != "owner-risk":
        raise PolicyError(f"{policy.path}: kind must be owner-risk, not {policy.kind!r}")
    return policy


def resolve_policies(selectors: list[str]) -> list[Policy]:
    """Names of shipped policies or paths of policy files; empty means every shipped
    platform and hygiene policy. The owner-risk set is not a platform: it rates the owner's
    exposure in every report and cannot be requested as a policy."""
    if not selectors:
        return [load_shipped(name) for name in audit_policy_names()]
    policies = []
    for selector in selectors:
        candidate = Path(selector)
        if selector.endswith((".yaml", ".yml")) or "/" in selector or candidate.exists():
            policies.append(load_policy_file(candidate))
        else:
            policies.append(load_shipped(selector))
    for selected in policies:
        if selected.kind == "owner-risk":
            raise PolicyError(f"{selected.path}: an owner-risk policy is judged in every report "
                              "(the 'Owner risk' section), not as a --policy")
    ids = [p.id for p in policies]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise PolicyError(f"policy {duplicates[0]!r} requested twice")
    return policies
