"""The recorder's own cost: CPU, memory, database growth and network bytes, measured.

The whole run happens in a network namespace of its own (`unshare -rn`; no root needed where
unprivileged user namespaces are allowed), so the loopback interface's counters hold exactly
the bytes of what the bench sends there, headers included:

1. bytes per exchange, each kind alone: a TCP connect-and-close to a listener, a DNS query
   to a responder answering with six address records, a STUN Binding, and a check of one
   forwarded port through a real probe server over TLS (its own self-signed certificate,
   pinned), each repeated and averaged;
2. the recorder itself, as a child process, for --seconds with samples --interval apart (far
   denser than the default 60 s): the default target set (three TCP and three DNS targets,
   here on loopback), NVML answered by the test suite's stand-in for an RTX 3080 Ti Laptop
   GPU (so each sample includes the GPU read and the counters), the kernel log read through
   journalctl from a journal stand-in (a real journal file written by
   systemd-journal-remote: three boots, Xid and AER lines, kernel chatter), the package log,
   the power supplies and NUT (absent here: recorded once as such).

3. the metrics file (`--textfile`) over a recording of 30 days at one sample a minute (43,200
   samples, generated in the recorder's shape, a few outages among them): the CPU of bringing
   the metrics up to date and writing the file after one sample, and of recomputing the window
   gauges and platform scores from the recording (done at the first sample, when the host
   goes down or comes back, and every REFRESH_S), also spread over the samples in between.

Printed: CPU milliseconds per sample (user + system of the recorder and every command it ran),
peak RSS, database bytes per sample, network bytes per sample, and each scaled to the default
interval (1440 samples a day, one a minute). The NVML stand-in is Python answering the same
calls; a real driver's NVML calls cost the recorder less Python and some driver time.

    .venv/bin/python bench/watch.py                        # 30 s at 20 ms
    .venv/bin/python bench/watch.py --seconds 60 --json out.json
    .venv/bin/python bench/watch.py --textfile-only        # part 3 alone
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SAMPLES_PER_DAY = 1440  # the default interval, 60 s
IN_NAMESPACE = "HOSTCHECK_BENCH_NETNS"
REPEAT = 20


def lo_tx_bytes() -> int | None:
    """Bytes sent on this namespace's loopback (each packet once; /proc/self/net follows the namespace)."""
    try:
        for line in Path("/proc/self/net/dev").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                return int(rest.split()[8])
    except (OSError, ValueError, IndexError):
        return None
    return None


def per_exchange(run: Any, repeat: int = REPEAT) -> float | None:
    before = lo_tx_bytes()
    for _ in range(repeat):
        run()
    time.sleep(0.2)  # the last FIN/ACKs
    after = lo_tx_bytes()
    return None if before is None or after is None else round((after - before) / repeat, 1)


def journal_stand_in(path: Path) -> Path:
    from tests.watch_fixtures import journal_entry, write_journal

    now = time.time()
    boots = ["1" * 32, "2" * 32, "3" * 32]
    entries = []
    for n, boot in enumerate(boots):
        start = now - (3 - n) * 3600
        entries.append(journal_entry(boot, start, "Linux version 6.8.0-50-generic"))
        for i in range(300):  # kernel chatter the recorder reads and does not keep
            entries.append(journal_entry(boot, start + 1 + i, f"usb 1-{i % 4}: new high-speed USB device number {i}"))
        entries.append(journal_entry(boot, start + 400, "NVRM: Xid (PCI:0000:01:00): 13, pid=1234, name=python3, Graphics SM Warp Exception"))
        entries.append(journal_entry(boot, start + 500, "pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0"))
        if n == 0:
            entries.append(journal_entry(boot, start + 600, "Journal stopped", transport="driver",
                                         MESSAGE_ID="d93fb3c9c24d451a97cea615ce59c00b"))
    return write_journal(path, entries)


def exchanges(tmp: Path) -> dict[str, float | None]:
    """Bytes on the wire of each kind of exchange, alone."""
    from hostcheck.netprobe.probe_client import request_probe
    from hostcheck.netprobe.stun_client import stun_binding
    from hostcheck.probeserver import tls
    from hostcheck.probeserver.limits import Limits
    from hostcheck.watch.probes import NetworkProber, parse_targets
    from tests.probe_fixtures import TOKEN, free_port, start_in_thread
    from tests.watch_fixtures import DnsResponder, StunResponder, TcpListener

    tcp, dns, stun = TcpListener(), DnsResponder(records=6), StunResponder(("198.51.100.7", 40000))
    out: dict[str, float | None] = {}
    try:
        for kind, spec in (("tcp", f"tcp:127.0.0.1:{tcp.port}"), ("dns", f"dns:127.0.0.1:{dns.port}")):
            prober = NetworkProber(parse_targets([spec]), timeout=2.0)
            try:
                out[kind] = per_exchange(prober.sample)
            finally:
                prober.close()
        out["stun"] = per_exchange(lambda: stun_binding(("127.0.0.1", stun.port), deadline=time.monotonic() + 2))
    finally:
        for peer in (tcp, dns, stun):
            peer.close()
    cert, key = tls.ensure_self_signed(tmp / "tls")
    srv = start_in_thread(Limits(request_deadline_s=10, rate_per_min=600, overall_per_min=600), ssl_context=tls.server_context(cert, key))
    pin = tls.fingerprint_of_pem_file(cert)
    try:
        for proto in ("tcp", "udp"):
            port = free_port()
            out[f"probe_{proto}_port"] = per_exchange(
                lambda p=port, pr=proto: request_probe(srv.url, TOKEN, [(p, pr)], timeout=5, fingerprint=pin), repeat=5)
    finally:
        srv.stop()
    return out


