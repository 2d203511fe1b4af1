"""Lane 2: the same rootfs as a full qemu VM under TCG (KVM guests hang on these machines).

It has a kernel of its own, so it covers what a container cannot: ``kernel.*`` sysctls,
modprobe and blacklists, fstab mounts of real block devices, nftables loaded at boot,
persistence across a power cycle. It is slow (~30 s to SSH, seconds per command), so the
suite boots it once and power-cycles it once.

The image (``vm-<rootfs key>-<recipe>/base.qcow2`` + kernel + initrd) is cached; each VM runs
on a fresh qcow2 overlay in the session folder. The session's SSH key and admin password
cannot be baked into a cached image, so they travel on the kernel command line and a oneshot
unit (``lab-provision.service``) installs them before sshd starts.
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tests.lab import timing
from tests.lab.errors import LabError
from tests.lab.remote import RemoteHost
from tests.lab.rootfs import Rootfs, cache_dir, cache_lock
from tests.lab.util import log, run, shadow_hash, wait_for

if TYPE_CHECKING:
    from tests.lab.session import Lab

VM_RECIPE = 2
"""Bump whenever :func:`_customize_vm` changes."""
DISK_SIZE = "6G"
ROOT_LABEL = "labroot"
NVME_DISK = "64M"
"""Size of the emulated NVMe drive (``/dev/nvme0n1``): only its SMART/health log is read."""

PROVISION_SCRIPT = r"""#!/bin/sh
# hostcheck lab (VM lane): install this test session's SSH key, admin password and sshd
# password setting, passed on the kernel command line (the image itself is shared and cached).
set -eu
key="" pw="" pwauth="no"
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        hostcheck.key=*) key=$(printf '%s' "${arg#hostcheck.key=}" | base64 -d) ;;
        hostcheck.pw=*) pw=$(printf '%s' "${arg#hostcheck.pw=}" | base64 -d) ;;
        hostcheck.pwauth=*) pwauth="${arg#hostcheck.pwauth=}" ;;
    esac
done
[ -n "$key" ] || exit 0
install -d -m 700 /root/.ssh
printf '%s\n' "$key" >/root/.ssh/authorized_keys
chmod 600 /root/.ssh/authorized_keys
install -d -m 700 -o admin -g admin /home/admin/.ssh
printf '%s\n' "$key" >/home/admin/.ssh/authorized_keys
chown admin:admin /home/admin/.ssh/authorized_keys
chmod 600 /home/admin/.ssh/authorized_keys
[ -z "$pw" ] || usermod -p "$pw" admin
printf '# hostcheck lab: key-only logins, as on a cloud server. Role drop-ins sort first and win.\nPasswordAuthentication %s\nKbdInteractiveAuthentication %s\n' "$pwauth" "$pwauth" >/etc/ssh/sshd_config.d/90-lab.conf
"""

PROVISION_UNIT = """[Unit]
Description=hostcheck lab: session SSH key and admin password from the kernel command line
ConditionKernelCommandLine=hostcheck.key
After=local-fs.target
Before=ssh.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/lab-provision

