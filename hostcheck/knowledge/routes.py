"""The kernel's default routes, from /proc/net/route and /proc/net/ipv6_route (pure parsers).

One parser for every reader (the local-network facts and the router query), so a route that
is down, a ``reject``/``unreachable`` route or a non-default destination is ignored the same
way everywhere.
"""

from __future__ import annotations

import re
import socket
from typing import Any

RTF_UP = 0x0001
RTF_GATEWAY = 0x0002
RTF_REJECT = 0x0200

_HEX32 = re.compile(r"[0-9a-fA-F]{32}")


def parse_proc_net_route(text: str) -> list[dict[str, Any]]:
    """IPv4 default routes from /proc/net/route, best (lowest metric) first."""
    routes = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 8:
            continue
        try:
            dest, gateway, flags, metric, mask = (int(f[1], 16), int(f[2], 16), int(f[3], 16),
                                                  int(f[6]), int(f[7], 16))
        except ValueError:
            continue
        if dest != 0 or mask != 0 or not flags & RTF_UP or flags & RTF_REJECT:
            continue
        # The kernel prints the address in host (little-endian) byte order.
        gw = socket.inet_ntoa((gateway & 0xFFFFFFFF).to_bytes(4, "little")) if flags & RTF_GATEWAY else None
        routes.append({"interface": f[0], "gateway": gw, "metric": metric})
    return sorted(routes, key=lambda r: r["metric"])


def parse_proc_net_ipv6_route(text: str) -> list[dict[str, Any]]:
    """IPv6 default routes (::/0) from /proc/net/ipv6_route, best first."""
    routes = []
    for line in text.splitlines():
        f = line.split()
        if len(f) != 10 or not all(_HEX32.fullmatch(f[i]) for i in (0, 4)):
            continue
        try:
            dest, plen, nexthop = int(f[0], 16), int(f[1], 16), int(f[4], 16)
            metric, flags = int(f[5], 16), int(f[8], 16)
        except ValueError:
            continue
        if dest != 0 or plen != 0 or not flags & RTF_UP or flags & RTF_REJECT or f[9] == "lo":
            continue
        gw = socket.inet_ntop(socket.AF_INET6, nexthop.to_bytes(16, "big")) if nexthop else None
        routes.append({"interface": f[9], "gateway": gw, "metric": metric})
    return sorted(routes, key=lambda r: r["metric"])


def default_gateway(routes: list[dict[str, Any]]) -> str | None:
    """The gateway of the best default route that has one (a tunnel's device route has none)."""
    return next((r["gateway"] for r in routes if r["gateway"]), None)


def interface_ipv4(interfaces: Any, name: Any) -> str | None:
    """The first IPv4 address of interface ``name`` in the interfaces facts (the default route's
    LAN address, the one a router's port forward points at), or None."""
    if not isinstance(interfaces, list) or not isinstance(name, str):
        return None
    for iface in interfaces:
        if isinstance(iface, dict) and iface.get("name") == name:
            for a in iface.get("addresses") or []:
                if isinstance(a, dict) and a.get("family") == 4 and isinstance(a.get("address"), str):
                    return str(a["address"])
    return None
