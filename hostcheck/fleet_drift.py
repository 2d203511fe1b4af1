"""What drifted on one host between two of its audits, from their facts: the default route's LAN
address, gateway, DHCP or static, link speed and duplex; the forwarded range as measured
(NET-1130, NET-1140); the NVIDIA driver's parts; a pending reboot; provider-agent restarts.
Pure: each value is read through :func:`hostcheck.facts.lookup` on the declared paths.
"""

from __future__ import annotations

from typing import Any

from hostcheck.facts import Unknown, from_jsonable, lookup
from hostcheck.models import Report
from hostcheck.routes import interface_ipv4

MAX_VALUE_CHARS = 80
MAX_UNITS = 20
RANGE_CHECKS = ("NET-1130", "NET-1140")
_ROUTE = "network.default_route"
_NVIDIA = "packages.nvidia_versions"


def _shown(value: Any) -> str:
    if value is None or isinstance(value, Unknown):
        return "unknown"
    return str(value)[:MAX_VALUE_CHARS]


def _route(facts: Any, key: str) -> Any:
    route = lookup(facts, _ROUTE)
    return lookup(facts, f"{_ROUTE}.{key}") if isinstance(route, dict) else route


def _values(facts: Any) -> dict[str, tuple[str, str]]:
    """kind -> (what, value as shown) for each value compared."""
    route = lookup(facts, _ROUTE)
    iface = _route(facts, "interface")
    lan = interface_ipv4(lookup(facts, "network.interfaces"), iface) if isinstance(route, dict) else None
    speed, duplex = _route(facts, "speed_mbps"), _route(facts, "duplex")
    link = (f"{speed} Mb/s {duplex} duplex" if isinstance(speed, int) and isinstance(duplex, str)
            else "unknown")
    versions = ", ".join(f"{label} {_shown(lookup(facts, f'{_NVIDIA}.{key}'))}" for key, label in
                         (("kernel_module", "module"), ("library", "library"), ("package", "package")))
    pending = lookup(facts, "packages.reboot_required.pending")
    return {
        "lan_address": ("LAN address", _shown(lan)),
        "gateway": ("gateway", _shown(_route(facts, "gateway"))),
        "addressing": ("address assignment", _shown(_route(facts, "addressing"))),
        "link": ("link", link),
        "nvidia_driver": ("NVIDIA driver", versions),
        "reboot_pending": ("reboot pending", _shown(pending if isinstance(pending, bool) else None).lower()),
    }


def _restarts(facts: Any) -> dict[str, str]:
    """unit -> systemd's NRestarts as shown, for each provider-agent unit."""
    installed = lookup(facts, "agents.installed")
    out: dict[str, str] = {}
    for agent in installed if isinstance(installed, list) else []:
        units = agent.get("units") if isinstance(agent, dict) else None
        for unit in units if isinstance(units, list) else []:
            if isinstance(unit, dict) and isinstance(unit.get("name"), str) and len(out) < MAX_UNITS:
                out[unit["name"][:MAX_VALUE_CHARS]] = _shown(unit.get("restarts"))
    return out


def _range_measured(report: Report) -> dict[str, str]:
    """NET-1130/1140's measured value (the first policy that judged it; a change of their status
    is the finding's own line)."""
    out: dict[str, str] = {}
    for policy in report.policies:
        for finding in policy.findings:
            if finding.id in RANGE_CHECKS and finding.id not in out:
                out[finding.id] = _shown(finding.measured)
    return out


def fact_changes(before: Report, after: Report) -> list[tuple[str, str]]:
    """(kind, detail) for each compared value that differs between the two audits."""
    old_facts, new_facts = from_jsonable(before.facts), from_jsonable(after.facts)
    old, new = _values(old_facts), _values(new_facts)
    out = [(kind, f"{what}: {old[kind][1]} -> {value}") for kind, (what, value) in new.items() if old[kind][1] != value]
    old_r, new_r = _range_measured(before), _range_measured(after)
    for check in RANGE_CHECKS:
        if old_r.get(check, "not judged") != new_r.get(check, "not judged"):
            out.append(("forwarded_range", f"{check} measured {old_r.get(check, 'not judged')} -> "
                        f"{new_r.get(check, 'not judged')}"))
    old_u, new_u = _restarts(old_facts), _restarts(new_facts)
    for unit in sorted(set(old_u) | set(new_u)):
        if old_u.get(unit) != new_u.get(unit):
            out.append(("agent_restarts", f"{unit} restarts: {old_u.get(unit, 'absent')} -> "
                        f"{new_u.get(unit, 'absent')}"))
    return out
