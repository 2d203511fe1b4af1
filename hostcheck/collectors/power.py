"""Power facts: chassis type (SMBIOS), batteries and AC, and whether systemd may sleep."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hostcheck.collectors._run import read_text, run_command
from hostcheck.facts import Unknown

SECTION = "power"
TIMEOUT = 2

CHASSIS_TYPE_FILE = Path("/sys/class/dmi/id/chassis_type")
POWER_SUPPLY_DIR = Path("/sys/class/power_supply")
SLEEP_TARGETS = ("sleep.target", "suspend.target", "hibernate.target", "hybrid-sleep.target")

# SMBIOS 3.x "System Enclosure or Chassis Types".
_LAPTOP_CODES = frozenset({8, 9, 10, 14, 30, 31, 32})
_DESKTOP_CODES = frozenset({3, 4, 5, 6, 7, 13, 15, 16, 35, 36})
_SERVER_CODES = frozenset({17, 23, 28, 29})
_SUPPLY_ATTRS = ("type", "online", "capacity", "status", "scope", "present")


def chassis_kind(code: int) -> str:
    if code in _LAPTOP_CODES:
        return "laptop"
    if code in _DESKTOP_CODES:
        return "desktop"
    if code in _SERVER_CODES:
        return "server"
    return "other"


def parse_chassis_type(text: str) -> int | Unknown:
    value = text.strip()
    # Only the low 7 bits are the type; bit 7 is the "chassis lock present" flag.
    if value.isascii() and value.isdigit():
        return int(value) & 0x7F
    return Unknown(f"unreadable DMI chassis type {value[:40]!r}")


def read_chassis(path: Path = CHASSIS_TYPE_FILE) -> tuple[str | Unknown, int | Unknown]:
    """(kind, SMBIOS code) of this machine; also used by the GPU collector for laptop detection."""
    text = read_text(path)
    if isinstance(text, Unknown):
        reason = f"no DMI chassis type: {text.reason} (no SMBIOS tables, or hidden in this container)"
        return Unknown(reason), Unknown(reason)
    code = parse_chassis_type(text)
    if isinstance(code, Unknown):
        return code, code
    return chassis_kind(code), code


def _int_or_unknown(value: str | None, what: str) -> int | Unknown:
    if value is not None and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    return Unknown(f"{what} not reported")


def parse_power_supply(supplies: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Batteries and AC state from the attributes of each /sys/class/power_supply entry."""
    batteries = []
    ac_online: list[bool] = []
    for name, attrs in sorted(supplies.items()):
        if not isinstance(attrs, dict):
            continue
        kind = str(attrs.get("type", "")).strip()
        if kind == "Battery":
            # Mouse and headset batteries are scope "Device"; an empty bay reports present=0.
            if (
                str(attrs.get("scope", "")).strip() == "Device"
                or str(attrs.get("present", "1")).strip() == "0"
            ):
                continue
            status = str(attrs.get("status", "")).strip()
            batteries.append(
                {
                    "name": name,
                    "capacity_pct": _int_or_unknown(attrs.get("capacity"), f"{name} capacity"),
                    "status": status or Unknown(f"{name} status not reported"),
                }
            )
        elif kind in ("Mains", "USB") and str(attrs.get("scope", "")).strip() != "Device":
            online = str(attrs.get("online", "")).strip()
            if online in ("0", "1"):
                ac_online.append(online == "1")
    on_ac: bool | Unknown
    if any(ac_online):
        on_ac = True
    elif not batteries:
        on_ac = True  # nothing but the wall can power a machine without a battery
    elif any(b["status"] == "Discharging" for b in batteries):
        on_ac = False
    elif ac_online:
        on_ac = False
    elif any(b["status"] in ("Charging", "Full") for b in batteries):
        on_ac = True
    else:
        on_ac = Unknown("battery present but no AC adapter state or battery status reported")
    return {"battery_present": bool(batteries), "on_ac": on_ac, "batteries": batteries}


def read_power_supplies(root: Path = POWER_SUPPLY_DIR) -> dict[str, dict[str, str]] | Unknown:
    try:
        names = sorted(os.listdir(root))
    except OSError as exc:
        return Unknown(f"cannot list {root}: {exc.strerror or exc}")
    supplies: dict[str, dict[str, str]] = {}
    for name in names:
        attrs = {}
        for attr in _SUPPLY_ATTRS:
            text = read_text(root / name / attr, limit=256)
            if not isinstance(text, Unknown):
                attrs[attr] = text.strip()
        supplies[name] = attrs
    return supplies


def parse_is_enabled(stdout: str, units: tuple[str, ...]) -> dict[str, str] | None:
    """Map `systemctl is-enabled U1 U2 ...` output to units; None when lines are missing.

    systemctl stops at the first unit it cannot find, so a short answer cannot be aligned.
    """
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if len(lines) != len(units):
        return None
    return dict(zip(units, lines, strict=False))


def _state_of(unit: str) -> str | Unknown:
    res = run_command(["systemctl", "is-enabled", unit], timeout=0.5)
    if isinstance(res, Unknown):
        return res
    state = res.stdout.strip()
    if state:
        return state
    return Unknown(f"systemctl is-enabled {unit}: {res.stderr.strip()[:200] or f'exit {res.returncode}'}")


def sleep_targets(systemd_running: bool | None = None) -> dict[str, str | Unknown] | Unknown:
    res = run_command(["systemctl", "is-enabled", *SLEEP_TARGETS], timeout=1.5)
    if isinstance(res, Unknown):
        return Unknown(f"cannot ask systemd about sleep targets: {res.reason}")
    parsed = parse_is_enabled(res.stdout, SLEEP_TARGETS)
    states: dict[str, str | Unknown] = (
        dict(parsed) if parsed is not None else {unit: _state_of(unit) for unit in SLEEP_TARGETS}
    )
    if systemd_running is None:
        systemd_running = os.path.isdir("/run/systemd/system")  # sd_booted()'s test
    if not systemd_running:
        # Unit files exist but systemd is not the init: something else decides about sleep.
        found = ", ".join(f"{u}={s}" for u, s in states.items() if isinstance(s, str))
        return Unknown(
            f"systemd is not the running init (no /run/systemd/system); unit files say: {found or 'nothing'}"
        )
    return states


def collect(ctx: Any) -> dict[str, Any]:
    kind, code = read_chassis()
    supplies = read_power_supplies()
    if isinstance(supplies, Unknown):
        supply_facts: dict[str, Any] = {"battery_present": supplies, "on_ac": supplies, "batteries": supplies}
    else:
        supply_facts = parse_power_supply(supplies)
    return {"chassis_type": kind, "chassis_type_code": code, **supply_facts, "sleep_targets": sleep_targets()}
