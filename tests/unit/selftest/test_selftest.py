"""`hostcheck selftest` end to end on stand-ins: the real ctypes layer against the C stand-in
for libcuda (tests/unit/selftest/fake_libcuda.c), NVML readings of recorded shapes, the
preflight judged on recorded snapshots. Each scenario: the right first failing stage, the
right words, and nothing left allocated."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from hostcheck.commands.selftest import Deps, Request, execute
from hostcheck.exit_codes import EXIT_INTERRUPTED, EXIT_NOT_FEASIBLE, EXIT_OK
from hostcheck.facts import load_snapshot
from hostcheck.selftest.cuda import Driver
from hostcheck.selftest.rules import rules
from tests.unit.selftest import standins
from tests.unit.selftest.standins import XID_79, RecordedNvml

MINUTES = 0.04  # 2.4 s of load: every stage runs, the suite stays quick


@pytest.fixture(scope="module")
def libcuda(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return standins.build_fake_libcuda(tmp_path_factory.mktemp("libcuda"))


def deps(library: Path, snapshot: str, nvml: Any, kernel: list[str] | str | None = None,
         facts: dict[str, Any] | None = None, **kw: Any) -> Deps:
    facts = facts if facts is not None else load_snapshot(standins.SNAPSHOTS / snapshot)
    return Deps(collect=lambda: copy.deepcopy(facts), nvml=nvml, driver=lambda: Driver(str(library)),
                kernel_lines=lambda since: [] if kernel is None else kernel, confirm=lambda q: False,
                progress=lambda line: None, **kw)


def run(library: Path, monkeypatch: pytest.MonkeyPatch, scenario: str, d: Deps, **request: Any) -> tuple[int, dict[str, Any]]:
    monkeypatch.setenv("HC_FAKE_CUDA", scenario)
    code, text, _ = execute(Request(minutes=MINUTES, max_temp=None, yes=True, accept_owner_risk=False, **request), d,
                            "json")
    return code, json.loads(text)


def findings(doc: dict[str, Any], stage: str) -> list[dict[str, Any]]:
    return next(s["findings"] for s in doc["stages"] if s["stage"] == stage)


def status_of(doc: dict[str, Any], check: str) -> list[str]:
    return [f["status"] for s in doc["stages"] for f in s["findings"] if f["id"] == check]


def test_a_healthy_card_passes_every_stage(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = RecordedNvml([standins.desktop_4090()])
    code, doc = run(libcuda, monkeypatch, "total_mib=24564;free_mib=24180;name=NVIDIA GeForce RTX 4090;cc=89;"
                    "sms=128;h2d_gbps=24;d2h_gbps=25", deps(libcuda, "dedicated-4090.json", nvml))
    assert code == EXIT_OK, doc["answer"]
    assert doc["answer"]["first_failed_stage"] is None and doc["answer"]["passed"]
    assert doc["answer"]["headline"].startswith("Every GPU stage of Vast's self-test that hostcheck reproduces passed on 1 GPU")
    share = rules()["vram_share"].value
    vram = findings(doc, "vram")[0]
    assert vram["measured"] == round(int(24564 * 2**20 * share) // 4 * 4 / (24564 * 2**20), 3)
    assert findings(doc, "vram")[1]["measured"] == 0  # pattern errors
    link = findings(doc, "link")[0]
    assert link["status"] == "pass" and link["measured"] > rules()["pcie_bw_gbps"].value
    assert "PCIe gen 4 of 4, x16 of x16 (NVML)" in link["detail"]
    clocks = next(f for f in findings(doc, "load") if f["id"] == "SELF-1050")
    # the median of the last minute's readings over the maximum, the rule the verdict states
    readings = [2730, 2650, 2610, 2600][: doc["gpus"][0]["load"]["samples"]]
    readings += [2600] * (doc["gpus"][0]["load"]["samples"] - len(readings))
    assert clocks["measured"] == round(sorted(readings)[len(readings) // 2] / 3105, 2)
    assert "held back by the power limit (software power cap)" in clocks["detail"]
    assert status_of(doc, "SELF-1070") == ["skipped"]  # GeForce: no ECC counters
    assert status_of(doc, "SELF-1080") == ["pass"]
    assert doc["released"] and standins.live(libcuda) == {"device": 0, "host": 0, "modules": 0, "contexts": 0}
    minute = doc["gpus"][0]["load"]["per_minute"][0]
    assert minute["minute"] == 1 and minute["temperature_c"]["max"] >= minute["temperature_c"]["min"]


def test_a_laptop_at_its_power_cap_fails_at_the_load(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = RecordedNvml([standins.laptop_capped()])
    code, doc = run(libcuda, monkeypatch, "total_mib=16384;free_mib=16100", deps(libcuda, "laptop-3080ti-maxq-dedicated.json", nvml))
    assert code == EXIT_NOT_FEASIBLE
    assert doc["answer"]["first_failed_stage"] == "load"
    headline = doc["answer"]["headline"]
    assert "fail at the sustained load stage: GPU 0: SM clock held under load" in headline
    clocks = next(f for f in findings(doc, "load") if f["id"] == "SELF-1050")
    assert clocks["status"] == "warn" and clocks["severity"] == "risk"  # hostcheck's own threshold: a risk
    assert clocks["measured"] < rules()["clock_share"].value
    powers = sorted([44.1, 45.0, 44.9] + [44.9] * (doc["gpus"][0]["load"]["samples"] - 3))
    assert f"power {powers[len(powers) // 2]:g} W of its 45 W limit (the card's default is 125 W)" in clocks["detail"]
    assert "held back by the power limit (software power cap)" in clocks["detail"]
    assert standins.live(libcuda)["device"] == 0


def test_a_card_that_cannot_give_the_vram_share(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = RecordedNvml([standins.desktop_4090()])
    code, doc = run(libcuda, monkeypatch, "total_mib=24576;free_mib=20480;name=NVIDIA GeForce RTX 3090",
                    deps(libcuda, "rtx3090-vram-in-use.json", nvml))
    assert code == EXIT_NOT_FEASIBLE and doc["answer"]["first_failed_stage"] == "vram"
    vram = findings(doc, "vram")[0]
    assert vram["status"] == "warn"  # Vast's 95 % rests on a draft page: a risk
    assert vram["measured"] == round(20480 / 24576, 3)
    assert "CUDA_ERROR_OUT_OF_MEMORY (2)" in vram["detail"] and "20,480 MiB was free" in vram["detail"]
    assert "Close what holds GPU memory" in doc["answer"]["headline"]
    # the other stages still ran on the card
    assert status_of(doc, "SELF-1040") == ["pass"]
    assert standins.live(libcuda) == {"device": 0, "host": 0, "modules": 0, "contexts": 0}


def test_a_x1_riser_fails_at_the_link(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = RecordedNvml([standins.riser_3060()])
    code, doc = run(libcuda, monkeypatch, "total_mib=12288;free_mib=12100;name=NVIDIA GeForce RTX 3060;h2d_gbps=0.8;"
                    "d2h_gbps=0.85", deps(libcuda, "rtx3060-x1-riser.json", nvml))
    assert code == EXIT_NOT_FEASIBLE and doc["answer"]["first_failed_stage"] == "link"
    link = findings(doc, "link")[0]
    assert link["status"] == "fail" and link["severity"] == "blocker"
    assert 0.5 < link["measured"] <= 0.8  # the stand-in moves 0.8 GB/s; timing overhead only lowers it
    assert "PCIe gen 3 of 4, x1 of x16 (NVML)" in link["detail"]
    assert "needs > 2.85 GB/s" in doc["answer"]["headline"]
    assert "without an x1 riser" in doc["answer"]["headline"]
    assert standins.live(libcuda)["host"] == 0


def test_a_card_lost_mid_run(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = RecordedNvml([standins.lost_after(standins.desktop_4090(), 2)])
    code, doc = run(libcuda, monkeypatch, "total_mib=24564;free_mib=24180;lost_after=8;kernel_ms=40",
                    deps(libcuda, "dedicated-4090.json", nvml, kernel=[XID_79]))
    assert code == EXIT_NOT_FEASIBLE and doc["answer"]["first_failed_stage"] == "load"
    ran = next(f for f in findings(doc, "load") if f["id"] == "SELF-1090")
    assert ran["status"] == "fail" and ran["measured"] < ran["threshold"]
    assert "CUDA_ERROR_UNKNOWN (999)" in ran["detail"] or "fallen off the bus" in ran["detail"]
    xid = next(f for f in findings(doc, "load") if f["id"] == "SELF-1080")
    assert xid["status"] == "fail" and xid["measured"] == 1 and "Xid 79" in xid["detail"]
    assert "would likely fail at the sustained load stage" in doc["answer"]["headline"]
    assert "; the kernel logged Xid 79 (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS)." in doc["answer"]["headline"]
    assert standins.live(libcuda) == {"device": 0, "host": 0, "modules": 0, "contexts": 0}


def test_a_card_at_its_thermal_limit_is_stopped_under_it(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = RecordedNvml([standins.desktop_thermal()])
    code, doc = run(libcuda, monkeypatch, "total_mib=24576;free_mib=24300", deps(libcuda, "dedicated-4090.json", nvml))
    assert code == EXIT_NOT_FEASIBLE and doc["answer"]["first_failed_stage"] == "load"
    margin = int(rules()["temperature_margin_c"].value)
    assert doc["stopped"] == f"GPU 0 reached 90 °C, the stop temperature ({93 - margin} °C)"
    clocks = next(f for f in findings(doc, "load") if f["id"] == "SELF-1050")
    assert "heat (software thermal slowdown)" in clocks["detail"]
    assert standins.live(libcuda)["device"] == 0


def test_no_device_and_no_driver(libcuda: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    nvml = RecordedNvml([])
    code, doc = run(libcuda, monkeypatch, "fail=nodevice", deps(libcuda, "dedicated-4090.json", nvml))
    assert code == EXIT_NOT_FEASIBLE and "cuInit: CUDA_ERROR_NO_DEVICE (100)" in doc["error"]
    assert doc["answer"]["headline"].startswith("The self-test could not start on the GPU")
    missing = deps(tmp_path / "absent.so", "dedicated-4090.json", nvml)
    code, doc = run(tmp_path / "absent.so", monkeypatch, "", missing)
    assert code == EXIT_NOT_FEASIBLE and "cannot load" in doc["error"]


def test_an_uncorrectable_ecc_error_fails_the_vram_stage(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = standins.desktop_4090() | {"nvmlDeviceGetTotalEccErrors": 0}
    code, doc = run(libcuda, monkeypatch, "total_mib=81920;free_mib=81000;fail=ecc;name=NVIDIA A100",
                    deps(libcuda, "dedicated-4090.json", RecordedNvml([spec])))
    assert doc["answer"]["first_failed_stage"] == "vram"
    pattern = findings(doc, "vram")[1]
    assert pattern["status"] == "fail" and "CUDA_ERROR_ECC_UNCORRECTABLE (214)" in pattern["detail"]
    assert "not run: " in doc["gpus"][0]["errors"]["link"]  # the context is unusable after it
    assert standins.live(libcuda) == {"device": 0, "host": 0, "modules": 0, "contexts": 0}


def test_a_launch_timeout_stops_the_load(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The display watchdog kills a long kernel on a GPU that drives a screen (the load's kernels
    are the long ones): the load did not run to its end."""
    code, doc = run(libcuda, monkeypatch, "total_mib=24564;free_mib=24180;fail=timeout",
                    deps(libcuda, "dedicated-4090.json", RecordedNvml([standins.desktop_4090()])))
    assert code == EXIT_NOT_FEASIBLE and doc["answer"]["first_failed_stage"] == "load"
    ran = next(f for f in findings(doc, "load") if f["id"] == "SELF-1090")
    assert ran["status"] == "fail" and "CUDA_ERROR_LAUNCH_TIMEOUT (702)" in ran["detail"]
    assert standins.live(libcuda) == {"device": 0, "host": 0, "modules": 0, "contexts": 0}