def child(config_path: Path) -> None:
    """Run the recorder with the NVML stand-in (not reachable through the CLI)."""
    from hostcheck.watch.recorder import Recorder, WatchConfig
    from tests.nvml_standin import NOT_SUPPORTED, FakeNvml, laptop_3080ti

    cfg = json.loads(config_path.read_text())
    card = {**laptop_3080ti(), "nvmlDeviceGetTotalEccErrors": NOT_SUPPORTED}
    config = WatchConfig(db=Path(cfg["db"]), interval_s=cfg["interval"], duration_s=cfg["seconds"], targets=cfg["targets"],
                         journal_command=["journalctl", "--file", cfg["journal"]], nvml=FakeNvml([card]),
                         power_supply_dir=Path(cfg["power"]), upsc_command=[cfg["upsc"]])  # fmt: skip
    recorder = Recorder(config, log=lambda _m: None)
    recorder.run()
    Path(cfg["rss"]).write_text(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))


def recorder_run(tmp: Path, seconds: float, interval: float) -> dict[str, Any]:
    from tests.watch_fixtures import DnsResponder, TcpListener

    peers = [TcpListener() for _ in range(3)] + [DnsResponder(records=6) for _ in range(3)]
    targets = [f"tcp:127.0.0.1:{p.port}" for p in peers[:3]] + [f"dns:127.0.0.1:{p.port}" for p in peers[3:]]
    power = tmp / "power_supply"
    power.mkdir()
    config = {"db": str(tmp / "watch.db"), "interval": interval, "seconds": seconds, "targets": targets,
              "journal": str(journal_stand_in(tmp / "stand-in.journal")), "power": str(power),
              "upsc": str(tmp / "no-upsc-here"), "rss": str(tmp / "rss")}  # fmt: skip
    (tmp / "config.json").write_text(json.dumps(config))
    try:
        before_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        before_net = lo_tx_bytes()
        subprocess.run([sys.executable, __file__, "--child", str(tmp / "config.json")], cwd=REPO, check=True,
                       env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, timeout=seconds + 120)
        after_net = lo_tx_bytes()
        after_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        for p in peers:
            p.close()
    conn = sqlite3.connect(tmp / "watch.db")
    samples = conn.execute("SELECT count(*) FROM samples").fetchone()[0]
    kernel_events = conn.execute("SELECT count(*) FROM events WHERE kind IN ('xid', 'aer')").fetchone()[0]
    journal_failures = conn.execute("SELECT count(*) FROM events WHERE kind = 'journal'").fetchone()[0]
    gpu_ok = conn.execute("SELECT count(*) FROM samples WHERE gpu_ok = 1").fetchone()[0]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    size = (tmp / "watch.db").stat().st_size
    cpu = (after_cpu.ru_utime - before_cpu.ru_utime) + (after_cpu.ru_stime - before_cpu.ru_stime)
    net = None if before_net is None or after_net is None else (after_net - before_net) / samples
    return {
        "samples": samples,
        "samples_with_gpu_read": gpu_ok,
        "kernel_lines_recorded": kernel_events,
        "journal_unreadable_events": journal_failures,
        "cpu_s_total": round(cpu, 2),
        "cpu_ms_per_sample": round(cpu / samples * 1000, 2),
        "cpu_s_per_day_at_60s": round(cpu / samples * SAMPLES_PER_DAY, 1),
        "cpu_pct_at_60s": round(cpu / samples / 60 * 100, 3),
        "peak_rss_mib": round(int((tmp / "rss").read_text()) / 1024, 1),
        "db_bytes_per_sample": round(size / samples, 1),
        "db_mib_per_day_at_60s": round(size / samples * SAMPLES_PER_DAY / 2**20, 3),
        "net_bytes_per_sample": None if net is None else round(net, 1),
        "net_bytes_per_minute_at_60s": None if net is None else round(net, 1),
    }


