"""Inbound reachability: a probe server outside the LAN connects back to its caller.

Only a connection from outside can prove that a forwarded port reaches the host, so
``hostcheck probe-server`` runs on a machine outside the LAN (a small VPS) and
``hostcheck audit --probe URL --token T`` asks it to connect back.

Safety rules of the server:

- it connects back only to the address the HTTP request came from (the TCP peer). A request
  naming any other target is refused; ``X-Forwarded-For`` and the like are ignored, so it
  cannot be made to scan or flood a third party (run it directly, not behind a proxy);
- a shared token authenticates each request (compared in constant time);
- ports per request, requests per minute (per caller and overall) and concurrent probes
  are bounded; each connect-back has a short timeout;
- it logs counts and statuses only: no token, nonce, or address.

Protocol (JSON over HTTP)::

    POST /probe   Authorization: Bearer TOKEN
    {"ports": [{"port": 40000, "proto": "tcp", "nonce": "..."}, ...]}
    -> 200 {"peer": "198.51.100.2",
            "results": [{"port": 40000, "proto": "tcp", "result": "reachable"|"unreachable",
                         "detail": "connected"|"refused"|"timeout"|"echoed"|"no echo"|...}]}

For TCP the server connects and sends ``HOSTCHECK-PROBE <nonce>\\n``; for UDP it sends that
datagram and waits for the caller to echo it. The client (:func:`request_probe`) listens on
each port meanwhile and counts a port reachable only when its nonce arrived: a connection
accepted by the router itself (its admin page on that port) proves nothing.
"""

from __future__ import annotations

import errno
import hmac
import ipaddress
import json
import logging
import re
import secrets
import socket
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger("hostcheck.probe_server")

MAX_BODY = 4096
MIN_TOKEN_LENGTH = 16
CONNECT_TIMEOUT_S = 2.0
UDP_WAIT_S = 2.0
MAX_CONCURRENT_PROBES = 4
PROBE_PREFIX = b"HOSTCHECK-PROBE "
NONCE_RE = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
PROTOS = ("tcp", "udp")
REQUEST_KEYS = {"ports"}
PORT_KEYS = {"port", "proto", "nonce"}


class ProbeRequestError(ValueError):
    """A probe request the server refuses (HTTP 400; the message says why)."""


@dataclass(frozen=True)
class PortProbe:
    port: int
    proto: str
    nonce: str


@dataclass(frozen=True)
class ProbeRequest:
    ports: tuple[PortProbe, ...]


