"""Facts written by an older hostcheck, brought to today's layout (:mod:`hostcheck.fact_paths`).

One step per format. A step never guesses: what the older file did not record, or recorded only
as a verdict that today's checks no longer read, becomes unknown with a reason that names the
format and how to get the fact (collect again). ``hostcheck audit --facts`` upgrades on load;
``hostcheck facts --upgrade FILE`` writes the upgraded file.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hostcheck.errors import UpgradeError
from hostcheck.fact_paths import FACTS_FORMAT, SECTIONS, TABLE, UNKNOWN_KEY, FactType, children

RECOLLECT = "collect again with `hostcheck facts` to judge it"


def _unknown(reason: str) -> dict[str, str]:
    return {UNKNOWN_KEY: reason}


def _is_unknown(node: Any) -> bool:
    return isinstance(node, dict) and set(node) == {UNKNOWN_KEY}


def _drop(node: Any, *keys: str) -> dict[str, Any]:
    """The keys of ``node`` (a dict) that were there, removed from it."""
    return {k: node.pop(k) for k in keys if isinstance(node, dict) and k in node}


def _firewall_1(network: dict[str, Any]) -> None:
    """Format 1 files may hold the firewall's judged summary instead of the ruleset."""
    firewall = network.get("firewall")
    if not isinstance(firewall, dict) or _is_unknown(firewall):
        return
    summary = _drop(firewall, "backend", "readable", "input_policy", "forward_policy", "rule_count",
                    "docker_user_chain_filters")
    if summary and "nftables" not in firewall and "iptables" not in firewall:
        said = ", ".join(f"{k} {v}" for k, v in summary.items() if k in ("backend", "input_policy", "forward_policy"))
        why = _unknown(f"this format-1 file kept only the firewall's judged summary ({said}), not the ruleset; "
                       f"{RECOLLECT}")
        firewall.update(nftables=why, iptables=why)


def _container_egress_1(network: dict[str, Any]) -> None:
    """Format 1 files may hold the egress walk's result instead of what it is judged from."""
    egress = network.get("container_egress")
    if isinstance(egress, dict) and not _is_unknown(egress):
        _drop(egress, "probes", "bridges_assumed")


def _gpu_1(gpu: Any) -> None:
    """Format 1 recorded the collector's laptop verdict; GPU-1060 judges name and chassis."""
    devices = gpu.get("devices") if isinstance(gpu, dict) else None
    for device in devices if isinstance(devices, list) else []:
        _drop(device, "is_laptop", "laptop_evidence")


def _fill(node: Any, path: str, why: str) -> None:
    """Declared keys missing under ``node`` become unknown (``why``); undeclared keys go."""
    if not isinstance(node, dict) or _is_unknown(node):
        return
    fact = TABLE.get(path) if path else None
    kind = fact.type if fact else FactType.OBJECT
    if kind in (FactType.RAW, FactType.TEXTS, FactType.SETTING):
        return
    if kind is FactType.MAP:
        for item in node.values():
            _fill(item, f"{path}.*", why)
        return
    declared = children(path) if path else {s.name: TABLE[s.name] for s in SECTIONS}
    for key in [k for k in node if k not in declared]:
        del node[key]
    for key, child in declared.items():
        where = f"{path}.{key}" if path else key
        if key not in node:
            if not child.when:
                node[key] = _unknown(why)
            continue
        item = node[key]
        if child.type is FactType.LIST and isinstance(item, list):
            for entry in item:
                _fill(entry, f"{where}.*", why)
        else:
            _fill(item, where, why)


def step_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    network = data.get("network")
    if isinstance(network, dict) and not _is_unknown(network):
        _firewall_1(network)
        _container_egress_1(network)
    _gpu_1(data.get("gpu"))
    _fill(data, "", f"not recorded in format 1; {RECOLLECT}")
    return data


def _cloud_accounts_2(isolation: Any) -> None:
    """Format 2 recorded what sudo grants each cloud account (a verdict ISO-1070 no longer reads),
    not the sudoers files it is judged from."""
    if not isinstance(isolation, dict) or _is_unknown(isolation):
        return
    accounts = isolation.get("cloud_accounts")
    if not isinstance(accounts, list):
        return  # unknown, or not collected: the record is no more known than the accounts
    said = []
    for account in accounts:
        verdict = _drop(account, "sudo_scope", "nopasswd_rules")
        if verdict:
            rules = ", ".join(str(r) for r in verdict.get("nopasswd_rules") or []) or "none"
            said.append(f"{account.get('name')}: sudo {verdict.get('sudo_scope')}, NOPASSWD rules {rules}")
    if "sudoers" in isolation:  # an older format's step already said why it is unknown
        return
    if accounts:
        kept = f" ({'; '.join(said)})" if said else ""
        isolation["sudoers"] = _unknown(f"format 2 kept only what sudo granted the cloud accounts{kept}, not the "
                                        f"sudoers files; {RECOLLECT}")
    else:
        isolation["sudoers"] = None  # no cloud account: nothing was read, as today


def step_2_to_3(data: dict[str, Any]) -> dict[str, Any]:
    _cloud_accounts_2(data.get("isolation"))
    _fill(data, "", f"not recorded in format 2; {RECOLLECT}")
    return data


STEPS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: step_1_to_2, 2: step_2_to_3}
"""Format N -> the step that makes it format N + 1."""


def facts_format(data: Any) -> int:
    """The format a facts file says it has; :class:`UpgradeError` when it says none usable."""
    meta = data.get("meta") if isinstance(data, dict) else None
    if not isinstance(meta, dict):
        raise UpgradeError("missing 'meta' object (is this a hostcheck facts file?)")
    fmt = meta.get("facts_format")
    if type(fmt) is not int:  # true == 1 and 1.0 == 1 are not format 1
        kind = " (a boolean, not a number)" if isinstance(fmt, bool) else ""
        raise UpgradeError(f"meta.facts_format is {fmt!r}{kind}; this hostcheck reads formats "
                           f"{min(STEPS)} to {FACTS_FORMAT}")
    if fmt > FACTS_FORMAT:
        raise UpgradeError(f"meta.facts_format is {fmt}: written by a newer hostcheck (this one reads formats "
                           f"{min(STEPS)} to {FACTS_FORMAT}); upgrade hostcheck")
    if fmt != FACTS_FORMAT and fmt not in STEPS:
        raise UpgradeError(f"meta.facts_format is {fmt}; this hostcheck reads formats {min(STEPS)} to {FACTS_FORMAT}")
    return fmt


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """JSON facts at :data:`FACTS_FORMAT` (the same object when they are already; else a copy,
    with ``meta.upgraded_from`` set)."""
    fmt = facts_format(data)
    if fmt == FACTS_FORMAT:
        return data
    out = copy.deepcopy(data)
    for step in range(fmt, FACTS_FORMAT):
        out = STEPS[step](out)
    out["meta"]["facts_format"] = FACTS_FORMAT
    out["meta"]["upgraded_from"] = fmt
    return out
