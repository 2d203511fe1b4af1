"""The first few router hops towards a destination, without root.

One UDP datagram per TTL (each on its own socket, so answers need no matching), with
``IP_RECVERR`` so the kernel queues the ICMP "time exceeded" for us and tells us who sent
it (``SO_EE_OFFENDER``). This is traceroute's unprivileged mode; nothing is changed and no
raw socket is needed. A carrier-grade NAT usually shows as an early hop in 100.64.0.0/10.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from dataclasses import dataclass

IP_RECVERR = 11  # linux/in.h; not exported by Python's socket module
MSG_ERRQUEUE = getattr(socket, "MSG_ERRQUEUE", 0x2000)
SO_EE_ORIGIN_ICMP = 2
ICMP_DEST_UNREACH = 3
ICMP_TIME_EXCEEDED = 11
TRACE_PORT = 33434


@dataclass(frozen=True)
class Hop:
    ttl: int
    address: str
    reached: bool
    """True when this is the destination answering (port unreachable), not a router."""


def parse_recverr(ancdata: list[tuple[int, int, bytes]]) -> tuple[str, int, int] | None:
    """(offender address, ICMP type, ICMP code) from IP_RECVERR ancillary data, or None."""
    for level, ctype, data in ancdata:
        if level != socket.IPPROTO_IP or ctype != IP_RECVERR or len(data) < 16:
            continue
        _errno, origin, icmp_type, icmp_code = struct.unpack("=IBBB", data[:7])
        if origin != SO_EE_ORIGIN_ICMP:
            continue
        # struct sock_extended_err (16 bytes) is followed by the offender's sockaddr_in.
        offender = data[16:32]
        if len(offender) < 8 or struct.unpack("=H", offender[:2])[0] != socket.AF_INET:
            continue
        return socket.inet_ntoa(offender[4:8]), icmp_type, icmp_code
    return None


def udp_hops(dest: str, *, max_ttl: int = 6, timeout: float = 1.2, tries: int = 2) -> list[Hop]:
    """Hops 1..max_ttl towards IPv4 ``dest``, as far as they answer within ``timeout``.

    Raises OSError only when no socket can be made at all (the caller reports why).
    """
    socks: dict[int, socket.socket] = {}
    hops: dict[int, Hop] = {}
    try:
        for ttl in range(1, max_ttl + 1):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            socks[ttl] = s
            s.setsockopt(socket.IPPROTO_IP, IP_RECVERR, 1)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
            s.setblocking(False)
            s.connect((dest, TRACE_PORT))
        poller = select.poll()
        by_fd = {s.fileno(): ttl for ttl, s in socks.items()}
        for s in socks.values():
            poller.register(s, select.POLLERR | select.POLLIN)
        deadline = time.monotonic() + timeout
        interval = timeout / max(1, tries)
        next_send = time.monotonic()
        sent = 0
        while True:
            now = time.monotonic()
            reached = min((h.ttl for h in hops.values() if h.reached), default=None)
            wanted = [t for t in socks if t not in hops and (reached is None or t < reached)]
            if not wanted or now >= deadline:
                break
            if sent < tries and now >= next_send:
                for ttl in wanted:
                    try:
                        socks[ttl].send(b"hostcheck hop probe")
                    except OSError:
                        pass  # a queued error from the previous send; read below
                sent += 1
                next_send = now + interval
            wait_ms = max(0, int((min(deadline, next_send if sent < tries else deadline) - now) * 1000))
            for fd, _ev in poller.poll(wait_ms):
                ttl = by_fd[fd]
                _read_errors(socks[ttl], ttl, hops)
    finally:
        for s in socks.values():
            s.close()
    reached = min((h.ttl for h in hops.values() if h.reached), default=max_ttl)
    return [hops[t] for t in sorted(hops) if t <= reached]


def _read_errors(sock: socket.socket, ttl: int, hops: dict[int, Hop]) -> None:
    for _ in range(8):
        try:
            _data, anc, _flags, _addr = sock.recvmsg(64, 512, MSG_ERRQUEUE)
        except (BlockingIOError, InterruptedError):
            break
        except OSError:
            continue
        parsed = parse_recverr(anc)
        if parsed is None:
            continue
        addr, icmp_type, _code = parsed
        if icmp_type == ICMP_TIME_EXCEEDED:
            hops.setdefault(ttl, Hop(ttl, addr, reached=False))
        elif icmp_type == ICMP_DEST_UNREACH:
            hops.setdefault(ttl, Hop(ttl, addr, reached=True))
    # Drain any ordinary datagram so poll does not spin on POLLIN.
    try:
        sock.recv(64)
    except OSError:
        pass
