"""The speed test: its arithmetic, NET-1070 per platform, and the client against a real
server on loopback (caps hold; a silent, slow or misbehaving server is unknown with a reason).

Rates through shaped links are proven in the NAT lab (tests/lanes/natlab/test_bandwidth.py).
"""

from __future__ import annotations

import copy
import http.server
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcheck.checks.network import bandwidth_needs
from hostcheck.errors import SpeedParamError
from hostcheck.netprobe.speed_protocol import Received, arrived, latency, parse_params, steady_rate
from hostcheck.netprobe.speedtest import Plan, Stream, _direction, delivered, received, run_speedtest
from hostcheck.probeserver.limits import MAX_SPEED_BUDGET, Limits
from tests.helpers import SNAPSHOTS, audit_json, policy_result
from tests.probe_fixtures import TOKEN, RunningThread, free_port, start_in_thread

# -- arithmetic ---------------------------------------------------------------------------------


def test_steady_rate_discards_the_warm_up() -> None:
    # Two streams read at the same instants; the second begins at 0.5 s, and both move
    # 5 MB in a burst before settling at 1 MB/s each (a shaper's bucket).
    snaps = [
        (0.0, (10, 0)),
        (0.5, (2_000_000, 10)),
        (1.5, (5_000_000, 5_000_000)),
        (2.5, (6_000_000, 6_000_000)),
        (3.5, (7_000_000, 7_000_000)),
    ]
    # The first stream begins at 0 s; a 1 s warm-up puts the window at 1.5-3.5 s.
    assert steady_rate(snaps, warmup_s=1.0) == (16.0, 2.0, 4_000_000)


def test_steady_rate_needs_data() -> None:
    assert steady_rate([], 1.0) is None
    assert steady_rate([(0.0, (10,))], 1.0) is None
    assert steady_rate([(0.0, (0, 0)), (5.0, (0, 10))], 1.0) is None  # one snapshot after the warm-up


MSS = 1000


