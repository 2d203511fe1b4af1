"""Whether an interface's address is DHCP-assigned, from the network manager's own lease or
configuration (a helper of the network_local collector and the recorder's drift sampler).

Read in this order, the first that answers wins:

1. systemd-networkd's lease, ``/run/systemd/netif/leases/IFINDEX`` (``ADDRESS=``): DHCP when it
   names the address; a link networkd configures (``/run/systemd/netif/links/IFINDEX``,
   ``ADMIN_STATE=configured``) with no lease for the address is static.
2. NetworkManager's internal DHCP client's lease, ``/var/lib/NetworkManager/internal-UUID-IF.lease``
   (systemd-networkd's format): DHCP when its ``ADDRESS=`` is the address.
3. dhclient's leases (ISC dhcp-client: ifupdown's DHCP client, and NetworkManager's when set to
   use it), ``/var/lib/dhcp/dhclient*.leases`` and ``/var/lib/NetworkManager/dhclient-*.lease``:
   DHCP when a ``lease { interface "IF"; fixed-address ADDR; }`` block names both.
4. ifupdown's ``/etc/network/interfaces`` (and ``interfaces.d/``): ``iface IF inet dhcp`` or
   ``inet static``.

Anything else (dhcpcd, netplan with another renderer, a hand-run ``ip addr add``) is unknown
with the places that were read.
"""

from __future__ import annotations

import os
import re
from typing import Any

from hostcheck.collectors._run import read_text
from hostcheck.facts import Unknown
from hostcheck.knowledge.netaddr import parse_address

# Linux interface names: at most 15 bytes, no "/" and no whitespace; a name outside the
# printable set below is not looked up at all.
IFACE_NAME = re.compile(r"^[A-Za-z0-9_.:@+-]{1,15}$")
MAX_FILE_BYTES = 256 << 10
MAX_LEASE_FILES = 16
_LEASE_BLOCK = re.compile(r"lease\s*\{(.*?)\}", re.S)
_LEASE_IFACE = re.compile(r'\binterface\s+"([^"]{1,15})"\s*;')
_LEASE_ADDR = re.compile(r"\bfixed-address\s+([0-9.]{7,15})\s*;")
_IFACE_STANZA = re.compile(r"^\s*iface\s+(\S+)\s+inet\s+(\S+)", re.M)


def _keys(text: str) -> dict[str, str]:
    """systemd-networkd's state files: KEY=value lines, # comments."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith("#"):
            out[key.strip()] = value.strip()
    return out


def _networkd(root: str, ifindex: str, address: str) -> tuple[str, str] | None:
    lease = read_text(os.path.join(root, "run/systemd/netif/leases", ifindex), limit=MAX_FILE_BYTES)
    if not isinstance(lease, Unknown) and _keys(lease).get("ADDRESS") == address:
        return "dhcp", "systemd-networkd's lease"
    link = read_text(os.path.join(root, "run/systemd/netif/links", ifindex), limit=MAX_FILE_BYTES)
    if not isinstance(link, Unknown) and _keys(link).get("ADMIN_STATE") == "configured":
        return "static", "systemd-networkd (configured, no DHCP lease for the address)"
    return None


def _networkmanager(root: str, name: str, address: str) -> tuple[str, str] | None:
    folder = os.path.join(root, "var/lib/NetworkManager")
    try:
        names = sorted(n for n in os.listdir(folder) if n.startswith("internal-") and n.endswith(f"-{name}.lease"))
    except OSError:
        return None
    for file_name in names[:MAX_LEASE_FILES]:
        text = read_text(os.path.join(folder, file_name), limit=MAX_FILE_BYTES)
        if not isinstance(text, Unknown) and _keys(text).get("ADDRESS") == address:
            return "dhcp", "NetworkManager's DHCP lease"
    return None


def _dhclient(root: str, name: str, address: str) -> tuple[str, str] | None:
    paths: list[str] = []
    for folder in (os.path.join(root, "var/lib/dhcp"), os.path.join(root, "var/lib/NetworkManager")):
        try:
            paths += [os.path.join(folder, n) for n in sorted(os.listdir(folder))
                      if n.startswith("dhclient") and n.endswith((".lease", ".leases"))]
        except OSError:
            continue
    for path in paths[:MAX_LEASE_FILES]:
        text = read_text(path, limit=MAX_FILE_BYTES)
        if isinstance(text, Unknown):
            continue
        for block in _LEASE_BLOCK.findall(text):
            iface, leased = _LEASE_IFACE.search(block), _LEASE_ADDR.search(block)
            if iface and leased and iface.group(1) == name and leased.group(1) == address:
                return "dhcp", "dhclient's lease"
    return None


def _ifupdown(root: str, name: str) -> tuple[str, str] | None:
    paths = [os.path.join(root, "etc/network/interfaces")]
    extra = os.path.join(root, "etc/network/interfaces.d")
    try:
        paths += [os.path.join(extra, n) for n in sorted(os.listdir(extra))[:MAX_LEASE_FILES]]
    except OSError:
        pass
    for path in paths:
        text = read_text(path, limit=MAX_FILE_BYTES)
        if isinstance(text, Unknown):
            continue
        for iface, method in _IFACE_STANZA.findall(text):
            if iface == name and method in ("dhcp", "static"):
                return method, "ifupdown's /etc/network/interfaces"
    return None


def address_source(name: str, address: str | None, root: str = "/") -> dict[str, Any]:
    """{"addressing": "dhcp" | "static", "addressing_from": where it was read}, each an Unknown
    with the reason when no network manager's files say."""
    def unknown(reason: str) -> dict[str, Any]:
        return {"addressing": Unknown(reason), "addressing_from": Unknown(reason)}

    if not IFACE_NAME.match(name):
        return unknown(f"not an interface name: {name[:20]!r}")
    if address is None or parse_address(address) is None:
        return unknown(f"{name} has no IPv4 address")
    ifindex = read_text(os.path.join(root, "sys/class/net", name, "ifindex"), limit=32)
    index = ifindex.strip() if isinstance(ifindex, str) and ifindex.strip().isdigit() else None
    found = (_networkd(root, index, address) if index else None) or _networkmanager(root, name, address) \
        or _dhclient(root, name, address) or _ifupdown(root, name)
    if found is None:
        return unknown(f"no DHCP lease or configuration for {name} (systemd-networkd, NetworkManager, "
                       "dhclient, ifupdown)")
    return {"addressing": found[0], "addressing_from": found[1]}
