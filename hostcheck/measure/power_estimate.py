"""Power figures for hosting: what the GPUs, the CPU package and the rest of the machine draw,
idle (listed, waiting for a renter) and under load.

Every figure carries its provenance (measured, estimated, given, unknown) and a sentence saying
how it was obtained; a missing reading is unknown with its reason, never a silent zero. The wall
figures follow wall = (P_gpu + P_cpu_package + P_rest) / PSU efficiency (research notes,
economics.md section 5); the constants below are hostcheck's stated assumptions, to be replaced
by the owner's own smart-plug reading where there is one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from hostcheck.collectors.power_draw import MAX_SAMPLE_S, PowerReadings, Reading
from hostcheck.errors import InputError
from hostcheck.facts import Unknown

MAX_WALL_W = 20_000.0

# Rest of the system (board, RAM, drives, fans): nothing in software reads these. Assumptions
# (inference, not a measurement), by chassis kind.
REST_OF_SYSTEM_W = {"laptop": 8.0, "desktop": 30.0, "server": 60.0, "other": 30.0}
KIND_TEXT = {"laptop": "a laptop", "desktop": "a desktop", "server": "a server", "other": "a machine of unknown kind"}
# CPU package when RAPL cannot be read: idle, and while feeding a rented GPU (one or two busy
# cores, not an all-core load). Assumptions as well.
CPU_IDLE_W = {"laptop": 5.0, "desktop": 15.0, "server": 40.0, "other": 15.0}
CPU_LOAD_W = {"laptop": 15.0, "desktop": 35.0, "server": 60.0, "other": 35.0}
# PSU efficiency: nothing reads it, so these are assumptions, each anchored to a published minimum
# (read 2026-12-03). A laptop's charger at the EU's minimum average active efficiency for an
# external power supply above 49 W, 0.880 (Regulation (EU) 2019/1782, Annex I, Table 2;
# https://www.legislation.gov.uk/eur/2019/1782). Any other machine's supply at the 80 PLUS Bronze
# minimum, 85 % at half load on 115 V (https://en.wikipedia.org/wiki/80_Plus, the programme's
# table): a supply that is uncertified or runs at a light load does worse, so the wall estimate
# is then low; the owner's wall reading replaces it.
PSU_EFFICIENCY = {"laptop": 0.88, "desktop": 0.85, "server": 0.85, "other": 0.85}
PSU_SOURCE = {
    "laptop": "assumed: a charger at the EU minimum for external power supplies above 49 W, Regulation 2019/1782",
    "desktop": "assumed: an 80 PLUS Bronze supply at half load, its certified minimum",
    "server": "assumed: an 80 PLUS Bronze supply at half load, its certified minimum",
    "other": "assumed: an 80 PLUS Bronze supply at half load, its certified minimum",
}


class Provenance(StrEnum):
    MEASURED = "measured"
    ESTIMATED = "estimated"
    GIVEN = "given"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class PowerFigure:
    watts: float | None  # None only when provenance is UNKNOWN
    provenance: Provenance
    how: str

    def __post_init__(self) -> None:
        if (self.watts is None) != (self.provenance is Provenance.UNKNOWN):
            raise ValueError("a power figure has watts exactly when its provenance is not unknown")


@dataclass(frozen=True)
class PowerEstimate:
    gpu_idle: PowerFigure
    gpu_load: PowerFigure
    cpu_package: PowerFigure
    rest_of_system: PowerFigure
    wall_idle: PowerFigure
    wall_load: PowerFigure
    ordering: str | None = None  # a sentence when an estimate gave way to the user's reading

    def as_dict(self) -> dict[str, Any]:
        return {name: {**asdict(fig), "provenance": str(fig.provenance)} for name, fig in vars(self).items()
                if isinstance(fig, PowerFigure)}


def unknown(reason: str) -> PowerFigure:
    return PowerFigure(None, Provenance.UNKNOWN, f"unknown: {reason}")


def _fig(watts: float, provenance: Provenance, how: str) -> PowerFigure:
    return PowerFigure(round(watts, 1), provenance, how)


def check_wall_reading(value: float | None, field: str) -> float | None:
    """A wall-socket reading the user gave: a finite number of watts above 0 (InputError names the field)."""
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise InputError(f"{field} must be a number of watts, not {value!r}")
    if not 0 < value <= MAX_WALL_W:
        raise InputError(f"{field} must be above 0 and at most {MAX_WALL_W:g} W, not {value:g}")
    return float(value)


def check_sample_seconds(seconds: float, what: str = "the sampling window") -> None:
    """Refuse a power sampling window outside 0 (none: the facts only) to MAX_SAMPLE_S; ``what`` names it."""
    if not (math.isfinite(seconds) and 0 <= seconds <= MAX_SAMPLE_S):
        raise InputError(f"{what} must be 0-{MAX_SAMPLE_S:g} seconds, not {seconds}")


def chassis_kind(facts: dict[str, Any]) -> str:
    power = facts.get("power")
    kind = power.get("chassis_type") if isinstance(power, dict) else None
    return kind if isinstance(kind, str) and kind in REST_OF_SYSTEM_W else "other"


def _devices(facts: dict[str, Any]) -> list[dict[str, Any]] | Unknown:
    gpu = facts.get("gpu")
    if not isinstance(gpu, dict):
        return Unknown("no GPU facts" if gpu is None else getattr(gpu, "reason", "no GPU facts"))
    devices = gpu.get("devices")
    if isinstance(devices, Unknown):
        return devices
    if not isinstance(devices, list):
        return Unknown("no GPU device list in the facts")
    if not devices:
        return Unknown("NVML sees no NVIDIA GPU")
    return [d for d in devices if isinstance(d, dict)]


def _sum_field(devices: list[dict[str, Any]], key: str) -> tuple[float, list[str]] | Unknown:
    total, parts = 0.0, []
    for dev in devices:
        value = dev.get(key)
        if isinstance(value, Unknown):
            return Unknown(f"GPU {dev.get('index', '?')}: {value.reason}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            return Unknown(f"GPU {dev.get('index', '?')}: no {key} in the facts")
        total += float(value)
        parts.append(f"GPU {dev.get('index', '?')} {float(value):g} W")
    return total, parts


def gpu_idle_figure(facts: dict[str, Any], readings: PowerReadings | None) -> PowerFigure:
    if readings is not None and not isinstance(readings.gpus, Unknown) and readings.gpus:
        bad = [r for r in readings.gpus if isinstance(r.watts, Unknown)]
        if not bad:
            total = sum(float(r.watts) for r in readings.gpus if not isinstance(r.watts, Unknown))
            return _fig(total, Provenance.MEASURED, "; ".join(r.how for r in readings.gpus))
    devices = _devices(facts)
    if isinstance(devices, Unknown):
        return unknown(devices.reason)
    summed = _sum_field(devices, "power_draw_w")
    if isinstance(summed, Unknown):
        if readings is not None and isinstance(readings.gpus, Unknown):
            return unknown(readings.gpus.reason)
        return unknown(summed.reason)
    total, parts = summed
    return _fig(
        total,
        Provenance.MEASURED,
        f"one NVML power reading when the facts were collected ({', '.join(parts)}); "
        "not an idle average: sample a window for that",
    )


def gpu_load_figure(facts: dict[str, Any]) -> PowerFigure:
    devices = _devices(facts)
    if isinstance(devices, Unknown):
        return unknown(devices.reason)
    summed = _sum_field(devices, "power_limit_w")
    if isinstance(summed, Unknown):
        return unknown(summed.reason)
    total, parts = summed
    return _fig(
        total, Provenance.ESTIMATED, f"enforced power limit ({', '.join(parts)}): the most the GPU draws under load"
    )


def cpu_package_figure(readings: PowerReadings | None) -> PowerFigure:
    if readings is None:
        return unknown("not sampled (give a sampling window; RAPL's energy counter needs root)")
    reading: Reading = readings.cpu_package
    if isinstance(reading.watts, Unknown):
        return unknown(reading.watts.reason)
    return _fig(float(reading.watts), Provenance.MEASURED, reading.how)


def _given(watts: float, what: str) -> PowerFigure:
    return _fig(watts, Provenance.GIVEN, f"{what} given by the owner (wall-socket meter or smart plug)")


def estimate_power(
    facts: dict[str, Any],
    *,
    wall_idle_w: float | None = None,
    wall_load_w: float | None = None,
    readings: PowerReadings | None = None,
) -> PowerEstimate:
    """Power figures from the facts and, when ``readings`` are handed in (taken by
    :func:`hostcheck.collectors.power_draw.sample_power` at idle), from those readings."""
    wall_idle_given = check_wall_reading(wall_idle_w, "wall_idle_w")
    wall_load_given = check_wall_reading(wall_load_w, "wall_load_w")
    check_wall_pair(wall_idle_given, wall_load_given)
    kind = chassis_kind(facts)
    gpu_idle = gpu_idle_figure(facts, readings)
    gpu_load = gpu_load_figure(facts)
    cpu = cpu_package_figure(readings)
    rest = _fig(
        REST_OF_SYSTEM_W[kind],
        Provenance.ESTIMATED,
        f"hostcheck's assumption for {KIND_TEXT[kind]} (board, RAM, drives, fans: nothing in software reads them)",
    )
    rest_w = REST_OF_SYSTEM_W[kind]
    eff, eff_source = PSU_EFFICIENCY[kind], PSU_SOURCE[kind]

    def cpu_part(load: bool) -> tuple[float, str]:
        if cpu.watts is not None and not load:
            return cpu.watts, f"CPU package {cpu.watts:g} W measured"
        assumed = (CPU_LOAD_W if load else CPU_IDLE_W)[kind]
        if cpu.watts is not None:
            assumed = max(assumed, cpu.watts)
        return assumed, f"CPU package {assumed:g} W assumed for {KIND_TEXT[kind]} {'feeding a GPU job' if load else 'at idle'}"

    def wall(gpu: PowerFigure, load: bool) -> PowerFigure:
        if gpu.watts is None:
            return unknown(f"the GPU's draw is unknown ({gpu.how.removeprefix('unknown: ')}); give a wall reading")
        cpu_w, cpu_how = cpu_part(load)
        total = (gpu.watts + cpu_w + rest_w) / eff
        return _fig(
            total,
            Provenance.ESTIMATED,
            f"(GPU {gpu.watts:g} W {gpu.provenance} + {cpu_how} + rest {rest_w:g} W assumed) "
            f"/ PSU efficiency {eff:g} ({eff_source})",
        )

    if wall_idle_given is not None:
        wall_idle = _given(wall_idle_given, "wall-socket reading at idle")
    elif readings is not None and not isinstance(readings.battery.watts, Unknown):
        battery_w = float(readings.battery.watts)
        wall_idle = _fig(
            battery_w / PSU_EFFICIENCY["laptop"],
            Provenance.ESTIMATED,
            f"{readings.battery.how}: {battery_w:g} W measured, / charger efficiency "
            f"{PSU_EFFICIENCY['laptop']:g} ({PSU_SOURCE['laptop']})",
        )
    else:
        wall_idle = wall(gpu_idle, load=False)
    wall_load = _given(wall_load_given, "wall-socket reading under load") if wall_load_given else wall(gpu_load, True)
    ordered_idle, ordered_load = _ordered(wall_idle, wall_load)
    ordering = None
    if ordered_load is not wall_load:
        ordering = (f"the draw under load is taken as {ordered_load.watts:g} W, at least the idle figure "
                    f"({wall_idle.provenance}): the estimate from its parts ({wall_load.watts:g} W) is below it")
    elif ordered_idle is not wall_idle:
        ordering = (f"the idle draw is taken as {ordered_idle.watts:g} W, at most your reading under load: "
                    f"the estimate ({wall_idle.watts:g} W) is above it")
    return PowerEstimate(gpu_idle, gpu_load, cpu, rest, ordered_idle, ordered_load, ordering)


def check_wall_pair(wall_idle_w: float | None, wall_load_w: float | None, idle_field: str = "wall_idle_w",
                    load_field: str = "wall_load_w") -> None:
    """Two readings the user gave: the machine cannot draw more idle than under load (InputError
    names the idle field)."""
    if wall_idle_w is not None and wall_load_w is not None and wall_idle_w > wall_load_w:
        raise InputError(f"{idle_field}: {wall_idle_w:g} W idle is more than {wall_load_w:g} W under load ({load_field})")


def _ordered(idle: PowerFigure, load: PowerFigure) -> tuple[PowerFigure, PowerFigure]:
    """The draw under load is at least the idle draw. Where one figure is the user's own reading
    and the other an estimate below (or above) it, the reading stands as given and the estimate
    gives way to it, saying so; an estimate never replaces a reading."""
    if idle.watts is None or load.watts is None or idle.watts <= load.watts:
        return idle, load
    if load.provenance is Provenance.GIVEN:
        # The user's load reading stands; the idle estimate cannot exceed it.
        return _fig(load.watts, Provenance.ESTIMATED,
                    f"at most the reading under load you gave ({load.watts:g} W): the estimate, {idle.watts:g} W "
                    f"({idle.how}), is above it"), load
    raised = _fig(idle.watts, Provenance.ESTIMATED,
                  f"at least the idle figure ({idle.watts:g} W, {idle.provenance}): the estimate from its parts, "
                  f"{load.watts:g} W ({load.how}), is below it; give a wall reading under load (--wall-load-w)")
    return idle, raised
