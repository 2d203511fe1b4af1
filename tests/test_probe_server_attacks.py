"""Attacks on the probe server, one test each, bounded and on loopback only.

Each starts a real server (in a thread, or the real CLI as a subprocess where what it prints
matters) and attacks it the way issue reports described: a wrong-token flood, a slowloris
trickle, a connection flood, a wrong certificate, a redirect to another host, a client that
vanishes mid-request, and a token that would show in ``ps``.
"""

from __future__ import annotations

import http.server
import json
import os
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

import pytest

from hostcheck.netprobe import tls
from hostcheck.netprobe.http_client import ServerError
from hostcheck.netprobe.probe_client import post_json, request_probe
from hostcheck.netprobe.probe_limits import Limits
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
    """300 wrong-token requests (the old server answered the real user 429 after 30)."""
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
    """Six idle connections fill the cap: a seventh displaces the oldest idle one (closed at
    once), never a seventh slot; once they go, service resumes."""
    port = int(server.url.rsplit(":", 1)[1])
    idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(6)]
    try:
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            assert _recv_until_closed(idle[0], 1.0) < 1.0  # the oldest idle one was shed
            assert server.call(lambda: server.service.open_connections) == 6
        assert server.service.stats["connections_shed"] == 1
    finally:
        for s in idle:
            s.close()
    time.sleep(0.3)
    with urllib.request.urlopen(server.url + "/health", timeout=5) as resp:
        assert resp.status == 200


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
