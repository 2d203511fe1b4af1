"""Property tests: whatever JSON an answer holds, the parsers read it or raise MarketError (one
clear message), and the summary and its rendering never crash and never exceed 80 columns."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostcheck.market.client import MarketError
from hostcheck.market.parse import parse_metrics_current, parse_metrics_history, parse_offers
from hostcheck.market.summary import summarise
from hostcheck.market.vast import Snapshot
from hostcheck.render.market import render_snapshot
from tests.market_standin import metrics_row, offer

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30))
JSONISH = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                       max_leaves=12)
FIELDS = ("dph_total", "num_gpus", "reliability", "verification", "rented", "gpu_name")


@st.composite
def hostile_offer(draw: st.DrawFn) -> Any:
    row = offer(draw(st.integers(0, 10**6)), "RTX 3090", 1, 0.2)
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=4)):
        row[name] = draw(SCALARS)
    return draw(st.one_of(st.just(row), JSONISH))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(offers=st.lists(hostile_offer(), max_size=20), top=st.one_of(st.none(), JSONISH),
       metrics=st.lists(st.one_of(JSONISH, st.builds(lambda v: metrics_row("RTX 3090", usage_30d=v, price_median=v),
                                                     SCALARS)), max_size=5),
       owner=st.one_of(st.none(), st.floats(0.001, 100)))
def test_hostile_answers_never_crash(offers: list[Any], top: Any, metrics: list[Any], owner: float | None) -> None:
    snap = Snapshot(taken_at=1_796_600_000.0, base_url="http://127.0.0.1:1", gpu_name="RTX 3090", num_gpus=1)
    try:
        parse_offers(top if top is not None else {"offers": offers}, True, snap.offers)
    except MarketError:
        parse_offers({"offers": offers}, True, snap.offers)
    try:
        current = parse_metrics_current({"success": True, "gpus": metrics})
        snap.metrics = current.rows.get("RTX 3090")
        snap.history = parse_metrics_history({"gpus": {"RTX 3090": top}}, "RTX 3090")
    except MarketError:
        pass
    summary = summarise(snap, owner)
    for o in snap.offers.offers:
        assert 0 < o.price <= 100 and 1 <= o.num_gpus <= 64
    text = render_snapshot(summary, width=80)
    assert all(len(line) <= 80 for line in text.splitlines())
