"""hostcheck earnings --market on the RTX 3090 box, against the local stand-in for Vast's API:
the market's price and occupancy, with their time and query, and the net they give."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers import SNAPSHOTS, run_cli
from tests.market_standin import CLIENT_KEY, HOST_KEY, StandIn

BOX_3090 = str(SNAPSHOTS / "rtx3090-vram-in-use.json")
BASE = ["earnings", "--no-config", "--facts", BOX_3090, "--electricity", "0.30"]


def earn(state: StandIn, tmp_path: Any, *args: str, key: str | None = HOST_KEY) -> Any:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config"), "VAST_URL": state.url}
    if key is not None:
        env["VAST_API_KEY"] = key
    return run_cli(*BASE, *args, env=env)


def test_market_fills_price_and_occupancy(market: StandIn, tmp_path: Any) -> None:
    proc = earn(market, tmp_path, "--market", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [p["platform"] for p in report["platforms"]] == ["vast"]
    vast = report["platforms"][0]
    # The stand-in's newest rented median is 0.24; its 30-day utilisation 55 %.
    assert vast["price_per_gpu_hour"] == 0.24
    assert vast["price_from"].startswith("from the market, ")
    assert report["inputs"]["occupancy_pct"] == 55.0
    assert report["market"]["price"]["value"] == 0.24 and report["market"]["occupancy"]["pct"] == 55.0
    # The net follows from those figures exactly as from the same figures given by hand.
    by_hand = json.loads(earn(market, tmp_path, "--platform", "vast", "--price", "0.24", "--occupancy", "55",
                              "--format", "json").stdout)
    assert vast["seasons"] == by_hand["platforms"][0]["seasons"]
    assert any("the market's point (0.240 per GPU-hour, 55 %) is in the 0.240 price column, between the 50 % and "
               "75 % occupancy rows" in n for n in report["notes"])


def test_market_text_shows_time_query_and_net(market: StandIn, tmp_path: Any) -> None:
    proc = earn(market, tmp_path, "--market")
    assert proc.returncode == 0, proc.stderr
    flat = " ".join(proc.stdout.split())
    assert "from the market, " in flat and "price 0.240 per GPU-hour (the median of rented machines' prices" in flat
    assert "occupancy 55 % (Vast's 30-day average utilisation)" in flat
    assert "market query: GET /api/v0/metrics/gpu/current/, GET /api/v0/metrics/gpu/history/, " \
           "POST /api/v0/bundles/ (x2)" in flat
    assert "a month over the year" in flat  # the answer: the net that follows
    assert all(len(line) <= 80 for line in proc.stdout.splitlines())
    details = earn(market, tmp_path, "--market", "--details").stdout
    assert "whole year, per month: net" in " ".join(details.split())
    assert HOST_KEY not in proc.stdout + proc.stderr


def test_owner_figures_stay_and_sit_beside_the_market(market: StandIn, tmp_path: Any) -> None:
    proc = earn(market, tmp_path, "--market", "--price", "0.30", "--occupancy", "40", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    vast = report["platforms"][0]
    assert vast["price_per_gpu_hour"] == 0.30 and vast["price_from"] == "--price"
    assert report["inputs"]["occupancy_pct"] == 40.0
    assert "your price 0.3 per GPU-hour beside the market's 0.240" in " ".join(report["notes"])
    assert "your occupancy 40 % beside the market's 55 %" in " ".join(report["notes"])


def test_without_a_key_earnings_stay_on_the_owners_figures(market: StandIn, tmp_path: Any) -> None:
    proc = earn(market, tmp_path, "--market", "--price", "0.30", "--occupancy", "40", key=None)
    assert proc.returncode == 0, proc.stderr
    assert "no Vast API key found" in proc.stderr and "your own figures only" in proc.stderr
    assert market.requests == []
    # With no occupancy of the owner's and no market, the occupancy is missing: bad input, as without --market.
    proc = earn(market, tmp_path, "--market", "--price", "0.30", key=None)
    assert proc.returncode == 2 and "occupancy" in proc.stderr


def test_a_bad_answer_leaves_earnings_on_the_owners_figures(market: StandIn, tmp_path: Any) -> None:
    market.mode = "not_json"
    proc = earn(market, tmp_path, "--market", "--price", "0.30", "--occupancy", "40", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert "the market could not be read" in proc.stderr and "not JSON" in proc.stderr
    report = json.loads(proc.stdout)
    assert report["market"] is None and report["platforms"][0]["price_from"] == "--price"


def test_no_request_without_market(market: StandIn, tmp_path: Any) -> None:
    proc = earn(market, tmp_path, "--price", "0.30", "--occupancy", "40")
    assert proc.returncode == 0, proc.stderr
    assert market.requests == []


def test_client_key_gives_the_listed_median_and_no_occupancy(market: StandIn, tmp_path: Any) -> None:
    proc = earn(market, tmp_path, "--market", "--occupancy", "40", "--format", "json", key=CLIENT_KEY)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["market"]["occupancy"] is None and "host account's API key" in report["market"]["metrics_note"]
    assert report["platforms"][0]["price_per_gpu_hour"] == report["market"]["listed"]["all"]["prices"]["median"]
