"""`hostcheck watch` in the NAT lab: a cut of the ISP's uplink for a measured time shows as a
network outage of that length (within one sample interval), and a change of the STUN-mapped
public address (the home router leaving from a new WAN address) is recorded as a change. Real parts: the recorder runs in the host namespace, its three TCP
targets listen on three internet addresses, the cut is an nftables drop in the ISP namespace.

Cost: ~25 s on the shared lab (which other NAT-lab tests build anyway).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import natlab_builder as nb
import pytest

from hostcheck.recording.analysis import analyse
from hostcheck.recording.store import read_recording

pytestmark = [pytest.mark.root, pytest.mark.natlab, pytest.mark.lab_cost(30)]

REPO = Path(__file__).resolve().parents[3]
PORT = 8443
INTERVAL_S = 0.5
PROBE_TIMEOUT_S = 0.4
CUT_S = 5.0
CUT_TABLE = "watchcut"
SNAT_TABLE = "watchsnat"
NEW_WAN = "198.51.100.3"  # a second address of the home router's WAN: the ISP "hands out" a new one

LISTENER = f"""
import socket, threading
def serve(ip):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((ip, {PORT})); s.listen(64)
    while True:
        c, _ = s.accept(); c.close()
for ip in ("{nb.INET_IP}", "{nb.STUN_IP1}", "{nb.STUN_IP2}"):
    threading.Thread(target=serve, args=(ip,), daemon=True).start()
threading.Event().wait()
"""


def test_link_cut_is_an_outage_of_its_length(natlab: nb.NatLab, tmp_path: Path) -> None:
    db = tmp_path / "watch.db"
    natlab.popen("watch-targets", "inet", [sys.executable, "-c", LISTENER],
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    cut_installed = snat_installed = False
    try:
        time.sleep(0.5)
        targets = [f"--target=tcp:{ip}:{PORT}" for ip in (nb.INET_IP, nb.STUN_IP1, nb.STUN_IP2)]
        natlab.popen(
            "watch", "host",
            [sys.executable, "-m", "hostcheck.cli", "watch", "--db", str(db), "--interval", str(INTERVAL_S),
             "--probe-timeout", str(PROBE_TIMEOUT_S), "--allow-more-traffic", *targets,
             f"--stun-server={nb.STUN_IP1}:{nb.STUN_PORT}",
             "--journal-file", str(tmp_path / "none.journal")],
            cwd=REPO,
        )  # fmt: skip
        time.sleep(4.0)
        natlab.nft("isp", f"table inet {CUT_TABLE} {{ chain cut {{ type filter hook forward priority -300; policy drop; }}; }}\n")
        cut_installed = True
        cut_at = time.time()
        time.sleep(CUT_S)
        natlab.exec("isp", ["nft", "delete", "table", "inet", CUT_TABLE])
        cut_installed = False
        restored_at = time.time()
        time.sleep(3.0)
        # A new public address: STUN traffic leaves the home router from NEW_WAN for a while.
        natlab.ipn("home", "addr", "add", f"{NEW_WAN}/24", "dev", "wan0")
        snat_installed = True
        natlab.nft("home", f"table ip {SNAT_TABLE} {{ chain post {{ type nat hook postrouting priority srcnat - 10; "
                           f'oifname "wan0" udp dport {nb.STUN_PORT} snat to {NEW_WAN}; }}; }}\n')
        time.sleep(4.0)
        natlab.exec("home", ["nft", "delete", "table", "ip", SNAT_TABLE])
        natlab.ipn("home", "addr", "del", f"{NEW_WAN}/24", "dev", "wan0")
        snat_installed = False
        time.sleep(4.0)
    finally:
        if cut_installed:
            natlab.exec("isp", ["nft", "delete", "table", "inet", CUT_TABLE], check=False)
        if snat_installed:
            natlab.exec("home", ["nft", "delete", "table", "ip", SNAT_TABLE], check=False)
            natlab.ipn("home", "addr", "del", f"{NEW_WAN}/24", "dev", "wan0", check=False)
        _, err = natlab.stop("watch", sig=signal.SIGTERM, timeout=10)
        natlab.stop("watch-targets")
    recording = read_recording(db)
    analysis = analyse(recording)
    outages = analysis.outages
    measured = restored_at - cut_at
    assert [o.state for o in outages] == ["network"], (outages, err)
    outage = outages[0]
    # Samples are INTERVAL_S apart: the recorded start and end each lie within one interval
    # of the real change (plus scheduling slack on a shared 2-core machine).
    slack = INTERVAL_S + 0.25
    assert abs(outage.start - cut_at) <= slack and abs(outage.end - restored_at) <= slack
    assert abs(outage.seconds - measured) <= INTERVAL_S + 0.25
    # The STUN-mapped address: what the internet sees of the host.
    public = [(e.detail["previous"], e.detail["address"]) for e in recording.events if e.kind == "public_address"]
    home = natlab.expected_mapped_ip
    assert public == [(None, home), (home, NEW_WAN), (NEW_WAN, home)], public
    stops = [e.detail["reason"] for e in recording.events if e.kind == "recorder_stop"]
    assert stops == ["SIGTERM"]
