"""Where a test run's time goes: cache builds (cold or warm), lab boots and fixture steps.

Every record is one JSON line appended to the file named by ``HOSTCHECK_LAB_TIMINGS`` (set by
the pytest plugin in tests/lab/report.py for the controller and every xdist worker, and by
``python -m tests.lab build``), so the end-of-run report sees what each worker process did.
Without that variable the records are only logged.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from tests.lab.util import log

ENV = "HOSTCHECK_LAB_TIMINGS"


def record(kind: str, name: str, seconds: float, **extra: Any) -> None:
    """Append one record: ``kind`` is "cache", "boot" or "step"."""
    entry = {"kind": kind, "name": name, "seconds": round(seconds, 2), "at": time.time(), "pid": os.getpid(), **extra}
    log(f"timing {kind} {name}: {seconds:.1f}s {extra or ''}")
    path = os.environ.get(ENV)
    if not path:
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(json.dumps(entry) + "\n")


def record_cache(name: str, state: str, seconds: float, key: str) -> None:
    """A cache artifact was needed: ``state`` is "cold" (built), "extracted" (from the CI
    tarball) or "warm" (reused as it was)."""
    record("cache", name, seconds, state=state, key=key)


def read(path: Path | str) -> list[dict[str, Any]]:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return []
    entries = []
    for line in lines:
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries
