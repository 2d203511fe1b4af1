"""What every lab machine offers a test: SSH commands, file copies, testinfra, Ansible inventory.

:class:`RemoteHost` is shared by nspawn hosts and the qemu VM, so a test written against
one runs against the other.
"""

from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.lab.errors import LabError
from tests.lab.util import log

if TYPE_CHECKING:
    from tests.lab.session import Lab

ADMIN = "admin"


@dataclass(frozen=True)
class Result:
    """One command's outcome on a lab host (``rc`` 255 = SSH itself failed)."""

    command: str
    user: str
    rc: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def check(self) -> Result:
        """Raise :class:`LabError` with the full output unless rc is 0; returns self."""
        if self.rc != 0:
            raise LabError(
                f"rc {self.rc} for {self.user}: {self.command}\n--- stdout ---\n{self.stdout}"
                f"--- stderr ---\n{self.stderr}".rstrip()
            )
        return self


class RemoteHost:
    """A started lab machine reachable over SSH as ``admin`` (sudo NOPASSWD) and ``root``."""

    lane = "?"

    def __init__(self, lab: Lab, name: str) -> None:
        self.lab = lab
        self.name = name
        """SSH alias and inventory name (``lab3``, ``labvm``); also the hostname inside."""
        self.ip = ""
        self.port = 22
        self.admin_password = ""
        """admin's real password (random per host): lets tests prove password logins are refused."""
        self._testinfra: dict[str, Any] = {}
        # a new token per host start: SSH masters of an earlier host on the same alias/address
        # must never be reused (they would hang until ServerAlive gives up)
        self.incarnation = secrets.token_hex(3)

    # ---- connection facts ------------------------------------------------------------------
    @property
    def ssh_key(self) -> Path:
        """Private key accepted for ``admin`` and ``root`` (generated per test session)."""
        return self.lab.key

    @property
    def ssh_config(self) -> Path:
        """``ssh -F`` file: aliases, ProxyCommand into the lab network, key, no host key checks."""
        return self.lab.ssh_config

    @property
    def inventory_path(self) -> Path:
        """Ansible ini inventory holding only this host (group ``lab``)."""
        return self.lab.dir / f"inventory-{self.name}.ini"

    def ssh_options(self) -> list[str]:
        """Extra ssh client options this host needs beyond the ssh_config (none by default)."""
        return []

    def inventory_line(self) -> str:
        common = f"-F {self.ssh_config} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
        return (
            f"{self.name} ansible_host={self.ip} ansible_port={self.port} ansible_user={ADMIN} "
            f"ansible_become=true ansible_ssh_private_key_file={self.ssh_key} "
            f"ansible_ssh_common_args='{common}' ansible_host_key_checking=false "
            # Ansible's own ControlPath (~/.ansible/cp/%C) would be shared by two sessions'
            # 10.77.1.2 (separate hub namespaces, same address): keep masters per session
            f"ansible_control_path_dir={self.lab.dir}/ansible-cp "
            f"ansible_python_interpreter=/usr/bin/python3 lab_lane={self.lane}"
        )

    def ssh_config_block(self) -> str:
        # the address as a pattern too: Ansible and testinfra may connect by ansible_host/IP
        return (f"Host {self.name} {self.ip}\n  HostName {self.ip}\n  Port {self.port}\n"
                f"  ControlPath {self.lab.dir}/cm-{self.name}-{self.incarnation}-%r-%p\n")

    # ---- commands ----------------------------------------------------------------------------
    def ssh_argv(self, user: str = ADMIN, *extra: str) -> list[str]:
        return ["ssh", "-F", str(self.ssh_config), "-l", user, *extra, self.name]

    def run(self, command: str, *, user: str = ADMIN, timeout: float = 60, check: bool = False,
            input: str | None = None) -> Result:
        """Run ``command`` (a shell string) through SSH as ``user``; never hangs past ``timeout``."""
        return self._run_ssh(command, user=user, timeout=timeout, check=check, input=input)

    def _run_ssh(self, command: str, *, user: str = ADMIN, timeout: float = 60, check: bool = False,
                 input: str | None = None, options: tuple[str, ...] = ()) -> Result:
        started = time.monotonic()
        argv = [*self.ssh_argv(user, *options), command]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input,
                                  stdin=None if input is not None else subprocess.DEVNULL)
            rc, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            rc = 124
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = (exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or ""))
            err += f"\n[lab] timed out after {timeout}s"
        result = Result(command, user, rc, out, err, time.monotonic() - started)
        return result.check() if check else result

    def sudo(self, command: str, **kwargs: Any) -> Result:
        """Run ``command`` as root through admin's sudo (the path Ansible's become takes)."""
        return self.run(f"sudo -n sh -c {shlex.quote(command)}", **kwargs)

    def password_login(self, password: str, *, user: str = ADMIN, command: str = "id -un",
                       timeout: float = 30) -> Result:
        """A real SSH password attempt (no key offered, no multiplexed master reused): rc 0
        when sshd accepted ``password``, 255 with "Permission denied" when it refused."""
        with tempfile.TemporaryDirectory(prefix="hcl-askpass-") as folder:
            askpass = Path(folder) / "askpass"
            askpass.write_text('#!/bin/sh\nprintf "%s\\n" "$LAB_PASSWORD"\n')
            askpass.chmod(0o700)
            env = dict(os.environ, SSH_ASKPASS=str(askpass), SSH_ASKPASS_REQUIRE="force",
                       LAB_PASSWORD=password, DISPLAY=os.environ.get("DISPLAY", ":0"))
            argv = ["ssh", "-F", str(self.ssh_config), "-o", "ControlMaster=no", "-o", "ControlPath=none",
                    "-o", "BatchMode=no", "-o", "PubkeyAuthentication=no", "-o", "IdentityFile=none",
                    "-o", "PreferredAuthentications=password,keyboard-interactive",
                    "-o", "NumberOfPasswordPrompts=1", "-l", user, self.name, command]
            started = time.monotonic()
            # own session: without a controlling terminal ssh must use SSH_ASKPASS
            proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
        return Result(f"password login: {command}", user, proc.returncode, proc.stdout, proc.stderr,
                      time.monotonic() - started)

    def put(self, local: Path | str, remote: str, *, user: str = ADMIN, timeout: float = 120) -> None:
        """Copy a local file or directory to ``remote`` (scp -r)."""
        self._scp([str(local), f"{user}@{self.name}:{remote}"], timeout)

    def get(self, remote: str, local: Path | str, *, user: str = ADMIN, timeout: float = 120) -> None:
        self._scp([f"{user}@{self.name}:{remote}", str(local)], timeout)

    def _scp(self, args: list[str], timeout: float) -> None:
        argv = ["scp", "-q", "-r", "-F", str(self.ssh_config), *args]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise LabError(f"scp failed ({proc.returncode}): {' '.join(argv)}\n{proc.stderr}")

    def testinfra(self, user: str = ADMIN) -> Any:
        """A testinfra host over SSH; for ``admin`` every command runs through sudo."""
        if user not in self._testinfra:
            import testinfra

            self._testinfra[user] = testinfra.get_host(
                f"ssh://{user}@{self.name}", ssh_config=str(self.ssh_config), sudo=user != "root",
            )
        return self._testinfra[user]

    def outside(self, argv: list[str], *, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` where an outside client of this host sits (subclasses say where)."""
        raise NotImplementedError

    def tcp_from_outside(self, port: int, timeout: float = 2.0) -> str:
        """Try a TCP connection to ``port`` as an outside client would: "open", "refused",
        "timeout" (a firewall dropped it) or "unreachable"."""
        raise NotImplementedError

    # ---- lifecycle helpers -------------------------------------------------------------------
    def ssh_ready(self) -> bool:
        try:
            return self.run("true", timeout=10).rc == 0
        except OSError:
            return False

    def wait_ssh(self, timeout: float) -> float:
        """Wait until key login as admin works; returns the seconds waited. On failure the
        LabError holds the last attempt's rc and stderr and :meth:`diagnostics`."""
        started = time.monotonic()
        attempts = 0
        while True:
            self.check_alive()
            # LogLevel INFO: what sshd says before refusing a login (pam_nologin's "System is
            # booting up" banner, "Connection closed by ...") is invisible at the config's ERROR
            result = self._run_ssh("true", timeout=10, options=("-o", "LogLevel=INFO"))
            attempts += 1
            if result.rc == 0:
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                stderr = "\n".join(line for line in result.stderr.strip().splitlines()
                                   if not line.startswith("Warning: Permanently added"))
                raise LabError(
                    f"{self.name}: no SSH after {timeout:.0f}s ({attempts} attempts); last attempt: rc {result.rc} "
                    f"after {result.seconds:.1f}s, stderr: {stderr.strip() or '(empty)'}\n{self.diagnostics()}")
            time.sleep(0.2)

    def check_alive(self) -> None:
        """Raise :class:`LabError` when the machine is gone for good (no point in waiting)."""

    def wait_booted(self, timeout: float) -> str:
        """Wait for systemd to finish booting; returns ``running`` or ``degraded`` (+ failed units)."""
        result = self.run("systemctl is-system-running --wait", timeout=timeout)
        state = result.stdout.strip()
        if state not in ("running", "degraded"):
            raise LabError(f"{self.name}: systemd state {state!r} after boot ({result.stderr.strip()})\n{self.diagnostics()}")
        if state == "degraded":
            failed = self.run("systemctl --failed --no-legend --plain", timeout=20).stdout.strip()
            log(f"{self.name}: degraded boot, failed units: {failed}")
            return f"degraded: {failed}"
        return state

    def close_ssh_masters(self) -> None:
        """End multiplexed SSH masters for this host so no ssh process outlives it."""
        for user in (ADMIN, "root"):
            subprocess.run(self.ssh_argv(user, "-O", "exit"), capture_output=True, timeout=10,
                           stdin=subprocess.DEVNULL)
        self._testinfra.clear()

    def diagnostics(self) -> str:
        """Text to append to a failure (console log tail etc.)."""
        return ""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.ip}:{self.port}>"
