"""bench/gpu_truth.py compares hostcheck's GPU facts with `nvidia-smi -q -x`; no GPU runs on CI,
so its parser and comparison are pinned on an XML in nvidia-smi's own layout (the element names
of nvidia-smi 535+: gpu_power_readings, clocks_event_reasons) holding the reference laptop's values."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

from tests.helpers import REPO, SNAPSHOTS

_SPEC = importlib.util.spec_from_file_location("gpu_truth", REPO / "bench" / "gpu_truth.py")
assert _SPEC and _SPEC.loader
gpu_truth = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(gpu_truth)

LAPTOP_XML = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
  <driver_version>595.58.03</driver_version>
  <cuda_version>13.2</cuda_version>
  <attached_gpus>1</attached_gpus>
  <gpu id="00000000:01:00.0">
    <product_name>NVIDIA GeForce RTX 3080 Ti Laptop GPU</product_name>
    <product_brand>GeForce</product_brand>
    <product_architecture>Ampere</product_architecture>
    <display_mode>Enabled</display_mode>
    <display_active>Enabled</display_active>
    <persistence_mode>Disabled</persistence_mode>
    <mig_mode><current_mig>N/A</current_mig><pending_mig>N/A</pending_mig></mig_mode>
    <serial>N/A</serial>
    <uuid>GPU-3f2a9c41-7d1e-4b8a-9c55-0e6d2b7a1f90</uuid>
    <pci>
      <pci_bus_id>00000000:01:00.0</pci_bus_id>
      <pci_gpu_link_info>
        <pcie_gen><max_link_gen>4</max_link_gen><current_link_gen>1</current_link_gen></pcie_gen>
        <link_widths><max_link_width>16x</max_link_width><current_link_width>16x</current_link_width></link_widths>
      </pci_gpu_link_info>
    </pci>
    <clocks_event_reasons>
      <clocks_event_reason_gpu_idle>Active</clocks_event_reason_gpu_idle>
      <clocks_event_reason_sw_power_cap>Active</clocks_event_reason_sw_power_cap>
      <clocks_event_reason_hw_slowdown>Not Active</clocks_event_reason_hw_slowdown>
    </clocks_event_reasons>
    <fb_memory_usage><total>16384 MiB</total><reserved>215 MiB</reserved><used>820 MiB</used><free>15349 MiB</free></fb_memory_usage>
    <ecc_mode><current_ecc>N/A</current_ecc><pending_ecc>N/A</pending_ecc></ecc_mode>
    <temperature><gpu_temp>53 C</gpu_temp><gpu_temp_slow_threshold>93 C</gpu_temp_slow_threshold></temperature>
    <gpu_power_readings>
      <power_state>P8</power_state>
      <instant_power_draw>15.10 W</instant_power_draw>
      <current_power_limit>45.00 W</current_power_limit>
      <default_power_limit>125.00 W</default_power_limit>
      <min_power_limit>35.00 W</min_power_limit>
      <max_power_limit>150.00 W</max_power_limit>
    </gpu_power_readings>
  </gpu>
</nvidia_smi_log>
"""


def laptop_facts() -> dict:
    return json.loads((SNAPSHOTS / "reference-laptop.json").read_text())


def test_agreeing_outputs_give_no_difference() -> None:
    smi = gpu_truth.parse_smi_xml(LAPTOP_XML)
    assert smi["gpus"]["00000000:01:00.0"]["architecture"] == "Ampere"
    assert gpu_truth.compare(laptop_facts(), smi, {"00000000:01:00.0": "8.6"}) == []


def test_each_difference_is_one_line() -> None:
    xml = LAPTOP_XML.replace("<current_power_limit>45.00 W", "<current_power_limit>80.00 W").replace(
        "<persistence_mode>Disabled", "<persistence_mode>Enabled")
    lines = gpu_truth.compare(laptop_facts(), gpu_truth.parse_smi_xml(xml), {"00000000:01:00.0": "8.9"})
    assert lines == [
        "GPU 0 (00000000:01:00.0) power_limit_w: hostcheck 45.0, nvidia-smi 80.0",
        "GPU 0 (00000000:01:00.0) persistence_mode: hostcheck False, nvidia-smi True",
        "GPU 0 (00000000:01:00.0) compute_capability: hostcheck '8.6', nvidia-smi '8.9'",
    ]


def test_missing_gpu_and_no_nvml_are_reported() -> None:
    none = json.loads((SNAPSHOTS / "no-nvidia-desktop.json").read_text())
    lines = gpu_truth.compare(none, gpu_truth.parse_smi_xml(LAPTOP_XML))
    assert lines[-1].startswith("gpu.devices: hostcheck has none")


def test_cli_on_saved_outputs(tmp_path) -> None:
    xml = tmp_path / "smi.xml"
    xml.write_text(LAPTOP_XML)
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "gpu_truth.py"), "--facts",
                           str(SNAPSHOTS / "reference-laptop.json"), "--xml", str(xml)],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert (proc.returncode, proc.stdout.strip()) == (0, "gpu_truth: 1 GPU(s), 0 difference(s)"), proc.stderr
    bad = subprocess.run([sys.executable, str(REPO / "bench" / "gpu_truth.py"), "--facts",
                          str(SNAPSHOTS / "reference-laptop.json"), "--xml", str(tmp_path / "none.xml")],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert bad.returncode == 2 and "nothing to compare" in bad.stderr