def test_arrived_counts_what_waits_behind_a_lost_segment() -> None:
    # 100 kB/s in 1000-byte segments. The one after 1.0 s is lost and resent by 1.2 s: the
    # in-sequence count stands still meanwhile, then jumps; what arrived does not. By 3.0 s
    # one segment has arrived twice (a spurious resend), which must not count as held. At the
    # last snapshot a hole is open again: what arrived behind it counts all the same.
    stream = [
        (0.0, Received(0, 0, MSS)),
        (1.0, Received(100_000, 100, MSS)),
        (1.1, Received(100_000, 109, MSS)),
        (1.2, Received(120_000, 120, MSS)),
        (3.0, Received(300_000, 301, MSS)),
        (5.0, Received(490_000, 501, MSS)),
    ]
    expected = [0, 100_000, 109_000, 120_000, 300_000, 500_000]
    assert [counts for _, counts in arrived([(t, (got,)) for t, got in stream])] == [(n,) for n in expected]
    # Streams are reconstructed each on its own: a healthy one beside it is left as it is.
    healthy = [Received(n, n // MSS, MSS) for n in (0, 100_000, 110_000, 120_000, 300_000, 500_000)]
    both = arrived([(t, (got, other)) for (t, got), other in zip(stream, healthy, strict=True)])
    assert [counts for _, counts in both] == [(n, m.in_order) for n, m in zip(expected, healthy, strict=True)]


def test_arrived_keeps_in_order_counts_where_segments_are_not_counted_one_by_one() -> None:
    # A NIC that merges segments and reports one: fewer segments than the bytes need.
    snaps = [(0.0, (Received(0, 0, MSS),)), (1.0, (Received(100_000, 40, MSS),)), (2.0, (Received(200_000, 80, MSS),))]
    assert [counts for _, counts in arrived(snaps)] == [(0,), (100_000,), (200_000,)]
    # A kernel without the segment count (MSS 0) likewise.
    old = [(0.0, (Received(0, 0, 0),)), (1.0, (Received(100_000, 0, 0),))]
    assert [counts for _, counts in arrived(old)] == [(0,), (100_000,)]
    assert arrived([]) == []


def test_tcp_info_counts_what_the_kernel_delivered() -> None:
    """The counters the rate is built on, read from real sockets: bytes acknowledged by the
    peer on one side equal bytes received on the other, whatever the applications read."""
    lsock = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(lsock.getsockname())
    server, _ = lsock.accept()
    try:
        client.sendall(b"x" * 100_000)
        deadline = time.monotonic() + 5
        while (got := received(server)) is not None and got.in_order != 100_000 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # the last ACK's way back
        # Linux counts the SYN as one acknowledged byte; no data is counted twice or left out.
        assert got is not None and (got.in_order, delivered(client)) == (100_000, 100_001)
        # Every byte came in a counted segment of at most the MSS seen.
        assert got.mss > 0 and got.segments * got.mss >= 100_000
    finally:
        client.close()
        server.close()
        lsock.close()


def test_latency_and_jitter() -> None:
    assert latency([0.010, 0.012, 0.011]) == pytest.approx((11.0, 1.5))
    assert latency([]) is None


@pytest.mark.parametrize(
    "query, message",
    [
        ({}, "required"),
        ({"seconds": "nan", "bytes": "1"}, "seconds"),
        ({"seconds": "1", "bytes": "0"}, "bytes"),
        ({"seconds": "99", "bytes": "1"}, "seconds"),
        ({"seconds": "1", "bytes": str(10**12)}, "bytes"),
    ],
)
def test_speed_params_are_bounded(query: dict[str, str], message: str) -> None:
    with pytest.raises(SpeedParamError, match=message):
        parse_params(query, 15.0, 1024**3)


def test_plan_bounds() -> None:
    assert Plan(10, 1_000_000_000, 4).stream_bytes == 125_000_000
    for bad in ((1, 10**9, 4), (10, 10, 4), (10, 10**9, 0), (100, 10**9, 4)):
        with pytest.raises(ValueError):
            Plan(*bad)


@pytest.mark.parametrize(
    "threshold, vram, expected",
    [
        ("down 100 / up 75 Mbps", None, (100, 75)),
        ("2.6 Mbps per GiB of VRAM each way, floor 100, cap 500", 24.0, (100, 100)),  # 62 -> floor
        ("2.6 Mbps per GiB of VRAM each way, floor 100, cap 500", 80.0, (208, 208)),
        ("2.6 Mbps per GiB of VRAM each way, floor 100, cap 500", 640.0, (500, 500)),  # 1664 -> cap
    ],
)
def test_bandwidth_needs(threshold: str, vram: float | None, expected: tuple[float, float]) -> None:
    needs = bandwidth_needs(threshold, vram)
    assert needs is not None and (round(needs[0]), round(needs[1])) == expected


def test_bandwidth_threshold_is_read_strictly() -> None:
    with pytest.raises(ValueError):
        bandwidth_needs("fast enough", None)
    assert bandwidth_needs("2.6 Mbps per GiB of VRAM each way, floor 100, cap 500", None) is None


# -- NET-1070 per platform, on a recorded machine (dedicated RTX 4090 box, 24 GiB VRAM) -----------


def with_bandwidth(
    tmp_path: Path, down: float | None, up: float | None, vram_mib: int | None = None, gpus: int = 1
) -> str:
    facts = json.loads((SNAPSHOTS / "dedicated-4090.json").read_text())
    facts = copy.deepcopy(facts)
    facts["network"]["bandwidth"] = {
        "measured": down is not None and up is not None,
        "source": "probe-server",
        "server": "https://probe.example:8470",
        "download_mbps": down,
        "upload_mbps": up,
        "latency_ms": 12.0,
        "jitter_ms": 1.0,
        "streams": 4,
        "bytes_down": 10**8,
        "bytes_up": 10**8,
        "duration_s": 9.6,
        "caps": {"seconds": 10, "bytes": 10**9},
        "reason": None if down is not None and up is not None else "upload: timed out",
    }
    if vram_mib is not None:
        facts["gpu"]["devices"] = [
            {**facts["gpu"]["devices"][0], "index": i, "vram_total_mib": vram_mib} for i in range(gpus)
        ]
    path = tmp_path / f"facts-{down}-{up}-{vram_mib}-{gpus}.json"
    path.write_text(json.dumps(facts))
    return str(path)


def net1070(report: dict[str, Any], policy: str) -> dict[str, Any]:
    (finding,) = [f for f in policy_result(report, policy)["findings"] if f["id"] == "NET-1070"]
    return finding


@pytest.mark.parametrize(
    "down, up, expected",
    [
        # (vast listing, vast verified with 24 GiB -> floor 100, salad 15/15, io.net 100/75);
        # NET-1070 is a risk in every policy, so a shortfall is "warn", not a blocker
        (600.0, 300.0, {"vast": "pass", "vast-verified": "pass", "salad": "pass", "ionet": "pass"}),
        (120.0, 80.0, {"vast": "pass", "vast-verified": "warn", "salad": "pass", "ionet": "pass"}),
        (120.0, 50.0, {"vast": "pass", "vast-verified": "warn", "salad": "pass", "ionet": "warn"}),
        (50.0, 12.0, {"vast": "pass", "vast-verified": "warn", "salad": "warn", "ionet": "warn"}),
        (50.0, 9.0, {"vast": "warn", "vast-verified": "warn", "salad": "warn", "ionet": "warn"}),
        (50.0, None, {"vast": "unknown", "vast-verified": "warn", "salad": "unknown", "ionet": "warn"}),
    ],
)
def test_net1070_verdicts_follow_the_measured_bandwidth(
    tmp_path: Path, down: float, up: float | None, expected: dict[str, str]
) -> None:
    _, report = audit_json("--facts", with_bandwidth(tmp_path, down, up), *[a for p in expected for a in ("-p", p)])
    got = {p: net1070(report, p)["status"] for p in expected}
    assert got == expected
    if expected["ionet"] == "warn":
        assert policy_result(report, "ionet")["verdict"] == "feasible with risks"


def test_vast_verified_scales_with_vram(tmp_path: Path) -> None:
    """Four 80 GiB cards: 2.6 x 320 = 832 -> capped at 500 Mbps each way."""
    _, report = audit_json("--facts", with_bandwidth(tmp_path, 480.0, 490.0, 81920, 4), "-p", "vast-verified")
    finding = net1070(report, "vast-verified")
    assert finding["status"] == "warn" and "cap 500: 500 Mbps each way" in finding["detail"]
    _, report = audit_json("--facts", with_bandwidth(tmp_path, 520.0, 505.0, 81920, 4), "-p", "vast-verified")
    assert net1070(report, "vast-verified")["status"] == "pass"
    # One 80 GiB card: 2.6 x 80 = 208 Mbps each way.
    _, report = audit_json("--facts", with_bandwidth(tmp_path, 250.0, 200.0, 81920, 1), "-p", "vast-verified")
    finding = net1070(report, "vast-verified")
    assert finding["status"] == "warn" and "up 200 < 208" in finding["detail"]


def test_not_run_is_unknown_and_names_the_command() -> None:
    _, report = audit_json("--facts", str(SNAPSHOTS / "dedicated-4090.json"), "-p", "ionet")
    finding = net1070(report, "ionet")
    assert finding["status"] == "unknown"
    assert (
        "no speed test was run" in finding["detail"] and "hostcheck audit --speedtest --probe URL" in finding["detail"]
    )


# -- the client against a real server on loopback ------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[RunningThread]:
    # Loopback moves several GB in the four-second test; the hourly budget (its own test is in
    # test_probe_server.py) must not turn the later tests of this module into 429s.
    limits = Limits(
        rate_per_min=200, request_deadline_s=3, speed_max_seconds=10, speed_budget_bytes_per_hour=MAX_SPEED_BUDGET
    )
    srv = start_in_thread(limits)
    try:
        yield srv
    finally:
        srv.stop()


def test_loopback_measures_both_directions_within_the_caps(server: RunningThread) -> None:
    start = time.monotonic()
    out = run_speedtest(server.url, TOKEN, seconds=4, max_bytes=20_000_000_000, streams=2)
    took = time.monotonic() - start
    assert out["measured"] is True, out["reason"]
    assert out["download_mbps"] > 50 and out["upload_mbps"] > 50
    assert out["latency_ms"] < 50 and out["jitter_ms"] >= 0
    assert took < 4 + 1.5 and out["duration_s"] <= 4 + 1.0
    assert out["caps"] == {"seconds": 4, "bytes": 20_000_000_000} and out["streams"] == 2


def test_byte_cap_holds(server: RunningThread) -> None:
    out = run_speedtest(server.url, TOKEN, seconds=4, max_bytes=8_000_000, streams=4)
    assert out["bytes_down"] + out["bytes_up"] <= 8_000_000
    assert out["byte_cap_reached"] is True or out["measured"] is False


def test_wrong_token_is_unknown_with_the_reason(server: RunningThread) -> None:
    out = run_speedtest(server.url, "wrong-token-0123456789abcdef", seconds=3, max_bytes=10**8)
    assert out["measured"] is False and out["download_mbps"] is None and out["upload_mbps"] is None
    assert "HTTP 401" in out["reason"]


def test_speed_endpoint_refuses_bad_requests(server: RunningThread) -> None:
    def get(path: str, token: str = TOKEN) -> tuple[int, str]:
        req = urllib.request.Request(server.url + path, headers={"Authorization": f"Bearer {token}"})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy
        try:
            with opener.open(req, timeout=10) as resp:
                resp.read()
                return int(resp.status), ""
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read(500).decode("utf-8", "replace")

    assert get("/speed/download?seconds=1&bytes=1000", token="nope-nope-nope-nope")[0] == 401
    assert get("/speed/download?seconds=60&bytes=1000")[0] == 400
    assert get("/speed/download?seconds=1&bytes=99999999999")[0] == 400
    status, body = get("/speed/download?seconds=0.5&bytes=1000")
    assert status == 200, (body, server.call(lambda: server.service.stats.counts))


def test_no_server_is_unknown() -> None:
    start = time.monotonic()
    out = run_speedtest(f"http://127.0.0.1:{free_port()}", TOKEN, seconds=3, max_bytes=10**8)
    assert out["measured"] is False and "does not accept connections" in out["reason"]
    assert time.monotonic() - start < 3


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections and reads, never answers."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(32)
    held: list[socket.socket] = []
    stop = threading.Event()

    def run() -> None:
        lsock.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = lsock.accept()
                held.append(conn)
            except OSError:
                continue

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{lsock.getsockname()[1]}"
    finally:
        stop.set()
        t.join(2)
        for c in held:
            c.close()
        lsock.close()


def test_silent_server_is_unknown_within_the_time_cap(silent_server: str) -> None:
    start = time.monotonic()
    out = run_speedtest(silent_server, TOKEN, seconds=4, max_bytes=10**8)
    took = time.monotonic() - start
    assert out["measured"] is False and out["download_mbps"] is None and out["upload_mbps"] is None
    assert "timed out" in out["reason"] or "too little data" in out["reason"], out["reason"]
    assert took < 4 + 1.0, took  # the time cap holds against a server that never answers


class _Misbehaving(http.server.BaseHTTPRequestHandler):
    mode = "trickle"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        try:
            if self.mode == "trickle":
                for _ in range(40):
                    self.wfile.write(b"x" * 100)
                    self.wfile.flush()
                    time.sleep(0.05)
            else:
                self.wfile.write(b"x" * 10)
        except OSError:
            pass

    def do_POST(self) -> None:
        try:  # one chunk, then the answer (as the real server answers on its own clock)
            size = int(self.rfile.readline().strip() or b"0", 16)
            self.rfile.read(size + 2)
        except (OSError, ValueError):
            pass
        body = (
            json.dumps({"received": 10**12, "samples": [[0.0, 0], [1.0, 10**12]]})
            if self.mode == "lie"
            else "<html>not json</html>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize(
    "mode, down_reason, up_reason",
    [
        ("trickle", "too slow or stalled", "upload stream failed"),
        ("lie", "too little data", "inconsistent"),
    ],
)
def test_slow_or_misbehaving_server_is_unknown(mode: str, down_reason: str, up_reason: str) -> None:
    handler = type("H", (_Misbehaving,), {"mode": mode})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        out = run_speedtest(f"http://127.0.0.1:{srv.server_address[1]}", TOKEN, seconds=4, max_bytes=10**8, streams=2)
    finally:
        srv.shutdown()
        srv.server_close()
    assert out["measured"] is False and out["download_mbps"] is None and out["upload_mbps"] is None
    assert down_reason in out["reason"] and up_reason in out["reason"], out["reason"]


# -- the fleet view shows it, the fleet diff compares it ----------------------------------------------


def test_fleet_shows_and_diffs_bandwidth(tmp_path: Path) -> None:
    from tests.helpers import run_cli

    old, new = tmp_path / "old", tmp_path / "new"
    for folder, (down, up) in ((old, (480.0, 120.0)), (new, (470.0, 40.0))):
        folder.mkdir()
        facts = with_bandwidth(tmp_path, down, up)
        proc = run_cli("audit", "--facts", facts, "--format", "json", "-o", str(folder / "box.json"))
        assert proc.returncode in (0, 3, 4), proc.stderr
    proc = run_cli(
        "audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "--format", "json", "-o", str(new / "untested.json")
    )
    assert proc.returncode in (0, 3, 4), proc.stderr
    rows = {r["host"]: r for r in json.loads(run_cli("fleet", str(new), "--format", "json").stdout)["hosts"]}
    assert rows["box"]["bandwidth"] == {"download_mbps": 470.0, "upload_mbps": 40.0}
    assert rows["untested"]["bandwidth"] == {"download_mbps": None, "upload_mbps": None}
    table = run_cli("fleet", str(new), "-p", "ionet", env={"COLUMNS": "200"}).stdout
    assert "down/up Mbps" in table and "470/40" in table
    changes = json.loads(run_cli("fleet", "diff", str(old), str(new), "--format", "json").stdout)
    box = [c for item in changes if item["host"] == "box" for c in item["changes"]]
    # Upload fell from 120 to 40 (download moved 2 %: within a speed test's repeatability).
    assert {"kind": "bandwidth_regressed", "detail": "upload: 120 -> 40 Mbps"} in box
    assert not any("download" in c["detail"] for c in box if c["kind"].startswith("bandwidth"))
    assert any(c.get("check") == "NET-1070" and c["kind"] == "finding_regressed" for c in box)


def test_a_stream_outlives_the_request_deadline_but_not_its_own() -> None:
    """A slow reader keeps a download open past the 1 s request deadline: the speed routes
    get their own (stream length + margin), so the stream completes."""
    import http.client

    srv = start_in_thread(Limits(request_deadline_s=1.0, speed_max_seconds=3))
    try:
        conn = http.client.HTTPConnection("127.0.0.1", int(srv.url.rsplit(":", 1)[1]), timeout=10)
        conn.request("GET", "/speed/download?seconds=3&bytes=16000000", headers={"Authorization": f"Bearer {TOKEN}"})
        resp = conn.getresponse()
        assert resp.status == 200
        start, got = time.monotonic(), 0
        while chunk := resp.read(1_000_000):
            got += len(chunk)
            time.sleep(0.1)
        conn.close()
        assert got == 16_000_000 and time.monotonic() - start > 1.0
        assert srv.service.stats["request_deadlines"] == 0
    finally:
        srv.stop()


def test_upload_needs_at_least_one_answer_from_the_server() -> None:
    """A stream whose answer missed the time cap (a resent request on a lossy link) still
    counts; when no stream's answer arrived, nothing confirms the server's side: unknown."""
    plan = Plan(seconds=6, max_bytes=10**9, streams=2)
    snaps = [(t / 10, (t * 100_000, t * 100_000)) for t in range(40)]
    answered, late = Stream(moved=4_000_000), Stream(moved=4_000_000, unanswered=True)
    out, why = _direction([answered, late], snaps, None, plan, "upload")
    assert why is None and out["mbps"] > 0
    out, why = _direction([late, Stream(moved=4_000_000, unanswered=True)], snaps, None, plan, "upload")
    assert why is not None and "answered no stream" in why and "mbps" not in out
