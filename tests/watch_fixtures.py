"""Real network peers on loopback and a real journal file for `hostcheck watch`: a TCP
listener, a DNS responder, a STUN responder, and journal files written by
systemd-journal-remote (read back by the real journalctl). Used by the tests and by
bench/watch.py; no mocks of the recorder's own code."""

from __future__ import annotations

import socket
import struct
import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hostcheck.collectors.gpu import NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL
from hostcheck.netprobe.stun_codec import CLASS_SUCCESS, decode_message, encode_message
from tests.nvml_standin import FakeNvml

JOURNAL_REMOTE = Path("/lib/systemd/systemd-journal-remote")


class Peer:
    """A thread serving one socket until :meth:`close`."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                self.handle()
            except OSError:
                continue

    def handle(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


class TcpListener(Peer):
    """Accepts and closes every connection (what a probe of a TCP target needs)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        sock = socket.socket()
        sock.bind((host, 0))
        sock.listen(64)
        super().__init__(sock)

    def handle(self) -> None:
        conn, _ = self.sock.accept()
        conn.close()


class DnsResponder(Peer):
    """Answers every query with NOERROR, the question, and ``records`` A records (a resolver's
    answer for one name; more records make a longer answer). While ``muted`` it reads queries
    and answers none, as a resolver behind a cut link."""

    def __init__(self, host: str = "127.0.0.1", records: int = 1) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((host, 0))
        self.records = records
        self.muted = False
        super().__init__(sock)

    def handle(self) -> None:
        data, peer = self.sock.recvfrom(512)
        if len(data) < 12 or self.muted:
            return
        question = data[12:]
        answer = b"".join(struct.pack("!HHHIH4s", 0xC00C, 1, 1, 300, 4, bytes([192, 0, 2, 1 + i])) for i in range(self.records))
        self.sock.sendto(data[:2] + struct.pack("!HHHHH", 0x8180, 1, self.records, 0, 0) + question + answer, peer)


class StunResponder(Peer):
    """Answers Binding requests with ``mapped`` as the XOR-MAPPED-ADDRESS (settable: a test
    changes the 'public address' the host is seen from)."""

    def __init__(self, mapped: tuple[str, int], host: str = "127.0.0.1") -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((host, 0))
        self.mapped = mapped
        self.answered = 0
        super().__init__(sock)

    def handle(self) -> None:
        data, peer = self.sock.recvfrom(2048)
        msg = decode_message(data)
        if not msg.is_request:
            return
        self.sock.sendto(encode_message(CLASS_SUCCESS, msg.transaction_id, {"XOR-MAPPED-ADDRESS": self.mapped}), peer)
        self.answered += 1


def journal_export(entries: list[dict[str, str]]) -> bytes:
    """The journal export format; a value with a newline in it (a multi-line kernel record) in
    the format's binary field form: name, newline, 64-bit little-endian length, data, newline."""
    def field(key: str, value: str) -> bytes:
        if "\n" not in value:
            return f"{key}={value}\n".encode()
        data = value.encode()
        return key.encode() + b"\n" + len(data).to_bytes(8, "little") + data + b"\n"

    return b"".join(b"".join(field(k, v) for k, v in e.items()) + b"\n" for e in entries)


def journal_entry(boot: str, t: float, message: str, transport: str = "kernel", monotonic: float | None = None,
                  **extra: str) -> dict[str, str]:
    """One entry at wall time ``t``. ``monotonic`` (seconds since the boot began) matters when
    entries of one boot are spread over several files: journalctl orders them by it."""
    usec = int(t * 1e6)
    mono = usec % 10**9 if monotonic is None else int(monotonic * 1e6)
    return {"__REALTIME_TIMESTAMP": str(usec), "__MONOTONIC_TIMESTAMP": str(mono), "_BOOT_ID": boot,
            "_TRANSPORT": transport, "MESSAGE": message, "PRIORITY": "3", "_HOSTNAME": "lab", **extra}


def write_journal(path: Path, entries: list[dict[str, str]]) -> Path:
    """A real journal file holding ``entries`` (systemd-journal-remote reads the export format)."""
    subprocess.run([str(JOURNAL_REMOTE), "-o", str(path), "-"], input=journal_export(entries), check=True,
                   capture_output=True, timeout=60)
    return path


