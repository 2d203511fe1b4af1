"""Power sampling and the power figures: NVML through a stand-in (no GPU here), RAPL and battery
through sysfs trees laid out like the kernel's (Documentation/ABI powercap and power_supply),
and estimate_power's figures recomputed here from the rule written out in each test."""

from __future__ import annotations

import math
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pynvml as real_nvml
import pytest

from hostcheck.collectors.power_draw import (
    PowerReadings,
    Reading,
    battery_discharge,
    energy_delta_uj,
    rapl_packages,
    sample_power,
)
from hostcheck.facts import Unknown, load_snapshot
from hostcheck.measure.power_estimate import (
    CPU_IDLE_W,
    CPU_LOAD_W,
    PSU_EFFICIENCY,
    REST_OF_SYSTEM_W,
    PowerFigure,
    Provenance,
    estimate_power,
)
from tests.unprivileged import python_as_nobody

SNAPSHOTS = Path(__file__).parents[2] / "snapshots"


class FakeClock:
    """Time that moves only when the sampler sleeps, so a 5 s window takes no real time."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class PowerNvml:
    """NVML stand-in for the power queries: per GPU, the total-energy counter (mJ) as a function of
    the clock, and nvmlDeviceGetPowerUsage (mW). Errors are real pynvml error objects."""

    NVMLError = real_nvml.NVMLError

    def __init__(self, clock: FakeClock, gpus: list[dict[str, Any]], init_error: int | None = None) -> None:
        self.clock, self.gpus, self.init_error = clock, gpus, init_error
        self.shutdowns = 0

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise real_nvml.NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        spec = self.gpus[handle]
        if "energy_w" not in spec:
            raise real_nvml.NVMLError(real_nvml.NVML_ERROR_NOT_SUPPORTED)  # pre-Volta GPUs
        return int(spec["energy_base_mj"] + spec["energy_w"] * 1000 * (self.clock() - 1000.0))

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        spec = self.gpus[handle]
        if "power_mw" not in spec:
            raise real_nvml.NVMLError(real_nvml.NVML_ERROR_NOT_SUPPORTED)
        return int(spec["power_mw"])


def rapl_tree(root: Path, zones: dict[str, tuple[str, int, int]]) -> Path:
    """zones: 'intel-rapl:0' -> (name, energy_uj, max_energy_range_uj)."""
    for zone, (name, energy, top) in zones.items():
        (root / zone).mkdir(parents=True)
        (root / zone / "name").write_text(name + "\n")
        (root / zone / "energy_uj").write_text(f"{energy}\n")
        (root / zone / "max_energy_range_uj").write_text(f"{top}\n")
    return root


class AdvancingRapl:
    """Writes the next energy_uj value when the sampler sleeps (the kernel's counter moving on)."""

    def __init__(self, clock: FakeClock, files: dict[Path, list[int]]) -> None:
        self.clock, self.files = clock, files

    def sleep(self, seconds: float) -> None:
        self.clock.sleep(seconds)
        for path, values in self.files.items():
            if len(values) > 1:
                values.pop(0)
            path.write_text(f"{values[0]}\n")


def test_energy_counter_wraps_at_max_range() -> None:
    top = 262_143_328_850  # a real Intel package max_energy_range_uj
    assert energy_delta_uj(1_000, 5_000, top) == 4_000
    before, after = top - 2_000_000, 3_000_000
    assert energy_delta_uj(before, after, top) == (top - before) + after


def test_nvml_energy_counter_over_the_window(tmp_path: Path) -> None:
    clock = FakeClock()
    nvml = PowerNvml(clock, [{"energy_base_mj": 5_000_000, "energy_w": 21.5, "power_mw": 30_000}])
    readings = sample_power(5.0, nvml=nvml, powercap_root=tmp_path / "none", supply_root=tmp_path / "none",
                            clock=clock, sleep=clock.sleep)
    assert not isinstance(readings.gpus, Unknown)
    (gpu,) = readings.gpus
    # Energy counter: (mJ after - mJ before) / 1000 / seconds; the 30 W instantaneous reading is not used.
    assert gpu.watts == pytest.approx(21.5, abs=0.01)
    assert "total-energy counter over 5.0 s" in gpu.how
    assert nvml.shutdowns == 1


def test_nvml_without_energy_counter_averages_power_readings(tmp_path: Path) -> None:
    clock = FakeClock()
    nvml = PowerNvml(clock, [{"power_mw": 38_512}, {"power_mw": 9_000}])
    readings = sample_power(1.0, nvml=nvml, powercap_root=tmp_path / "none", supply_root=tmp_path / "none",
                            clock=clock, sleep=clock.sleep)
    assert not isinstance(readings.gpus, Unknown)
    assert [r.watts for r in readings.gpus] == [round(38_512 / 1000, 2), 9.0]  # mW -> W, to 0.01 W
    assert all("mean of" in r.how for r in readings.gpus)


def test_no_nvml_is_unknown_with_the_reason(tmp_path: Path) -> None:
    clock = FakeClock()
    nvml = PowerNvml(clock, [], init_error=real_nvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    readings = sample_power(2.0, nvml=nvml, powercap_root=tmp_path / "none", supply_root=tmp_path / "none",
                            clock=clock, sleep=clock.sleep)
    assert isinstance(readings.gpus, Unknown)
    assert "libnvidia-ml.so.1 not found" in readings.gpus.reason
    assert nvml.shutdowns == 0  # never shut down what did not start
    assert readings.seconds < 0.1  # nothing counts over time here: no window waited for


def test_rapl_package_over_the_window_with_wrap(tmp_path: Path) -> None:
    top = 65_532_610_987
    root = rapl_tree(tmp_path / "powercap", {
        "intel-rapl:0": ("package-0", top - 10_000_000, top),
        "intel-rapl:0:0": ("core", 5, top),  # a subzone: counted inside the package already
        "intel-rapl:1": ("psys", 7, top),  # platform zone: not the CPU package
    })  # fmt: skip
    clock = FakeClock()
    # 2 s later the counter has wrapped: 10 J to the top, then 14 J more.
    mover = AdvancingRapl(clock, {root / "intel-rapl:0" / "energy_uj": [top - 10_000_000, 14_000_000]})
    nvml = PowerNvml(clock, [], init_error=real_nvml.NVML_ERROR_DRIVER_NOT_LOADED)
    readings = sample_power(2.0, nvml=nvml, powercap_root=root, supply_root=tmp_path / "none",
                            clock=clock, sleep=mover.sleep)
    expected_w = (10_000_000 + 14_000_000) / 1e6 / 2.0
    assert readings.cpu_package.watts == pytest.approx(expected_w)
    assert "intel-rapl:0" in readings.cpu_package.how and "intel-rapl:1" not in readings.cpu_package.how


def test_rapl_two_sockets_add_up(tmp_path: Path) -> None:
    top = 262_143_328_850
    root = rapl_tree(tmp_path / "powercap", {
        "intel-rapl:0": ("package-0", 1_000_000, top), "intel-rapl:1": ("package-1", 2_000_000, top),
    })  # fmt: skip
    clock = FakeClock()
    mover = AdvancingRapl(clock, {
        root / "intel-rapl:0" / "energy_uj": [1_000_000, 41_000_000],
        root / "intel-rapl:1" / "energy_uj": [2_000_000, 62_000_000],
    })  # fmt: skip
    readings = sample_power(4.0, nvml=Unknown("no pynvml"), powercap_root=root, supply_root=tmp_path,
                            clock=clock, sleep=mover.sleep)
    assert readings.cpu_package.watts == pytest.approx((40 + 60) / 4.0)


def test_rapl_counter_above_its_range_is_unknown(tmp_path: Path) -> None:
    root = rapl_tree(tmp_path / "powercap", {"intel-rapl:0": ("package-0", 99, 50)})
    readings = sample_power(0.5, nvml=Unknown("no pynvml"), powercap_root=root, supply_root=tmp_path,
                            clock=(c := FakeClock()), sleep=c.sleep)
    assert isinstance(readings.cpu_package.watts, Unknown)
    assert "above its max_energy_range_uj" in readings.cpu_package.how


def test_no_powercap_is_unknown(tmp_path: Path) -> None:
    zones = rapl_packages(tmp_path / "missing")
    assert isinstance(zones, Unknown) and "VM, or a container" in zones.reason


UNREADABLE_PROBE = """
import sys
from pathlib import Path
from hostcheck.collectors.power_draw import sample_power
from hostcheck.facts import Unknown
r = sample_power(0.3, nvml=Unknown("none"), powercap_root=Path(sys.argv[1]), supply_root=Path(sys.argv[1]))
print(r.cpu_package.how)
"""


def test_rapl_energy_readable_by_root_only() -> None:
    """energy_uj is 0400 root since Linux 5.10: run the real read as an unprivileged user."""
    base = Path(tempfile.mkdtemp(prefix="hostcheck-rapl-"))
    try:
        os.chmod(base, 0o755)
        root = rapl_tree(base / "powercap", {"intel-rapl:0": ("package-0", 1234, 65_532_610_987)})
        for path in (base / "powercap", root / "intel-rapl:0"):
            os.chmod(path, 0o755)
        os.chmod(root / "intel-rapl:0" / "energy_uj", 0o400)
        os.chmod(root / "intel-rapl:0" / "name", 0o444)
        os.chmod(root / "intel-rapl:0" / "max_energy_range_uj", 0o444)
        out = python_as_nobody(UNREADABLE_PROBE, str(root), imports=("hostcheck.collectors.power_draw",))
        assert out.returncode == 0, out.stderr
        assert "readable by root only" in out.stdout and "CVE-2020-8694" in out.stdout
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=True)


def battery_tree(root: Path, name: str, attrs: dict[str, str]) -> Path:
    (root / name).mkdir(parents=True)
    for key, value in attrs.items():
        (root / name / key).write_text(value + "\n")
    return root


def test_battery_on_ac_is_not_a_reading(tmp_path: Path) -> None:
    root = battery_tree(tmp_path, "BAT0", {"type": "Battery", "status": "Charging", "power_now": "23000000"})
    battery_tree(tmp_path, "AC", {"type": "Mains", "online": "1"})
    reading = battery_discharge(root)
    assert isinstance(reading.watts, Unknown)
    assert "not on battery (BAT0 Charging)" in reading.how


def test_battery_discharging_power_now(tmp_path: Path) -> None:
    root = battery_tree(tmp_path, "BAT0", {"type": "Battery", "status": "Discharging", "power_now": "23456000"})
    reading = battery_discharge(root)
    assert reading.watts == round(23456000 / 1e6, 2)  # power_now is in µW; readings keep 0.01 W


def test_battery_discharging_current_times_voltage(tmp_path: Path) -> None:
    root = battery_tree(tmp_path, "BAT1", {"type": "Battery", "status": "Discharging",
                                           "current_now": "1800000", "voltage_now": "11400000"})
    reading = battery_discharge(root)
    assert reading.watts == round(1800000 * 11400000 / 1e12, 2)  # µA x µV
    assert "current_now x voltage_now" in reading.how


def test_battery_discharging_without_figures_is_unknown(tmp_path: Path) -> None:
    root = battery_tree(tmp_path, "BAT0", {"type": "Battery", "status": "Discharging"})
    assert isinstance(battery_discharge(root).watts, Unknown)


def test_sampling_window_is_bounded(tmp_path: Path) -> None:
    for bad in (0.0, -1.0, 61.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="sampling window"):
            sample_power(bad, nvml=Unknown("none"), powercap_root=tmp_path, supply_root=tmp_path)


# ----------------------------------------------------------------------------- the figures


def _reference_laptop() -> dict[str, Any]:
    facts = load_snapshot(SNAPSHOTS / "reference-laptop.json")
    assert isinstance(facts, dict)
    return facts


def test_reference_laptop_from_facts_only() -> None:
    facts = _reference_laptop()
    device = facts["gpu"]["devices"][0]
    est = estimate_power(facts)
    assert est.gpu_idle == PowerFigure(device["power_draw_w"], Provenance.MEASURED, est.gpu_idle.how)
    assert "not an idle average" in est.gpu_idle.how
    # Under load: the enforced cap (45 W of the 125 W default) is the upper bound.
    assert (est.gpu_load.watts, est.gpu_load.provenance) == (45.0, Provenance.ESTIMATED)
    assert est.cpu_package.provenance is Provenance.UNKNOWN and est.cpu_package.watts is None
    assert est.rest_of_system.provenance is Provenance.ESTIMATED
    # wall = (P_gpu + P_cpu + P_rest) / PSU efficiency, with the laptop assumptions.
    wall_idle = (device["power_draw_w"] + CPU_IDLE_W["laptop"] + REST_OF_SYSTEM_W["laptop"]) / PSU_EFFICIENCY["laptop"]
    wall_load = (45.0 + CPU_LOAD_W["laptop"] + REST_OF_SYSTEM_W["laptop"]) / PSU_EFFICIENCY["laptop"]
    assert est.wall_idle.watts == pytest.approx(wall_idle, abs=0.05)
    assert est.wall_load.watts == pytest.approx(wall_load, abs=0.05)
    assert est.wall_idle.provenance is Provenance.ESTIMATED and "assumed" in est.wall_idle.how


def test_given_wall_readings_win() -> None:
    est = estimate_power(_reference_laptop(), wall_idle_w=41.0, wall_load_w=96.5)
    assert (est.wall_idle.watts, est.wall_idle.provenance) == (41.0, Provenance.GIVEN)
    assert (est.wall_load.watts, est.wall_load.provenance) == (96.5, Provenance.GIVEN)


@pytest.mark.parametrize("bad", [0.0, -5.0, math.nan, math.inf, 1e9, True])
def test_bad_wall_reading_names_the_field(bad: float) -> None:
    with pytest.raises(ValueError, match="wall_idle_w"):
        estimate_power(_reference_laptop(), wall_idle_w=bad)


def test_multi_gpu_box_adds_its_gpus() -> None:
    facts = load_snapshot(SNAPSHOTS / "mixed-3090-1080ti.json")
    assert isinstance(facts, dict)
    devices = facts["gpu"]["devices"]
    est = estimate_power(facts)
    assert est.gpu_load.watts == pytest.approx(sum(d["power_limit_w"] for d in devices))
    assert est.gpu_idle.watts == pytest.approx(sum(d["power_draw_w"] for d in devices))


def test_no_nvidia_gpu_is_unknown_never_zero() -> None:
    facts = load_snapshot(SNAPSHOTS / "no-nvidia-desktop.json")
    assert isinstance(facts, dict)
    est = estimate_power(facts)
    for fig in (est.gpu_idle, est.gpu_load, est.wall_idle, est.wall_load):
        assert fig.watts is None and fig.provenance is Provenance.UNKNOWN
        assert "NVML" in fig.how
    # The owner's plug reading still gives the wall figure.
    assert estimate_power(facts, wall_idle_w=60.0).wall_idle.provenance is Provenance.GIVEN


def test_sampled_readings_are_measured() -> None:
    facts = _reference_laptop()
    readings = PowerReadings(
        seconds=5.0,
        gpus=[Reading(11.25, "NVML total-energy counter over 5.0 s (GPU 0)")],
        cpu_package=Reading(6.5, "RAPL package energy counter over 5.0 s (intel-rapl:0)"),
        battery=Reading(Unknown("not on battery"), "not on battery"),
    )
    est = estimate_power(facts, readings=readings)
    assert (est.gpu_idle.watts, est.gpu_idle.provenance) == (11.2, Provenance.MEASURED)  # 11.25 rounded to 0.1 W
    assert (est.cpu_package.watts, est.cpu_package.provenance) == (6.5, Provenance.MEASURED)
    wall_idle = (11.25 + 6.5 + REST_OF_SYSTEM_W["laptop"]) / PSU_EFFICIENCY["laptop"]
    # The sum uses the rounded GPU figure.
    assert est.wall_idle.watts == pytest.approx((11.2 + 6.5 + REST_OF_SYSTEM_W["laptop"]) / PSU_EFFICIENCY["laptop"], abs=0.05)
    assert est.wall_idle.watts is not None and abs(est.wall_idle.watts - wall_idle) < 0.1
    # Under load the CPU is the larger of the assumption and what was measured at idle.
    wall_load = (45.0 + max(CPU_LOAD_W["laptop"], 6.5) + REST_OF_SYSTEM_W["laptop"]) / PSU_EFFICIENCY["laptop"]
    assert est.wall_load.watts == pytest.approx(wall_load, abs=0.05)


def test_on_battery_the_discharge_gives_the_wall_idle() -> None:
    readings = PowerReadings(
        seconds=2.0, gpus=Unknown("no NVML: x"), cpu_package=Reading(Unknown("root only"), "root only"),
        battery=Reading(35.2, "battery discharge now (BAT0 power_now)"),
    )
    est = estimate_power(_reference_laptop(), readings=readings)
    assert est.wall_idle.provenance is Provenance.ESTIMATED
    assert est.wall_idle.watts == pytest.approx(35.2 / PSU_EFFICIENCY["laptop"], abs=0.05)
    assert est.cpu_package.provenance is Provenance.UNKNOWN and "root only" in est.cpu_package.how


def test_figure_invariant() -> None:
    with pytest.raises(ValueError):
        PowerFigure(None, Provenance.MEASURED, "x")
    with pytest.raises(ValueError):
        PowerFigure(3.0, Provenance.UNKNOWN, "x")


def test_an_idle_reading_above_the_estimated_load_raises_the_load_to_it() -> None:
    # The laptop's estimate under load is (45 + 15 + 8) / 0.88 W; a plug reading of 200 W idle is
    # used as given, and the draw under load is at least that reading.
    estimated_load = (45.0 + CPU_LOAD_W["laptop"] + REST_OF_SYSTEM_W["laptop"]) / PSU_EFFICIENCY["laptop"]
    assert estimated_load < 200
    est = estimate_power(_reference_laptop(), wall_idle_w=200.0)
    assert (est.wall_idle.watts, est.wall_idle.provenance) == (200.0, Provenance.GIVEN)
    assert (est.wall_load.watts, est.wall_load.provenance) == (200.0, Provenance.ESTIMATED)
    assert f"{round(estimated_load, 1):g} W" in est.wall_load.how and "--wall-load-w" in est.wall_load.how
    assert est.ordering is not None and "200 W" in est.ordering


def test_a_load_reading_below_the_estimated_idle_caps_the_idle_estimate() -> None:
    facts = _reference_laptop()
    device = facts["gpu"]["devices"][0]
    estimated_idle = (device["power_draw_w"] + CPU_IDLE_W["laptop"] + REST_OF_SYSTEM_W["laptop"]) / PSU_EFFICIENCY["laptop"]
    reading = math.floor(estimated_idle) - 1.0
    est = estimate_power(facts, wall_load_w=reading)
    assert (est.wall_load.watts, est.wall_load.provenance) == (reading, Provenance.GIVEN)
    assert (est.wall_idle.watts, est.wall_idle.provenance) == (reading, Provenance.ESTIMATED)
    assert est.ordering is not None and "at most" in est.ordering
    # Readings in order are left alone, and the ordering says nothing.
    assert estimate_power(facts).ordering is None


def test_two_readings_out_of_order_are_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="wall_idle_w: 300 W idle is more than 200 W under load"):
        estimate_power(_reference_laptop(), wall_idle_w=300.0, wall_load_w=200.0)
