"""Attacks on the probe server, one test each, bounded and on loopback only.

Each starts a real server (in a thread, or the real CLI as a subprocess where what it prints
matters) and attacks it the way issue reports described: a wrong-token flood, a slowloris
trickle, a connection flood, a wrong certificate, a redirect to another host, a client that
vanishes mid-request, and a token that would show in ``ps``.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcheck.errors import ServerError
from hostcheck.netprobe.probe_client import post_json, request_probe
from hostcheck.probeserver import tls
from hostcheck.probeserver.limits import Limits
from tests.helpers import REPO
from tests.probe_fixtures import TOKEN, RunningThread, free_port, start_in_thread

NONCE = "abcdefghijklmnop"


@pytest.fixture
def server() -> Iterator[RunningThread]:
    srv = start_in_thread(
        Limits(
            rate_per_min=5,
            overall_per_min=50,
            max_connections=6,
            max_connections_per_source=6,
            request_deadline_s=1.5,
        )
    )
    try:
        yield srv
    finally:
        srv.stop()


def raw_post(url: str, token: str, payload: object) -> int:
    req = urllib.request.Request(
        url + "/probe",
        data=json.dumps(payload).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_wrong_token_flood_does_not_lock_out_the_real_token(server: RunningThread) -> None:
    """300 wrong-token requests are each refused with 401 and the real token still works at once:
    failed guesses must not use up the limits that the real user's requests need."""
    codes = {raw_post(server.url, "wrong-token-0123456789abcdef", {"ports": []}) for _ in range(300)}
    assert codes == {401}
    p = free_port()
    out = request_probe(server.url, TOKEN, [(p, "tcp")], timeout=8)
    assert out["probed"] is True and out["ports"][0]["result"] == "reachable"
    assert server.service.stats["failed_authentications"] == 300


def _recv_until_closed(sock: socket.socket, limit: float) -> float:
    """Seconds until the server closed ``sock`` (EOF or reset); fails past ``limit``."""
    start = time.monotonic()
    sock.settimeout(limit)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    return time.monotonic() - start


def test_slowloris_is_cut_off_by_the_request_deadline(server: RunningThread) -> None:
    """Each read is quick, the request never completes: the whole-request deadline ends it."""
    header = b"POST /probe HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
    assert len(header) * 0.1 > 6  # never cut off, the trickle would last this long
    with socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1])), timeout=5) as s:
        s.settimeout(0.1)  # the pause between bytes, spent waiting for the server to hang up
        start = time.monotonic()
        for byte in header:
            try:
                s.sendall(bytes([byte]))
                if s.recv(1) == b"":
                    break
            except TimeoutError:
                continue
            except OSError:
                break
        elapsed = time.monotonic() - start
    assert 1.2 < elapsed < 4.5, elapsed
    assert server.service.stats["request_deadlines"] == 1


def test_connection_cap(server: RunningThread) -> None:
    """Six idle connections fill the cap: a seventh is closed at once; once they go, service resumes."""
    port = int(server.url.rsplit(":", 1)[1])
    idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(6)]
    try:
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as extra:
            assert _recv_until_closed(extra, 1.0) < 1.0
        assert server.service.stats["connections_over_cap"] >= 1
    finally:
        for s in idle:
            s.close()
    time.sleep(0.3)
    with urllib.request.urlopen(server.url + "/health", timeout=5) as resp:
        assert resp.status == 200


def test_idle_connections_give_way_once_they_have_idled() -> None:
    """The same cap, once the six have sent nothing for ``shed_after_s``: a newcomer takes the
    oldest one's slot (closed at once) rather than being refused."""
    srv = start_in_thread(Limits(max_connections=6, max_connections_per_source=6, shed_after_s=0.3))
    port = int(srv.url.rsplit(":", 1)[1])
    idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(6)]
    try:
        time.sleep(0.3 + 0.1)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            assert _recv_until_closed(idle[0], 1.0) < 1.0
            assert srv.call(lambda: srv.service.table.slots) == 6
        assert srv.service.stats["connections_shed"] == 1 and srv.service.stats["connections_over_cap"] == 0
    finally:
        for s in idle:
            s.close()
        srv.stop()


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningThread, str]]:
    state = tmp_path_factory.mktemp("probe-tls")
    cert, key = tls.ensure_self_signed(state)
    assert (key.stat().st_mode & 0o777) == 0o600
    srv = start_in_thread(Limits(request_deadline_s=5), ssl_context=tls.server_context(cert, key))
    try:
        yield srv, tls.fingerprint_of_pem_file(cert)
    finally:
        srv.stop()


