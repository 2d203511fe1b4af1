"""The probe server's one action: connect back to the caller's own address.

Blocking sockets with short timeouts; the server runs them in worker threads. ``peer`` is
always the TCP peer of the authenticated request, never an address the request names.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from hostcheck.models import InboundResult
from hostcheck.netprobe.probe_protocol import PROBE_PREFIX, PortProbe, normalise_peer, port_result

CONNECT_TIMEOUT_S = 2.0
UDP_WAIT_S = 2.0


def tcp_connect_back(peer: str, probe: PortProbe, timeout: float = CONNECT_TIMEOUT_S) -> dict[str, Any]:
    family = socket.AF_INET6 if ":" in peer else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect((peer, probe.port))
            try:
                s.sendall(PROBE_PREFIX + probe.nonce.encode() + b"\n")
            except OSError:
                pass  # connected is what we report; the client checks the nonce itself
        return port_result(probe, InboundResult.REACHABLE, "connected")
    except ConnectionRefusedError:
        return port_result(probe, InboundResult.UNREACHABLE, "refused")
    except TimeoutError:
        return port_result(probe, InboundResult.UNREACHABLE, "timeout")
    except OSError as exc:
        return port_result(probe, InboundResult.UNREACHABLE, f"error: {exc.strerror or type(exc).__name__}")


def udp_echo_back(peer: str, probe: PortProbe, timeout: float = UDP_WAIT_S) -> dict[str, Any]:
    family = socket.AF_INET6 if ":" in peer else socket.AF_INET
    payload = PROBE_PREFIX + probe.nonce.encode()
    deadline = time.monotonic() + timeout
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            for _attempt in range(3):
                try:
                    s.sendto(payload, (peer, probe.port))
                except OSError as exc:
                    return port_result(probe, InboundResult.UNREACHABLE, f"error: {exc.strerror or type(exc).__name__}")
                until = min(deadline, time.monotonic() + timeout / 3)
                while (left := until - time.monotonic()) > 0:
                    s.settimeout(left)
                    try:
                        data, src = s.recvfrom(256)
                    except TimeoutError:
                        break
                    except OSError:
                        continue  # ICMP port unreachable from a previous send
                    if normalise_peer(src[0]) == peer and data == payload:
                        return port_result(probe, InboundResult.REACHABLE, "echoed")
    except OSError as exc:
        return port_result(probe, InboundResult.UNREACHABLE, f"error: {exc.strerror or type(exc).__name__}")
    return port_result(probe, InboundResult.UNREACHABLE, "no echo")


def probe_one(peer: str, probe: PortProbe) -> dict[str, Any]:
    return tcp_connect_back(peer, probe) if probe.proto == "tcp" else udp_echo_back(peer, probe)
