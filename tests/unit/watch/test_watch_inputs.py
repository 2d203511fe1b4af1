"""The recorder's inputs beyond reachability, each against real parts where they can run here:
NVML's violation and ECC counters (through the suite's NVML stand-in answering per query), a
power-supply tree shaped like sysfs, a `upsc` stand-in printing NUT's output shape, a STUN
responder and a probe server on loopback, and the traffic bound of the command line."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hostcheck.collectors.gpu import NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL
from hostcheck.facts import Unknown
from hostcheck.recording.analysis import analyse
from hostcheck.recording.store import read_recording
from hostcheck.watch import traffic
from hostcheck.watch.probes import DEFAULT_TARGETS, parse_targets
from hostcheck.watch.recorder import Clocks, Recorder, WatchConfig
from hostcheck.watch.rules import score_all
from tests.nvml_standin import FakeNvml, laptop_3080ti
from tests.probe_fixtures import TOKEN, free_port, start_in_thread
from tests.watch_fixtures import CountingNvml, StunResponder, TcpListener, render_watch

REPO = Path(__file__).resolve().parents[3]
T0 = 1_800_000_000.0


class StepClocks(Clocks):
    def __init__(self) -> None:
        self.w, self.m, self.b = T0, 100.0, 100.0
        super().__init__(wall=lambda: self.w, mono=lambda: self.m, boottime=lambda: self.b)

    def advance(self, seconds: float) -> None:
        self.w += seconds
        self.m += seconds
        self.b += seconds


@pytest.fixture
def listener() -> Any:
    peer = TcpListener()
    yield peer
    peer.close()


def recorder(tmp_path: Path, port: int, clocks: Clocks | None = None, **kw: Any) -> Recorder:
    boot_id = tmp_path / "boot_id"
    boot_id.write_text("aaaaaaaa-0000-0000-0000-000000000001\n")
    defaults: dict[str, Any] = {
        "nvml": Unknown("no GPU in this test"), "power_supply_dir": tmp_path / "no-power",
        "upsc_command": [str(tmp_path / "no-upsc")],
    }  # fmt: skip
    config = WatchConfig(db=tmp_path / "w.db", interval_s=60, targets=[f"tcp:127.0.0.1:{port}"], probe_timeout_s=0.5,
                         journal_command=["journalctl", "--file", str(tmp_path / "none.journal")],
                         dpkg_log=tmp_path / "dpkg.log", boot_id_path=boot_id, container_mark=tmp_path / "no-mark",
                         **{**defaults, **kw})  # fmt: skip
    return Recorder(config, clocks=clocks or StepClocks(), log=lambda _m: None)


def events(tmp_path: Path, kind: str) -> list[dict[str, Any]]:
    return [e.detail for e in read_recording(tmp_path / "w.db").events if e.kind == kind]


# ------------------------------------------------------------------ NVML counters


def test_throttled_time_is_the_counters_increase_between_consecutive_samples(tmp_path: Path, listener: TcpListener) -> None:
    clocks = StepClocks()
    nvml = CountingNvml(laptop_3080ti())
    rec = recorder(tmp_path, listener.port, clocks, nvml=nvml)
    # (thermal s, power s) counter readings at each of five samples a minute apart; the
    # recorder was away between the 3rd and 4th (10 minutes): that increase is not counted.
    readings = [(100, 5), (112, 5), (130, 20), (400, 90), (403, 96)]
    gaps = [60, 60, 600, 60]
    for n, (thermal, power) in enumerate(readings):
        nvml.violation_ns = {NVML_PERF_POLICY_THERMAL: thermal * 10**9, NVML_PERF_POLICY_POWER: power * 10**9}
        rec.step()
        if n < len(gaps):
            clocks.advance(gaps[n])
    rec.writer.close()
    recording = read_recording(tmp_path / "w.db")
    per_sample = [(g.get("th"), g.get("pw")) for s in recording.samples for g in s.detail["gpus"]]
    assert per_sample == [(None, None), (12.0, 0.0), (18.0, 15.0), (None, None), (3.0, 6.0)]
    health = analyse(recording).gpu_health
    assert len(health) == 1
    # Counted over the three consecutive pairs: 180 s; thermal 33 s, power 21 s of it.
    assert (health[0].thermal_s, health[0].power_s, health[0].counted_s) == (33.0, 21.0, 180.0)
    assert health[0].share(health[0].thermal_s) == pytest.approx(33 / 180)
    text = render_watch(analyse(recording), score_all(analyse(recording)), "w.db", "table")
    assert "GPU health (NVML counters)" in text and "18.333 %" in text


def test_ecc_counts_are_recorded_when_they_grow(tmp_path: Path, listener: TcpListener) -> None:
    nvml = CountingNvml(laptop_3080ti())
    rec = recorder(tmp_path, listener.port, nvml=nvml)
    for corrected, uncorrected in ((4, 0), (4, 0), (9, 0), (9, 1), (2, 0)):  # the last: a driver reload reset them
        nvml.ecc_counts = {0: corrected, 1: uncorrected}
        rec.step()
    rec.writer.close()
    got = [(e["corrected_new"], e["uncorrected_new"]) for e in events(tmp_path, "ecc")]
    assert got == [(5, 0), (0, 1), (2, 0)]
    health = analyse(read_recording(tmp_path / "w.db")).gpu_health
    assert (health[0].ecc_corrected, health[0].ecc_uncorrected) == (7, 1)


def test_a_card_without_ecc_counts_records_none(tmp_path: Path, listener: TcpListener) -> None:
    from tests.nvml_standin import NOT_SUPPORTED

    rec = recorder(tmp_path, listener.port, nvml=FakeNvml([{**laptop_3080ti(), "nvmlDeviceGetTotalEccErrors": NOT_SUPPORTED}]))
    rec.step()
    rec.step()
    rec.writer.close()
    # Said once, with the reason; no counts, and the GPU is fine.
    assert events(tmp_path, "ecc") == [{"gpu": 0, "available": False, "reason": "not supported by this GPU/driver", "previous": None}]
    assert [s.gpu_ok for s in read_recording(tmp_path / "w.db").samples] == [True, True]
    assert analyse(read_recording(tmp_path / "w.db")).gpu_health[0].ecc_counted is False


# ------------------------------------------------------------------ power source and UPS


def supply(root: Path, name: str, **attrs: str) -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    for key, value in attrs.items():
        (root / name / key).write_text(value + "\n")


def test_laptop_power_source_changes_from_a_sysfs_tree(tmp_path: Path, listener: TcpListener) -> None:
    root = tmp_path / "power_supply"
    supply(root, "AC", type="Mains", online="1")
    supply(root, "BAT0", type="Battery", status="Charging", capacity="80", present="1", scope="System")
    supply(root, "hidpp_battery_0", type="Battery", status="Discharging", capacity="40", scope="Device")  # a mouse
    rec = recorder(tmp_path, listener.port, power_supply_dir=root)
    rec.step()
    rec.step()  # unchanged: not recorded again
    supply(root, "AC", online="0")
    supply(root, "BAT0", status="Discharging", capacity="79")
    rec.step()
    supply(root, "AC", online="1")
    supply(root, "BAT0", status="Charging")
    rec.step()
    rec.writer.close()
    assert [(e["on"], e["previous"]) for e in events(tmp_path, "power_source")] == [
        ("ac", None), ("battery", "ac"), ("ac", "battery")]
    assert [b["name"] for b in events(tmp_path, "power_source")[1]["batteries"]] == ["BAT0"]


def test_a_machine_without_battery_records_that_once(tmp_path: Path, listener: TcpListener) -> None:
    root = tmp_path / "power_supply"
    supply(root, "AC", type="Mains", online="1")
    rec = recorder(tmp_path, listener.port, power_supply_dir=root)
    rec.step()
    rec.step()
    rec.writer.close()
    assert events(tmp_path, "power_source") == [{"readable": True, "battery_present": False, "on_ac": True, "previous": None}]


# `upsc myups` from a CyberPower CP1500PFCLCD on NUT 2.6.5, as published in
# https://gist.github.com/kolyshkin/ed5938a067d24ad9f157 (abridged); the status and charge
# lines are what the stand-in below changes.
UPSC_OUTPUT = """battery.charge: {charge}
battery.charge.low: 10
battery.charge.warning: 20
battery.runtime: 6090
battery.type: PbAcid
device.mfr: CPS
device.model: CP1500PFCLCD
device.type: ups
driver.name: usbhid-ups
driver.version: 2.6.5
input.voltage: {voltage}
input.voltage.nominal: 120
ups.load: 7
ups.mfr: CPS
ups.model: CP1500PFCLCD
ups.status: {status}
ups.test.result: No test initiated
"""


def upsc_stand_in(tmp_path: Path) -> Path:
    """A `upsc` that answers like NUT's from a state file the test rewrites."""
    state = tmp_path / "ups-state"
    script = tmp_path / "upsc"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "Init SSL without certificate database" >&2\n'
        'if [ "$1" = "-l" ]; then echo myups; exit 0; fi\n'
        'if [ "$1" != "myups" ]; then echo "Error: Unknown UPS" >&2; exit 1; fi\n'
        f'cat "{state}"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_ups_events_from_nut(tmp_path: Path, listener: TcpListener) -> None:
    script = upsc_stand_in(tmp_path)
    state = tmp_path / "ups-state"
    rec = recorder(tmp_path, listener.port, upsc_command=[str(script)])
    for status, charge, voltage in (("OL", 100, "121.0"), ("OL", 100, "120.0"), ("OB DISCHRG", 96, "0.0"),
                                    ("OB DISCHRG LB", 9, "0.0"), ("OL CHRG", 12, "119.0")):
        state.write_text(UPSC_OUTPUT.format(status=status, charge=charge, voltage=voltage))
        rec.step()
    rec.writer.close()
    got = [(e["status"], e["previous"], e["on_battery"], e["battery.charge"]) for e in events(tmp_path, "ups")]
    assert got == [("OL", None, False, "100"), ("OB DISCHRG", "OL", True, "96"),
                   ("OB DISCHRG LB", "OB DISCHRG", True, "9"), ("OL CHRG", "OB DISCHRG LB", False, "12")]


