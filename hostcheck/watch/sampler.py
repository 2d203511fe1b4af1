"""What the recorder and its samplers share: the moment of a sample and where a sampler writes.

Each sampler (the clocks, the kernel log, the package log, the power source, the UPS, the
public address, the forwarded ports, drift) is called once an interval with the sample's
:class:`Tick` and the recorder as its :class:`Sink`; it records what it saw as events and
keeps whatever it needs between samples. A sampler that raises is logged by its ``name`` and
the recording goes on; a database error is the recorder's to handle (it becomes a gap).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from hostcheck.recording.store import WatchWriter


@dataclass(frozen=True)
class Tick:
    """The clocks read as the sample began, and how many intervals this run had before it."""

    wall: float
    mono: float
    boot: float
    count: int


class Sink(Protocol):
    """The recorder as its samplers see it. ``event`` and ``state`` never raise for a database
    that cannot be written (the event is counted into the gap); the writer's own calls do."""

    @property
    def boot_id(self) -> str: ...

    @property
    def writer(self) -> WatchWriter: ...

    @property
    def log(self) -> Callable[[str], None]: ...

    def event(self, kind: str, detail: dict[str, Any], t: float | None = None) -> None:
        """An event seen now (``t`` None), or one read from a log (``t``: the log's own time)."""

    def state(self, source: str, state: Any, kind: str, detail: dict[str, Any]) -> None:
        """A ``kind`` event when ``source``'s state differs from the last one recorded this run."""


class Sampler(Protocol):
    name: str  # what the log calls it when a reading fails

    def sample(self, tick: Tick, out: Sink) -> None: ...