def test_two_gpus_copy_peer_to_peer(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = RecordedNvml([standins.desktop_4090("00000000:01:00.0"), standins.desktop_4090("00000000:02:00.0")])
    code, doc = run(libcuda, monkeypatch, "gpus=2;total_mib=24564;free_mib=24180;p2p=0;h2d_gbps=24;d2h_gbps=25",
                    deps(libcuda, "tensordock-4x4090-server.json", nvml, find_library=lambda name: None))
    peers = findings(doc, "peers")
    assert [p["id"] for p in peers] == ["SELF-1100", "SELF-1110"] and peers[0]["status"] == "pass"
    assert peers[0]["detail"].startswith("GPU 0 to GPU 1: through host memory (no peer-to-peer access)")
    assert peers[1]["status"] == "skipped" and "libnccl.so.2) is not installed" in peers[1]["detail"]
    assert code == EXIT_OK, doc["answer"]
    assert standins.live(libcuda) == {"device": 0, "host": 0, "modules": 0, "contexts": 0}


def test_ctrl_c_releases_everything_and_exits_130(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = iter(range(1000))
    d = deps(libcuda, "dedicated-4090.json", RecordedNvml([standins.desktop_4090()]),
             interrupted=lambda: next(calls) >= 2)
    code, doc = run(libcuda, monkeypatch, "total_mib=24564;free_mib=24180", d)
    assert code == EXIT_INTERRUPTED and doc["stopped"] == "interrupted (Ctrl-C)"
    assert standins.live(libcuda) == {"device": 0, "host": 0, "modules": 0, "contexts": 0}


def test_the_terminal_answer_fits_80_columns(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HC_FAKE_CUDA", "total_mib=12288;free_mib=12100;h2d_gbps=0.8;d2h_gbps=0.85")
    code, text, _ = execute(Request(minutes=MINUTES, max_temp=None, yes=True, accept_owner_risk=False),
                            deps(libcuda, "rtx3060-x1-riser.json", RecordedNvml([standins.riser_3060()])),
                            "table")
    lines = text.splitlines()
    assert lines[0].startswith("Vast's self-test would likely fail at the host-device link stage:")
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert "  FAIL GPU 0: host-to-device bandwidth (pinned):" in text


def test_the_run_is_stored_beside_the_recorders_samples(libcuda: Path, monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    from hostcheck.commands.selftest import _store
    from hostcheck.recording.store import read_recording
    from tests.helpers import run_cli

    monkeypatch.setenv("HC_FAKE_CUDA", "total_mib=12288;free_mib=12100;h2d_gbps=0.8;d2h_gbps=0.85")
    _, _, event = execute(Request(minutes=MINUTES, max_temp=None, yes=True, accept_owner_risk=False),
                          deps(libcuda, "rtx3060-x1-riser.json", RecordedNvml([standins.riser_3060()])),
                          "json")
    assert event is not None
    import time

    from hostcheck.recording.store import Sample, WatchWriter

    db = tmp_path / "watch.db"
    now = time.time()
    with WatchWriter(db) as writer:  # a recording the recorder made: three samples a minute apart
        for i in range(3):
            writer.add_sample(Sample(t=now - 180 + 60 * i, mono=1000.0 + 60 * i, boottime=1000.0 + 60 * i,
                                     boot_id="b1", interval_s=60, net_ok=1, net_total=1, gpu_ok=True, detail={}))
    _store(db, event)
    stored = [e for e in read_recording(db).events if e.kind == "selftest"]
    assert len(stored) == 1 and stored[0].detail["first_failed_stage"] == "link"
    assert stored[0].detail["gpus"][0]["h2d_gbps"] == event["gpus"][0]["h2d_gbps"]
    report = run_cli("watch", "report", "--db", str(db))
    assert report.returncode in (0, 3), report.stderr  # the recorder's report reads past the event


def test_a_driver_call_that_never_returns_ends_the_run(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wedged GPU can leave a driver call blocked: past the run's longest time and a margin the
    watchdog ends the process (here: records what it would say; the stand-in's kernels take
    1.5 s each, the margin is cut to nothing and the longest time to 0.5 s)."""
    said: list[str] = []
    d = deps(libcuda, "dedicated-4090.json", RecordedNvml([standins.desktop_4090()]), on_hang=said.append,
             hang_margin_s=0.0)
    monkeypatch.setattr("hostcheck.selftest.stages.estimate_seconds", lambda gpus, minutes: (0.2, 0.5))
    run(libcuda, monkeypatch, "total_mib=24564;free_mib=24180;kernel_ms=1500", d)
    assert len(said) == 1 and said[0].startswith("a GPU driver call did not return within 0 s")
    assert "journalctl -k" in said[0]


@pytest.fixture(scope="module")
def libnccl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return standins.build_fake_library(tmp_path_factory.mktemp("libnccl"), "fake_libnccl.c", "libnccl-standin.so")


@pytest.mark.parametrize("fails", [False, True])
def test_nccl_runs_where_its_library_is(libcuda: Path, libnccl: Path, monkeypatch: pytest.MonkeyPatch,
                                        fails: bool) -> None:
    import ctypes

    monkeypatch.setenv("HC_FAKE_NCCL", "fail=system" if fails else "")
    nvml = RecordedNvml([standins.desktop_4090("00000000:01:00.0"), standins.desktop_4090("00000000:02:00.0")])
    code, doc = run(libcuda, monkeypatch, "gpus=2;total_mib=24564;free_mib=24180;h2d_gbps=24;d2h_gbps=25",
                    deps(libcuda, "tensordock-4x4090-server.json", nvml, find_library=lambda name: str(libnccl)))
    nccl = next(f for f in findings(doc, "peers") if f["id"] == "SELF-1110")
    if fails:
        assert nccl["status"] == "fail" and code == EXIT_NOT_FEASIBLE
        assert nccl["detail"] == ("NCCL 2.21.5: ncclGroupEnd: unhandled system error (run with NCCL_DEBUG=INFO for "
                                  "details) (2)")
        assert doc["answer"]["first_failed_stage"] == "peers"
    else:
        assert nccl["status"] == "pass" and code == EXIT_OK
        assert nccl["detail"].startswith("NCCL 2.21.5: ") and nccl["detail"].endswith(" GB/s bus bandwidth")
    assert ctypes.CDLL(str(libnccl)).hcfake_nccl_live() == 0
    assert standins.live(libcuda) == {"device": 0, "host": 0, "modules": 0, "contexts": 0}


def test_units_read_right_in_the_singular() -> None:
    from hostcheck.selftest.verdict import shown

    assert [shown(1, "lines"), shown(2, "lines"), shown(0, "failed copies"), shown(1, "failed copies")] == \
        ["1 line", "2 lines", "0 failed copies", "1 failed copy"]
    assert [shown(0.95, "of total"), shown(2.85, "GB/s"), shown(None, "GB/s")] == ["95%", "2.85 GB/s", "unknown"]


def test_without_nvml_the_load_runs_but_is_not_a_pass(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, doc = run(libcuda, monkeypatch, "total_mib=24564;free_mib=24180", deps(libcuda, "dedicated-4090.json", None))
    ran = next(f for f in findings(doc, "load") if f["id"] == "SELF-1090")
    assert ran["status"] == "pass" and ran["measured"] == round(MINUTES * 60)
    assert status_of(doc, "SELF-1050") == ["unknown"] and status_of(doc, "SELF-1060") == ["unknown"]
    assert code == EXIT_NOT_FEASIBLE and "load" in doc["answer"]["not_judged"]
    assert doc["answer"]["headline"].startswith("Nothing failed on 1 GPU, but sustained load could not be judged")
