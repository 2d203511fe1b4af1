"""A market snapshot and a recorded trend as terminal text or Markdown: the answer first (share
rented, the price that gets rented, where the owner's price stands), then the listed offers'
percentiles, then exactly which queries were made and when."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hostcheck.market.parse import QUANTILES, UNVERIFIED
from hostcheck.render.columns import columns
from hostcheck.render.escape import escape_tree
from hostcheck.render.terminal import wrap

Q_SHOWN = {"p10": "p10", "p25": "p25", "median": "median", "p75": "p75", "p90": "p90"}


def when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _offers(n: int) -> str:
    return f"{n:,} offer{'' if n == 1 else 's'}"


def _price_line(label: str, prices: dict[str, Any] | None) -> str | None:
    if not prices:
        return None
    shown = [f"{q} {_p(prices.get(q))}" for q in QUANTILES if q in prices and prices.get(q) is not None]
    return f"{label}: {', '.join(shown)} per GPU-hour" if shown else None


def market_point(s: dict[str, Any]) -> str:
    """The line earnings shows: the market's price and occupancy, with their time and origin."""
    parts = []
    if s.get("price"):
        parts.append(f"price {s['price']['value']:.3f} per GPU-hour ({s['price']['from']})")
    if s.get("occupancy"):
        parts.append(f"occupancy {s['occupancy']['pct']:g} % ({s['occupancy']['from']})")
    said = "; ".join(parts) if parts else "no price or occupancy could be read"
    return f"from the market, {when(s['taken_at'])}: {said}"


def market_lines(s: dict[str, Any]) -> list[tuple[str, int]]:
    """Earnings' lines: the market's point, then the requests made (method and path; the
    filters are the model and count named, verified and unverified)."""
    counted: dict[str, int] = {}
    for q in s["queries"]:
        request = q.split("?")[0].split(" {")[0]
        counted[request] = counted.get(request, 0) + 1
    requests = ", ".join(r if n == 1 else f"{r} (x{n})" for r, n in counted.items())
    return [(market_point(s), 0),
            (f"market query: {requests} to {s['base_url']}, for {s['num_gpus']}-GPU {s['gpu_name']} "
             "machines (hostcheck market --format json lists each request in full)", 1)]


def snapshot_lines(s: dict[str, Any]) -> list[tuple[str, int]]:
    s = escape_tree(s)
    gpus = s["num_gpus"]
    out: list[tuple[str, int]] = [
        (f"{s['gpu_name']} x{gpus} on Vast, {when(s['taken_at'])} (a snapshot, not a forecast)", 0), ("", 0)]
    m = s.get("metrics")
    if m is not None:
        bucket = "all machine sizes" if m["bucket"] == "all" else f"{m['bucket']}-GPU machines"
        if m["rented_share_pct"] is not None:
            out.append((f"rented now: {m['rented_share_pct']:g} % of the {s['gpu_name']} machines ({bucket}; "
                        f"{m['rented_share_how']}, Vast's metrics)", 0))
        if m["usage_30d_pct"] is not None:
            out.append((f"30-day average utilisation: {m['usage_30d_pct']:g} %", 0))
    elif s.get("metrics_note"):
        out.append((s["metrics_note"], 0))
    for key, label in (("rented_prices", "rented machines charge"), ("available_prices", "available machines ask")):
        prices = s.get(key)
        if prices:
            line = _price_line(f"{label} ({when(prices['at'])})", {k: v for k, v in prices.items() if k != "at"})
            if line:
                out.append((line, 0))
    if m is not None:
        line = _price_line("Vast's price percentiles for the model", m.get("prices"))
        if line:
            out.append((line, 0))
    listed = s["listed"]
    out.append((f"listed now, not rented: {_offers(listed['all']['count'])} of {gpus}-GPU {s['gpu_name']} machines "
                f"({listed['verified']['count']:,} verified, {listed[UNVERIFIED]['count']:,} {UNVERIFIED})", 0))
    if s.get("owner"):
        o = s["owner"]
        out.append((f"your price {o['price']:.3f} per GPU-hour: {_offers(o['cheaper'])} listed ask less, "
                    f"{o['same']:,} the same, {o['dearer']:,} more", 0))
    taken = [f"price {s['price']['value']:.3f}" if s.get("price") else "",
             f"occupancy {s['occupancy']['pct']:g} %" if s.get("occupancy") else ""]
    if any(taken):
        out.append((f"hostcheck earnings --market takes the {' and '.join(t for t in taken if t)} "
                    f"({'; '.join(w['from'] for w in (s.get('price'), s.get('occupancy')) if w)})", 0))
    out.append(("", 0))
    rows = []
    groups = [("all", listed["all"]), ("verified", listed["verified"]), (UNVERIFIED, listed[UNVERIFIED]),
              *((f"reliability {k}", v) for k, v in listed["reliability"].items())]
    for label, g in groups:
        if g["count"] or label in ("all", "verified", UNVERIFIED):
            prices = g["prices"] or {}
            rows.append((label, f"{g['count']:,}", *(_p(prices.get(q)) for q in QUANTILES)))
    out.append(("listed offers, price per GPU-hour (dph_total / num_gpus, 5 GB of storage included):", 0))
    out += [(line, -1) for line in columns(("", "offers", *QUANTILES), rows, 78, right=range(1, 7))]
    out.append(("", 0))
    out.append((f"queries made to {s['base_url']} at {when(s['taken_at'])}:", 0))
    out += [(q, 1) for q in s["queries"]]
    notes = list(s["notes"])
    if s["set_aside"]:
        notes.append("set aside: " + ", ".join(f"{n:,} {why}" for why, n in sorted(s["set_aside"].items())))
    for which in s["limit_reached"]:
        notes.append(f"the {which} search returned as many offers as asked for: there may be more")
    if notes:
        out += [("", 0), ("notes:", 0), *((n, 1) for n in notes)]
    return out


