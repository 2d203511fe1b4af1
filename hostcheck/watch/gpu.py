"""The recorder's GPU reading, through NVML (when a GPU answers): each GPU's temperature,
power draw and watched throttle reasons go into the sample; the increase of its thermal and
power violation counters since the previous sample and its ECC counts too.

Unlike the other samplers its reading is part of the sample itself: whether the GPUs are in
service (None: no GPU has answered in this run) and what was read. Events: ``throttle`` when a
GPU's watched throttle reasons change, ``ecc`` when its counts move (or once: none to read),
``nvml`` when a failure starts or ends. A GPU the kernel log took out of service stays out of
service whatever NVML says.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from hostcheck.facts import Unknown
from hostcheck.recording.analysis import GRACE_EXTRA_S
from hostcheck.watch.sampler import Sink, Tick

THROTTLE_WATCHED = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)
CONSECUTIVE_GRACE = 2.0  # two samples at most this many intervals apart are consecutive

GpuReading = tuple[bool | None, dict[str, Any]]


class GpuSampler:
    def __init__(self, nvml: Any, interval_s: float, out_of_service: Callable[[], str | None]) -> None:
        self.nvml = nvml  # a pynvml-like module; None loads the real one at the first sample
        self.interval_s = interval_s
        self.out_of_service = out_of_service  # why the kernel log took the GPUs out of service
        self.nvml_seen = False
        self.errors: dict[str, str | None] = {}  # the NVML failure last recorded per part
        self.last_throttle: dict[str, list[str]] = {}
        self.counters: dict[int, tuple[float, float | None, float | None]] = {}  # gpu -> (boottime, thermal, power)
        self.ecc: dict[int, tuple[int, int]] = {}

    def read(self, tick: Tick, out: Sink) -> GpuReading:
        """The sample's GPU part; a failure of the read is the reason in it, never raised (a
        database error is)."""
        try:
            return self._read(tick.boot, out)
        except sqlite3.Error:
            raise
        except Exception as exc:
            return (False if self.nvml_seen else None), {"nvml": f"{type(exc).__name__}: {exc}"}

    def _read(self, boottime: float, out: Sink) -> GpuReading:
        from hostcheck.collectors.gpu import load_nvml, nvml_facts, recorder_counters

        if self.nvml is None:
            self.nvml = load_nvml()
        if isinstance(self.nvml, Unknown):
            return (False if self.nvml_seen else None), {"nvml": self.nvml.reason}
        facts = nvml_facts(self.nvml)
        if not facts["nvml"]["available"]:
            if self.nvml_seen:
                self._nvml_state(out, "nvml", facts["nvml"]["reason"], {})
            return (False if self.nvml_seen else None), {"nvml": facts["nvml"]["reason"]}
        self.nvml_seen = True
        self._nvml_state(out, "nvml", None, {})
        devices = facts["devices"]
        if isinstance(devices, Unknown):
            self._nvml_state(out, "devices", devices.reason, {})
            return False, {"nvml": devices.reason}
        self._nvml_state(out, "devices", None, {})
        try:
            counters = recorder_counters(self.nvml)
        except Exception as exc:  # the extra counters must never fail the GPU's sample
            counters = Unknown(f"{type(exc).__name__}: {exc}")
        extra = {} if isinstance(counters, Unknown) else {row["index"]: row for row in counters}
        out_of_service = self.out_of_service()
        ok = out_of_service is None
        failure = None if ok else f"out of service since {out_of_service} (NVIDIA's catalogue: reset the GPU or reboot)"
        readings = []
        for dev in devices:
            lost = [k for k, v in dev.items() if isinstance(v, Unknown) and "lost" in v.reason]
            self._nvml_state(out, f"gpu:{dev['index']}", dev[lost[0]].reason if lost else None, {"gpu": dev["index"]})
            if lost:
                ok = False
                failure = failure or f"GPU {dev['index']}: {dev[lost[0]].reason}"
            reasons = dev.get("throttle_reasons")
            watched = sorted(set(reasons) & THROTTLE_WATCHED) if isinstance(reasons, list) else []
            key = str(dev["index"])
            if watched != self.last_throttle.get(key, []):
                out.event("throttle", {"gpu": dev["index"], "reasons": watched})
                self.last_throttle[key] = watched
            reading = {
                "i": dev["index"],
                "temp": None if isinstance(dev.get("temperature_c"), Unknown) else dev.get("temperature_c"),
                "w": None if isinstance(dev.get("power_draw_w"), Unknown) else dev.get("power_draw_w"),
                "thr": watched,
            }
            if not lost:  # a lost GPU's counters cannot be read; its loss is the event
                reading.update(self._violations(dev, extra.get(dev["index"], {}), boottime))
                self._ecc(out, dev["index"], extra.get(dev["index"], {}))
            readings.append(reading)
        return ok, {"gpus": readings, **({"nvml": failure} if failure else {})}

    def _nvml_state(self, out: Sink, source: str, error: str | None, detail: dict[str, Any]) -> None:
        """An NVML failure is recorded when it starts and when it ends, not every sample."""
        if self.errors.get(source) != error:
            previous = self.errors.get(source)
            self.errors[source] = error
            out.event("nvml", {**detail, "error": error, "previous": previous})

    def _violations(self, dev: dict[str, Any], extra: dict[str, Any], boottime: float) -> dict[str, Any]:
        """The increase of NVML's thermal and power violation counters since the previous sample
        (``th``, ``pw`` seconds) and the time between the two reads (``span``). Left out (None)
        when the previous read is not the previous sample of this boot, or a counter went back."""
        index = int(dev["index"])
        thermal = dev.get("thermal_slowdown")
        th_total = float(thermal["total"]) if isinstance(thermal, dict) and isinstance(thermal.get("total"), (int, float)) else None
        pw = extra.get("power_violation_s")
        pw_total = float(pw) if isinstance(pw, (int, float)) else None
        previous = self.counters.get(index)
        self.counters[index] = (boottime, th_total, pw_total)
        if previous is None:
            return {}
        span = boottime - previous[0]
        if not 0 < span <= self.interval_s * CONSECUTIVE_GRACE + GRACE_EXTRA_S:
            return {}

        def delta(now: float | None, before: float | None) -> float | None:
            return None if now is None or before is None or now < before else round(min(now - before, span), 3)

        th, pwd = delta(th_total, previous[1]), delta(pw_total, previous[2])
        if th is None and pwd is None:
            return {}
        return {"th": th, "pw": pwd, "span": round(span, 3)}

    def _ecc(self, out: Sink, index: int, extra: dict[str, Any]) -> None:
        corrected, uncorrected = extra.get("ecc_corrected"), extra.get("ecc_uncorrected")
        if not isinstance(corrected, int) or not isinstance(uncorrected, int):
            # No ECC counts (GeForce cards have none), or NVML could not read them: said once.
            why = corrected.reason if isinstance(corrected, Unknown) else "NVML gave no ECC counts"
            out.state(f"ecc:{index}", "none", "ecc", {"gpu": index, "available": False, "reason": why})
            return
        before = self.ecc.get(index)
        self.ecc[index] = (corrected, uncorrected)
        if before is None or (corrected, uncorrected) == before:
            return
        # Volatile counts start again at a driver reload: a drop is a new start, not new errors.
        new_c = corrected - before[0] if corrected >= before[0] else corrected
        new_u = uncorrected - before[1] if uncorrected >= before[1] else uncorrected
        out.event("ecc", {"gpu": index, "corrected": corrected, "uncorrected": uncorrected,
                          "corrected_new": new_c, "uncorrected_new": new_u})
