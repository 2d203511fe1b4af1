"""hostcheck's speed test against iperf3 on the NAT lab's shaped links, in one run.

Run as root: ``.venv/bin/python bench/bandwidth.py [--seconds 10]``. Builds the lab, starts
the probe server and an ``iperf3 -s`` in its "internet" namespace, and for each shaped link
(tbf on the ISP link; the lossy one drops 1 % of TCP packets by nftables numgen) runs
``hostcheck speedtest`` and ``iperf3`` (download with ``-R``, then upload; 4 streams each,
the first second omitted as warm-up, both directions together taking the same time as
hostcheck's whole test). Prints per link and direction each tool's figure, its error
against the shaped rate, the wall time and the bytes it moved.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "natlab"))

import natlab_builder as nb
import shaping
from shaping import LINKS

IPERF_PORT = 5201


def iperf3(lab: nb.NatLab, seconds: float, reverse: bool) -> dict:
    """One iperf3 direction: its receiver-side rate, wall time and bytes (warm-up included)."""
    per_dir = max(2, round(seconds / 2) - 1)  # plus the omitted second: half the total each
    argv = ["iperf3", "-c", nb.INET_IP, "-p", str(IPERF_PORT), "-P", "4", "-t", str(per_dir), "-O", "1", "-J"]
    if reverse:
        argv.append("-R")
    started = time.monotonic()
    proc = lab.exec("host", argv, check=False, timeout=seconds * 3 + 20)
    wall = time.monotonic() - started
    data = json.loads(proc.stdout)
    if "error" in data:
        raise RuntimeError(f"iperf3: {data['error']}")
    moved = sum(int(i["sum"]["bytes"]) for i in data["intervals"])
    return {"mbps": data["end"]["sum_received"]["bits_per_second"] / 1e6, "wall_s": wall, "bytes": moved}


def err(measured: float | None, shaped: float) -> str:
    return "   n/a" if measured is None else f"{(measured - shaped) / shaped * 100:+6.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="hostcheck's time cap (iperf3 gets the same)")
    opts = parser.parse_args()
    nb.remove_stale_labs()
    with nb.NatLab(isp="plain", with_upnp=False) as lab:
        url = lab.start_probe_server(nb.PROBE_TOKEN, rate_per_min=1000)
        lab.popen("iperf3", "inet", ["iperf3", "-s", "-B", nb.INET_IP, "-p", str(IPERF_PORT)])
        lab.wait_tcp_listen("inet", IPERF_PORT)
        print(f"{'link':20} {'dir':4} {'shaped':>7} | {'hostcheck':>9} {'err':>7} | {'iperf3':>8} {'err':>7} "
              f"| {'hc s':>5} {'hc MB':>6} | {'ip3 s':>5} {'ip3 MB':>6}")
        for link in LINKS:
            with shaping.shaped(lab, link):
                started = time.monotonic()
                hc = shaping.run_speedtest(lab, url, seconds=opts.seconds)
                hc_wall = time.monotonic() - started
                down = iperf3(lab, opts.seconds, reverse=True)
                up = iperf3(lab, opts.seconds, reverse=False)
            ip_wall, ip_bytes = down["wall_s"] + up["wall_s"], down["bytes"] + up["bytes"]
            hc_bytes = hc["bytes_down"] + hc["bytes_up"]
            for name, shaped_rate, mine, ref in (
                ("down", link.down_mbps, hc.get("download_mbps"), down["mbps"]),
                ("up", link.up_mbps, hc.get("upload_mbps"), up["mbps"]),
            ):
                mine_text = f"{mine:9.1f}" if mine is not None else f"{'unknown':>9}"
                print(f"{link.name:20} {name:4} {shaped_rate:7g} | {mine_text} {err(mine, shaped_rate)} | "
                      f"{ref:8.1f} {err(ref, shaped_rate)} | {hc_wall:5.1f} {hc_bytes / 1e6:6.1f} | "
                      f"{ip_wall:5.1f} {ip_bytes / 1e6:6.1f}")
            if not hc["measured"]:
                print(f"{'':20} hostcheck: {hc['reason']}")
        print("\nhc s / ip3 s: wall time of both directions together, process start-up included; "
              "MB: bytes moved, warm-up included.")


if __name__ == "__main__":
    main()
