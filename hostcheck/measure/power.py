"""Power figures for hosting: what the GPU, the CPU package and the rest of the machine draw.

Every figure carries its provenance (measured, estimated, given, unknown) and a sentence saying
how it was obtained; a missing reading is unknown with its reason, never a silent zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


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


@dataclass(frozen=True)
class PowerEstimate:
    gpu_idle: PowerFigure
    gpu_load: PowerFigure
    cpu_package: PowerFigure
    rest_of_system: PowerFigure
    wall_idle: PowerFigure
    wall_load: PowerFigure


def estimate_power(
    facts: dict[str, Any],
    *,
    sample_seconds: float = 0.0,
    wall_idle_w: float | None = None,
    wall_load_w: float | None = None,
) -> PowerEstimate:
    """Power figures from the facts (and, when ``sample_seconds`` > 0, live readings)."""
    raise NotImplementedError("filled in next")