class CountingNvml(FakeNvml):
    """The suite's NVML stand-in, with counters set per query: the violation counters per
    policy (``violation_ns``) and the volatile ECC counts per error type (``ecc_counts``; a card
    whose description answers the ECC query itself, e.g. not supported, keeps its answer)."""

    def __init__(self, card: dict[str, Any]) -> None:
        super().__init__([card])
        self.violation_ns = {NVML_PERF_POLICY_THERMAL: 0, NVML_PERF_POLICY_POWER: 0}
        self.ecc_counts = {0: 0, 1: 0}
        self.card = card

    def _answer(self, handle: int, name: str, args: tuple[Any, ...]) -> Any:
        if handle in self.lost:
            return super()._answer(handle, name, args)
        if name == "nvmlDeviceGetViolationStatus":
            self.calls.append((name, handle, *args))
            return SimpleNamespace(referenceTime=0, violationTime=self.violation_ns[args[0]])
        if name == "nvmlDeviceGetTotalEccErrors" and name not in self.card:
            self.calls.append((name, handle, *args))
            return self.ecc_counts[args[0]]
        return super()._answer(handle, name, args)


def render_watch(analysis: Any, scores: list[Any], db: str, fmt: str, details: bool = True) -> str:
    """`hostcheck watch report`'s output in the format ``fmt``, from an analysis in hand (by
    default as `--details` prints it: everything)."""
    from hostcheck.render.formats import Kind, Options, render
    from hostcheck.render.views import WatchView

    return render(Kind.WATCH, WatchView(analysis, scores, db), fmt, Options(details=details))


WEEK_START = 1_795_392_000.0  # 2026-11-23 00:00 UTC, a Monday
WEEK_INTERVAL_S = 300.0


def write_week(db: Path, start: float = WEEK_START, gpu_error: str = "GPU is lost",
               evidence: tuple[str, str] = ("Journal stopped: a clean shutdown",
                                            "the journal has no shutdown record for the boot")) -> list[tuple[str, float, float]]:
    """A week of `hostcheck watch` samples written through the recorder's own writer, fast
    enough for a unit test (bench/watch_week.py drives the whole recorder and takes minutes):
    three boots, each outage kind the report names once, and what was injected as
    (cause, start, seconds). ``gpu_error`` and ``evidence`` are what NVML and the journal said:
    the outages' evidence in the report."""
    from hostcheck.recording.store import Boot, Sample, WatchWriter

    day = 86400.0
    network = (start + 1 * day + 3 * 3600 + 600, 25 * 60.0)  # the ISP's nightly reset
    driver = (start + 3 * day + 20 * 3600 + 1800, 45 * 60.0)  # NVML lost the GPU
    boots = [("boot-a", start, start + 2 * day + 14 * 3600, True, evidence[0]),
             ("boot-b", start + 2 * day + 14 * 3600 + 300, start + 5 * day + 9 * 3600 + 900, False, evidence[1]),
             ("boot-c", start + 5 * day + 9 * 3600 + 900 + 2400, start + 7 * day, None, "")]
    with WatchWriter(db) as writer:
        writer.conn.execute("PRAGMA synchronous=OFF")  # a throwaway file: no fsync per sample
        for boot_id, first, last, clean, evidence in boots:
            t = first
            while t < last:
                down_net = network[0] <= t < network[0] + network[1]
                down_gpu = driver[0] <= t < driver[0] + driver[1]
                writer.add_sample(Sample(t=t, mono=t - first, boottime=t - first, boot_id=boot_id,
                                         interval_s=WEEK_INTERVAL_S, net_ok=0 if down_net else 3, net_total=3,
                                         gpu_ok=not down_gpu,
                                         detail={"nvml": gpu_error} if down_gpu else {}))
                t += WEEK_INTERVAL_S
            if clean is not None:
                writer.put_boot(Boot(boot_id, first, t - WEEK_INTERVAL_S + 1, clean, evidence))
    return [("network", *network), ("reboot", boots[0][2], 300.0), ("driver", *driver),
            ("power", boots[1][2], 2400.0)]
