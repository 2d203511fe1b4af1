"""hostcheck's speed test against iperf3 on the NAT lab's shaped links, in one run.

Run as root: ``.venv/bin/python bench/bandwidth.py [--seconds 10]``. Builds the lab, starts
the probe server and an ``iperf3 -s`` in its "internet" namespace, and for each shaped link
(tbf on the ISP link; the lossy one drops 1 % of TCP packets by nftables numgen; the delayed
one adds its round trip through a userspace delay line) runs ``hostcheck speedtest`` and
``iperf3`` (download with ``-R``, then upload; 4 streams each, the first second omitted as
warm-up, both directions together taking the same time as hostcheck's whole test). Prints
per link and direction each tool's figure, its error against the shaped rate and against
the most TCP payload the shaped link delivered while that tool ran (tbf counts Ethernet, IP
and TCP headers, both tools report payload; on the lossy link, upload packets are dropped
after the uplink's shaper, and nftables counters say what share got through), the wall time
and the bytes it moved.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "natlab"))

import natlab_builder as nb
import shaping
from shaping import LINKS

IPERF_PORT = 5201
BUSY_RETRIES = 10


def iperf3(lab: nb.NatLab, seconds: float, reverse: bool) -> dict:
    """One iperf3 direction: its receiver-side rate, wall time and bytes (warm-up included)."""
    per_dir = max(2, round(seconds / 2) - 1)  # plus the omitted second: half the total each
    argv = ["iperf3", "-c", nb.INET_IP, "-p", str(IPERF_PORT), "-P", "4", "-t", str(per_dir), "-O", "1", "-J"]
    if reverse:
        argv.append("-R")
    for _ in range(BUSY_RETRIES):
        started = time.monotonic()
        proc = lab.exec("host", argv, check=False, timeout=seconds * 3 + 20)
        wall = time.monotonic() - started
        data = json.loads(proc.stdout)
        if "busy" not in data.get("error", ""):
            break
        time.sleep(1)  # the server still finishing the previous test (seen on the lossy link)
    if "error" in data:
        raise RuntimeError(f"iperf3: {data['error']}")
    moved = sum(int(i["sum"]["bytes"]) for i in data["intervals"])
    return {"mbps": data["end"]["sum_received"]["bits_per_second"] / 1e6, "wall_s": wall, "bytes": moved}


@dataclass(frozen=True)
class Reading:
    """One direction of one link in one round: the shaped rate, both tools' Mbps (hostcheck's
    None when it could not measure), the most payload the link delivered while each tool ran,
    and each tool's wall time for both directions together."""

    link: str
    direction: str
    shaped: float
    hostcheck: float | None
    hostcheck_ceiling: float
    iperf3: float
    iperf3_ceiling: float
    hostcheck_s: float
    iperf3_s: float

    def errors(self, against_ceiling: bool) -> tuple[float | None, float]:
        """Each tool's relative error (%) against the shaped rate or against its ceiling."""
        mine_ref, ref_ref = (self.hostcheck_ceiling, self.iperf3_ceiling) if against_ceiling else (self.shaped,) * 2
        mine = None if self.hostcheck is None else (self.hostcheck - mine_ref) / mine_ref * 100
        return mine, (self.iperf3 - ref_ref) / ref_ref * 100

    def closer(self, against_ceiling: bool) -> bool:
        mine, ref = self.errors(against_ceiling)
        return mine is not None and abs(mine) <= abs(ref)


def pct(error: float | None) -> str:
    return "   n/a" if error is None else f"{error:+6.1f}%"