def test_tls_with_the_pinned_fingerprint(tls_server: tuple[RunningThread, str]) -> None:
    srv, fingerprint = tls_server
    assert srv.url.startswith("https://") and fingerprint.startswith("SHA256:")
    p = free_port()
    out = request_probe(srv.url, TOKEN, [(p, "tcp")], timeout=8, fingerprint=fingerprint.lower())
    assert out["probed"] is True and out["ports"][0]["result"] == "reachable"


def test_tls_wrong_pin_is_refused_before_the_token_is_sent(tls_server: tuple[RunningThread, str]) -> None:
    srv, fingerprint = tls_server
    before = dict(srv.service.stats.counts)
    wrong = "SHA256:" + ":".join(["00"] * 32)
    out = request_probe(srv.url, TOKEN, [(free_port(), "tcp")], timeout=5, fingerprint=wrong)
    assert out["probed"] is False and "does not match --probe-fingerprint" in out["reason"]
    unpinned = request_probe(srv.url, TOKEN, [(free_port(), "tcp")], timeout=5)
    assert unpinned["probed"] is False and "certificate not trusted" in unpinned["reason"]
    assert srv.service.stats.counts == before  # no request reached the server at all


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []
    location = ""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        type(self).seen.append(dict(self.headers))
        if type(self).location:
            self.send_response(307)
            self.send_header("Location", type(self).location)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")


def test_redirect_is_not_followed_and_authorization_not_forwarded() -> None:
    class Target(_Recorder):
        seen: list[dict[str, str]] = []
        location = ""

    class Redirector(_Recorder):
        seen: list[dict[str, str]] = []

    target = http.server.HTTPServer(("127.0.0.1", 0), Target)
    Redirector.location = f"http://127.0.0.1:{target.server_address[1]}/probe"
    redirector = http.server.HTTPServer(("127.0.0.1", 0), Redirector)
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
               for s in (target, redirector)]
    for t in threads:
        t.start()
    try:
        url = f"http://127.0.0.1:{redirector.server_address[1]}"
        out = request_probe(url, TOKEN, [(free_port(), "tcp")], timeout=5)
        assert out["probed"] is False and "redirect (HTTP 307); not followed" in out["reason"]
        with pytest.raises(ServerError, match="not followed"):
            post_json(url, TOKEN, "/speed/upload", {}, 5)
        assert len(Redirector.seen) == 2
        assert Target.seen == []  # the token never went anywhere else
    finally:
        for s in (target, redirector):
            s.shutdown()
            s.server_close()


# -- the real CLI as a subprocess: what it prints, what ps shows ------------------------------------


@pytest.fixture
def cli_server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    port = free_port()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hostcheck.cli", "probe-server", "--token-file", str(token_file),
         "--bind", "127.0.0.1", "--port", str(port), "--state-dir", str(tmp_path / "state"),
         "--request-deadline", "2", "--summary-interval", "0.5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={k: v for k, v in os.environ.items() if k != "HOSTCHECK_PROBE_TOKEN"},
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(proc.stderr.read() if proc.stderr else "exited") from None
                time.sleep(0.1)
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def _reset(sock: socket.socket) -> None:
    # SO_LINGER 0: close() sends RST, the rudest way a client can vanish.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_client_vanishing_mid_request_logs_no_address_or_traceback(
    cli_server: tuple[subprocess.Popen[str], int],
) -> None:
    proc, port = cli_server
    cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    assert TOKEN.encode() not in cmdline  # ps shows nothing secret
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    # 1: TLS handshake abandoned half-way; 2: plain bytes to a TLS port; 3: headers then RST;
    # 4: half a body then RST; 5: a wrong token.
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"\x16\x03\x01\x00\xc8\x01")
    _reset(s)
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET / HTTP/1.1\r\n\r\n")
    time.sleep(0.1)
    _reset(s)
    for payload in (
        f"POST /probe HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n".encode(),
        f"POST /probe HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Content-Length: 400\r\n\r\n{\"ports\": [".encode(),
    ):
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        t = ctx.wrap_socket(raw)
        t.sendall(payload)
        time.sleep(0.2)
        _reset(t)
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    t = ctx.wrap_socket(raw)
    t.sendall(b"POST /probe HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong-token-0123456789\r\n"
              b"Content-Length: 2\r\n\r\n{}")
    assert b" 401 " in t.recv(4096)
    t.close()
    time.sleep(1.2)  # one summary interval
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert "fingerprint" in err and "SHA256:" in err
    assert "1 failed authentications" in err
    for leak in ("127.0.0.1", "Traceback", TOKEN, str(port) + ")"):
        assert leak not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert all(" " in line for line in lines)  # log lines only, no stray dumps


