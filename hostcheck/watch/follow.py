"""Following what the recorder writes, from this run's start: the events added since the last look.

The metrics file and the notifications read the recorder's own database through its writer's
connection, by row id, so they need nothing from the recorder's internals.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any


class EventTail:
    """The events after the last ones read; the first read starts at this run's ``recorder_start``."""

    def __init__(self) -> None:
        self.last_id: int | None = None

    def read(self, conn: sqlite3.Connection) -> list[tuple[str, dict[str, Any]]]:
        if self.last_id is None:
            row = conn.execute("SELECT max(id) FROM events WHERE kind = 'recorder_start'").fetchone()
            self.last_id = int(row[0]) - 1 if row and row[0] is not None else 0
        rows = conn.execute("SELECT id, kind, detail FROM events WHERE id > ? ORDER BY id", (self.last_id,)).fetchall()
        out = []
        for event_id, kind, detail in rows:
            self.last_id = int(event_id)
            try:
                value = json.loads(detail)
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append((str(kind), value))
        return out
