"""Drift in `hostcheck watch`: the recorder notes the default route's LAN address, gateway, DHCP,
link speed and duplex, the NVIDIA driver's parts, a pending reboot and agent restarts when
they change, and `watch report` says briefly what drifted, with the check that gives the fix.

The real recorder writes a real SQLite file. Its drift sources are the audit's own readers
over files in a directory of the test's own, in the shapes the systems write: systemd-networkd's
lease file, sysfs' speed and duplex, /proc/net/route, /proc/driver/nvidia/version (a real
host's, from tests/unit/checks/test_driver_versions.py), a libnvidia-ml.so.1 symlink, the reboot-required
flag, and `systemctl show` output for the agent's unit.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pytest

from hostcheck.collectors.address_source import address_source
from hostcheck.collectors.agents import parse_unit_show, unit_state
from hostcheck.collectors.network_local import link_mode
from hostcheck.collectors.packages import library_version, module_version, reboot_required
from hostcheck.facts import Unknown
from hostcheck.knowledge.routes import parse_proc_net_route
from hostcheck.recording.analysis import analyse
from hostcheck.recording.drift import drift
from hostcheck.recording.store import Event, read_recording
from hostcheck.render.watch import to_json
from hostcheck.watch.drift import DRIFT_EVERY_S, DriftSources
from tests.unit.checks.test_driver_versions import REAL
from tests.unit.watch.test_watch_time import StepClocks, recorder
from tests.watch_fixtures import render_watch

IFINDEX = "2"
# /proc/net/route: a default route via 192.168.1.1 on enp3s0 (the kernel prints addresses
# little-endian), then the LAN's own route.
PROC_ROUTE = ("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
              "{iface}\t00000000\t{gw}\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
              "{iface}\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n")
NETWORKD_LEASE = ("# This is private data. Do not parse.\nADDRESS={address}\nNETMASK=255.255.255.0\n"
                  "ROUTER=192.168.1.1\nSERVER_ADDRESS=192.168.1.1\nT1=1800\nT2=3150\nLIFETIME=3600\n"
                  "DNS=192.168.1.1\nCLIENTID=ffb6220feb00020000ab11e5a9b3d3b1b07d54\n")
SYSTEMCTL_SHOW = ("Id=vastai.service\nLoadState=loaded\nUnitFileState=enabled\nActiveState={active}\n"
                  "SubState={sub}\nResult={result}\nNRestarts={restarts}\n")


def _hex_le(address: str) -> str:
    return "".join(f"{int(part):02X}" for part in reversed(address.split(".")))


class Host:
    """A directory holding the files the drift sources read, which the test changes."""

    def __init__(self, root: Path, iface: str = "enp3s0") -> None:
        self.root, self.iface = root, iface
        self.libdir = root / "lib"
        for folder in ("proc/driver/nvidia", "run/systemd/netif/leases", "lib"):
            (root / folder).mkdir(parents=True, exist_ok=True)
        self.address = "192.168.1.23"
        self.set_route("192.168.1.1")
        self.set_lease(self.address)
        self.set_link(1000, "full")
        (root / "proc/driver/nvidia/version").write_text(REAL["ubuntu-550"][0])
        self.set_library("550.90.07")
        self.systemctl = SYSTEMCTL_SHOW.format(active="active", sub="running", result="success", restarts=0)

    def set_route(self, gateway: str) -> None:
        (self.root / "route").write_text(PROC_ROUTE.format(iface=self.iface, gw=_hex_le(gateway)))

    def set_lease(self, address: str) -> None:
        self.address = address
        (self.root / "run/systemd/netif/leases" / IFINDEX).write_text(NETWORKD_LEASE.format(address=address))

    def set_link(self, speed: int, duplex: str) -> None:
        sysfs = self.root / "sys/class/net" / self.iface
        sysfs.mkdir(parents=True, exist_ok=True)
        (sysfs / "ifindex").write_text(IFINDEX + "\n")
        (sysfs / "speed").write_text(f"{speed}\n")
        (sysfs / "duplex").write_text(f"{duplex}\n")

    def set_library(self, version: str) -> None:
        (self.libdir / f"libnvidia-ml.so.{version}").write_bytes(b"\x7fELF")
        link = self.libdir / "libnvidia-ml.so.1"
        if link.is_symlink():
            link.unlink()
        os.symlink(f"libnvidia-ml.so.{version}", link)

    def route(self) -> dict[str, Any]:
        best = parse_proc_net_route((self.root / "route").read_text())[0]
        name = best["interface"]
        return {**best, **link_mode(name, str(self.root / "sys/class/net")), "address": self.address,
                **address_source(name, self.address, str(self.root))}

    def sources(self) -> DriftSources:
        flag = str(self.root / "reboot-required")
        return DriftSources(
            route=self.route,
            nvidia=lambda: {"kernel_module": module_version(str(self.root / "proc/driver/nvidia/version")),
                            "library": library_version((str(self.libdir),))},
            reboot=lambda: reboot_required(flag),
            agent_units=lambda: {u: unit_state(u, p) for u, p in parse_unit_show(self.systemctl).items()},
        )


def _at(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


@pytest.fixture
def listener() -> Any:
    from tests.watch_fixtures import TcpListener

    peer = TcpListener()
    yield peer
    peer.close()


def test_the_recorder_notes_each_drift_once_and_the_report_says_what_drifted(tmp_path: Path, listener: Any) -> None:
    host = Host(tmp_path / "host")
    clocks = StepClocks()
    rec = recorder(tmp_path, clocks, listener.port, drift=host.sources())
    rec.begin()

    def minute() -> float:
        rec.step()
        now = clocks.w
        clocks.advance(DRIFT_EVERY_S)
        return now

    minute()
    minute()  # nothing changed: nothing recorded
    host.set_lease("192.168.1.57")  # DHCP moves the address ...
    minute()
    host.set_lease("192.168.1.23")  # ... and back
    host.set_route("192.168.1.254")
    moved_back = minute()
    host.set_link(100, "half")
    host.set_library("550.107.02")  # unattended upgrade, no reboot
    (host.root / "reboot-required").write_text("*** System restart required ***\n")
    (host.root / "reboot-required.pkgs").write_text("libnvidia-compute-550\n")
    upgraded = minute()
    for restarts in (2, 5):  # the unit fails and systemd restarts it
        host.systemctl = SYSTEMCTL_SHOW.format(active="activating", sub="auto-restart", result="exit-code",
                                               restarts=restarts)
        last_restart = minute()
    rec.finish()

    recording = read_recording(tmp_path / "w.db")
    drift = [e for e in recording.events if e.kind == "drift"]
    # The rule: the first reading of each of the 7 values (LAN address, gateway, DHCP, link, NVIDIA,
    # reboot, the unit's restarts), then one event per change, never one per sample.
    changes = 2 + 1 + 1 + 1 + 1 + 2
    assert len(drift) == 7 + changes
    assert {e.detail["what"] for e in drift} == {"lan_address", "gateway", "addressing", "link", "nvidia", "reboot",
                                                 "restarts"}

    lines = {d["what"]: (d["check"], d["text"]) for d in to_json(analyse(recording), [], "w.db")["drift"]}
    assert lines["lan_address"] == ("NET-1130", "LAN address of enp3s0 changed twice (DHCP): 192.168.1.23 -> "
                                    f"192.168.1.57 -> 192.168.1.23, last at {_at(moved_back)}")
    assert lines["gateway"] == ("NET-1130", "default gateway of enp3s0 changed once: 192.168.1.1 -> 192.168.1.254, "
                                f"last at {_at(moved_back)}")
    assert lines["link"] == ("NET-1160", f"link enp3s0 renegotiated to 100 Mb/s half duplex at {_at(upgraded)}")
    assert lines["nvidia"] == ("PKG-1040", "NVIDIA library upgraded 550.90.07 -> 550.107.02 under the loaded module "
                               f"550.90.07 at {_at(upgraded)}")
    assert lines["reboot"] == ("PKG-1050", f"a reboot became pending at {_at(upgraded)} (asked by "
                               "libnvidia-compute-550); still pending")
    # Restarts counted from the first reading (0): 2 - 0, then 5 - 2.
    assert lines["restarts"] == ("AGT-1070", "vastai.service restarted 5 times during the recording, the last "
                                 f"by {_at(last_restart)} (systemd's NRestarts 5)")
    assert "addressing" not in lines  # DHCP throughout

    text = render_watch(analyse(recording), [], str(tmp_path / "w.db"), "table")
    drift_section = text.split("\nDrift\n", 1)[1].split("\n\n", 1)[0]
    assert "- vastai.service restarted 5 times" in drift_section
    assert "(fix: `hostcheck explain NET-1160`)" in " ".join(drift_section.split())


def test_a_second_run_repeats_no_change(tmp_path: Path, listener: Any) -> None:
    """Each run records where things stand; the report counts only values that differ."""
    host = Host(tmp_path / "host")
    for _run in range(2):
        clocks = StepClocks()
        rec = recorder(tmp_path, clocks, listener.port, drift=host.sources())
        rec.begin()
        rec.step()
        rec.finish()
    recording = read_recording(tmp_path / "w.db")
    assert len([e for e in recording.events if e.kind == "drift"]) == 2 * 7
    assert analyse(recording).drift == []


def test_drift_is_read_every_five_minutes_whatever_the_interval(tmp_path: Path, listener: Any) -> None:
    host = Host(tmp_path / "host")
    reads: list[float] = []
    sources = host.sources()
    route = sources.route
    sources.route = lambda: reads.append(clocks.m) or route()  # type: ignore[func-returns-value]
    clocks = StepClocks()
    rec = recorder(tmp_path, clocks, listener.port, drift=sources)
    step = DRIFT_EVERY_S / 3
    for _ in range(7):
        rec.step()
        clocks.advance(step)
    rec.finish()
    # Steps at 0, 1/3, ..., 6/3 of the drift interval: read at 0, 1 and 2 of it.
    assert [r - reads[0] for r in reads] == [0.0, DRIFT_EVERY_S, 2 * DRIFT_EVERY_S]


@pytest.mark.parametrize("name", ["x" * 5000, "eth0\x1b[31m", "../../etc", ""])
def test_a_hostile_interface_name_gives_unknown(tmp_path: Path, listener: Any, name: str) -> None:
    for bad in (address_source(name, "192.168.1.23", str(tmp_path)), link_mode(name, str(tmp_path))):
        assert all(isinstance(v, Unknown) for v in bad.values()), bad
    host = Host(tmp_path / "host")
    sources = host.sources()
    sources.route = lambda: {"interface": name, "gateway": "192.168.1.1", "address": "192.168.1.23",
                             **link_mode(name, str(tmp_path)), **address_source(name, "192.168.1.23", str(tmp_path))}
    rec = recorder(tmp_path, StepClocks(), listener.port, drift=sources)
    rec.step()
    rec.finish()
    events = [e for e in read_recording(tmp_path / "w.db").events if e.kind == "drift"]
    addressing = next(e for e in events if e.detail["what"] == "addressing")
    assert "unknown" in addressing.detail["value"]
    assert all(len(str(e.detail.get("interface", ""))) <= 200 for e in events)


@pytest.mark.parametrize("lease", [b"\x00\xff" * 4000, b"ADDRESS=192.168.1.999\n", b"ADDRESS\n=\n", b""])
def test_a_malformed_lease_gives_unknown(tmp_path: Path, lease: bytes) -> None:
    host = Host(tmp_path)
    (tmp_path / "run/systemd/netif/leases" / IFINDEX).write_bytes(lease)
    found = address_source("enp3s0", "192.168.1.23", str(tmp_path))
    assert isinstance(found["addressing"], Unknown) and isinstance(found["addressing_from"], Unknown)
    assert host.route()["addressing"] == found["addressing"]


def test_each_network_manager_says_dhcp_or_static(tmp_path: Path) -> None:
    """Each source in the shape its program writes; the address must match the lease's."""
    address = "10.0.0.7"
    nm = tmp_path / "nm"
    (nm / "var/lib/NetworkManager").mkdir(parents=True)
    (nm / "var/lib/NetworkManager/internal-4f1d2c3e-0000-4000-8000-000000000001-eth0.lease").write_text(
        f"# This is private data. Do not parse.\nADDRESS={address}\n")
    dhclient = tmp_path / "dhclient"
    (dhclient / "var/lib/dhcp").mkdir(parents=True)
    (dhclient / "var/lib/dhcp/dhclient.eth0.leases").write_text(
        f'lease {{\n  interface "eth0";\n  fixed-address {address};\n  option subnet-mask 255.255.255.0;\n'
        '  option routers 10.0.0.1;\n  option dhcp-lease-time 86400;\n  renew 4 2026/12/03 20:12:44;\n'
        '  expire 5 2026/12/04 09:43:18;\n}\n')
    ifupdown = tmp_path / "ifupdown"
    (ifupdown / "etc/network").mkdir(parents=True)
    (ifupdown / "etc/network/interfaces").write_text(
        "source /etc/network/interfaces.d/*\nauto lo\niface lo inet loopback\n\nauto eth0\n"
        f"iface eth0 inet static\n    address {address}/24\n    gateway 10.0.0.1\n")
    networkd = tmp_path / "networkd"
    (networkd / "run/systemd/netif/links").mkdir(parents=True)
    (networkd / "sys/class/net/eth0").mkdir(parents=True)
    (networkd / "sys/class/net/eth0/ifindex").write_text("3\n")
    (networkd / "run/systemd/netif/links/3").write_text(
        "# This is private data. Do not parse.\nADMIN_STATE=configured\nOPER_STATE=routable\n"
        "NETWORK_FILE=/etc/systemd/network/10-eth0.network\n")
    expect = {nm: ("dhcp", "NetworkManager's DHCP lease"), dhclient: ("dhcp", "dhclient's lease"),
              ifupdown: ("static", "ifupdown's /etc/network/interfaces"),
              networkd: ("static", "systemd-networkd (configured, no DHCP lease for the address)")}
    for root, (how, where) in expect.items():
        assert address_source("eth0", address, str(root)) == {"addressing": how, "addressing_from": where}, root
    # A lease for another address is an old one: it says nothing about this one.
    assert isinstance(address_source("eth0", "10.0.0.8", str(nm))["addressing"], Unknown)
    assert isinstance(address_source("eth0", "10.0.0.8", str(dhclient))["addressing"], Unknown)


def test_a_damaged_recording_gives_no_drift_line_and_no_crash() -> None:
    """Values of the wrong shape (a damaged or foreign database) are not changes."""
    odd: list[Any] = [[1, 2], "100", None, {"speed_mbps": "fast"}, 7, {"library": 5}, True]
    events = [Event(1_800_000_000.0 + i, "drift", "b1", {"what": what, "value": v, "unit": "x" * 5000})
              for i, v in enumerate(odd) for what in ("link", "nvidia", "reboot", "restarts")]
    lines = drift(events)
    # The one value of the right shape for each: a link needs a speed and a duplex (none has both),
    # a driver a library version (none), a restart count an integer (7: one reading, no change),
    # a reboot a boolean (True, the first of its kind: pending from the start).
    assert [(d.what, d.text) for d in lines] == [("reboot", "a reboot was pending when the recording began; still pending")]
