"""The watch database: one SQLite file, one writer, crash-safe, bounded.

Durability: WAL journal with ``synchronous=FULL``. In WAL mode FULL syncs the WAL at every
commit, so each committed sample is on disk before the next one is taken; a power cut
mid-write loses at most the sample being written, and SQLite's WAL recovery keeps the file
consistent. ``synchronous=NORMAL`` would keep the file intact too but may roll back every
commit since the last checkpoint (up to ~1000 pages, hours of samples) after a power cut,
which breaks "at most the last sample". The cost is one fsync per sample (one a minute by
default), which a disk does not notice.

One writer: the writer holds an exclusive ``flock`` on the database file for its lifetime (a
second recorder is refused with a message); readers (the report, the audit) open the file
read-only and never take it.

A file that is not ours (another SQLite application, a newer schema, a damaged file, not an
SQLite file at all) is refused with a clear message and left exactly as it was.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostcheck.errors import WatchDbError

DEFAULT_DB = Path("/var/lib/hostcheck-watch/watch.db")
"""Where `hostcheck watch` records, and where the audit looks for a recording, by default."""
USER_DB_SHOWN = "$XDG_STATE_HOME/hostcheck/watch.db"
"""The per-user database as help texts name it (XDG_STATE_HOME defaults to ~/.local/state)."""


def user_db() -> Path:
    """``$XDG_STATE_HOME/hostcheck/watch.db`` (the XDG base directory spec's state directory:
    ``~/.local/state`` when the variable is unset, empty or not an absolute path)."""
    state = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local" / "state"
    return base / "hostcheck" / "watch.db"


def _writable(path: Path) -> bool:
    """Whether this user could record into ``path``: the file is writable, or it does not exist
    yet and its directory is."""
    if path.exists():
        return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)
    return path.parent.is_dir() and os.access(path.parent, os.W_OK | os.X_OK)


def default_record_db(system: Path = DEFAULT_DB) -> tuple[Path, str | None]:
    """The database `hostcheck watch` records into when no --db is given: the system one where
    this user can write it, else the per-user one (its folder created, private), and the line
    that says so (None for the system database)."""
    if _writable(system):
        return system, None
    user = user_db()
    try:
        user.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise WatchDbError(f"{system} is not writable by this user and {user.parent} cannot be created "
                           f"({exc.strerror or exc}): give --db PATH") from None
    return user, (f"{system} is not writable by this user, so the recording goes to {user} "
                  "(the role's service records into the system one; --db PATH chooses another)")


def default_report_db(system: Path = DEFAULT_DB) -> Path:
    """The database `hostcheck watch report` reads when no --db is given: the system one where it
    exists, else this user's where that exists, else the system one (whose absence is then said)."""
    if not system.exists() and user_db().exists():
        return user_db()
    return system
