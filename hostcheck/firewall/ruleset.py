"""The raw firewall evidence kept in the facts: bounded, and without what is not needed.

From ``nft -j list ruleset``: tables, chains, rules and named sets, each with only the keys
the judgement reads (no handles, no comments). From ``iptables-save``: the filter table's
policy and rule lines, rule comments removed, and the number of rules in all tables.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hostcheck.facts import Unknown

MAX_ITEMS = 20_000
MAX_SET_ELEMENTS = 10_000
MAX_IPTABLES_LINES = 20_000
KEPT_KEYS = {
    "table": ("family", "name"),
    "chain": ("family", "table", "name", "type", "hook", "prio", "policy"),
    "rule": ("family", "table", "chain", "expr"),
    "set": ("family", "table", "name", "type", "elem"),
}
_COMMENT = re.compile(r'\s-m comment --comment (?:"(?:[^"\\]|\\.)*"|\S+)')

Key = tuple[str, str, str]


def parse_nft_ruleset(text: str) -> list[dict[str, Any]] | Unknown:
    """The kept items of `nft -j list ruleset`; invalid or oversized input is an Unknown."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        return Unknown(f"nft output is not valid JSON: {exc}")
    items = data.get("nftables") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return Unknown("nft output has no 'nftables' list")
    kept: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        for kind, keys in KEPT_KEYS.items():
            body = item.get(kind)
            if isinstance(body, dict):
                kept.append({kind: {k: body[k] for k in keys if k in body}})
    if len(kept) > MAX_ITEMS:
        return Unknown(f"the nftables ruleset has {len(kept)} tables, chains, rules and sets; "
                       f"at most {MAX_ITEMS} are kept and judged")
    for item in kept:
        elem = item.get("set", {}).get("elem")
        if isinstance(elem, list) and len(elem) > MAX_SET_ELEMENTS:
            return Unknown(f"an nftables set has {len(elem)} elements; at most {MAX_SET_ELEMENTS} are kept")
    return kept


def keep_iptables_save(text: str) -> dict[str, Any] | Unknown:
    """The filter table of `iptables-save` (policies and rules, comments removed) and the rule count."""
    table = ""
    lines: list[str] = []
    rule_count = 0
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith("-A ") and table:
            rule_count += 1
            if table == "filter":
                lines.append(_COMMENT.sub("", line))
        elif line.startswith(":") and table == "filter":
            lines.append(line)
    if len(lines) > MAX_IPTABLES_LINES:
        return Unknown(f"the iptables filter table has {len(lines)} lines; at most {MAX_IPTABLES_LINES} are kept")
    return {"filter": lines, "rule_count": rule_count}


class Ruleset:
    """An nftables ruleset by key: chains, rules in order, named sets' elements."""

    def __init__(self, items: list[Any]) -> None:
        self.tables = 0
        self.chains: dict[Key, dict[str, Any]] = {}
        self.rules: dict[Key, list[list[Any]]] = {}
        self.sets: dict[Key, list[Any]] = {}
        for item in items:
            if not isinstance(item, dict):
                continue
            if isinstance(item.get("table"), dict):
                self.tables += 1
            for kind in ("chain", "rule", "set"):
                body = item.get(kind)
                if not isinstance(body, dict):
                    continue
                key = (str(body.get("family", "")), str(body.get("table", "")),
                       str(body.get("chain" if kind == "rule" else "name", "")))
                if kind == "chain":
                    self.chains[key] = body
                elif kind == "rule":
                    # A malformed expression stays on the path as a rule nobody can evaluate.
                    expr = body.get("expr", [])
                    self.rules.setdefault(key, []).append(expr if isinstance(expr, list) else [None])
                else:
                    elem = body.get("elem", [])
                    self.sets[key] = elem if isinstance(elem, list) else []

    @property
    def has_tables(self) -> bool:
        return bool(self.chains or self.tables)

    @property
    def rule_count(self) -> int:
        return sum(len(r) for r in self.rules.values())

    def base_chains(self, hook: str, family: int) -> list[Key]:
        families = {"inet", "ip" if family == 4 else "ip6"}
        return sorted(k for k, c in self.chains.items() if c.get("hook") == hook and k[0] in families)
