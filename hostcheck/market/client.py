"""Bounded HTTP to Vast's API (or whatever stands in for it at ``VAST_URL`` / ``--market-url``).

Every request has a deadline, every answer a size cap; a redirect is refused, not followed (the
key would go to another host); HTTP 429 and the gateway errors (502-504) are retried a few times
with backoff, honouring ``Retry-After`` up to a bound; a run has a budget of requests and a
minimum interval between them (Vast's market metrics allow 5 requests a second,
``host/market-metrics.mdx``). The key is sent as vast-cli sends it (``Authorization: Bearer``,
``vastai/api/client.py``) and appears in no message: an error body the server sends back is
never shown whole, and any copy of the key in the part shown is blanked.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from hostcheck import __version__
from hostcheck.errors import UsageError
from hostcheck.market.keys import ApiKey

DEFAULT_BASE_URL = "https://console.vast.ai"
"""vast-cli's default server (``server_url_default`` in ``vastai/api/client.py``)."""
URL_ENV = "VAST_URL"
TIMEOUT_S = 20.0
MAX_ANSWER_BYTES = 24 << 20
"""5,000 offers of about 80 fields each are about 12 MiB of JSON; twice that is no answer we asked for."""
MAX_REQUESTS = 8
MIN_INTERVAL_S = 0.25
TRIES = 3
MAX_RETRY_AFTER_S = 10.0
RETRYABLE = frozenset({429, 502, 503, 504})
SHOWN_MESSAGE_CHARS = 160