APPLICATION_ID = 0x68637761  # "hcwa": marks the file as a hostcheck watch database
SCHEMA_VERSION = 2
SQLITE_MAGIC = b"SQLite format 3\x00"
DEFAULT_MAX_AGE_DAYS = 90.0
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
BUSY_TIMEOUT_S = 5.0
MAX_DETAIL_CHARS = 4000

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE samples (
  id INTEGER PRIMARY KEY,
  t REAL NOT NULL,            -- wall clock, Unix seconds
  mono REAL NOT NULL,         -- CLOCK_MONOTONIC, seconds (stops during suspend)
  boottime REAL NOT NULL,     -- CLOCK_BOOTTIME, seconds (runs during suspend)
  boot_id TEXT NOT NULL,
  interval_s REAL NOT NULL,
  net_ok INTEGER NOT NULL,    -- targets that answered
  net_total INTEGER NOT NULL, -- targets probed
  gpu_ok INTEGER,             -- 1 NVML answered, 0 failed or a reboot-needing Xid this boot, NULL not watched
  detail TEXT NOT NULL        -- compact JSON: per-target results, NVML readings
);
CREATE INDEX samples_t ON samples(t);
CREATE INDEX samples_boot ON samples(boot_id, boottime);
CREATE TABLE events (
  id INTEGER PRIMARY KEY,
  t REAL NOT NULL,            -- wall clock (for events read from a log: the log's own time)
  kind TEXT NOT NULL,
  boot_id TEXT NOT NULL,
  detail TEXT NOT NULL,
  boottime REAL,              -- CLOCK_BOOTTIME when the recorder itself saw it, else NULL
  after_sample INTEGER        -- the newest sample's id when it was written, 0 before any (retention order)
);
CREATE INDEX events_t ON events(t);
CREATE TABLE boots (
  boot_id TEXT PRIMARY KEY,
  first_t REAL,               -- first journal entry of the boot (or first sample)
  last_t REAL,                -- last journal entry of the boot
  clean INTEGER,              -- 1 shutdown recorded, 0 none recorded, NULL not known
  evidence TEXT NOT NULL
);
"""

# Each step brings a database written at the version before it up to the next one.
MIGRATIONS = {
    1: ("ALTER TABLE events ADD COLUMN boottime REAL", "ALTER TABLE events ADD COLUMN after_sample INTEGER",
        "CREATE INDEX IF NOT EXISTS samples_boot ON samples(boot_id, boottime)"),
}

EVENT_KINDS = frozenset(
    {
        "recorder_start", "recorder_stop", "boot", "clock_jump", "suspend", "gap", "journal",
        "xid", "aer", "nvml", "throttle", "package", "public_address", "ecc", "power_source", "ups",
        "cgnat", "inbound", "retention", "notify", "drift", "selftest",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Sample:
    t: float
    mono: float
    boottime: float
    boot_id: str
    interval_s: float
    net_ok: int
    net_total: int
    gpu_ok: bool | None
    detail: dict[str, Any]


@dataclass(frozen=True)
class Event:
    t: float
    kind: str
    boot_id: str
    detail: dict[str, Any]
    boottime: float | None = None  # the boot's clock when the recorder saw it; None for log lines


@dataclass(frozen=True)
class Boot:
    boot_id: str
    first_t: float | None
    last_t: float | None
    clean: bool | None
    evidence: str


def _compact(detail: dict[str, Any]) -> str:
    text = json.dumps(detail, separators=(",", ":"), sort_keys=True, allow_nan=False)
    if len(text) > MAX_DETAIL_CHARS:
        text = json.dumps({"truncated": text[: MAX_DETAIL_CHARS - 100]}, separators=(",", ":"))
    return text


def _load(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {"unreadable": text[:200]}
    return value if isinstance(value, dict) else {"value": value}


def inspect_file(path: Path, option: str = "--db") -> bool:
    """Check a watch database file before anything opens it for writing (:func:`inspect_database`)."""
    return inspect_database(path, application_id=APPLICATION_ID, schema_version=SCHEMA_VERSION, kind="watch",
                            option=option, error=WatchDbError)


def inspect_database(path: Path, *, application_id: int, schema_version: int, kind: str, option: str,
                     error: type[Exception]) -> bool:
    """Check one of hostcheck's SQLite files (``kind``: watch, market) before anything opens it
    for writing.

    Returns False when there is nothing there yet (or an empty or blank SQLite file) and True
    for a database with ``application_id`` of a schema up to ``schema_version``; raises
    ``error`` otherwise, whose message names ``option`` (the option that gave the path) as
    the way to pick another file. Nothing is ever written to the file.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{path} is a directory: {option} takes the database file (e.g. {path / (kind + '.db')})")
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{path} is not a regular file; refusing to use it as the {kind} database")
    if st.st_size == 0:
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    if head != SQLITE_MAGIC:
        raise error(
            f"{path} is not an SQLite database (it starts with {head[:8]!r}); it was left as it is: "
            f"give {option} a new path"
        )
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise error(f"cannot open {path}: {exc}") from None
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if app_id != application_id:
            if app_id == 0 and tables == 0:
                return False  # a blank SQLite file: nothing in it to lose
            raise error(
                f"{path} is an SQLite database of another application (application_id {app_id:#x}, "
                f"{tables} schema objects), not a hostcheck {kind} database; it was left as it is: give {option} a new path"
            )
        if version > schema_version:
            raise error(
                f"{path} was written by a newer hostcheck (schema {version}, this one reads up to "
                f"{schema_version}); it was left as it is: upgrade hostcheck"
            )
        check = [row[0] for row in conn.execute("PRAGMA quick_check(5)")]
        if check != ["ok"]:
            raise error(
                f"{path} is damaged (SQLite quick_check: {'; '.join(map(str, check))}); it was left as it is: "
                f"move it aside and start a new one, or salvage it with `sqlite3 {path} .recover`"
            )
    except sqlite3.DatabaseError as exc:
        raise error(
            f"{path} is damaged or not a database ({exc}); it was left as it is: move it aside and start a new one"
        ) from None
    finally:
        conn.close()
    return True


class WatchWriter:
    """The single writer. Every write is its own transaction; a failed write (a full disk)
    raises :class:`sqlite3.Error` to the caller and leaves what was committed intact."""

    def __init__(self, path: Path, *, max_age_days: float = DEFAULT_MAX_AGE_DAYS, max_bytes: int = DEFAULT_MAX_BYTES):
        self.path = path
        self.max_age_s = max_age_days * 86400.0
        self.max_bytes = max_bytes
        existing = inspect_file(path)
        try:
            self._lock_fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o640)
        except OSError as exc:
            raise WatchDbError(f"cannot open {path} for writing: {exc.strerror or exc}") from None
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock_fd)
            raise WatchDbError(f"another `hostcheck watch` is recording into {path}; one writer at a time") from None
        try:
            self.conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            if not existing:
                self._create()
            else:
                self._migrate()
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            os.close(self._lock_fd)
            raise WatchDbError(f"cannot initialise {path}: {exc}") from None

    def _create(self) -> None:
        # auto_vacuum must be set before the first table exists; it lets pruning give pages back.
        self.conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        self.conn.execute("BEGIN IMMEDIATE")
        for statement in SCHEMA.split(";"):
            if statement.strip():
                self.conn.execute(statement)
        self.conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        self.conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        self.conn.execute("INSERT INTO meta VALUES ('created_at', ?)", (repr(time.time()),))
        self.conn.execute("COMMIT")

    def _migrate(self) -> None:
        """Bring an older schema up to this one, one step per transaction; what is there stays."""
        version = int(self.conn.execute("PRAGMA user_version").fetchone()[0])
        while version < SCHEMA_VERSION:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in MIGRATIONS[version]:
                    self.conn.execute(statement)
                self.conn.execute(f"PRAGMA user_version={version + 1}")
                self.conn.execute("COMMIT")
            except sqlite3.Error:
                self.conn.execute("ROLLBACK")
                raise
            version += 1

    def close(self) -> None:
        try:
            self.conn.close()
        finally:
            os.close(self._lock_fd)

    def __enter__(self) -> WatchWriter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute(sql, params)
            self.conn.execute("COMMIT")
        except sqlite3.Error:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise

    def add_sample(self, s: Sample) -> None:
        gpu = None if s.gpu_ok is None else int(s.gpu_ok)
        self._write(
            "INSERT INTO samples (t, mono, boottime, boot_id, interval_s, net_ok, net_total, gpu_ok, detail)"
            " VALUES (?,?,?,?,?,?,?,?,?)",
            (s.t, s.mono, s.boottime, s.boot_id, s.interval_s, s.net_ok, s.net_total, gpu, _compact(s.detail)),
        )

    def add_event(self, e: Event) -> None:
        if e.kind not in EVENT_KINDS:
            raise ValueError(f"unknown event kind {e.kind!r}")
        self._write(
            "INSERT INTO events (t, kind, boot_id, detail, boottime, after_sample)"
            " VALUES (?,?,?,?,?,(SELECT coalesce(max(id), 0) FROM samples))",
            (e.t, e.kind, e.boot_id, _compact(e.detail), e.boottime),
        )

    def put_boot(self, b: Boot) -> None:
        self._write(
            "INSERT INTO boots (boot_id, first_t, last_t, clean, evidence) VALUES (?,?,?,?,?)"
            " ON CONFLICT(boot_id) DO UPDATE SET first_t=coalesce(excluded.first_t, first_t),"
            " last_t=coalesce(excluded.last_t, last_t), clean=coalesce(excluded.clean, clean),"
            " evidence=CASE WHEN excluded.clean IS NULL THEN evidence ELSE excluded.evidence END",
            (b.boot_id, b.first_t, b.last_t, None if b.clean is None else int(b.clean), b.evidence),
        )

    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._write("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value", (key, value))

    def last_sample(self) -> Sample | None:
        row = self.conn.execute(
            "SELECT t, mono, boottime, boot_id, interval_s, net_ok, net_total, gpu_ok, detail FROM samples"
            " ORDER BY id DESC LIMIT 1"
        ).fetchone()
        return None if row is None else _sample(row)

    def size_bytes(self) -> int:
        pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
        free = self.conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = self.conn.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)

    def age_cutoffs(self) -> dict[str, float]:
        """Per boot, the boot-clock reading below which a sample is certainly older than the age
        limit. No wall clock is used: a clock stepped by NTP, a bad RTC or a suspend cannot make
        anything look old. Rows are appended in the order they happened (one writer), so boots
        are ordered by their first row; the time after a sample is at least what its own boot's
        clock ran after it plus the span each later boot was recorded. Time the host was off is
        not counted, so what is kept can reach further back than the limit, never less far."""
        boots = self.conn.execute(
            "SELECT boot_id, min(boottime), max(boottime) FROM samples GROUP BY boot_id ORDER BY min(id) DESC"
        ).fetchall()
        cutoffs: dict[str, float] = {}
        later = 0.0  # recorded span of the boots after this one
        for boot_id, first, last in boots:
            cutoffs[str(boot_id)] = float(last) + later - self.max_age_s
            later += max(0.0, float(last) - float(first))
        return cutoffs

    def prune(self) -> int:
        """Drop samples certainly older than the age limit (see :meth:`age_cutoffs`), then the
        oldest rows until under the size limit; the newest sample always stays. Events written
        before the oldest sample kept go with them (rows are in the order they happened).
        Returns rows deleted."""
        deleted = 0
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for boot_id, cutoff in self.age_cutoffs().items():
                deleted += self.conn.execute(
                    "DELETE FROM samples WHERE boot_id = ? AND boottime < ?", (boot_id, cutoff)
                ).rowcount
            deleted += self._drop_events_before_samples()
            self.conn.execute("COMMIT")
        except sqlite3.Error:
            self.conn.execute("ROLLBACK")
            raise
        for _ in range(50):  # each round drops a tenth of what is left
            if self.size_bytes() <= self.max_bytes:
                break
            count = self.conn.execute("SELECT count(*) FROM samples").fetchone()[0]
            if count <= 1:
                break
            row = self.conn.execute("SELECT id FROM samples ORDER BY id LIMIT 1 OFFSET ?", (max(1, count // 10),)).fetchone()
            if row is None:
                break
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                deleted += self.conn.execute("DELETE FROM samples WHERE id < ?", (row[0],)).rowcount
                deleted += self._drop_events_before_samples()
                self.conn.execute("COMMIT")
            except sqlite3.Error:
                self.conn.execute("ROLLBACK")
                raise
        if deleted:
            self.conn.execute("PRAGMA incremental_vacuum")
            oldest = self.oldest_t()
            if oldest is not None:
                self.set_meta("pruned_before", repr(oldest))
        return deleted

    def _drop_events_before_samples(self) -> int:
        """Events written before the newest sample deleted (an event written after sample k and
        before k+1 holds k; rows from schema 1, which lack it, go by their wall time)."""
        first = self.conn.execute("SELECT id, t FROM samples ORDER BY id LIMIT 1").fetchone()
        if first is None:
            return 0
        return int(self.conn.execute(
            "DELETE FROM events WHERE after_sample < ? OR (after_sample IS NULL AND t < ?)", (first[0] - 1, first[1])
        ).rowcount)

    def oldest_t(self) -> float | None:
        row = self.conn.execute("SELECT t FROM samples ORDER BY id LIMIT 1").fetchone()
        return None if row is None else float(row[0])


@dataclass
class Recording:
    """Everything a report needs, read in one go."""

    path: str
    samples: list[Sample]
    events: list[Event]
    boots: list[Boot]
    meta: dict[str, str]


def _sample(r: Any) -> Sample:
    return Sample(r[0], r[1], r[2], r[3], r[4], r[5], r[6], None if r[7] is None else bool(r[7]), _load(r[8]))


def read_recording(path: Path, since: float | None = None, option: str = "--db") -> Recording:
    """Open read-only (never taking the writer's lock) and read it all. ``since`` is a wall
    time: samples written before it are left out (approximate under clock steps, as any
    calendar window is)."""
    if not inspect_file(path, option):
        raise WatchDbError(f"no watch database at {path}: start one with `hostcheck watch --db {path}`")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise WatchDbError(f"cannot open {path}: {exc}") from None
    try:
        lower = -1e18 if since is None else since
        samples = [
            _sample(r)
            for r in conn.execute(
                "SELECT t, mono, boottime, boot_id, interval_s, net_ok, net_total, gpu_ok, detail"
                " FROM samples WHERE t >= ? ORDER BY id",
                (lower,),
            )
        ]
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        clock = "boottime" if version >= 2 else "NULL"  # schema 1 kept no boot clock for events
        events = [
            Event(r[0], r[1], r[2], _load(r[3]), r[4])
            for r in conn.execute(f"SELECT t, kind, boot_id, detail, {clock} FROM events WHERE t >= ? ORDER BY id", (lower,))
        ]
        boots = [
            Boot(r[0], r[1], r[2], None if r[3] is None else bool(r[3]), r[4])
            for r in conn.execute("SELECT boot_id, first_t, last_t, clean, evidence FROM boots ORDER BY coalesce(first_t, 0)")
        ]
        meta = {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}
    except sqlite3.Error as exc:
        raise WatchDbError(f"cannot read {path}: {exc}") from None
    finally:
        conn.close()
    return Recording(str(path), samples, events, boots, meta)

