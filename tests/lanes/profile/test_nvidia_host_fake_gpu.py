"""nvidia_host's GPU path, on a lab host that has no GPU (none exists on these machines).

The PCI detection is overridden with an extra var (extra vars beat the role's set_fact), and a
stand-in `nvidia-smi` answers the two queries the role makes (each card's power-limit range,
and setting a limit), recording what it was asked. A stand-in nvidia-persistenced.service is a
plain long-running unit. What this proves: the range check, the boot-time power-limit unit,
persistenced handling, idempotence and rollback. What it cannot: that a real driver accepts
the limit (the audit's GPU checks use recorded NVML snapshots for that)."""

from __future__ import annotations

import pytest

from tests.lanes.profile import play

pytestmark = [pytest.mark.nspawn, pytest.mark.ansible, pytest.mark.root]

FAKE_SMI = r"""#!/bin/sh
# stand-in for nvidia-smi (tests only): one card, power limits 100-150 W
case "$*" in
  *--query-gpu=index,power.min_limit,power.max_limit*) echo "0, 100.00, 150.00" ;;
  *--power-limit=*) echo "$*" >> /var/log/fake-nvidia-smi.log ;;
  *) echo "fake nvidia-smi: $*" >&2; exit 1 ;;
esac
"""
FAKE_PERSISTENCED = """[Unit]
Description=stand-in for nvidia-persistenced (tests only)
[Service]
ExecStart=/bin/sleep infinity
[Install]
WantedBy=multi-user.target
"""
GPU = {"nvidia_host_gpus": ["0x10de 0x030000 0000:01:00.0"]}
IDLE = ("/var/lib/systemd/timers", "/var/lib/systemd/random-seed")


def test_power_limit_persistenced_holds_and_rollback(lab_host, tmp_path) -> None:
    host = lab_host
    host.sudo(f"cat > /usr/local/bin/nvidia-smi <<'EOF'\n{FAKE_SMI}EOF\nchmod 755 /usr/local/bin/nvidia-smi && "
              f"cat > /etc/systemd/system/nvidia-persistenced.service <<'EOF'\n{FAKE_PERSISTENCED}EOF\n"
              "systemctl daemon-reload", check=True)
    before = play.snapshot(host)
    nvidia = play.write_playbook(tmp_path, "nvidia.yml", ["nvidia_host"])

    too_high = play.run_playbook(host.inventory_path, nvidia, extra_vars={**GPU, "nvidia_host_power_limit_w": 200})
    assert too_high.rc != 0
    assert "is outside GPU 0's range 100.00-150.00 W" in " ".join(too_high.output.split()), too_high.tail()
    assert not host.sudo("test -e /etc/systemd/system/hostcheck-nvidia-power-limit.service").ok

    first = play.run_playbook(host.inventory_path, nvidia, extra_vars={**GPU, "nvidia_host_power_limit_w": 120})
    assert first.rc == 0, first.describe()
    assert host.sudo("systemctl is-active hostcheck-nvidia-power-limit.service").stdout.strip() == "active"
    assert host.sudo("systemctl is-enabled hostcheck-nvidia-power-limit.service").stdout.strip() == "enabled"
    assert host.sudo("cat /var/log/fake-nvidia-smi.log").stdout.split() == ["--power-limit=120"]
    assert host.sudo("systemctl is-active nvidia-persistenced").stdout.strip() == "active"
    rerun = play.run_playbook(host.inventory_path, nvidia, extra_vars={**GPU, "nvidia_host_power_limit_w": 120})
    assert rerun.rc == 0 and rerun.stats(host.name)["changed"] == 0, rerun.changed_tasks

    rollback = play.run_playbook(host.inventory_path, "rollback.yml")
    assert rollback.rc == 0, rollback.describe()
    after = play.snapshot(host)
    assert play.file_diff(before, after, ignore=IDLE + ("/var/log",)) == {}
    for unit in ("nvidia-persistenced.service", "hostcheck-nvidia-power-limit.service"):
        assert after.units.get(unit) == before.units.get(unit), unit


def test_without_a_gpu_the_role_says_so_and_does_nothing(lab_host, tmp_path) -> None:
    before = play.snapshot(lab_host)
    result = play.run_playbook(lab_host.inventory_path, play.write_playbook(tmp_path, "nvidia.yml", ["nvidia_host"]))
    assert result.rc == 0 and result.stats(lab_host.name)["changed"] == 0, result.describe()
    assert "no NVIDIA GPU on the PCI bus" in " ".join(result.output.split())
    assert play.file_diff(before, play.snapshot(lab_host), ignore=IDLE) == {}
