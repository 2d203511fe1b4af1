"""The speed test client: download, upload, latency and jitter against the user's probe server.

Opt-in (it sends bulk traffic). Several parallel TCP streams per direction, a discarded
warm-up, and hard caps on time (the whole test) and bytes (both directions together), both
stated in the result. The rate is read from the kernel's TCP counters of every stream at the
same instants (what arrived, for download; what the server acknowledged, cumulatively or
selectively, for upload), so what sits in a socket buffer, a reader thread that fell behind,
or data held back behind a lost segment does not move the figure. Every failure becomes
``measured: False`` with the reason: a silent, slow or misbehaving server never yields a
made-up number. Standard library only.

The phases share one plan, one deadline and one byte budget, so they live in one module
rather than passing that state between several.
"""

from __future__ import annotations

import errno
import http.client
import json
import select
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlencode

from hostcheck.errors import InputError, ServerError
from hostcheck.netprobe.http_client import Endpoint, check_status, connect, parse_endpoint
from hostcheck.netprobe.speed_protocol import (
    DEFAULT_STREAM_BYTES,
    DOWNLOAD_PATH,
    NOTHING_RECEIVED,
    UPLOAD_PATH,
    Received,
    Snapshot,
    arrived,
    latency,
    steady_rate,
)

MB = 1_000_000
"""The unit of the byte cap as the user gives it (decimal, as network rates are counted)."""
DEFAULT_SECONDS = 10.0
DEFAULT_MAX_BYTES = 1000 * MB
DEFAULT_STREAMS = 4
MAX_STREAMS = 8
"""The probe server admits 8 connections per address at once."""
MAX_TIME_CAP_S = 60.0
MIN_BYTE_CAP = 1 * MB
MAX_BYTE_CAP = 20_000 * MB
LATENCY_PINGS = 10
PING_EVERY_S = 0.02
READ_BLOCK = 256 * 1024
UPLOAD_CHUNK = 64 * 1024
MIN_WINDOW_S = 1.0
MIN_CAPPED_WINDOW_S = 0.1
MIN_WINDOW_BYTES = 256 * 1024
"""Less than this in the window is a stalled or trickling server, not a measurement."""
MIN_PHASE_S = 2.0
MIN_TIME_CAP_S = 3 * MIN_PHASE_S / 2
SAMPLE_EVERY_S = 0.02
MAX_SAMPLE_SPREAD_S = 0.002
"""A snapshot whose counter reads took longer than this (the sampler was preempted) is
dropped: its streams were not read at one instant."""
# struct tcp_info (linux/tcp.h): u32 tcpi_snd_mss at 16, tcpi_rcv_mss at 20, tcpi_sacked at
# 28; u64 tcpi_bytes_acked at 120 and tcpi_bytes_received at 128 (Linux 4.1+); u32
# tcpi_data_segs_in at 152 (4.6+). They count TCP payload and segments, so what the kernel
# delivered, not what an application happened to have written or read by then.
TCP_INFO_LEN = 156
SND_MSS_AT, RCV_MSS_AT, SACKED_AT = 16, 20, 28
BYTES_ACKED_AT = 120
BYTES_RECEIVED_AT = 128
DATA_SEGS_IN_AT = 152
WIND_DOWN_S = 0.25
"""Kept from each direction's share of the time cap, for its streams to finish."""
UPLOAD_ANSWER_EARLY_S = 0.3
"""The server is asked to stop counting this long before the client stops sending, so that a
busy server's late answer still arrives inside the time cap."""


@dataclass
class Stream:
    """One TCP stream: its socket while it moves data (read by the sampler), the bytes the
    application moved, why it stopped if it failed, and (upload) whether the server's own
    count never arrived within the time cap."""

    sock: socket.socket | None = None
    moved: int = 0
    done: bool = False
    error: str | None = None
    unanswered: bool = False


def received(sock: socket.socket) -> Received | None:
    """What arrived on a download stream (see :func:`~hostcheck.netprobe.speed_protocol.arrived`).
    A kernel without the segment count (before 4.6) gives the in-sequence count alone."""
    info = _tcp_info(sock)
    if info is None or len(info) < BYTES_RECEIVED_AT + 8:
        return None
    in_order = _u64(info, BYTES_RECEIVED_AT)
    if len(info) < DATA_SEGS_IN_AT + 4:
        return Received(in_order, 0, 0)
    return Received(in_order, _u32(info, DATA_SEGS_IN_AT), _u32(info, RCV_MSS_AT))


