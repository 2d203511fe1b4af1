"""The probe server's wire protocol: request parsing, token comparison, peer normalising.

Pure code shared by the server (:mod:`hostcheck.probeserver.server`) and the client
(:mod:`hostcheck.netprobe.probe_client`); nothing here does I/O.

Protocol (JSON over HTTPS; plain HTTP only when the server is started with
``--insecure-http``)::

    POST /probe   Authorization: Bearer TOKEN
    {"ports": [{"port": 40000, "proto": "tcp", "nonce": "..."}, ...]}
    -> 200 {"peer": "198.51.100.2",
            "results": [{"port": 40000, "proto": "tcp", "result": "reachable"|"unreachable",
                         "detail": "connected"|"refused"|"timeout"|"echoed"|"no echo"|...}]}

There is deliberately no field for a target address: the server connects back only to the
TCP peer of the request. For TCP it connects and sends ``HOSTCHECK-PROBE <nonce>\\n``; for
UDP it sends that datagram and waits for the caller to echo it. The client listens on each
port meanwhile and counts a port reachable only when its nonce arrived: a connection
accepted by the router itself (its admin page on that port) proves nothing.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any

from hostcheck.errors import ProbeRequestError
from hostcheck.models import InboundResult

MAX_BODY = 4096
DEFAULT_MAX_PORTS = 16
"""Entries (port and protocol) one probe request may carry unless the server is started with
another ``--max-ports``; the client asks for no more than this."""
MIN_TOKEN_LENGTH = 16
MAX_TOKEN_LENGTH = 512
PROBE_PREFIX = b"HOSTCHECK-PROBE "
NONCE_RE = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
PROTOS = ("tcp", "udp")
REQUEST_KEYS = {"ports"}
PORT_KEYS = {"port", "proto", "nonce"}
TOKEN_ENV = "HOSTCHECK_PROBE_TOKEN"
"""Environment variable holding the shared token (the alternative to a token file)."""


@dataclass(frozen=True)
class PortProbe:
    port: int
    proto: str
    nonce: str


@dataclass(frozen=True)
class ProbeRequest:
    ports: tuple[PortProbe, ...]


def parse_probe_request(body: bytes, *, max_ports: int = DEFAULT_MAX_PORTS) -> ProbeRequest:
    """Parse and validate a probe request body; anything else is a :class:`ProbeRequestError`.

    A request carrying a target field is refused, so a client cannot believe it had a third
    party probed.
    """
    if not isinstance(body, (bytes, bytearray)):
        raise ProbeRequestError("body must be bytes")
    if len(body) > MAX_BODY:
        raise ProbeRequestError(f"body larger than {MAX_BODY} bytes")
    try:
        data = json.loads(bytes(body).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ProbeRequestError(f"body is not JSON: {type(exc).__name__}") from None
    if not isinstance(data, dict):
        raise ProbeRequestError("body must be a JSON object")
    extra = sorted(set(data) - REQUEST_KEYS)
    if extra:
        raise ProbeRequestError(
            f"unknown field {extra[0]!r}: the server connects back only to the address the request came from"
        )
    ports = data.get("ports")
    if not isinstance(ports, list) or not ports:
        raise ProbeRequestError("'ports' must be a non-empty list")
    if len(ports) > max_ports:
        raise ProbeRequestError(f"at most {max_ports} ports per request ({len(ports)} asked)")
    seen: set[tuple[int, str]] = set()
    parsed: list[PortProbe] = []
    for i, item in enumerate(ports):
        if not isinstance(item, dict):
            raise ProbeRequestError(f"ports[{i}] must be an object")
        if set(item) != PORT_KEYS:
            odd = sorted(set(item) ^ PORT_KEYS)
            raise ProbeRequestError(f"ports[{i}] must have exactly port, proto, nonce (not {odd[0]!r})")
        port, proto, nonce = item["port"], item["proto"], item["nonce"]
        if type(port) is not int or not 1 <= port <= 65535:
            raise ProbeRequestError(f"ports[{i}].port must be an integer 1-65535")
        if proto not in PROTOS:
            raise ProbeRequestError(f"ports[{i}].proto must be 'tcp' or 'udp'")
        if not isinstance(nonce, str) or not NONCE_RE.match(nonce):
            raise ProbeRequestError(f"ports[{i}].nonce must be 16-64 characters of [A-Za-z0-9_-]")
        if (port, proto) in seen:
            raise ProbeRequestError(f"ports[{i}] repeats {proto}/{port}")
        seen.add((port, proto))
        parsed.append(PortProbe(port, proto, nonce))
    return ProbeRequest(tuple(parsed))


def token_matches(given: str | None, expected: str) -> bool:
    """Constant-time token comparison (the length alone may leak, the content not)."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8"))


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer TOKEN`` header, else None."""
    if not header or not header.startswith("Bearer ") or len(header) > MAX_TOKEN_LENGTH + 7:
        return None
    return header[7:]


def check_token(token: str) -> str:
    """The token itself when it is usable as a shared secret; ValueError saying why not."""
    token = token.strip()
    if not MIN_TOKEN_LENGTH <= len(token) <= MAX_TOKEN_LENGTH:
        raise ValueError(f"the probe token must be {MIN_TOKEN_LENGTH}-{MAX_TOKEN_LENGTH} characters")
    if not token.isascii() or not token.isprintable() or " " in token:
        raise ValueError("the probe token must be printable ASCII without spaces")
    return token


def normalise_peer(addr: str) -> str:
    ip = ipaddress.ip_address(addr.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def port_result(probe: PortProbe, result: InboundResult, detail: str) -> dict[str, Any]:
    return {"port": probe.port, "proto": probe.proto, "result": result, "detail": detail}