def parse_probe_request(body: bytes, *, max_ports: int = 16) -> ProbeRequest:
    """Parse and validate a probe request body; anything else is a :class:`ProbeRequestError`.

    Pure: no I/O. There is deliberately no field for a target address — the server always
    connects back to the request's own peer — and a request carrying one is refused, so a
    client cannot believe it had a third party probed.
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


def normalise_peer(addr: str) -> str:
    ip = ipaddress.ip_address(addr.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


class RateLimiter:
    """Sliding one-minute windows: per caller address and for the whole server."""

    def __init__(self, per_peer: int, overall: int) -> None:
        self.per_peer, self.overall = per_peer, overall
        self._peers: dict[str, deque[float]] = {}
        self._all: deque[float] = deque()
        self._lock = threading.Lock()

    def allow(self, peer: str, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        with self._lock:
            for q in (self._all, *self._peers.values()):
                while q and now - q[0] >= 60.0:
                    q.popleft()
            for key in [k for k, q in self._peers.items() if not q]:
                del self._peers[key]
            q = self._peers.setdefault(peer, deque())
            if len(q) >= self.per_peer or len(self._all) >= self.overall:
                return False
            q.append(now)
            self._all.append(now)
            return True


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
        return _result(probe, "reachable", "connected")
    except ConnectionRefusedError:
        return _result(probe, "unreachable", "refused")
    except socket.timeout:
        return _result(probe, "unreachable", "timeout")
    except OSError as exc:
        return _result(probe, "unreachable", f"error: {exc.strerror or type(exc).__name__}")


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
                    return _result(probe, "unreachable", f"error: {exc.strerror or type(exc).__name__}")
                until = min(deadline, time.monotonic() + timeout / 3)
                while (left := until - time.monotonic()) > 0:
                    s.settimeout(left)
                    try:
                        data, src = s.recvfrom(256)
                    except socket.timeout:
                        break
                    except OSError:
                        continue  # ICMP port unreachable from a previous send
                    if normalise_peer(src[0]) == peer and data == payload:
                        return _result(probe, "reachable", "echoed")
    except OSError as exc:
        return _result(probe, "unreachable", f"error: {exc.strerror or type(exc).__name__}")
    return _result(probe, "unreachable", "no echo")


def _result(probe: PortProbe, result: str, detail: str) -> dict[str, Any]:
    return {"port": probe.port, "proto": probe.proto, "result": result, "detail": detail}


class ProbeServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, bind: str, port: int, token: str, *, max_ports: int, rate_per_min: int) -> None:
        if not isinstance(token, str) or len(token) < MIN_TOKEN_LENGTH:
            raise ValueError(f"the probe token must be at least {MIN_TOKEN_LENGTH} characters")
        if not 1 <= max_ports <= 256:
            raise ValueError("max_ports must be 1-256")
        if rate_per_min < 1:
            raise ValueError("rate_per_min must be at least 1")
        self.address_family = socket.AF_INET6 if ":" in bind else socket.AF_INET
        self.token = token
        self.max_ports = max_ports
        self.limiter = RateLimiter(rate_per_min, overall=rate_per_min * 10)
        self.busy = threading.BoundedSemaphore(MAX_CONCURRENT_PROBES)
        self.stats = {"probes": 0, "refused": 0}
        super().__init__((bind, port), ProbeHandler)


class ProbeHandler(BaseHTTPRequestHandler):
    server: ProbeServer
    timeout = 10  # a slow client cannot hold a thread for long
    server_version = "hostcheck-probe"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        # The default logs the caller's address and request line; we log nothing of it.
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        if status != 200:
            self.server.stats["refused"] += 1
            log.info("probe request refused: HTTP %d", status)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/health":
            self._send(200, {"ok": True})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:  # noqa: N802
        peer = normalise_peer(self.client_address[0])
        if self.path != "/probe":
            self._send(404, {"error": "not found"})
            return
        if not self.server.limiter.allow(peer):
            self._send(429, {"error": "too many requests; try again in a minute"})
            return
        auth = self.headers.get("Authorization", "")
        given = auth[7:] if auth.startswith("Bearer ") else None
        if not token_matches(given, self.server.token):
            self._send(401, {"error": "missing or wrong token"})
            return
        try:
            length = int(self.headers.get("Content-Length", "-1"))
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            self._send(400, {"error": f"Content-Length must be 0-{MAX_BODY}"})
            return
        try:
            request = parse_probe_request(self.rfile.read(length), max_ports=self.server.max_ports)
        except ProbeRequestError as exc:
            self._send(400, {"error": str(exc)})
            return
        except OSError:
            return
        if not self.server.busy.acquire(blocking=False):
            self._send(503, {"error": "busy; try again shortly"})
            return
        try:
            with ThreadPoolExecutor(max_workers=len(request.ports)) as pool:
                results = list(pool.map(lambda p: _probe_one(peer, p), request.ports))
        finally:
            self.server.busy.release()
        self.server.stats["probes"] += 1
        log.info(
            "probe done: %d tcp, %d udp port(s), %d reachable",
            sum(p.proto == "tcp" for p in request.ports),
            sum(p.proto == "udp" for p in request.ports),
            sum(r["result"] == "reachable" for r in results),
        )
        self._send(200, {"peer": peer, "results": results})


def _probe_one(peer: str, probe: PortProbe) -> dict[str, Any]:
    return tcp_connect_back(peer, probe) if probe.proto == "tcp" else udp_echo_back(peer, probe)


def make_server(
    bind: str, port: int, token: str, *, max_ports: int = 16, rate_per_min: int = 30
) -> ProbeServer:
    """A ready probe server (not yet serving); ``port`` 0 picks a free port."""
    return ProbeServer(bind, port, token, max_ports=max_ports, rate_per_min=rate_per_min)


def serve(bind: str, port: int, token: str, *, max_ports: int = 16, rate_per_min: int = 30) -> None:
    """Run the probe server until interrupted (blocking)."""
    server = make_server(bind, port, token, max_ports=max_ports, rate_per_min=rate_per_min)
    host, real_port = server.server_address[:2]
    log.warning(
        "hostcheck probe server on %s:%s (max %d ports/request, %d requests/min per caller)",
        host,
        real_port,
        max_ports,
        rate_per_min,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


# -- client --------------------------------------------------------------------------


class _Listener:
    """A temporary listener on one port that records the probe's nonce (and echoes UDP)."""

    def __init__(self, port: int, proto: str, nonce: str) -> None:
        self.port, self.proto, self.nonce = port, proto, nonce
        self.expected = PROBE_PREFIX + nonce.encode()
        self.received = False
        self.error: str | None = None
        self.sock: socket.socket | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
        # Dual-stack where the host has IPv6: the server connects back to whichever address
        # family the request reached it over.
        for family, addr in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
            try:
                s = socket.socket(family, kind)
            except OSError as exc:
                self.error = exc.strerror or str(exc)
                continue
            try:
                if family == socket.AF_INET6:
                    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
                if proto == "tcp":
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((addr, port))
                if proto == "tcp":
                    s.listen(8)
                s.settimeout(0.2)
            except OSError as exc:
                self.error = exc.strerror or str(exc)
                s.close()
                if exc.errno == errno.EADDRINUSE:
                    return  # in use: the IPv4-only fallback would only hide that
                continue
            self.sock, self.error = s, None
            return

    def start(self) -> None:
        if self.sock is not None:
            self._thread = threading.Thread(
                target=self._run, daemon=True, name=f"probe-listen-{self.proto}{self.port}"
            )
            self._thread.start()

    def _run(self) -> None:
        assert self.sock is not None
        echoes = 0
        while not self._stop.is_set():
            try:
                if self.proto == "tcp":
                    conn, _ = self.sock.accept()
                    with conn:
                        conn.settimeout(1.0)
                        data = b""
                        while len(data) < 128 and b"\n" not in data:
                            chunk = conn.recv(128)
                            if not chunk:
                                break
                            data += chunk
                    if data.rstrip(b"\n") == self.expected:
                        self.received = True
                else:
                    data, src = self.sock.recvfrom(256)
                    # Echo only our own nonce, a few times: never an open reflector.
                    if data == self.expected and echoes < 5:
                        self.received = True
                        echoes += 1
                        self.sock.sendto(data, src)
            except socket.timeout:
                continue
            except OSError:
                if self._stop.is_set():
                    break
                time.sleep(0.05)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1.0)
        if self.sock is not None:
            self.sock.close()


