"""The recorder's drift sampler: what changes rarely and costs a host its listing when it does.

Once every ``every_s`` (5 minutes by default) it reads, through the audit's own collectors, the
default route's interface, gateway, LAN address and whether that address is DHCP-assigned; the
interface's link speed and duplex; the loaded NVIDIA kernel module's version and the user-space
library's; a pending reboot; and systemd's NRestarts of the provider-agent units installed here.
Each is recorded as a ``drift`` event when it differs from the last value this run recorded
(the first reading too: it says where things started). What a change means is decided by
:mod:`hostcheck.recording.drift`, never here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hostcheck.collectors.address_source import address_source
from hostcheck.collectors.agents import unit_states
from hostcheck.collectors.docker_config import UNIT_DIRS
from hostcheck.collectors.network_local import collect_interfaces, default_route
from hostcheck.collectors.packages import library_version, module_version, reboot_required
from hostcheck.facts import Unknown
from hostcheck.knowledge.agent_catalog import load_catalog
from hostcheck.knowledge.routes import interface_ipv4
from hostcheck.watch.sampler import Sink, Tick

# These values change rarely, and a read costs about 0.5 ms of CPU (the interfaces' addresses,
# the NVML library's directory): every 5 minutes keeps the recorder's own cost where it was.
DRIFT_EVERY_S = 300.0
MIN_DRIFT_EVERY_S = 1.0
MAX_VALUE_CHARS = 200

StateWriter = Callable[[str, Any, str, dict[str, Any]], None]


def _installed_agent_units() -> dict[str, dict[str, Any]] | Unknown:
    """NRestarts and states of the catalogue's agent units that have a unit file here (no
    systemctl run at all on a machine without one)."""
    units = tuple(u for agent in load_catalog().agents for u in agent.units
                  if any(os.path.lexists(os.path.join(d, u)) for d in UNIT_DIRS))
    return unit_states(units)


def _route_with_address() -> dict[str, Any] | None | Unknown:
    route = default_route()
    if not isinstance(route, dict):
        return route
    interfaces = collect_interfaces([])
    address = interface_ipv4(interfaces, route["interface"])
    return {**route, "address": address, **address_source(route["interface"], address)}


@dataclass
class DriftSources:
    """Where each reading comes from; a test replaces them with readers of recorded files."""

    route: Callable[[], dict[str, Any] | None | Unknown] = _route_with_address
    nvidia: Callable[[], dict[str, Any]] = field(
        default=lambda: {"kernel_module": module_version(), "library": library_version()})
    reboot: Callable[[], dict[str, Any] | Unknown] = reboot_required
    agent_units: Callable[[], dict[str, dict[str, Any]] | Unknown] = _installed_agent_units


def _value(value: Any) -> Any:
    """A reading as recorded: an unknown becomes {"unknown": reason}, text is bounded."""
    if isinstance(value, Unknown):
        return {"unknown": value.reason[:MAX_VALUE_CHARS]}
    if isinstance(value, str):
        return value[:MAX_VALUE_CHARS]
    return value


class DriftSampler:
    name = "drift"

    def __init__(self, sources: DriftSources, every_s: float = DRIFT_EVERY_S):
        self.sources = sources
        self.every_s = every_s
        self.next_mono: float | None = None

    def sample(self, tick: Tick, out: Sink) -> None:
        if self.next_mono is not None and tick.mono < self.next_mono:
            return
        self.next_mono = tick.mono + self.every_s
        state = out.state
        self._route(state)
        self._nvidia(state)
        self._reboot(state)
        self._agents(state)

    def _route(self, state: StateWriter) -> None:
        route = self.sources.route()
        if not isinstance(route, dict):
            reason = route.reason if isinstance(route, Unknown) else "no default route"
            for what in ("lan_address", "gateway", "addressing", "link"):
                state(f"drift:{what}", reason, "drift", {"what": what, "value": {"unknown": reason[:MAX_VALUE_CHARS]}})
            return
        iface = _value(route.get("interface"))
        for what, value in (("lan_address", route.get("address")), ("gateway", route.get("gateway")),
                            ("addressing", route.get("addressing"))):
            recorded = _value(value)
            extra = {"from": _value(route.get("addressing_from"))} if what == "addressing" else {}
            state(f"drift:{what}", recorded, "drift", {"what": what, "interface": iface, "value": recorded, **extra})
        link = {"speed_mbps": _value(route.get("speed_mbps")), "duplex": _value(route.get("duplex"))}
        state("drift:link", link, "drift", {"what": "link", "interface": iface, "value": link})

    def _nvidia(self, state: StateWriter) -> None:
        parts = self.sources.nvidia()
        value = {k: _value(parts.get(k)) for k in ("kernel_module", "library")}
        if all(isinstance(v, dict) for v in value.values()):
            value = {"none": "no NVIDIA driver here"}  # said once, not each minute's reasons
        state("drift:nvidia", value, "drift", {"what": "nvidia", "value": value})

    def _reboot(self, state: StateWriter) -> None:
        flag = self.sources.reboot()
        if isinstance(flag, Unknown):
            value: Any = _value(flag)
            detail: dict[str, Any] = {}
        else:
            value = bool(flag.get("pending"))
            detail = {"packages": list(flag.get("packages") or [])[:10]}
        state("drift:reboot", value, "drift", {"what": "reboot", "value": value, **detail})

    def _agents(self, state: StateWriter) -> None:
        units = self.sources.agent_units()
        if isinstance(units, Unknown):
            state("drift:restarts", units.reason, "drift", {"what": "restarts", "value": _value(units)})
            return
        for name, unit in sorted(units.items()):
            if not unit.get("present"):
                continue
            count = _value(unit.get("restarts"))
            state(f"drift:restarts:{name}", count, "drift", {"what": "restarts", "unit": _value(name), "value": count})