class MarketError(Exception):
    """The market could not be read: the message says why, in one line, without the key."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class KeyRefused(MarketError):
    """HTTP 401 or 403: the key is missing, wrong, or the wrong kind for this endpoint."""


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class BaseUrl:
    scheme: str
    host: str
    port: int | None
    prefix: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}{'' if self.port is None else f':{self.port}'}{self.prefix}"


def parse_base_url(text: str, where: str) -> BaseUrl:
    """``https://host[:port][/prefix]``; plain ``http`` only to this machine (a local stand-in or
    a tunnel), since the key travels in every request. UsageError otherwise."""
    if len(text) > 300:
        raise UsageError(f"{where}: longer than 300 characters")
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"{where}: not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{where}: must be an https:// URL (http:// only to this machine)")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise UsageError(f"{where}: no user, password, query or fragment in the base URL")
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise UsageError(f"{where}: plain http would send the key unencrypted; use https:// "
                         "(http:// only to this machine)")
    return BaseUrl(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))


def _scrub(text: str, key: ApiKey | None) -> str:
    shown = " ".join(text.split())[:SHOWN_MESSAGE_CHARS]
    if key is not None and key.value:
        shown = shown.replace(key.value, "[key]")
        # A cut at the end may leave part of the key: blank any tail that starts it.
        for n in range(len(key.value) - 1, 7, -1):
            if shown.endswith(key.value[:n]):
                shown = shown[: -n] + "[key]"
                break
    return "".join(c if c.isprintable() else "?" for c in shown)


@dataclass
class Answer:
    status: int
    body: bytes
    retry_after: str | None = None


class VastClient:
    """One run's requests: a budget, a minimum interval, retries on 429 and gateway errors."""

    def __init__(self, base: BaseUrl, key: ApiKey | None, *, timeout_s: float = TIMEOUT_S,
                 max_bytes: int = MAX_ANSWER_BYTES, max_requests: int = MAX_REQUESTS,
                 min_interval_s: float = MIN_INTERVAL_S, tries: int = TRIES,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
        self.base = base
        self.key = key
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.max_requests = max_requests
        self.min_interval_s = min_interval_s
        self.tries = tries
        self.sleep = sleep
        self.clock = clock
        self.sent = 0
        self._last: float | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self.base.scheme == "https":
            return http.client.HTTPSConnection(self.base.host, self.base.port, timeout=self.timeout_s,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self.base.host, self.base.port, timeout=self.timeout_s)

    def _once(self, method: str, target: str, body: bytes | None, what: str) -> Answer:
        if self.sent >= self.max_requests:
            raise MarketError(f"{what}: the run's budget of {self.max_requests} requests is spent")
        if self._last is not None:
            wait = self.min_interval_s - (self.clock() - self._last)
            if wait > 0:
                self.sleep(wait)
        self.sent += 1
        self._last = self.clock()
        headers = {"User-Agent": f"hostcheck/{__version__}", "Accept": "application/json",
                   "Accept-Encoding": "identity"}
        if self.key is not None:
            headers["Authorization"] = "Bearer " + self.key.value
        if body is not None:
            headers["Content-Type"] = "application/json"
        deadline = self.clock() + self.timeout_s
        conn = self._connection()
        try:
            conn.request(method, target, body=body, headers=headers)
            resp = conn.getresponse()
            data = bytearray()
            while True:
                if self.clock() > deadline:
                    raise MarketError(f"{what}: no complete answer within {self.timeout_s:g} s")
                chunk = resp.read1(65536) if resp.status < 300 else resp.read1(4096)
                if not chunk:
                    break
                data += chunk
                if len(data) > self.max_bytes:
                    raise MarketError(f"{what}: the answer is larger than {self.max_bytes >> 20} MiB; "
                                      "not read further")
                if resp.status >= 300 and len(data) >= 4096:
                    break  # an error page: its start is all we might show
            if resp.status < 300 and resp.length not in (None, 0):
                raise MarketError(f"{what}: the answer was cut short ({len(data)} bytes of "
                                  f"{len(data) + resp.length} announced)")
            answer = Answer(resp.status, bytes(data), resp.getheader("Retry-After"))
            if 300 <= resp.status < 400:
                where = urlsplit(resp.getheader("Location") or "").hostname or "an unnamed place"
                raise MarketError(f"{what}: the server redirects to {_scrub(where, self.key)} (HTTP {resp.status}); "
                                  "not followed, the key would go there: give the API's own URL", resp.status)
            return answer
        except http.client.IncompleteRead as exc:
            raise MarketError(f"{what}: the answer was cut short ({len(exc.partial)} bytes)") from None
        except TimeoutError:
            raise MarketError(f"{what}: no answer within {self.timeout_s:g} s") from None
        except ssl.SSLError as exc:
            raise MarketError(f"{what}: TLS failed ({exc.reason or exc})") from None
        except (OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "strerror", None) or type(exc).__name__
            raise MarketError(f"{what}: cannot reach {self.base.host} ({reason})") from None
        finally:
            conn.close()

    def request(self, method: str, path: str, *, query: dict[str, str] | None = None,
                body: Any = None) -> Any:
        """The decoded JSON of a 2xx answer to ``method path``; MarketError (KeyRefused for
        401/403) otherwise."""
        target = self.base.prefix + quote(path)
        if query:
            target += "?" + urlencode(query)
        what = f"{method} {path}"
        payload = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        backoff = 1.0
        for attempt in range(1, self.tries + 1):
            answer = self._once(method, target, payload, what)
            if answer.status in RETRYABLE and attempt < self.tries:
                wait = backoff
                if answer.retry_after and answer.retry_after.strip().isdigit():
                    wait = max(wait, float(answer.retry_after.strip()))
                if wait > MAX_RETRY_AFTER_S:
                    raise MarketError(f"{what}: rate-limited (HTTP {answer.status}), asked to wait {wait:g} s; "
                                      "try again later", answer.status)
                self.sleep(wait)
                backoff *= 2
                continue
            break
        if answer.status == 429:
            raise MarketError(f"{what}: rate-limited (HTTP 429) after {self.tries} tries; try again later", 429)
        if answer.status in (401, 403):
            raise KeyRefused(f"{what}: the key was refused (HTTP {answer.status}){self._said(answer)}", answer.status)
        if not 200 <= answer.status < 300:
            raise MarketError(f"{what}: HTTP {answer.status}{self._said(answer)}", answer.status)
        try:
            return json.loads(answer.body)
        except (ValueError, RecursionError):
            start = _scrub(answer.body[:40].decode("utf-8", "replace"), self.key)
            raise MarketError(f"{what}: the answer is not JSON (it starts {start!r})") from None

    def _said(self, answer: Answer) -> str:
        """What the server said about an error, scrubbed and short: Vast's error bodies are
        ``{"success": false, "error": ..., "msg": ...}`` (the OpenAPI file's Error schema)."""
        try:
            doc = json.loads(answer.body)
        except (ValueError, RecursionError):
            return ""
        if not isinstance(doc, dict):
            return ""
        said = next((doc[k] for k in ("msg", "error", "detail") if isinstance(doc.get(k), str) and doc[k]), None)
        return f": {_scrub(said, self.key)}" if said else ""
