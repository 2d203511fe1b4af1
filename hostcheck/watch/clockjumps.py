"""The recorder's clocks sampler: a suspend (the boot clock ran on while the monotonic clock
stood) and a step of the wall clock (NTP, an RTC that was wrong), between two samples.

The previous sample is this run's last one, or at the start of a run the last sample written
in the same boot: a step or a suspend while the recorder was stopped is seen at the first sample.
"""

from __future__ import annotations

from hostcheck.watch.sampler import Sink, Tick

CLOCK_JUMP_S = 2.0


class ClockJumps:
    name = "clocks"

    def __init__(self, prev: tuple[float, float, float] | None) -> None:
        self.prev = prev  # (wall, mono, boottime) of the previous sample

    def sample(self, tick: Tick, out: Sink) -> None:
        wall, mono, boot = tick.wall, tick.mono, tick.boot
        if self.prev is not None:
            p_wall, p_mono, p_boot = self.prev
            suspended = (boot - p_boot) - (mono - p_mono)
            if suspended > CLOCK_JUMP_S:
                out.event("suspend", {"seconds": round(suspended, 1), "from": p_wall + (mono - p_mono)})
            step = (wall - p_wall) - (boot - p_boot)
            if abs(step) > CLOCK_JUMP_S:
                # Recorded, never used to order or measure: the analysis goes by the boot clock.
                out.event("clock_jump", {"step_s": round(step, 3), "from": p_wall + (boot - p_boot), "to": wall})
        self.prev = (wall, mono, boot)
