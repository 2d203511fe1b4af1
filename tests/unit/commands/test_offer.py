"""`hostcheck offer`: the Vast offer preview, end to end through the real CLI, on recorded
snapshots (nothing measured) and live on this machine with the real fio."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from hostcheck.collectors.disk_bw import TEST_FILE_PREFIX, DiskBandwidth
from hostcheck.facts import Unknown, load_snapshot, to_jsonable
from hostcheck.measure.offer import PCIE_LANE_GBPS, Label, build_offer
from tests.helpers import SNAPSHOTS, run_cli

SYSTEM_FIELDS = ("gpu_name", "num_gpus", "gpu_ram", "gpu_max_power", "compute_cap", "cuda_max_good", "driver_version",
                 "gpu_display_active", "pci_gen", "cpu_name", "cpu_arch", "cpu_cores", "cpu_ram", "has_avx", "disk_space")
LATER = ("reliability", "dlperf", "verified", "dph_total", "geolocation", "static_ip")


def offer_json(*args: str) -> tuple[int, dict[str, Any], str]:
    proc = run_cli("offer", "--format", "json", *args)
    return proc.returncode, (json.loads(proc.stdout) if proc.stdout else {}), proc.stderr


def by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in doc["fields"]}


def test_reference_laptop_snapshot() -> None:
    rc, doc, err = offer_json("--facts", str(SNAPSHOTS / "reference-laptop.json"))
    assert rc == 0, err
    fields = by_name(doc)
    facts = load_snapshot(SNAPSHOTS / "reference-laptop.json")
    assert isinstance(facts, dict)
    dev = facts["gpu"]["devices"][0]
    expected = {
        "gpu_name": dev["name"], "num_gpus": len(facts["gpu"]["devices"]), "gpu_ram": dev["vram_total_mib"],
        "gpu_max_power": dev["power_limit_w"], "cuda_max_good": facts["gpu"]["cuda_driver_version"],
        "driver_version": facts["gpu"]["driver_version"], "cpu_cores": facts["system"]["cpu_logical_cores"],
        "cpu_ram": facts["system"]["ram_total_mib"], "cpu_name": facts["system"]["cpu_model"],
        "disk_space": facts["storage"]["docker_root"]["free_gib"], "pci_gen": dev["pcie_gen_max"],
    }  # fmt: skip
    for name, value in expected.items():
        assert fields[name]["value"] == value, name
        assert fields[name]["label"] == "from the system", name
    major, minor = dev["compute_capability"].split(".")
    assert fields["compute_cap"]["value"] == int(major) * 100 + int(minor) * 10
    # From a snapshot nothing is measured, and each says so.
    for name in ("disk_bw", "inet_down", "inet_up", "direct_port_count", "pcie_bw"):
        assert fields[name]["label"] == "not measured" and fields[name]["value"] is None, name
    assert "--speedtest" in fields["inet_down"]["how"]
    # PCIe ceiling from the rule: per-lane rate of the maximum generation x the current width.
    ceiling = round(PCIE_LANE_GBPS[dev["pcie_gen_max"]] * dev["pcie_width_current"], 1)
    assert f"{ceiling} GB/s" in fields["pcie_bw"]["how"]
    for name in LATER:
        assert fields[name]["label"] == "not measurable before listing", name
    for f in doc["fields"]:
        assert "vast-ai/" in f["source"] or "send_mach_info" in f["source"], f["name"]
        assert f["definition"]
    # The doc and the fio job, each with the date it was read.
    assert fields["disk_bw"]["source"].count("(checked 2026-12-0") == 2
    assert doc["power"]["gpu_load"] == {"watts": 45.0, "provenance": "estimated", "how": doc["power"]["gpu_load"]["how"]}
    assert doc["disk_bw_run"] is None


def test_every_field_has_one_of_the_labels() -> None:
    for snapshot in sorted(SNAPSHOTS.glob("*.json")):
        facts = load_snapshot(snapshot)
        offer = build_offer(facts)
        for f in offer.fields:
            assert isinstance(f.label, Label)
            if f.label in (Label.SYSTEM, Label.MEASURED):
                assert f.value is not None, (snapshot.name, f.name)
            else:
                assert f.value is None, (snapshot.name, f.name)
            if f.label is Label.UNKNOWN:
                assert f.how.startswith("unknown: "), (snapshot.name, f.name)


def test_no_gpu_snapshot_says_why() -> None:
    rc, doc, _ = offer_json("--facts", str(SNAPSHOTS / "no-nvidia-desktop.json"))
    assert rc == 0
    fields = by_name(doc)
    for name in ("gpu_name", "gpu_ram", "cuda_max_good"):
        assert fields[name]["label"] == "unknown" and "NVML" in fields[name]["how"]
    assert doc["power"]["gpu_idle"]["provenance"] == "unknown"


def test_mixed_gpus_show_what_every_renter_gets() -> None:
    facts = load_snapshot(SNAPSHOTS / "mixed-3090-1080ti.json")
    devices = facts["gpu"]["devices"]
    fields = {f.name: f for f in build_offer(facts).fields}
    assert fields["num_gpus"].value == len(devices)
    assert fields["gpu_ram"].value == min(d["vram_total_mib"] for d in devices)
    assert fields["gpu_name"].value == ", ".join(sorted({d["name"] for d in devices}))


def test_speedtest_and_probe_results_become_measured() -> None:
    facts = load_snapshot(SNAPSHOTS / "reference-laptop.json")
    facts.setdefault("network", {})
    facts["network"]["bandwidth"] = {"measured": True, "download_mbps": 412.5, "upload_mbps": 38.25,
                                     "server": "https://probe.example:8470", "reason": None}
    facts["network"]["inbound"] = {"probed": True, "ports": [
        {"port": 40000, "proto": "tcp", "result": "reachable"}, {"port": 40001, "proto": "tcp", "result": "unreachable"},
    ]}  # fmt: skip
    fields = {f.name: f for f in build_offer(facts).fields}
    # Vast computes 8 * bytes/s / 2**20; hostcheck's Mbit/s are 8 * bytes/s / 10**6.
    assert fields["inet_down"].value == round(412.5 * 10**6 / 2**20, 1)
    assert fields["inet_up"].value == round(38.25 * 10**6 / 2**20, 1)
    assert fields["inet_down"].label is Label.MEASURED
    assert (fields["direct_port_count"].value, fields["direct_port_count"].label) == (1, Label.MEASURED)
    facts["network"]["inbound"].update(peer="192.168.1.1", seen_from="inside")  # through hairpin NAT
    inside = {f.name: f for f in build_offer(facts).fields}["direct_port_count"]
    assert (inside.value, inside.label) == (None, Label.NOT_MEASURED) and "inside the LAN" in inside.how


def test_disk_measurement_labels() -> None:
    facts = load_snapshot(SNAPSHOTS / "reference-laptop.json")
    ok = DiskBandwidth(812.4, "/var/lib/docker", "on Docker's data root /var/lib/docker", bytes_written=256 << 20)
    f = {x.name: x for x in build_offer(facts, disk=ok).fields}["disk_bw"]
    assert (f.value, f.unit, f.label) == (812.4, "MiB/s", Label.MEASURED)
    assert "256 MiB test file written and removed" in f.how and "Docker's data root" in f.how
    bad = DiskBandwidth(Unknown("fio is not installed: install it with `sudo apt install fio` (Debian, Ubuntu)"), None, "")
    f = {x.name: x for x in build_offer(facts, disk=bad).fields}["disk_bw"]
    assert f.label is Label.UNKNOWN and "sudo apt install fio" in f.how


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_text_formats_name_every_field_and_the_later_ones(fmt: str) -> None:
    proc = run_cli("offer", "--format", fmt, "--details", "--facts", str(SNAPSHOTS / "dedicated-4090.json"))
    assert proc.returncode == 0, proc.stderr
    for name in (*SYSTEM_FIELDS, "disk_bw", "inet_down", "inet_up", "direct_port_count", "pcie_bw", *LATER):
        assert name in proc.stdout, name
    flat = " ".join(proc.stdout.split())  # (the terminal's lines are wrapped)
    assert "Not measurable before listing: reliability, dlperf, verified, dph_total, geolocation, static_ip" in flat
    assert "search_offers.yaml" in proc.stdout and "send_mach_info.py" in proc.stdout


def test_hostile_snapshot_text_is_escaped(tmp_path: Path) -> None:
    facts = to_jsonable(load_snapshot(SNAPSHOTS / "reference-laptop.json"))
    facts["gpu"]["devices"][0]["name"] = "RTX\x1b[2J\x07 | evil"
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(facts))
    for fmt in ("table", "markdown"):
        proc = run_cli("offer", "--format", fmt, "--facts", str(path))
        assert proc.returncode == 0, proc.stderr
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--disk-size-mib", "5"], "--disk-size-mib"),
        (["--power-seconds", "-1"], "--power-seconds"),
        (["--power-seconds", "nan"], "--power-seconds"),
        (["--wall-idle-w", "nan"], "--wall-idle-w"),
        (["--wall-load-w", "0"], "--wall-load-w"),
        (["--format", "yaml"], "--format"),
        (["--disk-dir", "/nonexistent/dir"], "--disk-dir"),
        (["--facts", str(SNAPSHOTS / "reference-laptop.json"), "--disk-dir", "/tmp"], "--facts"),
        (["--facts", "/nonexistent.json"], "nonexistent"),
        (["--speedtest", "--offline"], "--speedtest"),
        (["--wall-idle-w", "300", "--wall-load-w", "200"], "--wall-idle-w: 300 W idle is more than 200 W under load"),
    ],
)
def test_bad_input_exits_2(args: list[str], message: str) -> None:
    proc = run_cli("offer", *args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in proc.stderr and "Traceback" not in proc.stderr


needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (scripts/test installs it)")


@needs_fio
def test_live_offer_with_fio() -> None:
    disk_dir = Path(tempfile.mkdtemp(prefix="hostcheck-offer-", dir="/var/tmp"))
    try:
        started = time.monotonic()
        rc, doc, err = offer_json("--offline", "--disk-dir", str(disk_dir), "--disk-size-mib", "64",
                                  "--power-seconds", "0.5")
        took = time.monotonic() - started
        assert rc == 0, err
        fields = by_name(doc)
        assert fields["disk_bw"]["label"] == "measured" and fields["disk_bw"]["value"] > 0
        assert f"in {disk_dir} as asked (--disk-dir)" in fields["disk_bw"]["how"]
        run = doc["disk_bw_run"]
        assert run["bytes_written"] == 64 << 20 and run["file_removed"] is True
        assert [n for n in os.listdir(disk_dir) if n.startswith(TEST_FILE_PREFIX)] == []
        assert fields["cpu_cores"]["label"] == "from the system" and fields["cpu_cores"]["value"] == os.cpu_count()
        for key in ("gpu_idle", "gpu_load", "cpu_package", "rest_of_system", "wall_idle", "wall_load"):
            fig = doc["power"][key]
            assert fig["provenance"] in ("measured", "estimated", "given", "unknown")
            assert (fig["watts"] is None) == (fig["provenance"] == "unknown")
        assert took < 60
    finally:
        shutil.rmtree(disk_dir, ignore_errors=True)


def test_live_offer_without_disk_bw_writes_nothing() -> None:
    rc, doc, err = offer_json("--offline", "--no-disk-bw", "--power-seconds", "0")
    assert rc == 0, err
    fields = by_name(doc)
    assert fields["disk_bw"]["label"] == "not measured" and "--no-disk-bw" in fields["disk_bw"]["how"]
    assert doc["disk_bw_run"] is None


def test_help_says_it_is_not_read_only() -> None:
    proc = run_cli("offer", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "NOT read-only" in text and "--no-disk-bw" in text and "sudo apt install fio" in text


@needs_fio
def test_interrupted_offer_leaves_no_test_file() -> None:
    """Ctrl-C while the test file is being written: hostcheck exits 130 and the file is gone."""
    disk_dir = Path(tempfile.mkdtemp(prefix="hostcheck-offer-int-", dir="/var/tmp"))
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hostcheck.cli", "offer", "--offline", "--power-seconds", "0",
             "--disk-dir", str(disk_dir), "--disk-size-mib", "1024"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            # as a terminal's ^C reaches it: a suite started in the background of a
            # non-interactive shell inherits SIGINT ignored, and Python then keeps it so
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
        deadline = time.monotonic() + 30
        seen = False
        while time.monotonic() < deadline and proc.poll() is None:
            if any(n.startswith(TEST_FILE_PREFIX) for n in os.listdir(disk_dir)):
                seen = True
                break
            time.sleep(0.01)
        assert seen, "the test file never appeared"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert [n for n in os.listdir(disk_dir) if n.startswith(TEST_FILE_PREFIX)] == []
    finally:
        shutil.rmtree(disk_dir, ignore_errors=True)


def test_self_test_preflight_from_vasts_rules() -> None:
    """Vast's self-test thresholds (vast-cli machine_diagnostics.py), recomputed here."""
    for snapshot in ("reference-laptop.json", "dgx-a100-8x-ecc.json", "mixed-3090-1080ti.json"):
        facts = load_snapshot(SNAPSHOTS / snapshot)
        devices = facts["gpu"]["devices"]
        total_vram = sum(d["vram_total_mib"] for d in devices)
        checks = {c.field: c for c in build_offer(facts).self_test}
        cuda = float(facts["gpu"]["cuda_driver_version"])
        assert checks["cuda_max_good"].status == ("pass" if cuda >= 11.8 else "fail"), snapshot
        per_gpu_gib = total_vram / len(devices) / 1024
        assert checks["gpu_ram"].status == ("pass" if per_gpu_gib > 7 else "fail"), snapshot
        need_ram = min(0.95 * total_vram, 2_000_000)
        assert checks["cpu_ram"].required == pytest.approx(need_ram, abs=0.01)
        assert checks["cpu_ram"].status == ("pass" if facts["system"]["ram_total_mib"] >= need_ram else "fail")
        assert checks["cpu_cores"].required == 2 * len(devices)
        # Bandwidth floor: 100 Mb/s, 500 cap, linear against 192 GiB of total VRAM.
        floor = min(500.0, max(100.0, 500.0 * total_vram / 1024 / 192))
        assert checks["inet_down"].required == pytest.approx(floor, abs=0.01)
        assert checks["reliability"].status == "unknown"  # not before listing
        assert checks["pcie_bw"].status == "unknown"  # not measured without CUDA


