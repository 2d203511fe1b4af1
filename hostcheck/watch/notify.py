"""Notifications from the recorder, for an owner without a Prometheus: outage start and end, GPU
faults, recorder (re)starts, to an Uptime Kuma push monitor and/or a generic webhook.

- Uptime Kuma: its push monitor's documented request, ``GET <push URL>?status=up|down&msg=...&ping=``
  (the push URL as Kuma shows it; a query string on it is replaced). ``down`` for an outage
  start and a GPU fault, ``up`` otherwise.
- Webhook: ``POST`` of one JSON object (``Content-Type: application/json``)::

      {"source": "hostcheck-watch", "format": 1, "event": "outage_start" | "outage_end" |
       "gpu_fault" | "recorder_start", "status": "down" | "up", "time": "<ISO 8601 UTC>",
       "host": "<host name; absent with --redact>", "message": "<one sentence for the owner>",
       "detail": {...}}

  ``detail``: ``cause`` (network, driver) for an outage, with ``seconds`` at its end; ``xid``,
  ``effect`` and ``immediate`` (NVIDIA's catalogue) for a GPU fault; ``previous_stop`` for a
  start (``clean`` with its signal, or ``none recorded``: the recorder or the host stopped
  without a word).

Sampling never waits: messages go through a bounded queue to one sending thread. Each
destination is rate-limited (:data:`BURST` at once, then one per :data:`REFILL_S`); a message
is tried at most :data:`ATTEMPTS` times, with a backoff, each try bounded by :data:`TIMEOUT_S`;
redirects are never followed and a 4xx is not retried. A destination that starts failing, or
drops messages, is recorded once as a ``notify`` event, and again when it works again.

The URLs hold the secret (Kuma's push token is in its path): they are read from files private
to the recorder's account (0600), never from the command line, and must be ``https://`` unless
``--insecure-http`` (labs).
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import queue
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostcheck.errors import InputError, PrivateFileError, SendError
from hostcheck.netprobe.private_files import read_private
from hostcheck.recording.analysis import UP, sample_state
from hostcheck.recording.store import Event, Sample, WatchWriter
from hostcheck.watch.follow import EventTail

TIMEOUT_S = 5.0
ATTEMPTS = 3
BACKOFF_S = 2.0  # doubled after each failed try: 2 s, then 4 s
BURST = 5
REFILL_S = 60.0
QUEUE_SIZE = 32
MAX_URL = 2048
MAX_MESSAGE = 200
FAULT_EFFECTS = ("out_of_service", "app", "attention")  # the Xids worth telling the owner (not "none")


@dataclass(frozen=True)
class Destination:
    kind: str  # "kuma" | "webhook"
    url: urllib.parse.SplitResult

    @property
    def name(self) -> str:
        return self.kind  # never the URL: it holds the secret


def read_url_file(path: Path, option: str, insecure_http: bool) -> urllib.parse.SplitResult:
    """The URL in ``path`` (one line), from a file others cannot read; https unless ``insecure_http``."""
    try:
        raw = read_private(path, MAX_URL)
    except PrivateFileError as exc:
        raise InputError(f"{option} {exc}") from None
    except OSError as exc:
        raise InputError(f"{option} {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise InputError(f"{option} {path}: the URL must be ASCII") from None
    if not text or len(text) > MAX_URL or any(c.isspace() or ord(c) < 0x21 for c in text):
        raise InputError(f"{option} {path}: one URL on one line is expected (at most {MAX_URL} characters)")
    url = urllib.parse.urlsplit(text)
    if url.scheme not in ("https", "http") or not url.hostname:
        raise InputError(f"{option} {path}: not an https:// URL")
    if url.scheme == "http" and not insecure_http:
        raise InputError(f"{option} {path}: an http:// URL sends its token in clear; use https://, or pass "
                         "--insecure-http in a lab")
    return url


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass
class Message:
    event: str
    status: str  # "up" | "down"
    t: float
    message: str
    detail: dict[str, Any] = field(default_factory=dict)


def messages_from(previous_state: str | None, state: str, sample: Sample, down_since: float | None,
                  events: list[tuple[str, dict[str, Any]]], previous_stop: str | None) -> list[Message]:
    """What the owner is told about one sample and the events written with it (pure)."""
    out: list[Message] = []
    for kind, detail in events:
        if kind == "recorder_start":
            out.append(Message("recorder_start", "up", sample.t, f"the recorder started; before it: {previous_stop}",
                               {"previous_stop": previous_stop}))
        elif kind == "xid" and detail.get("effect") in FAULT_EFFECTS:
            code, action = detail.get("code"), detail.get("immediate") or "no action named"
            out.append(Message("gpu_fault", "down", sample.t, f"GPU fault: Xid {code} ({action}, NVIDIA's catalogue)",
                               {"xid": code, "effect": detail.get("effect"), "immediate": detail.get("immediate")}))
    if state != UP and previous_state != state:
        out.append(Message("outage_start", "down", sample.t, f"outage started: {state}", {"cause": state}))
    elif state == UP and previous_state not in (None, UP):
        seconds = round(sample.t - down_since, 1) if down_since is not None else None
        span = f" after {seconds / 60:.1f} min" if seconds is not None else ""
        out.append(Message("outage_end", "up", sample.t, f"outage ended ({previous_state}){span}",
                           {"cause": previous_state, "seconds": seconds}))
    return out


class Bucket:
    """At most ``burst`` at once, then one per ``refill_s``."""

    def __init__(self, burst: int, refill_s: float, clock: Callable[[], float]):
        self.burst, self.refill_s, self.clock = burst, refill_s, clock
        self.tokens, self.at = float(burst), clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) / self.refill_s)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


def _request(dest: Destination, msg: Message, host: str | None, timeout: float) -> None:
    url = dest.url
    if dest.kind == "kuma":
        query = urllib.parse.urlencode({"status": msg.status, "msg": msg.message[:MAX_MESSAGE], "ping": ""})
        method, path, body, headers = "GET", f"{url.path or '/'}?{query}", None, {}
    else:
        payload: dict[str, Any] = {"source": "hostcheck-watch", "format": 1, "event": msg.event, "status": msg.status,
                                   "time": _iso(msg.t), "message": msg.message, "detail": msg.detail}
        if host is not None:
            payload["host"] = host
        path = url.path or "/"
        if url.query:
            path += "?" + url.query
        method, body = "POST", json.dumps(payload, sort_keys=True).encode()
        headers = {"Content-Type": "application/json"}
    conn_class = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
    conn = conn_class(url.hostname or "", url.port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers={"User-Agent": "hostcheck-watch", **headers})
        resp = conn.getresponse()
        resp.read(4096)
    except (OSError, http.client.HTTPException) as exc:
        raise SendError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, retry=True) from None
    finally:
        conn.close()
    if 300 <= resp.status < 400:
        raise SendError(f"HTTP {resp.status} redirect (not followed)", retry=False)
    if resp.status == 429 or resp.status >= 500:
        raise SendError(f"HTTP {resp.status}", retry=True)
    if resp.status >= 400:
        raise SendError(f"HTTP {resp.status}", retry=False)


class Notifier:
    """The recorder's hook: messages from each sample, sent on a thread of their own."""

    def __init__(self, destinations: list[Destination], *, host: str | None, timeout_s: float = TIMEOUT_S,
                 attempts: int = ATTEMPTS, backoff_s: float = BACKOFF_S, burst: int = BURST,
                 refill_s: float = REFILL_S, clock: Callable[[], float] = time.monotonic):
        self.destinations = destinations
        self.host = host
        self.timeout_s, self.attempts, self.backoff_s = timeout_s, attempts, backoff_s
        self.buckets = {d.name: Bucket(burst, refill_s, clock) for d in destinations}
        # each message goes with the drops before it, counted in the recorder's thread only
        self.queue: queue.Queue[tuple[Destination, Message, int] | None] = queue.Queue(QUEUE_SIZE)
        self.results: queue.SimpleQueue[tuple[str, dict[str, Any]]] = queue.SimpleQueue()
        self.failing: dict[str, str | None] = {}
        self.dropped: dict[str, int] = {}
        self.sent = 0
        self.events = EventTail()
        self.state: str | None = None
        self.down_since: float | None = None
        self.first = True
        self.writer: WatchWriter | None = None
        self.last: Sample | None = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="hostcheck-notify", daemon=True)
        self.thread.start()

    # ------------------------------------------------------------------ the recorder's thread

    @staticmethod
    def _previous_stop(writer: WatchWriter) -> str:
        """How the run before this one ended: a recorder_stop between its start and this one's, or none."""
        starts = [r[0] for r in writer.conn.execute(
            "SELECT id FROM events WHERE kind = 'recorder_start' ORDER BY id DESC LIMIT 2")]
        if len(starts) < 2:
            return "nothing recorded before"
        row = writer.conn.execute("SELECT detail FROM events WHERE kind = 'recorder_stop' AND id > ? AND id < ?"
                                  " ORDER BY id DESC LIMIT 1", (starts[1], starts[0])).fetchone()
        if row is None:
            return "no stop recorded (the recorder or the host stopped without a word: a crash or a power cut)"
        return f"a clean stop ({json.loads(row[0]).get('reason', '?')})"

    def after_sample(self, writer: WatchWriter, sample: Sample) -> None:
        self.writer, self.last = writer, sample
        self._record_results()
        events = self.events.read(writer.conn)
        previous_stop = self._previous_stop(writer) if self.first else None
        self.first = False
        state, _ = sample_state(sample)
        for msg in messages_from(self.state, state, sample, self.down_since, events, previous_stop):
            for dest in self.destinations:
                self._enqueue(dest, msg)
        if state != UP and (self.state is None or self.state == UP):
            self.down_since = sample.t
        self.state = state

    def _enqueue(self, dest: Destination, msg: Message) -> None:
        if not self.buckets[dest.name].take():
            self._drop(dest, "rate limit")
            return
        try:
            self.queue.put_nowait((dest, msg, self.dropped.get(dest.name, 0)))
        except queue.Full:
            self._drop(dest, "queue full")
            return
        self.dropped[dest.name] = 0

    def _drop(self, dest: Destination, why: str) -> None:
        self.dropped[dest.name] = self.dropped.get(dest.name, 0) + 1
        if self.dropped[dest.name] == 1:  # once per run of drops; the count goes with the next message sent
            self.results.put((dest.name, {"destination": dest.name, "ok": False, "error": f"dropped: {why}"}))

    def _record_results(self) -> None:
        while True:
            try:
                _name, detail = self.results.get_nowait()
            except queue.Empty:
                return
            if self.writer is not None and self.last is not None:
                self.writer.add_event(Event(self.last.t, "notify", self.last.boot_id, detail))

    # ------------------------------------------------------------------ the sending thread

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            try:
                if item is None:
                    return
                self._send(*item)
            finally:
                self.queue.task_done()

    def idle(self) -> bool:
        """Nothing queued or being sent."""
        return self.queue.unfinished_tasks == 0

    def _send(self, dest: Destination, msg: Message, dropped_before: int) -> None:
        error: SendError | None = None
        tries = 0
        for tries in range(1, self.attempts + 1):
            try:
                _request(dest, msg, self.host, self.timeout_s)
                error = None
                break
            except SendError as exc:
                error = exc
                if not exc.retry or tries == self.attempts or self.stopping.wait(self.backoff_s * 2 ** (tries - 1)):
                    break
        if error is None:
            self.sent += 1
            if self.failing.get(dest.name) is not None or dropped_before:
                self.results.put((dest.name, {"destination": dest.name, "ok": True, "event": msg.event,
                                              "dropped": dropped_before}))
            self.failing[dest.name] = None
            return
        if self.failing.get(dest.name) is None:  # once, when the destination starts failing
            self.results.put((dest.name, {"destination": dest.name, "ok": False, "event": msg.event,
                                          "error": str(error), "attempts": tries}))
        self.failing[dest.name] = str(error)

    def close(self, wait_s: float = TIMEOUT_S) -> None:
        """Give the queue ``wait_s`` to empty, then stop; what is left is not sent."""
        try:
            self.queue.put(None, timeout=wait_s)
        except queue.Full:
            pass
        self.thread.join(wait_s)
        self.stopping.set()
        self.thread.join(self.timeout_s + 1)
        try:
            self._record_results()
        except Exception:  # the database may be closing; the recorder's stop matters more
            pass


def destinations_from(kuma_file: Path | None, webhook_file: Path | None, insecure_http: bool) -> list[Destination]:
    out = []
    if kuma_file is not None:
        out.append(Destination("kuma", read_url_file(kuma_file, "--notify-kuma-file", insecure_http)))
    if webhook_file is not None:
        out.append(Destination("webhook", read_url_file(webhook_file, "--notify-webhook-file", insecure_http)))
    return out


def host_name(redact: bool) -> str | None:
    return None if redact else socket.gethostname()
