"""One market snapshot for a GPU model and count: Vast's market metrics where the key allows,
then the offer search for comparable offers, verified and unverified.

The queries are vast-cli's: the metrics as ``vastai metrics gpu`` and ``vastai metrics
gpu-trends`` make them (``vastai/api/metrics.py``), the search as ``vastai search offers`` makes
it (``vastai/api/offers.py``: ``external`` false, ``rentable`` true, ``rented`` false, ordered),
with the model and count as filters and ``verified`` asked both ways. Every request made is
listed in the snapshot, as sent (less the key).
"""

from __future__ import annotations

import difflib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from hostcheck.market.client import KeyRefused, MarketError, VastClient
from hostcheck.market.parse import (
    UNVERIFIED,
    GpuMetrics,
    OfferSearch,
    PriceHistory,
    parse_metrics_current,
    parse_metrics_history,
    parse_offers,
)

SEARCH_LIMIT = 2_000
"""Offers asked for per search (the search takes a ``limit``; no page offset is documented)."""
METRICS_BUCKETS = frozenset({1, 2, 4, 8})
"""The machine GPU-count buckets the metrics take (``--num-gpus all|1|2|4|8`` in vast-cli)."""
HISTORY_WINDOW_S = 3 * 3600
HISTORY_STEP_S = 3600
NEAREST = 5


class UnknownGpu(MarketError):
    """The market lists no GPU by this name; the message names the nearest it does."""


@dataclass
class Snapshot:
    taken_at: float
    base_url: str
    gpu_name: str
    num_gpus: int
    queries: list[str] = field(default_factory=list)
    metrics: GpuMetrics | None = None
    metrics_bucket: str = "all"
    metrics_note: str | None = None
    history: PriceHistory | None = None
    offers: OfferSearch = field(default_factory=OfferSearch)
    limit_reached: list[str] = field(default_factory=list)
    """The searches (verified / unverified) whose answer held as many offers as asked for."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "taken_at": self.taken_at, "base_url": self.base_url, "gpu_name": self.gpu_name,
            "num_gpus": self.num_gpus, "queries": self.queries,
            "metrics": None if self.metrics is None else self.metrics.as_dict(),
            "metrics_bucket": self.metrics_bucket, "metrics_note": self.metrics_note,
            "history": None if self.history is None else self.history.as_dict(),
            "offers_received": self.offers.received, "set_aside": self.offers.set_aside,
            "limit_reached": self.limit_reached,
        }


def nearest_names(name: str, known: list[str]) -> list[str]:
    by_case = {k.lower(): k for k in known}
    return [by_case[n] for n in difflib.get_close_matches(name.lower(), list(by_case), n=NEAREST, cutoff=0.5)]


def offer_query(gpu_name: str, num_gpus: int, verified: bool) -> dict[str, Any]:
    return {"verified": {"eq": verified}, "external": {"eq": False}, "rentable": {"eq": True},
            "rented": {"eq": False}, "gpu_name": {"eq": gpu_name}, "num_gpus": {"eq": num_gpus},
            "order": [["dph_total", "asc"]], "type": "on-demand", "limit": SEARCH_LIMIT,
            "allocated_storage": 5.0}


def take_snapshot(client: VastClient, gpu_name: str, num_gpus: int, now: float | None = None) -> Snapshot:
    """Raises KeyRefused when the offer search refuses the key, UnknownGpu when the metrics list
    no GPU of that name, MarketError for an answer that cannot be used. A metrics endpoint that
    refuses the key (a client key: the metrics want a host key) is said in the snapshot, not raised."""
    snap = Snapshot(taken_at=time.time() if now is None else now, base_url=str(client.base),
                    gpu_name=gpu_name, num_gpus=num_gpus)
    snap.metrics_bucket = str(num_gpus) if num_gpus in METRICS_BUCKETS else "all"
    query = {"verified": "all", "hosting_type": "all", "num_gpus": snap.metrics_bucket}
    snap.queries.append(f"GET /api/v0/metrics/gpu/current/?{_q(query)}")
    try:
        current = parse_metrics_current(client.request("GET", "/api/v0/metrics/gpu/current/", query=query))
    except KeyRefused as exc:
        current = None
        snap.metrics_note = (f"market metrics not read: Vast's metrics answer only a host account's API key "
                             f"(HTTP {exc.status} for this one); occupancy and rented prices need it")
    if current is not None and current.needs_machine:
        snap.metrics_note = "market metrics not read: Vast answers them only for hosts with a machine listed"
    elif current is not None:
        by_lower = {name.lower(): row for name, row in current.rows.items()}
        row = by_lower.get(gpu_name.lower())
        if row is None:
            near = nearest_names(gpu_name, list(current.rows))
            raise UnknownGpu(f"the market lists no GPU named {gpu_name!r}"
                             + (f"; nearest: {', '.join(near)}" if near else "") + " (give --gpu NAME)")
        snap.metrics, snap.gpu_name = row, row.gpu_name
        end = int(snap.taken_at)
        hq = {"gpu_name": snap.gpu_name, "verified": "all", "hosting_type": "all",
              "num_gpus": snap.metrics_bucket, "start": str(end - HISTORY_WINDOW_S), "end": str(end),
              "step": str(HISTORY_STEP_S)}
        snap.queries.append(f"GET /api/v0/metrics/gpu/history/?{_q(hq)}")
        snap.history = parse_metrics_history(client.request("GET", "/api/v0/metrics/gpu/history/", query=hq),
                                              snap.gpu_name)
    for verified in (True, False):
        body = offer_query(snap.gpu_name, num_gpus, verified)
        snap.queries.append(f"POST /api/v0/bundles/ {json.dumps(body, separators=(',', ':'))}")
        doc = client.request("POST", "/api/v0/bundles/", body=body)
        parse_offers(doc, verified, snap.offers)
        if len(doc["offers"]) >= SEARCH_LIMIT:
            snap.limit_reached.append("verified" if verified else UNVERIFIED)
    return snap


def _q(query: dict[str, str]) -> str:
    from urllib.parse import urlencode

    return urlencode(query)