def test_self_test_in_json_and_text() -> None:
    rc, doc, _ = offer_json("--facts", str(SNAPSHOTS / "reference-laptop.json"))
    assert rc == 0
    assert "machine_diagnostics.py" in doc["self_test"]["source"]
    assert {c["field"] for c in doc["self_test"]["checks"]} >= {"cuda_max_good", "gpu_ram", "cpu_ram", "inet_down"}
    proc = run_cli("offer", "--facts", str(SNAPSHOTS / "reference-laptop.json"), "--format", "markdown")
    assert "self-test preflight" in proc.stdout


HOSTILE: tuple[Any, ...] = ("x", -1, 0, None, [], {}, 1e308, True, "\x1b[2J", {"$unknown": "gone"})


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(node, dict) and "$unknown" not in node:
        return [p for k, v in node.items() for p in _leaves(v, (*path, k))] or [path]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _leaves(v, (*path, i))] or [path]
    return [path]


def test_hostile_values_never_crash_the_preview() -> None:
    """Every leaf the offer or the power figures read, replaced by each hostile value in turn."""
    from hostcheck.facts import from_jsonable
    from hostcheck.measure.power_estimate import estimate_power
    from hostcheck.render.formats import Kind, render

    base = to_jsonable(load_snapshot(SNAPSHOTS / "reference-laptop.json"))
    base["network"]["bandwidth"] = {"measured": True, "download_mbps": 300.0, "upload_mbps": 20.0,
                                    "server": "https://probe.example:8470", "reason": None}
    read = ("gpu", "system", "storage", "power", "network")
    # The leaves the preview reads (the rest of the facts never reach it), and each whole section.
    wanted = (("gpu",), ("system",), ("storage", "docker_root"), ("power", "chassis_type"), ("network", "bandwidth"),
              ("network", "inbound"))
    paths = [p for p in _leaves(base) if any(p[: len(w)] == w for w in wanted)]
    paths += [(section,) for section in read] + [("gpu", "devices", 0), ("network", "bandwidth"), ("network", "inbound")]
    for path in paths:
        for bad in HOSTILE:
            doc = json.loads(json.dumps(base))
            node = doc
            for part in path[:-1]:
                node = node[part]
            node[path[-1]] = bad
            facts = from_jsonable(doc)
            offer = build_offer(facts, power=estimate_power(facts))
            for fmt in ("table", "json"):
                assert "\x1b" not in render(Kind.OFFER, offer, fmt)


