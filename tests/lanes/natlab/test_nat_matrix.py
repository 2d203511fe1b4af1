"""The NAT matrix: every home-router variant x firewall on/off x plain WAN / CGNAT.

Each case runs the real reachability collector inside the lab's host namespace against
coturn (RFC 5780) in the "internet" namespace, with miniupnpd on the home router and the
probe server in the internet namespace, and pins the exact outcome: mapping and filtering
behaviour, mapped address, CGNAT verdict, and inbound reachability of the forwarded port.
"""

from __future__ import annotations

import json
import os

import natlab_builder as nb
import pytest

EI, AD, APD = "endpoint-independent", "address-dependent", "address-and-port-dependent"

# (isp, home variant) -> (mapping, filtering). Linux masquerade keeps the source port and
# filters on the full 5-tuple; fully-random picks a new port per destination; the
# restricted-cone emulation lets any port of a contacted address in — but behind CGNAT the
# carrier's own masquerade filters on address and port again.
EXPECTED_BEHAVIOUR = {
    ("plain", "masquerade"): (EI, APD),
    ("plain", "fully-random"): (APD, APD),
    ("plain", "port-forward"): (EI, APD),
    ("plain", "restricted-cone"): (EI, AD),
    ("cgnat", "masquerade"): (EI, APD),
    ("cgnat", "fully-random"): (APD, APD),
    ("cgnat", "port-forward"): (EI, APD),
    ("cgnat", "restricted-cone"): (EI, APD),
}
# miniupnpd (default settings) reports no WAN address for reserved ranges in either
# topology, so the verdict rests on STUN and the hop probe: hop 2 public proves nothing
# ("unknown": carrier NATs answer from public addresses too); hop 2 in 100.64.0.0/10 ->
# "likely" (a heuristic, never "yes" on its own).
EXPECTED_VERDICT = {"plain": "unknown", "cgnat": "likely"}
EXPECTED_HOP = {"plain": "public-upstream", "cgnat": "shared-address-hop"}
MAX_PACKETS = 3 * 6 + 2  # mapping I to two servers + four tests, x (1 + 2 retransmissions); hairpinning 2
LAB_NETWORK_PHASE_LIMIT_S = 4.0


def _record(row: dict[str, object]) -> None:
    # Optional: NATLAB_RESULTS=path collects one JSON line per case (for reports).
    path = os.environ.get("NATLAB_RESULTS")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")


@pytest.mark.root
@pytest.mark.natlab
@pytest.mark.parametrize("natlab", ["plain", "cgnat"], indirect=True)
@pytest.mark.parametrize("firewall", [False, True], ids=["fw-off", "fw-on"])
@pytest.mark.parametrize("variant", nb.HOME_VARIANTS)
def test_nat_matrix(natlab: nb.NatLab, variant: str, firewall: bool) -> None:
    """Mapping/filtering, mapped address, CGNAT verdict and inbound result for one case."""
    natlab.set_home(variant, firewall)
    natlab.set_isp(firewall)
    url = f"http://{nb.INET_IP}:{nb.PROBE_SERVER_PORT}"
    out = natlab.run_host(
        "collect",
        nb.collect_args(probe_url=url, probe_token=nb.PROBE_TOKEN, probe_ports=[nb.FORWARDED_PORT]),
    )
    facts, elapsed = out["result"], out["elapsed_s"]
    nat, cgnat, inbound = facts["nat"], facts["cgnat"], facts["inbound"]
    signals = {s["name"]: s for s in cgnat["signals"]}
    forwarded_reachable = natlab.isp == "plain" and variant == "port-forward"
    _record(
        {
            "isp": natlab.isp,
            "variant": variant,
            "firewall": firewall,
            "mapping": nat["mapping"],
            "filtering": nat["filtering"],
            "mapped": nat["mapped_address"],
            "verdict": cgnat["verdict"],
            "inbound": {f"{p['proto']}/{p['port']}": p["result"] for p in inbound["ports"]},
            "packets": nat["packets_sent"],
            "elapsed_s": elapsed,
            "discovery_s": nat["duration_s"],
        }
    )

    assert (nat["mapping"], nat["filtering"]) == EXPECTED_BEHAVIOUR[(natlab.isp, variant)], nat["tests"]
    assert nat["reason"] is None
    assert nat["mapped_address"] == natlab.expected_mapped_ip
    assert nat["local_address"].startswith(f"{nb.HOST_IP}:")
    assert nat["other_address"] == f"{nb.STUN_IP2}:{nb.STUN_ALT_PORT}"
    assert nat["hairpinning"] is False  # no router variant here loops traffic back
    assert nat["mapped_address_v6"] == nb.HOST_IP6  # IPv6 is routed, not translated
    assert 6 <= nat["packets_sent"] <= MAX_PACKETS

    assert cgnat["verdict"] == EXPECTED_VERDICT[natlab.isp], cgnat["signals"]
    assert cgnat["double_nat"] == "unknown", cgnat["signals"]
    assert nat["mapping_method"] == "rfc5780"
    assert [a["mapped"].rsplit(":", 1)[0] for a in facts["path"]["stun"]] == [natlab.expected_mapped_ip] * 2
    assert signals["stun_mapped_address"]["result"] == "nat"
    assert signals["hop_probe"]["result"] == EXPECTED_HOP[natlab.isp], signals["hop_probe"]
    assert signals["servers_agree"]["result"] == "same-address"
    assert signals["ipv6"]["result"] == "global-ipv6"
    assert signals["router_upnp"]["result"] in ("no-address", "unknown")
    assert signals["router_natpmp"]["result"] == "no-address"

    assert inbound["probed"] is True
    assert inbound["peer"] == natlab.expected_mapped_ip
    results = {(p["proto"], p["port"]): p["result"] for p in inbound["ports"]}
    expected = "reachable" if forwarded_reachable else "unreachable"
    assert results == {("tcp", nb.FORWARDED_PORT): expected, ("udp", nb.FORWARDED_PORT): expected}, inbound

    assert elapsed < LAB_NETWORK_PHASE_LIMIT_S