def request_probe(url: str, token: str, ports: list[tuple[int, str]], timeout: float) -> dict[str, Any]:
    """Ask the probe server at ``url`` to connect back to us on ``ports`` [(port, "tcp"|"udp")].

    Returns the ``network.inbound`` facts: ``probed``, ``peer`` (our address as the server
    saw it), ``ports`` [{port, proto, result, detail}] and ``reason``. A port counts as
    reachable only when its nonce reached our listener; when the port is already in use
    here the result is "unverified" (something answered, but we cannot see that it was us).
    Never raises for network trouble: it becomes ``probed: False`` with the reason.
    """

    def unverified(why: str) -> dict[str, Any]:
        return {
            "probed": False,
            "peer": None,
            "ports": [
                {"port": p, "proto": proto, "result": "unverified", "detail": why} for p, proto in ports
            ],
            "reason": why,
        }

    if not url.startswith(("http://", "https://")):
        return unverified(f"probe URL must start with http:// or https:// (got {url[:40]!r})")
    if not ports:
        return unverified("no ports to probe")
    listeners = [_Listener(p, proto, secrets.token_urlsafe(18)) for p, proto in ports]
    for lst in listeners:
        lst.start()
    try:
        body = json.dumps(
            {"ports": [{"port": lst.port, "proto": lst.proto, "nonce": lst.nonce} for lst in listeners]}
        ).encode()
        req = urllib.request.Request(
            url.rstrip("/") + "/probe",
            data=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=max(0.5, timeout)) as resp:
                answer = json.loads(resp.read(65536) or b"null")
        except urllib.error.HTTPError as exc:
            detail = ""
            try:
                detail = str(json.loads(exc.read(4096)).get("error", ""))
            except (ValueError, AttributeError, OSError):
                pass
            return unverified(f"probe server refused the request: HTTP {exc.code} {detail}".rstrip())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            why = getattr(exc, "reason", exc)
            return unverified(f"probe server not reachable: {why}")
        # The server is done connecting; give the last datagrams a moment to land.
        time.sleep(0.05)
    finally:
        for lst in listeners:
            lst.close()
    if not isinstance(answer, dict) or not isinstance(answer.get("results"), list):
        return unverified("probe server gave an answer of the wrong shape")
    by_key = {(r.get("port"), r.get("proto")): r for r in answer["results"] if isinstance(r, dict)}
    out_ports = []
    for lst in listeners:
        server_side = by_key.get((lst.port, lst.proto), {})
        detail = str(server_side.get("detail", "not probed by the server"))
        if lst.received:
            result = "reachable"
        elif lst.sock is None:
            result = "unverified"
            detail = f"port in use on this host ({lst.error}); the server says: {detail}"
        else:
            result = "unreachable"
            if server_side.get("result") == "reachable":
                detail = f"{detail}, but not to this host (the router or another machine answered)"
        out_ports.append({"port": lst.port, "proto": lst.proto, "result": result, "detail": detail})
    peer = answer.get("peer") if isinstance(answer.get("peer"), str) else None
    return {"probed": True, "peer": peer, "ports": out_ports, "reason": None}