def test_live_offer_without_fio_says_how_to_get_it() -> None:
    disk_dir = Path(tempfile.mkdtemp(prefix="hostcheck-offer-nofio-", dir="/var/tmp"))
    try:
        proc = run_cli("offer", "--format", "json", "--offline", "--power-seconds", "0", "--disk-dir", str(disk_dir),
                       env={"PATH": str(disk_dir)})  # an empty directory: no fio on PATH
        assert proc.returncode == 0, proc.stderr
        field = by_name(json.loads(proc.stdout))["disk_bw"]
        assert field["label"] == "unknown" and "sudo apt install fio" in field["how"]
        assert os.listdir(disk_dir) == []
    finally:
        shutil.rmtree(disk_dir, ignore_errors=True)


def test_the_fio_job_is_cited_as_a_third_party_copy_of_first_party_code() -> None:
    # No first-party copy of send_mach_info.py was found: the source must say where the job was
    # read and that it is a third-party copy, pinned to the commit read.
    from hostcheck.collectors.disk_bw import VAST_JOB_SOURCE, VAST_JOB_URL

    assert "3P copy" in VAST_JOB_SOURCE and "1P code" in VAST_JOB_SOURCE
    assert "/blob/342fab589cad648b7698a035d2710c2b8b730c99/" in VAST_JOB_URL
    offer = json.loads(run_cli("offer", "--format", "json", "--facts", str(SNAPSHOTS / "dedicated-4090.json")).stdout)
    disk_bw = next(f for f in offer["fields"] if f["name"] == "disk_bw")
    assert "3P copy" in disk_bw["source"] and VAST_JOB_URL in disk_bw["source"]
    readme = (Path(__file__).parents[3] / "docs" / "offer.md").read_text()
    assert "Vast's own fio job" not in readme and "third-party copy" in readme