def test_no_nut_is_recorded_once_with_its_reason(tmp_path: Path, listener: TcpListener) -> None:
    rec = recorder(tmp_path, listener.port, upsc_command=[str(tmp_path / "not-installed" / "upsc")])
    rec.step()
    rec.step()
    rec.writer.close()
    ups = events(tmp_path, "ups")
    assert len(ups) == 1 and ups[0]["available"] is False and "could not run" in ups[0]["reason"]
    assert len(read_recording(tmp_path / "w.db").samples) == 2


# ------------------------------------------------------------------ public address and CGNAT


def test_public_address_change_and_cgnat_recheck(tmp_path: Path, listener: TcpListener) -> None:
    """A STUN responder on loopback plays the internet: first it sees the host at a public
    address (no CGNAT evidence either way from there: "unknown"), then at a shared RFC 6598
    address, which is carrier-grade NAT ("yes")."""
    stun = StunResponder(("203.0.113.5", 40000))
    try:
        rec = recorder(tmp_path, listener.port, stun_servers=[f"127.0.0.1:{stun.port}"], stun_every=1,
                       public_ranges=["203.0.113.0/24"])
        rec.step()
        stun.mapped = ("100.64.7.9", 40001)
        rec.step()
        rec.writer.close()
    finally:
        stun.close()
    assert [(e["address"], e["previous"]) for e in events(tmp_path, "public_address")] == [
        ("203.0.113.5", None), ("100.64.7.9", "203.0.113.5")]
    verdicts = [(e["verdict"], e["previous"]) for e in events(tmp_path, "cgnat")]
    assert verdicts == [("unknown", None), ("yes", "unknown")]
    assert "shared (RFC 6598)" in " ".join(events(tmp_path, "cgnat")[1]["evidence"])


