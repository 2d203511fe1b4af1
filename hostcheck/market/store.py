"""The market database: snapshot summaries appended to one SQLite file, as the watch database
does it (hostcheck/recording/store.py): a file marked with its own ``application_id`` and
schema version, WAL with ``synchronous=FULL``, one writer holding an exclusive ``flock``, readers
read-only; a path that is not a regular file, another application's database, a newer schema or
a damaged file is refused with a message and left as it was. Nothing secret is stored: the
summary holds the queries as sent less the key, and the base URL.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from hostcheck.errors import InputError
from hostcheck.recording.store import BUSY_TIMEOUT_S, inspect_database

APPLICATION_ID = 0x68636D6B  # "hcmk": a hostcheck market database
SCHEMA_VERSION = 1
MAX_DETAIL_CHARS = 64_000
MAX_ROWS_READ = 100_000
DEFAULT_MAX_AGE_DAYS = 400.0
DEFAULT_MAX_ROWS = 20_000
"""With summaries of a few KiB each, about 60 MiB at most: a snapshot an hour of two models for
400 days fits."""
MIN_INTERVAL_S = 300.0
"""Vast refreshes its market metrics every 5 minutes (host/market-metrics.mdx): a snapshot of the
same model and count sooner than that would record the same numbers again."""

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE snapshots (
  id INTEGER PRIMARY KEY,
  t REAL NOT NULL,              -- when it was taken, Unix seconds
  gpu_name TEXT NOT NULL,
  num_gpus INTEGER NOT NULL,
  listed INTEGER NOT NULL,      -- comparable offers listed (not rented)
  rented_share_pct REAL,        -- Vast's metrics: share of machines of the model rented now
  occupancy_pct REAL,           -- the occupancy the snapshot gives earnings (and where from, in detail)
  listed_median REAL,           -- median $/GPU-hour of the listed offers
  rented_median REAL,           -- median $/GPU-hour of rented machines (Vast's metrics)
  detail TEXT NOT NULL          -- the summary, compact JSON
);
CREATE INDEX snapshots_model ON snapshots(gpu_name, num_gpus, t);
"""


class MarketDbError(InputError):
    """A market database that cannot be used; the message says why."""


def inspect_file(path: Path) -> bool:
    """False when there is nothing there yet (or an empty file), True for a market database
    this hostcheck reads; MarketDbError otherwise (the watch database's rules)."""
    return inspect_database(path, application_id=APPLICATION_ID, schema_version=SCHEMA_VERSION, kind="market",
                            option="--record", error=MarketDbError)


def last_taken(path: Path, gpu_name: str, num_gpus: int) -> float | None:
    """When the newest snapshot of this model and count was taken; None for none (or no file)."""
    if not inspect_file(path):
        return None
    conn = _read_only(path)
    try:
        row = conn.execute("SELECT max(t) FROM snapshots WHERE gpu_name = ? COLLATE NOCASE AND num_gpus = ?",
                           (gpu_name, num_gpus)).fetchone()
    finally:
        conn.close()
    return None if row is None or row[0] is None else float(row[0])


def _read_only(path: Path) -> sqlite3.Connection:
    try:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise MarketDbError(f"cannot open {path}: {exc}") from None


def record(path: Path, summary: dict[str, Any], *, max_age_days: float = DEFAULT_MAX_AGE_DAYS,
           max_rows: int = DEFAULT_MAX_ROWS) -> int:
    """Append the summary as one row (one transaction) and drop rows older than ``max_age_days``
    and the oldest beyond ``max_rows``; the new row's id. MarketDbError when the file is not ours or another writer holds it."""
    existing = inspect_file(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o640)
    except OSError as exc:
        raise MarketDbError(f"cannot open {path} for writing: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise MarketDbError(f"another hostcheck is writing {path}; one writer at a time") from None
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            if not existing:
                conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
                conn.execute("BEGIN IMMEDIATE")
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                conn.execute("INSERT INTO meta VALUES ('created_at', ?)", (repr(time.time()),))
                conn.execute("COMMIT")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            detail = json.dumps(summary, separators=(",", ":"), sort_keys=True, allow_nan=False)
            if len(detail) > MAX_DETAIL_CHARS:
                raise MarketDbError(f"the snapshot's summary is over {MAX_DETAIL_CHARS} characters: not recorded")
            listed = summary["listed"]["all"]
            metrics = summary.get("metrics") or {}
            rented = summary.get("rented_prices") or {}
            occupancy = summary.get("occupancy") or {}
            conn.execute("BEGIN IMMEDIATE")
            cur = conn.execute(
                "INSERT INTO snapshots (t, gpu_name, num_gpus, listed, rented_share_pct, occupancy_pct, listed_median, "
                "rented_median, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (summary["taken_at"], summary["gpu_name"], summary["num_gpus"], listed["count"],
                 metrics.get("rented_share_pct"), occupancy.get("pct"),
                 (listed.get("prices") or {}).get("median"), rented.get("median"), detail))
            conn.execute("DELETE FROM snapshots WHERE t < ?", (time.time() - max_age_days * 86400.0,))
            conn.execute("DELETE FROM snapshots WHERE id NOT IN (SELECT id FROM snapshots ORDER BY t DESC, id DESC "
                         "LIMIT ?)", (max_rows,))
            conn.execute("COMMIT")
            return int(cur.lastrowid or 0)
        except sqlite3.Error as exc:
            raise MarketDbError(f"cannot record into {path}: {exc}") from None
        finally:
            conn.close()
    finally:
        os.close(fd)


def read_rows(path: Path, gpu_name: str | None, num_gpus: int | None, since: float | None = None) -> list[dict[str, Any]]:
    """The recorded rows (oldest first), without their detail; MarketDbError for a file that is
    not a market database, and for one that does not exist."""
    if not path.exists():
        raise MarketDbError(f"{path} does not exist: record with `hostcheck market --record {path}` first")
    if not inspect_file(path):
        return []
    conn = _read_only(path)
    conn.row_factory = sqlite3.Row
    where: list[str] = ["1 = 1"]
    args: list[Any] = []
    if gpu_name is not None:
        where.append("gpu_name = ? COLLATE NOCASE")
        args.append(gpu_name)
    if num_gpus is not None:
        where.append("num_gpus = ?")
        args.append(num_gpus)
    if since is not None:
        where.append("t >= ?")
        args.append(since)
    try:
        rows = conn.execute(
            "SELECT t, gpu_name, num_gpus, listed, rented_share_pct, occupancy_pct, listed_median, rented_median "
            f"FROM snapshots WHERE {' AND '.join(where)} ORDER BY t LIMIT {MAX_ROWS_READ}", args).fetchall()
    except sqlite3.Error as exc:
        raise MarketDbError(f"cannot read {path}: {exc}") from None
    finally:
        conn.close()
    return [dict(r) for r in rows]