def to_text(lines: list[tuple[str, int]], width: int, markdown: bool) -> str:
    text: list[str] = []
    for line, level in lines:
        if level < 0:
            text.append(("    " if markdown else "  ") + line.rstrip())
        elif not line:
            text.append("")
        elif markdown:
            text.append(("- " if level else "") + line)
        else:
            text += wrap(line, width, first="  " * level, indent="  " * level + "  ")
    return "\n".join(text).rstrip() + "\n"


def render_snapshot(summary: dict[str, Any], width: int = 80, markdown: bool = False) -> str:
    head = [("# hostcheck market" if markdown else "hostcheck market", 0), ("", 0)]
    return to_text(head + snapshot_lines(summary), width, markdown)


def render_trend(models: list[dict[str, Any]], db: str, width: int = 80, markdown: bool = False) -> str:
    out: list[tuple[str, int]] = [("# hostcheck market report" if markdown else "hostcheck market report", 0),
                                  ("", 0)]
    if not models:
        out.append((f"no snapshots recorded in {db} for this model", 0))
    for model in escape_tree(models):
        days = model["days"]
        c = model["change"]
        said = []
        if c["rented_share_pct"] is not None:
            said.append(f"rented share {c['rented_share_pct']:+g} points")
        if c["rented_median"] is not None:
            said.append(f"rented median price {c['rented_median']:+.3f}")
        if c["listed_median"] is not None:
            said.append(f"listed median price {c['listed_median']:+.3f}")
        span = f"{days[0]['day']} to {days[-1]['day']}" if len(days) > 1 else days[0]["day"]
        out.append((f"{model['gpu_name']} x{model['num_gpus']}, {len(days)} day{'' if len(days) == 1 else 's'} "
                    f"recorded ({span})" + (f": {', '.join(said)}" if said and len(days) > 1 else ""), 0))
        rows = [(d["day"], str(d["snapshots"]), "-" if d["rented_share_pct"] is None else f"{d['rented_share_pct']:g} %",
                 "-" if d["occupancy_pct"] is None else f"{d['occupancy_pct']:g} %", f"{d['listed']:,}",
                 _p(d["listed_median"]), _p(d["rented_median"])) for d in days]
        out += [(line, -1) for line in columns(("day", "snapshots", "rented", "occupancy", "listed", "listed med",
                                                "rented med"), rows, 78, right=range(1, 7))]
        out.append(("", 0))
    out.append((f"from {db}: per UTC day, the mean of the snapshots' shares and the median of their median "
                 "prices per GPU-hour", 0))
    return to_text(out, width, markdown)
