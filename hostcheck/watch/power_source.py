"""Power events the recorder follows: the power source of a machine with a battery (AC or
battery, from /sys/class/power_supply) and UPS status from NUT (`upsc`), where NUT is there.

`upsc` prints one ``name: value`` line per variable; ``ups.status`` holds NUT's status flags
(OL online, OB on battery, LB low battery, CHRG, DISCHRG, FSD forced shutdown, RB replace
battery, ...). `upsc -l` lists the UPS names that upsd serves on this host.

:class:`PowerSource` and :class:`Ups` are the recorder's samplers: each records a state when it
differs from the last one recorded in the run (an unreadable source once per reason).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostcheck.collectors._run import run_command
from hostcheck.collectors.power import POWER_SUPPLY_DIR, parse_power_supply, read_power_supplies
from hostcheck.facts import Unknown
from hostcheck.watch.sampler import Sink, Tick

UPSC_TIMEOUT_S = 5.0
MAX_UPS = 4
UPS_FIELDS = ("ups.status", "battery.charge", "battery.runtime", "input.voltage", "ups.alarm")


@dataclass(frozen=True)
class UpsReading:
    name: str
    status: str  # NUT's flags, as upsd reports them ("OL", "OB DISCHRG", ...)
    values: dict[str, str]

    @property
    def on_battery(self) -> bool:
        return "OB" in self.status.split()


def parse_upsc(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


def _output(argv: list[str], what: str) -> str | Unknown:
    """The command's standard output, or why there is none."""
    result = run_command(argv, timeout=UPSC_TIMEOUT_S)
    if isinstance(result, Unknown):
        return result
    if result.returncode != 0:
        # upsc says "Init SSL without certificate database" on every run: not the error.
        lines = [ln for ln in result.stderr.splitlines() if ln.strip() and not ln.startswith("Init SSL")]
        return Unknown(f"{what} failed: {(lines[-1:] or [f'exit {result.returncode}'])[0][:200]}")
    return result.stdout


def read_ups(command: list[str]) -> list[UpsReading] | Unknown:
    """Every UPS upsd serves here (at most MAX_UPS), or why none can be read."""
    listing = _output([*command, "-l"], "upsc -l")
    if isinstance(listing, Unknown):
        return listing
    names = [ln.strip() for ln in listing.splitlines() if ln.strip() and " " not in ln.strip()]
    if not names:
        return Unknown("upsd serves no UPS on this host")
    readings = []
    for name in names[:MAX_UPS]:
        text = _output([*command, name], f"upsc {name}")
        if isinstance(text, Unknown):
            readings.append(UpsReading(name, "unknown", {"error": text.reason}))
            continue
        values = parse_upsc(text)
        readings.append(UpsReading(name, values.get("ups.status", "unknown"),
                                   {k: values[k] for k in UPS_FIELDS if k in values}))
    return readings


def power_source(root: Path = POWER_SUPPLY_DIR) -> dict[str, Any] | Unknown:
    """{"on_ac": True/False/None, "battery_present": bool, "batteries": [...]}; None: not reported."""
    supplies = read_power_supplies(root)
    if isinstance(supplies, Unknown):
        return supplies
    parsed = parse_power_supply(supplies)
    on_ac = parsed["on_ac"]
    return {
        "on_ac": None if isinstance(on_ac, Unknown) else bool(on_ac),
        "battery_present": parsed["battery_present"],
        "batteries": [
            {"name": b["name"], "capacity_pct": None if isinstance(b["capacity_pct"], Unknown) else b["capacity_pct"],
             "status": None if isinstance(b["status"], Unknown) else b["status"]}
            for b in parsed["batteries"]
        ],
    }  # fmt: skip


class PowerSource:
    name = "power"

    def __init__(self, root: Path = POWER_SUPPLY_DIR) -> None:
        self.root = root

    def sample(self, tick: Tick, out: Sink) -> None:
        source = power_source(self.root)
        if isinstance(source, Unknown):
            out.state("power_source", source.reason, "power_source", {"readable": False, "reason": source.reason})
            return
        if not source["battery_present"]:
            out.state("power_source", "no battery", "power_source",
                      {"readable": True, "battery_present": False, "on_ac": source["on_ac"]})
            return
        state = "ac" if source["on_ac"] else ("battery" if source["on_ac"] is False else "unknown")
        out.state("power_source", state, "power_source",
                  {"readable": True, "battery_present": True, "on": state, "batteries": source["batteries"]})


class Ups:
    name = "ups"

    def __init__(self, command: list[str]) -> None:
        self.command = command

    def sample(self, tick: Tick, out: Sink) -> None:
        readings = read_ups(self.command)
        if isinstance(readings, Unknown):
            # Recorded once per reason: NUT not installed, upsd not running, no UPS configured.
            out.state("ups", readings.reason, "ups", {"available": False, "reason": readings.reason})
            return
        for r in readings:
            out.state(f"ups:{r.name}", r.status, "ups",
                      {"available": True, "ups": r.name, "status": r.status, "on_battery": r.on_battery, **r.values})
