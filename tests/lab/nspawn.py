"""Lane 1: a Debian 12 host as a systemd-nspawn container with systemd as PID 1.

Each host gets
- its own network namespace ``hcl-<sid>-<i>``: a veth ``host0`` 10.77.i.2/24 whose peer
  ``ve-<i>`` 10.77.i.1/24 sits in the session's hub namespace (never on this machine), plus
  slirp4netns ``tap0`` (10.0.2.100, gateway 10.0.2.2, DNS 10.0.2.3) for the Debian mirror;
- an overlay root (lower: the cached rootfs; upper: a per-host folder) mounted inside a
  private mount namespace of its supervisor, so no mount ever appears on this machine;
- per-host SSH host keys, machine-id, hostname, authorized keys and a random admin password.

Flags come from ../shared/research/lab-hosts.md: ``--register=no --keep-unit`` (no system
bus here), ``CAP_NET_ADMIN`` + ``SYSTEMD_NSPAWN_API_VFS_WRITABLE=network`` (nft and net.*
sysctls inside a namespace given by path); exit code 133 = the container rebooted itself.

Each host runs in a cgroup of its own, ``hcl-<sid>-<i>`` (see cgroups.py for why: with
``--keep-unit`` all containers started by one process otherwise share ``payload/``, and their
systemds then break each other's units at boot).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from tests.lab import cgroups
from tests.lab.errors import LabError
from tests.lab.remote import ADMIN, RemoteHost
from tests.lab.rootfs import ADMIN_UID, CGROUP2_ONLY, ensure_rootfs
from tests.lab.util import log, pid_alive, run, shadow_hash, wait_for

if TYPE_CHECKING:
    from tests.lab.session import Lab

HERE = Path(__file__).resolve().parent
SUPERVISOR = HERE / "supervise.sh"
SSHD_LAB_DROPIN = "etc/ssh/sshd_config.d/90-lab.conf"


def sshd_lab_dropin(password_auth: bool) -> str:
    """The lab's only sshd setting. 90- so that any drop-in a role writes (lower number)
    wins: sshd keeps the first value it reads for a keyword."""
    value = "yes" if password_auth else "no"
    return (
        "# hostcheck lab: key-only logins, as on a cloud server. Role drop-ins sort first and win.\n"
        f"PasswordAuthentication {value}\nKbdInteractiveAuthentication {value}\n"
    )


class LabHost(RemoteHost):
    """A started nspawn lab host (see the module docstring for its wiring)."""

    lane = "nspawn"

    def __init__(self, lab: Lab, index: int, *, password_auth: bool = False,
                 nspawn_args: tuple[str, ...] = (), boot_timeout: float = 60, suite: str | None = None) -> None:
        super().__init__(lab, f"lab{index}")
        self.rootfs = lab.rootfs if suite in (None, lab.rootfs.suite) else ensure_rootfs(suite=suite)
        """The tree this host boots: the session's (Debian 12) unless ``suite`` names another."""
        self.index = index
        self.ip = f"10.77.{index}.2"
        self.gateway = f"10.77.{index}.1"
        self.netns = f"{lab.prefix}-{index}"
        self.machine = f"{lab.prefix}-{index}"
        self.password_auth = password_auth
        self.nspawn_args = nspawn_args
        self.boot_timeout = boot_timeout
        self.admin_password = secrets.token_urlsafe(12)
        self.workdir = lab.dir / self.name
        self.upper = self.workdir / "upper"
        self.console_log = self.workdir / "console.log"
        self.status_file = self.workdir / "status"
        self.supervisor: subprocess.Popen[bytes] | None = None
        self.slirp: subprocess.Popen[bytes] | None = None
        self.cgroups: list[Path] = []
        """This host's own cgroup folders (one per hierarchy systemd tracks units in)."""
        self.cgroup_problem = ""
        self.timings: dict[str, float] = {}
        self.boot_state = ""
        self.last_status: list[str] = []
        """The supervisor's "boot N PID" / "exit N RC" lines, kept after stop()."""

    # ---- start -------------------------------------------------------------------------------
    def start(self) -> LabHost:
        t0 = time.monotonic()
        try:
            self._stage()
            t1 = time.monotonic()
            self._network()
            t2 = time.monotonic()
            self._boot()
            t3 = time.monotonic()
            self.wait_ssh(self.boot_timeout)
            t4 = time.monotonic()
            self.boot_state = self.wait_booted(self.boot_timeout)
            t5 = time.monotonic()
        except BaseException:
            self.stop()
            raise
        self.timings = {"stage": t1 - t0, "network": t2 - t1, "spawn": t3 - t2, "to_ssh": t4 - t3,
                        "to_booted": t5 - t4, "total": t5 - t0}
        log(f"{self.name} up: " + ", ".join(f"{k} {v:.2f}s" for k, v in self.timings.items()))
        return self

    def _stage(self) -> None:
        """Write per-host files into the (not yet mounted) overlay upper layer."""
        lower = self.rootfs.base
        for sub in ("upper", "work", "merged"):
            (self.workdir / sub).mkdir(parents=True)
        pub = self.lab.key.with_suffix(".pub").read_text()
        files: list[tuple[str, str | bytes, int, int, int]] = [
            ("etc/hostname", f"{self.name}\n", 0o644, 0, 0),
            ("etc/hosts", (lower / "etc/hosts").read_text() + f"127.0.1.1\t{self.name}\n", 0o644, 0, 0),
            ("etc/machine-id", uuid.uuid4().hex + "\n", 0o444, 0, 0),
            (SSHD_LAB_DROPIN, sshd_lab_dropin(self.password_auth), 0o644, 0, 0),
            ("root/.ssh/authorized_keys", pub, 0o600, 0, 0),
            (f"home/{ADMIN}/.ssh/authorized_keys", pub, 0o600, ADMIN_UID, ADMIN_UID),
            ("etc/shadow", _shadow_with_password(lower / "etc/shadow", ADMIN, self.admin_password), 0o640, 0, 42),
        ]
        for kind in ("ed25519", "ecdsa"):
            # unique host keys per host; RSA (0.5 s to generate) stays the image's
            keyfile = self.workdir / f"ssh_host_{kind}_key"
            run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", f"root@{self.name}", "-f", str(keyfile)])
            files.append((f"etc/ssh/ssh_host_{kind}_key", keyfile.read_bytes(), 0o600, 0, 0))
            files.append((f"etc/ssh/ssh_host_{kind}_key.pub", keyfile.with_suffix(".pub").read_bytes(), 0o644, 0, 0))
            keyfile.unlink()
            keyfile.with_suffix(".pub").unlink()
        ssh_dir = self.upper / f"home/{ADMIN}/.ssh"
        for rel, content, mode, uid, gid in files:
            _stage_file(self.upper, lower, rel, content, mode, uid, gid)
        # ~/.ssh does not exist in the image: create it with the owner sshd's StrictModes wants
        for folder in (ssh_dir, self.upper / "root/.ssh"):
            os.chmod(folder, 0o700)
        os.chown(ssh_dir, ADMIN_UID, ADMIN_UID)

    def _network(self) -> None:
        lab = self.lab
        lab.ensure_hub()
        ns = self.netns
        run(["ip", "netns", "add", ns])
        lab.record_netns(ns)
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        # created directly inside the two namespaces: no interface ever appears on this machine
        run(["ip", "-n", lab.hub, "link", "add", f"ve-{self.index}", "type", "veth",
             "peer", "name", "host0", "netns", ns])
        run(["ip", "-n", lab.hub, "addr", "add", f"{self.gateway}/24", "dev", f"ve-{self.index}"])
        run(["ip", "-n", lab.hub, "link", "set", f"ve-{self.index}", "up"])
        run(["ip", "-n", ns, "addr", "add", f"{self.ip}/24", "dev", "host0"])
        run(["ip", "-n", ns, "link", "set", "host0", "up"])
        # other lab hosts are reached through the hub (it forwards inside its own namespace)
        run(["ip", "-n", ns, "route", "add", "10.77.0.0/16", "via", self.gateway])
        read_fd, write_fd = os.pipe()
        try:
            self.slirp = subprocess.Popen(
                ["slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback",
                 f"--ready-fd={write_fd}", "--netns-type=path", f"/run/netns/{ns}", "tap0"],
                stdin=subprocess.DEVNULL, stdout=open(self.workdir / "slirp.log", "wb"),
                stderr=subprocess.STDOUT, pass_fds=(write_fd,), start_new_session=True,
            )
            os.close(write_fd)
            write_fd = -1
            lab.record_pid(f"{self.name}-slirp", self.slirp.pid)
            ready = _read_with_timeout(read_fd, 10)
        finally:
            if write_fd >= 0:
                os.close(write_fd)
            os.close(read_fd)
        if ready != b"1":
            raise LabError(f"{self.name}: slirp4netns not ready: {(self.workdir / 'slirp.log').read_text(errors='replace')}")

    def _boot(self) -> None:
        self.cgroups, self.cgroup_problem = cgroups.create(self.machine)
        if self.cgroup_problem:
            log(f"{self.name}: no cgroup of its own ({self.cgroup_problem}): parallel boots may break each other")
        argv = [
            "unshare", "--mount", "--propagation", "private",
            str(SUPERVISOR), str(self.rootfs.base), str(self.upper), str(self.workdir / "work"),
            str(self.workdir / "merged"), str(self.status_file), ":".join(str(c) for c in self.cgroups), "--",
            "systemd-nspawn", "--quiet", "-D", str(self.workdir / "merged"), "-M", self.machine,
            f"--hostname={self.name}", "--register=no", "--keep-unit", "--boot",
            f"--network-namespace-path=/run/netns/{self.netns}", "--capability=CAP_NET_ADMIN",
            "--resolv-conf=off", "--timezone=off", "--link-journal=no",
            # the container's console output (systemd's boot status, [FAILED] units) goes to
            # console.log; "passive" left it empty, so start failures showed nothing
            "--console=read-only",
            # lets the teardown test find a container's PID 1 even after its namespace is gone
            f"--setenv=HOSTCHECK_LAB={self.lab.prefix}",
            *self.nspawn_args,
        ]
        env = dict(os.environ, SYSTEMD_NSPAWN_API_VFS_WRITABLE="network")
        if self.rootfs.suite in CGROUP2_ONLY:
            env["SYSTEMD_NSPAWN_UNIFIED_HIERARCHY"] = "1"
        # own session: a terminal's ^C must not reach nspawn (it would reboot the container)
        self.supervisor = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=open(self.console_log, "wb"),
                                           stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.lab.record_pid(f"{self.name}-supervisor", self.supervisor.pid)

    # ---- inspection --------------------------------------------------------------------------
    def boots(self) -> int:
        """How many times the container has been started by its supervisor (1 + reboots)."""
        try:
            return sum(1 for line in self.status_file.read_text().splitlines() if line.startswith("boot "))
        except OSError:
            return 0

    def leader_pid(self) -> int:
        """PID (on this machine) of the container's systemd."""
        for pid in _netns_pids(self.netns):
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("NSpid:") and line.split()[-1] == "1" and len(line.split()) > 2:
                    return pid
        raise LabError(f"{self.name}: container is not running")

    @property
    def root(self) -> Path:
        """The container's root as its systemd sees it (read or write files directly)."""
        return Path(f"/proc/{self.leader_pid()}/root")

    def outside(self, argv: list[str], *, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` in the hub namespace: where an outside client of the lab network sits."""
        return self.lab.hub_exec(argv, timeout=timeout)

    def tcp_from_outside(self, port: int, timeout: float = 2.0) -> str:
        return self.lab.tcp_probe(self.ip, port, timeout)

    def ssh_config_block(self) -> str:
        return (super().ssh_config_block() +
                f"  ProxyCommand {self.lab.proxy_command()}\n")

    def check_alive(self) -> None:
        sup = self.supervisor
        if sup is not None and sup.poll() is not None:
            raise LabError(f"{self.name}: the container's supervisor exited (rc {sup.returncode}) before SSH came up\n"
                           f"{self.diagnostics()}")

    def diagnostics(self) -> str:
        """Why a host is not (yet) usable: supervisor, PID 1, systemd's state, failed units,
        jobs and journal (entered through the container's namespaces, machinectl-free),
        console, slirp4netns and relay errors."""
        out = [f"=== {self.name} diagnostics ({self.ip}, machine {self.machine}) ==="]
        sup = self.supervisor
        state = "not started" if sup is None else "running" if sup.poll() is None else f"exited rc {sup.returncode}"
        boots = " | ".join(_read(self.status_file).splitlines()) or "no boot recorded"
        out.append(f"supervisor: {state} ({boots})")
        out.append("cgroup: " + (", ".join(str(c) for c in self.cgroups) or "none")
                   + (f" (isolation problem: {self.cgroup_problem})" if self.cgroup_problem else ""))
        try:
            leader: int | None = self.leader_pid()
        except (LabError, OSError, subprocess.SubprocessError):
            leader = None
        if leader is None:
            out.append("PID 1 (systemd): NOT running")
            journal = self.upper / "var/log/journal"
            out.append(_journal_from_files([journal]))
        else:
            root = Path(f"/proc/{leader}/root")
            nologin = (root / "run/nologin").exists()
            out.append(f"PID 1 (systemd): alive as pid {leader}; /run/nologin "
                       + ("PRESENT: PAM refuses non-root logins (systemd-user-sessions.service has not run or failed)"
                          if nologin else "absent"))
            out.append(_inside(leader, SYSTEMD_STATE))
            warnings = _inside(leader, f"{JOURNALCTL} -p warning -n 400")
            if warnings.startswith("("):  # could not run journalctl in there: read the files
                out.append(_journal_from_files([root / "run/log/journal", root / "var/log/journal"]))
            else:
                out += ["--- journal: warnings and worse (repeats folded) ---", _fold(warnings, 20),
                        "--- journal: last lines (repeats folded) ---",
                        _fold(_inside(leader, f"{JOURNALCTL} -n 200"), 20)]
        console = _strip_ansi(_read(self.console_log)).splitlines()
        out.append(f"--- console (last lines of {self.console_log.name}) ---")
        out += [line for line in console if line.strip()][-20:] or ["(empty)"]
        slirp = _read(self.workdir / "slirp.log").strip()
        if slirp:
            out += ["--- slirp4netns ---", *slirp.splitlines()[-5:]]
        relay = [line for line in _read(self.lab.relay_log).splitlines() if f" {self.ip}:" in line]
        out += ["--- relay errors ---", *(relay[-10:] or ["(none)"])]
        return "\n".join(out)

    # ---- lifecycle ---------------------------------------------------------------------------
    def reboot(self, timeout: float = 60) -> None:
        """``systemctl reboot`` inside; the supervisor restarts nspawn (exit 133) on the same root."""
        before = self.boots()
        self.close_ssh_masters()
        self.sudo("systemctl reboot", timeout=15)
        wait_for(f"{self.name} to restart", lambda: self.boots() > before, timeout)
        self.wait_ssh(timeout)
        self.boot_state = self.wait_booted(timeout)

    def stop(self) -> None:
        """Halt the container and remove everything it used. Safe to call twice."""
        try:
            self.close_ssh_masters()
        except (OSError, subprocess.SubprocessError):
            pass
        sup = self.supervisor
        if sup is not None and sup.poll() is None:
            sup.send_signal(signal.SIGTERM)  # -> nspawn -> clean halt (~2 s)
            try:
                sup.wait(timeout=15)
            except subprocess.TimeoutExpired:
                log(f"{self.name}: no clean halt within 15 s, killing")
        # whatever is left (a hung halt, a SIGKILLed supervisor) dies hard
        if self.netns and Path(f"/run/netns/{self.netns}").exists():
            for pid in _netns_pids(self.netns):
                _kill(pid)
        if sup is not None:
            for pid in _children(sup.pid):
                _kill(pid)
            _kill(sup.pid)
            sup.wait(timeout=10)
        self.lab.kill_relays(self.ip)
        if self.slirp is not None:
            if self.slirp.poll() is None:
                self.slirp.terminate()
                try:
                    self.slirp.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.slirp.kill()
                    self.slirp.wait(timeout=5)
        for pid in cgroups.pids(self.cgroups):  # anything that left the netns but not the cgroup
            _kill(pid)
        if Path(f"/run/netns/{self.netns}").exists():
            wait_for(f"{self.netns} to empty", lambda: not _netns_pids(self.netns) or None, 10, 0.05)
            run(["ip", "netns", "delete", self.netns], check=False)
        stuck = cgroups.remove(self.cgroups)
        if stuck:
            log(f"{self.name}: cgroups not removed: {stuck}")
        try:
            self.last_status = self.status_file.read_text().splitlines()
        except OSError:
            self.last_status = []
        log(f"{self.name} stopped: {self.last_status}")
        propagate = Path("/run/systemd/nspawn/propagate") / self.machine
        if propagate.exists():
            shutil.rmtree(propagate, ignore_errors=True)
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.supervisor = None
        self.slirp = None


JOURNALCTL = "journalctl -b -q --no-pager -o short-monotonic"
SYSTEMD_STATE = (
    'echo "is-system-running: $(systemctl is-system-running)"; '
    "echo '--- failed units'; systemctl --failed --no-legend --plain --no-pager; "
    "echo '--- queued jobs (what boot still waits for)'; systemctl list-jobs --no-legend --no-pager | head -n 15; "
    'echo "--- ssh.service: $(systemctl is-active ssh.service)"'
)
JOURNAL_KEY_RE = re.compile(r"^\[\s*[\d.]+\]\s+\S+\s+|\[\d+\]")


def _fold(text: str, keep: int) -> str:
    """The last ``keep`` distinct journal lines, repeats (same text but for time and pid,
    e.g. sshd refusing every retry) shown once with a count."""
    counts: dict[str, int] = {}
    last: dict[str, str] = {}
    for line in text.splitlines():
        key = JOURNAL_KEY_RE.sub("", line)
        counts[key] = counts.get(key, 0) + 1
        last.pop(key, None)  # re-insert: order by latest occurrence
        last[key] = line
    lines = [line + (f"   [x{counts[key]}]" if counts[key] > 1 else "") for key, line in last.items()]
    return "\n".join(lines[-keep:]) or "(empty)"


ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


def _strip_ansi(text: str) -> str:
    return ANSI_RE.sub("", text)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _inside(leader: int, script: str, timeout: float = 15) -> str:
    """Run ``script`` in all of the container's namespaces (what machinectl shell would do,
    without a system bus). A hung systemctl is cut off by ``timeout``; whatever it printed
    before is kept."""
    try:
        proc = subprocess.run(["nsenter", "-t", str(leader), "-a", "/bin/sh", "-c", script], capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return f"{partial.rstrip()}\n(inside the container: no answer within {timeout:.0f}s)"
    except OSError as exc:
        return f"(cannot enter the container: {exc})"
    err = proc.stderr.strip()
    return (proc.stdout.rstrip() + (f"\n(stderr: {err})" if err else "")).strip()


def _journal_from_files(folders: list[Path]) -> str:
    """The container's journal read from its files with this machine's journalctl."""
    existing = [f for f in folders if f.is_dir()]
    if not existing or shutil.which("journalctl") is None:
        return "--- journal: no journal files to read ---"
    argv = ["journalctl", "-q", "--no-pager", "-o", "short-monotonic", "-n", "30"]
    for folder in existing:
        argv.append(f"--file={folder}/*/*.journal")
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=15, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"--- journal: {exc} ---"
    return "--- journal (from its files) ---\n" + (proc.stdout.strip() or proc.stderr.strip() or "(empty)")


def _netns_pids(name: str) -> list[int]:
    result = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, timeout=10)
    return [int(p) for p in result.stdout.split() if p.isdigit()]


def _children(pid: int) -> list[int]:
    """All descendants of ``pid`` (deepest first)."""
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []

    def walk(p: int) -> None:
        for child in kids.get(p, []):
            walk(child)
            out.append(child)

    walk(pid)
    return out


def _kill(pid: int) -> None:
    if pid_alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _read_with_timeout(fd: int, timeout: float) -> bytes:
    import select

    ready, _, _ = select.select([fd], [], [], timeout)
    return os.read(fd, 1) if ready else b""


def _stage_file(upper: Path, lower: Path, rel: str, content: str | bytes, mode: int, uid: int, gid: int) -> None:
    """Create ``upper/rel``; parent folders copy their owner and mode from the lower layer,
    because an upper folder's attributes replace the lower one's in the merged view."""
    parts = Path(rel).parts
    for depth in range(1, len(parts)):
        folder = upper.joinpath(*parts[:depth])
        if folder.exists():
            continue
        folder.mkdir()
        source = lower.joinpath(*parts[:depth])
        if source.is_dir():
            st = source.stat()
            os.chown(folder, st.st_uid, st.st_gid)
            os.chmod(folder, stat.S_IMODE(st.st_mode))
    path = upper / rel
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    os.chown(path, uid, gid)
    os.chmod(path, mode)


def _shadow_with_password(shadow: Path, user: str, password: str) -> str:
    hashed = shadow_hash(password)
    lines = []
    for line in shadow.read_text().splitlines():
        fields = line.split(":")
        if fields[0] == user:
            fields[1] = hashed
        lines.append(":".join(fields))
    return "\n".join(lines) + "\n"
