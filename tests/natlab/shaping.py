"""Real link limits for the NAT lab: ``tc`` tbf on the ISP link, loss by nftables ``numgen``.

The kernel here has tbf and htb but no netem, so rates are token buckets and loss is a
random drop in a table of its own in the ISP namespace; added delay is not possible (the
lab's links give what they give: a fraction of a millisecond). Download is shaped on the
ISP's interface towards the home router (``isp/in0`` egress), upload on the home router's
WAN interface (``home/wan0`` egress). :func:`unshape` restores the bare lab.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import natlab_builder as nb

DOWN = ("isp", "in0")
UP = ("home", "wan0")
LOSS_TABLE = "hcshape"


@dataclass(frozen=True)
class Link:
    """A shaped uplink: rates in Mbps, loss in per-mille of forwarded TCP packets."""

    name: str
    down_mbps: float
    up_mbps: float
    loss_permille: int = 0


LINKS = (
    Link("10 Mbps", 10, 10),
    Link("25 Mbps", 25, 25),
    Link("100 Mbps", 100, 100),
    Link("500 Mbps", 500, 500),
    Link("50/10 asymmetric", 50, 10),
    Link("25 Mbps, 1 % loss", 25, 25, loss_permille=10),
)
"""The links the tests and bench/bandwidth.py shape: issue-level rates, asymmetric and lossy."""


def _tbf(rate_mbps: float) -> list[str]:
    # The bucket holds ~4 ms at the rate (at least a few full-size frames): small enough that
    # its initial burst is a small part of a measurement, large enough for GSO segments.
    burst = max(32_000, int(rate_mbps * 1e6 / 8 * 0.004))
    return ["tbf", "rate", f"{rate_mbps:g}mbit", "burst", str(burst), "latency", "50ms"]


def shape(lab: nb.NatLab, link: Link) -> None:
    for (role, dev), rate in ((DOWN, link.down_mbps), (UP, link.up_mbps)):
        lab.exec(role, ["tc", "qdisc", "replace", "dev", dev, "root", *_tbf(rate)])
    lab.exec("isp", ["nft", "delete", "table", "inet", LOSS_TABLE], check=False)
    if link.loss_permille:
        lab.nft(
            "isp",
            f"table inet {LOSS_TABLE} {{\n"
            " chain forward { type filter hook forward priority -10; policy accept;\n"
            f"  meta l4proto tcp numgen random mod 1000 < {link.loss_permille} drop\n"
            " }\n}\n",
        )


def unshape(lab: nb.NatLab) -> None:
    for role, dev in (DOWN, UP):
        lab.exec(role, ["tc", "qdisc", "del", "dev", dev, "root"], check=False)
    lab.exec("isp", ["nft", "delete", "table", "inet", LOSS_TABLE], check=False)


@contextmanager
def shaped(lab: nb.NatLab, link: Link) -> Iterator[None]:
    shape(lab, link)
    try:
        yield
    finally:
        unshape(lab)


def payload_share(lab: nb.NatLab) -> float:
    """TCP payload per byte the shaper counts: tbf meters whole Ethernet frames, so a full
    frame of MTU bytes (plus its 14-byte header) carries MTU - IP - TCP - timestamp bytes.
    No tool can report more than this share of the shaped rate as throughput."""
    mtu = int(json.loads(lab.exec(DOWN[0], ["ip", "-j", "link", "show", DOWN[1]]).stdout)[0]["mtu"])
    stamps = lab.exec("host", ["sysctl", "-n", "net.ipv4.tcp_timestamps"]).stdout.strip() != "0"
    return (mtu - 20 - 20 - (12 if stamps else 0)) / (mtu + 14)


def run_speedtest(lab: nb.NatLab, url: str, *, seconds: float = 6, max_mb: int = 1000, streams: int = 4) -> dict:
    """``hostcheck speedtest`` in the host namespace, as a user runs it (token from a file)."""
    assert lab.tmp is not None
    token_file = lab.tmp / "speed-token"
    token_file.write_text(nb.PROBE_TOKEN)
    token_file.chmod(0o600)
    proc = lab.exec(
        "host",
        [nb.PYTHON, "-m", "hostcheck.cli", "speedtest", "--probe", url, "--token-file", str(token_file),
         "--seconds", f"{seconds:g}", "--max-mb", str(max_mb), "--streams", str(streams)],
        check=False,
        timeout=seconds * 3 + 30,
    )
    if proc.returncode not in (0, 3) or not proc.stdout.strip():
        raise RuntimeError(f"hostcheck speedtest failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)
