"""The /proc, sysfs, lsblk and NVML-value parsers never raise on arbitrary input: they return
partial results or an Unknown, since a collector that crashes loses the whole section."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostcheck.collectors import docker_config, gpu, power, storage, system
from hostcheck.facts import Unknown
from hostcheck.knowledge.laptop import laptop_verdict

# Text that looks like the files it stands in for, mixed with anything at all.
PROC_ALPHABET = st.sampled_from(list("0123456789abcdefx:/ \t\n-=\"'\\#.,_[]{}") + ["processor", "flags", "avx",
                                 "physical id", "core id", "model name", "MemTotal", " kB", "ID", "VERSION_ID",
                                 " - ", "\\040", "Filename", "partition", "file", "hypervisor", "Features"])  # fmt: skip
proc_text = st.one_of(st.text(), st.lists(PROC_ALPHABET, max_size=80).map("".join))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=40,
)
lsblk_keys = st.sampled_from(
    ["name", "type", "rota", "pkname", "maj:min", "children", "fstype", "mountpoint"]
)
lsblk_device = st.recursive(
    st.dictionaries(lsblk_keys, json_values, max_size=6),
    lambda inner: st.dictionaries(lsblk_keys, json_values | st.lists(inner, max_size=4), max_size=7),
    max_leaves=30,
)
lsblk_text = st.one_of(
    st.text(),
    json_values.map(json.dumps),
    st.lists(lsblk_device, max_size=6).map(lambda devs: json.dumps({"blockdevices": devs})),
    st.lists(  # plausible names so that pkname chains (and cycles) really form
        st.fixed_dictionaries(
            {
                "name": st.sampled_from(["sda", "sda1", "md0", "crypt0", "vg-root"]),
                "type": st.sampled_from(["disk", "part", "raid1", "crypt", "lvm", ""]),
                "pkname": st.sampled_from([None, "sda", "sda1", "md0", "crypt0", "vg-root"]),
                "rota": json_values,
            }
        ),
        max_size=8,
    ).map(lambda devs: json.dumps({"blockdevices": devs})),
)


def _is(value: Any, *types: type) -> bool:
    return isinstance(value, (Unknown, *types))


@given(proc_text)
def test_parse_cpuinfo_never_raises(text: str) -> None:
    cpu = system.parse_cpuinfo(text)
    assert set(cpu) == {"cpu_model", "cpu_avx", "cpu_logical_cores", "cpu_physical_cores", "hypervisor", "cpu_virt_ext"}
    assert _is(cpu["cpu_model"], str) and _is(cpu["cpu_avx"], bool) and _is(cpu["hypervisor"], bool)
    assert _is(cpu["cpu_logical_cores"], int) and _is(cpu["cpu_physical_cores"], int)


@given(proc_text)
def test_parse_meminfo_never_raises(text: str) -> None:
    info = system.parse_meminfo(text)
    assert all(isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in info.items())
    assert _is(system.ram_total_mib(info), int)


@given(proc_text)
def test_parse_os_release_never_raises(text: str) -> None:
    release = system.parse_os_release(text)
    assert all(isinstance(k, str) and k.isidentifier() and isinstance(v, str) for k, v in release.items())


@given(proc_text)
def test_parse_uptime_never_raises(text: str) -> None:
    value = system.parse_uptime(text)
    assert isinstance(value, Unknown) or (isinstance(value, float) and 0 <= value < float("inf"))


@given(st.binary(max_size=16))
def test_parse_secure_boot_var_never_raises(data: bytes) -> None:
    assert _is(system.parse_secure_boot_var(data), bool)


@given(proc_text, st.one_of(st.just(True), st.just(False), st.just(Unknown("no flags"))), proc_text)
def test_detect_virtualization_never_raises(output: str, flag: Any, container: str) -> None:
    assert _is(system.detect_virtualization(output, flag, container, []), str)


@given(proc_text)
def test_parse_chassis_type_never_raises(text: str) -> None:
    code = power.parse_chassis_type(text)
    assert isinstance(code, Unknown) or (isinstance(code, int) and power.chassis_kind(code) in
                                        ("laptop", "desktop", "server", "other"))  # fmt: skip


supply_attrs = st.dictionaries(
    st.sampled_from(["type", "online", "capacity", "status", "scope", "present"]),
    st.one_of(
        st.sampled_from(["Battery", "Mains", "USB", "Device", "System", "0", "1", "87", "Discharging"]),
        st.text(),
    ),
)


@given(st.dictionaries(st.text(max_size=12), supply_attrs, max_size=5))
def test_parse_power_supply_never_raises(supplies: dict[str, dict[str, str]]) -> None:
    facts = power.parse_power_supply(supplies)
    assert isinstance(facts["battery_present"], bool) and _is(facts["on_ac"], bool)
    assert facts["battery_present"] == bool(facts["batteries"])
    for battery in facts["batteries"]:
        assert _is(battery["capacity_pct"], int) and _is(battery["status"], str)


@given(proc_text)
def test_parse_is_enabled_never_raises(text: str) -> None:
    states = power.parse_is_enabled(text, power.SLEEP_TARGETS)
    assert states is None or set(states) == set(power.SLEEP_TARGETS)


@given(proc_text)
def test_parse_mountinfo_never_raises(text: str) -> None:
    mounts = storage.parse_mountinfo(text)
    for mount in mounts:
        assert all(isinstance(mount[k], str) for k in ("maj_min", "root", "mountpoint", "fstype", "source"))
        storage.is_storage_mount(mount)
    if mounts:
        storage.containing_mount("/var/lib/docker", mounts)
        storage.swap_facts([{"filename": "/dev/zram0", "type": "partition"}], mounts, {})


@given(proc_text)
def test_parse_swaps_never_raises(text: str) -> None:
    assert all(set(s) == {"filename", "type"} for s in storage.parse_swaps(text))


@given(lsblk_text)
def test_parse_lsblk_json_never_raises(text: str) -> None:
    index = storage.parse_lsblk_json(text)
    if not isinstance(index, Unknown):
        for info in index.values():
            assert isinstance(info["encrypted"], bool) and _is(info["rotational"], bool)


@given(json_values)
def test_daemon_json_data_root_never_raises(value: Any) -> None:
    config = docker_config.filter_daemon_json(value) if isinstance(value, dict) else {}
    assert _is(docker_config.effective_data_root(config, False, {}), str)


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_decode_throttle_reasons_covers_every_bit(mask: int) -> None:
    names = gpu.decode_throttle_reasons(mask)
    assert len(names) == bin(mask).count("1")


@given(st.text())
def test_pci_text_helpers_never_raise(text: str) -> None:
    assert isinstance(gpu.is_display_class(text), bool)
    assert gpu.vendor_name(text) in ("nvidia", "amd", "intel", "other")
    verdict, evidence = laptop_verdict(text, ("desktop", 3))
    assert isinstance(verdict, bool) and isinstance(evidence, str)


sysfs_value = st.one_of(
    st.text(max_size=20), st.sampled_from(["0x030000", "0x10de", "1", "0", "CRYPT-LUKS2-x", "8:1"])
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(st.sampled_from(["class", "vendor", "device"]), sysfs_value),
    st.dictionaries(st.sampled_from(["dev", "dm/uuid", "queue/rotational", "partition"]), sysfs_value),
    st.binary(max_size=8),
)
def test_sysfs_tree_readers_never_raise(pci: dict[str, str], block: dict[str, str], secure: bytes) -> None:
    """Real files with arbitrary contents under the sysfs readers."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for base, files in (("pci/0000:01:00.0", pci), ("block/sda1", block)):
            (root / base).mkdir(parents=True)
            for name, value in files.items():
                path = root / base / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(value, encoding="utf-8")
        os.makedirs(root / "fw/efi/efivars")
        (root / "fw/efi/efivars" / system.SECURE_BOOT_VAR).write_bytes(secure)
        adapters = gpu.scan_display_adapters(root / "pci")
        assert isinstance(adapters, list) and all(a["vendor"] in ("nvidia", "amd", "intel", "other") or
                                                  isinstance(a["vendor"], Unknown) for a in adapters)  # fmt: skip
        index = storage.sysfs_block_index(root / "block")
        assert not isinstance(index, Unknown) and set(index) <= {"sda1"}
        assert _is(system.read_secure_boot(root / "fw"), bool)