def delivered(sock: socket.socket) -> int | None:
    """Upload bytes that reached the server: acknowledged in sequence, plus the segments it
    acknowledged selectively (SACK) beyond a loss, which would otherwise count only once the
    resent segment fills the hole."""
    info = _tcp_info(sock)
    if info is None or len(info) < BYTES_ACKED_AT + 8:
        return None
    return _u64(info, BYTES_ACKED_AT) + _u32(info, SACKED_AT) * _u32(info, SND_MSS_AT)


def _tcp_info(sock: socket.socket) -> bytes | None:
    """The kernel's TCP_INFO for ``sock``, or None where the platform has none."""
    option = getattr(socket, "TCP_INFO", None)
    return None if option is None else sock.getsockopt(socket.IPPROTO_TCP, option, TCP_INFO_LEN)


def _u32(info: bytes, offset: int) -> int:
    return int(struct.unpack_from("=I", info, offset)[0])


def _u64(info: bytes, offset: int) -> int:
    return int(struct.unpack_from("=Q", info, offset)[0])


def check_time_cap(seconds: float, what: str = "the speed test's time cap") -> None:
    """Refuse a time cap outside MIN_TIME_CAP_S-MAX_TIME_CAP_S (NaN too); ``what`` names it."""
    if not MIN_TIME_CAP_S <= seconds <= MAX_TIME_CAP_S:
        raise InputError(f"{what} must be {MIN_TIME_CAP_S:g}-{MAX_TIME_CAP_S:g} seconds")


def check_byte_cap(max_bytes: int, what: str = "the speed test's byte cap") -> None:
    """Refuse a byte cap outside MIN_BYTE_CAP-MAX_BYTE_CAP; ``what`` names it."""
    if not MIN_BYTE_CAP <= max_bytes <= MAX_BYTE_CAP:
        raise InputError(f"{what} must be {MIN_BYTE_CAP // MB}-{MAX_BYTE_CAP // MB} MB")


def check_streams(streams: int, what: str = "streams") -> None:
    """Refuse a stream count outside 1-MAX_STREAMS; ``what`` names it."""
    if not 1 <= streams <= MAX_STREAMS:
        raise InputError(f"{what} must be 1-{MAX_STREAMS}")


