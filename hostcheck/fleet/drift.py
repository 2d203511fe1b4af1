"""What drifted on one host between two of its audits, from their facts: the default route's LAN
address, gateway, DHCP or static, link speed and duplex; the forwarded range as measured
(NET-1130, NET-1140); the NVIDIA driver's parts; a pending reboot; provider-agent restarts.
Pure: each value is read through the checks' own accessors of the facts.
"""

from __future__ import annotations

from typing import Any

from hostcheck.checks.base import id_of
from hostcheck.checks.inbound import forwarded_range, range_per_gpu
from hostcheck.checks.readers import (
    recorded_agents,
    recorded_driver_versions,
    recorded_interfaces,
    recorded_reboot,
    recorded_route,
)
from hostcheck.facts import Unknown, from_jsonable
from hostcheck.knowledge.routes import interface_ipv4
from hostcheck.models import Report

MAX_VALUE_CHARS = 80
MAX_UNITS = 20
RANGE_CHECKS = (id_of(forwarded_range), id_of(range_per_gpu))
DRIVER_PARTS = (("kernel_module", "module"), ("library", "library"), ("package", "package"))


def _shown(value: Any) -> str:
    if value is None or isinstance(value, Unknown):
        return "unknown"
    return str(value)[:MAX_VALUE_CHARS]


def _values(facts: Any) -> dict[str, tuple[str, str]]:
    """kind -> (what, value as shown) for each value compared."""
    found = recorded_route(facts)
    route = found if isinstance(found, dict) else {}
    lan = interface_ipv4(recorded_interfaces(facts), route.get("interface"))
    speed, duplex = route.get("speed_mbps"), route.get("duplex")
    link = f"{speed} Mb/s {duplex} duplex" if isinstance(speed, int) and isinstance(duplex, str) else "unknown"
    found = recorded_driver_versions(facts)
    parts = found if isinstance(found, dict) else {}
    versions = ", ".join(f"{label} {_shown(parts.get(key))}" for key, label in DRIVER_PARTS)
    found = recorded_reboot(facts)
    pending = found.get("pending") if isinstance(found, dict) else None
    return {
        "lan_address": ("LAN address", _shown(lan)),
        "gateway": ("gateway", _shown(route.get("gateway"))),
        "addressing": ("address assignment", _shown(route.get("addressing"))),
        "link": ("link", link),
        "nvidia_driver": ("NVIDIA driver", versions),
        "reboot_pending": ("reboot pending", _shown(pending if isinstance(pending, bool) else None).lower()),
    }


def _restarts(facts: Any) -> dict[str, str]:
    """unit -> systemd's NRestarts as shown, for each provider-agent unit."""
    installed = recorded_agents(facts)
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
