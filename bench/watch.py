"""The recorder's own cost: CPU, memory and database growth, from a compressed-time run.

Runs `hostcheck watch` as a child process for --seconds with samples --interval apart (far
denser than the default 60 s), three TCP targets and a DNS target on loopback, the journal
read through journalctl each sample (a journal file with no entries) and NVML absent. Then:
CPU seconds per sample (user + system of the child and the journalctl it starts), peak RSS,
database bytes per sample, and each scaled to a day at the default interval (1440 samples).

    .venv/bin/python bench/watch.py                       # 30 s at 20 ms
    .venv/bin/python bench/watch.py --seconds 60 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLES_PER_DAY = 1440  # the default interval, 60 s


def listeners() -> tuple[list[str], threading.Event]:
    stop = threading.Event()
    specs = []
    for _ in range(3):
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(64)
        srv.settimeout(0.2)
        specs.append(f"tcp:127.0.0.1:{srv.getsockname()[1]}")

        def accept(s: socket.socket = srv) -> None:
            while not stop.is_set():
                try:
                    s.accept()[0].close()
                except OSError:
                    continue
            s.close()

        threading.Thread(target=accept, daemon=True).start()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.2)
    specs.append(f"dns:127.0.0.1:{udp.getsockname()[1]}")

    def answer() -> None:
        while not stop.is_set():
            try:
                data, peer = udp.recvfrom(512)
            except OSError:
                continue
            udp.sendto(data[:2] + b"\x81\x80" + data[4:], peer)
        udp.close()

    threading.Thread(target=answer, daemon=True).start()
    return specs, stop


def run(seconds: float, interval: float) -> dict[str, float]:
    targets, stop = listeners()
    with tempfile.TemporaryDirectory(prefix="watch-bench-") as tmp:
        db = Path(tmp) / "watch.db"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        argv = [sys.executable, "-m", "hostcheck.cli", "watch", "--db", str(db), "--interval", str(interval),
                "--for", f"{seconds:g}", "--journal-file", str(Path(tmp) / "empty.journal"),
                *[f"--target={t}" for t in targets]]  # fmt: skip
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        subprocess.run(argv, cwd=REPO, check=True, env=env, capture_output=True, timeout=seconds + 60)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        stop.set()
        conn = sqlite3.connect(db)
        samples = conn.execute("SELECT count(*) FROM samples").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        size = db.stat().st_size
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    per_sample_cpu = cpu / samples
    return {
        "seconds": seconds,
        "interval_s": interval,
        "samples": samples,
        "cpu_s_total": round(cpu, 2),
        "cpu_ms_per_sample": round(per_sample_cpu * 1000, 2),
        "cpu_s_per_day_at_60s": round(per_sample_cpu * SAMPLES_PER_DAY, 1),
        "cpu_pct_at_60s": round(per_sample_cpu / 60 * 100, 3),
        "peak_rss_mib": round(after.ru_maxrss / 1024, 1),
        "db_bytes_per_sample": round(size / samples, 1),
        "db_mib_per_day_at_60s": round(size / samples * SAMPLES_PER_DAY / 2**20, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=0.02)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    figures = run(args.seconds, args.interval)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
