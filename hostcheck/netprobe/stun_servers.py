"""STUN server names: ``HOST[:PORT]`` / ``[IPv6]:PORT`` parsing and bounded resolution."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from dataclasses import dataclass, field

STUN_DEFAULT_PORT = 3478


@dataclass
class ResolvedServer:
    spec: str
    host: str
    port: int
    v4: list[str] = field(default_factory=list)
    v6: list[str] = field(default_factory=list)
    error: str | None = None


def parse_server(spec: str) -> tuple[str, int]:
    """``"host"``, ``"host:port"``, ``"[::1]:port"`` or a bare IPv6 address -> (host, port).

    Raises ValueError with a readable reason (the CLI shows it for ``--stun-server``).
    """
    text = spec.strip()
    if not text:
        raise ValueError("empty STUN server")
    port = STUN_DEFAULT_PORT
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError(f"{spec!r}: missing ']'")
        host, rest = text[1:end], text[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"{spec!r}: expected ':PORT' after ']'")
            port = _port(rest[1:], spec)
        ipaddress.IPv6Address(host)
    elif text.count(":") > 1:
        host = text  # a bare IPv6 address
        ipaddress.IPv6Address(host)
    elif ":" in text:
        host, _, p = text.partition(":")
        port = _port(p, spec)
    else:
        host = text
    if not host or any(c.isspace() for c in host):
        raise ValueError(f"{spec!r}: bad host name")
    return host, port


def _port(text: str, spec: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ValueError(f"{spec!r}: port must be 1-65535")
    return int(text)


def resolve_servers(specs: list[str], timeout: float) -> list[ResolvedServer]:
    """Resolve every server at once; getaddrinfo has no timeout, so the wait is bounded here.

    A lookup still running at the end is abandoned (its thread writes only to its own copy).
    """
    results: list[ResolvedServer] = []
    pending: list[tuple[int, threading.Thread, ResolvedServer]] = []
    for spec in specs:
        try:
            host, port = parse_server(spec)
        except ValueError as exc:
            results.append(ResolvedServer(spec, spec, 0, error=str(exc)))
            continue
        work = ResolvedServer(spec, host, port)
        t = threading.Thread(target=_resolve, args=(work,), daemon=True, name="stun-resolve")
        t.start()
        results.append(ResolvedServer(spec, host, port))
        pending.append((len(results) - 1, t, work))
    end = time.monotonic() + timeout
    for index, t, work in pending:
        t.join(max(0.0, end - time.monotonic()))
        if t.is_alive():
            results[index].error = f"name lookup of {work.host} took longer than {timeout:g}s"
        else:
            results[index] = work
    return results


def _resolve(res: ResolvedServer) -> None:
    try:
        infos = socket.getaddrinfo(res.host, res.port, type=socket.SOCK_DGRAM, proto=socket.IPPROTO_UDP)
    except socket.gaierror as exc:
        res.error = f"cannot resolve {res.host}: {exc.strerror or exc}"
        return
    except (OSError, UnicodeError) as exc:
        res.error = f"cannot resolve {res.host}: {exc}"
        return
    for family, _type, _proto, _canon, sockaddr in infos:
        addr = str(sockaddr[0])
        if family == socket.AF_INET and addr not in res.v4:
            res.v4.append(addr)
        elif family == socket.AF_INET6 and addr not in res.v6:
            res.v6.append(addr)
    if not res.v4 and not res.v6:
        res.error = f"{res.host} has no addresses"