def test_token_on_the_command_line_is_refused() -> None:
    from tests.helpers import hostcheck

    proc = hostcheck("probe-server", "--token", TOKEN, "--port", str(free_port()))
    assert proc.returncode == 2
    assert "HOSTCHECK_PROBE_TOKEN" in proc.stderr and "Traceback" not in proc.stderr
    proc = hostcheck("audit", "--offline", "--probe", "https://127.0.0.1:1", "--token", TOKEN)
    assert proc.returncode == 2 and "--token-file" in proc.stderr


def test_token_from_the_environment(tmp_path: Path) -> None:
    from tests.helpers import hostcheck

    proc = hostcheck("probe-server", "--port", "0", env={"HOSTCHECK_PROBE_TOKEN": "short"})
    assert proc.returncode == 2 and "HOSTCHECK_PROBE_TOKEN" in proc.stderr
    os.mkfifo(tmp_path / "fifo")  # opening a FIFO with no writer would block a naive reader
    (tmp_path / "dir").mkdir()
    for path in (tmp_path / "fifo", tmp_path / "dir"):
        proc = hostcheck("probe-server", "--token-file", str(path), timeout=20)
        assert proc.returncode == 2 and "--token-file" in proc.stderr


# -- slot filling: many addresses, half-open TLS, while a caller with the token is served -----------


class Occupier:
    """Holds as many connections as the server lets it from each source address and opens a new
    one whenever the server closes one: what a slot-filling attacker does. Each connection sends
    ``opening`` (a slowloris header, the start of a TLS ClientHello) and then nothing."""

    def __init__(self, port: int, sources: list[str], per_source: int, opening: bytes, family: int = socket.AF_INET):
        self.port, self.sources, self.per_source, self.opening, self.family = port, sources, per_source, opening, family
        self.opened = 0
        self.closed_by_server = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="occupier")
        self._socks: dict[socket.socket, str] = {}

    def __enter__(self) -> Occupier:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        for s in self._socks:
            s.close()

    def _open(self, source: str) -> None:
        s = socket.socket(self.family, socket.SOCK_STREAM)
        try:
            s.bind((source, 0))
            s.settimeout(0.5)
            s.connect((("::1" if self.family == socket.AF_INET6 else "127.0.0.1"), self.port))
            s.sendall(self.opening)
            s.setblocking(False)
        except OSError:
            s.close()
            return
        self._socks[s] = source
        self.opened += 1

    def _run(self) -> None:
        import select

        for source in self.sources:
            for _ in range(self.per_source):
                self._open(source)
        while not self._stop.is_set():
            readable, _, _ = select.select(list(self._socks), [], [], 0.02) if self._socks else ([], [], [])
            for s in readable:
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if data:
                    continue
                source = self._socks.pop(s)
                s.close()
                self.closed_by_server += 1
                self._open(source)  # straight back in


def _served(
    url: str, requests: int, fingerprint: str | None = None, before: Any = None, took: list[float] | None = None
) -> int:
    """How many of ``requests`` authenticated probe requests got their answer (each a fresh
    connection, as the audit makes them; ``before()`` is called before each, and each one's
    seconds are appended to ``took``)."""
    served = 0
    payload = {"ports": [{"port": free_port(), "proto": "tcp", "nonce": NONCE}]}
    for _ in range(requests):
        if before is not None:
            before()
        start = time.monotonic()
        try:
            answer = post_json(url, TOKEN, "/probe", payload, 5, fingerprint)
        except ServerError:
            continue
        finally:
            if took is not None:
                took.append(time.monotonic() - start)
        served += answer["results"][0]["detail"] == "refused"
    return served


