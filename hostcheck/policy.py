"""Policies: one YAML file per platform, validated against the policy model
(:class:`hostcheck.models.PolicyDocument`), with file, line and field in every error.

The lines come from the YAML parser's own nodes (``yaml.compose``): each key and list item
keeps its ``start_mark``, and a validation error's field path is looked up among them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from hostcheck import safeio
from hostcheck.checks import family_prefixes, load_registry
from hostcheck.errors import FileInputError, PolicyError
from hostcheck.file_kinds import FACTS, REPORT, WATCH_REPORT, sniff
from hostcheck.models import (
    POLICY_FORMAT,
    STATUS_SEVERITIES,
    STATUS_WORDS,
    Level,
    Policy,
    PolicyDocument,
    PolicyKind,
    Requirement,
    RequirementEntry,
    Severity,
    Source,
    SourceEntry,
    ThresholdKind,
    families_context,
)
from hostcheck.yaml_loader import LOADER

__all__ = ["POLICY_FORMAT", "Policy", "PolicyError", "Requirement", "Source", "parse_policy", "resolve_policies"]

# The owner-risk set is judged like any policy but rates the owner's exposure instead of a
# platform's verdict, so it is not among the policies an audit runs by default.
OWNER_RISK_POLICY = "owner-risk"
MAX_POLICY_BYTES = 1 << 20
MAX_ALIASES = 16
"""Aliases a policy may use: enough for sharing a list, too few for a "billion laughs" bomb
(each alias can at most double what it refers to)."""
_MAP_TAG = yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG
_SEQ_TAG = yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG

Loc = tuple[str | int, ...]


def _line_of(mark: Any) -> int:
    return int(mark.line) + 1


def refuse_yaml_bombs(text: str, error: type[Exception] = PolicyError, loader: Any = LOADER) -> None:
    """Count aliases and nesting on the parser's event stream, before any node is built: the
    event parser is iterative, so neither an alias bomb nor 5000 brackets get further. Every
    YAML data file hostcheck reads (policies, the earnings data) goes through this."""
    aliases = depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise error(f"line {_line_of(event.start_mark)}: more than {MAX_ALIASES} YAML aliases")
        elif isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > safeio.MAX_DEPTH:
                raise error(f"line {_line_of(event.start_mark)}: nested deeper than {safeio.MAX_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


class _Lines:
    """Plain data from the composed nodes, and the line of every key and list item by path."""

    def __init__(self) -> None:
        self.key: dict[Loc, int] = {}  # the line of the key (mapping entry) or of the item (list)
        self.node: dict[Loc, int] = {}  # the line where the value itself starts
        self._scalars = yaml.SafeLoader("")  # only its constructor is used, on scalar nodes

    def build(self, node: yaml.Node, loc: Loc = ()) -> Any:
        self.node.setdefault(loc, _line_of(node.start_mark))
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, loc)
        if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ_TAG:
            items = []
            for index, child in enumerate(node.value):
                self.key.setdefault((*loc, index), _line_of(child.start_mark))
                items.append(self.build(child, (*loc, index)))
            return items
        if isinstance(node, yaml.MappingNode) and node.tag == _MAP_TAG:
            result: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key = self.build(key_node, (*loc, "<key>"))
                line = _line_of(key_node.start_mark)
                if not isinstance(key, str):
                    raise PolicyError(f"line {line}: keys must be strings, not {key!r}")
                if key in result:
                    raise PolicyError(f"line {line}: duplicate key '{key}'")
                self.key.setdefault((*loc, key), line)
                result[key] = self.build(value_node, (*loc, key))
            return result
        raise PolicyError(f"line {_line_of(node.start_mark)}: unsupported YAML tag {node.tag}")

    def _scalar(self, node: yaml.ScalarNode, loc: Loc) -> Any:
        """The scalar's value; one YAML resolves but cannot build (2026-02-30 is read as a date,
        5000 digits as an int) is an error at its line and field, not a crash."""
        try:
            value = self._scalars.construct_object(node, deep=True)
        except (ValueError, OverflowError, yaml.YAMLError) as exc:
            raise PolicyError(f"line {_line_of(node.start_mark)}: {_field(loc) or 'policy'}: "
                              f"{_unbuildable(node, exc)}") from None
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_NUMBER:
            raise PolicyError(f"line {_line_of(node.start_mark)}: {_field(loc) or 'policy'}: "
                              f"the integer {_short(node.value)} is out of range (at most {MAX_NUMBER} in magnitude)")
        return value

    def at(self, loc: Loc) -> int | str:
        """The line of the field at ``loc``, or of the nearest enclosing one that exists."""
        for end in range(len(loc), -1, -1):
            prefix = loc[:end]
            if prefix in self.key:
                return self.key[prefix]
            if prefix in self.node:
                return self.node[prefix]
        return "?"


MAX_NUMBER = 2**53
"""Largest number a policy may hold: every integer up to it is exact as a float too, and no
real threshold (MiB, Mbps, watts, days) comes near it."""
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_INT_TAG = "tag:yaml.org,2002:int"


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _short(text: str) -> str:
    return repr(_clip(text))


def _unbuildable(node: yaml.ScalarNode, exc: Exception) -> str:
    if node.tag == _TIMESTAMP_TAG:
        return f"{_short(node.value)} is not a real date ({exc}); dates are YYYY-MM-DD"
    if node.tag == _INT_TAG:
        return f"the integer {_short(node.value)} is out of range (at most {MAX_NUMBER} in magnitude)"
    return f"{_short(node.value)} cannot be read as {node.tag.rsplit(':', 1)[-1]}: {exc}"


def _field(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _model_at(loc: Loc) -> type[BaseModel]:
    if len(loc) == 2 and loc[0] == "sources":
        return SourceEntry
    if len(loc) == 2 and loc[0] == "requirements":
        return RequirementEntry
    return PolicyDocument


def _type_name(value: Any) -> str:
    return {dict: "mapping", list: "list", str: "str", type(None): "null"}.get(type(value), type(value).__name__)


PINNED_WORDS = {
    "url": "must be pinned to what was read: a GitHub blob/tree/commit address at a commit (7-40 hex digits) "
           "or an archived copy (https://web.archive.org/web/TIMESTAMP/URL); for status merged-pr, "
           "the pull request's address",
    "pull": "must be a pull request's address (https://github.com/OWNER/REPO/pull/N)",
}


def source_of(key: str, entry: SourceEntry) -> Source:
    """The resolved source of a ``sources:`` entry (policies and data files alike)."""
    return Source(key=key, url=entry.url, title=entry.title, checked=entry.checked.isoformat(),
                  status=entry.status, quote=" ".join(entry.quote.split()), pull=entry.pull or "",
                  withdrawn=entry.withdrawn.isoformat() if entry.withdrawn else "", note=entry.note or "",
                  paraphrase=bool(entry.paraphrase))


def status_problem(source: Source, severity: Severity | None, note: str) -> tuple[str, str]:
    """The field and why a requirement's severity or note does not fit its source's status (two
    empty strings when it does): only a published page makes a blocker, and a requirement resting
    on a draft or a withdrawn page says so in its note."""
    if severity is not None and severity not in STATUS_SEVERITIES[source.status]:
        allowed = ", ".join(STATUS_SEVERITIES[source.status])
        return "severity", f"source {source.key!r} is {source.status}: the severity must be {allowed}, not {severity}"
    words = STATUS_WORDS.get(source.status)
    if words and words not in note:
        return "note", f"source {source.key!r} is {source.status}: the note must say {words!r}"
    return "", ""


def _reason(error: Any) -> str:
    """A pydantic error in the words a policy author reads (the field and line go in front)."""
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    if kind == "extra_forbidden":
        allowed = ", ".join(sorted(_model_at(tuple(error["loc"][:-1])).model_fields))
        return f"unknown key (allowed: {allowed})"
    if kind == "string_pattern_mismatch" and error["loc"][-1] in PINNED_WORDS:
        return f"{PINNED_WORDS[error['loc'][-1]]}, not {_clip(repr(value))}"
    if kind in ("string_type", "string_too_short", "string_pattern_mismatch") and error["loc"][-1] != "check":
        return f"must be a non-empty string, not {_type_name(value)}"
    if kind == "string_pattern_mismatch":
        return f"must be a check id such as GPU-1020, not {value!r}"
    if kind == "enum":
        return f"must be one of {ctx['expected'].replace(chr(39), '').replace(' or ', ', ')}, not {value!r}"
    if kind == "literal_error":
        return f"must be {ctx['expected']}, not {value!r}"
    if kind in ("dict_type", "model_type"):
        return f"must be a mapping, not {_type_name(value)}"
    if kind == "list_type":
        return f"must be a list, not {_type_name(value)}"
    if kind == "too_short":
        return f"must be a non-empty {_type_name(value)}"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    return f"{error['msg'][0].lower()}{error['msg'][1:]}, not {value!r}"


def _shape_errors(exc: ValidationError, lines: _Lines) -> Iterator[str]:
    for error in exc.errors():
        loc: Loc = tuple(error["loc"])
        if error["type"] == "missing":
            parent = loc[:-1]
            yield f"line {lines.at(parent)}: {_field(parent) or 'policy'}: missing required key '{loc[-1]}'"
        else:
            yield f"line {lines.at(loc)}: {_field(loc) or 'policy'}: {_reason(error)}"


def _threshold(entry: RequirementEntry, kind: ThresholdKind) -> tuple[Any, str]:
    """The threshold and '' when it fits the check's kind, else None and the reason."""
    present = "threshold" in entry.model_fields_set
    if kind == ThresholdKind.NONE:
        return None, "this check takes no threshold" if present else ""
    if not present:
        return None, f"missing: check {entry.check} needs a {kind} threshold"
    value = entry.threshold
    ok = {
        ThresholdKind.NUMBER: isinstance(value, (int, float)) and not isinstance(value, bool),
        ThresholdKind.STRING: isinstance(value, str) and bool(value.strip()),
        ThresholdKind.LIST: isinstance(value, list) and len(value) > 0,
        ThresholdKind.BOOL: isinstance(value, bool),
    }[kind]
    if not ok:
        return None, f"must be a {kind}, not {type(value).__name__} {_clip(repr(value))}"
    if kind == ThresholdKind.NUMBER and not (math.isfinite(value) and abs(value) <= MAX_NUMBER):
        return None, f"must be a finite number of at most {MAX_NUMBER} in magnitude, not {value!r}"
    if kind == ThresholdKind.LIST:
        for item in value:
            if not (isinstance(item, str) and item.strip()):
                return None, f"must be a list of non-empty strings, not one holding {type(item).__name__} {item!r}"
    return (list(value) if isinstance(value, list) else value), ""


