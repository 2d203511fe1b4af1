"""One test session's lab: its id, hub namespace, SSH key, ssh_config, inventory, and the
teardown that always runs (fixture finalizers, ``atexit``, SIGTERM/SIGHUP, and a reaper for
sessions that were SIGKILLed).

Why a hub namespace: the host side of every veth lives in ``hcl-<sid>-hub``, not on this
machine. Nothing is added to the machine's interfaces or routing table (a /24 on a host-side
veth would add a route), no sysctl is touched (forwarding between lab hosts is switched on in
the hub's own namespace), and two sessions at once (two developers, or CI and a developer) can
both use 10.77.1.0/24 without clashing. SSH reaches the hosts through a ProxyCommand that
enters the hub namespace (``nsenter --net``) and relays stdio to the host's port 22.

Everything a session creates carries its marker ``hcl-<sid>``: the session folder
``/tmp/hcl-<sid>``, namespace names, nspawn machine names, each host's cgroup (cgroups.py),
supervisor/qemu/ssh command lines and the containers' PID 1 environment; :func:`leftovers`
finds anything that survived.
"""

from __future__ import annotations

import atexit
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.lab import cgroups, timing
from tests.lab.errors import LabError
from tests.lab.remote import RemoteHost
from tests.lab.rootfs import Rootfs
from tests.lab.util import log, pid_alive, pid_cmdline, pid_starttime, run

if TYPE_CHECKING:
    from tests.lab.nspawn import LabHost
    from tests.lab.vm import LabVM

HERE = Path(__file__).resolve().parent
RELAY = HERE / "relay.py"
SESSION_ROOT = Path("/tmp")
MARK_RE = re.compile(r"hcl-([0-9a-f]{6})")
MAX_HOSTS = 250
TCP_PROBE = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), float(sys.argv[3])).close()
    print("open")
except ConnectionRefusedError:
    print("refused")
except TimeoutError:
    print("timeout")
except OSError:
    print("unreachable")
