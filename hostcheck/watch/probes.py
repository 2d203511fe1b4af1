"""Network reachability samples: TCP connects and DNS queries to several independent targets.

One dead target is not an outage: the network counts as down only when every target fails
in the same sample. An answer that refuses the connection (RST) still proves the path works,
so it counts as reachable. What the probes cost on the network is measured, not estimated:
see :mod:`hostcheck.watch.traffic` (1,614 bytes a minute at the defaults).
"""

from __future__ import annotations

import os
import socket
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from hostcheck.errors import InputError

# Three operators, two kinds of probe each: Cloudflare, Google and Quad9 run separate networks.
DEFAULT_TARGETS: tuple[str, ...] = (
    "tcp:1.1.1.1:443", "tcp:8.8.8.8:443", "tcp:9.9.9.9:443",
    "dns:1.1.1.1", "dns:8.8.8.8", "dns:9.9.9.9",
)  # fmt: skip
DEFAULT_DNS_NAME = "example.com"
DEFAULT_TIMEOUT_S = 3.0
MAX_TARGETS = 16
ANSWERED = ("ok", "refused")


@dataclass(frozen=True)
class Target:
    kind: str  # "tcp" | "dns"
    host: str
    port: int

    @property
    def label(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.kind}:{host}:{self.port}"


def _split_host_port(text: str, default_port: int | None) -> tuple[str, int]:
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError("missing ']'")
        host, rest = text[1:end], text[end + 1 :]
        port_text = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            raise ValueError("junk after ']'")
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host, port_text = text, ""
    if not host:
        raise ValueError("no host")
    if not port_text:
        if default_port is None:
            raise ValueError("needs a port")
        return host, default_port
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"bad port {port_text!r}")
    return host, int(port_text)


def parse_target(spec: str) -> Target:
    """``tcp:HOST:PORT`` or ``dns:SERVER[:PORT]`` (IPv6 in brackets). Raises InputError."""
    kind, sep, rest = spec.strip().partition(":")
    if not sep or kind not in ("tcp", "dns"):
        raise InputError(f"{spec!r}: a target is tcp:HOST:PORT or dns:SERVER[:PORT]")
    try:
        host, port = _split_host_port(rest, 53 if kind == "dns" else None)
    except ValueError as exc:
        raise InputError(f"{spec!r}: {exc}") from None
    return Target(kind, host, port)


def parse_targets(specs: list[str] | tuple[str, ...]) -> list[Target]:
    targets = [parse_target(s) for s in specs]
    if not targets:
        raise InputError("at least one network target is needed (three independent ones are advised)")
    if len(targets) > MAX_TARGETS:
        raise InputError(f"at most {MAX_TARGETS} network targets")
    return targets


def _family(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def probe_tcp(target: Target, timeout: float) -> str:
    try:
        with socket.create_connection((target.host, target.port), timeout=timeout):
            return "ok"
    except ConnectionRefusedError:
        return "refused"
    except TimeoutError:
        return "timeout"
    except socket.gaierror:
        return "no-name"
    except OSError as exc:
        return "unreachable" if exc.errno in (101, 113) else f"error-{exc.errno}"


def dns_query(name: str, ident: int) -> bytes:
    header = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0)  # recursion desired, one question
    labels = b"".join(bytes([len(p)]) + p.encode("ascii") for p in name.strip(".").split(".") if p)
    return header + labels + b"\x00" + struct.pack("!HH", 1, 1)  # A, IN


def probe_dns(target: Target, timeout: float, name: str = DEFAULT_DNS_NAME) -> str:
    """Any well-formed answer to our query id (even NXDOMAIN or SERVFAIL) proves the server is reachable."""
    ident = int.from_bytes(os.urandom(2), "big")
    deadline = time.monotonic() + timeout
    try:
        with socket.socket(_family(target.host), socket.SOCK_DGRAM) as sock:
            sock.connect((target.host, target.port))
            sock.send(dns_query(name, ident))
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return "timeout"
                sock.settimeout(left)
                reply = sock.recv(1500)
                if len(reply) >= 12 and struct.unpack("!H", reply[:2])[0] == ident and reply[2] & 0x80:
                    return "ok"
    except TimeoutError:
        return "timeout"
    except ConnectionRefusedError:
        return "refused-port"  # ICMP port unreachable: the host is there, no resolver on it
    except OSError as exc:
        return "unreachable" if exc.errno in (101, 113) else f"error-{exc.errno}"


class NetworkProber:
    def __init__(self, targets: list[Target], timeout: float = DEFAULT_TIMEOUT_S, dns_name: str = DEFAULT_DNS_NAME):
        self.targets = targets
        self.timeout = timeout
        self.dns_name = dns_name
        self._pool = ThreadPoolExecutor(max_workers=len(targets), thread_name_prefix="watch-probe")

    def sample(self) -> dict[str, str]:
        futures = {
            t.label: self._pool.submit(probe_tcp, t, self.timeout)
            if t.kind == "tcp"
            else self._pool.submit(probe_dns, t, self.timeout, self.dns_name)
            for t in self.targets
        }
        out: dict[str, str] = {}
        for label, fut in futures.items():
            try:
                out[label] = fut.result(timeout=self.timeout + 2)
            except Exception as exc:  # a probe must never stop the recorder
                out[label] = f"error-{type(exc).__name__}"
        return out

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def answered(results: dict[str, str]) -> int:
    return sum(1 for r in results.values() if r in ANSWERED or r == "refused-port")
