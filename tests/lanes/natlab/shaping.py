"""Real link limits for the NAT lab: ``tc`` tbf on the ISP link, loss by nftables ``numgen``,
delay by a userspace delay line.

The kernel here has tbf and htb but no netem, so rates are token buckets, loss is a random
drop in a table of its own in the ISP namespace, and delay is :mod:`delay_line`: the ISP
routes what it forwards (IPv4) through a TUN device to a process that holds each packet half
the added round trip and hands it back through a second TUN device. Without it the lab's
links give a fraction of a millisecond. Download is shaped on the ISP's interface towards the
home router (``isp/in0`` egress), upload on the home router's WAN interface (``home/wan0``
egress). :func:`unshape` restores the bare lab.
"""

from __future__ import annotations

import json
import select
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import natlab_builder as nb

DOWN = ("isp", "in0")
UP = ("home", "wan0")
LOSS_TABLE = "hcshape"
DELAY_LINE = str(Path(__file__).resolve().parent / "delay_line.py")
DELAY_IN, DELAY_OUT = "dlin", "dlout"
DELAY_ROUTES = "1001"
"""The ISP's routing table that sends what arrives from either neighbour into the delay line."""


@dataclass(frozen=True)
class Link:
    """A shaped uplink: rates in Mbps, loss in per-mille of forwarded TCP packets, round-trip
    delay added in milliseconds."""

    name: str
    down_mbps: float
    up_mbps: float
    loss_permille: int = 0
    rtt_ms: float = 0


LINKS = (
    Link("10 Mbps", 10, 10),
    Link("25 Mbps", 25, 25),
    Link("100 Mbps", 100, 100),
    Link("500 Mbps", 500, 500),
    Link("50/10 asymmetric", 50, 10),
    Link("25 Mbps, 1 % loss", 25, 25, loss_permille=10),
    Link("25 Mbps, 40 ms", 25, 25, rtt_ms=40),
)
"""The links the tests and bench/bandwidth.py shape: issue-level rates, asymmetric, lossy and
a round trip across a country."""


def _tbf(rate_mbps: float) -> list[str]:
    # The bucket holds ~4 ms at the rate (at least a few full-size frames): small enough that
    # its initial burst is a small part of a measurement, large enough for GSO segments.
    burst = max(32_000, int(rate_mbps * 1e6 / 8 * 0.004))
    return ["tbf", "rate", f"{rate_mbps:g}mbit", "burst", str(burst), "latency", "50ms"]


def shape(lab: nb.NatLab, link: Link) -> None:
    if link.rtt_ms and link.loss_permille:
        raise ValueError("the loss table would see every delayed packet twice (into the delay line and out of it)")
    for (role, dev), rate in ((DOWN, link.down_mbps), (UP, link.up_mbps)):
        lab.exec(role, ["tc", "qdisc", "replace", "dev", dev, "root", *_tbf(rate)])
    lab.exec("isp", ["nft", "delete", "table", "inet", LOSS_TABLE], check=False)
    if link.loss_permille:
        upload_data = f"ip daddr {nb.INET_IP} meta l4proto tcp meta length > 200"  # no pure ACKs
        lab.nft(
            "isp",
            f"table inet {LOSS_TABLE} {{\n counter upload_offered {{}}\n counter upload_through {{}}\n"
            " chain forward { type filter hook forward priority -10; policy accept;\n"
            f"  {upload_data} counter name upload_offered\n"
            f"  meta l4proto tcp numgen random mod 1000 < {link.loss_permille} drop\n"
            f"  {upload_data} counter name upload_through\n"
            " }\n}\n",
        )
    if link.rtt_ms:
        _start_delay(lab, link.rtt_ms / 2)


