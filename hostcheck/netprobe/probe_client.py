"""The probe server's client: listen on each port, ask the server to connect back.

Used by the audit (``network.inbound`` facts); imports no HTTP server code.
"""

from __future__ import annotations

import errno
import http.client
import json
import secrets
import socket
import threading
import time
from typing import Any

from hostcheck.errors import ServerError
from hostcheck.models import InboundResult
from hostcheck.netprobe.http_client import check_status, connect, parse_endpoint
from hostcheck.netprobe.probe_protocol import DEFAULT_MAX_PORTS, PROBE_PREFIX

MAX_ANSWER = 65536


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
            except TimeoutError:
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


def post_json(url: str, token: str, path: str, payload: object, timeout: float,
              fingerprint: str | None = None) -> Any:
    """POST ``payload`` to the server; its JSON answer, or ServerError/ValueError saying why."""
    ep = parse_endpoint(url, fingerprint)
    conn = connect(ep, timeout)
    try:
        body = json.dumps(payload).encode()
        conn.request(
            "POST",
            ep.base_path + path,
            body=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )
        resp = conn.getresponse()
        check_status(resp)
        return json.loads(resp.read(MAX_ANSWER) or b"null")
    except (OSError, http.client.HTTPException) as exc:
        raise ServerError(f"probe server not reachable: {getattr(exc, 'strerror', None) or exc or type(exc).__name__}") from None
    finally:
        conn.close()


def request_probe(
    url: str, token: str, ports: list[tuple[int, str]], timeout: float, fingerprint: str | None = None,
    max_ports: int = DEFAULT_MAX_PORTS,
) -> dict[str, Any]:
    """Ask the probe server at ``url`` to connect back to us on ``ports`` [(port, "tcp"|"udp")].

    Returns the ``network.inbound`` facts: ``probed``, ``peer`` (our address as the server
    saw it), ``ports`` [{port, proto, result, detail}] and ``reason``. A port counts as
    reachable only when its nonce reached our listener; when the port is already in use
    here the result is "unverified" (something answered, but we cannot see that it was us).
    Never raises for network trouble: it becomes ``probed: False`` with the reason. A list
    longer than the server takes (``max_ports`` entries) is refused here, before any listener
    opens or anything is sent.
    """

    def unverified(why: str) -> dict[str, Any]:
        return {
            "probed": False,
            "peer": None,
            "ports": [
                {"port": p, "proto": proto, "result": InboundResult.UNVERIFIED, "detail": why} for p, proto in ports
            ],
            "reason": why,
        }

    try:
        parse_endpoint(url, fingerprint)
    except ValueError as exc:
        return unverified(str(exc))
    if not ports:
        return unverified("no ports to probe")
    if len(ports) > max_ports:
        return unverified(
            f"{len(ports)} port checks asked; a probe server takes at most {max_ports} per request (nothing was sent)"
        )
    listeners = [_Listener(p, proto, secrets.token_urlsafe(18)) for p, proto in ports]
    for lst in listeners:
        lst.start()
    try:
        payload = {"ports": [{"port": lst.port, "proto": lst.proto, "nonce": lst.nonce} for lst in listeners]}
        try:
            answer = post_json(url, token, "/probe", payload, max(0.5, timeout), fingerprint)
        except ServerError as exc:
            return unverified(str(exc))
        except ValueError:
            return unverified("probe server gave an answer that is not JSON")
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
        detail = str(server_side.get("detail", "not probed by the server"))[:200]
        if lst.received:
            result = InboundResult.REACHABLE
        elif lst.sock is None:
            result = InboundResult.UNVERIFIED
            detail = f"port in use on this host ({lst.error}); the server says: {detail}"
        else:
            result = InboundResult.UNREACHABLE
            if server_side.get("result") == InboundResult.REACHABLE:
                detail = f"{detail}, but not to this host (the router or another machine answered)"
        out_ports.append({"port": lst.port, "proto": lst.proto, "result": result, "detail": detail})
    peer = answer.get("peer") if isinstance(answer.get("peer"), str) else None
    return {"probed": True, "peer": peer, "ports": out_ports, "reason": None}
