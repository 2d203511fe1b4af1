"""The watch report as terminal text or Markdown, with a timeline chart; its data for JSON (:func:`to_json`)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from hostcheck.checks.agents import agent_not_restart_looping
from hostcheck.checks.base import id_of
from hostcheck.checks.inbound import forwarded_range
from hostcheck.checks.network import link_full_duplex, link_speed
from hostcheck.checks.packages import driver_versions, reboot_pending
from hostcheck.models import InboundResult
from hostcheck.recording.analysis import DOWN_CAUSES, NOT_RECORDED, UP, Analysis
from hostcheck.render.columns import columns
from hostcheck.render.escape import escape_text
from hostcheck.render.terminal import terminal_width, wrap
from hostcheck.watch.rules import RuleScore
from hostcheck.wording import duration as _dur
from hostcheck.wording import percent as _pct

CELLS_PER_DAY = 48  # one cell per 30 minutes
SYMBOLS = {UP: "=", "network": "N", "power": "P", "reboot": "R", "driver": "D", "suspend": "S", NOT_RECORDED: "."}
SEVERITY = {"power": 6, "reboot": 5, "driver": 4, "network": 3, "suspend": 2, UP: 1, NOT_RECORDED: 0}
# The check whose fix applies to each kind of drift (hostcheck.recording.drift's ``fix``).
FIX_CHECKS = {"forwarded_range": forwarded_range, "link_speed": link_speed, "link_duplex": link_full_duplex,
              "driver_versions": driver_versions, "reboot_pending": reboot_pending,
              "agent_restarts": agent_not_restart_looping}
LEGEND = "= up   N network   P power/unclean stop   R reboot   D driver/GPU   S suspend   . not recorded   (blank) outside the window"


def _ts(t: float | None) -> str:
    if t is None:
        return "-"
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _share(seconds: float, share: float | None) -> str:
    return f"{_dur(seconds)} ({_pct(share)})"


def timeline_rows(a: Analysis) -> tuple[bool, list[tuple[float, list[str]]]]:
    """Whether rows are days (else hours), and each row's start with its cells: the worst state
    in each cell ("" outside the window). The terminal's timeline and the HTML strip draw these."""
    if a.window_start is None or a.window_end is None:
        return False, []
    daily = a.window_end - a.window_start >= 86400
    row_s, cells_n = (86400.0, CELLS_PER_DAY) if daily else (3600.0, 60)
    cell_s = row_s / cells_n
    rows: dict[float, tuple[list[str], list[int]]] = {}
    for seg in a.segments:
        t = seg.start
        while t < seg.end:
            row = t - t % row_s
            cells, worst = rows.setdefault(row, ([""] * cells_n, [-1] * cells_n))
            i = int((t - row) // cell_s)
            if SEVERITY[seg.state] > worst[i]:
                worst[i], cells[i] = SEVERITY[seg.state], seg.state
            t = min(seg.end, row + (i + 1) * cell_s)
    return daily, [(row, cells) for row, (cells, _) in sorted(rows.items())]


def row_label(row: float, daily: bool) -> str:
    return dt.datetime.fromtimestamp(row, dt.UTC).strftime("%Y-%m-%d" if daily else "%Y-%m-%d %H:00")


def timeline(a: Analysis) -> list[str]:
    """One line per UTC day of 48 half-hour cells; under a day of window, one line per hour of
    60 one-minute cells. A cell shows the worst state in it."""
    if a.window_start is None or a.window_end is None:
        return []
    daily, rows = timeline_rows(a)
    lines = [f"{row_label(row, daily)} |{''.join(SYMBOLS[c] if c else ' ' for c in cells)}|" for row, cells in rows]
    width = len("0000-00-00" if daily else "0000-00-00 00:00")
    ticks = "".join(f"{h:02d}".ljust(12) for h in (0, 6, 12, 18)) if daily else "".join(f":{m:02d}".ljust(15) for m in (0, 15, 30, 45))
    return [f"{'UTC':{width}} |{ticks}|", *lines]


def timeline_title(a: Analysis) -> str:
    daily = a.window_start is not None and a.window_end is not None and a.window_end - a.window_start >= 86400
    return "Timeline (30 minutes a cell)" if daily else "Timeline (1 minute a cell)"


def to_json(a: Analysis, scores: list[RuleScore], db: str) -> dict[str, Any]:
    return {
        "database": db,
        "window": {"start": _ts(a.window_start), "end": _ts(a.window_end), "observed_s": round(a.observed_s, 1),
                   "not_recorded_s": round(a.not_recorded_s, 1)},
        "uptime": a.uptime,
        "up_s": round(a.up_s, 1),
        "down_s": round(a.down_s, 1),
        "per_day": a.per_day,
        "outages": [
            {"start": _ts(o.start), "end": _ts(o.end), "seconds": round(o.seconds, 1), "cause": o.state, "note": o.note}
            for o in a.outages
        ],
        "not_recorded": [
            {"start": _ts(s.start), "end": _ts(s.end), "seconds": round(s.seconds, 1), "reason": s.note}
            for s in a.segments if s.state == NOT_RECORDED
        ],
        "gpu_health": [
            {"gpu": g.gpu, "thermal_s": g.thermal_s, "power_s": g.power_s, "counted_s": g.counted_s,
             "thermal_share": g.share(g.thermal_s), "power_share": g.share(g.power_s),
             "ecc_corrected_new": g.ecc_corrected if g.ecc_counted else None,
             "ecc_uncorrected_new": g.ecc_uncorrected if g.ecc_counted else None}
            for g in a.gpu_health
        ],
        "forwarded_ports": forwarded_ports(a),
        "drift": [{"what": d.what, "check": id_of(FIX_CHECKS[d.fix]), "text": d.text, "last": _ts(d.t)} for d in a.drift],
        "boots": [{"boot_id": b.boot_id, "first": _ts(b.first_t), "last": _ts(b.last_t), "clean": b.clean,
                   "evidence": b.evidence} for b in a.boots],
        "events": [{"t": _ts(e.t), "kind": e.kind, "detail": e.detail} for e in a.events
                   if e.kind not in ("recorder_start", "recorder_stop")],
        "platforms": [
            {"rule": s.rule_id, "platform": s.platform, "score": s.score, "verdict": s.verdict, "summary": s.summary,
             "numbers": s.numbers, "rule_text": " ".join(s.rule["rule"].split()),
             "status": " ".join(str(s.rule.get("status", "")).split()) or None,
             "applied": " ".join(str(s.rule.get("applied", "")).split()) or None,
             "disagreement": " ".join(str(s.rule.get("disagreement", "")).split()) or None,
             "sources": s.rule["sources"]}
            for s in scores
        ],
    }  # fmt: skip


def forwarded_ports(a: Analysis) -> list[dict[str, Any]]:
    """Per forwarded port: how many checks through the probe server found it reachable."""
    ports: dict[str, dict[str, Any]] = {}
    for e in a.events:
        if e.kind != "inbound":
            continue
        for p in e.detail.get("ports") or []:
            row = ports.setdefault(f"{p.get('port')}/{p.get('proto')}", {"port": f"{p.get('port')}/{p.get('proto')}",
                                                                          "checks": 0, "reachable": 0, "last": None})
            row["checks"] += 1
            row["reachable"] += p.get("result") == InboundResult.REACHABLE
            row["last"] = p.get("result")
    return list(ports.values())


def _event_line(e: dict[str, Any]) -> str:
    d = e["detail"]
    kind = e["kind"]
    if kind == "xid":
        action = d.get("immediate") or "no action given by the catalogue"
        effect = {"out_of_service": ": the GPU is out of service until reset or reboot", "app": ": the application must restart"}
        hw = ", points at hardware" if d.get("hardware") else ""
        said = (f"Xid {d.get('code')} on {d.get('bus')}: {d.get('name')}" if d.get("numbered", True) else
                f"GPU {d.get('bus') or '(bus not named)'} fell off the bus, with no Xid number (counted as Xid {d.get('code')})")
        return f"{said} (NVIDIA's catalogue: {action}{effect.get(d.get('effect'), '')}{hw})"
    if kind == "clock_jump":
        return f"wall clock stepped by {d.get('step_s'):+g} s (outages are measured on the boot clock; nothing lost)"
    if kind == "ecc" and d.get("available") is False:
        return f"GPU {d.get('gpu')} ECC: no counts ({d.get('reason')})"
    if kind == "ecc":
        return f"GPU {d.get('gpu')} ECC errors: +{d.get('corrected_new')} corrected, +{d.get('uncorrected_new')} uncorrected"
    if kind == "power_source":
        if not d.get("readable", True):
            return f"power source not readable: {d.get('reason')}"
        if not d.get("battery_present"):
            return "power source: no battery (mains only)"
        return f"power source: {d.get('on')} (was {d.get('previous') or 'not yet seen'})"
    if kind == "ups":
        if not d.get("available"):
            return f"UPS: not watched ({d.get('reason')})"
        return f"UPS {d.get('ups')}: {d.get('status')} (was {d.get('previous') or 'not yet seen'}), charge {d.get('battery.charge', '?')} %"
    if kind == "cgnat":
        return f"CGNAT re-check: {d.get('verdict')} (was {d.get('previous') or 'not yet checked'})"
    if kind == "inbound":
        if not d.get("probed"):
            return f"forwarded ports not checked: {d.get('reason')}"
        return "forwarded ports: " + ", ".join(f"{p['port']}/{p['proto']} {p['result']}" for p in d.get("ports", []))
    if kind == "nvml":
        where = f"GPU {d['gpu']}: " if "gpu" in d else ""
        if d.get("error") is None and "previous" in d:
            return f"NVML: {where}readable again"
        return f"NVML failed: {where}{d.get('error')}"
    if kind == "throttle":
        return f"GPU {d.get('gpu')} clock event reasons: {', '.join(d.get('reasons') or []) or 'none'}"
    if kind == "notify":
        if d.get("ok"):
            dropped = f" ({d['dropped']} dropped meanwhile)" if d.get("dropped") else ""
            return f"notifications to the {d.get('destination')} delivered again{dropped}"
        return f"notifications to the {d.get('destination')} failing: {d.get('error')}"
    if kind == "retention":
        return f"retention dropped {d.get('deleted_rows')} old rows"
    if kind == "aer":
        return f"PCIe AER {d.get('severity')}: {d.get('line', '')[:120]}"
    if kind == "package":
        return f"package {d.get('action')} {d.get('package')} {d.get('old')} -> {d.get('new')}"
    if kind == "public_address":
        return f"public address {d.get('previous') or '(first seen)'} -> {d.get('address')}"
    if kind == "boot":
        return f"boot {str(d.get('boot_id'))[:8]}: previous end clean={d.get('clean')} ({d.get('evidence')})"
    return f"{kind}: {json.dumps(d, sort_keys=True)[:160]}"


def _window(a: Analysis, w: dict[str, Any]) -> list[str]:
    if a.window_start is None:
        return ["Window: no sample recorded yet (the recorder stopped before its first sample, or has only "
                "just started)", "Uptime: unknown until the first sample"]
    return [f"Window: {w['start']} to {w['end']} UTC, {_dur(a.observed_s)} observed"
            + (f", {_dur(a.not_recorded_s)} not recorded (left out)" if a.not_recorded_s else ""),
            f"Uptime: {_pct(a.uptime)} (up {_dur(a.up_s)}, down {_dur(a.down_s)})"]


def _summary(a: Analysis, data: dict[str, Any], db: str, width: int) -> list[str]:
    """The answer: the window and uptime, each platform's verdict by its published rule, the
    outages in one line each (the longest first, at most MAX_OUTAGES), and where the rest is."""
    w = data["window"]
    out = [f"Reliability rehearsal: {escape_text(db)}", "", *_window(a, w), ""]
    rows = [[s["platform"], s["verdict"], s["summary"]] for s in data["platforms"]]
    out += _table(["platform", "verdict", "by its published rule"], rows, False)
    outages = sorted(data["outages"], key=lambda o: -o["seconds"])
    out += ["", f"Outages: {len(outages)}" + (", the longest first:" if outages else "")]
    out += [f"- {o['start']} {_dur(o['seconds'])} {o['cause']}: {escape_text(o['note'])}" for o in outages[:MAX_OUTAGES]]
    if len(outages) > MAX_OUTAGES:
        out.append(f"- ... and {len(outages) - MAX_OUTAGES} more")
    out += ["", "Each rule's text and sources, every day, the timeline, every outage, GPU health and the events: "
                "`hostcheck watch report --details`."]
    return _fit(out, width)


MAX_OUTAGES = 5


def watch_text(a: Analysis, scores: list[RuleScore], db: str, markdown: bool = False, details: bool = True) -> str:
    """The report as terminal text (without ``details``, the answer alone: :func:`_summary`), or
    as Markdown (the formats call this; JSON is :func:`to_json`)."""
    data = to_json(a, scores, db)
    md = markdown
    width = terminal_width()
    if not md and not details:
        return "\n".join(_summary(a, data, db, width)) + "\n"
    out: list[str] = []
    head = "# " if md else ""
    sub = "\n## " if md else "\n"
    out.append(f"{head}Reliability rehearsal: {escape_text(db)}")
    w = data["window"]
    out.append("")
    out += _window(a, w)
    out.append(f"{sub}Per platform\n" if md else f"{sub}Per platform")
    rows = [[s["platform"], s["verdict"], s["summary"]] for s in data["platforms"]]
    out += [*_table(["platform", "verdict", "by its published rule"], rows, md), ""]
    for s in data["platforms"]:
        out.append(f"- {s['platform']}: {s['rule_text']}")
        if s["status"]:
            out.append(f"  Status: {s['status']}")
        if s["applied"]:
            out.append(f"  Applied: {s['applied']}")
        if s["disagreement"]:
            out.append(f"  {s['disagreement']}")
        for src in s["sources"]:
            out.append(f"  Source: {src['title']}, <{src['url']}> ({src['status']}, read {src['checked']})")
    out.append(f"{sub}Per day (UTC)\n" if md else f"{sub}Per day (UTC)")
    out += _table(["day", "uptime", "up", "down", "not recorded"],
                  [[d["day"], _pct(d["uptime"]), _dur(d["up_s"]), _dur(d["down_s"]), _dur(d["not_recorded_s"])]
                   for d in a.per_day], md)
    out.append(f"{sub}{timeline_title(a)}\n" if md else f"{sub}{timeline_title(a)}")
    chart = timeline(a)
    out += (["```"] if md else []) + chart + [LEGEND] + (["```"] if md else [])
    out.append(f"{sub}Outages\n" if md else f"{sub}Outages")
    if data["outages"]:
        out += _table(["start (UTC)", "end (UTC)", "length", "cause", "evidence"],
                      [[o["start"], o["end"], _dur(o["seconds"]), o["cause"], escape_text(o["note"])] for o in data["outages"]], md)
    else:
        out.append("none")
    if data["gpu_health"]:
        out.append(f"{sub}GPU health (NVML counters)\n" if md else f"{sub}GPU health (NVML counters)")
        out += _table(["gpu", "thermal slowdown", "power cap", "over", "ECC new (corrected / uncorrected)"],
                      [[str(g["gpu"]), _share(g["thermal_s"], g["thermal_share"]), _share(g["power_s"], g["power_share"]),
                        _dur(g["counted_s"]), "no ECC counts" if g["ecc_corrected_new"] is None
                        else f"{g['ecc_corrected_new']} / {g['ecc_uncorrected_new']}"]
                       for g in data["gpu_health"]], md)
    if data["forwarded_ports"]:
        out.append(f"{sub}Forwarded ports (checked through the probe server)\n" if md else f"{sub}Forwarded ports (checked through the probe server)")
        out += _table(["port", "checks", "reachable", "last"],
                      [[p["port"], str(p["checks"]), str(p["reachable"]), str(p["last"])] for p in data["forwarded_ports"]], md)
    if data["drift"]:
        out.append(f"{sub}Drift\n" if md else f"{sub}Drift")
        out += [f"- {escape_text(d['text'])} (fix: `hostcheck explain {d['check']}`)" for d in data["drift"]]
    if data["not_recorded"]:
        out.append(f"{sub}Not recorded\n" if md else f"{sub}Not recorded")
        out += _table(["start (UTC)", "end (UTC)", "length", "why"],
                      [[g["start"], g["end"], _dur(g["seconds"]), escape_text(g["reason"])] for g in data["not_recorded"]], md)
    notable = [e for e in data["events"] if e["kind"] in ("xid", "aer", "package", "public_address", "boot", "clock_jump",
                                                          "suspend", "gap", "journal", "nvml", "throttle", "ecc",
                                                          "power_source", "ups", "cgnat", "inbound", "retention")]
    out.append(f"{sub}Events\n" if md else f"{sub}Events")
    out += [f"- {e['t']} {escape_text(_event_line(e))}" for e in _changes_only(notable)[-200:]] or ["none"]
    if md:
        return "\n".join(out) + "\n"
    return "\n".join(_fit(out, width)) + "\n"


def _fit(lines: list[str], width: int) -> list[str]:
    """Terminal lines wrapped to ``width``, continuations indented under their text; table rows
    (already laid out to the width by :func:`_table`) and the timeline's cells are left whole."""
    out: list[str] = []
    for line in lines:
        for part in line.split("\n"):
            if len(part) <= width or "|" in part:
                out.append(part.rstrip())
                continue
            lead = part[: len(part) - len(part.lstrip())]
            hang = lead + ("  " if part.lstrip().startswith("- ") or lead else "")
            out += wrap(part.strip(), width, first=lead, indent=hang or "  ")
    return out


STATE_KINDS = ("throttle", "power_source", "ups", "cgnat", "journal", "ecc")


def _changes_only(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """State events as changes: each run of the recorder records where things stand when it
    starts; a state the previous run already recorded is not shown again."""
    last: dict[tuple[str, str], str] = {}
    out = []
    for e in events:
        if e["kind"] in STATE_KINDS:
            d = {k: v for k, v in e["detail"].items() if k != "previous"}
            key = (e["kind"], str(d.get("gpu", d.get("ups", ""))))
            shown = json.dumps(d, sort_keys=True)
            if last.get(key) == shown:
                continue
            last[key] = shown
        out.append(e)
    return out


def _table(header: list[str], rows: list[list[str]], md: bool) -> list[str]:
    rows = [[escape_text(str(c)) for c in r] for r in rows]
    if md:
        esc = [[c.replace("|", "\\|") for c in r] for r in rows]
        return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in esc]
    return columns(header, rows, terminal_width(), rule=True)


__all__ = ["DOWN_CAUSES", "timeline", "to_json", "watch_text"]
