"""Address scope classification shared by the local-network and reachability collectors."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

Scope = str
"""One of "loopback", "link-local", "private", "cgnat", "global", "other"."""

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_PRIVATE = tuple(
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)
_LINK_LOCAL = tuple(ipaddress.ip_network(n) for n in ("169.254.0.0/16", "fe80::/10"))

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_address(addr: str) -> IPAddress | None:
    """``addr`` as an address object (zone id such as ``%eth0`` dropped), or None if invalid."""
    if not isinstance(addr, str):
        return None
    text = addr.split("%", 1)[0].strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    # An IPv4-mapped IPv6 address (dual-stack socket) is really the IPv4 one.
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _networks(ranges: Iterable[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    nets = []
    for item in ranges:
        try:
            nets.append(ipaddress.ip_network(str(item), strict=False))
        except ValueError:
            continue  # a bad override must not turn every address into an error
    return nets


def classify_address(addr: str, public_ranges: Iterable[str] = ()) -> Scope:
    """Scope of an address; never raises (an unparsable address is "other").

    ``public_ranges`` are networks to count as "global" even though they are reserved
    (the NAT lab uses documentation ranges such as 198.51.100.0/24 as its "internet").
    """
    ip = parse_address(addr)
    if ip is None:
        return "other"
    if any(ip.version == net.version and ip in net for net in _networks(public_ranges)):
        return "global"
    if ip.is_loopback:
        return "loopback"
    if any(ip.version == net.version and ip in net for net in _LINK_LOCAL):
        return "link-local"
    if ip.version == 4 and ip in _CGNAT:
        return "cgnat"
    if any(ip.version == net.version and ip in net for net in _PRIVATE):
        return "private"
    if ip.is_global and not ip.is_multicast:
        return "global"
    return "other"