def test_a_long_cpu_name_is_wrapped_whole_with_the_escapes_kept(tmp_path: Path) -> None:
    facts = to_jsonable(load_snapshot(SNAPSHOTS / "reference-laptop.json"))
    name = "AMD Ryzen Threadripper PRO 7995WX 96-Cores\x1b[2J with a very long model name"
    facts["system"]["cpu_model"] = name
    path = tmp_path / "long.json"
    path.write_text(json.dumps(facts))
    for columns in (40, 80):
        table = run_cli("offer", "--details", "--facts", str(path), env={"COLUMNS": str(columns)}).stdout
        assert "\x1b" not in table
        lines = table.splitlines()
        assert not [line for line in lines if len(line) > columns and " " in line.strip()]
        assert not [line for line in lines if line != line.rstrip()]
        short = run_cli("offer", "--facts", str(path), env={"COLUMNS": str(columns)}).stdout
        assert "\x1b" not in short and "96-Cores\\x1b[2J with a very long model name" in " ".join(short.split())
        # The whole name, escaped, wrapped over lines where it must be: never cut.
        entry = " ".join(table.split("  cpu_name: ", 1)[1].split("\n  cpu_arch:", 1)[0].split())
        assert entry.startswith("AMD Ryzen Threadripper PRO 7995WX 96-Cores\\x1b[2J with a very long model name")
    # JSON and Markdown keep the whole name (escaped in Markdown).
    offer = json.loads(run_cli("offer", "--format", "json", "--facts", str(path)).stdout)
    assert next(f for f in offer["fields"] if f["name"] == "cpu_name")["value"] == name
    assert "with a very long model name" in run_cli("offer", "--format", "markdown", "--facts", str(path)).stdout