[Install]
WantedBy=multi-user.target
"""


@dataclass(frozen=True)
class VMImage:
    folder: Path
    origin: str
    seconds: float

    @property
    def qcow2(self) -> Path:
        return self.folder / "base.qcow2"

    @property
    def kernel(self) -> Path:
        return self.folder / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.folder / "initrd.img"


def ensure_vm_image(rootfs: Rootfs) -> VMImage:
    """The cached VM base image for ``rootfs`` (built in ~10 s from the extracted tree)."""
    key = f"{rootfs.key}-{VM_RECIPE}"
    folder = cache_dir() / f"vm-{key}"
    started = time.monotonic()
    with cache_lock(f"vm-{key}"):
        if (folder / ".complete").exists():
            image = VMImage(folder, "cached", time.monotonic() - started)
            timing.record_cache("vm image", "warm", image.seconds, key)
            return image
        partial = cache_dir() / f"vm-{key}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        root = partial / "root"
        run(["cp", "-a", "--reflink=auto", str(rootfs.base), str(root)], timeout=300)
        (root / ".complete").unlink(missing_ok=True)
        _customize_vm(root)
        raw = partial / "disk.raw"
        run(["mkfs.ext4", "-q", "-L", ROOT_LABEL, "-d", str(root), str(raw), DISK_SIZE], timeout=300)
        run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(partial / "base.qcow2")], timeout=300)
        shutil.copy2(rootfs.kernel, partial / "vmlinuz")
        shutil.copy2(rootfs.initrd, partial / "initrd.img")
        raw.unlink()
        shutil.rmtree(root)
        (partial / ".complete").write_text(key + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        partial.rename(folder)
    seconds = time.monotonic() - started
    log(f"vm image {key}: built in {seconds:.1f}s")
    timing.record_cache("vm image", "cold", seconds, key)
    return VMImage(folder, "built", seconds)


def _write(root: Path, rel: str, text: str, mode: int = 0o644) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    path.write_text(text)
    os.chmod(path, mode)


def _customize_vm(root: Path) -> None:
    _write(root, "etc/fstab", f"LABEL={ROOT_LABEL}\t/\text4\tdefaults,errors=remount-ro\t0\t1\n")
    _write(root, "etc/hostname", "labvm\n")
    _write(root, "etc/hosts", (root / "etc/hosts").read_text() + "127.0.1.1\tlabvm\n")
    _write(root, "etc/machine-id", uuid.uuid4().hex + "\n", 0o444)
    # qemu user networking answers DHCP; the nspawn lane configures its links from outside
    _write(root, "etc/systemd/network/20-lab-dhcp.network", "[Match]\nName=en* eth*\n\n[Network]\nDHCP=ipv4\n")
    _write(root, "usr/local/sbin/lab-provision", PROVISION_SCRIPT, 0o755)
    _write(root, "etc/systemd/system/lab-provision.service", PROVISION_UNIT)
    run(["systemctl", f"--root={root}", "enable", "systemd-networkd.service", "lab-provision.service"])
    # Reaping LVM snapshots (there are none) took 15 s of the single vCPU's boot under TCG.
    run(["systemctl", f"--root={root}", "mask", "e2scrub_reap.service"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LabVM(RemoteHost):
    """A qemu TCG VM from the lab rootfs, reachable on a 127.0.0.1 port forward."""

    lane = "vm"

    def __init__(self, lab: Lab, name: str, image: VMImage, *, memory_mib: int = 2048,
                 password_auth: bool = False, data_disk: str = "2G", boot_timeout: float = 720,
                 cpu: str = "qemu64") -> None:
        super().__init__(lab, name)
        self.image = image
        self.ip = "127.0.0.1"
        self.port = 0
        self.memory_mib = memory_mib
        self.password_auth = password_auth
        self.data_disk = data_disk
        """Size of a blank second disk (``/dev/vdb``) for fstab/mount/filesystem tests."""
        self.boot_timeout = boot_timeout
        self.cpu = cpu
        """qemu ``-cpu`` model. qemu64 rather than max: under TCG every extension the guest's
        libraries pick at run time (AVX2 string functions, say) is emulated instruction by
        instruction; measured on the 2-core machine, boot 28-37 s against 36-42 s, Python
        start-ups 5.1-5.2 s against 5.6-6.6 s, apt and dpkg 7.2-7.3 s against 8.8-10.6 s."""
        self.admin_password = secrets.token_urlsafe(12)
        self.workdir = lab.dir / name
        self.console_log = self.workdir / "console.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.boot_seconds: list[float] = []
        self.boot_state = ""

    def start(self) -> LabVM:
        self.workdir.mkdir(parents=True)
        run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(self.image.qcow2),
             str(self.workdir / "run.qcow2")])
        run(["qemu-img", "create", "-q", "-f", "qcow2", str(self.workdir / "data.qcow2"), self.data_disk])
        run(["qemu-img", "create", "-q", "-f", "qcow2", str(self.workdir / "nvme.qcow2"), NVME_DISK])
        self._boot()
        return self

    def _cmdline(self) -> str:
        key = base64.b64encode(self.lab.key.with_suffix(".pub").read_bytes().strip()).decode()
        pw = base64.b64encode(shadow_hash(self.admin_password).encode()).decode()
        pwauth = "yes" if self.password_auth else "no"
        return (f"root=/dev/vda rw console=ttyS0 quiet hostcheck.key={key} hostcheck.pw={pw} "
                f"hostcheck.pwauth={pwauth}")

    def _boot(self) -> None:
        started = time.monotonic()
        self.port = _free_port()
        self.incarnation = secrets.token_hex(3)
        self.lab._write_connection_files()
        argv = [
            "qemu-system-x86_64", "-name", f"{self.lab.prefix}-{self.name}",
            "-machine", "q35,accel=tcg", "-cpu", self.cpu, "-smp", "1", "-m", str(self.memory_mib),
            "-kernel", str(self.image.kernel), "-initrd", str(self.image.initrd), "-append", self._cmdline(),
            "-drive", f"file={self.workdir / 'run.qcow2'},if=virtio,cache=unsafe,format=qcow2",
            "-drive", f"file={self.workdir / 'data.qcow2'},if=virtio,cache=unsafe,format=qcow2",
            # an emulated NVMe drive: qemu answers its SMART/health log, read by the real smartctl
            "-drive", f"file={self.workdir / 'nvme.qcow2'},if=none,id=nvm0,cache=unsafe,format=qcow2",
            "-device", "nvme,serial=hostcheck-lab,drive=nvm0",
            "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{self.port}-:22",
            "-device", "virtio-net-pci,netdev=n0", "-device", "virtio-rng-pci",
            "-display", "none", "-vga", "none", "-monitor", "none",
            "-serial", f"file:{self.console_log}",
        ]
        # own session: a terminal's ^C is for pytest, which then stops the VM itself
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=open(self.workdir / "qemu.log", "ab"),
                                        stderr=subprocess.STDOUT, start_new_session=True)
        self.lab.record_pid(f"{self.name}-qemu", self.process.pid)
        try:
            deadline = self.boot_timeout
            self.wait_ssh(deadline)
            self.boot_state = self.wait_booted(deadline)
        except BaseException:
            self._kill_qemu()
            raise
        self.boot_seconds.append(time.monotonic() - started)
        timing.record("boot", f"vm {self.name}", self.boot_seconds[-1])
        log(f"{self.name} booted in {self.boot_seconds[-1]:.1f}s ({self.boot_state})")

    def wait_ssh(self, timeout: float) -> float:
        def probe() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise LabError(f"{self.name}: qemu exited ({self.process.returncode})\n{self.diagnostics()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
                    sock.settimeout(3)
                    return sock.recv(8).startswith(b"SSH-")
            except OSError:
                return False

        # the forward accepts at once and drops while the guest boots: wait for sshd's banner
        started = time.monotonic()
        wait_for(f"{self.name} sshd banner", probe, timeout, 1.0)
        return super().wait_ssh(max(10.0, timeout - (time.monotonic() - started)))

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise LabError(f"{self.name}: qemu exited ({self.process.returncode})\n{self.diagnostics()}")

    def power_cycle(self, timeout: float = 300) -> float:
        """``systemctl poweroff`` inside, wait for qemu to exit, cold boot on the same disks.
        Returns the boot seconds. (A cold boot is faster and steadier than a reboot under TCG.)"""
        self.sudo("systemctl poweroff", timeout=30)
        proc = self.process
        assert proc is not None
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            self._kill_qemu()
            raise LabError(f"{self.name}: no poweroff within {timeout}s\n{self.diagnostics()}") from exc
        self.close_ssh_masters()
        self._boot()
        return self.boot_seconds[-1]

    def outside(self, argv: list[str], *, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """The VM is reached through this machine's loopback, so outside is here."""
        return run(argv, timeout=timeout, check=False)

    def tcp_from_outside(self, port: int, timeout: float = 2.0) -> str:
        """Only the SSH port is forwarded to the VM; other ports are not reachable from outside."""
        if port != 22:
            raise LabError(f"{self.name}: only port 22 is forwarded from this machine (qemu user networking)")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout).close()
            return "open"
        except ConnectionRefusedError:
            return "refused"
        except TimeoutError:
            return "timeout"
        except OSError:
            return "unreachable"

    def diagnostics(self) -> str:
        try:
            tail = self.console_log.read_text(errors="replace").splitlines()[-25:]
        except OSError:
            tail = []
        return f"--- {self.name} serial console (last lines) ---\n" + "\n".join(tail)

    def _kill_qemu(self) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)  # qemu exits at once; the overlay is thrown away anyway
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def stop(self) -> None:
        try:
            self.close_ssh_masters()
        except (OSError, subprocess.SubprocessError):
            pass
        self._kill_qemu()
        shutil.rmtree(self.workdir, ignore_errors=True)
