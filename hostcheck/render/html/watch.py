"""The watch report as HTML: uptime, each platform's verdict by its published rule with its
sources, the uptime strip per day with outage causes, outages, drift and events on demand.
Built from :func:`hostcheck.render.watch.to_json` and the terminal's timeline cells."""

from __future__ import annotations

from typing import Any

from hostcheck.recording.analysis import NOT_RECORDED, UP, Analysis
from hostcheck.render.html.markup import Markup, el, link
from hostcheck.render.html.page import fold, header_card, section, table, tag
from hostcheck.render.html.svg import swatch, uptime_strip
from hostcheck.render.watch import (
    SYMBOLS,
    _changes_only,
    _dur,
    _event_line,
    _pct,
    row_label,
    timeline_rows,
    timeline_title,
    to_json,
)
from hostcheck.watch.rules import RuleScore

STATE_NAMES = {UP: "up", "network": "network", "power": "power / unclean stop", "reboot": "reboot",
               "driver": "driver / GPU", "suspend": "suspend", NOT_RECORDED: "not recorded"}


def watch_header(data: dict[str, Any], version: str, command: str, generated: str) -> Markup:
    w = data["window"]
    return header_card("hostcheck reliability rehearsal", [
        ("hostcheck", version), ("command", command or "hostcheck watch report"), ("generated", generated),
        ("recording", data["database"]), ("window", f"{w['start']} to {w['end']} UTC")])


def strip(a: Analysis) -> Markup:
    daily, rows = timeline_rows(a)
    labelled = [(row_label(row, daily)[5:], cells) for row, cells in rows]  # the year is in the window line
    ticks = [(0, "00"), (12, "06"), (24, "12"), (36, "18")] if daily else [(0, ":00"), (15, ":15"), (30, ":30"), (45, ":45")]
    legend = el("ul", [el("li", swatch(state), name) for state, name in STATE_NAMES.items() if state in SYMBOLS],
                class_="legend")
    return el("figure", uptime_strip(labelled, ticks, timeline_title(a) + ", UTC"), legend)


def watch_body(a: Analysis, scores: list[RuleScore], db: str) -> list[Markup]:
    data = to_json(a, scores, db)
    answer = ("No sample recorded yet: the uptime is unknown until the first sample." if a.window_start is None else
              f"Uptime {_pct(a.uptime)}: up {_dur(a.up_s)}, down {_dur(a.down_s)}, over {_dur(a.observed_s)} "
              "observed" + (f" ({_dur(a.not_recorded_s)} not recorded, left out)" if a.not_recorded_s else "") + ".")
    out = [el("p", answer,
                class_="answer" if any(s.verdict == "below" for s in scores) or a.uptime is None else "answer good")]
    rows = [[s["platform"], tag(str(s["verdict"])), s["summary"]] for s in data["platforms"]]
    rules = [fold(f"{s['platform']}: its rule", el("p", s["rule_text"]),
                  el("p", f"Status: {s['status']}") if s["status"] else None,
                  el("p", f"Applied: {s['applied']}") if s["applied"] else None,
                  el("p", s["disagreement"]) if s["disagreement"] else None,
                  el("ul", [el("li", link(str(src["url"]), str(src["title"])), f" ({src['status']}, read {src['checked']})")
                            for src in s["sources"]])) for s in data["platforms"]]
    out.append(section("Per platform", table(["platform", "verdict", "by its published rule"], rows, last_wide=True), rules,
                       id_="platforms"))
    out.append(section(timeline_title(a), strip(a), id_="timeline"))
    out.append(section("Per day (UTC)", table(["day", "uptime", "down", "not recorded"],
                                              [[d["day"], _pct(d["uptime"]), _dur(d["down_s"]), _dur(d["not_recorded_s"])]
                                               for d in a.per_day])))
    outages = [[o["start"], _dur(o["seconds"]), o["cause"], o["note"]] for o in data["outages"]]
    out.append(section("Outages", table(["start (UTC)", "length", "cause", "evidence"], outages, last_wide=True) if outages
                       else el("p", "none")))
    if data["drift"]:
        out.append(section("Drift", el("ul", [el("li", f"{d['text']} (fix: hostcheck explain {d['check']})")
                                              for d in data["drift"]])))
    if data["not_recorded"]:
        out.append(fold("Not recorded", table(["start (UTC)", "length", "why"],
                                              [[g["start"], _dur(g["seconds"]), g["reason"]] for g in data["not_recorded"]])))
    events = [e for e in data["events"] if e["kind"] not in ("recorder_start", "recorder_stop", "sample")]
    shown = _changes_only(events)[-200:]
    out.append(fold(f"Events ({len(shown)})", el("ul", [el("li", f"{e['t']} {_event_line(e)}") for e in shown])
                    if shown else el("p", "none")))
    return out
