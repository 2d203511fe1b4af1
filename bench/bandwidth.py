"""hostcheck's speed test against iperf3 on the NAT lab's shaped links, in one run.

Run as root: ``.venv/bin/python bench/bandwidth.py [--seconds 10]``. Builds the lab, starts
the probe server and an ``iperf3 -s`` in its "internet" namespace, and for each shaped link
(tbf on the ISP link; the lossy one drops 1 % of TCP packets by nftables numgen) runs
``hostcheck speedtest`` and ``iperf3`` (download with ``-R``, then upload; 4 streams each,
the first second omitted as warm-up, both directions together taking the same time as
hostcheck's whole test). Prints per link and direction each tool's figure, its error
against the shaped rate and against the most TCP payload the shaped link can carry (tbf
counts Ethernet, IP and TCP headers; both tools report payload), the wall time and the
bytes it moved.
"""

from __future__ import annotations

import argparse
import json
import subprocess
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


def err(measured: float | None, reference: float) -> str:
    return "   n/a" if measured is None else f"{(measured - reference) / reference * 100:+6.1f}%"


def payload_share(lab: nb.NatLab) -> float:
    """TCP payload per byte the shaper counts: tbf meters whole Ethernet frames, so a full
    frame of MTU bytes (plus its 14-byte header) carries MTU - IP - TCP - timestamp bytes.
    No tool can report more than this share of the shaped rate as throughput."""
    mtu = int(json.loads(lab.exec("isp", ["ip", "-j", "link", "show", shaping.DOWN[1]]).stdout)[0]["mtu"])
    stamps = lab.exec("host", ["sysctl", "-n", "net.ipv4.tcp_timestamps"]).stdout.strip() != "0"
    return (mtu - 20 - 20 - (12 if stamps else 0)) / (mtu + 14)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="hostcheck's time cap (iperf3 gets the same)")
    parser.add_argument("--rounds", type=int, default=1, help="measure every link this many times (then a summary)")
    opts = parser.parse_args()
    nb.remove_stale_labs()
    # (link, dir) -> per round: hostcheck's and iperf3's error against the payload ceiling, in %
    errors: dict[tuple[str, str], list[tuple[float | None, float]]] = {}
    walls: dict[str, list[tuple[float, float]]] = {}
    with nb.NatLab(isp="plain", with_upnp=False) as lab:
        url = lab.start_probe_server(nb.PROBE_TOKEN, rate_per_min=1000)
        # Its output goes nowhere: a pipe nobody reads fills after a dozen tests and stalls it.
        lab.popen("iperf3", "inet", ["iperf3", "-s", "-B", nb.INET_IP, "-p", str(IPERF_PORT)],
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        lab.wait_tcp_listen("inet", IPERF_PORT)
        share = payload_share(lab)
        print(f"error: against the shaped rate, and [in brackets] against the most TCP payload it can carry "
              f"({share * 100:.2f} % of it)\n")
        print(f"{'link':18} {'dir':4} {'shaped':>6} {'max':>6} | {'hostcheck':>9} {'err':>7} {'[max]':>8} | "
              f"{'iperf3':>7} {'err':>7} {'[max]':>8} | {'hc s':>10} {'hc MB':>6} | {'ip3 s':>5} {'ip3 MB':>6}")
        wins = {"shaped": 0, "max": 0}
        rows = 0
        for _ in range(opts.rounds):
            for link in LINKS:
                with shaping.shaped(lab, link):
                    started = time.monotonic()
                    hc = shaping.run_speedtest(lab, url, seconds=opts.seconds)
                    hc_wall = time.monotonic() - started
                    down = iperf3(lab, opts.seconds, reverse=True)
                    up = iperf3(lab, opts.seconds, reverse=False)
                ip_wall, ip_bytes = down["wall_s"] + up["wall_s"], down["bytes"] + up["bytes"]
                walls.setdefault(link.name, []).append((hc_wall, ip_wall))
                hc_bytes = hc["bytes_down"] + hc["bytes_up"]
                for name, shaped_rate, mine, ref in (
                    ("down", link.down_mbps, hc.get("download_mbps"), down["mbps"]),
                    ("up", link.up_mbps, hc.get("upload_mbps"), up["mbps"]),
                ):
                    most = shaped_rate * share
                    rows += 1
                    errors.setdefault((link.name, name), []).append(
                        (None if mine is None else (mine - most) / most * 100, (ref - most) / most * 100))
                    if mine is not None:
                        wins["shaped"] += abs(mine - shaped_rate) <= abs(ref - shaped_rate)
                        wins["max"] += abs(mine - most) <= abs(ref - most)
                    mine_text = f"{mine:9.2f}" if mine is not None else f"{'unknown':>9}"
                    print(f"{link.name:18} {name:4} {shaped_rate:6g} {most:6.2f} | {mine_text} {err(mine, shaped_rate)} "
                          f"[{err(mine, most)}] | {ref:7.2f} {err(ref, shaped_rate)} [{err(ref, most)}] | "
                          f"{hc_wall:5.1f} ({hc['duration_s']:4.1f}) {hc_bytes / 1e6:6.1f} | {ip_wall:5.1f} {ip_bytes / 1e6:6.1f}")
                if not hc["measured"]:
                    print(f"{'':18} hostcheck: {hc['reason']}")
        print(f"\nhostcheck's error no larger than iperf3's: {wins['shaped']}/{rows} against the shaped rate, "
              f"{wins['max']}/{rows} against the most payload the link carries.")
        print("hc s / ip3 s: wall time of both directions together, process start-up included (in brackets: "
              "hostcheck's own measuring time, latency included); MB: bytes moved, warm-up included.")
        if opts.rounds > 1:
            summary(errors, walls, opts.rounds)


def summary(errors: dict[tuple[str, str], list[tuple[float | None, float]]],
            walls: dict[str, list[tuple[float, float]]], rounds: int) -> None:
    """Per link and direction over all rounds: the mean absolute error against the payload
    ceiling of each tool (a round hostcheck could not measure counts as 100 %), and the mean
    wall time of each."""
    print(f"\nover {rounds} rounds: mean |error| against the payload ceiling; mean wall time of both directions")
    print(f"{'link':18} {'dir':4} | {'hostcheck':>9} {'iperf3':>7} | {'hc s':>5} {'ip3 s':>5}")
    better = 0
    for (link, direction), pairs in errors.items():
        mine = sum(100.0 if m is None else abs(m) for m, _ in pairs) / len(pairs)
        ref = sum(abs(r) for _, r in pairs) / len(pairs)
        better += mine <= ref
        hc_s = sum(h for h, _ in walls[link]) / len(walls[link])
        ip_s = sum(i for _, i in walls[link]) / len(walls[link])
        print(f"{link:18} {direction:4} | {mine:8.2f}% {ref:6.2f}% | {hc_s:5.1f} {ip_s:5.1f}")
    print(f"hostcheck's mean error no larger than iperf3's on {better}/{len(errors)} link directions.")


if __name__ == "__main__":
    main()