def _start_delay(lab: nb.NatLab, one_way_ms: float) -> None:
    if lab.isp != "plain":
        # A NATing ISP's conntrack would bind the mapping on the way into the delay line,
        # where the packet does not leave by out0, and then not translate it at all.
        raise ValueError("added delay needs the plain ISP")
    for dev in (DELAY_IN, DELAY_OUT):
        lab.ipn("isp", "tuntap", "add", "dev", dev, "mode", "tun")
        lab.ipn("isp", "link", "set", dev, "up")
        # Packets come back in on dlout from addresses routed elsewhere: no reverse-path check.
        lab.exec("isp", ["sysctl", "-q", "-w", f"net.ipv4.conf.{dev}.rp_filter=0"])
    proc = lab.popen("delay-line", "isp", [nb.PYTHON, DELAY_LINE, DELAY_IN, DELAY_OUT, f"{one_way_ms:g}"])
    assert proc.stdout is not None
    if not select.select([proc.stdout], [], [], 10)[0] or proc.stdout.readline().strip() != "ready":
        _, err = lab.stop("delay-line")
        raise RuntimeError(f"the delay line did not start: {err[-2000:]}")
    lab.ipn("isp", "route", "add", "default", "dev", DELAY_IN, "table", DELAY_ROUTES)
    for dev in ("in0", "out0"):
        lab.ipn("isp", "rule", "add", "iif", dev, "lookup", DELAY_ROUTES)


def unshape(lab: nb.NatLab) -> None:
    for role, dev in (DOWN, UP):
        lab.exec(role, ["tc", "qdisc", "del", "dev", dev, "root"], check=False)
    lab.exec("isp", ["nft", "delete", "table", "inet", LOSS_TABLE], check=False)
    # Routes first, so that nothing is sent into a delay line that is gone.
    for dev in ("in0", "out0"):
        lab.ipn("isp", "rule", "del", "iif", dev, "lookup", DELAY_ROUTES, check=False)
    lab.ipn("isp", "route", "flush", "table", DELAY_ROUTES, check=False)
    lab.stop("delay-line")
    for dev in (DELAY_IN, DELAY_OUT):
        lab.ipn("isp", "link", "del", dev, check=False)


@contextmanager
def shaped(lab: nb.NatLab, link: Link) -> Iterator[None]:
    try:
        shape(lab, link)
        yield
    finally:
        unshape(lab)


def upload_delivered(lab: nb.NatLab, link: Link) -> float:
    """The share of upload data that got past the loss since the link was shaped or this was
    last asked (it restarts the count). The drop comes after the home router's shaper, so what
    it takes has used the shaped uplink; it hits GSO aggregates of several segments, so a few
    seconds of a 1 % loss deliver a share that varies by tenths of a percent."""
    if not link.loss_permille:
        return 1.0
    out = lab.exec("isp", ["nft", "-j", "reset", "counters", "table", "inet", LOSS_TABLE]).stdout
    counted = {c["counter"]["name"]: c["counter"]["bytes"] for c in json.loads(out)["nftables"] if "counter" in c}
    return counted["upload_through"] / counted["upload_offered"] if counted["upload_offered"] else 1.0


def payload_share(lab: nb.NatLab) -> float:
    """TCP payload per byte the shaper counts: tbf meters whole Ethernet frames, so a full
    frame of MTU bytes (plus its 14-byte header) carries MTU - IP - TCP - timestamp bytes.
    No tool can report more than this share of the shaped rate as throughput."""
    mtu = int(json.loads(lab.exec(DOWN[0], ["ip", "-j", "link", "show", DOWN[1]]).stdout)[0]["mtu"])
    stamps = lab.exec("host", ["sysctl", "-n", "net.ipv4.tcp_timestamps"]).stdout.strip() != "0"
    return (mtu - 20 - 20 - (12 if stamps else 0)) / (mtu + 14)


def run_speedtest(lab: nb.NatLab, url: str, *, seconds: float = 6, max_mb: int = 1000, streams: int = 4) -> dict:
    """``hostcheck speedtest`` in the host namespace, as a user runs it (token from a file; the
    lab's probe server speaks plain HTTP, hence ``--insecure-http``)."""
    assert lab.tmp is not None
    token_file = lab.tmp / "speed-token"
    token_file.write_text(nb.PROBE_TOKEN)
    token_file.chmod(0o600)
    proc = lab.exec(
        "host",
        [nb.PYTHON, "-m", "hostcheck.cli", "speedtest", "--probe", url, "--token-file", str(token_file),
         "--seconds", f"{seconds:g}", "--max-mb", str(max_mb), "--streams", str(streams), "--insecure-http"],
        check=False,
        timeout=seconds * 3 + 30,
    )
    if proc.returncode not in (0, 3) or not proc.stdout.strip():
        raise RuntimeError(f"hostcheck speedtest failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)
