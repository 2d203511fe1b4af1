"""Time the network phase (the reachability collector) in the NAT lab.

Run as root: ``.venv/bin/python bench/network.py [--runs N]``. Builds the lab (plain WAN,
CGNAT, double NAT), runs the collector in the lab host's namespace for each scenario and
prints wall time (process start to result, including Python start-up) and the collector's
own time, min / median / max over the runs. Targets: about 1.5 s for the phase with or
without a UPnP router on the LAN, a dead first STUN server costing next to nothing, and
never more than the budget (NETWORK_BUDGET_S) when every server is silent.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "natlab"))

import natlab_builder as nb

from hostcheck.collectors.reachability import NETWORK_BUDGET_S

NSRUN_TIMER = r"""
import json, sys, time
t0 = time.monotonic()
sys.path.insert(0, sys.argv[1])
from hostcheck.collectors import CollectContext
from hostcheck.collectors import reachability
args = json.loads(sys.argv[2])
ctx = CollectContext(stun_servers=args["stun_servers"], public_ranges=args["public_ranges"],
                     probe_url=args.get("probe_url"), probe_token=args.get("probe_token"),
                     probe_ports=args.get("probe_ports", []))
ctx.deadline = time.monotonic() + 10
t1 = time.monotonic()
facts = reachability.collect(ctx)
t2 = time.monotonic()
nat = facts["nat"]
sig = {x["name"]: x["result"] for x in facts["cgnat"]["signals"]}
print(json.dumps({"collect_s": t2 - t1, "mapping": nat["mapping"], "filtering": nat["filtering"],
                  "verdict": facts["cgnat"]["verdict"], "double_nat": facts["cgnat"]["double_nat"],
                  "upnp": sig.get("router_upnp"),
                  "inbound": [p["result"] for p in facts["inbound"]["ports"]]}))
"""


def run_once(lab: nb.NatLab, args: dict) -> dict:
    started = time.monotonic()
    proc = lab.exec(
        "host", [nb.PYTHON, "-c", NSRUN_TIMER, str(ROOT), json.dumps(args)], check=True, timeout=30
    )
    out = json.loads(proc.stdout)
    out["wall_s"] = time.monotonic() - started
    return out


def summarise(name: str, rows: list[dict]) -> str:
    c = [r["collect_s"] for r in rows]
    w = [r["wall_s"] for r in rows]
    last = rows[-1]
    inbound = ",".join(last["inbound"]) or "-"
    outcome = (
        f"{last['mapping']}/{last['filtering']}, cgnat={last['verdict']}, double={last['double_nat']}, "
        f"upnp={last['upnp']}, inbound={inbound}"
    )
    return (
        f"{name:<34} collect {min(c):5.2f} / {statistics.median(c):5.2f} / {max(c):5.2f} s"
        f"   wall {statistics.median(w):5.2f} s   {outcome}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    opts = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench/network.py builds network namespaces: run it as root")
    nb.remove_stale_labs()
    url = f"http://{nb.INET_IP}:{nb.PROBE_SERVER_PORT}"
    probe = {"probe_url": url, "probe_token": nb.PROBE_TOKEN, "probe_ports": [nb.FORWARDED_PORT]}
    scenarios = [
        ("plain", "masquerade", {}, "plain WAN, masquerade"),
        ("plain", "port-forward", probe, "plain WAN, port forward + probe"),
        ("plain", "restricted-cone", {}, "plain WAN, restricted cone"),
        ("cgnat", "masquerade", {}, "CGNAT, masquerade"),
        ("cgnat", "port-forward", probe, "CGNAT, port forward + probe"),
        ("cgnat", "fully-random", {}, "CGNAT, symmetric"),
    ]
    print(f"network phase, {opts.runs} runs each: min / median / max (budget {NETWORK_BUDGET_S:g} s)")
    scenarios.append(("double", "masquerade", {}, "double NAT, masquerade"))
    for isp in ("plain", "cgnat", "double"):
        build_started = time.monotonic()
        with nb.NatLab(isp=isp) as lab:
            build_s = time.monotonic() - build_started
            lab.start_probe_server(nb.PROBE_TOKEN, rate_per_min=1000)
            print(f"-- lab {isp}: built in {build_s:.2f} s")
            for s_isp, variant, extra, label in scenarios:
                if s_isp != isp:
                    continue
                lab.set_home(variant, firewall=False)
                rows = [run_once(lab, nb.collect_args(**extra)) for _ in range(opts.runs)]
                print(summarise(label, rows))
            if isp == "plain":
                lab.set_home("masquerade", firewall=False)
                lab.stop("miniupnpd")
                rows = [run_once(lab, nb.collect_args()) for _ in range(opts.runs)]
                print(summarise("plain WAN, no UPnP router", rows))
                lab.start_miniupnpd()
                dead_first = nb.collect_args(stun_servers=[f"{nb.AUX_IP2}:{nb.STUN_PORT}", *nb.LAB_STUN_SERVERS])
                rows = [run_once(lab, dead_first) for _ in range(opts.runs)]
                print(summarise("dead (refusing) first STUN server", rows))
                lab.start_responder("silent", "silent", nb.STUN_PORT)
                silent_args = nb.collect_args(
                    stun_servers=[f"{nb.AUX_IP}:{nb.STUN_PORT}", f"{nb.AUX_IP}:{nb.STUN_ALT_PORT}"]
                )
                rows = [run_once(lab, silent_args) for _ in range(opts.runs)]
                lab.stop_responder("silent")
                print(summarise("silent STUN servers", rows))
                lab.set_home("masquerade", firewall=True, block_udp=True)
                rows = [run_once(lab, nb.collect_args()) for _ in range(opts.runs)]
                print(summarise("UDP blocked at the home router", rows))
            close_started = time.monotonic()
        print(f"-- lab {isp}: torn down in {time.monotonic() - close_started:.2f} s")


if __name__ == "__main__":
    main()