"""

_LABS: weakref.WeakSet[Lab] = weakref.WeakSet()
_signalled = False
_handlers_installed = False


class Lab:
    """A test session's lab. Start hosts with :meth:`start_hosts` / :meth:`start_vm`."""

    def __init__(self, rootfs: Rootfs, sid: str | None = None) -> None:
        reap_stale()
        self.rootfs = rootfs
        self.sid = sid or os.environ.get("HOSTCHECK_LAB_SID") or secrets.token_hex(3)
        if not re.fullmatch(r"[0-9a-f]{6}", self.sid):
            raise LabError(f"lab session id must be 6 hex digits, not {self.sid!r}")
        self.prefix = f"hcl-{self.sid}"
        self.hub = f"{self.prefix}-hub"
        self.dir = SESSION_ROOT / self.prefix
        self.dir.mkdir(mode=0o700)
        (self.dir / "pids").mkdir()
        (self.dir / "owner").write_text(f"{os.getpid()} {pid_starttime(os.getpid())}\n")
        self.key = self.dir / "id_ed25519"
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"hostcheck-lab-{self.sid}", "-f", str(self.key)])
        self.ssh_config = self.dir / "ssh_config"
        self.inventory_path = self.dir / "inventory.ini"
        """Ansible inventory of every host this session has running (group ``lab``)."""
        self._hosts: dict[str, RemoteHost] = {}
        self._lock = threading.RLock()
        self._hub_ready = False
        self._closed = False
        self._last_index = 0
        self._write_connection_files()
        _LABS.add(self)
        _install_teardown_hooks()
        log(f"lab session {self.sid} in {self.dir}")

    # ---- hub network -------------------------------------------------------------------------
    def ensure_hub(self) -> None:
        with self._lock:
            if self._hub_ready:
                return
            run(["ip", "netns", "add", self.hub])
            self.record_netns(self.hub)
            run(["ip", "-n", self.hub, "link", "set", "lo", "up"])
            # namespace-local: routes between lab hosts, never the machine's own forwarding
            run(["ip", "netns", "exec", self.hub, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
            self._hub_ready = True

    @property
    def relay_log(self) -> Path:
        """Errors of every SSH relay of this session (a backgrounded ssh master has no stderr)."""
        return self.dir / "relay.log"

    def proxy_command(self) -> str:
        # the log's path carries the session marker: it lets leftovers() find stray relays
        return f"nsenter --net=/run/netns/{self.hub} /usr/bin/python3 -I -S {RELAY} %h %p {self.relay_log}"

    def hub_exec(self, argv: list[str], *, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside the hub namespace (the lab network's outside)."""
        self.ensure_hub()
        return run(["nsenter", f"--net=/run/netns/{self.hub}", *argv], timeout=timeout, check=False)

    def tcp_probe(self, ip: str, port: int, timeout: float = 2.0) -> str:
        """Connect from the hub to ``ip:port``: "open", "refused" (RST: closed or rejected),
        "timeout" (dropped) or "unreachable"."""
        result = self.hub_exec(["/usr/bin/python3", "-I", "-S", "-c", TCP_PROBE, ip, str(port), str(timeout)],
                               timeout=timeout + 10)
        return result.stdout.strip() or f"error: {result.stderr.strip()}"

    def kill_relays(self, ip: str) -> None:
        """SSH relays to ``ip`` (an ssh master may keep one open after the host is gone)."""
        needle = f"{RELAY} {ip} "
        for pid in _all_pids():
            cmdline = pid_cmdline(pid)
            if needle in cmdline and self.prefix in cmdline:
                _kill(pid)

    # ---- bookkeeping -------------------------------------------------------------------------
    def record_pid(self, label: str, pid: int) -> None:
        (self.dir / "pids" / f"{label}.pid").write_text(f"{pid} {pid_starttime(pid)}\n")

    def record_netns(self, name: str) -> None:
        if not name.startswith(self.prefix):
            raise LabError(f"namespace {name} lacks the session marker {self.prefix}")

    def hosts(self) -> list[RemoteHost]:
        with self._lock:
            return list(self._hosts.values())

    def _write_connection_files(self) -> None:
        with self._lock:
            blocks = [
                "# generated by tests/lab for session " + self.sid,
                *(h.ssh_config_block() for h in self._hosts.values()),
                "Host *",
                f"  IdentityFile {self.key}",
                "  IdentitiesOnly yes",
                "  StrictHostKeyChecking no",
                "  UserKnownHostsFile /dev/null",
                "  LogLevel ERROR",
                "  BatchMode yes",
                "  ConnectTimeout 10",
                "  ServerAliveInterval 5",
                "  ServerAliveCountMax 3",
                "  ControlMaster auto",
                f"  ControlPath {self.dir}/cm-%C",
                "  ControlPersist 60",
                "",
            ]
            _atomic_write(self.ssh_config, "\n".join(blocks))
            lines = ["[lab]", *(h.inventory_line() for h in self._hosts.values()), ""]
            _atomic_write(self.inventory_path, "\n".join(lines))
            for host in self._hosts.values():
                _atomic_write(host.inventory_path, f"[lab]\n{host.inventory_line()}\n")

    def _register(self, host: RemoteHost) -> None:
        with self._lock:
            self._hosts[host.name] = host
            self._write_connection_files()

    def _unregister(self, host: RemoteHost) -> None:
        with self._lock:
            self._hosts.pop(host.name, None)
            host.inventory_path.unlink(missing_ok=True)
            if not self._closed:
                self._write_connection_files()

    def _free_index(self, taken: set[int]) -> int:
        """Next index not in use, preferring ones never used in this session (fresh address)."""
        used = {getattr(h, "index", 0) for h in self._hosts.values()} | taken
        for step in range(MAX_HOSTS):
            index = (self._last_index + step) % MAX_HOSTS + 1
            if index not in used:
                self._last_index = index
                return index
        raise LabError(f"more than {MAX_HOSTS} lab hosts at once")

    # ---- hosts -------------------------------------------------------------------------------
    def start_hosts(self, count: int = 1, **options: Any) -> list[LabHost]:
        """Start ``count`` nspawn hosts in parallel; all or none (a failure stops the others).

        ``options``: ``password_auth`` (bool, default False: sshd refuses passwords),
        ``nspawn_args`` (extra systemd-nspawn arguments), ``boot_timeout`` (seconds).
        """
        from tests.lab.nspawn import LabHost

        if self._closed:
            raise LabError("lab session already closed")
        with self._lock:
            taken: set[int] = set()
            hosts = []
            for _ in range(count):
                index = self._free_index(taken)
                taken.add(index)
                hosts.append(LabHost(self, index, **options))
            for host in hosts:
                self._hosts[host.name] = host
            self._write_connection_files()
        errors: list[BaseException] = []
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=max(1, count)) as pool:
            futures = [pool.submit(h.start) for h in hosts]
            for future in futures:
                exc = future.exception()
                if exc is not None:
                    errors.append(exc)
        if errors:
            self.stop_hosts(hosts)
            raise LabError(f"{len(errors)} of {count} lab hosts failed to start: {errors[0]}") from errors[0]
        timing.record("boot", f"nspawn x{count}", time.monotonic() - started,
                      suite=hosts[0].rootfs.suite if hosts else "")
        return hosts

    def stop_hosts(self, hosts: list[Any]) -> None:
        """Stop hosts (in parallel) and drop them from the inventory."""
        if not hosts:
            return
        with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
            list(pool.map(_stop_quietly, hosts))
        for host in hosts:
            self._unregister(host)

    def start_vm(self, **options: Any) -> LabVM:
        """Boot the qemu TCG VM (~30 s under TCG). ``options`` go to :class:`LabVM`."""
        from tests.lab.vm import LabVM, ensure_vm_image

        image = ensure_vm_image(self.rootfs)
        with self._lock:  # two VMs started at once must not pick the same name
            name = next(n for n in ("labvm", *(f"labvm{i}" for i in range(1, MAX_HOSTS))) if n not in self._hosts)
            vm = LabVM(self, name, image, **options)
            self._register(vm)
        try:
            vm.start()
        except BaseException:
            self.stop_hosts([vm])
            raise
        return vm

    # ---- teardown ----------------------------------------------------------------------------
    def close(self) -> None:
        """Stop everything, delete the namespaces and the session folder; then verify that
        nothing carrying this session's marker is left (LabError if something is)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            hosts = list(self._hosts.values())
        try:
            self.stop_hosts(hosts)
        finally:
            _reap_marker(self.prefix, self.dir)
        left = leftovers(self.sid)
        if left:
            raise LabError(f"lab session {self.sid} left things behind: {left}")
        log(f"lab session {self.sid} closed")


def _stop_quietly(host: Any) -> None:
    try:
        host.stop()
    except Exception as exc:  # keep stopping the others; the leftover check reports what stayed
        print(f"[lab] stopping {host.name} failed: {exc}", file=sys.stderr)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _all_pids() -> list[int]:
    me = os.getpid()
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and int(p.name) != me]


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def marked_pids(prefix: str) -> list[int]:
    """Processes carrying the marker in their command line or environment (a container's
    PID 1 gets it through ``--setenv``)."""
    found = []
    env_needle = f"HOSTCHECK_LAB={prefix}".encode()
    for pid in _all_pids():
        if prefix in pid_cmdline(pid) or env_needle in _environ(pid):
            if pid_alive(pid):
                found.append(pid)
    return found


def leftovers(sid: str) -> list[str]:
    """Everything of session ``sid`` that still exists on this machine, described."""
    prefix = f"hcl-{sid}"
    left: list[str] = []
    netns_dir = Path("/run/netns")
    if netns_dir.exists():
        left += [f"netns {p.name}" for p in netns_dir.iterdir() if p.name.startswith(prefix)]
    left += [f"process {pid}: {pid_cmdline(pid)[:120]}" for pid in marked_pids(prefix)]
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        mounts = []
    left += [f"mount {line.split()[4]}" for line in mounts if prefix in line]
    left += [f"cgroup {folder}" for folder in cgroups.marked(prefix)]
    if (SESSION_ROOT / prefix).exists():
        left.append(f"folder {SESSION_ROOT / prefix}")
    propagate = Path("/run/systemd/nspawn/propagate")
    if propagate.exists():
        left += [f"nspawn propagate dir {p}" for p in propagate.iterdir() if p.name.startswith(prefix)]
    return left


def _reap_marker(prefix: str, folder: Path) -> None:
    """Hard cleanup of everything marked ``prefix``: processes in its namespaces, marked
    processes, namespaces, nspawn's propagate folders, the session folder."""
    netns_dir = Path("/run/netns")
    names = [p.name for p in netns_dir.iterdir() if p.name.startswith(prefix)] if netns_dir.exists() else []
    folders = cgroups.marked(prefix)
    for _ in range(3):
        pids = set(marked_pids(prefix)) | set(cgroups.pids(folders))
        for name in names:
            out = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, timeout=10).stdout
            pids.update(int(p) for p in out.split() if p.isdigit())
        if not pids:
            break
        for pid in pids:
            _kill(pid)
        for pid in pids:
            for _ in range(50):
                if not pid_alive(pid):
                    break
                threading.Event().wait(0.05)
    for name in names:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=10)
    cgroups.remove(folders)
    propagate = Path("/run/systemd/nspawn/propagate")
    if propagate.exists():
        for p in propagate.iterdir():
            if p.name.startswith(prefix):
                shutil.rmtree(p, ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)


def reap_stale() -> list[str]:
    """Clean up after lab sessions whose owner process is gone (SIGKILL, power loss of the
    runner...). Sessions of live owners (another developer's run) are left alone."""
    sids: set[str] = set()
    for entry in SESSION_ROOT.glob("hcl-*"):
        match = MARK_RE.fullmatch(entry.name)
        if match:
            sids.add(match.group(1))
    netns_dir = Path("/run/netns")
    if netns_dir.exists():
        for entry in netns_dir.iterdir():
            match = MARK_RE.match(entry.name)
            if match:
                sids.add(match.group(1))
    for folder in cgroups.marked("hcl-"):
        match = MARK_RE.match(folder.name)
        if match:
            sids.add(match.group(1))
    reaped = []
    for sid in sorted(sids):
        owner = SESSION_ROOT / f"hcl-{sid}" / "owner"
        try:
            pid_text, start = owner.read_text().split()
            if pid_alive(int(pid_text)) and pid_starttime(int(pid_text)) == start:
                continue
        except (OSError, ValueError):
            # no owner file: a session in its first milliseconds, or one whose folder went
            # first; only namespaces without any process of a live owner get here
            if (SESSION_ROOT / f"hcl-{sid}").exists():
                continue
        log(f"reaping stale lab session {sid}")
        _reap_marker(f"hcl-{sid}", SESSION_ROOT / f"hcl-{sid}")
        reaped.append(sid)
    return reaped


def close_all() -> None:
    for lab in list(_LABS):
        try:
            lab.close()
        except Exception as exc:
            print(f"[lab] teardown of session {lab.sid}: {exc}", file=sys.stderr)


def _on_signal(signum: int, frame: Any) -> None:
    """First SIGTERM/SIGHUP: unwind like ^C so pytest runs every fixture finalizer.
    A second one: tear down right here and exit."""
    global _signalled
    if _signalled:
        close_all()
        os._exit(128 + signum)
    _signalled = True
    raise KeyboardInterrupt(f"lab: got signal {signum}")


def _install_teardown_hooks() -> None:
    global _handlers_installed
    if _handlers_installed:
        return
    _handlers_installed = True
    atexit.register(close_all)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                signal.signal(sig, _on_signal)