def _wait(predicate: object, limit: float = 5.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize(
    "sources, held",
    [
        # Eight addresses in eight /24s, eight connections each (the per-address cap): together
        # they reach the overall cap of 64.
        ([f"127.{n}.0.1" for n in range(1, 9)], min(8 * 8, 64)),
        # Eight addresses in one /24: the per-prefix cap (16) holds them to 16 slots.
        ([f"127.1.0.{n}" for n in range(1, 9)], 16),
    ],
    ids=["eight-prefixes", "one-prefix"],
)
def test_slot_filling_does_not_keep_the_token_holder_out(sources: list[str], held: int) -> None:
    limits = Limits(rate_per_min=100, max_connections=64, max_connections_per_source=8,
                    max_connections_per_prefix=16, shed_after_s=0.3)
    srv = start_in_thread(limits)
    port = int(srv.url.rsplit(":", 1)[1])
    slowloris = b"POST /probe HTTP/1.1\r\nHost: x\r\n"
    try:
        with Occupier(port, sources, per_source=12, opening=slowloris) as attack:
            assert _wait(lambda: srv.call(lambda: srv.service.table.slots) == held)
            time.sleep(limits.shed_after_s)  # an attacker holds its slots for the whole deadline
            full = []

            def attack_holds_its_slots() -> None:  # each request meets the attack at full strength
                full.append(_wait(lambda: srv.call(lambda: srv.service.table.slots) == held))

            served = _served(srv.url, 20, before=attack_holds_its_slots)
            assert _wait(lambda: attack.opened >= len(sources) * 8)
        print(f"served {served} of 20 while {held} slots were held")
        assert full == [True] * 20
        assert served == 20
        if held == 64:  # every slot was the attacker's: each request displaced one
            assert srv.service.stats["connections_shed"] >= 20
    finally:
        srv.stop()


def _served_from(port: int, source: str) -> bool:
    """One authenticated probe request from ``source`` (a fresh connection): answered?"""
    body = json.dumps({"ports": [{"port": free_port(), "proto": "tcp", "nonce": NONCE}]})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5, source_address=(source, 0))
    try:
        conn.request("POST", "/probe", body=body, headers={"Authorization": f"Bearer {TOKEN}",
                                                          "Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status == 200 and json.loads(resp.read())["results"][0]["detail"] == "refused"
    except (OSError, http.client.HTTPException, ValueError):
        return False
    finally:
        conn.close()


@pytest.mark.parametrize("addresses", [8, 2], ids=["eight-addresses", "two-addresses"])
def test_an_owner_who_shares_the_attackers_prefix_is_served(addresses: int) -> None:
    """Behind carrier-grade NAT an owner shares its public /24 with strangers. An attacker
    holds the /24's slots (16) from a few of its addresses, reopening whatever the server
    closes; the owner (another address of the same /24) and a caller from another /24 take
    turns, in one run: each request of either is served."""
    limits = Limits(rate_per_min=100, max_connections=64, max_connections_per_source=8,
                    max_connections_per_prefix=16, shed_after_s=0.3)
    srv = start_in_thread(limits)
    port = int(srv.url.rsplit(":", 1)[1])
    table = srv.service.table
    callers = {"same /24": "127.1.0.200", "other /24": "127.2.0.200"}
    served = dict.fromkeys(callers, 0)
    rounds = 10
    try:
        with Occupier(port, [f"127.1.0.{n}" for n in range(1, addresses + 1)], per_source=12,
                      opening=b"POST /probe HTTP/1.1\r\nHost: x\r\n"):
            assert _wait(lambda: srv.call(lambda: table.by_prefix.get("127.1.0.0/24")) == 16)
            time.sleep(limits.shed_after_s)  # an attacker holds its slots for the whole deadline
            for _ in range(rounds):
                for name, source in callers.items():
                    # each request meets the attack at full strength: the /24 full again
                    assert _wait(lambda: srv.call(lambda: table.by_prefix.get("127.1.0.0/24")) == 16)
                    served[name] += _served_from(port, source)
        print(f"{addresses} attacker addresses holding the /24's 16 slots: served "
              + ", ".join(f"{name} {n} of {rounds}" for name, n in served.items()))
        assert served == dict.fromkeys(callers, rounds)
    finally:
        srv.stop()


WRONG_TOKEN = "wrong-token-0123456789abcdef"


def _tokenless(authorization: str = "") -> bytes:
    """A complete probe request whose head carries ``authorization`` (a header line, or none)."""
    return (
        f"POST /probe HTTP/1.1\r\nHost: x\r\n{authorization}Content-Type: application/json\r\n"
        "Content-Length: 2\r\n\r\n{}"
    ).encode()


WITHOUT_THE_TOKEN = {
    # Blank lines only: the parser skips them before a request line, so they are no request.
    "only-crlf": b"\r\n" * 64,
    "no-token": _tokenless(),
    "wrong-token": _tokenless(f"Authorization: Bearer {WRONG_TOKEN}\r\n"),
    "pipelined-wrong-tokens": _tokenless(f"Authorization: Bearer {WRONG_TOKEN}\r\n") * 20,
}


TOKENLESS_REQUESTS = {k: v for k, v in WITHOUT_THE_TOKEN.items() if v.strip()}


@pytest.mark.parametrize("request_bytes", list(TOKENLESS_REQUESTS.values()), ids=list(TOKENLESS_REQUESTS))
def test_a_request_without_the_token_is_answered_and_its_connection_closed(request_bytes: bytes) -> None:
    """A complete request without the token (none, a wrong one, twenty pipelined wrong ones)
    gets one 401 and its connection is closed at once, far inside the request deadline: it
    never keeps its slot, and the pipelined rest is never looked at."""
    limits = Limits(request_deadline_s=10)
    srv = start_in_thread(limits)
    port = int(srv.url.rsplit(":", 1)[1])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            start = time.monotonic()
            s.sendall(request_bytes)
            s.settimeout(limits.request_deadline_s)
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
            elapsed = time.monotonic() - start
        assert answer.startswith(b"HTTP/1.1 401 ") and answer.count(b"HTTP/1.1 ") == 1, answer[:200]
        assert elapsed < 1.0, elapsed
        assert srv.service.stats["failed_authentications"] == 1
        assert _wait(lambda: srv.call(lambda: srv.service.table.slots) == 0, 1)
    finally:
        srv.stop()


def test_blank_lines_are_no_request() -> None:
    """Two connections fill the cap and keep sending blank lines (which the parser skips before
    a request line): they stay unauthenticated, so once they have idled ``shed_after_s`` a
    caller with the token takes the older one's slot and is served."""
    limits = Limits(max_connections=2, max_connections_per_source=2, shed_after_s=0.3)
    srv = start_in_thread(limits)
    port = int(srv.url.rsplit(":", 1)[1])
    table = srv.service.table
    blank = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(2)]
    try:
        for _ in range(5):  # past shed_after_s, sending all along
            for s in blank:
                s.sendall(b"\r\n" * 16)
            time.sleep(0.1)
        assert srv.call(lambda: (table.slots, len(table._unauthenticated))) == (2, 2)
        assert _served(srv.url, 1) == 1
        assert _recv_until_closed(blank[0], 1.0) < 1.0
        assert srv.service.stats["connections_shed"] == 1 and srv.service.stats["connections_over_cap"] == 0
    finally:
        for s in blank:
            s.close()
        srv.stop()


@pytest.mark.parametrize("opening", list(WITHOUT_THE_TOKEN.values()), ids=list(WITHOUT_THE_TOKEN))
def test_requests_without_the_token_never_keep_the_token_holder_out(opening: bytes) -> None:
    """Eight addresses in eight /24s, twelve connections each, reopened as soon as the server
    closes one, each sending only blank lines or complete requests without the token, against
    the shipped caps (64 overall, 8 per address): no attacker's slot ever counts as
    authenticated, and every request of the token holder is served, most at once and each
    within 4 s: its connect may wait out a SYN retransmission or two (1 s, then 2 s more) when
    the flood overflows the kernel's listen queue, which no slot rule can prevent."""
    limits = Limits(rate_per_min=100)
    assert (limits.max_connections, limits.max_connections_per_source) == (64, 8)
    srv = start_in_thread(limits)
    port = int(srv.url.rsplit(":", 1)[1])
    table, stats = srv.service.table, srv.service.stats
    sources = [f"127.{n}.0.1" for n in range(1, 9)]
    idle = opening.strip() == b""
    authenticated_slots = lambda: srv.call(lambda: table.slots - len(table._unauthenticated))  # noqa: E731
    try:
        with Occupier(port, sources, per_source=12, opening=opening) as attack:
            assert _wait(lambda: attack.opened >= len(sources) * 8)
            if idle:  # it holds every slot, and no blank line makes one unsheddable
                assert _wait(lambda: srv.call(lambda: table.slots) == 64)
                time.sleep(limits.shed_after_s)
            checks: list[bool] = []
            refused = [stats["failed_authentications"]]

            def attack_at_full_strength() -> None:
                # Between the token holder's requests only the attacker holds slots, none of
                # them authenticated; a tokenless attacker is being answered 401 meanwhile.
                checks.append(_wait(lambda: authenticated_slots() == 0))
                if idle:
                    checks.append(_wait(lambda: srv.call(lambda: table.slots) == 64))
                else:
                    checks.append(_wait(lambda: stats["failed_authentications"] > refused[-1]))
                    refused.append(stats["failed_authentications"])

            took: list[float] = []
            served = _served(srv.url, 20, before=attack_at_full_strength, took=took)
        print(f"served {served} of 20, slowest {max(took):.2f} s; attacker opened {attack.opened}; {stats.counts}")
        assert checks == [True] * len(checks) and len(checks) == 40
        assert served == 20 and max(took) < 4.0 and sorted(took)[10] < 0.5
        if idle:
            assert stats["connections_shed"] >= 20 and stats["failed_authentications"] == 0
        else:  # each connection was answered once and closed, the pipelined rest never ran
            assert attack.closed_by_server > 64 and stats["failed_authentications"] <= attack.opened
    finally:
        srv.stop()


def test_slot_filling_over_ipv6_loopback() -> None:
    """On ::1 (the one IPv6 address here) the per-address cap and the /56 bucket hold an IPv6
    attacker to its share; the token holder, over IPv4 to the same server, is served. (The
    prefix arithmetic for addresses rotating inside a /64 is tested on its own above: only one
    IPv6 address exists here.)"""
    limits = Limits(rate_per_min=100, max_connections=12, max_connections_per_source=8)
    srv = start_in_thread(limits, bind=["127.0.0.1", "::1"])
    port = int(srv.url.rsplit(":", 1)[1])
    try:
        with Occupier(port, ["::1"], per_source=20, opening=b"GET / HTTP/1.1\r\n", family=socket.AF_INET6) as attack:
            assert _wait(lambda: srv.call(lambda: srv.service.table.slots) == 8)
            assert srv.call(lambda: dict(srv.service.table.by_prefix)) == {"::/56": 8}
            served = _served(srv.url, 10)
            assert _wait(lambda: attack.closed_by_server >= 20 - 8)  # it kept trying past its share
        assert served == 10
    finally:
        srv.stop()


def _cli_tls_server(tmp_path: Path, nofile: int, *args: str) -> tuple[subprocess.Popen[str], int, str]:
    """The real ``hostcheck probe-server`` over TLS with RLIMIT_NOFILE set to ``nofile`` (soft
    and hard, so it cannot raise it), its port and its certificate's fingerprint."""
    import resource

    state = tmp_path / "state"
    cert, _ = tls.ensure_self_signed(state)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    port = free_port()

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen(
        [sys.executable, "-m", "hostcheck.cli", "probe-server", "--token-file", str(token_file),
         "--bind", "127.0.0.1", "--port", str(port), "--state-dir", str(state), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, preexec_fn=limit_files,
        env={k: v for k, v in os.environ.items() if k != "HOSTCHECK_PROBE_TOKEN"},
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(proc.stderr.read() if proc.stderr else "exited")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port, tls.fingerprint_of_pem_file(cert)
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("probe server did not listen in 20 s")


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=5)
    return err


def test_unfinished_tls_handshakes_from_one_address(tmp_path: Path) -> None:
    """160 connections from one address that start a TLS handshake and never finish it, each
    reopened as soon as the server drops it, against a server whose open-files limit is 64:
    the server holds at most 8 of them (the per-address cap, counted from accept), never runs
    out of descriptors, and the token holder's TLS requests are all served."""
    nofile = 128
    proc, port, fingerprint = _cli_tls_server(
        tmp_path, nofile, "--max-ports", "2", "--summary-interval", "0.5", "--handshake-deadline", "2"
    )
    url = f"https://127.0.0.1:{port}"
    fds: list[int] = []
    try:
        hello = b"\x16\x03\x01\x00\xc8\x01"  # a ClientHello's first bytes, and no more
        with Occupier(port, ["127.3.0.1"], per_source=160, opening=hello) as attack:
            assert _wait(lambda: attack.opened >= 160, 10)
            fds.append(len(os.listdir(f"/proc/{proc.pid}/fd")))
            served = _served(url, 10, fingerprint)
            fds.append(len(os.listdir(f"/proc/{proc.pid}/fd")))
        time.sleep(0.8)  # one summary interval
    finally:
        err = _stop(proc)
    print(f"served {served} of 10; server descriptors {fds} (limit {nofile})")
    assert served == 10, err
    assert max(fds) < nofile - 8
    assert "out of file descriptors" not in err and "Traceback" not in err
    # The open-files limit was taken into account: room for the limit less 16 for the server
    # itself, two accept bursts of 32 and 4 probes of 2 ports.
    assert f"serving at most {nofile - 16 - 2 * 32 - 4 * 2} (not 64)" in err
    # Every connection past the address's 8 was closed at accept: refused while the 8 were
    # fresh, or by displacing one of them once it had idled.
    turned_away = sum(int(m) for m in re.findall(r"(\d+) connections (?:shed|over cap)", err))
    assert turned_away >= 160 - 8, err


def test_running_out_of_files_is_a_warning_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    """accept() failing with EMFILE (the process's descriptors used up by something else) is
    logged at WARNING with the count, once, not once per failure."""
    import resource

    caplog.set_level("WARNING", logger="hostcheck.probe_server")
    srv = start_in_thread(Limits(request_deadline_s=2))
    port = int(srv.url.rsplit(":", 1)[1])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    fillers: list[int] = []
    clients: list[socket.socket] = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 16, hard))
        clients = [socket.socket() for _ in range(3)]  # made first: connecting needs no new one
        try:
            while True:
                fillers.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass
        for c in clients:  # queued by the kernel; the server has no descriptor to accept them
            c.settimeout(2)
            c.connect(("127.0.0.1", port))
        # asyncio retries a failed accept once a second: let it fail twice.
        assert _wait(lambda: srv.service.stats["accepts_out_of_files"] >= 2, 5)
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        assert _wait(lambda: srv.service.stats["accepts_out_of_files"] >= 2, 1)
        lines = [r for r in caplog.records if "out of file descriptors" in r.getMessage()]
        assert len(lines) == 1 and lines[0].levelname == "WARNING"
        assert "1 connection(s) could not be accepted" in lines[0].getMessage()
        srv.call(srv.server.log_summary)  # the summary reports the rest, with its count
        later = [r.getMessage() for r in caplog.records if "out of file descriptors" in r.getMessage()]
        count = srv.service.stats["accepts_out_of_files"]
        assert len(later) == 2 and f"({count} in all)" in later[1]
    finally:
        for c in clients:
            c.close()
        srv.stop()


