"""The speed test's wire format and arithmetic (pure, shared by server and client).

Endpoints on the probe server, under the same token and limits as ``/probe``::

    GET  /speed/download?seconds=S&bytes=N  -> 200, incompressible bytes until S s or N bytes
    POST /speed/upload?seconds=S&bytes=N    (chunked body) -> 200 {"received": n,
                                              "samples": [[server_time_s, bytes_so_far], ...]}

The client measures both directions from its kernel's TCP counters (``TCP_INFO``): for
download, the bytes that arrived (see :func:`arrived`); for upload, the bytes the server
acknowledged, cumulatively or selectively. Counting what the application wrote would include
what merely sits in the socket buffer, and counting what it read would lag behind by whatever
the buffer holds. The server's upload samples are a record of what it received, checked for
consistency; the rate does not depend on them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import NamedTuple

from hostcheck.errors import SpeedParamError

DOWNLOAD_PATH = "/speed/download"
UPLOAD_PATH = "/speed/upload"
MAX_SECONDS = 30.0
"""Longest single stream the server accepts."""
MAX_STREAM_BYTES = 2 * 1024**3
DEFAULT_STREAM_BYTES = 1024**3
"""The server's default cap per stream; the client never asks for more."""
SAMPLE_EVERY_S = 0.05

Snapshot = tuple[float, Sequence[int]]
"""``(time, bytes so far per stream)``, every stream read at one instant."""


class Received(NamedTuple):
    """A download stream's receiving counters at one instant (``TCP_INFO``)."""

    in_order: int
    """``tcpi_bytes_received``: payload delivered in sequence."""
    segments: int
    """``tcpi_data_segs_in``: data segments that arrived, in sequence or not."""
    mss: int
    """``tcpi_rcv_mss``: the sender's segment size, as the kernel estimates it."""


NOTHING_RECEIVED = Received(0, 0, 0)


def parse_params(query: Mapping[str, str], max_seconds: float, max_bytes: int) -> tuple[float, int]:
    """``(seconds, bytes)`` from a query, both required, within the server's caps."""
    try:
        seconds = float(query["seconds"])
        nbytes = int(query["bytes"])
    except (KeyError, ValueError):
        raise SpeedParamError("seconds and bytes are required numbers") from None
    if not math.isfinite(seconds) or not 0.1 <= seconds <= max_seconds:
        raise SpeedParamError(f"seconds must be 0.1-{max_seconds:g}")
    if not 1 <= nbytes <= max_bytes:
        raise SpeedParamError(f"bytes must be 1-{max_bytes}")
    return seconds, nbytes


TAIL_S = 2.0
"""Over this last stretch of a stream :func:`arrived` holds the drift at its value from the
stretch's start: too few instants follow to find one with no hole open."""


def arrived(snapshots: Sequence[tuple[float, Sequence[Received]]]) -> list[Snapshot]:
    """Bytes that had reached each stream's receiver by each instant, out of order included.

    The in-sequence count stands still behind a lost segment and jumps when the resent one
    fills the hole, by everything that arrived meanwhile: up to a congestion window, which on
    a slow link is a few percent of a measurement, so a hole open at one end of the window
    and not the other moves the rate by that much. Segments times MSS count what arrived at
    once, but also what arrived twice and short segments as full ones, so their excess over
    the in-sequence count is a slowly growing drift plus what is held out of order, which is
    nothing again once the hole fills. What is held at an instant is therefore that excess
    less its least value at any later instant. Over the last ``TAIL_S`` the later instants
    are too few (on a long round trip with losses a stream can keep some hole open for a
    second and more), so there the drift is taken as it stood ``TAIL_S`` before the end.

    A stream whose excess ever falls below zero has segments the kernel did not count one by
    one (some NICs and virtual NICs merge them and report the merge as one): its in-sequence
    count is used as it is.
    """
    if not snapshots:
        return []
    times = [t for t, _ in snapshots]
    tail = next(k for k, t in enumerate(times) if t >= times[-1] - TAIL_S)
    streams = zip(*(counts for _, counts in snapshots), strict=True)
    totals = zip(*(_arrived_one(stream, tail) for stream in streams), strict=True)
    return [(t, counts) for t, counts in zip(times, totals, strict=True)]


def _arrived_one(stream: Sequence[Received], tail: int) -> list[int]:
    largest_mss = 0
    excess = []
    for got in stream:
        largest_mss = max(largest_mss, got.mss)
        excess.append(got.segments * largest_mss - got.in_order)
    if min(excess) < 0:
        return [got.in_order for got in stream]
    least_later = list(accumulate(reversed(excess), min))[::-1]
    drift = least_later[:tail] + [least_later[tail]] * (len(excess) - tail)
    return [got.in_order + e - d for got, e, d in zip(stream, excess, drift, strict=True)]


def steady_rate(snapshots: Sequence[Snapshot], warmup_s: float) -> tuple[float, float, int] | None:
    """Aggregate rate of parallel streams: ``(mbps, window_s, bytes_in_window)`` or None.

    ``snapshots`` are every stream's byte counter read at the same instants, while none had
    finished. The window starts ``warmup_s`` after the first snapshot in which any stream had
    begun (slow start and a shaper's burst bucket are discarded: the streams share one link,
    so one whose handshake was lost and resent joins a link the others already fill) and
    ends at the last snapshot. The rate is the least-squares slope of the streams' total over
    every snapshot in the window: a counter runs a little behind the wire by however long the
    kernel takes to process what arrived, and that delay varies (it grows on a busy machine),
    which two end points alone would carry straight into the figure.
    """
    started = next((t for t, counts in snapshots if any(c > 0 for c in counts)), None)
    if started is None:
        return None
    window = [(t, sum(counts)) for t, counts in snapshots if t >= started + warmup_s]
    if len(window) < 2 or window[-1][0] - window[0][0] <= 0:
        return None
    t0, b0 = window[0]
    mean_t = statistics.fmean(t - t0 for t, _ in window)
    mean_b = statistics.fmean(b - b0 for _, b in window)
    sxx = sum((t - t0 - mean_t) ** 2 for t, _ in window)
    sxy = sum((t - t0 - mean_t) * (b - b0 - mean_b) for t, b in window)
    return sxy / sxx * 8 / 1e6, window[-1][0] - t0, window[-1][1] - b0


def latency(samples_s: Sequence[float]) -> tuple[float, float] | None:
    """``(median_ms, jitter_ms)``; jitter is the mean change between consecutive samples."""
    if not samples_s:
        return None
    ms = [x * 1000 for x in samples_s]
    jitter = statistics.fmean(abs(b - a) for a, b in zip(ms, ms[1:], strict=False)) if len(ms) > 1 else 0.0
    return statistics.median(ms), jitter