def measure_link(lab: nb.NatLab, url: str, link: shaping.Link, seconds: float, share: float) -> list[Reading]:
    """Both tools on one shaped link; prints a row per direction. The download ceiling is the
    payload share of the shaped rate (the lossy link drops before the ISP's downlink shaper);
    the upload ceiling is also scaled by the share of upload data that got past the loss while
    that tool ran."""
    with shaping.shaped(lab, link):
        started = time.monotonic()
        hc = shaping.run_speedtest(lab, url, seconds=seconds)
        hc_wall = time.monotonic() - started
        hc_delivered = shaping.upload_delivered(lab, link)
        down = iperf3(lab, seconds, reverse=True)
        shaping.upload_delivered(lab, link)  # restarts the count for iperf3's upload alone
        up = iperf3(lab, seconds, reverse=False)
        ip_delivered = shaping.upload_delivered(lab, link)
    ip_wall, ip_bytes = down["wall_s"] + up["wall_s"], down["bytes"] + up["bytes"]
    hc_bytes = hc["bytes_down"] + hc["bytes_up"]
    down_ceiling, up_ceiling = link.down_mbps * share, link.up_mbps * share
    readings = [
        Reading(link.name, "down", link.down_mbps, hc.get("download_mbps"), down_ceiling, down["mbps"], down_ceiling,
                hc_wall, ip_wall),
        Reading(link.name, "up", link.up_mbps, hc.get("upload_mbps"), up_ceiling * hc_delivered, up["mbps"],
                up_ceiling * ip_delivered, hc_wall, ip_wall),
    ]
    for r in readings:
        mine_text = f"{r.hostcheck:9.2f}" if r.hostcheck is not None else f"{'unknown':>9}"
        (mine_shaped, ref_shaped), (mine_max, ref_max) = r.errors(False), r.errors(True)
        print(f"{r.link:18} {r.direction:4} {r.shaped:6g} | {mine_text} {r.hostcheck_ceiling:7.2f} {pct(mine_shaped)} "
              f"[{pct(mine_max)}] | {r.iperf3:7.2f} {r.iperf3_ceiling:7.2f} {pct(ref_shaped)} [{pct(ref_max)}] | "
              f"{hc_wall:5.1f} ({hc['duration_s']:4.1f}) {hc_bytes / 1e6:6.1f} | {ip_wall:5.1f} {ip_bytes / 1e6:6.1f}")
    if not hc["measured"]:
        print(f"{'':18} hostcheck: {hc['reason']}")
    return readings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="hostcheck's time cap (iperf3 gets the same)")
    parser.add_argument("--rounds", type=int, default=1, help="measure every link this many times (then a summary)")
    opts = parser.parse_args()
    nb.remove_stale_labs()
    readings: list[Reading] = []
    with nb.NatLab(isp="plain", with_upnp=False) as lab:
        # Several rounds over every link move more than the default hourly speed-test budget.
        url = lab.start_probe_server(nb.PROBE_TOKEN, rate_per_min=1000, speed_budget_bytes_per_hour=10**12)
        # Its output goes nowhere: a pipe nobody reads fills after a dozen tests and stalls it.
        lab.popen("iperf3", "inet", ["iperf3", "-s", "-B", nb.INET_IP, "-p", str(IPERF_PORT)],
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        lab.wait_tcp_listen("inet", IPERF_PORT)
        share = shaping.payload_share(lab)
        print(f"error: against the shaped rate, and [in brackets] against the most TCP payload the link delivered "
              f"while that tool ran (max: {share * 100:.2f} % of the shaped rate, less what the lossy uplink "
              "dropped)\n")
        print(f"{'link':18} {'dir':4} {'shaped':>6} | {'hostcheck':>9} {'max':>7} {'err':>7} {'[max]':>8} | "
              f"{'iperf3':>7} {'max':>7} {'err':>7} {'[max]':>8} | {'hc s':>10} {'hc MB':>6} | {'ip3 s':>5} {'ip3 MB':>6}")
        for _ in range(opts.rounds):
            for link in LINKS:
                readings += measure_link(lab, url, link, opts.seconds, share)
    shaped_wins = sum(r.closer(against_ceiling=False) for r in readings)
    ceiling_wins = sum(r.closer(against_ceiling=True) for r in readings)
    print(f"\nhostcheck's error no larger than iperf3's: {shaped_wins}/{len(readings)} against the shaped rate, "
          f"{ceiling_wins}/{len(readings)} against the most payload the link carries.")
    print("hc s / ip3 s: wall time of both directions together, process start-up included (in brackets: "
          "hostcheck's own measuring time, latency included); MB: bytes moved, warm-up included.")
    if opts.rounds > 1:
        summary(readings, opts.rounds)


def summary(readings: list[Reading], rounds: int) -> None:
    """Per link and direction over all rounds: the mean absolute error against the payload
    ceiling of each tool (a round hostcheck could not measure counts as 100 %), and the mean
    wall time of each."""
    print(f"\nover {rounds} rounds: mean |error| against the payload ceiling; mean wall time of both directions")
    print(f"{'link':18} {'dir':4} | {'hostcheck':>9} {'iperf3':>7} | {'hc s':>5} {'ip3 s':>5}")
    by_direction: dict[tuple[str, str], list[Reading]] = {}
    for r in readings:
        by_direction.setdefault((r.link, r.direction), []).append(r)
    better = 0
    for (link, direction), rows in by_direction.items():
        errors = [r.errors(against_ceiling=True) for r in rows]
        mine = statistics.fmean(100.0 if e is None else abs(e) for e, _ in errors)
        ref = statistics.fmean(abs(e) for _, e in errors)
        better += mine <= ref
        hc_s, ip_s = statistics.fmean(r.hostcheck_s for r in rows), statistics.fmean(r.iperf3_s for r in rows)
        print(f"{link:18} {direction:4} | {mine:8.2f}% {ref:6.2f}% | {hc_s:5.1f} {ip_s:5.1f}")
    print(f"hostcheck's mean error no larger than iperf3's on {better}/{len(by_direction)} link directions.")


if __name__ == "__main__":
    main()
