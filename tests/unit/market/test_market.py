"""hostcheck market against a local stand-in for Vast's API (tests/market_standin.py, real
HTTP on 127.0.0.1, answers of the shapes Vast's docs and vast-cli give), the percentile rule
against a hand computation, and the database and trend report on a recorded week."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from hostcheck.market.client import KeyRefused, MarketError, VastClient, parse_base_url
from hostcheck.market.keys import ApiKey
from hostcheck.market.parse import MAX_PRICE, parse_offers
from hostcheck.market.store import APPLICATION_ID, read_rows, record
from hostcheck.market.summary import percentile, quantiles
from hostcheck.market.trend import trend
from tests.helpers import SNAPSHOTS, run_cli
from tests.market_standin import CLIENT_KEY, HOST_KEY, StandIn, offer, serve

BOX_3090 = str(SNAPSHOTS / "rtx3090-vram-in-use.json")


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """An empty home and config folder: no vast-cli key file is found unless a test writes one."""
    (tmp_path / "home").mkdir()
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "home" / ".config")}


def cli(state: StandIn, home: dict[str, str], *args: str, key: str | None = HOST_KEY) -> Any:
    env = {**home, "VAST_URL": state.url}
    saved = os.environ.pop("VAST_API_KEY", None)
    if key is not None:
        env["VAST_API_KEY"] = key
    try:
        return run_cli("market", *args, env=env)
    finally:
        if saved is not None:
            os.environ["VAST_API_KEY"] = saved


def no_key_anywhere(proc: Any, db: Path | None = None) -> None:
    for key in (HOST_KEY, CLIENT_KEY):
        assert key not in proc.stdout and key not in proc.stderr
        assert key[20:44] not in proc.stdout + proc.stderr
        if db is not None and db.exists():
            assert key.encode() not in db.read_bytes()


# --- the percentile rule, by hand --------------------------------------------------------


def test_percentile_is_type_7_by_hand() -> None:
    # [1, 2, 3, 4]: h = (n - 1) p = 3p. p10: h 0.3 -> 1 + 0.3 (2 - 1) = 1.3; p25: h 0.75 -> 1.75;
    # median: h 1.5 -> 2 + 0.5 (3 - 2) = 2.5; p75: h 2.25 -> 3.25; p90: h 2.7 -> 3 + 0.7 = 3.7.
    xs = [1.0, 2.0, 3.0, 4.0]
    assert [percentile(xs, p) for p in (0.1, 0.25, 0.5, 0.75, 0.9)] == pytest.approx([1.3, 1.75, 2.5, 3.25, 3.7])
    # Odd count: the median is the middle value; the ends are the extremes.
    assert percentile([0.1, 0.2, 0.9], 0.5) == 0.2
    assert percentile([0.1, 0.2, 0.9], 0.0) == 0.1 and percentile([0.1, 0.2, 0.9], 1.0) == 0.9
    assert percentile([0.3], 0.9) == 0.3
    assert percentile([], 0.5) is None
    # quantiles() sorts first: the order of the offers does not matter.
    assert quantiles([4.0, 1.0, 3.0, 2.0]) == {"p10": 1.3, "p25": 1.75, "median": 2.5, "p75": 3.25, "p90": 3.7}


def type7(prices: list[float], p: float) -> float:
    """The rule written out again, independently of the code: rank h = (n-1)p, interpolate."""
    xs = sorted(prices)
    h = (len(xs) - 1) * p
    below = xs[int(math.floor(h))]
    above = xs[min(int(math.floor(h)) + 1, len(xs) - 1)]
    return below + (h - math.floor(h)) * (above - below)


# --- the command against the stand-in ----------------------------------------------------------


def test_market_from_a_3090_box(market: StandIn, home: dict[str, str]) -> None:
    proc = cli(market, home, "--facts", BOX_3090, "--price", "0.25", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    listed = [o for o in market.offers if o["gpu_name"] == "RTX 3090"]
    prices = [o["dph_total"] / o["num_gpus"] for o in listed]
    assert s["gpu_name"] == "RTX 3090" and s["num_gpus"] == 1
    assert s["listed"]["all"]["count"] == len(listed) == 40
    for q, p in (("p10", 0.1), ("p25", 0.25), ("median", 0.5), ("p75", 0.75), ("p90", 0.9)):
        assert s["listed"]["all"]["prices"][q] == pytest.approx(type7(prices, p), abs=5e-5)
    verified = [o["dph_total"] for o in listed if o["verification"] == "verified"]
    assert s["listed"]["verified"]["count"] == len(verified) == 30
    assert s["listed"]["verified"]["prices"]["median"] == pytest.approx(type7(verified, 0.5), abs=5e-5)
    # Rented share from Vast's metrics row: (200 + 50) rented of 400 machines.
    assert s["metrics"]["rented_share_pct"] == pytest.approx(100 * 250 / 400, abs=0.05)
    # For earnings: the 30-day utilisation and the newest rented median of the history.
    assert s["occupancy"] == {"pct": 55.0, "from": "Vast's 30-day average utilisation"}
    assert s["price"]["value"] == 0.24
    # Where 0.25 stands, counted by the test.
    assert s["owner"]["cheaper"] == sum(1 for p in prices if p < 0.25 and abs(p - 0.25) >= 5e-5)
    assert s["owner"]["cheaper"] + s["owner"]["same"] + s["owner"]["dearer"] == 40
    # The queries made, as vast-cli makes them, with the key in the header only.
    paths = [(r.method, r.path) for r in market.requests]
    assert paths == [("GET", "/api/v0/metrics/gpu/current/"), ("GET", "/api/v0/metrics/gpu/history/"),
                     ("POST", "/api/v0/bundles/"), ("POST", "/api/v0/bundles/")]
    assert all(r.headers["Authorization"] == f"Bearer {HOST_KEY}" for r in market.requests)
    bodies = [r.body for r in market.requests if r.method == "POST"]
    assert [b["verified"] for b in bodies] == [{"eq": True}, {"eq": False}]
    assert all(b["gpu_name"] == {"eq": "RTX 3090"} and b["num_gpus"] == {"eq": 1} and b["rented"] == {"eq": False}
               for b in bodies)
    assert market.requests[0].query["num_gpus"] == ["1"]
    assert len(s["queries"]) == 4 and all(HOST_KEY not in q for q in s["queries"])
    no_key_anywhere(proc)


def test_market_text_answers_first(market: StandIn, home: dict[str, str]) -> None:
    proc = cli(market, home, "--gpu", "RTX 3090", "--gpus", "1", "--price", "0.25")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    text = " ".join(proc.stdout.split())  # the lines are wrapped at 80 columns
    assert "(a snapshot, not a forecast)" in text
    assert "rented now: 62.5 %" in text
    assert "rented machines charge" in text and "median 0.240" in text
    assert "listed now, not rented: 40 offers of 1-GPU RTX 3090 machines (30 verified, 10 unverified)" in text
    assert "queries made to http://127.0.0.1:" in text and "POST /api/v0/bundles/" in text
    no_key_anywhere(proc)


def test_no_key_says_what_it_would_read_and_sends_nothing(market: StandIn, home: dict[str, str]) -> None:
    proc = cli(market, home, "--gpu", "RTX 3090", "--gpus", "2", key=None)
    assert proc.returncode == 3
    assert "no Vast API key found" in proc.stderr and "2-GPU RTX 3090" in proc.stderr
    assert "~/.config/vastai/vast_api_key" in proc.stderr and "--key-file" in proc.stderr
    assert market.requests == []


def test_client_key_reads_offers_and_says_the_metrics_want_a_host_key(market: StandIn, home: dict[str, str]) -> None:
    proc = cli(market, home, "--gpu", "RTX 3090", "--gpus", "1", "--format", "json", key=CLIENT_KEY)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert "host account's API key" in s["metrics_note"] and "401" in s["metrics_note"]
    assert s["metrics"] is None and s["occupancy"] is None
    assert s["price"]["from"] == "the median price of comparable offers listed, not rented"
    assert s["listed"]["all"]["count"] == 40
    no_key_anywhere(proc)


def test_no_offers_without_metrics_says_the_name_may_be_wrong(market: StandIn, home: dict[str, str]) -> None:
    proc = cli(market, home, "--gpu", "GeForce RTX3090", "--gpus", "1", key=CLIENT_KEY)
    assert proc.returncode == 0, proc.stderr
    flat = " ".join(proc.stdout.split())
    assert "listed now, not rented: 0 offers" in flat and "no offer listed for 'GeForce RTX3090' x1" in flat


def test_a_host_without_a_machine_gets_no_metrics(market: StandIn, home: dict[str, str]) -> None:
    market.mode = "needs_machine"  # vast-cli: {"success": true, "gpus": [], "needs_machine": true}
    proc = cli(market, home, "--gpu", "RTX 3090", "--gpus", "1", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert s["metrics"] is None and "only for hosts with a machine listed" in s["metrics_note"]
    assert s["listed"]["all"]["count"] == 40


def test_a_wrong_key_is_refused_in_one_line_without_the_key(market: StandIn, home: dict[str, str]) -> None:
    wrong = "0123456789abcdef" * 4
    proc = cli(market, home, "--gpu", "RTX 3090", "--gpus", "1", key=wrong)
    assert proc.returncode == 3
    # The stand-in echoes the key it was sent in its error message, as some servers do.
    assert "key was refused (HTTP 401)" in proc.stderr and wrong not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stdout == ""


def test_unknown_gpu_names_the_nearest(market: StandIn, home: dict[str, str]) -> None:
    proc = cli(market, home, "--gpu", "RTX 3900", "--gpus", "1")
    assert proc.returncode == 3
    assert "no GPU named 'RTX 3900'" in proc.stderr and "nearest: RTX 3090" in proc.stderr


@pytest.mark.parametrize(("mode", "said"), [
    ("not_json", "the answer is not JSON"),
    ("huge", "larger than 24 MiB"),
    ("truncated", "cut short"),
    ("redirect", "redirects to elsewhere.example"),
    ("no_offers_key", "without an offer list"),
])
def test_bad_answers_are_one_clear_line_and_nothing_recorded(market: StandIn, home: dict[str, str], tmp_path: Path,
                                                             mode: str, said: str) -> None:
    market.mode = mode
    db = tmp_path / "market.db"
    proc = cli(market, home, "--gpu", "RTX 3090", "--gpus", "1", "--record", str(db))
    assert proc.returncode == 3, proc.stderr
    assert said in proc.stderr and "nothing recorded" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not db.exists()
    if mode == "redirect":
        assert len(market.requests) == 1  # not followed


def test_rate_limit_is_retried_then_given_up(market: StandIn, home: dict[str, str]) -> None:
    market.rate_limited = 1  # one 429 (Retry-After 0), then the answers
    proc = cli(market, home, "--gpu", "RTX 3090", "--gpus", "1", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert len(market.requests) == 5
    market.requests.clear()
    market.rate_limited = 100
    market.retry_after = "60"  # longer than the client waits: it gives up at once
    proc = cli(market, home, "--gpu", "RTX 3090", "--gpus", "1")
    assert proc.returncode == 3 and "rate-limited (HTTP 429)" in proc.stderr
    assert len(market.requests) == 1


def test_client_backoff_honours_retry_after_and_the_budget(market: StandIn) -> None:
    waits: list[float] = []
    market.rate_limited = 2
    market.retry_after = "3"
    client = VastClient(parse_base_url(market.url, "test"), ApiKey(HOST_KEY, "test"), sleep=waits.append,
                        min_interval_s=0)
    client.request("GET", "/api/v0/metrics/gpu/current/", query={"verified": "all"})
    assert waits == [3.0, 3.0]  # Retry-After 3 s is longer than the backoff's 1 s and 2 s
    market.rate_limited = 5
    market.retry_after = None  # no header: backoff 1 s, then 2 s, then give up
    waits.clear()
    client = VastClient(parse_base_url(market.url, "test"), ApiKey(HOST_KEY, "test"), sleep=waits.append,
                        min_interval_s=0)
    with pytest.raises(MarketError, match="rate-limited"):
        client.request("GET", "/api/v0/metrics/gpu/current/")
    assert waits == [1.0, 2.0]
    client = VastClient(parse_base_url(market.url, "test"), ApiKey(HOST_KEY, "test"), max_requests=1)
    market.rate_limited = 0
    client.request("GET", "/api/v0/metrics/gpu/current/")
    with pytest.raises(MarketError, match="budget of 1 requests"):
        client.request("GET", "/api/v0/metrics/gpu/current/")


def test_client_key_refused_by_the_metrics_is_a_key_error(market: StandIn) -> None:
    client = VastClient(parse_base_url(market.url, "test"), ApiKey(CLIENT_KEY, "test"))
    with pytest.raises(KeyRefused) as info:
        client.request("GET", "/api/v0/metrics/gpu/current/")
    assert info.value.status == 401 and "host API key" in str(info.value)


def test_nulls_missing_fields_and_absurd_prices_are_set_aside() -> None:
    rows: list[Any] = [offer(1, "RTX 3090", 1, 0.2), offer(2, "RTX 3090", 1, None), offer(3, "RTX 3090", 1, 5000.0),
                       {**offer(4, "RTX 3090", 0, 0.2), "dph_total": 0.2}, {"gpu_name": "RTX 3090"}, "junk",
                       {**offer(5, "RTX 3090", 2, 0.3), "reliability": None, "verification": None, "rented": None},
                       {**offer(6, "RTX 3090", 1, 0.25), "dph_total": "0.25"}, {**offer(7, "RTX 3090", 1, 0.1), "dph_total": -1}]
    search = parse_offers({"offers": rows}, verified=False)
    assert [o.price for o in search.offers] == [0.2, 0.3]
    assert search.offers[1].verified is False and search.offers[1].reliability is None  # from the query
    assert search.set_aside == {"no price": 2, f"price per GPU-hour outside 0-{MAX_PRICE:g}": 2,
                                "no usable GPU count": 2, "not an object": 1}
    assert search.received == len(rows)
    with pytest.raises(MarketError):
        parse_offers({"offers": None}, verified=True)


def test_5000_offers_and_the_search_limit(home: dict[str, str]) -> None:
    state = StandIn(offers=[offer(i, "RTX 3090", 1, 0.1 + (i % 300) / 1000, verified=i % 2 == 0) for i in range(5000)])
    server, thread = serve(state)
    try:
        proc = cli(state, home, "--gpu", "RTX 3090", "--gpus", "1", "--format", "json", key=CLIENT_KEY)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    # 2,500 of each kind exist; each search asks for 2,000 and says there may be more.
    assert s["listed"]["verified"]["count"] == 2000 and s["listed"]["unverified"]["count"] == 2000
    assert s["limit_reached"] == ["verified", "unverified"]
    assert all(r.body["limit"] == 2000 for r in state.requests if r.method == "POST")


def test_key_file_must_be_private_and_small(market: StandIn, home: dict[str, str], tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(HOST_KEY + "\n")
    key_file.chmod(0o644)
    proc = cli(market, home, "--gpu", "RTX 3090", "--gpus", "1", "--key-file", str(key_file), key=None)
    assert proc.returncode == 2 and "chmod 600" in proc.stderr and market.requests == []
    key_file.chmod(0o600)
    proc = cli(market, home, "--gpu", "RTX 3090", "--gpus", "1", "--key-file", str(key_file), key=None)
    assert proc.returncode == 0, proc.stderr
    key_file.write_text("x" * 5000)
    proc = cli(market, home, "--gpu", "RTX 3090", "--gpus", "1", "--key-file", str(key_file), key=None)
    assert proc.returncode == 2 and "not an API key" in proc.stderr
    # vast-cli's own file is found when nothing else is set.
    own = Path(home["XDG_CONFIG_HOME"]) / "vastai" / "vast_api_key"
    own.parent.mkdir(parents=True)
    own.write_text(CLIENT_KEY)
    own.chmod(0o600)
    market.requests.clear()
    proc = cli(market, home, "--gpu", "RTX 3090", "--gpus", "1", key=None)
    assert proc.returncode == 0 and market.requests[0].headers["Authorization"] == f"Bearer {CLIENT_KEY}"


def test_plain_http_only_to_this_machine(market: StandIn, home: dict[str, str]) -> None:
    proc = cli(market, home, "--gpu", "RTX 3090", "--gpus", "1", "--market-url", "http://vast.example.org")
    assert proc.returncode == 2 and "unencrypted" in proc.stderr
    proc = cli(market, home, "--gpu", "RTX 3090", "--gpus", "1", "--market-url", "https://u:p@vast.example.org")
    assert proc.returncode == 2
    assert market.requests == []


# --- the database and the trend ----------------------------------------------------------


def test_record_keeps_the_interval_and_no_key(market: StandIn, home: dict[str, str], tmp_path: Path) -> None:
    db = tmp_path / "market.db"
    proc = cli(market, home, "--facts", BOX_3090, "--record", str(db))
    assert proc.returncode == 0, proc.stderr
    sent = len(market.requests)
    proc = cli(market, home, "--facts", BOX_3090, "--record", str(db))
    assert proc.returncode == 0 and "not queried again" in proc.stderr
    assert len(market.requests) == sent  # no request inside the minimum interval
    rows = read_rows(db, "RTX 3090", 1)
    assert len(rows) == 1 and rows[0]["listed"] == 40 and rows[0]["rented_share_pct"] == 62.5
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    no_key_anywhere(proc, db)


def test_record_into_a_missing_folder_sends_nothing(market: StandIn, home: dict[str, str], tmp_path: Path) -> None:
    proc = cli(market, home, "--gpu", "RTX 3090", "--gpus", "1", "--record", str(tmp_path / "no" / "market.db"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr and market.requests == []


def test_record_refuses_a_file_that_is_not_ours(market: StandIn, home: dict[str, str], tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    before = other.read_bytes()
    proc = cli(market, home, "--gpu", "RTX 3090", "--gpus", "1", "--record", str(other))
    assert proc.returncode == 2 and "another application" in proc.stderr
    assert other.read_bytes() == before and market.requests == []


def test_the_database_keeps_the_newest_rows_within_its_bounds(tmp_path: Path) -> None:
    db = tmp_path / "bounded.db"
    now = time.time()
    record(db, _summary(now - 500 * 86400, 50, 0.2, 0.2))  # older than 400 days: dropped on the next write
    for k in range(5):
        record(db, _summary(now - 3600 * (5 - k), 60 + k, 0.2, 0.2), max_rows=3)
    assert [r["rented_share_pct"] for r in read_rows(db, None, None)] == [62, 63, 64]


def _summary(t: float, share: float, listed_median: float, rented_median: float) -> dict[str, Any]:
    return {"taken_at": t, "gpu_name": "RTX 3090", "num_gpus": 1,
            "listed": {"all": {"count": 40, "prices": {"median": listed_median}}},
            "metrics": {"rented_share_pct": share}, "rented_prices": {"median": rented_median},
            "occupancy": {"pct": share - 5}}


def test_trend_of_a_recorded_week(tmp_path: Path, home: dict[str, str]) -> None:
    db = tmp_path / "week.db"
    start = math.floor(time.time() / 86400 - 7) * 86400  # midnight UTC a week ago
    # Day d (0-6), four snapshots 6 h apart: share 50 + 2d + (0, 1, 2, 3); prices rise 0.01 a day.
    for d in range(7):
        for k in range(4):
            record(db, _summary(start + d * 86400 + k * 6 * 3600 + 60, 50 + 2 * d + k, 0.20 + 0.01 * d + 0.001 * k,
                                0.22 + 0.01 * d))
    models = trend(read_rows(db, "RTX 3090", 1))
    assert len(models) == 1
    days = models[0]["days"]
    assert len(days) == 7 and all(d["snapshots"] == 4 for d in days)
    # Day mean of 50 + 2d + (0..3) = 51.5 + 2d; median of the four listed medians = 0.2015 + 0.01d.
    assert [d["rented_share_pct"] for d in days] == [51.5 + 2 * d for d in range(7)]
    assert [d["listed_median"] for d in days] == pytest.approx([0.2015 + 0.01 * d for d in range(7)])
    assert models[0]["change"]["rented_share_pct"] == 12.0
    assert models[0]["change"]["rented_median"] == pytest.approx(0.06)
    proc = run_cli("market", "report", "--db", str(db), "--gpu", "RTX 3090", env=home)
    assert proc.returncode == 0, proc.stderr
    flat = " ".join(proc.stdout.split())
    assert "RTX 3090 x1, 7 days recorded" in flat and "rented share +12 points" in flat
    assert all(len(line) <= 80 for line in proc.stdout.splitlines())


def test_a_server_that_never_answers_is_given_up_in_time() -> None:
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)  # accepts the connection in the kernel, never answers
        port = listener.getsockname()[1]
        client = VastClient(parse_base_url(f"http://127.0.0.1:{port}", "test"), ApiKey(HOST_KEY, "test"),
                            timeout_s=0.5)
        started = time.monotonic()
        with pytest.raises(MarketError, match="no answer within 0.5 s"):
            client.request("GET", "/api/v0/metrics/gpu/current/")
        assert time.monotonic() - started < 5


def test_nothing_listening_is_one_line(home: dict[str, str]) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: the connection is refused
        proc = run_cli("market", "--gpu", "RTX 3090", "--gpus", "1", "--market-url", f"http://127.0.0.1:{port}",
                       env={**home, "VAST_API_KEY": HOST_KEY})
    assert proc.returncode == 3 and "cannot reach 127.0.0.1" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
