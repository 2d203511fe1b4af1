"""Kernel-level settings on the qemu VM lane, and that they survive a power cycle.

A container shares this machine's kernel, so everything here needs the VM: ``kernel.*``
sysctls, module blacklists, fstab mounts of a real block device, nftables loaded at boot.
Configuration is written over SSH the way a role would write it, the VM is powered off and
cold-booted once (TCG boots take ~30 s, so the whole module shares that one cycle), and every
row is then checked on the fresh boot.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

pytestmark = [pytest.mark.vm, pytest.mark.root]

BLACKLISTED_MODULE = "dccp"  # present in Debian's cloud kernel; a classic CIS blacklist entry
NFT_CONF = """#!/usr/sbin/nft -f
flush ruleset
table inet labboot {
    chain input {
        type filter hook input priority 0; policy accept;
        tcp dport 9999 drop
    }
}
"""


@dataclass
class Cycle:
    vm: object
    kptr_target: str
    boot_id_before: str
    boot_seconds: float


@pytest.fixture(scope="module")
def cycled_vm(lab_vm) -> Cycle:
    """Write every persistent setting, then power-cycle the VM once."""
    vm = lab_vm
    current = vm.sudo("sysctl -n kernel.kptr_restrict", check=True).stdout.strip()
    target = "2" if current != "2" else "1"
    assert vm.sudo(f"modinfo -n {BLACKLISTED_MODULE}").ok, "module must exist, or the blacklist test proves nothing"
    script = f"""set -e
printf 'kernel.kptr_restrict = {target}\\n' > /etc/sysctl.d/90-lab.conf
printf 'blacklist {BLACKLISTED_MODULE}\\ninstall {BLACKLISTED_MODULE} /bin/false\\n' > /etc/modprobe.d/90-lab-blacklist.conf
mkfs.xfs -q -f -L labdata /dev/vdb
mkdir -p /srv/labdata
printf 'LABEL=labdata /srv/labdata xfs defaults,pquota 0 2\\n' >> /etc/fstab
cat > /etc/nftables.conf <<'NFT'
{NFT_CONF}NFT
systemctl enable --quiet nftables.service
sync
"""
    vm.sudo(script, check=True, timeout=120)
    boot_id = vm.run("cat /proc/sys/kernel/random/boot_id", check=True).stdout.strip()
    seconds = vm.power_cycle()
    return Cycle(vm, target, boot_id, seconds)


def test_kernel_sysctl_writable_in_vm(lab_vm):
    """The VM has its own kernel: kernel.* hardening (kptr_restrict, dmesg_restrict,
    unprivileged_bpf_disabled...) can only be tested here, never in a container."""
    current = lab_vm.sudo("sysctl -n kernel.dmesg_restrict", check=True).stdout.strip()
    other = "0" if current == "1" else "1"
    try:
        lab_vm.sudo(f"sysctl -w kernel.dmesg_restrict={other}", check=True)
        assert lab_vm.sudo("sysctl -n kernel.dmesg_restrict", check=True).stdout.strip() == other
    finally:
        lab_vm.sudo(f"sysctl -w kernel.dmesg_restrict={current}", check=True)


def test_power_cycle_was_real(cycled_vm):
    """Persistence is only shown by a cold boot: a new kernel boot id."""
    after = cycled_vm.vm.run("cat /proc/sys/kernel/random/boot_id", check=True).stdout.strip()
    assert after != cycled_vm.boot_id_before


def test_sysctl_persisted(cycled_vm):
    """A hardening sysctl set only at runtime is gone after the next reboot."""
    value = cycled_vm.vm.sudo("sysctl -n kernel.kptr_restrict", check=True).stdout.strip()
    assert value == cycled_vm.kptr_target


def test_module_blacklist_effective(cycled_vm):
    """``blacklist`` alone only stops auto-loading; ``install ... /bin/false`` stops an
    explicit modprobe too (what CIS-style blacklists rely on)."""
    vm = cycled_vm.vm
    assert BLACKLISTED_MODULE not in vm.run("cat /proc/modules", check=True).stdout.split()
    dry = vm.sudo(f"modprobe -n -v {BLACKLISTED_MODULE}").stdout
    assert "install /bin/false" in dry
    assert not vm.sudo(f"modprobe {BLACKLISTED_MODULE}").ok
    assert BLACKLISTED_MODULE not in vm.run("cat /proc/modules", check=True).stdout.split()


def test_fstab_mount_with_project_quota(cycled_vm):
    """Docker's data-root on XFS with project quotas is how container disk use gets capped;
    the mount and its options must come back from fstab at boot."""
    mount = cycled_vm.vm.testinfra().mount_point("/srv/labdata")
    assert mount.exists
    assert mount.filesystem == "xfs"
    assert mount.device == "/dev/vdb"
    assert "prjquota" in mount.options


def test_nftables_loaded_at_boot(cycled_vm):
    """A firewall that is only loaded by hand is open after every reboot."""
    vm = cycled_vm.vm
    assert vm.testinfra().service("nftables").is_enabled
    ruleset = vm.sudo("nft list ruleset", check=True).stdout
    assert "table inet labboot" in ruleset
    assert "tcp dport 9999 drop" in ruleset


@pytest.mark.parametrize("user", ["admin", "root"])
def test_vm_key_login(lab_vm, user):
    """The session key (delivered on the kernel command line) reaches admin and root."""
    assert lab_vm.run("id -un", user=user, check=True).stdout.strip() == user


def test_vm_password_login_refused(lab_vm):
    """Same starting point as the nspawn hosts: passwords refused, even the right one."""
    result = lab_vm.password_login(lab_vm.admin_password)
    assert result.rc == 255 and "Permission denied" in result.stderr, result


def test_vm_is_a_vm(lab_vm):
    """Facts and tests branch on virtualization: this lane must not look like a container."""
    assert lab_vm.run("systemd-detect-virt").stdout.strip() in ("qemu", "kvm")
