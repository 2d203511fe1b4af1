"""Each fact path, check id and distinctive enum word is spelled once in ``hostcheck/``, so that
renaming one is one edit and a misspelling cannot hide in a second copy.

The search: every string literal of every ``hostcheck/**/*.py``, read with :mod:`ast`. Not
searched: docstrings (a string standing alone as a statement: prose for the reader) and the pieces
of an f-string (``f"gpu.devices[{index}].name"`` builds a path from a declared prefix at run time;
its pieces are not a spelling of a whole value). Tests and generated files (``hostcheck/schema/``,
``docs/``) are not Python under ``hostcheck/`` and are out of scope.

- A declared fact path (:mod:`hostcheck.fact_paths`, where it is declared) is spelled at most
  once elsewhere: where two checks read one fact, one calls the other's accessor.
- A check id is spelled once, where the check is defined: its ``@check(...)`` or its named row
  (``SshRule``, ``DaemonFlagCheck``). ``superseded_by=`` names another check on purpose.
- A distinctive value of an enum in :mod:`hostcheck.models` is spelled only there; other modules
  use the member.
"""

from __future__ import annotations

import ast
import enum
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from hostcheck import models
from hostcheck.checks import family_prefixes, load_registry
from hostcheck.fact_paths import SECTIONS, is_declared
from hostcheck.models import check_id_pattern

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "hostcheck"
FACT_PATHS = "hostcheck/fact_paths.py"
MODELS = "hostcheck/models.py"
DEFINERS = frozenset({"check", "SshRule", "DaemonFlagCheck"})
"""Calls whose first argument defines a check id."""

SHARED_WORDS = frozenset({"yes", "no", "unknown", "pass", "fail", "high", "low", "risk", "none", "published"})
"""Enum values other vocabularies share (an sshd setting, a NAT verdict, a finding's status, a
platform fee's status and a cited page's):
never counted as a spelling of the enum."""

EXEMPT: dict[tuple[str, str], str] = {
    ("reachable", "hostcheck/collectors/docker_daemon.py"):
        "the key of the fact docker.reachable, which the collector writes",
    ("reachable", "hostcheck/render/watch.py"):
        "a column of the watch report: how many checks of a forwarded port got through",
    ("unreachable", "hostcheck/watch/probes.py"):
        "a resolver probe's result (the network was unreachable), not an inbound port's",
    ("no-nat", "hostcheck/netprobe/cgnat.py"):
        "a CGNAT signal's result, a word of the signal vocabulary ('shared-address', 'public-address')",
    ("unverified", "hostcheck/market/parse.py"):
        "Vast's verification state of a machine in its offer search (hostcheck.market.parse.UNVERIFIED)",
    ("owner-risk", "hostcheck/policy.py"):
        "the name of the shipped owner-risk policy (policies/owner-risk.yaml), not the policy kind",
}
"""(value, file) -> why that file's literal is another vocabulary's word, not the enum's."""


@dataclass(frozen=True)
class Literal:
    value: str
    file: str
    line: int
    role: str = ""
    """'definition' (the first argument of a DEFINERS call), 'superseded_by', or ''."""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def _callee(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


@cache
def literals() -> tuple[Literal, ...]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        skipped = {id(node.value) for node in ast.walk(tree)
                   if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
        roles: dict[int, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                skipped.update(id(part) for part in node.values)
            elif isinstance(node, ast.Call):
                if _callee(node.func) in DEFINERS and node.args:
                    roles[id(node.args[0])] = "definition"
                roles.update((id(kw.value), "superseded_by") for kw in node.keywords if kw.arg == "superseded_by")
        name = path.relative_to(ROOT).as_posix()
        found += [Literal(node.value, name, node.lineno, roles.get(id(node), "")) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped]
    return tuple(found)


def _places(items: list[Literal]) -> str:
    return ", ".join(map(str, items))


def test_each_fact_path_is_spelled_at_most_once_outside_its_declaration() -> None:
    sections = {section.name for section in SECTIONS}
    spelled: dict[str, list[Literal]] = defaultdict(list)
    for lit in literals():
        v = lit.value
        if lit.file != FACT_PATHS and "." in v and " " not in v and v.split(".")[0] in sections and is_declared(v):
            spelled[v].append(lit)
    assert len(spelled) > 50, "the search found too few fact paths to be searching the right files"
    twice = {path: _places(places) for path, places in spelled.items() if len(places) > 1}
    assert not twice, f"fact paths spelled in several places (give the fact one accessor): {twice}"


def test_each_check_id_is_spelled_once_where_the_check_is_defined() -> None:
    registry = load_registry()
    check_id = re.compile(check_id_pattern(family_prefixes()))
    ids = [lit for lit in literals() if check_id.match(lit.value)]
    spelled: dict[str, list[Literal]] = defaultdict(list)
    for lit in ids:
        if lit.role != "superseded_by":
            spelled[lit.value].append(lit)
    problems = [f"{check_id} spelled {len(spelled[check_id])} times ({_places(spelled[check_id])})"
                for check_id in registry if len(spelled[check_id]) != 1]
    problems += [f"{lit.value} at {lit} is not where a check is defined" for places in spelled.values()
                 for lit in places if lit.role != "definition"]
    problems += [f"{lit.value} at {lit} names no registered check" for lit in ids if lit.value not in registry]
    assert not problems, problems


def _distinctive_values() -> dict[str, str]:
    """Value -> the enum member(s) it belongs to, for the StrEnums defined in hostcheck.models."""
    words: dict[str, list[str]] = defaultdict(list)
    for thing in vars(models).values():
        if isinstance(thing, type) and issubclass(thing, enum.StrEnum) and thing.__module__ == models.__name__:
            for member in thing:
                words[member.value].append(f"{thing.__name__}.{member.name}")
    return {value: ", ".join(members) for value, members in words.items() if value not in SHARED_WORDS
            and ("-" in value or " " in value or len(value) > 8)}


def test_distinctive_enum_values_are_spelled_only_in_models() -> None:
    distinctive = _distinctive_values()
    assert {"feasible with risks", "address-and-port-dependent", "unverified"} <= set(distinctive)
    spelled: dict[str, list[Literal]] = defaultdict(list)
    used: set[tuple[str, str]] = set()
    for lit in literals():
        if lit.value not in distinctive or lit.file == MODELS:
            continue
        if (lit.value, lit.file) in EXEMPT:
            used.add((lit.value, lit.file))
        else:
            spelled[lit.value].append(lit)
    outside = {f"{value} ({distinctive[value]})": _places(places) for value, places in spelled.items()}
    assert not outside, f"enum values spelled outside hostcheck/models.py (use the member): {outside}"
    assert used == set(EXEMPT), f"exemptions no literal needs any more: {sorted(set(EXEMPT) - used)}"