# -- bodies, the byte budget, secrets on disk, the client over plain HTTP ----------------------------


@pytest.fixture
def plain_server() -> Iterator[RunningThread]:
    srv = start_in_thread(Limits(rate_per_min=100, request_deadline_s=5, speed_budget_bytes_per_hour=3_000_000))
    try:
        yield srv
    finally:
        srv.stop()


def _raw(url: str, head: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
    """One request as raw bytes on a socket: (status, headers, body)."""
    host, port = url.rsplit("//", 1)[1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(head.encode() + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    header, _, rest = data.partition(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), fields, rest


def test_compressed_bodies_are_refused_and_never_counted(plain_server: RunningThread) -> None:
    """A corrupt gzip body is a 400 (it was a 500); a valid one, ten million zeros in about ten
    kilobytes, is refused too, before a byte of it is read: the speed test counts what crossed
    the wire and the server inflates nothing."""
    import gzip

    auth = f"Authorization: Bearer {TOKEN}\r\nHost: x\r\nContent-Encoding: gzip\r\n"
    corrupt = gzip.compress(b'{"ports": []}')[:-6] + b"garbage"
    status, _, body = _raw(plain_server.url, "POST /probe HTTP/1.1\r\n" + auth, corrupt)
    assert status == 400 and b"compressed" in body
    bomb = gzip.compress(bytes(10_000_000))
    assert len(bomb) < 20_000
    status, _, body = _raw(
        plain_server.url, "POST /speed/upload?seconds=2&bytes=100000000 HTTP/1.1\r\n" + auth, bomb
    )
    assert status == 400 and b"compressed" in body
    stats = plain_server.service.stats
    assert stats["speed_bytes_received"] == 0 and stats["speed_streams"] == 0
    assert plain_server.call(lambda: plain_server.service.budget.spent()) == 0
    # Uncompressed, the same route counts what arrived.
    status, _, body = _raw(
        plain_server.url,
        f"POST /speed/upload?seconds=2&bytes=100000 HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\nHost: x\r\n",
        bytes(50_000),
    )
    assert status == 200 and json.loads(body)["received"] == 50_000


def test_byte_budget_per_token(plain_server: RunningThread) -> None:
    """Budget 3 MB an hour: 2 MB, then what is left (1 MB), then 429 with Retry-After."""
    import http.client

    budget, ask = 3_000_000, 2_000_000
    host, port = plain_server.url.rsplit("//", 1)[1].rsplit(":", 1)

    def download() -> http.client.HTTPResponse:
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", f"/speed/download?seconds=5&bytes={ask}", headers={"Authorization": f"Bearer {TOKEN}"})
        return conn.getresponse()

    got = []
    for _ in range(2):
        resp = download()
        assert resp.status == 200
        got.append(len(resp.read()))
    assert got == [ask, budget - ask]
    resp = download()
    assert resp.status == 429 and b"budget" in resp.read()
    assert 3500 <= int(resp.headers["Retry-After"]) <= 3600
    assert plain_server.call(lambda: plain_server.service.budget.spent()) == budget


def test_secrets_open_to_others_are_refused(tmp_path: Path) -> None:
    from tests.helpers import hostcheck

    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o644)
    proc = hostcheck("probe-server", "--token-file", str(token_file), "--port", str(free_port()), timeout=30)
    assert proc.returncode == 2 and "mode 0644 lets group and others" in proc.stderr, proc.stderr
    assert f"chmod 600 {token_file}" in proc.stderr
    token_file.chmod(0o620)  # the client's copy is the same secret
    proc = hostcheck("speedtest", "--probe", "https://127.0.0.1:1", "--token-file", str(token_file), timeout=30)
    assert proc.returncode == 2 and "lets group read or change it" in proc.stderr, proc.stderr
    token_file.chmod(0o600)
    os.chown(token_file, 4242, 4242)  # someone else's file, however private
    proc = hostcheck("probe-server", "--token-file", str(token_file), "--port", str(free_port()), timeout=30)
    assert proc.returncode == 2 and "owned by uid 4242" in proc.stderr
    os.chown(token_file, os.geteuid(), os.getegid())

    state = tmp_path / "state"
    cert, key = tls.ensure_self_signed(state)
    state.chmod(0o755)
    proc = hostcheck("probe-server", "--token-file", str(token_file), "--state-dir", str(state),
                     "--port", str(free_port()), timeout=30)
    assert proc.returncode == 2 and f"chmod 700 {state}" in proc.stderr, proc.stderr
    state.chmod(0o700)
    key.chmod(0o640)
    proc = hostcheck("probe-server", "--token-file", str(token_file), "--tls-cert", str(cert),
                     "--tls-key", str(key), "--port", str(free_port()), timeout=30)
    assert proc.returncode == 2 and f"chmod 600 {key}" in proc.stderr, proc.stderr
    from hostcheck.errors import PrivateFileError

    with pytest.raises(PrivateFileError):
        tls.server_context(cert, key)


def test_client_refuses_to_send_the_token_over_plain_http(tmp_path: Path, plain_server: RunningThread) -> None:
    """Without --insecure-http an http:// URL is refused before any connection is made; with
    it, a warning comes first and the request goes."""
    from tests.helpers import hostcheck

    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    with socket.socket() as listener:  # would see any connection the client made
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(0.2)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        for argv in (
            ["speedtest", "--probe", url],
            ["audit", "--probe", url, "--probe-port", "40000"],
        ):
            proc = hostcheck(*argv, "--token-file", str(token_file), timeout=30)
            assert proc.returncode == 2, proc.stderr
            assert "--insecure-http" in proc.stderr and "in clear" in proc.stderr
        with pytest.raises(TimeoutError):
            listener.accept()
    proc = hostcheck("speedtest", "--probe", plain_server.url, "--token-file", str(token_file),
                     "--insecure-http", "--seconds", "3", "--max-mb", "2", "--streams", "1", timeout=60)
    assert proc.returncode in (0, 3), proc.stderr
    assert "warning: --insecure-http" in proc.stderr
    assert plain_server.service.stats["speed_streams"] >= 1


@pytest.mark.parametrize(
    "extra",
    ["".join(f"X-Pad-{i}: {'a' * 100}\r\n" for i in range(40)), f"X-Big: {'a' * 5000}\r\n"],
    ids=["40-header-lines", "5000-byte-header"],
)
def test_huge_headers_are_refused(plain_server: RunningThread, extra: str) -> None:
    """Headers are bounded per line (4 KiB) and in count (32): more is a 4xx, not memory."""
    status, _, _ = _raw(plain_server.url, f"POST /probe HTTP/1.1\r\nHost: x\r\n{extra}", b"{}")
    assert 400 <= status < 500
