#!/usr/bin/env python3
"""A market snapshot with 5,000 offers: parsed and summarised from the answer's bytes
(json.loads, the tolerant parser, the percentiles and groups), and the whole query over HTTP
to the local stand-in for Vast's API (tests/market_standin.py, answers of the real shape,
about 80 fields an offer), medians of several runs.

    .venv/bin/python bench/market.py [--runs 7] [--offers 5000]

Figures are printed, never asserted: speed is measured here, not in tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--offers", type=int, default=5000)
    args = parser.parse_args()

    from hostcheck.market import vast
    from hostcheck.market.client import VastClient, parse_base_url
    from hostcheck.market.keys import ApiKey
    from hostcheck.market.parse import OfferSearch, parse_offers
    from hostcheck.market.summary import summarise
    from tests.market_standin import HOST_KEY, market_of, offer, serve

    rows = [offer(i, "RTX 3090", 1, 0.10 + (i % 300) / 1000, verified=i % 4 != 3, reliability=0.9 + (i % 10) / 100)
            for i in range(args.offers)]
    body = json.dumps({"offers": rows}).encode()
    snap = vast.Snapshot(taken_at=time.time(), base_url="bench", gpu_name="RTX 3090", num_gpus=1)

    parse_times = []
    for _ in range(args.runs):
        started = time.perf_counter()
        snap.offers = parse_offers(json.loads(body), True, OfferSearch())
        summary = summarise(snap, owner_price=0.25)
        parse_times.append(time.perf_counter() - started)
    assert summary["listed"]["all"]["count"] == args.offers

    state = market_of()
    state.offers = rows
    server, _ = serve(state)
    vast.SEARCH_LIMIT = args.offers  # one search returns them all
    http_times = []
    try:
        for _ in range(args.runs):
            client = VastClient(parse_base_url(state.url, "bench"), ApiKey(HOST_KEY, "bench"), min_interval_s=0)
            started = time.perf_counter()
            summary = summarise(vast.take_snapshot(client, "RTX 3090", 1), owner_price=0.25)
            http_times.append(time.perf_counter() - started)
    finally:
        server.shutdown()
        server.server_close()
    print(f"{args.offers:,} offers, {len(body) / 1e6:.1f} MB of JSON")
    print(f"parse + summarise (from bytes), median of {args.runs}: {statistics.median(parse_times):.3f} s "
          f"(min {min(parse_times):.3f}, max {max(parse_times):.3f})")
    print(f"whole snapshot over HTTP on 127.0.0.1 (4 requests, the stand-in serializing too), median of {args.runs}: "
          f"{statistics.median(http_times):.3f} s (min {min(http_times):.3f}, max {max(http_times):.3f})")


if __name__ == "__main__":
    main()
