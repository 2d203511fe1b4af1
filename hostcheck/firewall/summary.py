"""The firewall's effective policy: input and forward, and whether Docker's forward path is
filtered, from the recorded ruleset (NET-1010, DOC-1070)."""

from __future__ import annotations

from typing import Any

from hostcheck.facts import Unknown
from hostcheck.firewall.opened import PROFILE_INPUT, has_ufw
from hostcheck.firewall.ruleset import Ruleset

FILTER_VERDICTS = frozenset({"drop", "reject"})


def _rule_verdicts(expr: Any) -> set[str]:
    """Verdict keywords anywhere in a rule's expression list (drop, reject, accept, jump...)."""
    found: set[str] = set()
    stack = [expr]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key in ("drop", "reject", "accept", "return", "jump", "goto", "queue"):
                    found.add(key)
                stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _is_unconditional(expr: Any) -> bool:
    """A rule with no match: only counters, logging and a verdict."""
    if not isinstance(expr, list):
        return False
    neutral = {"counter", "log", "drop", "reject", "accept", "return"}
    return all(isinstance(e, dict) and set(e) <= neutral for e in expr)


def _hook_policy(rs: Ruleset, hook: str) -> str:
    """Effective policy of a netfilter hook across every base chain on it.

    "drop" only when both IPv4 and IPv6 traffic meet a dropping chain (policy drop, or an
    unconditional final drop/reject rule as firewalld writes); a drop in any chain is final.
    """
    covered: set[int] = set()
    seen_chain = False
    for key, c in rs.chains.items():
        if c.get("hook") != hook or key[0] not in ("ip", "ip6", "inet"):
            continue
        seen_chain = True
        chain_rules = rs.rules.get(key, [])
        drops = c.get("policy") == "drop" or bool(
            chain_rules and _is_unconditional(chain_rules[-1])
            and _rule_verdicts(chain_rules[-1]) & FILTER_VERDICTS)
        if drops:
            covered |= {"ip": {4}, "ip6": {6}, "inet": {4, 6}}[key[0]]
    if not seen_chain:
        return "none"
    return "drop" if covered == {4, 6} else "accept"


def summarise_nft(items: list[Any]) -> dict[str, Any]:
    rs = Ruleset(items)
    # Docker leaves DOCKER-USER empty or with a bare "return"; anything else is the admin's.
    docker_user = any(
        not (_is_unconditional(expr) and _rule_verdicts(expr) <= {"return"})
        for (_fam, _tab, name), exprs in rs.rules.items() if name == "DOCKER-USER" for expr in exprs
    )
    # Any drop in any forward chain is final, so a filter outside Docker's own table also
    # constrains container traffic.
    other_forward = any(
        c.get("hook") == "forward" and key[0] in ("ip", "ip6", "inet")
        and key[:2] != ("ip", "filter")
        and (c.get("policy") == "drop" or any(_rule_verdicts(e) & FILTER_VERDICTS for e in rs.rules.get(key, [])))
        for key, c in rs.chains.items()
    )
    return {
        "backend": "nftables" if rs.has_tables else "none",
        "readable": True,
        # ufw's chains: with them loaded, ufw's policy decides as much as any other table's
        "ufw": has_ufw(rs),
        "profile_table": PROFILE_INPUT in rs.chains,
        "input_policy": _hook_policy(rs, "input"),
        "forward_policy": _hook_policy(rs, "forward"),
        "rule_count": rs.rule_count,
        "docker_user_chain_filters": docker_user or other_forward,
    }


def summarise_iptables(kept: dict[str, Any]) -> dict[str, Any]:
    """Firewall summary from the kept filter table of `iptables-save` (IPv4 only)."""
    policies: dict[str, str] = {}
    rules: dict[str, list[str]] = {}
    for line in kept.get("filter", []):
        if not isinstance(line, str):
            continue
        if line.startswith(":"):
            parts = line[1:].split()
            if len(parts) >= 2:
                policies[parts[0]] = parts[1].lower()
        elif line.startswith("-A "):
            parts = line.split()
            if len(parts) >= 2:
                rules.setdefault(parts[1], []).append(line)
    count = kept.get("rule_count")
    rule_count = count if isinstance(count, int) else sum(len(v) for v in rules.values())

    def policy(chain: str) -> str:
        if chain not in policies:
            return "none"
        last = rules.get(chain, [])
        words = last[-1].split() if last else []
        final_drop = len(words) >= 4 and words[2] == "-j" and words[3] in ("DROP", "REJECT")
        return "drop" if policies[chain] == "drop" or final_drop else "accept"

    docker_user = any(r.split()[2:] != ["-j", "RETURN"] for r in rules.get("DOCKER-USER", []))
    return {
        "backend": "iptables" if rule_count or any(p != "accept" for p in policies.values()) else "none",
        "readable": True,
        "ufw": "ufw-user-input" in policies,
        "profile_table": False,
        "input_policy": policy("INPUT"),
        "forward_policy": policy("FORWARD"),
        "rule_count": rule_count,
        "docker_user_chain_filters": docker_user,
    }


def summarise(firewall: dict[str, Any]) -> dict[str, Any] | Unknown:
    """The summary of the recorded firewall (``network.firewall``).

    nftables wins when it holds any table; else the legacy iptables rules (which do not show
    in nft's ruleset). ``nftables`` is null when nft could not be run, ``iptables`` null when
    it was not needed or could not be run.
    """
    nft = firewall.get("nftables")
    nft_result: dict[str, Any] | Unknown | None = (
        summarise_nft(nft) if isinstance(nft, list) else nft if isinstance(nft, Unknown) else None)
    if isinstance(nft_result, dict) and nft_result["backend"] != "none":
        return nft_result
    ipt = firewall.get("iptables")
    if isinstance(ipt, dict):
        legacy = summarise_iptables(ipt)
        if legacy["backend"] != "none" or nft_result is None:
            return legacy
    if nft_result is not None:
        return nft_result
    if isinstance(ipt, Unknown):
        return ipt
    return Unknown("neither nft nor iptables-save is installed")