@dataclass(frozen=True)
class Plan:
    seconds: float
    max_bytes: int
    streams: int

    def __post_init__(self) -> None:
        check_time_cap(self.seconds)
        check_byte_cap(self.max_bytes)
        check_streams(self.streams)

    @property
    def latency_s(self) -> float:
        # Handshakes are cheap: 10 take 0.2 s on a short path and half a second at 30 ms.
        return min(0.5, self.seconds * 0.05)

    @property
    def phase_s(self) -> float:
        """Each direction's share of the time cap (after latency, less a margin to wind down)."""
        return (self.seconds - self.latency_s) / 2 - WIND_DOWN_S

    @property
    def warmup_s(self) -> float:
        return min(1.0, self.phase_s * 0.25)

    @property
    def stream_bytes(self) -> int:
        return max(1, min(DEFAULT_STREAM_BYTES, self.max_bytes // (2 * self.streams)))


def _timeout(end: float) -> float:
    return max(0.2, min(5.0, end - time.monotonic()))


def _ping(ep: Endpoint, end: float) -> list[float]:
    """TCP handshake times to the server: no request, nothing charged to the token's budget.

    The handshakes overlap (one starts every PING_EVERY_S): a lost SYN, which TCP resends only
    after a second, costs that one sample instead of every sample queued behind it."""
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(ep.host, ep.port, type=socket.SOCK_STREAM)[0]
    except (OSError, IndexError):
        return []
    out: list[float] = []
    pending: dict[socket.socket, float] = {}
    sel = selectors.DefaultSelector()
    begun, next_at = 0, time.monotonic()
    try:
        while (now := time.monotonic()) < end and (begun < LATENCY_PINGS or pending):
            if begun < LATENCY_PINGS and now >= next_at:
                begun, next_at = begun + 1, now + PING_EVERY_S
                sock = socket.socket(family, kind, proto)
                sock.setblocking(False)
                start = time.perf_counter()
                if sock.connect_ex(addr) in (0, errno.EINPROGRESS):
                    pending[sock] = start
                    sel.register(sock, selectors.EVENT_WRITE)
                else:
                    sock.close()  # refused outright
            wait_until = min(end, next_at) if begun < LATENCY_PINGS else end
            for key, _ in sel.select(max(0.0, wait_until - time.monotonic())):
                done = time.perf_counter()
                sock = key.fileobj  # type: ignore[assignment]
                sel.unregister(sock)
                if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    out.append(done - pending[sock])
                del pending[sock]
                sock.close()
    finally:
        for sock in pending:
            sock.close()
        sel.close()
    return out


def _download(ep: Endpoint, token: str, plan: Plan, end: float, st: Stream) -> None:
    query = urlencode({"seconds": f"{plan.phase_s + 1:.2f}", "bytes": plan.stream_bytes})
    conn = None
    try:
        conn = connect(ep, _timeout(end))
        conn.request("GET", f"{ep.base_path}{DOWNLOAD_PATH}?{query}", headers={"Authorization": f"Bearer {token}"})
        st.sock = conn.sock
        resp = conn.getresponse()
        check_status(resp)
        while time.monotonic() < end and st.moved < plan.stream_bytes:
            if conn.sock is not None:
                conn.sock.settimeout(_timeout(end))
            try:
                chunk = resp.read1(READ_BLOCK)
            except TimeoutError:
                # The read waits at most until the phase ends (or 5 s): a stream that the
                # others starved out (a lost window on a slow shaped link backs off for
                # seconds) has stopped at the deadline, it has not failed.
                if time.monotonic() < end:
                    raise
                break
            if not chunk:
                break
            st.moved += len(chunk)
    except ServerError as exc:
        st.error = str(exc)
    except (OSError, http.client.HTTPException) as exc:
        st.error = f"download stream failed: {_why(exc)}"
    finally:
        _finish(st, conn)


def _finish(st: Stream, conn: http.client.HTTPConnection | None) -> None:
    # The sampler stops at the first finished stream; one that reads this socket while it is
    # being closed gets an OSError (a closed socket's descriptor is -1), never another socket.
    st.done = True
    if conn is not None:
        conn.close()


def _upload(ep: Endpoint, token: str, plan: Plan, end: float, st: Stream) -> None:
    # The server ends the stream on its own clock and answers while we may still be sending
    # (our socket buffer can hold seconds of data on a slow uplink), so we watch for its
    # answer between chunks instead of finishing the body first.
    query = urlencode({"seconds": f"{max(0.1, end - time.monotonic() - UPLOAD_ANSWER_EARLY_S):.2f}", "bytes": plan.stream_bytes})
    block = bytes(UPLOAD_CHUNK)  # the server counts bytes; nothing between us compresses
    frame = b"%x\r\n" % len(block) + block + b"\r\n"
    conn = None
    try:
        conn = connect(ep, _timeout(end))
        conn.putrequest("POST", f"{ep.base_path}{UPLOAD_PATH}?{query}", skip_accept_encoding=True)
        conn.putheader("Authorization", f"Bearer {token}")
        conn.putheader("Content-Type", "application/octet-stream")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        sock = conn.sock
        assert sock is not None
        st.sock = sock
        sent_error: str | None = None
        try:
            while time.monotonic() < end and st.moved + len(block) <= plan.stream_bytes:
                if select.select([sock], [], [], 0)[0]:
                    break  # the server has answered (or hung up)
                sock.settimeout(_timeout(end))
                sock.sendall(frame)
                st.moved += len(block)
        except OSError as exc:
            sent_error = _why(exc)  # the server may have answered (and closed) already
        st.done = True  # from here on the stream no longer loads the link: sampling stops
        sock.settimeout(max(0.2, end + WIND_DOWN_S - time.monotonic()))
        resp = http.client.HTTPResponse(sock, method="POST")
        try:
            resp.begin()
        except TimeoutError:
            if time.monotonic() < end:
                raise ServerError(f"upload stream failed: {sent_error or 'timed out'}") from None
            # The server ends a stream on its own clock, which starts when our request
            # reaches it: on a lossy link a lost handshake or request is resent a second
            # later, and so is the answer. The rate is our kernel's acknowledged bytes; the
            # other streams' answers still check the server (see _direction).
            st.unanswered = True
            return
        except (OSError, http.client.HTTPException) as exc:
            raise ServerError(f"upload stream failed: {sent_error or _why(exc)}") from None
        check_status(resp)
        answer = json.loads(resp.read(1_000_000) or b"null")
        samples = answer.get("samples") if isinstance(answer, dict) else None
        if not isinstance(samples, list) or not all(
            isinstance(s, list) and len(s) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in s)
            for s in samples
        ):
            raise ServerError("the server's upload answer has the wrong shape")
        # The rate comes from our kernel's acknowledged bytes; the server's own record must
        # still make sense, or something between us (or the server) is not what it claims.
        got = [(float(t), int(n)) for t, n in samples]
        if any(b[1] < a[1] or b[0] < a[0] for a, b in zip(got, got[1:], strict=False)) or (
            got and got[-1][1] > st.moved
        ):
            raise ServerError("the server's upload answer is inconsistent (counts more than was sent)")
    except ServerError as exc:
        st.error = str(exc)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        st.error = f"upload stream failed: {_why(exc)}"
    finally:
        _finish(st, conn)


def _why(exc: BaseException) -> str:
    if isinstance(exc, socket.timeout):
        return "timed out"
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


Count = TypeVar("Count")
Counter = Callable[[socket.socket], "Count | None"]


def _sample(
    streams: list[Stream], counter: Counter[Count], idle: Count, end: float
) -> tuple[list[tuple[float, tuple[Count, ...]]], str | None]:
    """Every stream's kernel counters at the same instants (``idle`` for one not connected
    yet), every SAMPLE_EVERY_S, until ``end`` or until the first stream stops moving data
    (after that the streams no longer share the link as they did)."""
    snapshots: list[tuple[float, tuple[Count, ...]]] = []
    due = time.monotonic()
    while True:
        due = max(due + SAMPLE_EVERY_S, time.monotonic())  # a late sampler does not catch up in a burst
        time.sleep(max(0.0, min(due, end) - time.monotonic()))
        if time.monotonic() >= end:
            return snapshots, None
        before = time.monotonic()
        counts: list[Count] = []
        for st in streams:
            if st.done:
                return snapshots, None
            sock = st.sock
            try:
                got = idle if sock is None else counter(sock)
            except OSError:
                return snapshots, None  # closed under us: it has stopped
            if got is None:
                return snapshots, "this system's TCP_INFO has no byte counters (Linux 4.1 or later has them)"
            counts.append(got)
        after = time.monotonic()
        if after - before <= MAX_SAMPLE_SPREAD_S:
            snapshots.append(((before + after) / 2, tuple(counts)))


def _run_streams(
    target: Any, counter: Counter[Count], idle: Count, ep: Endpoint, token: str, plan: Plan, end: float
) -> tuple[list[Stream], list[tuple[float, tuple[Count, ...]]], str | None]:
    streams = [Stream() for _ in range(plan.streams)]
    threads = [
        threading.Thread(target=target, args=(ep, token, plan, end, st), daemon=True, name=f"speed-{i}")
        for i, st in enumerate(streams)
    ]
    for t in threads:
        t.start()
    snapshots, why = _sample(streams, counter, idle, end)
    for t in threads:
        # The streams watch ``end`` themselves; this join bounds a stuck one all the same.
        t.join(max(0.0, end - time.monotonic()) + 1.0)
    for t, st in zip(threads, streams, strict=False):
        if t.is_alive() and st.error is None:
            st.error = "stream did not finish in time"
    return streams, snapshots, why


def _direction(
    streams: list[Stream], snapshots: Sequence[Snapshot], why: str | None, plan: Plan, name: str
) -> tuple[dict[str, Any], str | None]:
    moved = sum(s.moved for s in streams)
    errors = [s.error for s in streams if s.error]
    if errors:
        return {"bytes": moved}, f"{name}: {errors[0]}"
    if why:
        return {"bytes": moved}, f"{name}: {why}"
    if streams and all(s.unanswered for s in streams):
        return {"bytes": moved}, f"{name}: the server answered no stream within the time cap, so nothing confirms its count"
    # Sampling stops when the first stream ends, so one stream at its byte cap (within a chunk
    # of it) is enough for the cap to have ended the measurement.
    capped = any(s.moved > plan.stream_bytes - READ_BLOCK for s in streams)
    warmup, min_window = plan.warmup_s, MIN_WINDOW_S
    if capped:
        # The byte cap ended the streams early (a fast link): the warm-up and the window
        # shrink with what was moved, rather than throwing the measurement away.
        span = snapshots[-1][0] - snapshots[0][0] if snapshots else 0.0
        warmup, min_window = min(warmup, span * 0.25), MIN_CAPPED_WINDOW_S
    rate = steady_rate(snapshots, warmup)
    if rate is None or rate[1] < min_window:
        return {"bytes": moved}, f"{name}: too little data after the warm-up to measure (server too slow or silent)"
    mbps, window, in_window = rate
    if in_window < MIN_WINDOW_BYTES:
        return {"bytes": moved}, (
            f"{name}: only {in_window} bytes in {window:.1f} s after the warm-up: the server is too slow "
            "or stalled to measure"
        )
    out = {"mbps": round(mbps, 2), "bytes": moved, "window_s": round(window, 2), "byte_cap_reached": capped}
    return out, None


def run_speedtest(
    url: str,
    token: str,
    *,
    fingerprint: str | None = None,
    seconds: float = DEFAULT_SECONDS,
    max_bytes: int = DEFAULT_MAX_BYTES,
    streams: int = DEFAULT_STREAMS,
) -> dict[str, Any]:
    """Measure against ``url``; returns the ``network.bandwidth`` facts. Never raises for
    network trouble or a bad server (``measured: False`` with the reason)."""
    started = time.monotonic()
    try:
        plan = Plan(seconds, max_bytes, streams)
        ep = parse_endpoint(url, fingerprint)
    except ValueError as exc:
        return not_measured(str(exc))
    base: dict[str, Any] = {
        "source": "probe-server",
        "server": f"{ep.scheme}://{ep.host}:{ep.port}",
        "streams": plan.streams,
        "caps": {"seconds": plan.seconds, "bytes": plan.max_bytes},
        "warmup_s": plan.warmup_s,
    }
    pings = _ping(ep, started + plan.latency_s)
    if not pings:
        return {**not_measured(f"the server at {base['server']} does not accept connections"), **base,
                "duration_s": round(time.monotonic() - started, 2)}
    rtt = latency(pings)
    assert rtt is not None
    # A fixed schedule from the start: a phase that overruns shortens the next one instead
    # of pushing the whole test past its time cap.
    down_end = started + plan.latency_s + plan.phase_s
    streams_down, received_down, why_down = _run_streams(_download, received, NOTHING_RECEIVED, ep, token, plan, down_end)
    down, down_error = _direction(streams_down, arrived(received_down), why_down, plan, "download")
    up_end = started + plan.seconds - WIND_DOWN_S
    up, up_error = _direction(*_run_streams(_upload, delivered, 0, ep, token, plan, up_end), plan, "upload")
    result = {
        **base,
        "measured": down_error is None and up_error is None,
        "download_mbps": down.get("mbps"),
        "upload_mbps": up.get("mbps"),
        "latency_ms": round(rtt[0], 2),
        "jitter_ms": round(rtt[1], 2),
        "bytes_down": down["bytes"],
        "bytes_up": up["bytes"],
        "byte_cap_reached": bool(down.get("byte_cap_reached") or up.get("byte_cap_reached")),
        "duration_s": round(time.monotonic() - started, 2),
        "reason": "; ".join(e for e in (down_error, up_error) if e) or None,
    }
    return result


def not_measured(reason: str) -> dict[str, Any]:
    return {"measured": False, "download_mbps": None, "upload_mbps": None, "reason": reason}
