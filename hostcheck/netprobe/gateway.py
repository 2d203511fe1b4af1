"""Ask the home router for its WAN address: NAT-PMP and UPnP IGD, read-only.

Both queries only read. NAT-PMP opcode 0 ("public address request", RFC 6886 3.2) and
UPnP ``GetExternalIPAddress`` change nothing on the router; this module never sends a
mapping request (NAT-PMP opcodes 1/2, UPnP AddPortMapping/DeletePortMapping), so the audit
stays read-only.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import threading
import time
from dataclasses import dataclass

from hostcheck.facts import Unknown
from hostcheck.knowledge.routes import default_gateway, parse_proc_net_route

NATPMP_PORT = 5351
PROC_ROUTE = "/proc/net/route"


@dataclass(frozen=True)
class RouterAnswer:
    """The WAN address a router reported (``address`` None when it reported none)."""

    method: str
    address: str | None
    detail: str


def default_gateway_v4(route_file: str = PROC_ROUTE) -> str | Unknown:
    """The IPv4 default gateway from the kernel's routing table (no command needed)."""
    try:
        with open(route_file, encoding="ascii", errors="replace") as fh:
            text = fh.read(1 << 20)
    except OSError as exc:
        return Unknown(f"cannot read {route_file}: {exc.strerror or exc}")
    gateway = default_gateway(parse_proc_net_route(text))
    return Unknown("no IPv4 default route via a gateway") if gateway is None else gateway


def natpmp_request() -> bytes:
    """NAT-PMP public address request: version 0, opcode 0 (read-only)."""
    return b"\x00\x00"


def parse_natpmp_response(data: bytes) -> str | None:
    """Parse a NAT-PMP public address response; the address, or None if it has none.

    Raises ValueError for anything that is not a well-formed response.
    """
    if len(data) < 12:
        raise ValueError(f"NAT-PMP answer is {len(data)} bytes, expected 12")
    version, opcode, result = struct.unpack("!BBH", data[:4])
    if version != 0 or opcode != 128:
        raise ValueError(f"not a NAT-PMP public address response (version {version}, opcode {opcode})")
    if result == 3:
        # "Network failure": the router has no external address to give (RFC 6886 3.5);
        # miniupnpd answers this when its WAN address is private or reserved.
        return None
    if result != 0:
        names = {
            1: "unsupported version",
            2: "not authorized/refused",
            3: "network failure",
            4: "out of resources",
            5: "unsupported opcode",
        }
        raise ValueError(f"NAT-PMP result code {result} ({names.get(result, 'unknown')})")
    addr = socket.inet_ntoa(data[8:12])
    return None if addr == "0.0.0.0" else addr


def natpmp_external_address(gateway: str, timeout: float = 1.0) -> RouterAnswer | Unknown:
    """Ask ``gateway`` for its public address over NAT-PMP (UDP 5351, 3 tries at most)."""
    deadline = time.monotonic() + timeout
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    except OSError as exc:
        return Unknown(f"NAT-PMP: cannot open a socket: {exc.strerror or exc}")
    with sock:
        try:
            sock.connect((gateway, NATPMP_PORT))
        except OSError as exc:
            return Unknown(f"NAT-PMP: cannot reach {gateway}: {exc.strerror or exc}")
        wait = 0.25  # RFC 6886: 250 ms, doubling
        for _ in range(3):
            try:
                sock.send(natpmp_request())
            except OSError as exc:
                return Unknown(f"NAT-PMP: send to {gateway} failed: {exc.strerror or exc}")
            until = min(deadline, time.monotonic() + wait)
            while (left := until - time.monotonic()) > 0:
                sock.settimeout(left)
                try:
                    data = sock.recv(64)
                except TimeoutError:
                    break
                except ConnectionRefusedError:
                    return Unknown(f"NAT-PMP: {gateway} does not run NAT-PMP (port {NATPMP_PORT} closed)")
                except OSError as exc:
                    return Unknown(f"NAT-PMP: {exc.strerror or exc}")
                try:
                    addr = parse_natpmp_response(data)
                except ValueError as exc:
                    return Unknown(f"NAT-PMP: {gateway}: {exc}")
                detail = f"NAT-PMP public address request to {gateway}:{NATPMP_PORT}"
                if addr is None:
                    detail += " (answered 'network failure' or 0.0.0.0)"
                return RouterAnswer("nat-pmp", addr, detail)
            if time.monotonic() >= deadline:
                break
            wait *= 2
    return Unknown(f"NAT-PMP: no answer from {gateway}:{NATPMP_PORT} within {timeout:g}s")


def upnp_external_address(timeout: float = 2.0, discover_ms: int = 1000) -> RouterAnswer | Unknown:
    """UPnP IGD discovery and ``GetExternalIPAddress`` (read-only), bounded by ``timeout``.

    miniupnpc's calls block, so they run in a daemon thread that is abandoned if the router
    is slow: the audit's time limit wins over the router.
    """
    try:
        import miniupnpc  # type: ignore[import-not-found]
    except ImportError:
        return Unknown("UPnP: the miniupnpc module is not installed")
    box: dict[str, RouterAnswer | Unknown] = {}

    def query() -> None:
        try:
            client = miniupnpc.UPnP()
            client.discoverdelay = discover_ms
            found = client.discover()
            if not found:
                box["r"] = Unknown("UPnP: no UPnP device answered discovery")
                return
            try:
                client.selectigd()
            except Exception as exc:  # miniupnpc raises plain Exception
                box["r"] = Unknown(f"UPnP: no Internet Gateway Device among {found} device(s): {exc}")
                return
            addr = client.externalipaddress()
            status = ""
            try:
                status = f", connection {client.statusinfo()[1]}"
            except Exception:  # statusinfo is optional; the address is what matters
                pass
            detail = f"UPnP IGD GetExternalIPAddress (LAN address {client.lanaddr}{status})"
            box["r"] = RouterAnswer("upnp", _clean_address(addr), detail)
        except Exception as exc:  # an odd router must not crash the audit
            box["r"] = Unknown(f"UPnP: {type(exc).__name__}: {exc}")

    worker = threading.Thread(target=query, name="upnp-query", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return Unknown(f"UPnP: no answer within {timeout:g}s")
    return box.get("r", Unknown("UPnP: query ended without a result"))


def _clean_address(addr: object) -> str | None:
    if not isinstance(addr, str) or not addr.strip():
        return None
    try:
        ip = ipaddress.ip_address(addr.strip())
    except ValueError:
        return None
    return None if ip.is_unspecified else str(ip)