def _resolve(doc: PolicyDocument, lines: _Lines, path: str) -> tuple[Policy | None, list[str]]:
    """Check what the model alone cannot: check ids, thresholds by check, sources cited."""
    errors: list[str] = []

    def fail(loc: Loc, reason: str, line_loc: Loc | None = None) -> None:
        errors.append(f"line {lines.at(loc if line_loc is None else line_loc)}: {_field(loc)}: {reason}")

    sources = {key: source_of(key, entry) for key, entry in doc.sources.items()}
    registry = load_registry()
    owner_risk = doc.kind == PolicyKind.OWNER_RISK
    requirements = []
    seen: set[str] = set()
    for index, entry in enumerate(doc.requirements):
        at: Loc = ("requirements", index)
        if entry.check not in registry:
            fail((*at, "check"), f"unknown check id {entry.check!r}")
            continue
        if entry.check in seen:
            fail((*at, "check"), f"{entry.check} listed twice")
        seen.add(entry.check)
        severity = Severity.RISK
        if owner_risk:
            if entry.severity is not None:
                fail((*at, "severity"), "an owner-risk item has a level (low, medium, high), not a severity")
            if entry.level is None:
                errors.append(f"line {lines.at(at)}: {_field(at)}: missing required key 'level'")
        else:
            if entry.level is not None:
                fail((*at, "level"), "only owner-risk policies give a level")
            if entry.severity is None:
                errors.append(f"line {lines.at(at)}: {_field(at)}: missing required key 'severity'")
            severity = entry.severity or severity
        threshold, wrong = _threshold(entry, registry[entry.check].threshold_kind)
        if wrong:
            present = "threshold" in entry.model_fields_set
            fail((*at, "threshold"), wrong, None if present else (*at, "check"))
        if entry.source is None:
            fail((*at, "source"), "missing: every requirement cites its source (a key of 'sources')", (*at, "check"))
        elif entry.source not in sources:
            fail((*at, "source"), f"{entry.source!r} is not a key of 'sources'")
        else:
            field, problem = status_problem(sources[entry.source], None if owner_risk else severity, entry.note or "")
            if problem:
                fail((*at, field), problem, (*at, "check"))
        if errors:
            continue
        assert entry.source is not None
        requirements.append(Requirement(
            check=entry.check, severity=severity, threshold=threshold, source=sources[entry.source],
            note=entry.note or "", level=Level(entry.level) if entry.level else None,
            own_choice=" ".join((entry.own_choice or "").split()),
        ))
    if errors:
        return None, errors
    return Policy(
        id=doc.id, title=doc.title, platform=doc.platform, kind=doc.kind, summary=doc.summary.strip(),
        follows=(doc.follows or "").strip(), requirements=tuple(requirements), path=path,
        sources=tuple(sources.values()),
    ), []


