"""A live progress line on stderr while collectors run (terminal only)."""

from __future__ import annotations

import threading
from types import TracebackType

from rich.console import Console
from rich.status import Status


class LiveProgress:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[str] = set()
        self._finished = 0
        self._status = Status("collecting facts", console=Console(stderr=True))

    def __enter__(self) -> LiveProgress:
        self._status.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._status.stop()

    def update(self, name: str, state: str) -> None:
        with self._lock:
            if state == "start":
                self._running.add(name)
            else:
                self._running.discard(name)
                self._finished += 1
            waiting = ", ".join(sorted(self._running)) or "done"
            self._status.update(f"collecting facts ({self._finished} done) — probing: {waiting}")