def recording_of_days(db: Path, days: int) -> None:
    """A recording in the recorder's shape: a sample a minute, six targets, one GPU; an outage
    of each live cause every few days."""
    from hostcheck.recording.store import WatchWriter

    writer = WatchWriter(db)
    start = time.time() - days * 86400
    rows = []
    for i in range(days * SAMPLES_PER_DAY):
        down = i % 4000 in range(5)  # a 5-minute outage every ~2.8 days
        net = [{"target": f"tcp:192.0.2.{n}:443", "ok": not down or n > 2, "ms": 12.5} for n in range(6)]
        detail = {"net": net, "gpus": [{"i": 0, "temp": 61, "w": 44.8, "thr": [], "th": 0.0, "pw": 1.2, "span": 60.0}]}
        rows.append((start + 60 * i, 100.0 + 60 * i, 100.0 + 60 * i, "b" * 32, 60.0, 0 if down and i % 8000 < 5 else 6,
                     6, 1, json.dumps(detail, separators=(",", ":"))))
    with writer.conn:
        writer.conn.execute("BEGIN")
        writer.conn.executemany("INSERT INTO samples (t, mono, boottime, boot_id, interval_s, net_ok, net_total, gpu_ok, detail)"
                                " VALUES (?,?,?,?,?,?,?,?,?)", rows)
        writer.conn.execute("COMMIT")
    writer.close()


def textfile_cost(tmp: Path, days: int = 30, repeat: int = 2000) -> dict[str, Any]:
    from hostcheck.recording.store import Sample, WatchWriter
    from hostcheck.watch.textfile import FILE_NAME, REFRESH_S, TextfileOutput

    db = tmp / "month.db"
    recording_of_days(db, days)
    out_dir = tmp / "textfile"
    out_dir.mkdir()
    writer = WatchWriter(db)
    last = writer.last_sample()
    assert last is not None
    hook = TextfileOutput(out_dir, db, 60.0, print, refresh_s=float("inf"))
    cpu0 = time.process_time()
    hook.after_sample(writer, last)  # the first sample: the window is computed once
    first = time.process_time() - cpu0
    refreshes = []
    for _ in range(3):
        cpu0 = time.process_time()
        hook.refresh()
        refreshes.append(time.process_time() - cpu0)
    samples = [Sample(last.t + 60 * n, last.mono + 60 * n, last.boottime + 60 * n, last.boot_id, 60.0, 6, 6, True,
                      last.detail) for n in range(1, repeat + 1)]
    cpu0 = time.process_time()
    for s in samples:
        hook.after_sample(writer, s)
    per_sample = (time.process_time() - cpu0) / repeat
    writer.close()
    refresh = sorted(refreshes)[1]
    every = REFRESH_S / 60.0
    return {
        "recording_days": days,
        "recording_samples": days * SAMPLES_PER_DAY,
        "file_bytes": (out_dir / FILE_NAME).stat().st_size,
        "write_cpu_ms_per_sample": round(per_sample * 1000, 3),
        "first_sample_cpu_s": round(first, 2),
        "window_refresh_cpu_s": round(refresh, 2),
        "window_refresh_every_s": REFRESH_S,
        "window_refresh_cpu_ms_per_sample_at_60s": round(refresh / every * 1000, 1),
    }


def measure(seconds: float, interval: float) -> dict[str, Any]:
    from tests.watch_fixtures import JOURNAL_REMOTE

    if not JOURNAL_REMOTE.exists():
        raise SystemExit(f"bench/watch.py needs {JOURNAL_REMOTE} (package systemd-journal-remote) for its journal stand-in")
    in_namespace = os.environ.get(IN_NAMESPACE) == "1"
    with tempfile.TemporaryDirectory(prefix="watch-bench-") as tmp:
        figures: dict[str, Any] = {"seconds": seconds, "interval_s": interval,
                                   "network_measured": in_namespace}  # fmt: skip
        if in_namespace:
            figures["bytes_per_exchange"] = exchanges(Path(tmp))
        else:
            figures["bytes_per_exchange"] = None
            figures["network_not_measured"] = "no network namespace of its own (unshare -rn failed): loopback is shared"
        figures.update(recorder_run(Path(tmp), seconds, interval))
        if not in_namespace:
            figures["net_bytes_per_sample"] = figures["net_bytes_per_minute_at_60s"] = None
        figures["textfile"] = textfile_cost(Path(tmp))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=0.02)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--textfile-only", action="store_true", help="only the metrics file's cost (part 3)")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    if args.textfile_only:
        with tempfile.TemporaryDirectory(prefix="watch-bench-") as tmp:
            print(json.dumps(textfile_cost(Path(tmp)), indent=2))
        return
    if os.environ.get(IN_NAMESPACE) is None:
        # Into a network namespace of our own, where loopback counts only our bytes.
        try:
            usable = subprocess.run(["unshare", "-rn", "ip", "link", "set", "lo", "up"], capture_output=True,
                                    check=False, timeout=10).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            usable = False
        if usable:
            argv = ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$0" "$@"', sys.executable, __file__, *sys.argv[1:]]
            raise SystemExit(subprocess.run(argv, env={**os.environ, IN_NAMESPACE: "1"}, check=False).returncode)
        os.environ[IN_NAMESPACE] = "0"
    figures = measure(args.seconds, args.interval)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