# ------------------------------------------------------------------ forwarded ports


def test_forwarded_ports_through_a_real_probe_server(tmp_path: Path, listener: TcpListener) -> None:
    srv = start_in_thread()
    clocks = StepClocks()
    open_port, = (free_port(),)
    try:
        rec = recorder(tmp_path, listener.port, clocks, probe_url=srv.url, probe_token=TOKEN,
                       probe_ports=[(open_port, "tcp"), (open_port, "udp")], probe_every_s=600)
        for _ in range(12):  # 12 samples a minute apart: checks at the 1st and the 11th only
            rec.step()
            clocks.advance(60)
        rec.writer.close()
    finally:
        srv.stop()
    checks = events(tmp_path, "inbound")
    assert len(checks) == 2
    assert all(c["probed"] and [p["result"] for p in c["ports"]] == ["reachable", "reachable"] for c in checks)
    text = render_watch(analyse(read_recording(tmp_path / "w.db")), [], "w.db", "table")
    assert "Forwarded ports" in text


def test_a_dead_probe_server_is_a_reason_not_a_stop(tmp_path: Path, listener: TcpListener) -> None:
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()  # nothing listens there
    rec = recorder(tmp_path, listener.port, probe_url=f"http://127.0.0.1:{port}", probe_token=TOKEN,
                   probe_ports=[(free_port(), "tcp")], probe_every_s=600)
    rec.step()
    rec.writer.close()
    (check,) = events(tmp_path, "inbound")
    assert check["probed"] is False and "not reachable" in check["reason"]
    assert len(read_recording(tmp_path / "w.db").samples) == 1


