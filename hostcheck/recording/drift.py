"""What drifted during a recording, from the recorder's ``drift`` events. Pure functions.

The recorder records each value when it differs from the last one it recorded in that run, and
every run starts by recording where things stand, so a value seen again is not a change: only
a value that differs from the one before it counts. Unknown readings (a link that is down, a
file that could not be read) neither count as a change nor break a run of the same value.
Each line names what the audit judges it by (``fix``: the forwarded range, the link's speed or
duplex, the driver's versions, a pending reboot, agent restarts), whose check gives the fix.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from hostcheck.recording.store import Event

MAX_SHOWN_VALUES = 4


@dataclass(frozen=True)
class Drift:
    what: str
    fix: str  # what the audit judges it by: a key of hostcheck.render.watch.FIX_CHECKS
    text: str
    t: float  # when it last changed


def _at(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _known(value: Any) -> bool:
    return value is not None and not (isinstance(value, dict) and ("unknown" in value or "none" in value))


def _runs(events: list[Event]) -> list[tuple[Any, Event]]:
    """The known values in order, each with the event that first recorded it, repeats dropped."""
    runs: list[tuple[Any, Event]] = []
    for e in events:
        value = e.detail.get("value")
        if _known(value) and (not runs or runs[-1][0] != value):
            runs.append((value, e))
    return runs


def _iface(e: Event) -> str:
    name = e.detail.get("interface")
    return name if isinstance(name, str) else "the default route's interface"


def _chain(values: list[Any]) -> str:
    shown = [str(v) for v in values[-MAX_SHOWN_VALUES:]]
    return " -> ".join((["..."] if len(values) > MAX_SHOWN_VALUES else []) + shown)


def _changed(events: list[Event], what: str, noun: str, suffix: str = "") -> Drift | None:
    runs = _runs(events)
    if len(runs) < 2:
        return None
    last = runs[-1][1]
    return Drift(what, "forwarded_range", f"{noun} of {_iface(last)} changed {_times(len(runs) - 1)}{suffix}: "
                 f"{_chain([v for v, _ in runs])}, last at {_at(last.t)}", last.t)


def _link(events: list[Event]) -> Drift | None:
    runs = [(v, e) for v, e in _runs(events)
            if isinstance(v, dict) and isinstance(v.get("speed_mbps"), int) and isinstance(v.get("duplex"), str)]
    runs = [r for i, r in enumerate(runs) if i == 0 or runs[i - 1][0] != r[0]]
    if len(runs) < 2:
        return None
    value, last = runs[-1]
    times = "" if len(runs) == 2 else f" ({_times(len(runs) - 1)} in all)"
    fix = "link_duplex" if value["duplex"] == "half" else "link_speed"
    return Drift("link", fix, f"link {_iface(last)} renegotiated to {value['speed_mbps']} Mb/s {value['duplex']} "
                 f"duplex at {_at(last.t)}{times}", last.t)


def _nvidia(events: list[Event]) -> Drift | None:
    runs = [(v, e) for v, e in _runs(events) if isinstance(v, dict) and isinstance(v.get("library"), str)]
    under = None
    for (before, _), (now, e) in zip(runs, runs[1:], strict=False):
        module = now.get("kernel_module")
        if isinstance(module, str) and module == before.get("kernel_module") and now["library"] != before["library"]:
            under = (before["library"], now["library"], module, e)
    if under is not None:
        old, new, module, e = under
        final = runs[-1][0]
        matched = "; the loaded module now matches" if final.get("kernel_module") == final["library"] else ""
        return Drift("nvidia", "driver_versions", f"NVIDIA library upgraded {old} -> {new} under the loaded module "
                     f"{module} at {_at(e.t)}{matched}", e.t)
    if runs:
        first, e = runs[0]
        module = first.get("kernel_module")
        if isinstance(module, str) and module != first["library"] and runs[-1][0] == first:
            return Drift("nvidia", "driver_versions", f"NVIDIA library {first['library']} and the loaded module {module} "
                         "differ throughout the recording", e.t)
    return None


def _reboot(events: list[Event]) -> Drift | None:
    runs = [(v, e) for v, e in _runs(events) if isinstance(v, bool)]
    pending = [i for i, (v, _) in enumerate(runs) if v]
    if not pending:
        return None
    first = runs[pending[0]][1]
    asked = first.detail.get("packages")
    by = f" (asked by {', '.join(str(p) for p in asked[:3])})" if isinstance(asked, list) and asked else ""
    began = (f"a reboot became pending at {_at(first.t)}" if pending[0] > 0 or first.detail.get("previous") is False
             else "a reboot was pending when the recording began")
    end = "; still pending" if runs[-1][0] else f"; cleared at {_at(runs[-1][1].t)}"
    return Drift("reboot", "reboot_pending", f"{began}{by}{end}", runs[-1][1].t)


def _restarts(events: list[Event]) -> list[Drift]:
    by_unit: dict[str, list[Event]] = {}
    for e in events:
        if isinstance(e.detail.get("unit"), str):
            by_unit.setdefault(e.detail["unit"], []).append(e)
    out = []
    for unit, unit_events in sorted(by_unit.items()):
        counts = [(v, e) for v, e in _runs(unit_events) if isinstance(v, int) and not isinstance(v, bool)]
        # The first reading is the count before the recording; a drop is a restart by hand or a
        # reboot, from which systemd counts again from 0.
        new = sum(now - before if now >= before else now for (before, _), (now, _) in zip(counts, counts[1:], strict=False))
        if new > 0:
            last = counts[-1]
            out.append(Drift("restarts", "agent_restarts", f"{unit} restarted {_times(new)} during the recording, the "
                             f"last by {_at(last[1].t)} (systemd's NRestarts {last[0]})", last[1].t))
    return out


def drift(events: list[Event]) -> list[Drift]:
    """One line per thing that drifted, in a fixed order."""
    of: dict[str, list[Event]] = {}
    for e in events:
        if e.kind == "drift" and isinstance(e.detail.get("what"), str):
            of.setdefault(e.detail["what"], []).append(e)
    dhcp = any(e.detail.get("value") == "dhcp" for e in of.get("addressing", []))
    found = [
        _changed(of.get("lan_address", []), "lan_address", "LAN address", " (DHCP)" if dhcp else ""),
        _changed(of.get("gateway", []), "gateway", "default gateway"),
        _changed(of.get("addressing", []), "addressing", "address assignment"),
        _link(of.get("link", [])),
        _nvidia(of.get("nvidia", [])),
        _reboot(of.get("reboot", [])),
    ]
    return [d for d in found if d is not None] + _restarts(of.get("restarts", []))
