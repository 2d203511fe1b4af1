"""The speed test's wire format and arithmetic (pure, shared by server and client).

Endpoints on the probe server, under the same token and limits as ``/probe``::

    GET  /speed/download?seconds=S&bytes=N  -> 200, incompressible bytes until S s or N bytes
    POST /speed/upload?seconds=S&bytes=N    (chunked body) -> 200 {"received": n,
                                              "samples": [[server_time_s, bytes_so_far], ...]}

Upload is measured where the bytes arrive (the server's samples): counting at the sender
would also count what merely sits in its socket buffer. Download is measured by the client.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

DOWNLOAD_PATH = "/speed/download"
UPLOAD_PATH = "/speed/upload"
MAX_SECONDS = 30.0
"""Longest single stream the server accepts."""
MAX_STREAM_BYTES = 2 * 1024**3
DEFAULT_STREAM_BYTES = 1024**3
"""The server's default cap per stream; the client never asks for more."""
SAMPLE_EVERY_S = 0.05

Samples = Sequence[tuple[float, int]]


class SpeedParamError(ValueError):
    """Bad ``seconds``/``bytes`` parameters (HTTP 400)."""


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


def _at(samples: Samples, t: float) -> int:
    """Bytes so far at time ``t`` (the last sample at or before it)."""
    got = 0
    for when, total in samples:
        if when > t:
            break
        got = total
    return got


def window_rate(streams: Sequence[Samples], warmup_s: float) -> tuple[float, float, int] | None:
    """Aggregate rate of parallel streams: ``(mbps, window_s, bytes_in_window)`` or None.

    The window starts ``warmup_s`` after the first byte of any stream (slow start and the
    shaper's burst bucket are discarded) and ends at the last sample of any stream; each
    stream's cumulative count is read as a step function on a common clock.
    """
    starts = [s[0][0] for s in streams if s]
    ends = [s[-1][0] for s in streams if s]
    if not starts:
        return None
    begin = min(starts) + warmup_s
    end = max(ends)
    if end - begin <= 0:
        return None
    moved = sum(_at(s, end) - _at(s, begin) for s in streams if s)
    return moved * 8 / (end - begin) / 1e6, end - begin, moved


def latency(samples_s: Sequence[float]) -> tuple[float, float] | None:
    """``(median_ms, jitter_ms)``; jitter is the mean change between consecutive samples."""
    if not samples_s:
        return None
    ms = [x * 1000 for x in samples_s]
    jitter = statistics.fmean(abs(b - a) for a, b in zip(ms, ms[1:], strict=False)) if len(ms) > 1 else 0.0
    return statistics.median(ms), jitter