@pytest.mark.parametrize(("kw", "message"), [
    ({"probe_ports": []}, "needs the forwarded ports"),
    ({"probe_ports": [(1000 + i, "tcp") for i in range(9)]}, "at most 8"),
    ({"probe_ports": [(1000, "tcp")], "probe_every_s": 60}, "at least 5 minutes"),
])  # fmt: skip
def test_probe_settings_are_bounded(tmp_path: Path, kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        recorder(tmp_path, 1, probe_url="https://probe.example:8443", probe_token=TOKEN, **kw)


# ------------------------------------------------------------------ the traffic bound


def test_traffic_per_minute_is_the_measured_exchanges_times_their_rate() -> None:
    defaults = parse_targets(list(DEFAULT_TARGETS))
    # Three TCP and three DNS targets once a minute, by the bytes measured per exchange.
    per_sample = 3 * traffic.MEASURED_BYTES["tcp"] + 3 * traffic.MEASURED_BYTES["dns"]
    assert traffic.bytes_per_minute(60, defaults) == per_sample
    assert traffic.check(traffic.bytes_per_minute(60, defaults), allowed=False) is None
    # Every 10 s: six times that, over the bound unless allowed.
    assert traffic.bytes_per_minute(10, defaults) == 6 * per_sample > traffic.LIMIT_BYTES_PER_MIN
    assert traffic.check(6 * per_sample, allowed=True) is None
    # One STUN binding every 5 samples, two forwarded ports checked every 30 minutes.
    expected = per_sample + traffic.MEASURED_BYTES["stun"] / 5 + 2 * traffic.MEASURED_BYTES["probe_port"] / 30
    assert traffic.bytes_per_minute(60, defaults, stun_servers=2, probe_ports=2, probe_every_s=1800) == pytest.approx(expected)


def hostcheck(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hostcheck.cli", *args], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={**os.environ, **(env or {})})


def test_cli_refuses_more_than_a_few_kilobytes_a_minute(tmp_path: Path, listener: TcpListener) -> None:
    proc = hostcheck("watch", "--db", str(tmp_path / "w.db"), "--interval", "5", "--for", "1")
    assert proc.returncode == 2 and "--allow-more-traffic" in proc.stderr and "KiB a minute" in proc.stderr
    assert not (tmp_path / "w.db").exists()
    proc = hostcheck("watch", "--db", str(tmp_path / "w.db"), "--interval", "0.5", "--for", "1", "--allow-more-traffic",
                     "--target", f"tcp:127.0.0.1:{listener.port}", "--journal-file", str(tmp_path / "none.journal"))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--probe-port", "8080"], "--probe-port needs --probe"),
    (["--probe", "http://127.0.0.1:9/", "--probe-port", "8080"], "--insecure-http"),
    (["--probe", "https://127.0.0.1:9/", "--probe-port", "70000"], "PORT, PORT/tcp or PORT/udp"),
    (["--probe", "https://127.0.0.1:9/", "--probe-port", "8080"], "needs the probe server's token"),
    (["--probe", "https://127.0.0.1:9/", "--probe-port", "8080", "--probe-every", "1m"], "at least 5 minutes"),
])  # fmt: skip
def test_cli_probe_options_bad_input_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    env = {"HOSTCHECK_PROBE_TOKEN": TOKEN} if "at least" in message else {"HOSTCHECK_PROBE_TOKEN": ""}
    proc = hostcheck("watch", "--db", str(tmp_path / "w.db"), "--for", "1", *args, env=env)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