def parse_policy(text: str, path: str) -> Policy:
    """Validate policy text; raise PolicyError naming the file, line, field and reason of every
    problem found (one per line)."""
    lines = _Lines()
    try:
        refuse_yaml_bombs(text)
        node = yaml.compose(text, Loader=LOADER)
        data = None if node is None else lines.build(node)
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
    try:
        doc = PolicyDocument.model_validate(data, context=families_context(family_prefixes()))
    except ValidationError as exc:
        raise PolicyError("\n".join(f"{path}: {message}" for message in _shape_errors(exc, lines))) from None
    policy, errors = _resolve(doc, lines, path)
    if policy is None:
        raise PolicyError("\n".join(f"{path}: {message}" for message in errors))
    return policy


def load_policy_file(path: Path) -> Policy:
    try:
        text = safeio.read_text(path, limit=MAX_POLICY_BYTES)
    except FileInputError as exc:
        raise PolicyError(f"{path}: {exc}") from exc
    kind = sniff(text)
    if kind in (FACTS, REPORT, WATCH_REPORT):
        where = "give it to --facts" if kind in (FACTS, REPORT) else "--policy takes a policy's YAML file"
        raise PolicyError(f"{path}: {kind}, not a policy: {where}")
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
    if policy.kind != PolicyKind.OWNER_RISK:
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
        if selected.kind == PolicyKind.OWNER_RISK:
            raise PolicyError(f"{selected.path}: an owner-risk policy is judged in every report "
                              "(the 'Owner risk' section), not as a --policy")
    ids = [p.id for p in policies]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise PolicyError(f"policy {duplicates[0]!r} requested twice")
    return policies
